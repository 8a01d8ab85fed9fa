"""The Ascend 910B backend: tile program -> the tilelang-ascend 0.1.4 API (cube and vector kernels) and a torch launcher."""

from tdsl.backends.ascend910b.emit import emit_module  # noqa: F401
