"""The error a study's bad input raises (`StudyInputError`): defined here, below every
layer that refuses input, so that the data sets (`meanfield.io`) and the machine's
limits (`meanfield.runtime.memory`) refuse in the same one line as the studies."""


class StudyInputError(ValueError):
    """Bad input to a study: reported as one line, exit code 2."""
