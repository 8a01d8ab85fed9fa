"""Is a scheduled tree still the program?  Dependence and rounding checks (checks.py), the dtype grids rounding
may skip (grids.py), and the report of which fusions are legal (fusion_report.py).
"""

from tdsl.compiler import answers_for_old_module

# Before 0.2 `tdsl.compiler.legality` was the module that is now `checks.py`.
__getattr__ = answers_for_old_module(__name__, "checks")
