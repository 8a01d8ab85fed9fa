"""One test per error message of the frontend.

Each case is a small program with exactly one mistake and the full
rendered diagnostic: `file:line:col: error: message`, the source line and
the caret line.  See docs/language.md for the list of messages.
"""

import textwrap

import pytest

from tdsl.frontend.check import load_file, load_source
from tdsl.frontend.diagnostics import SourceError


def _text(block: str) -> str:
    return textwrap.dedent(block).strip("\n")


# name -> (program, expected diagnostic)
CASES = {
    # ------------------------------------------------------------ syntax
    "unexpected_character": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] {
          Y[i] = A[i] $ 2
        }
        """,
        """
        prog.tdsl:3:15: error: unexpected character '$'
            Y[i] = A[i] $ 2
                        ^
        """,
    ),
    "one_closing_parenthesis_too_many": (  # probe II: it said only "expected end of line"
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] {
          Y[i] = max(A[i], 0.0))
        }
        """,
        """
        prog.tdsl:3:24: error: expected end of line, found ')' (no '(' is open here: one ')' too many)
            Y[i] = max(A[i], 0.0))
                                 ^
        """,
    ),
    "one_closing_bracket_too_many": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] {
          Y[i]] = A[i]
        }
        """,
        """
        prog.tdsl:3:7: error: expected '=', found ']' (no '[' is open here: one ']' too many)
            Y[i]] = A[i]
                ^
        """,
    ),
    "expected_after_index": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] {
          Y[i] = A[i foo]
        }
        """,
        """
        prog.tdsl:3:14: error: expected ']' or ',' after index, found 'foo'
            Y[i] = A[i foo]
                       ^^^
        """,
    ),
    "expected_after_dimension": (
        """
        const M = 8, N = 8
        kernel f(A: f32[M N]) -> Y: f32[N] {
          Y[i] = 0
        }
        """,
        """
        prog.tdsl:2:19: error: expected ']' or ',' after dimension, found 'N'
          kernel f(A: f32[M N]) -> Y: f32[N] {
                            ^
        """,
    ),
    "expected_after_argument": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] {
          Y[i] = max(A[i] 2)
        }
        """,
        """
        prog.tdsl:3:19: error: expected ')' or ',' after argument, found '2'
            Y[i] = max(A[i] 2)
                            ^
        """,
    ),
    "expected_after_parameter": (
        """
        const N = 8
        kernel f(A: f32[N] -> Y: f32[N] {
          Y[i] = 0
        }
        """,
        """
        prog.tdsl:2:20: error: expected ')', ',' or 'in' after parameter, found '->'
          kernel f(A: f32[N] -> Y: f32[N] {
                             ^^
        """,
    ),
    "arrow_on_the_next_line": (  # language.md: only ( ) and [ ] hide newlines (outside probe of the 30th session)
        """
        const N = 8
        kernel f(A: f32[N])
          -> (Y: f32[N]) {
          Y[i] = A[i]
        }
        """,
        """
        prog.tdsl:2:20: error: expected '->', found end of line (a line may break only inside ( ) or [ ]: continue it on this line)
          kernel f(A: f32[N])
                             ^
        """,
    ),
    "semicolon_where_an_operand_belongs": (  # a ';' is no line break: no hint (probe EE, 30th session)
        """
        const N = 8
        kernel f(A: f32[N]) -> (Y: f32[N]) {
          Y[i] = A[i] *; Y[i] = 2.0
        }
        """,
        """
        prog.tdsl:3:16: error: expected an expression, found ';'
            Y[i] = A[i] *; Y[i] = 2.0
                         ^
        """,
    ),
    "expected_expression": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] {
          Y[i] = A[i] *
        }
        """,
        """
        prog.tdsl:3:16: error: expected an expression, found end of line (a line may break only inside ( ) or [ ]: continue it on this line)
            Y[i] = A[i] *
                         ^
        """,
    ),
    "expected_operator_or_end_of_line": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] {
          Y[i] = A[i] A[i]
        }
        """,
        """
        prog.tdsl:3:15: error: expected an operator or end of line, found 'A'
            Y[i] = A[i] A[i]
                        ^
        """,
    ),
    "expected_end_of_input": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] {
          Y[i] = A[i]
        """,
        """
        prog.tdsl:3:14: error: expected '}', 'for' or a name, found end of input
            Y[i] = A[i]
                       ^
        """,
    ),
    "expected_top_level": (
        """
        const N = 8
        Y[i] = 0
        """,
        """
        prog.tdsl:2:1: error: expected 'const', 'param', 'kernel' or 'schedule', found 'Y'
          Y[i] = 0
          ^
        """,
    ),
    "expected_number": (
        """
        const N = M
        """,
        """
        prog.tdsl:1:11: error: expected a number, found 'M'
          const N = M
                    ^
        """,
    ),
    "semicolon_inside_brackets": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] { Y[i] = A[i; 0] }
        """,
        """
        prog.tdsl:2:46: error: expected ']' or ',' after index, found ';'
          kernel f(A: f32[N]) -> Y: f32[N] { Y[i] = A[i; 0] }
                                                       ^
        """,
    ),
    "expected_schedule_step": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] { Y[i] = A[i] }
        schedule s {
          a, b split(Y.i, 4)
        }
        """,
        """
        prog.tdsl:4:8: error: expected ',' or '=', found 'split'
            a, b split(Y.i, 4)
                 ^^^^^
        """,
    ),
    "lhs_index_not_plain": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] {
          Y[i + 1] = A[i]
        }
        """,
        """
        prog.tdsl:3:5: error: left-hand index 'i + 1' must be a plain iterator name (each one defines an iterator of the statement)
            Y[i + 1] = A[i]
              ^^^^^
        """,
    ),
    "reduction_iterator_not_plain": (
        """
        const N = 8
        kernel f(A: f32[N, N]) -> Y: f32[N] {
          Y[i] = sum(2 * k) A[i, k]
        }
        """,
        """
        prog.tdsl:3:14: error: reduction iterator '2 * k' must be a plain name
            Y[i] = sum(2 * k) A[i, k]
                       ^^^^^
        """,
    ),
    "unknown_dtype": (
        """
        const N = 8
        kernel f(A: i32[N]) -> Y: f32[N] {
          Y[i] = A[i]
        }
        """,
        """
        prog.tdsl:2:13: error: unknown dtype 'i32'; expected one of bf16, f16, f32, f8e4m3
          kernel f(A: i32[N]) -> Y: f32[N] {
                      ^^^
        """,
    ),
    "unknown_dtype_annotation": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] {
          T[i]: f64 = A[i]
          Y[i] = T[i]
        }
        """,
        """
        prog.tdsl:3:9: error: unknown dtype 'f64'; expected one of bf16, f16, f32, f8e4m3
            T[i]: f64 = A[i]
                  ^^^
        """,
    ),
    "accum_not_a_float_dtype": (
        """
        const N = 8
        kernel f(A: f32[N, N]) -> Y: f32[N] {
          Y[i] = sum(k) A[i, k] accum i32
        }
        """,
        """
        prog.tdsl:3:31: error: accum expects a float dtype (bf16, f16, f32, f8e4m3), found 'i32'
            Y[i] = sum(k) A[i, k] accum i32
                                        ^^^
        """,
    ),
    "unknown_combine_policy": (
        """
        const N = 8
        kernel f(A: f32[N, N]) -> Y: f32[N] {
          Y[i] = sum(k) A[i, k] combine fast
        }
        """,
        """
        prog.tdsl:3:33: error: unknown combine policy 'fast'; expected reassoc, deterministic, strict, online, fast_accum, segments(N) or fast_accum(N) with N >= 1
            Y[i] = sum(k) A[i, k] combine fast
                                          ^^^^
        """,
    ),
    "combine_segments_zero": (
        """
        const N = 8
        kernel f(A: f32[N, N]) -> Y: f32[N] {
          Y[i] = sum(k) A[i, k] combine segments(0)
        }
        """,
        """
        prog.tdsl:3:33: error: unknown combine policy 'segments(0)'; expected reassoc, deterministic, strict, online, fast_accum, segments(N) or fast_accum(N) with N >= 1
            Y[i] = sum(k) A[i, k] combine segments(0)
                                          ^^^^^^^^^^^
        """,
    ),
    "combine_online_on_a_sum": (
        """
        const N = 8
        kernel f(A: f32[N, N]) -> Y: f32[N] {
          Y[i] = sum(k) A[i, k] combine online
        }
        """,
        """
        prog.tdsl:3:10: error: `combine online` declares a running maximum that readers may use before it is complete (online softmax); a sum reduction cannot be one: declare it on the max(...) the exponentials subtract
            Y[i] = sum(k) A[i, k] combine online
                   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
        """,
    ),
    "unexpected_control_character": (
        # An escape sequence is shown escaped, in the message and in the echoed line, never sent to the terminal.
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] {
          Y[i] = A[i] + \x1b[31m1
        }
        """,
        """
        prog.tdsl:3:17: error: unexpected character '\\x1b'
            Y[i] = A[i] + \\x1b[31m1
                          ^^^^
        """,
    ),
    "unexpected_bidi_override": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] {
          Y[i] = A[i] \u202e+ 1
        }
        """,
        """
        prog.tdsl:3:15: error: unexpected character '\\u202e'
            Y[i] = A[i] \\u202e+ 1
                        ^^^^^^
        """,
    ),
    "expression_too_deep": (
        # 101 terms nest 101 levels (left-associative, never rebalanced); the first 101 terms are underlined,
        # and the long line is cut to a window around the caret.
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] {
          Y[i] = """ + " + ".join(["1"] * 101) + """
        }
        """,
        """
        prog.tdsl:3:10: error: this expression nests 101 levels deep, more than the limit of 100 (each operator, call or tensor read is a level, a subtraction or comparison 3, a conversion to bf16 or f16 2, to f8e4m3 4, sigmoid and fast_sigmoid 4, silu and fast_silu 5, rsqrt 2: what the generated code nests; 'A[i] + A[i] + ...' of N terms nests N + 1); split it into several statements, e.g. T[i] = (first terms) then Y[i] = T[i] + (the rest)
            Y[i] = """ + "1 + " * 37 + "1 +..." + """
                   """ + "^" * 151 + """
        """,
    ),
    "integer_too_large": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] {
          Y[i] = A[i] + 2147483648
        }
        """,
        """
        prog.tdsl:3:17: error: integer 2147483648 is too large: integers must be at most 2147483647 (2^31 - 1; kernels index with 32-bit integers)
            Y[i] = A[i] + 2147483648
                          ^^^^^^^^^^
        """,
    ),
    "integer_with_hundreds_of_digits": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] { Y[i] = A[i] }
        schedule s { io, ii = split(Y.i, """ + "9" * 300 + """) }
        """,
        """
        prog.tdsl:3:34: error: integer 999999999999...9999 (300 digits) is too large: integers must be at most 2147483647 (2^31 - 1; kernels index with 32-bit integers)
          schedule s { io, ii = split(Y.i, """ + "9" * 127 + """...
                                           """ + "^" * 127 + """
        """,
    ),
    "float_out_of_range": (
        """
        const N = 8
        const big = -1e999
        kernel f(A: f32[N]) -> Y: f32[N] { Y[i] = A[i] * big }
        """,
        """
        prog.tdsl:2:14: error: float 1e999 is out of range: a float literal must round to a finite f32, so its magnitude must be below 3.40282357e+38 (3.4028235e+38 is the largest f32); write 'inf' for infinity
          const big = -1e999
                       ^^^^^
        """,
    ),
    "python_keyword_name": (
        """
        const N = 8
        kernel f(lambda: f32[N]) -> Y: f32[N] { Y[i] = lambda[i] }
        """,
        """
        prog.tdsl:2:10: error: 'lambda' is a Python keyword and cannot name a tensor (generated kernels are Python)
          kernel f(lambda: f32[N]) -> Y: f32[N] { Y[i] = lambda[i] }
                   ^^^^^^
        """,
    ),
    "isl_keyword_name": (
        """
        const N = 8
        kernel f(A: f32[N, N]) -> Y: f32[N] { Y[i] = sum(Mod) A[i, Mod] }
        """,
        """
        prog.tdsl:2:50: error: 'Mod' is an isl keyword and cannot name an iterator (iteration domains are written for isl, which reserves it in any letter case)
          kernel f(A: f32[N, N]) -> Y: f32[N] { Y[i] = sum(Mod) A[i, Mod] }
                                                           ^^^
        """,
    ),
    "dunder_name": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] { Y[i] = A[i] }
        schedule s { io, __ii = split(Y.i, 4) }
        """,
        """
        prog.tdsl:3:18: error: '__ii' starts with '__', which is reserved for names the compiler generates; rename the loop
          schedule s { io, __ii = split(Y.i, 4) }
                           ^^^^
        """,
    ),
    # `inf` is read as the float infinity in an expression, so it names nothing (probe of the 25th session: as an
    # iterator the message said "must be a plain iterator name"; as a tensor `inf[i]` read it and `-inf` did not)
    "inf_as_an_iterator": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] { Y[inf] = A[inf] }
        """,
        """
        prog.tdsl:2:38: error: 'inf' is reserved for the float infinity and cannot name an iterator
          kernel f(A: f32[N]) -> Y: f32[N] { Y[inf] = A[inf] }
                                               ^^^
        """,
    ),
    "inf_as_a_reduction_iterator": (
        """
        const N = 8
        kernel f(A: f32[N, N]) -> Y: f32[N] { Y[i] = sum(inf) A[i, inf] }
        """,
        """
        prog.tdsl:2:50: error: 'inf' is reserved for the float infinity and cannot name an iterator
          kernel f(A: f32[N, N]) -> Y: f32[N] { Y[i] = sum(inf) A[i, inf] }
                                                           ^^^
        """,
    ),
    "inf_as_a_tensor": (
        """
        const N = 8
        kernel f(inf: f32[N]) -> Y: f32[N] { Y[i] = inf[i] }
        """,
        """
        prog.tdsl:2:10: error: 'inf' is reserved for the float infinity and cannot name a tensor
          kernel f(inf: f32[N]) -> Y: f32[N] { Y[i] = inf[i] }
                   ^^^
        """,
    ),
    "inf_as_a_loop": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] { Y[i] = A[i] }
        schedule s { inf, ii = split(Y.i, 4) }
        """,
        """
        prog.tdsl:3:14: error: 'inf' is reserved for the float infinity and cannot name a loop
          schedule s { inf, ii = split(Y.i, 4) }
                       ^^^
        """,
    ),
    # `--schedule none` means program order, so a block called so could never be chosen (probe of the 25th session)
    "schedule_named_none": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] { Y[i] = A[i] }
        schedule none { io, ii = split(Y.i, 4) }
        """,
        """
        prog.tdsl:3:10: error: a schedule cannot be called 'none': `--schedule none` means program order; rename the block
          schedule none { io, ii = split(Y.i, 4) }
                   ^^^^
        """,
    ),
    # ------------------------------------------------------------ declarations
    "inf_is_reserved": (
        """
        const inf = 3
        """,
        """
        prog.tdsl:1:7: error: 'inf' is reserved for the float infinity and cannot name a size
          const inf = 3
                ^^^
        """,
    ),
    "size_out_of_range": (
        """
        const M = 4, N = 0
        """,
        """
        prog.tdsl:1:14: error: size 'N' is 0, but a size must be between 1 and 2147483647 (2^31 - 1)
          const M = 4, N = 0
                       ^^^^^
        """,
    ),
    "dimension_out_of_range": (
        """
        const N = 8
        kernel f(A: f32[N - 8]) -> Y: f32[N] { Y[i] = 1 }
        """,
        """
        prog.tdsl:2:17: error: dimension 0 of tensor 'A' is N - 8 = 0, but a dimension must be between 1 and 2147483647
          kernel f(A: f32[N - 8]) -> Y: f32[N] { Y[i] = 1 }
                          ^^^^^
        """,
    ),
    "too_many_elements": (
        """
        const N = 65536
        kernel f(A: f32[N, N]) -> Y: f32[N] { Y[i] = sum(k) A[i, k] }
        """,
        """
        prog.tdsl:2:10: error: tensor 'A' has 4294967296 elements (65536 x 65536), but a tensor may have at most 2147483647 (2^31 - 1): generated kernels index it with 32-bit integers
          kernel f(A: f32[N, N]) -> Y: f32[N] { Y[i] = sum(k) A[i, k] }
                   ^^^^^^^^^^^^
        """,
    ),
    "too_many_elements_in_a_temporary": (
        """
        const N = 65536
        kernel f(A: f32[N]) -> Y: f32[N] {
          T[i, j] = A[i] * A[j]
          Y[i] = sum(j) T[i, j]
        }
        """,
        """
        prog.tdsl:3:3: error: tensor 'T' has 4294967296 elements (65536 x 65536), but a tensor may have at most 2147483647 (2^31 - 1): generated kernels index it with 32-bit integers
            T[i, j] = A[i] * A[j]
            ^
        """,
    ),
    "duplicate_size": (
        """
        const M = 8, N = 8
        param B, M
        """,
        """
        prog.tdsl:2:10: error: duplicate definition of size 'M' (first defined at line 1)
          param B, M
                   ^
        """,
    ),
    "duplicate_kernel": (
        """
        const N = 8
        kernel f() -> Y: f32[N] { Y[i] = 1 }
        kernel f() -> Y: f32[N] { Y[i] = 2 }
        """,
        """
        prog.tdsl:3:1: error: duplicate definition of kernel 'f' (first defined at line 2)
          kernel f() -> Y: f32[N] { Y[i] = 2 }
          ^^^^^^
        """,
    ),
    "duplicate_tensor": (
        """
        const N = 8
        kernel f(A: f32[N], A: f32[N]) -> Y: f32[N] {
          Y[i] = A[i]
        }
        """,
        """
        prog.tdsl:2:21: error: duplicate definition of tensor 'A' (first defined at line 2)
          kernel f(A: f32[N], A: f32[N]) -> Y: f32[N] {
                              ^^^^^^^^^
        """,
    ),
    "duplicate_result": (
        """
        const N = 8
        kernel f(A: f32[N]) -> (Y: f32[N], A: f32[N]) {
          Y[i] = A[i]
        }
        """,
        """
        prog.tdsl:2:36: error: duplicate definition of tensor 'A' (first defined at line 2)
          kernel f(A: f32[N]) -> (Y: f32[N], A: f32[N]) {
                                             ^^^^^^^^^
        """,
    ),
    "tensor_named_like_size": (
        """
        const N = 8
        kernel f(N: f32[8]) -> Y: f32[8] {
          Y[i] = 0
        }
        """,
        """
        prog.tdsl:2:10: error: tensor 'N' has the same name as the size defined at line 1
          kernel f(N: f32[8]) -> Y: f32[8] {
                   ^^^^^^^^^
        """,
    ),
    "unknown_size": (
        """
        const N = 8
        kernel f(A: f32[NN]) -> Y: f32[N] {
          Y[i] = 0
        }
        """,
        """
        prog.tdsl:2:17: error: unknown size 'NN'; did you mean 'N'?
          kernel f(A: f32[NN]) -> Y: f32[N] {
                          ^^
        """,
    ),
    "float_const_as_size": (
        """
        const N = 8
        const eps = 1e-6
        kernel f(A: f32[eps]) -> Y: f32[N] {
          Y[i] = 0
        }
        """,
        """
        prog.tdsl:3:17: error: float constant 'eps' cannot be used in a tensor dimension; only int sizes can
          kernel f(A: f32[eps]) -> Y: f32[N] {
                          ^^^
        """,
    ),
    "non_affine_dimension": (
        """
        param B
        kernel f(A: f32[B * B]) -> Y: f32[B] {
          Y[i] = 0
        }
        """,
        """
        prog.tdsl:2:17: error: a tensor dimension must be affine, but 'B * B' multiplies two non-constant terms
          kernel f(A: f32[B * B]) -> Y: f32[B] {
                          ^^^^^
        """,
    ),
    "result_never_computed": (
        """
        const N = 8
        kernel f(A: f32[N]) -> (Y: f32[N], Z: f32[N]) {
          Y[i] = A[i]
        }
        """,
        """
        prog.tdsl:2:36: error: result 'Z' is never computed
          kernel f(A: f32[N]) -> (Y: f32[N], Z: f32[N]) {
                                             ^^^^^^^^^
        """,
    ),
    # ------------------------------------------------------------ statements
    "write_kernel_input": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] {
          A[i] = 0
          Y[i] = A[i]
        }
        """,
        """
        prog.tdsl:3:3: error: cannot write kernel input 'A'
            A[i] = 0
            ^
        """,
    ),
    "written_twice": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] {
          Y[i] = A[i]
          Y[i] = 2 * A[i]
        }
        """,
        """
        prog.tdsl:4:3: error: tensor 'Y' is written twice (first written at line 3)
            Y[i] = 2 * A[i]
            ^
        """,
    ),
    "rank_mismatch_write": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N, N] {
          Y[i] = A[i]
        }
        """,
        """
        prog.tdsl:3:3: error: tensor 'Y' has rank 2 but is indexed with 1 index
            Y[i] = A[i]
            ^
        """,
    ),
    "rank_mismatch_read": (
        """
        const N = 8
        kernel f(A: f32[N, N]) -> Y: f32[N] {
          Y[i] = A[i]
        }
        """,
        """
        prog.tdsl:3:10: error: tensor 'A' has rank 2 but is indexed with 1 index
            Y[i] = A[i]
                   ^^^^
        """,
    ),
    "rank_mismatch_temporary": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] {
          T[i] = A[i]
          Y[i] = T[i, 0]
        }
        """,
        """
        prog.tdsl:4:10: error: tensor 'T' has rank 1 but is indexed with 2 indices
            Y[i] = T[i, 0]
                   ^^^^^^^
        """,
    ),
    "size_as_iterator": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] {
          Y[N] = A[0]
        }
        """,
        """
        prog.tdsl:3:5: error: 'N' is a size, not an iterator; iterators need fresh names
            Y[N] = A[0]
              ^
        """,
    ),
    "float_const_as_iterator": (
        """
        const N = 8
        const eps = 1e-6
        kernel f(A: f32[N, N]) -> Y: f32[N] {
          Y[i] = sum(eps) A[i, 0]
        }
        """,
        """
        prog.tdsl:4:14: error: 'eps' is a float constant, not an iterator; iterators need fresh names
            Y[i] = sum(eps) A[i, 0]
                       ^^^
        """,
    ),
    "later_temporary_as_iterator": (
        """
        const N = 8
        kernel f(X: f32[N]) -> (Y: f32[N]) {
          T[i] = X[i] * 2.0
          i[j] = T[j] + 1.0
          Y[j] = i[j]
        }
        """,
        """
        prog.tdsl:3:5: error: 'i' is a tensor (written at line 4), not an iterator; iterators need fresh names
            T[i] = X[i] * 2.0
              ^
        """,
    ),
    # a temporary written further down is still a tensor where it is read by name (the line the iterator message
    # adds must not change what the other checks take it for)
    "later_temporary_without_indices": (
        """
        const N = 8
        kernel f(X: f32[N]) -> (Y: f32[N]) {
          T[i] = X[i] * Q
          Q[j] = X[j]
          Y[j] = T[j]
        }
        """,
        """
        prog.tdsl:3:17: error: tensor 'Q' must be indexed, as in Q[...]
            T[i] = X[i] * Q
                          ^
        """,
    ),
    "later_temporary_as_an_index": (
        """
        const N = 8
        kernel f(X: f32[N]) -> (Y: f32[N]) {
          T[i] = X[Q]
          Q[j] = X[j]
          Y[j] = T[j]
        }
        """,
        """
        prog.tdsl:3:12: error: an index cannot read a tensor ('Q'): indirect indexing is not supported
            T[i] = X[Q]
                     ^
        """,
    ),
    "tensor_as_iterator": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] {
          Y[A] = 0
        }
        """,
        """
        prog.tdsl:3:5: error: 'A' is a tensor, not an iterator; iterators need fresh names
            Y[A] = 0
              ^
        """,
    ),
    "lhs_iterator_twice": (
        """
        const N = 8
        kernel f(A: f32[N, N]) -> Y: f32[N, N] {
          Y[i, i] = A[i, i]
        }
        """,
        """
        prog.tdsl:3:8: error: iterator 'i' appears twice on the left-hand side
            Y[i, i] = A[i, i]
                 ^
        """,
    ),
    "reduction_iterator_twice": (
        """
        const N = 8
        kernel f(A: f32[N, N]) -> Y: f32[N] {
          Y[i] = sum(k, k) A[i, k]
        }
        """,
        """
        prog.tdsl:3:17: error: iterator 'k' appears twice in the reduction
            Y[i] = sum(k, k) A[i, k]
                          ^
        """,
    ),
    "reduction_shadows_lhs": (
        """
        const N = 8
        kernel f(A: f32[N, N]) -> Y: f32[N] {
          Y[i] = sum(i) A[i, i]
        }
        """,
        """
        prog.tdsl:3:14: error: reduction iterator 'i' shadows the left-hand iterator 'i'
            Y[i] = sum(i) A[i, i]
                       ^
        """,
    ),
    "dtype_conflicts_with_result": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: bf16[N] {
          Y[i]: f32 = A[i]
        }
        """,
        """
        prog.tdsl:3:3: error: dtype annotation 'f32' conflicts with the declared dtype 'bf16' of result 'Y'
            Y[i]: f32 = A[i]
            ^
        """,
    ),
    "unknown_reduction": (
        """
        const N = 8
        kernel f(A: f32[N, N]) -> Y: f32[N] {
          Y[i] = prod(k) A[i, k]
        }
        """,
        """
        prog.tdsl:3:10: error: unknown reduction 'prod'; expected sum or max or min
            Y[i] = prod(k) A[i, k]
                   ^^^^
        """,
    ),
    "not_equal_in_condition": (
        """
        const N = 8
        kernel f(A: f32[N, N]) -> Y: f32[N, N] {
          Y[i, j : i != j] = A[i, j]
        }
        """,
        """
        prog.tdsl:3:12: error: '!=' is not affine and cannot be used in a condition; split the domain with '<' and '>'
            Y[i, j : i != j] = A[i, j]
                     ^^^^^^
        """,
    ),
    "condition_uses_reduction_iterator": (
        """
        const N = 8
        kernel f(A: f32[N, N]) -> Y: f32[N] {
          Y[i : k < 4] = sum(k) A[i, k]
        }
        """,
        """
        prog.tdsl:3:9: error: reduction iterator 'k' cannot be used in a left-hand condition; put it in the reduction, as in 'sum(k : ...)'
            Y[i : k < 4] = sum(k) A[i, k]
                  ^
        """,
    ),
    "condition_uses_unknown_name": (
        """
        const N = 8
        kernel f(A: f32[N, N]) -> Y: f32[N] {
          Y[i : j < 4] = sum(k) A[i, k]
        }
        """,
        """
        prog.tdsl:3:9: error: 'j' is not an iterator of this statement, a size or a constant
            Y[i : j < 4] = sum(k) A[i, k]
                  ^
        """,
    ),
    # ------------------------------------------------------------ values
    "floor_division_in_value": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] {
          Y[i] = A[i] // 2
        }
        """,
        """
        prog.tdsl:3:10: error: '//' is only allowed in indices and in a statement's conditions (`T[i : ...]`), not in values (a `where` compares values); use '/' to divide values, or indices such as `X[2 * j]`, `X[2 * j + 1]`
            Y[i] = A[i] // 2
                   ^^^^^^^^^
        """,
    ),
    # a `where` condition is a comparison of values, where `%` is not defined (probe Y of the 29th session: the
    # message said "only allowed in ... conditions", which a `where` guard reads as)
    "modulo_in_a_where_condition": (
        """
        const N = 8
        kernel f(X: f32[N]) -> Y: f32[N] {
          Y[d] = where(d % 2 == 0, X[d], -X[d])
        }
        """,
        """
        prog.tdsl:3:16: error: '%' is only allowed in indices and in a statement's conditions (`T[i : ...]`), not in values (a `where` compares values); use '/' to divide values, or indices such as `X[2 * j]`, `X[2 * j + 1]`
            Y[d] = where(d % 2 == 0, X[d], -X[d])
                         ^^^^^
        """,
    ),
    "comparison_outside_where": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] {
          Y[i] = A[i] < 2.0
        }
        """,
        """
        prog.tdsl:3:10: error: a comparison is only allowed as the first argument of where(...)
            Y[i] = A[i] < 2.0
                   ^^^^^^^^^^
        """,
    ),
    "where_needs_comparison": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] {
          Y[i] = where(A[i], 1.0, 0.0)
        }
        """,
        """
        prog.tdsl:3:16: error: the first argument of where(...) must be a comparison, such as 'j <= i'
            Y[i] = where(A[i], 1.0, 0.0)
                         ^^^^
        """,
    ),
    "reduction_not_whole_rhs": (
        """
        const N = 8
        kernel f(A: f32[N, N]) -> Y: f32[N] {
          Y[i] = 1.0 + sum(k) A[i, k]
        }
        """,
        """
        prog.tdsl:3:16: error: a reduction must be the whole right-hand side of a statement; assign it to its own tensor
            Y[i] = 1.0 + sum(k) A[i, k]
                         ^^^^^^^^^^^^^^
        """,
    ),
    "reduction_body_starts_with_minus": (
        """
        const N = 8
        kernel f(A: f32[N, N]) -> Y: f32[N] {
          Y[i] = sum(k) -A[i, k]
        }
        """,
        """
        prog.tdsl:3:10: error: a reduction body cannot start with '-'; put it in parentheses, as in 'sum(k) (-A[i, k])'
            Y[i] = sum(k) -A[i, k]
                   ^^^^^^^^^^^^^^^
        """,
    ),
    "tensor_not_indexed": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] {
          Y[i] = A + 1
        }
        """,
        """
        prog.tdsl:3:10: error: tensor 'A' must be indexed, as in A[...]
            Y[i] = A + 1
                   ^
        """,
    ),
    "not_an_iterator_of_this_statement": (
        """
        const N = 8
        kernel f(A: f32[N], B: f32[N]) -> Y: f32[N] {
          T[j] = A[j]
          Y[i] = T[i] + B[j]
        }
        """,
        """
        prog.tdsl:4:19: error: 'j' is not an iterator of this statement, a size or a constant
            Y[i] = T[i] + B[j]
                            ^
        """,
    ),
    "not_an_iterator_did_you_mean": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] {
          Y[row] = A[rows]
        }
        """,
        """
        prog.tdsl:3:14: error: 'rows' is not an iterator of this statement, a size or a constant; did you mean 'row'?
            Y[row] = A[rows]
                       ^^^^
        """,
    ),
    "read_before_defined": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] {
          Y[i] = T[i]
          T[i] = A[i]
        }
        """,
        """
        prog.tdsl:3:10: error: tensor 'T' is read before it is defined (it is computed at line 4)
            Y[i] = T[i]
                   ^
        """,
    ),
    "read_result_never_computed": (
        """
        const N = 8
        kernel f(A: f32[N]) -> (Y: f32[N], Z: f32[N]) {
          Y[i] = Z[i]
        }
        """,
        """
        prog.tdsl:3:10: error: tensor 'Z' is read before it is defined (it is never computed)
            Y[i] = Z[i]
                   ^
        """,
    ),
    "size_is_not_a_tensor": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] {
          Y[i] = N[i]
        }
        """,
        """
        prog.tdsl:3:10: error: 'N' is a size, not a tensor
            Y[i] = N[i]
                   ^
        """,
    ),
    "unknown_tensor": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] {
          Y[i] = Q[i]
        }
        """,
        """
        prog.tdsl:3:10: error: unknown tensor 'Q'
            Y[i] = Q[i]
                   ^
        """,
    ),
    "unknown_tensor_did_you_mean": (
        """
        const N = 8
        kernel f(Alpha: f32[N]) -> Y: f32[N] {
          Y[i] = Alpah[i]
        }
        """,
        """
        prog.tdsl:3:10: error: unknown tensor 'Alpah'; did you mean 'Alpha'?
            Y[i] = Alpah[i]
                   ^^^^^
        """,
    ),
    "sum_without_body": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] {
          Y[i] = sum(A[i])
        }
        """,
        """
        prog.tdsl:3:10: error: 'sum' is a reduction and needs a body, as in 'sum(k) A[i, k]'
            Y[i] = sum(A[i])
                   ^^^
        """,
    ),
    "unknown_function": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] {
          Y[i] = gelu(A[i])
        }
        """,
        """
        prog.tdsl:3:10: error: unknown function 'gelu'
            Y[i] = gelu(A[i])
                   ^^^^
        """,
    ),
    "unknown_function_did_you_mean": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] {
          Y[i] = sigmod(A[i])
        }
        """,
        """
        prog.tdsl:3:10: error: unknown function 'sigmod'; did you mean 'sigmoid'?
            Y[i] = sigmod(A[i])
                   ^^^^^^
        """,
    ),
    "wrong_number_of_arguments": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] {
          Y[i] = where(i < 4, A[i])
        }
        """,
        """
        prog.tdsl:3:10: error: 'where' takes 3 arguments, got 2
            Y[i] = where(i < 4, A[i])
                   ^^^^^^^^^^^^^^^^^^
        """,
    ),
    "fma_with_two_arguments": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] {
          Y[i] = fma(A[i], 2.0)
        }
        """,
        """
        prog.tdsl:3:10: error: 'fma' takes 3 arguments, got 2
            Y[i] = fma(A[i], 2.0)
                   ^^^^^^^^^^^^^^
        """,
    ),
    "max_with_one_argument": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] {
          Y[i] = max(A[i])
        }
        """,
        """
        prog.tdsl:3:10: error: 'max' takes 2 arguments, got 1 (a reduction needs a body, as in 'max(k) A[i, k]')
            Y[i] = max(A[i])
                   ^^^^^^^^^
        """,
    ),
    # ------------------------------------------------------------ indices and conditions
    "float_in_index": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] {
          Y[i] = A[0.5]
        }
        """,
        """
        prog.tdsl:3:12: error: a float cannot be used in an index
            Y[i] = A[0.5]
                     ^^^
        """,
    ),
    "float_const_in_index": (
        """
        const N = 8
        const eps = 1e-6
        kernel f(A: f32[N]) -> Y: f32[N] {
          Y[i] = A[eps]
        }
        """,
        """
        prog.tdsl:4:12: error: float constant 'eps' cannot be used in an index; only int sizes can
            Y[i] = A[eps]
                     ^^^
        """,
    ),
    "indirect_index": (
        """
        const N = 8
        kernel f(A: f32[N], P: f32[N]) -> Y: f32[N] {
          Y[i] = A[P[i]]
        }
        """,
        """
        prog.tdsl:3:12: error: an index cannot read a tensor ('P'): indirect indexing is not supported
            Y[i] = A[P[i]]
                     ^^^^
        """,
    ),
    "function_in_index": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] {
          Y[i] = A[abs(i)]
        }
        """,
        """
        prog.tdsl:3:12: error: an index cannot call a function ('abs')
            Y[i] = A[abs(i)]
                     ^^^^^^
        """,
    ),
    "slash_in_index": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] {
          Y[i] = A[i / 2]
        }
        """,
        """
        prog.tdsl:3:12: error: use '//' for integer division in an index, not '/'
            Y[i] = A[i / 2]
                     ^^^^^
        """,
    ),
    "floor_division_by_non_literal": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] {
          Y[i] = A[i // N]
        }
        """,
        """
        prog.tdsl:3:12: error: '//' in an index needs a positive integer literal on its right, found 'N'
            Y[i] = A[i // N]
                     ^^^^^^
        """,
    ),
    "product_of_iterators": (
        """
        const N = 8
        kernel f(A: f32[N, N]) -> Y: f32[N, N] {
          Y[i, j] = A[i, i * j]
        }
        """,
        """
        prog.tdsl:3:18: error: an index must be affine, but 'i * j' multiplies two non-constant terms
            Y[i, j] = A[i, i * j]
                           ^^^^^
        """,
    ),
    "product_with_param": (
        """
        param B
        kernel f(A: f32[B]) -> Y: f32[B] {
          Y[i] = A[B * i]
        }
        """,
        """
        prog.tdsl:3:12: error: an index must be affine, but 'B * i' multiplies two non-constant terms
            Y[i] = A[B * i]
                     ^^^^^
        """,
    ),
    "non_affine_condition": (
        """
        const N = 8
        kernel f(A: f32[N, N]) -> Y: f32[N, N] {
          Y[i, j : i * j < 8] = A[i, j]
        }
        """,
        """
        prog.tdsl:3:12: error: a condition must be affine, but 'i * j' multiplies two non-constant terms
            Y[i, j : i * j < 8] = A[i, j]
                     ^^^^^
        """,
    ),
    # ------------------------------------------------------------ iterator ranges
    "iterator_ranges_disagree": (
        """
        const M = 64, K = 32, N = 16
        kernel f(A: f32[M, K], W: f32[K, N]) -> Y: f32[M, N] {
          C[i, j] = sum(k) A[i, k] * W[j, k]
          Y[i, j] = C[i, j]
        }
        """,
        """
        prog.tdsl:3:30: error: iterator 'k' ranges over K in A[i, k] but over N in W[j, k]
            C[i, j] = sum(k) A[i, k] * W[j, k]
                                       ^^^^^^^
        """,
    ),
    "iterator_range_disagrees_with_result": (
        """
        const M = 64, K = 32
        kernel f(A: f32[M, K]) -> Y: f32[M, M] {
          Y[i, j] = A[i, j]
        }
        """,
        """
        prog.tdsl:3:13: error: iterator 'j' ranges over M in Y[i, j] but over K in A[i, j]
            Y[i, j] = A[i, j]
                      ^^^^^^^
        """,
    ),
    "cannot_infer_range": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] {
          T[i] = 2 * i
          Y[i] = T[i]
        }
        """,
        """
        prog.tdsl:3:5: error: cannot infer the range of iterator 'i': index a tensor with it directly (A[i]) or backwards (A[N - 1 - i] for a dimension of extent N), bound it above by a condition (i < N, or i <= an iterator that has a range), or run it in a loop block
            T[i] = 2 * i
              ^
        """,
    ),
    "cannot_infer_reduction_range": (
        """
        const N = 8
        kernel f(A: f32[N, N]) -> Y: f32[N] {
          Y[i] = sum(k) A[i, 2 * k]
        }
        """,
        """
        prog.tdsl:3:14: error: cannot infer the range of iterator 'k': index a tensor with it directly (A[k]) or backwards (A[N - 1 - k] for a dimension of extent N), bound it above by a condition (k < N, or k <= an iterator that has a range), or run it in a loop block
            Y[i] = sum(k) A[i, 2 * k]
                       ^
        """,
    ),
    # ------------------------------------------------------------ schedules
    "duplicate_schedule": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] { Y[i] = A[i] }
        schedule s { split(Y.i, 4) }
        schedule s { split(Y.i, 2) }
        """,
        """
        prog.tdsl:4:1: error: duplicate definition of schedule 's' (first defined at line 3)
          schedule s { split(Y.i, 2) }
          ^^^^^^^^
        """,
    ),
    "unknown_kernel_in_schedule": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] { Y[i] = A[i] }
        schedule s for gemm { split(Y.i, 4) }
        """,
        """
        prog.tdsl:3:16: error: unknown kernel 'gemm' in schedule 's'
          schedule s for gemm { split(Y.i, 4) }
                         ^^^^
        """,
    ),
    "unknown_kernel_did_you_mean": (
        """
        const N = 8
        kernel gemm(A: f32[N]) -> Y: f32[N] { Y[i] = A[i] }
        schedule s for gemn { split(Y.i, 4) }
        """,
        """
        prog.tdsl:3:16: error: unknown kernel 'gemn' in schedule 's'; did you mean 'gemm'?
          schedule s for gemn { split(Y.i, 4) }
                         ^^^^
        """,
    ),
    "schedule_without_kernel": (
        """
        schedule s { split(Y.i, 4) }
        """,
        """
        prog.tdsl:1:1: error: schedule 's' has no kernel to apply to: the program defines no kernel
          schedule s { split(Y.i, 4) }
          ^^^^^^^^
        """,
    ),
    "schedule_needs_for": (
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] { Y[i] = A[i] }
        kernel g(A: f32[N]) -> Y: f32[N] { Y[i] = A[i] }
        schedule s { split(Y.i, 4) }
        """,
        """
        prog.tdsl:4:1: error: schedule 's' must name its kernel ('schedule s for KERNEL'): the program defines several (f, g)
          schedule s { split(Y.i, 4) }
          ^^^^^^^^
        """,
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_error_message(name):
    source, expected = CASES[name]
    with pytest.raises(SourceError) as info:
        load_source(_text(source) + "\n", "prog.tdsl")
    assert str(info.value) == _text(expected)


# ------------------------------------------------------------ messages whose programs are built in code


def test_program_too_long():
    from tdsl.frontend.limits import MAX_SOURCE_CHARS

    filler = "# padding\n" * (MAX_SOURCE_CHARS // 10)  # 10 characters a line, up to the limit exactly
    text = filler + "const N = 8\n"
    with pytest.raises(SourceError) as info:
        load_source(text, "prog.tdsl")
    line = MAX_SOURCE_CHARS // 10 + 1
    assert str(info.value) == _text(
        f"""
        prog.tdsl:{line}:{MAX_SOURCE_CHARS - (line - 1) * 10 + 1}: error: the program is longer than 65536 characters (64 KiB), the most tdsl reads; split it into several files (one per kernel)
          const N = 8
                ^
        """
    )


def test_file_not_utf8(tmp_path):
    path = tmp_path / "prog.tdsl"
    path.write_bytes(b"const N = 8\nkernel f(A: f32[N]) -> Y: f32[N] { Y[i] = A[i] } # caf\xe9\n")
    with pytest.raises(SourceError) as info:
        load_file(path)
    assert str(info.value) == _text(
        f"""
        {path}:2:55: error: the file is not UTF-8 text: byte 0xe9 cannot be decoded (tdsl programs are UTF-8)
          kernel f(A: f32[N]) -> Y: f32[N] {{ Y[i] = A[i] }} # caf\\xe9
                                                                ^^^^
        """
    )


def test_file_not_utf8_without_a_position(tmp_path):
    # When the undecodable byte cannot be found again (the file changed between the two reads), the error
    # names the file only.
    from tdsl.frontend.source import _not_utf8

    path = tmp_path / "prog.tdsl"
    path.write_text("const N = 8\n")
    assert str(_not_utf8(path)) == f"cannot read '{path}': it is not UTF-8 text"


def test_file_defines_no_kernel(tmp_path):
    from tdsl.compiler.driver.api import load
    from tdsl.frontend.diagnostics import TdslError

    path = tmp_path / "sizes.tdsl"
    path.write_text("const M = 8, N = 8\n")
    with pytest.raises(TdslError) as info:
        load(path).schedule()
    assert str(info.value) == f"{path} defines no kernel: a program needs a 'kernel NAME(...) -> ... {{ ... }}'"


def test_hand_built_tree_nested_too_deeply():
    # The parser refuses deep expressions with a position; a tree built in Python can still be deeper than
    # Python's recursion allows, and is refused without one.
    from tdsl.frontend import ast
    from tdsl.frontend.check import check_program

    span = ast.Span(1, 1, 1, 2)
    value = ast.IntLit(1, span)
    for _ in range(5000):
        value = ast.Neg(value, span)
    result = ast.TensorParam("Y", ast.TensorType("f32", [ast.IntLit(4, span)], span), span)
    kernel = ast.Kernel("f", [], [result], [ast.Statement("Y", [ast.Name("i", span)], [], None, value, span)], span)
    program = ast.Program([], [kernel], [], source="", filename="built.tdsl")
    with pytest.raises(SourceError) as info:
        check_program(program)
    assert str(info.value) == "built.tdsl: error: the program is nested too deeply"
