"""The package version, in a module of its own so that reading it imports nothing else of `suite`."""

__version__ = "0.1.0"
