"""The abstract syntax tree of a .tdsl program.

Every node carries a `Span` (line, column, end) so that later stages can
point at the source when they report an error.  The tree is plain data:
semantic checks live in `frontend/check.py`, lowering to isl in
`compiler/model/program.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union


@dataclass(frozen=True)
class Span:
    line: int
    column: int
    end_line: int = 0
    end_column: int = 0


NOSPAN = Span(0, 0)

# Storage / accumulator types of the language.
DTYPES = ("bf16", "f16", "f32", "f8e4m3")


# ---------------------------------------------------------------- index (affine) expressions
# Affine expressions appear in tensor indices, statement / reduction
# conditions and sizes.  They may use iterators, size names, integer
# literals, + - *, and floor division / modulo by an integer literal.


@dataclass
class IntLit:
    value: int
    span: Span = NOSPAN


@dataclass
class FloatLit:
    value: float  # may be inf
    span: Span = NOSPAN


@dataclass
class Name:
    """An iterator, a size (`const`/`param`), or a float constant."""

    name: str
    span: Span = NOSPAN


@dataclass
class BinOp:
    op: str  # + - * / // %   (// and % only in index expressions)
    lhs: "Expr"
    rhs: "Expr"
    span: Span = NOSPAN


@dataclass
class Neg:
    operand: "Expr"
    span: Span = NOSPAN


@dataclass
class Compare:
    op: str  # < <= > >= == !=
    lhs: "Expr"
    rhs: "Expr"
    span: Span = NOSPAN


# ---------------------------------------------------------------- value expressions


@dataclass
class Access:
    """`A[i, k + 1]`: a read of one element of a tensor."""

    tensor: str
    indices: list["Expr"]
    span: Span = NOSPAN
    # read as 0 where the element is -inf: the maximum m of a factor exp((X - m)·c), when m declares `combine
    # online` (FlashAttention's convention, set by compiler/model/online.py `mark_exponent_reads`)
    neg_inf_as_zero: bool = False


@dataclass
class Call:
    """`exp(x)`, `max(a, b)`, `where(c, a, b)`, and casts `bf16(x)`."""

    func: str
    args: list["Expr"]
    span: Span = NOSPAN


@dataclass
class Reduce:
    """`sum(k : k <= i) expr from start accum f32`.

    `iters` are the reduction iterators; `conditions` are affine
    constraints that bound them beyond what the accessed shapes imply;
    `init` is the value a sum starts from (None = 0), evaluated once per
    element, before its first term;
    `accum` is the accumulator dtype (None = the default, f32).
    `combine` is the declared combine policy (None = strict order).
    """

    op: str  # "sum" | "max" | "min"
    iters: list[Name]
    conditions: list[Compare]
    body: "Expr"
    accum: Optional[str] = None
    combine: Optional[str] = None
    span: Span = NOSPAN
    init: Optional["Expr"] = None


Expr = Union[IntLit, FloatLit, Name, BinOp, Neg, Compare, Access, Call, Reduce]


# ---------------------------------------------------------------- declarations


@dataclass
class SizeDecl:
    """`const M = 1024` (value set) or `param B` (value None, known at run time).

    A `const` may also be a float (`const eps = 1e-6`); such a constant
    can be used in value expressions only.
    """

    name: str
    value: Optional[Union[int, float]]
    is_param: bool
    span: Span = NOSPAN


@dataclass
class TensorType:
    dtype: str
    shape: list[Expr]  # affine expressions over sizes (usually plain names / ints)
    span: Span = NOSPAN


@dataclass
class TensorParam:
    name: str
    type: TensorType
    span: Span = NOSPAN
    # `C: f32[M, N] in C_in`: an output kept in an input's array, which the kernel updates in place
    stored_in: Optional[str] = None
    stored_in_span: Span = NOSPAN


@dataclass
class Statement:
    """`C[i, j : cond]: bf16 = expr`.

    `target` is the written tensor, `iters` the left-hand iterators (in
    order), `conditions` optional affine constraints restricting the
    statement's domain, `dtype` the declared storage dtype (None: taken
    from the kernel's result declaration, or f32 for an intermediate).
    """

    target: str
    iters: list[Name]
    conditions: list[Compare]
    dtype: Optional[str]
    value: Expr
    span: Span = NOSPAN


@dataclass
class Block:
    """`for t < T { ... }`: statements that share one outer loop over `iterator` (0 <= t < bound).

    Program order runs the body's items in turn for t = 0, then for t = 1, and so on, so a statement may read
    a tensor that a later statement of the block computes, at the elements of earlier steps (a recurrence across
    statements, proven on the model).  Every statement inside has t among its left-hand iterators: each step
    computes its own elements (storage is the schedule's decision)."""

    iterator: Name
    bound: Expr  # affine over sizes
    body: list[Union[Statement, "Block"]]
    span: Span = NOSPAN


def statements(body: list) -> list[Statement]:
    """The statements of a kernel body in source order, through loop blocks."""
    out: list[Statement] = []
    for item in body:
        out.extend(statements(item.body) if isinstance(item, Block) else [item])
    return out


@dataclass
class Kernel:
    name: str
    params: list[TensorParam]
    results: list[TensorParam]
    body: list[Union[Statement, Block]]
    span: Span = NOSPAN


# ---------------------------------------------------------------- schedules


@dataclass
class LoopRef:
    """`C.ko` (statement and loop) or `ko` (loop name alone)."""

    stmt: Optional[str]
    loop: str
    span: Span = NOSPAN

    @property
    def text(self) -> str:
        """As a schedule block writes it."""
        return f"{self.stmt}.{self.loop}" if self.stmt else self.loop


@dataclass
class ScheduleArg:
    """One positional or keyword argument of a primitive call.

    `value` is an int, a str (a bare name such as `shared`), a LoopRef,
    or a list of those (for `[64, 64]`).
    """

    value: object
    keyword: Optional[str] = None
    span: Span = NOSPAN


@dataclass
class ScheduleStep:
    """`io, ii = split(C.i, 64)`: results, primitive name, arguments."""

    results: list[Name]
    primitive: str
    args: list[ScheduleArg]
    span: Span = NOSPAN


@dataclass
class ScheduleBlock:
    name: str
    kernel: Optional[str]  # `schedule NAME for KERNEL`; None = the program's only kernel
    steps: list[ScheduleStep]
    span: Span = NOSPAN
    kernel_span: Span = NOSPAN  # where `for KERNEL` names it
    name_span: Span = NOSPAN


@dataclass
class Program:
    sizes: list[SizeDecl]
    kernels: list[Kernel]
    schedules: list[ScheduleBlock]
    source: str = ""
    filename: str = "<string>"
    extra: dict = field(default_factory=dict)


# ---------------------------------------------------------------- generic traversal


def children(e: Expr) -> list:
    """The sub-expressions of a node, in source order."""
    if isinstance(e, (BinOp, Compare)):
        return [e.lhs, e.rhs]
    if isinstance(e, Neg):
        return [e.operand]
    if isinstance(e, Access):
        return list(e.indices)
    if isinstance(e, Call):
        return list(e.args)
    if isinstance(e, Reduce):
        return [e.body] + ([e.init] if e.init is not None else [])
    return []


def walk(e: Expr):
    """Every node of an expression, parents before children, left to right."""
    yield e
    for child in children(e):
        yield from walk(child)


def rewrite(e: Expr, fn) -> Expr:
    """A copy of `e` where every node for which `fn(node)` returns an expression is replaced by it
    (its children are then not visited); other nodes are rebuilt around their rewritten children."""
    replaced = fn(e)
    if replaced is not None:
        return replaced
    r = lambda x: rewrite(x, fn)  # noqa: E731
    if isinstance(e, BinOp):
        return BinOp(e.op, r(e.lhs), r(e.rhs), e.span)
    if isinstance(e, Compare):
        return Compare(e.op, r(e.lhs), r(e.rhs), e.span)
    if isinstance(e, Neg):
        return Neg(r(e.operand), e.span)
    if isinstance(e, Access):
        return Access(e.tensor, [r(i) for i in e.indices], e.span, e.neg_inf_as_zero)
    if isinstance(e, Call):
        return Call(e.func, [r(a) for a in e.args], e.span)
    if isinstance(e, Reduce):
        return Reduce(e.op, e.iters, e.conditions, r(e.body), e.accum, e.combine, e.span,
                      None if e.init is None else r(e.init))
    return e
