"""The package version recorded in every signature."""

__version__ = "0.1.0"
