"""Training: the one gradient-descent loop (`gd_loop`, any optax optimiser) and each
model's training on it: `train` (a `ResNet`), and in their modules
`meanfield.training.perceptron.train`, `meanfield.training.deep_embedded.train`,
`train_classifier` (plain networks), `train_res1`, `fit_mlp` (a ReLU network fitted
to a function, `meanfield.training.approximation`) and the Transformer's Adam per
parametrisation group (`meanfield.training.transformer`).
"""

from . import loop as loop
from .loop import squared_loss as squared_loss
from .loop import gd_loop as gd_loop
from . import resnet as resnet
from .resnet import mean_ode_sgd as mean_ode_sgd
from .resnet import Gradients as Gradients
from .resnet import loss_and_gradients as loss_and_gradients
from .resnet import TrainResult as TrainResult
from .resnet import train as train
from . import perceptron as perceptron
from . import deep_embedded as deep_embedded
from . import plain as plain
from .plain import train_classifier as train_classifier
from . import res1 as res1
from .res1 import Res1Training as Res1Training
from .res1 import train_res1 as train_res1
from . import approximation as approximation
from .approximation import fit_mlp as fit_mlp
from . import transformer as transformer
