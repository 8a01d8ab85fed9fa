"""The TileLang backend for NVIDIA GPUs: tile program -> a Python module with @T.prim_func kernels and a torch launcher."""

from tdsl.backends.tilelang.emit import emit_module  # noqa: F401
