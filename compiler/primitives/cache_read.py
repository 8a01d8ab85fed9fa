"""cache_read: see `cache.py` (shared with cache_write)."""

from .cache import cache_read  # noqa: F401
