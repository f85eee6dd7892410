"""The package version (a leaf module: the cache key reads it without importing tokjit)."""

__version__ = "0.1.0"
