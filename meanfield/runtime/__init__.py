"""Running: seeds over devices (`shard_seeds`), grid points over devices and processes
(`distribution`), the persistent compilation cache, the
JAX releases known to compute wrong results, the machine's memory, signals, and the
error a bad input raises.
"""

from . import errors as errors
from .errors import StudyInputError as StudyInputError
from . import memory as memory
from .memory import env_limit as env_limit
from .memory import available_memory as available_memory
from . import releases as releases
from .releases import KnownBadRelease as KnownBadRelease
from .releases import KnownBadReleaseError as KnownBadReleaseError
from .releases import check_release as check_release
from .releases import warn_on_import as warn_on_import
from . import compilation as compilation
from .compilation import enable_compilation_cache as enable_compilation_cache
from .compilation import disable_compilation_cache as disable_compilation_cache
from .compilation import CompileCounter as CompileCounter
from .compilation import host_key as host_key
from . import sharding as sharding
from .sharding import seed_mesh as seed_mesh
from .sharding import disable_jit_active as disable_jit_active
from .sharding import shard_seeds as shard_seeds
from .sharding import SeedProgram as SeedProgram
from .sharding import gather_processes as gather_processes
from .sharding import default_devices as default_devices
from . import distribution as distribution
from .distribution import on_devices as on_devices
from .distribution import map_on_devices as map_on_devices
from .distribution import start_processes as start_processes
from . import interrupt as interrupt
from .interrupt import Interrupted as Interrupted
from .interrupt import finished_points as finished_points
from .interrupt import stop_on_signals as stop_on_signals
