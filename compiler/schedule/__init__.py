"""The schedule tree and the primitives that rewrite it: `Schedule` (schedule.py), the tree (tree.py), its
text, YAML and isl views (tree_view.py), one module per primitive (primitives/).
"""


from pathlib import Path as _Path


def __getattr__(name):
    # Before 0.2 `tdsl.compiler.schedule` was the module that is now `schedule.py`: its names stay reachable here.
    # A submodule's name is left to the import system (it asks here first).
    here = _Path(__file__).parent
    if name.startswith("__") or (here / f"{name}.py").exists() or (here / name).is_dir():
        raise AttributeError(name)
    import importlib

    try:
        return getattr(importlib.import_module(__name__ + ".schedule"), name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
