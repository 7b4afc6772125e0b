"""The names the command line offers from registries that are built with JAX (the
activations, the built-in texts, the response's methods, the res1 optimisers), written
here as plain text: a study's options (`studies/NAME/options.py`) and the command line's
refusals then need no JAX. tests/test_cli_start.py checks each against its registry."""

# meanfield.blocks.activations.ACTIVATIONS, in its order
ACTIVATIONS = ("relu", "tanh", "erf", "gelu", "softplus", "sigmoid", "leaky_relu", "identity")
# meanfield.io.text.TEXTS: the standard library's source, Python's help topics
TEXTS = ("stdlib", "docs")
# meanfield.diagnostics.signal_propagation.METHODS
RESPONSE_METHODS = ("gaussian-identity", "full")
# meanfield.training.res1.OPTIMIZERS
RES1_OPTIMIZERS = ("adam", "sgd")
# meanfield.training.approximation.ARCHITECTURES: the deep networks of `approximation`
ARCHITECTURES = ("plain", "residual", "residual-norm")
# meanfield.diagnostics.phases.LOSSES: the losses of `phases`' gradients
PHASE_LOSSES = ("squared", "readout")
