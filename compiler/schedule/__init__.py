"""The schedule tree and the primitives that rewrite it: `Schedule` (schedule.py), the tree (tree.py), its
text, YAML and isl views (tree_view.py), one module per primitive (primitives/).
"""

from tdsl.compiler import answers_for_old_module

# Before 0.2 `tdsl.compiler.schedule` was the module that is now `schedule.py`.
__getattr__ = answers_for_old_module(__name__, "schedule")
