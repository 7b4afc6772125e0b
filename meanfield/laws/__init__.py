"""The laws of a block's parameters: unit laws μ_0 (Gaussian, non-centred, a sampler,
the attention head's) and, in `meanfield.laws.depth`, laws across depth (i.i.d.,
Brownian, fractional Brownian, smooth).
"""

from . import unit as unit
from .unit import AbstractLaw as AbstractLaw
from .unit import AbstractGaussianLaw as AbstractGaussianLaw
from .unit import TwoLayerGaussianLaw as TwoLayerGaussianLaw
from .unit import TwoLayerNonCentredLaw as TwoLayerNonCentredLaw
from .unit import SamplerLaw as SamplerLaw
from .unit import MatrixGaussianLaw as MatrixGaussianLaw
from .unit import PerceptronGaussianLaw as PerceptronGaussianLaw
from .unit import DenseGaussianLaw as DenseGaussianLaw
from . import attention as attention
from .attention import AttentionGaussianLaw as AttentionGaussianLaw
