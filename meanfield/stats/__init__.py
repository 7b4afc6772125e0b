"""Statistics: summaries with explosions set apart, log-log and rate fits with bootstrap
intervals over independent draws, two arms compared (`difference_interval`, Welch's
interval over each arm's draws), learning-rate transfer (`optimal_lr`, `drift`), and the
verdicts computed from them.
"""

from . import fits as fits
from .fits import split_exploded as split_exploded
from .fits import exploded_draws as exploded_draws
from .fits import summarize as summarize
from .fits import fit_values as fit_values
from .fits import line_fit as line_fit
from .fits import fit_loglog as fit_loglog
from .fits import fit_points as fit_points
from .fits import judge_theory as judge_theory
from .fits import theory_inside as theory_inside
from .fits import theory_verdict as theory_verdict
from .fits import fit_verdict as fit_verdict
from .fits import verdict_text as verdict_text
from .fits import exponent_theory as exponent_theory
from .fits import exponent_verdict as exponent_verdict
from .fits import THEORY_TOLERANCE as THEORY_TOLERANCE
from .fits import parabola_argmax as parabola_argmax
from .fits import parabola_argmax_interval as parabola_argmax_interval
from .fits import fixed_text as fixed_text
from .fits import interval_text as interval_text
from .fits import excluded_warning as excluded_warning
from . import rate_law as rate_law
from .rate_law import fit_rate_sum as fit_rate_sum
from .rate_law import fit_rate_law as fit_rate_law
from .rate_law import optimal_shape as optimal_shape
from . import joint_law as joint_law
from .joint_law import fit_depth_law as fit_depth_law
from .joint_law import fit_depth_width_law as fit_depth_width_law
from . import compare as compare
from .compare import difference_interval as difference_interval
from .compare import mean_interval as mean_interval
from .compare import slope_interval as slope_interval
from .compare import lower_arm as lower_arm
from . import transfer as transfer
from .transfer import optimal_lr as optimal_lr
from .transfer import drift as drift
