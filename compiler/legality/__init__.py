"""Is a scheduled tree still the program?  Dependence and rounding checks (checks.py), the dtype grids rounding
may skip (grids.py), and the report of which fusions are legal (fusion_report.py).
"""


from pathlib import Path as _Path


def __getattr__(name):
    # Before 0.2 `tdsl.compiler.legality` was the module that is now `checks.py`: its names stay reachable here.
    # A submodule's name is left to the import system (it asks here first).
    here = _Path(__file__).parent
    if name.startswith("__") or (here / f"{name}.py").exists() or (here / name).is_dir():
        raise AttributeError(name)
    import importlib

    try:
        return getattr(importlib.import_module(__name__ + ".checks"), name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
