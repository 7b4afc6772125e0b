"""Depth laws: how the layer weights V_1..V_L vary along depth (docs: Mathematics §4).

One law per file: `BrownianLaw` (the SDE row), `FractionalBrownianLaw` (fBm with
Hurst index H), `SmoothGPLaw` (a Gaussian process in depth, the ODE row) and
`IIDGaussianLaw` / `IIDRademacherLaw` (uncoupled). The path laws sample one realisation
on [0, 1] and
read every depth's weights off it (`AbstractPathLaw`).
"""

from .base import AbstractDepthLaw as AbstractDepthLaw
from .base import AbstractIncrementLaw as AbstractIncrementLaw
from .base import AbstractPathLaw as AbstractPathLaw
from .brownian import BrownianLaw as BrownianLaw
from .fbm import FractionalBrownianLaw as FractionalBrownianLaw
from .fbm import davies_harte_fgn as davies_harte_fgn
from .fbm import fbm_cholesky as fbm_cholesky
from .fbm import fbm_covariance as fbm_covariance
from .fbm import fbm_davies_harte as fbm_davies_harte
from .iid import IIDGaussianLaw as IIDGaussianLaw
from .iid import IIDRademacherLaw as IIDRademacherLaw
from .smooth import SmoothGPLaw as SmoothGPLaw
from .smooth import SmoothPath as SmoothPath
