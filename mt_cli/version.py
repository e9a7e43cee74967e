"""mt's version, in a module of its own so that anything may read it without importing the package's
public API."""

__version__ = "0.1.0"
