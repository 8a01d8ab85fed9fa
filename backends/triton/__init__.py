"""The Triton backend: tile program -> a Python module with @triton.jit kernels and a torch launcher."""

from tdsl.backends.triton.emit import emit_module  # noqa: F401
