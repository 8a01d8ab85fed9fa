"""cache_read: see `cache.py` (shared with cache_write)."""

from tdsl.compiler.schedule.primitives.cache import cache_read  # noqa: F401
