"""The program as data: isl iteration domains and access relations of a checked .tdsl kernel (program.py),
its dependences, the dtypes and the function catalog every later stage reads.
"""

from tdsl.compiler import answers_for_old_module

# Before 0.2 `tdsl.compiler.model` was the module that is now `program.py`.
__getattr__ = answers_for_old_module(__name__, "program")
