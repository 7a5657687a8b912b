"""akm-run: executes verified akm plan files. It never imports the compiler."""

__version__ = "0.1.0"
