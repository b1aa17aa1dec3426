"""bugzoo: a benchmark suite of planted PyTorch training bugs."""

__version__ = "0.1.0"
