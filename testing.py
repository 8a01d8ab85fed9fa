"""`tdsl.testing`: pytest-friendly checks of schedules (see compiler/driver/testing.py and docs/testing.md).

    from tdsl.testing import assert_legal, assert_illegal
"""

from tdsl.compiler.driver.testing import assert_illegal, assert_legal, load_program, run_differences  # noqa: F401

__all__ = ["assert_legal", "assert_illegal", "load_program", "run_differences"]
