"""What a network does at initialisation and in training: phases in depth
(`critical_beta`, `depth_ratios`), signal propagation (`simulate_response`), training
regimes (`regime_diagnostics`), Chaintron's scaling criteria on the two-layer perceptron
(`criteria_rates`), the regularity of trained weights (`estimate_hurst`) and the
coordinate check of a Transformer (`coordinates`, `meanfield.diagnostics.coord_check`) and
whether its layers learn lazily (`nonlinear_fractions`).
"""

from . import phases as phases
from .phases import forward_bounds as forward_bounds
from .phases import ScaledPerceptronParams as ScaledPerceptronParams
from .phases import ScaledPerceptronBlock as ScaledPerceptronBlock
from .phases import perceptron_resnet as perceptron_resnet
from .phases import DepthRatios as DepthRatios
from .phases import depth_ratios as depth_ratios
from .phases import FlowIdentity as FlowIdentity
from .phases import gradient_flow_identity as gradient_flow_identity
from .phases import ratio_draw as ratio_draw
from .phases import median_log_slope as median_log_slope
from .phases import zero_crossing as zero_crossing
from .phases import critical_beta as critical_beta
from . import signal_propagation as signal_propagation
from .signal_propagation import SimulatedKernels as SimulatedKernels
from .signal_propagation import simulate_response as simulate_response
from . import regimes as regimes
from .regimes import ScaledBlock as ScaledBlock
from .regimes import Scalar as Scalar
from .regimes import RegimeDiagnostics as RegimeDiagnostics
from .regimes import feature_changes as feature_changes
from .regimes import regime_diagnostics as regime_diagnostics
from .regimes import predicted_exponents as predicted_exponents
from .regimes import predicted_regime as predicted_regime
from . import criteria as criteria
from .criteria import CriteriaRates as CriteriaRates
from .criteria import criteria_rates as criteria_rates
from . import regularity as regularity
from .regularity import HurstEstimate as HurstEstimate
from .regularity import variogram as variogram
from .regularity import estimate_hurst as estimate_hurst
from . import coord_check as coord_check
from .coord_check import coordinates as coordinates
from . import laziness as laziness
from .laziness import nonlinear_fractions as nonlinear_fractions
