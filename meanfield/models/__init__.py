"""The finite networks: the ResNet on the engine (`ResNet`), the matrix ResNet of the
neural SDE (`matrix_resnet`), res-1 classifiers, plain and residual networks (of one
width, or widening with shortcuts: `StagedClassifier`), and the networks on an embedding
(`Embedding`; the two-layer `Perceptron` and the `DeepEmbeddedResNet`), and the pre-LN
`Transformer` parametrised by a table (`meanfield.parametrisation`). Their training
is in `meanfield.training`, their limits in `meanfield.limits`.
"""

from . import resnet as resnet
from .resnet import ResNet as ResNet
from . import matrix as matrix
from .matrix import matrix_resnet as matrix_resnet
from . import res1 as res1
from .res1 import Res1Classifier as Res1Classifier
from . import plain as plain
from .plain import weight_gain as weight_gain
from .plain import LayeredNet as LayeredNet
from .plain import Classifier as Classifier
from .plain import teacher_task as teacher_task
from . import staged as staged
from .staged import StagedClassifier as StagedClassifier
from . import embedding as embedding
from .embedding import inner_d as inner_d
from .embedding import norm_d as norm_d
from .embedding import Embedding as Embedding
from .embedding import sample_units as sample_units
from . import perceptron as perceptron
from .perceptron import Perceptron as Perceptron
from . import deep_embedded as deep_embedded
from .deep_embedded import DeepEmbeddedResNet as DeepEmbeddedResNet
from .deep_embedded import padded_units as padded_units
from . import transformer as transformer
from .transformer import Transformer as Transformer
