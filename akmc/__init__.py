"""akmc: the compiler and checker of `.akm` workflows."""

__version__ = "0.1.0"
