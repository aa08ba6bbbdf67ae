"""gateway-ls: a language server that makes the model a configuration choice."""

__version__ = "0.1.0"
