"""cache_write: see `cache.py` (shared with cache_read)."""

from tdsl.compiler.schedule.primitives.cache import cache_write  # noqa: F401
