"""The IEEE maximum and minimum of two zeros, in backends whose max / min compare (docs/interpreter.md).

IEEE 754-2019 orders -0.0 below +0.0: max(+0, -0) = +0 and min(+0, -0) = -0.  A comparing max returns either of
two equal zeros, by the operands' order.  Where a use can tell the zero (compiler/analysis/zero_signs.py,
`T.Call.zeros`), the Ascend printers add the operands' zeros where both are zero (+0 + -0 is +0; a minimum is
the negated maximum of the negated operands); Triton and TileLang have their own forms.  Where the form would
repeat long operand text, and where an operand is a number other than zero (no two zeros meet there), they
print the plain max / min.
"""

from __future__ import annotations

from tdsl.frontend.limits import F32_HALF_SMALLEST

SHORT_OPERAND = 120  # the longest operand text a lane-wise form repeats (it reads each operand three times)


def nonzero_literal(code: str) -> bool:
    """A number other than zero as an f32 (E4M3's clamp to +-448; `1e-50` is a zero, frontend/limits.py)."""
    try:
        return abs(float(code.strip("()"))) > F32_HALF_SMALLEST
    except ValueError:
        return False


def needs_zero_order(operands: list) -> bool:
    """Whether a lane-wise max / min of these operand texts is printed in its IEEE form (see above)."""
    return all(len(a) <= SHORT_OPERAND for a in operands) and not any(map(nonzero_literal, operands))
