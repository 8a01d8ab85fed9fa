"""The polyhedral model of a kernel: isl iteration domains, access relations, dtypes.

`build_model(checked_kernel, sizes)` lowers a semantically checked kernel
(`tdsl.frontend.check.KernelInfo`) to one `Stmt` per statement:

* the iteration domain, an `isl.Set` named after the statement whose
  dimensions are the left-hand iterators followed by the reduction
  iterators (`{ C[i, j, k] : 0 <= i < 1024 and ... }`);
* read and write access relations (`isl.Map`, `{ C[i, j, k] -> A[i, k] }`);
* the storage dtype and, for reductions, the accumulator dtype and the
  reduction operator.

Sizes: a `const` or a `param` bound in `sizes` becomes a number; an
unbound `param` stays an isl parameter, so legality is proven for every
value of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import islpy as isl

from tdsl.frontend import ast


@dataclass
class Access:
    tensor: str
    relation: isl.Map  # statement instance -> tensor element
    node: Optional[ast.Access] = None  # where in the source (None for a write)
    # a read of the value a sum starts from (`sum(k) ... from x`): read once per element, before the terms.  A
    # flag, not the node's identity: the steps that rewrite expressions (compute_inline) make new nodes.
    start: bool = False


@dataclass
class Stmt:
    name: str  # = the written tensor's name
    lhs_iters: list[str]
    red_iters: list[str]
    domain: isl.Set
    value: ast.Expr  # the element expression; for a reduction, its body
    dtype: str  # storage dtype: every store rounds to it
    reduce_op: Optional[str] = None  # "sum" | "max" | "min" | None (compiler/model/reduce_ops.py)
    accum_dtype: Optional[str] = None  # accumulator dtype of a reduction
    combine: Optional[str] = None  # declared combine policy (None = strict order)
    # the value a sum starts from (`sum(k) ... from init`), over the left-hand iterators; None: the identity
    init: Optional[ast.Expr] = None
    # A sum whose terms are computed with a running maximum (compiler/model/online.py, set by the online step):
    # the accumulator is rescaled to the maximum's current value before each update.
    rescale: Optional[object] = None
    reads: list[Access] = field(default_factory=list)
    write: Optional[Access] = None
    span: ast.Span = ast.NOSPAN
    loops: list[str] = field(default_factory=list)  # iterators of the enclosing `for` blocks, outermost first
    # program order: the position in the kernel body, then in each enclosing block's body (len(loops) + 1 numbers);
    # empty: the statement's index among the kernel's statements (a model built by hand)
    order: list[int] = field(default_factory=list)

    @property
    def iters(self) -> list[str]:
        return self.lhs_iters + self.red_iters

    @property
    def is_reduction(self) -> bool:
        return self.reduce_op is not None


@dataclass
class Tensor:
    name: str
    dtype: str
    shape: list[object]  # int, or str for an unbound param (or an isl.PwAff string)
    kind: str  # "input" | "output" | "temp"
    box: isl.Set = None  # { A[a0, a1] : 0 <= a0 < M and 0 <= a1 < K }
    fold: tuple = ()  # ((dim, planes), ...): element index d is stored at d mod planes (`fold_storage`)
    stored_in: Optional[str] = None  # the kernel input whose array holds this output's elements (`store_in`)
    copies: int = 0  # leading dimensions that index one copy per tile of a consumer loop (`recompute_at`)
    copied: int = 0  # how many distinct elements of the original tensor those copies hold (for the cost report)


@dataclass
class KernelModel:
    name: str
    stmts: list[Stmt]
    tensors: dict[str, Tensor]
    sizes: dict[str, object]  # name -> int/float value (bound) or None (symbolic param)
    params: list[str]  # names that remain isl parameters
    ctx: isl.Context = None
    # The largest value of a run-time size the launcher accepts, where a `where` compares iterators and sizes
    # (`SIZE_LIMIT`); None: no such limit.
    size_limit: Optional[int] = None

    def stmt(self, name: str) -> Stmt:
        for s in self.stmts:
            if s.name == name:
                return s
        raise KeyError(name)

    def inputs(self) -> list[Tensor]:
        return [t for t in self.tensors.values() if t.kind == "input"]

    def outputs(self) -> list[Tensor]:
        return [t for t in self.tensors.values() if t.kind == "output"]


# ---------------------------------------------------------------- lowering from the checked AST

from tdsl.frontend.diagnostics import SourceError, TdslError  # noqa: E402


def affine_text(expr: ast.Expr, sizes: dict) -> str:
    """An affine index/condition expression as isl syntax; bound sizes become numbers.

    isl reads `//` and `%` only with an integer literal as divisor and no parentheses around it:
    `floor((e)/4)` and `((e) mod 4)`; both floor like Python, so negative operands agree."""
    if isinstance(expr, ast.IntLit):
        return str(expr.value)
    if isinstance(expr, ast.Name):
        value = sizes.get(expr.name)
        return str(value) if isinstance(value, int) else expr.name
    if isinstance(expr, ast.Neg):
        return f"(-{affine_text(expr.operand, sizes)})"
    if isinstance(expr, ast.BinOp):
        lhs = affine_text(expr.lhs, sizes)
        if expr.op == "//":
            return f"floor(({lhs})/{_divisor(expr, sizes)})"
        if expr.op == "%":
            return f"(({lhs}) mod {_divisor(expr, sizes)})"
        if expr.op == "*":
            return _product_text(expr, sizes)
        return f"({lhs} {expr.op} {affine_text(expr.rhs, sizes)})"
    if isinstance(expr, ast.Compare):
        op = "=" if expr.op == "==" else expr.op
        return f"{affine_text(expr.lhs, sizes)} {op} {affine_text(expr.rhs, sizes)}"
    raise SourceError("expected an affine expression", getattr(expr, "span", None))


def _product_text(expr: ast.BinOp, sizes: dict) -> str:
    """A product as isl reads it: a constant factor as one integer literal before the other (`-2 * (i)`).  isl
    does not read a parenthesised factor such as `(-2) * i` or `(1 + 1) * i`, which a schedule's rewrite (skew,
    recompute_at) or a program can produce; a product of two non-constant factors is left for isl to refuse."""
    for const, other in ((expr.lhs, expr.rhs), (expr.rhs, expr.lhs)):
        value = constant_value(const, sizes)
        if value is not None:
            return f"({value} * ({affine_text(other, sizes)}))"
    return f"({affine_text(expr.lhs, sizes)} * {affine_text(expr.rhs, sizes)})"


def _divisor(expr: ast.BinOp, sizes: dict) -> int:
    """The positive integer on the right of `//` or `%` (the language allows only a literal there)."""
    value = constant_value(expr.rhs, sizes)
    if value is None or value < 1:
        raise SourceError(f"'{expr.op}' needs a positive integer literal on its right", getattr(expr, "span", None))
    return value


def constant_value(expr: ast.Expr, sizes: dict) -> Optional[int]:
    """The integer value of an expression over literals and bound sizes (floor `//`, Python `%`), else None."""
    if isinstance(expr, ast.IntLit):
        return expr.value
    if isinstance(expr, ast.Name):
        value = sizes.get(expr.name)
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if isinstance(expr, ast.Neg):
        value = constant_value(expr.operand, sizes)
        return None if value is None else -value
    if not isinstance(expr, ast.BinOp):
        return None
    lhs, rhs = constant_value(expr.lhs, sizes), constant_value(expr.rhs, sizes)
    if lhs is None or rhs is None:
        return None
    if expr.op in ("//", "%"):
        if rhs < 1:
            return None
        return lhs // rhs if expr.op == "//" else lhs % rhs
    return {"+": lhs + rhs, "-": lhs - rhs, "*": lhs * rhs}.get(expr.op)


def _param_prefix(params: list[str]) -> str:
    return f"[{', '.join(params)}] -> " if params else ""


def collect_accesses(expr: ast.Expr) -> list[ast.Access]:
    """Every tensor read in a value expression, left to right."""
    return [e for e in ast.walk(expr) if isinstance(e, ast.Access)]


def start_reads(stmt: "Stmt") -> list["Access"]:
    """The reads of the value a sum starts from (`sum(k) ... from x`); empty for any other statement."""
    return [r for r in stmt.reads if r.start]


def resolve_sizes(decls: dict, overrides: Optional[dict] = None) -> dict:
    """name -> value for every size: consts take their value (or the override), params the override or None."""
    overrides = dict(overrides or {})
    unknown = sorted(set(overrides) - set(decls))
    if unknown:
        from tdsl.frontend.diagnostics import TdslError

        known = [n for n, d in decls.items() if not isinstance(d.value, float)]  # a float constant is no size
        raise TdslError(f"unknown sizes given: {', '.join(unknown)} (known: {', '.join(known) or 'none'})")
    sizes = {}
    for name, decl in decls.items():
        if name in overrides:
            overrides[name] = _check_size_value(name, decl, overrides[name])
        sizes[name] = overrides.get(name, decl.value)
    return sizes


def _check_elements(tensor: "Tensor") -> None:
    """Generated kernels index tensors with 32-bit offsets: a parameter holds at most 2^31 - 1 elements.  A
    statement's tensor is checked where a kernel keeps it in global memory (compiler/lower/passes/int32.py): a
    schedule may never store it (FlashAttention's scores)."""
    from tdsl.frontend.diagnostics import TdslError
    from tdsl.frontend.limits import MAX_INT

    if tensor.kind == "temp" or not all(isinstance(d, int) for d in tensor.shape):
        return
    count = 1
    for d in tensor.shape:
        count *= d
    if count > MAX_INT:
        dims = " x ".join(map(str, tensor.shape))
        raise TdslError(f"tensor {tensor.name} would hold {count} elements ({dims}); at most {MAX_INT} (2^31 - 1) "
                        f"fit the 32-bit offsets of generated kernels: choose smaller sizes")


def _check_size_value(name: str, decl, value) -> int:
    """A size bound from the command line or the Python API obeys the language's limits (docs/language.md); an
    integer of another type (NumPy's `np.int64(8)`) is the int it stands for."""
    from tdsl.frontend.diagnostics import TdslError
    from tdsl.frontend.limits import MAX_INT, plain_int

    if isinstance(decl.value, float):
        raise TdslError(f"'{name}' is a float constant, not a size; it cannot be given a value")
    value = plain_int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TdslError(f"size {name} must be an integer, got {value!r}")
    if not 1 <= value <= MAX_INT:
        shown = str(value) if abs(value) < 10**20 else f"a number of {len(str(abs(value)))} digits"
        raise TdslError(f"size {name} must be between 1 and {MAX_INT} (2^31 - 1), got {shown}")
    return value


def build_model(kinfo, sizes: Optional[dict] = None, ctx: Optional[isl.Context] = None) -> KernelModel:
    """Lower a checked kernel (`frontend.check.KernelInfo`) to isl domains and accesses."""
    ctx = ctx or isl.DEFAULT_CONTEXT
    values = resolve_sizes(kinfo.sizes, sizes)
    params = [n for n, v in values.items() if v is None]
    prefix = _param_prefix(params)
    positive = " and ".join(f"{p} > 0" for p in params)

    tensors = {}
    for name, info in kinfo.tensors.items():
        shape = [_shape_value(d, values) for d in info.shape]
        dims = [f"__a{n}" for n in range(len(shape))]  # '__' names are reserved: no size can be called so
        bounds = [f"0 <= {d} < {affine_text(e, values)}" for d, e in zip(dims, info.shape)]
        if positive:
            bounds.append(positive)
        box = isl.Set.read_from_str(ctx, f"{prefix}{{ {name}[{', '.join(dims)}] : {' and '.join(bounds) or 'true'} }}")
        tensors[name] = Tensor(name, info.dtype, shape, info.kind, box, stored_in=info.stored_in)
        _check_elements(tensors[name])

    stmts = [_lower_statement(si, values, prefix, positive, ctx) for si in kinfo.stmts]
    model = KernelModel(kinfo.kernel.name, stmts, tensors, values, params, ctx)
    if params and any(_compares_indices(s, values) for s in stmts):
        model.size_limit = SIZE_LIMIT
    _check_domains_not_empty(model, kinfo)
    _check_writes_in_bounds(model)
    _check_reads_in_bounds(model)
    from tdsl.compiler.model.recurrences import check_recurrences

    check_recurrences(model)
    _check_signature_storage(model, kinfo)
    from tdsl.compiler.model.online import mark_exponent_reads

    mark_exponent_reads(model)
    return model


def _check_signature_storage(model: KernelModel, kinfo) -> None:
    """A result the signature keeps in a parameter (`C: f32[M, N] in C_in`) must let the program read every
    element of the parameter before the result replaces it (rule storage-overwrite, checked as `store_in`
    checks it), or the program as written is refused at its `in`."""
    from tdsl.compiler.errors import StorageOverwrite
    from tdsl.compiler.legality.storage import check_storage_order

    try:
        check_storage_order(model, "the kernel's signature")
    except StorageOverwrite as err:
        stored = [t for t in kinfo.tensors.values() if t.stored_in]
        info = next((t for t in stored if t.name in err.statements), stored[0])  # the writer the error names
        raise SourceError(f"'{info.name}' cannot be kept in '{info.stored_in}' [rule storage-overwrite]: "
                          f"{err.detail}; {err.counterexample}", info.stored_in_span) from None


def _shape_value(expr: ast.Expr, values: dict):
    """A dimension: its number when every size in it is bound, else its isl text (a symbolic size)."""
    value = constant_value(expr, values)
    return value if value is not None else affine_text(expr, values)


def _ranges(si, iters: list[str], values: dict) -> list[str]:
    """`0 <= it < extent` for each of the statement's iterators named."""
    return [f"0 <= {it} < {affine_text(si.extents[it], values)}" for it in iters]


def _domain(si, values: dict, prefix: str, positive: str, ctx) -> isl.Set:
    """A statement's instances: its iterators' ranges, its conditions and its reduction's."""
    iters = [n.name for n in si.stmt.iters] + ([n.name for n in si.reduce.iters] if si.reduce else [])
    constraints = _ranges(si, iters, values) + [affine_text(c, values) for c in si.stmt.conditions]
    if si.reduce:
        constraints += [affine_text(c, values) for c in si.reduce.conditions]
    if positive:
        constraints.append(positive)
    tup = f"{si.stmt.target}[{', '.join(iters)}]"
    return isl.Set.read_from_str(ctx, f"{prefix}{{ {tup} : {' and '.join(constraints)} }}")


def _lower_statement(si, values: dict, prefix: str, positive: str, ctx) -> Stmt:
    stmt = si.stmt
    red = si.reduce
    lhs = [n.name for n in stmt.iters]
    red_iters = [n.name for n in red.iters] if red else []
    iters = lhs + red_iters
    tup = f"{stmt.target}[{', '.join(iters)}]"
    domain = _domain(si, values, prefix, positive, ctx)

    value = red.body if red else stmt.value
    # the start value's reads count at every instance (it is read before whichever term a schedule runs first)
    init = red.init if red else None
    reads = []
    for expr in [value] + ([init] if init is not None else []):
        taken = taken_domains(expr, domain, values, prefix, tup)
        reads += [Access(acc.tensor, _access_map(acc, values, prefix, tup, taken[id(acc)]), acc, expr is init)
                  for acc in collect_accesses(expr)]
    write_rel = isl.Map.read_from_str(ctx, f"{prefix}{{ {tup} -> {stmt.target}[{', '.join(lhs)}] }}").intersect_domain(domain)
    if init is not None:  # the elements: the left-hand ranges and conditions, without the reduction's
        elements = _ranges(si, lhs, values) + [affine_text(c, values) for c in stmt.conditions]
        elements += [positive] if positive else []
        _check_every_element_has_a_term(si, prefix, elements, write_rel)
    return Stmt(
        name=stmt.target,
        lhs_iters=lhs,
        red_iters=red_iters,
        domain=domain,
        value=value,
        dtype=si.dtype,
        reduce_op=red.op if red else None,
        accum_dtype=(red.accum or "f32") if red else None,
        combine=red.combine if red else None,
        init=init,
        reads=reads,
        write=Access(stmt.target, write_rel),
        span=stmt.span,
        loops=list(si.loops),
        order=list(si.order),
    )


def _check_every_element_has_a_term(si, prefix: str, constraints: list, write_rel: isl.Map) -> None:
    """A sum that starts from a value stores the value with its first term: an element whose reduction range is
    empty would never be written (C code would keep the start value there).  `constraints`: the elements'."""
    stmt = si.stmt
    lhs = [n.name for n in stmt.iters]
    elements = isl.Set.read_from_str(write_rel.get_ctx(),
                                     f"{prefix}{{ {stmt.target}[{', '.join(lhs)}] : {' and '.join(constraints)} }}")
    missing = elements.subtract(write_rel.range())
    if missing.is_empty():
        return
    params, coords = first_point(missing)
    at = f" with {', '.join(f'{k}={v}' for k, v in params.items())}" if params else ""
    raise SourceError(f"{stmt.target}[{', '.join(map(str, coords))}]{at} has no term: the reduction's range is empty "
                      f"there, so the value its sum starts from would never be stored; a sum from a value needs a "
                      f"term for every element (bound the left-hand iterators, or keep the element in the range with "
                      f"a term of -0.0: `sum(k : k <= i) where(k < i, ..., -0.0) from ...`, as x + -0.0 is x)",
                      si.reduce.init.span)


def _access_map(node: ast.Access, values: dict, prefix: str, tup: str, domain: isl.Set) -> isl.Map:
    index = ", ".join(affine_text(i, values) for i in node.indices)
    return isl.Map.read_from_str(domain.get_ctx(), f"{prefix}{{ {tup} -> {node.tensor}[{index}] }}").intersect_domain(domain)


def taken_domains(value: ast.Expr, domain: isl.Set, sizes: dict, prefix: str, tup: str) -> dict[int, isl.Set]:
    """id(read) -> the instances at which the read is evaluated: inside `where(c, a, b)` with an affine condition
    `c`, the reads of `a` only where `c` holds and those of `b` only where it does not (the interpreter evaluates
    only the chosen branch).  So a guarded read may reach outside its tensor where it is not taken (a boundary
    case, `where(i == 0, x[i], y[i - 1] + x[i])`), and dependences count only the reads that happen."""
    out: dict[int, isl.Set] = {}

    def visit(e: ast.Expr, dom: isl.Set) -> None:
        if isinstance(e, ast.Access):
            out[id(e)] = dom
            return
        if isinstance(e, ast.Call) and e.func == "where" and len(e.args) == 3:
            holds = _condition_set(e.args[0], domain, sizes, prefix, tup)
            visit(e.args[0], dom)
            if holds is None:
                visit(e.args[1], dom)
                visit(e.args[2], dom)
                return
            # values compare as f32: beyond 2^24 an integer may round to its neighbour's value, and there both
            # branches may be taken
            inexact = domain.subtract(_exact_f32(e.args[0], domain, sizes, prefix, tup))
            visit(e.args[1], dom.intersect(holds.union(inexact)))
            visit(e.args[2], dom.subtract(holds).union(dom.intersect(inexact)))
            return
        for child in ast.children(e):
            visit(child, dom)

    visit(value, domain)
    return out


def _condition_set(cond: ast.Expr, domain: isl.Set, sizes: dict, prefix: str, tup: str) -> Optional[isl.Set]:
    """The instances where an affine comparison of iterators and int sizes holds; None for a comparison of values
    (it depends on data: both branches may be taken anywhere)."""
    if not isinstance(cond, ast.Compare) or not _affine_only(cond, domain, sizes):
        return None
    if cond.op == "!=":
        equal = _condition_set(ast.Compare("==", cond.lhs, cond.rhs, cond.span), domain, sizes, prefix, tup)
        return None if equal is None else domain.subtract(equal)
    try:
        text = affine_text(cond, sizes)
        return isl.Set.read_from_str(domain.get_ctx(), f"{prefix}{{ {tup} : {text} }}").intersect(domain)
    except (SourceError, isl.Error):
        return None  # not affine (a product of two iterators)


# A `where` compares f32 values, exact for integers up to 2^24.  In a kernel with run-time sizes whose conditions
# compare iterators and sizes, the launcher refuses a size beyond 2^23 (backends/common/launcher.py): then an
# iterator plus an offset, or twice a size, still compares exactly, and a boundary read guarded by
# `where(i < N - 1, ...)` is checked as guarded, as it is at every size the kernel runs at.
SIZE_LIMIT = 2 ** 23


def _exact_f32(cond: ast.Compare, domain: isl.Set, sizes: dict, prefix: str, tup: str) -> isl.Set:
    """The instances where both sides of the comparison are integers of at most 2^24 in magnitude: exact in f32, so
    the comparison of values (the interpreter's and the kernels') agrees with isl's comparison of integers.  With
    run-time sizes, also those at sizes beyond SIZE_LIMIT, which the launcher refuses (the kernel never runs them)."""
    bound = 2 ** 24
    sides = [affine_text(side, sizes) for side in (cond.lhs, cond.rhs)]
    text = " and ".join(f"{-bound} <= {side} <= {bound}" for side in sides)
    params = [domain.get_dim_name(isl.dim_type.param, k) for k in range(domain.dim(isl.dim_type.param))]
    refused = [f"{p} > {SIZE_LIMIT}" for p in params]
    text = " or ".join([f"({text})"] + refused)
    return isl.Set.read_from_str(domain.get_ctx(), f"{prefix}{{ {tup} : {text} }}").intersect(domain)


def _compares_indices(stmt: "Stmt", sizes: dict) -> bool:
    """Does a `where` of the statement compare iterators and sizes (an affine condition)?"""
    exprs = [stmt.value] + ([stmt.init] if stmt.init is not None else [])
    return any(isinstance(e, ast.Call) and e.func == "where" and len(e.args) == 3
               and isinstance(e.args[0], ast.Compare) and _affine_only(e.args[0], stmt.domain, sizes)
               for x in exprs for e in ast.walk(x))


def _affine_only(cond: ast.Compare, domain: isl.Set, sizes: dict) -> bool:
    """Only integer literals, iterators and int sizes, joined by + - * // % (a candidate affine comparison)."""
    iters = {domain.get_dim_name(isl.dim_type.set, k) for k in range(domain.dim(isl.dim_type.set))}
    for node in ast.walk(cond):
        if isinstance(node, ast.Name):
            value = sizes.get(node.name, "unknown")
            if node.name not in iters and not (value is None or (isinstance(value, int) and not isinstance(value, bool))):
                return False
        elif not isinstance(node, (ast.IntLit, ast.BinOp, ast.Neg, ast.Compare)):
            return False
    return True


def read_relation(model: "KernelModel", stmt: Stmt, node: ast.Access, everywhere: bool = False) -> isl.Map:
    """Statement instance -> the element `node` (a read in the statement's value) reads, from its indices (a step
    that rewrites a value, compute_inline, makes new read nodes: they are not found in `stmt.reads` by identity).
    `everywhere`: over every point of the statement's space, not only its instances -- the formula the generated
    code evaluates at every lane (on the instances isl may write it with other iterators that equal them there)."""
    tup = f"{stmt.name}[{', '.join(stmt.iters)}]"
    where = isl.Set.universe(stmt.domain.get_space()) if everywhere else stmt.domain
    return _access_map(node, model.sizes, _stmt_param_prefix(stmt), tup, where)


def write_relation_everywhere(stmt: Stmt) -> isl.Map:
    """Statement instance -> the element it writes, over every point of the statement's space (a statement writes
    its left-hand iterators' element: `S[i, j, k] -> S[i, j]`)."""
    text = f"{{ {stmt.name}[{', '.join(stmt.iters)}] -> {stmt.write.tensor}[{', '.join(stmt.lhs_iters)}] }}"
    return isl.Map.read_from_str(stmt.domain.get_ctx(), _stmt_param_prefix(stmt) + text)


def _stmt_param_prefix(stmt: Stmt) -> str:
    """The `[N, M] -> ` of the statement's run-time sizes, for isl text over its space."""
    space = stmt.domain.get_space()
    return _param_prefix([space.get_dim_name(isl.dim_type.param, k) for k in range(space.dim(isl.dim_type.param))])


def _check_domains_not_empty(model: KernelModel, kinfo) -> None:
    """A statement whose conditions no instance satisfies at any value of the sizes computes nothing: a mistake
    in its ranges or conditions.  One with no instance at the sizes given only (trisolv's updates of the later
    rows at N = 1) computes nothing at those sizes, and the schedule's analysis and lowering leave it out
    (compiler/schedule/empty_statements.py)."""
    for stmt, si in zip(model.stmts, kinfo.stmts):
        if stmt.domain.is_empty() and _empty_at_every_size(si, model):
            raise SourceError(
                f"statement {stmt.name} has no instance: no value of its iterators satisfies its ranges and "
                f"conditions, at any value of the sizes",
                stmt.span,
            )


def _empty_at_every_size(si, model: KernelModel) -> bool:
    """The statement's domain with every integer size left as a parameter (from 1 to the largest size a program
    may have) is empty.  A domain isl cannot state so (a product of two sizes) counts as not empty: the statement
    is only empty at these sizes."""
    from tdsl.frontend.limits import MAX_INT

    values = {n: (None if isinstance(v, int) else v) for n, v in model.sizes.items()}
    params = [n for n, v in values.items() if v is None]
    positive = " and ".join(f"0 < {p} <= {MAX_INT}" for p in params)
    try:
        return _domain(si, values, _param_prefix(params), positive, model.ctx).is_empty()
    except (isl.Error, TdslError):
        return False


def _check_writes_in_bounds(model: KernelModel) -> None:
    """A declared result is written inside its shape (a left-hand iterator ranges over its dimension, except the
    iterator of a `for` block, which ranges over the block's bound)."""
    for stmt in model.stmts:
        tensor = model.tensors[stmt.name]
        bad = stmt.write.relation.intersect_range(tensor.box.complement())
        if bad.is_empty():
            continue
        inst, elem = first_pair(bad)
        raise SourceError(f"{stmt.name} writes outside {tensor.name} (shape [{', '.join(map(str, tensor.shape))}]): "
                          f"{inst} writes {elem}; make the loop bound and the dimension agree", stmt.span)


def _check_reads_in_bounds(model: KernelModel) -> None:
    """Every read must stay inside its tensor and, for a computed tensor, inside what was written."""
    written = {s.name: s.write.relation.range() for s in model.stmts}
    for stmt in model.stmts:
        for acc in stmt.reads:
            tensor = model.tensors[acc.tensor]
            region = written.get(acc.tensor, tensor.box)
            bad = acc.relation.intersect_range(region.complement())
            if bad.is_empty():
                continue
            inst, elem = first_pair(bad)
            what = f"outside {tensor.name} (shape [{', '.join(map(str, tensor.shape))}])"
            if acc.tensor in written:
                what = f"an element of {tensor.name} that no instance of {tensor.name} writes"
            raise SourceError(
                f"{format_access(acc.node)} reads {what}: {inst} reads {elem}",
                acc.node.span if acc.node else stmt.span,
            )


# ---------------------------------------------------------------- concrete instances for messages


def first_point(s: isl.Set) -> tuple[dict, list[int]]:
    """The lexicographically smallest point of a set, parameters first: (param values, coordinates)."""
    nparam = s.dim(isl.dim_type.param)
    names = [s.get_dim_name(isl.dim_type.param, i) for i in range(nparam)]
    flat = s.move_dims(isl.dim_type.set, 0, isl.dim_type.param, 0, nparam) if nparam else s
    point = flat.lexmin().sample_point()
    coords = [point.get_coordinate_val(isl.dim_type.set, i).to_python() for i in range(flat.dim(isl.dim_type.set))]
    return dict(zip(names, coords[:nparam])), coords[nparam:]


def fixed_point(domain: isl.Set, coords, params: Optional[dict] = None) -> isl.Set:
    """`domain` at one point: its coordinates `coords` and the run-time sizes `params` (by name) fixed."""
    ctx = domain.get_ctx()
    for name, value in (params or {}).items():
        position = domain.find_dim_by_name(isl.dim_type.param, name)
        if position >= 0:
            domain = domain.fix_val(isl.dim_type.param, position, isl.Val.int_from_si(ctx, int(value)))
    for k, value in enumerate(coords):
        domain = domain.fix_val(isl.dim_type.set, k, isl.Val.int_from_si(ctx, int(value)))
    return domain


def element_at(relation: isl.Map, coords, params: Optional[dict] = None) -> list[int]:
    """The element an access relation touches at instance `coords` of its statement, at the run-time sizes
    `params` of a counterexample (left free, another size's element could be printed: probe JJ)."""
    image = relation.intersect_domain(fixed_point(relation.domain(), coords, params)).range()
    return [int(c) for c in first_point(image)[1]]


def instance_text(space_name: str, names: list[str], coords: list[int]) -> str:
    inner = ", ".join(f"{n}={v}" for n, v in zip(names, coords))
    return f"{space_name}({inner})"


def first_pair(rel: isl.Map) -> tuple[str, str]:
    """A concrete pair of a relation, printed as `S(i=0, j=1)` and `A[0, 1]`-style text."""
    params, coords = first_point(rel.wrap())
    n_in = rel.dim(isl.dim_type.in_)
    src_name = rel.get_tuple_name(isl.dim_type.in_)
    dst_name = rel.get_tuple_name(isl.dim_type.out)
    src_dims = [rel.get_dim_name(isl.dim_type.in_, i) or f"d{i}" for i in range(n_in)]
    src = instance_text(src_name, src_dims, coords[:n_in])
    dst = f"{dst_name}[{', '.join(map(str, coords[n_in:]))}]"
    if params:
        src += " with " + ", ".join(f"{k}={v}" for k, v in params.items())
    return src, dst


def format_access(node: Optional[ast.Access]) -> str:
    if node is None:
        return "access"
    from tdsl.frontend.printer import expr_text

    return expr_text(node)
