"""The limits of the language and the words it reserves (docs/language.md, "Limits" and "Reserved words").

Each limit protects a later stage:

* `MAX_SOURCE_CHARS`: the parser reads about 70,000 tokens a second, so a
  64 KiB program (at most 64 Ki tokens) gets its answer in about a second;
  a larger one is refused before it is parsed.
* `MAX_EXPR_DEPTH`: the reference interpreter and the generated Python
  (Triton, TileLang) nest parentheses about once per operator, and
  Python's parser refuses 200 nested parentheses.  Measured: the
  interpreter fails at 199 levels, a generated Triton module stops
  being valid Python at about 300, Triton compiles it for sm_90 at 190;
  100 leaves a factor of two.
* `MAX_INT`: indices, sizes and offsets are 32-bit integers in generated
  kernels, so every integer literal, size, tensor dimension and tensor
  element count is at most 2^31 - 1.
* `MAX_FLOAT`: the widest dtype is f32; a literal beyond its largest
  finite value would be infinity in every dtype (write `inf` for that).

Reserved words: generated kernels are Python modules, so no name may be a
Python keyword; iteration domains, sizes and loops are written as isl
text, and isl reads its keywords in any letter case; names that start
with `__` are left to the compiler's own generated names.
"""

from __future__ import annotations

import keyword
from typing import Optional

MAX_SOURCE_CHARS = 64 * 1024
MAX_EXPR_DEPTH = 100
MAX_INT = 2**31 - 1
MAX_FLOAT = 3.4028234663852886e38  # the largest finite f32

PYTHON_KEYWORDS = frozenset(keyword.kwlist)
# The words isl's reader (isl_stream.c) turns into tokens, compared without case.
ISL_KEYWORDS = frozenset(
    "exists and or implies not infty infinity nan min max rat true false ceild floord mod ceil floor".split()
)
# Roles whose names end up in isl text (iteration domains, parameters, schedule dimensions).
ISL_ROLES = frozenset({"iterator", "size", "loop"})


def reserved_name_problem(name: str, role: str) -> Optional[str]:
    """Why `name` cannot name a `role` (tensor, kernel, size, constant, iterator, loop), or None when it can."""
    if name in PYTHON_KEYWORDS:
        return f"'{name}' is a Python keyword and cannot name {_a(role)} (generated kernels are Python)"
    if role in ISL_ROLES and name.lower() in ISL_KEYWORDS:
        return (
            f"'{name}' is an isl keyword and cannot name {_a(role)} "
            "(iteration domains are written for isl, which reserves it in any letter case)"
        )
    if name.startswith("__"):
        return f"'{name}' starts with '__', which is reserved for names the compiler generates; rename the {role}"
    return None


def _a(role: str) -> str:
    return f"an {role}" if role[0] in "aeiou" else f"a {role}"


def int_problem(digits: str) -> Optional[str]:
    """Why the integer literal `digits` (ASCII digits) is out of range, or None.  Never calls int() on a
    literal that Python's int-from-string limit (4300 digits) would refuse."""
    significant = digits.lstrip("0") or "0"
    if len(significant) <= len(str(MAX_INT)) and int(significant) <= MAX_INT:
        return None
    shown = significant
    if len(significant) > 24:
        shown = f"{significant[:12]}...{significant[-4:]} ({len(significant)} digits)"
    return (
        f"integer {shown} is too large: integers must be at most {MAX_INT} "
        "(2^31 - 1; kernels index with 32-bit integers)"
    )


def float_problem(text: str, value: float) -> Optional[str]:
    """Why the float literal `text` (parsed as `value`) is out of range, or None."""
    if abs(value) <= MAX_FLOAT:
        return None
    shown = text if len(text) <= 24 else f"{text[:12]}...{text[-6:]}"
    return (
        f"float {shown} is out of range: a float literal must be at most 3.4028235e+38 in magnitude "
        "(the largest f32); write 'inf' for infinity"
    )
