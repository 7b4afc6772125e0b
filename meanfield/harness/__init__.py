"""The machinery every study shares, and no science: the study protocol and its one
launcher, the study folder (lock, manifest, seals, resume), the artifact cache, the grid
runner and its self-check, argument types and the cost check, the schema language, the
printed summary and the code's identity.
"""
