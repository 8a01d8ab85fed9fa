"""The Ascend 950 backend: tile program -> mainline TileLang's Ascend dialect (@T.prim_func kernels) and a torch launcher."""

from tdsl.backends.ascend950.emit import emit_module  # noqa: F401
