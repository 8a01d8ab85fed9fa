"""The program as data: isl iteration domains and access relations of a checked .tdsl kernel (program.py),
its dependences, the dtypes and the function catalog every later stage reads.
"""


from pathlib import Path as _Path


def __getattr__(name):
    # Before 0.2 `tdsl.compiler.model` was the module that is now `program.py`: its names stay reachable here.
    # A submodule's name is left to the import system (it asks here first).
    here = _Path(__file__).parent
    if name.startswith("__") or (here / f"{name}.py").exists() or (here / name).is_dir():
        raise AttributeError(name)
    import importlib

    try:
        return getattr(importlib.import_module(__name__ + ".program"), name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
