"""The Triton backend: tile program -> a Python module with @triton.jit kernels and a torch launcher."""

from .emit import emit_module  # noqa: F401
