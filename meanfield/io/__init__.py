"""Input and output: a study's results (`load_results`, `StudyResults`), data sets
(the bundled digits, a user's files; text for language modelling, `load_text`) and the
figures' helpers.
"""

from . import results as results
from .results import StudyResults as StudyResults
from .results import read_results_json as read_results_json
from .results import load_results as load_results
from . import datasets as datasets
from .datasets import ImageDataset as ImageDataset
from .datasets import load_digits as load_digits
from .datasets import DataFileError as DataFileError
from .datasets import sha256_file as sha256_file
from .datasets import files_sha256 as files_sha256
from .datasets import npz_headers as npz_headers
from .datasets import npz_array as npz_array
from .datasets import load_images as load_images
from . import text as text
from .text import TextCorpus as TextCorpus
from .text import load_text as load_text
from .text import batches as batches
from . import plotting as plotting
from .plotting import show as show
from .plotting import cell_edges as cell_edges
from .plotting import series_by as series_by
from .plotting import size_ticks as size_ticks
from .plotting import log_spread as log_spread
from .plotting import loglog_series as loglog_series
from .plotting import reference_floor as reference_floor
from .plotting import layout as layout
from .plotting import save_figure as save_figure
