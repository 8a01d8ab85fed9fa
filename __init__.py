"""tdsl: a polyhedral scheduling compiler for tensor kernels.

The import namespace `tdsl` maps the repository folders: `tdsl.frontend` is
`frontend/`, `tdsl.compiler` is `compiler/`, `tdsl.backends` is `backends/`.
"""

__version__ = "0.1.0"


def load(path, sizes=None):
    """Parse a .tdsl file and return its `Program` (see `tdsl.compiler.driver.api`)."""
    from tdsl.compiler.driver.api import load as _load

    return _load(path, sizes=sizes)


def loads(text, filename="<string>", sizes=None):
    """Parse .tdsl source text and return its `Program`."""
    from tdsl.compiler.driver.api import loads as _loads

    return _loads(text, filename, sizes=sizes)


def compile(program, schedule=None, *, sizes=None, kernel=None, target="nvidia", backend=None):
    """A schedule block of a .tdsl program (a path, .tdsl source text, or a `Program`) compiled for `target`: a
    `Kernel` that is callable and a torch custom op (see `tdsl.compiler.driver.kernels`).  `schedule` None: the
    first block of the file (program order if it has none); "none": program order."""
    if schedule is not None and not isinstance(schedule, str):
        raise TypeError(f"schedule is the name of a schedule block, 'none' (program order) or None (the first block), "
                        f"got {schedule!r}; to compile steps, apply them to prog.schedule() and call its .compile()")
    loaded = not hasattr(program, "schedule")
    text = isinstance(program, str) and "\n" in program  # source, as the testing helpers take it (a path has none)
    prog = (loads(program, sizes=sizes) if text else load(program, sizes=sizes)) if loaded else program
    name = None if schedule == "none" else schedule if schedule is not None else (prog.schedule_names or [None])[0]
    sched = prog.schedule(name, kernel=kernel, sizes=None if loaded else sizes)
    return sched.compile(target=target, backend=backend)
