"""cache_write: see `cache.py` (shared with cache_read)."""

from .cache import cache_write  # noqa: F401
