"""tdsl: a polyhedral scheduling compiler for tensor kernels.

The import namespace `tdsl` maps the repository folders: `tdsl.frontend` is
`frontend/`, `tdsl.compiler` is `compiler/`, `tdsl.backends` is `backends/`.
"""

__version__ = "0.1.0"


def load(path, sizes=None):
    """Parse a .tdsl file and return its `Program` (see `tdsl.compiler.driver.api`)."""
    from tdsl.compiler.driver.api import load as _load

    return _load(path, sizes=sizes)
