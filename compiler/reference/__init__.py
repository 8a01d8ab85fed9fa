"""The reference semantics: an exact interpreter of a program in any schedule order (interpreter.py, with the
instance order in order.py, the statement compiler in statements.py and the f32 runtime in runtime.py), the
oracle every backend is compared with.
"""
