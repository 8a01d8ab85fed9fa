"""The reference semantics: an exact interpreter of a program in any schedule order (interpreter.py), the
oracle every backend is compared with.
"""
