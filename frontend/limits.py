"""The limits of the language and the words it reserves (docs/language.md, "Limits" and "Reserved words").

Each limit protects a later stage:

* `MAX_SOURCE_CHARS`: the parser reads about 70,000 tokens a second, so a
  64 KiB program (at most 64 Ki tokens) gets its answer in about a second;
  a larger one is refused before it is parsed.
* `MAX_NAME_CHARS`: generated functions and modules are named after
  the program's names with prefixes and suffixes, and Triton and
  TileLang cache a kernel in files named after its function; a file
  name has at most 255 bytes.
* `MAX_EXPR_DEPTH`: the reference interpreter and the generated Python
  (Triton, TileLang, the Ascend modules) nest parentheses once per
  level, and Python's parser refuses 200 nested parentheses.  A level is
  what the generated code nests: one per operator, call or read, more
  for the constructs in `LEVELS` (measured on every backend, the most
  any of them nests; tests/frontend/test_frontend_limits.py generates
  each construct at the limit for every backend).  100 leaves a factor
  of two.
* `MAX_EXPR_OPERATIONS`: a composed function computes its argument as
  many times as its definition uses it (silu(x) = x * (1 / (1 + exp(-x)))
  twice), and the generated code spells it out each time, so nested
  compositions grow the code exponentially: 4,096 operations keep a
  module small enough to compile in seconds.
Both are checked where a statement's expression is written (the parser)
and where a schedule builds one from several (compute_inline,
recompute_at): `expression_problem`.
* `MAX_INT`: indices, sizes and offsets are 32-bit integers in generated
  kernels, so every integer literal, size, tensor dimension and tensor
  element count is at most 2^31 - 1.
* `MAX_FLOAT`: the widest dtype is f32; a literal that rounds beyond its
  largest finite value would be infinity in every dtype (write `inf` for
  that); one that rounds to it (3.4028235e+38, as f32 is usually printed)
  is it.

Reserved words: generated kernels are Python modules, so no name may be a
Python keyword; iteration domains, sizes and loops are written as isl
text, and isl reads its keywords in any letter case; names that start
with `__` are left to the compiler's own generated names.
"""

from __future__ import annotations

import keyword
import math
import numbers
from typing import Optional

from tdsl.frontend import ast

MAX_SOURCE_CHARS = 64 * 1024
MAX_NAME_CHARS = 64
MAX_EXPR_DEPTH = 100
MAX_EXPR_OPERATIONS = 4096
MAX_INT = 2**31 - 1
MAX_FLOAT = 3.4028234663852886e38  # the largest finite f32
F32_OVERFLOW = 2.0**128 - 2.0**103  # half an ulp above MAX_FLOAT: a literal this large rounds to infinity in f32

PYTHON_KEYWORDS = frozenset(keyword.kwlist)
# The words isl's reader (isl_stream.c) turns into tokens, compared without case.
ISL_KEYWORDS = frozenset(
    "exists and or implies not infty infinity nan min max rat true false ceild floord mod ceil floor".split()
)
# Roles whose names end up in isl text (iteration domains, parameters, schedule dimensions).
ISL_ROLES = frozenset({"iterator", "size", "loop"})


def reserved_name_problem(name: str, role: str) -> Optional[str]:
    """Why `name` cannot name a `role` (tensor, kernel, size, constant, iterator, loop), or None when it can."""
    if len(name) > MAX_NAME_CHARS:
        return (f"the {role} name '{name[:16]}...' is {len(name)} characters long, more than the limit of "
                f"{MAX_NAME_CHARS} (generated functions and the files compilers cache them in are named after it); "
                f"use a shorter name")
    if name in PYTHON_KEYWORDS:
        return f"'{name}' is a Python keyword and cannot name {_a(role)} (generated kernels are Python)"
    if role in ISL_ROLES and name.lower() in ISL_KEYWORDS:
        return (
            f"'{name}' is an isl keyword and cannot name {_a(role)} "
            "(iteration domains are written for isl, which reserves it in any letter case)"
        )
    if name.startswith("__"):
        return f"'{name}' starts with '__', which is reserved for names the compiler generates; rename the {role}"
    if name == "inf":  # read as the float infinity wherever an expression is
        return f"'inf' is reserved for the float infinity and cannot name {_a(role)}"
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
    if abs(value) < F32_OVERFLOW:
        return None
    shown = text if len(text) <= 24 else f"{text[:12]}...{text[-6:]}"
    return (
        f"float {shown} is out of range: a float literal must round to a finite f32, so its magnitude must be "
        "below 3.40282357e+38 (3.4028235e+38 is the largest f32); write 'inf' for infinity"
    )


F32_HALF_SMALLEST = 2.0 ** -150  # half the smallest f32 subnormal: a magnitude up to it rounds to zero


def float_value(value: float) -> float:
    """A literal's value in range (`float_problem`), with the literals that round to the largest f32 made it, and
    those that round to zero a zero of their sign (`1e-50` is +0.0: a backend that tests its operands for zero, as
    the IEEE maximum of zeros does, must see one; probe X of the 28th session), so that every stage sees the f32
    the literal stands for at both ends of the range."""
    if abs(value) > MAX_FLOAT:
        return math.copysign(MAX_FLOAT, value)
    if abs(value) <= F32_HALF_SMALLEST:
        return math.copysign(0.0, value)
    return value


# ---------------------------------------------------------------- the size of an expression

# Levels of generated code a construct nests where that is more than one: the most any backend nests it.
# TileLang and the 950 keep TVM from folding a difference or a comparison's operands
# (T.Cast("float32", T.Cast("float64", a - b))), and spell a conversion as casts and clamps.
SUBTRACTION_LEVELS = 3
COMPARISON_LEVELS = 3
CAST_LEVELS = {"bf16": 2, "f16": 2, "f8e4m3": 4}


class _Expansion:
    """The algebra of compiler/model/functions.py over (levels above the argument, operations besides the
    argument's, uses of the argument): what a composed function adds to its argument's size."""

    NONE = (-1, 0, 0)  # a constant: below the argument, no operation, no use

    def one(self):
        return self.NONE

    def neg(self, x):
        return self.call("neg", x)

    def call(self, func, x):
        return (x[0] + 1, x[1] + 1, x[2])

    def add(self, x, y):
        return (max(x[0], y[0]) + 1, x[1] + y[1] + 1, x[2] + y[2])

    mul = div = add


def _composition_shapes() -> dict:
    from tdsl.compiler.model.functions import COMPOSITIONS

    return {name: define((0, 0, 1), _Expansion()) for name, define in COMPOSITIONS.items()}


COMPOSITION_SHAPES = _composition_shapes()  # sigmoid: 4 levels, 4 operations, x once; silu: 5, 5, twice


def node_levels(node) -> int:
    """The levels of generated code `node` nests around its deepest operand."""
    if isinstance(node, ast.BinOp) and node.op == "-":
        return SUBTRACTION_LEVELS
    if isinstance(node, ast.Compare):
        return COMPARISON_LEVELS
    if isinstance(node, ast.Call):
        if node.func in COMPOSITION_SHAPES:
            return COMPOSITION_SHAPES[node.func][0]
        return CAST_LEVELS.get(node.func, 1)
    return 1


def node_operations(node, operands: list) -> int:
    """The operations the generated code spells for `node`, given its operands' (`operands`)."""
    if isinstance(node, ast.Call) and node.func in COMPOSITION_SHAPES:
        _, own, uses = COMPOSITION_SHAPES[node.func]
        return own + uses * sum(operands)
    if isinstance(node, (ast.IntLit, ast.FloatLit, ast.Name)):
        return 0
    return 1 + sum(operands)


def node_size(node, operands: list) -> tuple[int, int]:
    """(levels, operations) of `node` given its operands' (a leaf: one level, no operation)."""
    levels = node_levels(node) + max((d for d, _ in operands), default=0)
    return levels, node_operations(node, [n for _, n in operands])


def expression_size(expr) -> tuple[int, int]:
    """(levels, operations) of an expression, counted as `node_levels` and `node_operations` do, walked without
    recursion (an expression built by inlining may be deeper than Python's stack)."""
    sizes: dict[int, tuple[int, int]] = {}
    stack = [(expr, False)]
    while stack:
        node, ready = stack.pop()
        parts = ast.children(node)
        if not ready:
            stack.append((node, True))
            stack.extend((c, False) for c in parts)
            continue
        sizes[id(node)] = node_size(node, [sizes[id(c)] for c in parts])
    return sizes[id(expr)]


def too_deep_message(levels: int) -> str:
    return (
        f"this expression nests {levels} levels deep, more than the limit of {MAX_EXPR_DEPTH} (each operator, call "
        f"or tensor read is a level, a subtraction or comparison 3, a conversion to bf16 or f16 2, to f8e4m3 4, "
        f"sigmoid and fast_sigmoid 4, silu and fast_silu 5, rsqrt 2: what the generated code nests; "
        f"'A[i] + A[i] + ...' of N terms nests N + 1); split it into several statements, e.g. T[i] = (first terms) "
        f"then Y[i] = T[i] + (the rest)"
    )


def too_many_operations_message(operations: int) -> str:
    return (
        f"this expression computes {operations:,} operations, more than the limit of {MAX_EXPR_OPERATIONS:,} "
        f"(silu and fast_silu compute their argument twice, so nesting them doubles the code each time); compute "
        f"the argument in a statement of its own, e.g. T[i] = silu(X[i]) then Y[i] = silu(T[i])"
    )


def expression_problem(expr) -> Optional[str]:
    """Why `expr` is too large for the generated code, or None."""
    levels, operations = expression_size(expr)
    if levels > MAX_EXPR_DEPTH:
        return too_deep_message(levels)
    if operations > MAX_EXPR_OPERATIONS:
        return too_many_operations_message(operations)
    return None


def plain_int(value):
    """An integer of another type (NumPy's `np.int64(8)`) as the int it stands for; anything else unchanged (a bool
    too: it is no size or factor, and the checks say so)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, (bool, int)):
        return int(value)
    return value
