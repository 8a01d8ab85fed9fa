"""The reference interpreter of tdsl: runs a `KernelModel` instance by instance.

This is the project's oracle.  Given a schedule (an isl `UnionMap` from
statement instances to time vectors) it executes every statement instance in
the order of its time vector, one at a time, with exact float32 / storage
rounding semantics, so that an illegal schedule produces visibly different
results (NaN for never-written elements, partial sums for early readers,
differently rounded sums for reordered reductions).

Semantics
---------
* Values are float32 (`np.float32` scalars).  Every tensor read is upcast to
  f32 (exact); each `+ - * /` and each function result is an f32 value
  (IEEE, RNE).  Functions: `exp log tanh` are the float64 libm result
  rounded to f32 (correctly rounded f32 but for vanishingly rare double
  roundings, and the same bits on every machine, unlike numpy's f32 SIMD
  ufuncs), `sqrt` is IEEE (correctly rounded), `abs` exact;
  `rsqrt(x) = 1 / sqrt(x)`, `sigmoid(x) = 1 / (1 + exp(-x))`,
  `silu(x) = x * sigmoid(x)` (each step rounded to f32); `max/min(a, b)`
  are IEEE 754-2019 maximum / minimum (-0.0 < +0.0; a NaN operand gives
  the canonical quiet NaN 0x7FC00000), so they do not depend on the order
  of their operands; `where(c, a, b)` evaluates only the chosen branch (so a
  guarded out-of-range read in the other branch is not an error); a NaN
  comparison is false.  Casts `bf16(x) f16(x) f32(x) f8e4m3(x)` round (RNE,
  f8e4m3 saturating to +-448) and keep the value as f32.
* Leaves: int / float literals -> f32; an iterator -> its integer value as
  f32; a size or float constant -> its (bound) value as f32.
* Tensor indices are integer affine expressions (`+ - * // %`, floor
  semantics like isl), evaluated with Python ints and bounds-checked (an
  out-of-range index raises `IndexError`).
* Tensors other than inputs start NaN-filled.  Reading a never-written
  element therefore yields NaN.
* A plain statement instance computes its value and stores it rounded to the
  statement's storage dtype at `tensor[lhs iterators]`.
* A reduction (`sum` / `max`) keeps one accumulator per output element in
  `accum_dtype` (None = f32), initialised to 0 / -inf the first time an
  instance of that element runs; each instance evaluates the body in f32 and
  does `acc = round_accum(acc + v)` (or `_fmax`: a `max` reduction gives the
  same bits in any order and grouping of its terms), and after
  **every** update the element of the target tensor is set to
  `round_storage(acc)`.  Accumulators live across instances whatever the
  order, and instances are counted per element (see `Trace`).
* Division by zero, overflow etc. follow IEEE (inf / NaN, no warnings).

Performance: domains are enumerated with numpy (bounding box + a membership
test built by isl's `AstBuild.expr_from_set`), schedules are evaluated with
numpy on all points at once (`expr_from_pw_aff`), the instances are sorted
with `np.lexsort`, and each statement is compiled once into a Python function
over numpy f32 scalars.  `instances_in_order` falls back to
`Set.foreach_point` if isl hands back an expression the numpy evaluator does
not know.

Size: the oracle is kept in one file on purpose -- enumeration, ordering, the statement compiler and
the f32 runtime are read together when a result is in doubt.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Callable, Optional

import islpy as isl
import numpy as np

from tdsl.compiler.model import dtypes as dt
from tdsl.compiler.model.dependences import segments
from tdsl.compiler.model.functions import COMPOSITIONS, PRIMITIVES, python_source
from tdsl.compiler.model.program import KernelModel, Stmt, Tensor
from tdsl.frontend import ast

Instance = tuple[str, tuple[int, ...]]

# Largest bounding box (points) the numpy enumerator scans before falling back
# to isl's foreach_point for a set.
_BOX_LIMIT = 20_000_000

_DIM_PREFIX = "__tdsl_d"

_UNARY_FUNCS = tuple(f for f, n in PRIMITIVES.items() if n == 1)
_BINARY_FUNCS = tuple(f for f, n in PRIMITIVES.items() if n == 2)


# =============================================================== validation helpers


def tensor_shape(t: Tensor) -> tuple[int, ...]:
    """The shape of `t` as ints; ValueError if a size is still symbolic."""
    out = []
    for k, s in enumerate(t.shape):
        if isinstance(s, bool) or not isinstance(s, numbers.Integral):
            raise ValueError(
                f"tensor {t.name!r}: shape entry {k} is {s!r}, not an int "
                f"(bind every size before interpreting)"
            )
        if s < 0:
            raise ValueError(f"tensor {t.name!r}: negative shape entry {k}: {s}")
        out.append(int(s))
    return tuple(out)


def _check_stmt(stmt: Stmt) -> None:
    dom = stmt.domain
    n = dom.dim(isl.dim_type.set)
    if n != len(stmt.iters):
        raise ValueError(
            f"statement {stmt.name!r}: domain {dom} has {n} dimensions but the statement "
            f"has {len(stmt.iters)} iterators {stmt.iters}"
        )
    name = dom.get_tuple_name() if dom.has_tuple_name() else None
    if name != stmt.name:
        raise ValueError(f"statement {stmt.name!r}: domain tuple is named {name!r}")
    if dom.dim(isl.dim_type.param) != 0:
        raise ValueError(
            f"statement {stmt.name!r}: domain {dom} has isl parameters; bind all sizes"
        )
    if stmt.reduce_op not in (None, "sum", "max"):
        raise ValueError(f"statement {stmt.name!r}: unknown reduction {stmt.reduce_op!r}")


def _bind_params(obj, sizes: dict, what: str):
    """Fix the isl parameters of `obj` (UnionMap / Map / Set) to bound int sizes and drop them."""
    n = obj.dim(isl.dim_type.param)
    if n == 0:
        return obj
    space = obj.get_space()
    names = [space.get_dim_name(isl.dim_type.param, i) for i in range(n)]
    unbound = [
        p for p in names
        if isinstance(sizes.get(p), bool) or not isinstance(sizes.get(p), numbers.Integral)
    ]
    if unbound:
        raise ValueError(f"{what} has unbound isl parameters {unbound}")
    cond = " and ".join(f"{p} = {int(sizes[p])}" for p in names)
    ctx_set = isl.Set.read_from_str(obj.get_ctx(), f"[{', '.join(names)}] -> {{ : {cond} }}")
    obj = obj.intersect_params(ctx_set)
    if isinstance(obj, isl.UnionMap):
        return obj.project_out_all_params()
    return obj.project_out(isl.dim_type.param, 0, n)


# =============================================================== isl -> numpy


def _ast_expr_eval(expr: isl.AstExpr, env: dict):
    """Evaluate an isl AST expression on numpy int64 columns (floor semantics)."""
    t = expr.get_type()
    if t == isl.ast_expr_type.id:
        return env[expr.id_get_id().get_name()]
    if t == isl.ast_expr_type.int:
        v = expr.int_get_val().to_python()
        if not isinstance(v, int):
            raise NotImplementedError(f"non-integer constant {v} in isl expression")
        return v
    if t != isl.ast_expr_type.op:
        raise NotImplementedError(f"isl expression of type {t}")
    op = expr.op_get_type()
    args = [_ast_expr_eval(expr.op_get_arg(i), env) for i in range(expr.op_get_n_arg())]
    T = isl.ast_expr_op_type
    if op == T.add:
        return args[0] + args[1]
    if op == T.sub:
        return args[0] - args[1]
    if op == T.mul:
        return args[0] * args[1]
    if op == T.minus:
        return -args[0]
    if op in (T.div, T.fdiv_q, T.pdiv_q):
        # div: exact; pdiv_q: numerator known >= 0 where it matters.  Floor is right for all.
        return args[0] // args[1]
    if op in (T.pdiv_r, T.zdiv_r):
        return args[0] % args[1]
    if op == T.max:
        r = args[0]
        for a in args[1:]:
            r = np.maximum(r, a)
        return r
    if op == T.min:
        r = args[0]
        for a in args[1:]:
            r = np.minimum(r, a)
        return r
    if op in (T.and_, T.and_then):
        return np.logical_and(args[0], args[1])
    if op in (T.or_, T.or_else):
        return np.logical_or(args[0], args[1])
    if op in (T.cond, T.select):
        return np.where(args[0], args[1], args[2])
    if op == T.eq:
        return np.equal(args[0], args[1])
    if op == T.le:
        return np.less_equal(args[0], args[1])
    if op == T.lt:
        return np.less(args[0], args[1])
    if op == T.ge:
        return np.greater_equal(args[0], args[1])
    if op == T.gt:
        return np.greater(args[0], args[1])
    raise NotImplementedError(f"isl expression operator {op}")


def _name_dims(obj, dt_: isl.dim_type, n: int):
    for k in range(n):
        obj = obj.set_dim_name(dt_, k, f"{_DIM_PREFIX}{k}")
    return obj


_BUILD_CACHE: dict = {}


def _build_for(ctx: isl.Context) -> isl.AstBuild:
    b = _BUILD_CACHE.get(id(ctx))
    if b is None or b[0] is not ctx:
        b = (ctx, isl.AstBuild.from_context(isl.Set.read_from_str(ctx, "{ : }")))
        _BUILD_CACHE[id(ctx)] = b
    return b[1]


def _val_int(v: isl.Val, what: str) -> int:
    if not v.is_int():
        if v.is_infty() or v.is_neginfty() or v.is_nan():
            raise ValueError(f"{what} is unbounded")
        v = v.floor()
    return int(v.to_python())


def _set_points_slow(s: isl.Set) -> np.ndarray:
    n = s.dim(isl.dim_type.set)
    pts: list = []

    def cb(p):
        pts.append(tuple(p.get_coordinate_val(isl.dim_type.set, k).to_python() for k in range(n)))

    s.foreach_point(cb)
    pts.sort()
    return np.array(pts, dtype=np.int64).reshape(len(pts), n)


def _set_points(s: isl.Set) -> np.ndarray:
    """All integer points of a parameter-free bounded set, (npts, ndim) int64, lexicographic."""
    n = s.dim(isl.dim_type.set)
    if s.is_empty():
        return np.zeros((0, n), dtype=np.int64)
    if n == 0:
        return np.zeros((1, 0), dtype=np.int64)
    lo = [_val_int(s.dim_min_val(k), f"dimension {k} of {s}") for k in range(n)]
    hi = [_val_int(s.dim_max_val(k).ceil(), f"dimension {k} of {s}") for k in range(n)]
    shape = [h - l + 1 for l, h in zip(lo, hi)]
    total = math.prod(shape)
    if total > _BOX_LIMIT:
        return _set_points_slow(s)
    grid = np.indices(shape, dtype=np.int64).reshape(n, -1).T + np.array(lo, dtype=np.int64)
    try:
        named = _name_dims(s, isl.dim_type.set, n)
        pset = named.move_dims(isl.dim_type.param, 0, isl.dim_type.set, 0, n).params()
        expr = _build_for(s.get_ctx()).expr_from_set(pset)
        env = {f"{_DIM_PREFIX}{k}": grid[:, k] for k in range(n)}
        mask = np.broadcast_to(np.asarray(_ast_expr_eval(expr, env), dtype=bool), (grid.shape[0],))
    except NotImplementedError:
        return _set_points_slow(s)
    return np.ascontiguousarray(grid[mask])


def _map_points_slow(m: isl.Map) -> tuple[np.ndarray, np.ndarray]:
    n_in = m.dim(isl.dim_type.in_)
    w = m.wrap()
    rows = _set_points_slow(w)
    return rows[:, :n_in].copy(), rows[:, n_in:].copy()


def _map_points(m: isl.Map) -> tuple[np.ndarray, np.ndarray]:
    """(instances, times) of a parameter-free single-valued map, numpy int64 arrays."""
    n_in = m.dim(isl.dim_type.in_)
    n_out = m.dim(isl.dim_type.out)
    pts = _set_points(m.domain())
    if pts.shape[0] == 0:
        return pts, np.zeros((0, n_out), dtype=np.int64)
    try:
        named = _name_dims(m, isl.dim_type.in_, n_in)
        rng = named.move_dims(isl.dim_type.param, 0, isl.dim_type.in_, 0, n_in).range()
        pma = rng.as_pw_multi_aff()
        build = _build_for(m.get_ctx())
        env = {f"{_DIM_PREFIX}{k}": pts[:, k] for k in range(n_in)}
        cols = []
        for j in range(n_out):
            e = build.expr_from_pw_aff(pma.get_pw_aff(j))
            col = np.broadcast_to(np.asarray(_ast_expr_eval(e, env), dtype=np.int64), (pts.shape[0],))
            cols.append(col)
    except NotImplementedError:
        return _map_points_slow(m)
    times = np.stack(cols, axis=1) if cols else np.zeros((pts.shape[0], 0), dtype=np.int64)
    return pts, times


# =============================================================== instance order


def _as_union_map(schedule, ctx) -> isl.UnionMap:
    if isinstance(schedule, isl.UnionMap):
        return schedule
    if isinstance(schedule, isl.Map):
        return isl.UnionMap.from_map(schedule)
    if isinstance(schedule, isl.BasicMap):
        return isl.UnionMap.from_map(isl.Map.from_basic_map(schedule))
    if isinstance(schedule, str):
        return isl.UnionMap.read_from_str(ctx, schedule)
    raise TypeError(f"schedule must be an isl.UnionMap (got {type(schedule).__name__})")


def _ctx_of(model: KernelModel) -> isl.Context:
    if model.ctx is not None:
        return model.ctx
    if model.stmts:
        return model.stmts[0].domain.get_ctx()
    return isl.DEFAULT_CONTEXT


def _fmt_point(p) -> str:
    return "[" + ", ".join(str(int(v)) for v in p) + "]"


def timed_instances(model: KernelModel, schedule) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """All instances with their time vectors, unsorted.

    Returns (stmt names, stmt index per instance (n,), points (n, max_iters) padded
    with 0, times (n, time_dim)).  Raises ValueError if the schedule misses an
    instance, maps one to several times, or has ranges of different dimensions.
    """
    ctx = _ctx_of(model)
    sched = _bind_params(_as_union_map(schedule, ctx), model.sizes, "the schedule")
    names = [s.name for s in model.stmts]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate statement names in {names}")
    max_iters = max((len(s.iters) for s in model.stmts), default=0)
    sidx_parts, pt_parts, time_parts = [], [], []
    time_dim: Optional[int] = None
    for si, stmt in enumerate(model.stmts):
        _check_stmt(stmt)
        dom = stmt.domain
        udom = isl.UnionSet.from_set(dom)
        um = sched.intersect_domain(udom)
        if not udom.is_subset(um.domain()):
            missing = udom.subtract(um.domain())
            raise ValueError(
                f"the schedule gives no time to some instances of {stmt.name!r}: {missing}"
            )
        if not um.is_single_valued():
            raise ValueError(
                f"the schedule maps some instance of {stmt.name!r} to several times: {um}"
            )
        maps = um.get_map_list()
        for k in range(maps.n_map()):
            m = maps.get_at(k)
            d = m.dim(isl.dim_type.out)
            if time_dim is None:
                time_dim = d
            elif d != time_dim:
                raise ValueError(
                    f"schedule ranges have different dimensions ({time_dim} and {d}, "
                    f"statement {stmt.name!r}); all time vectors must have the same length"
                )
            pts, times = _map_points(m)
            if pts.shape[1] < max_iters:
                pts = np.concatenate(
                    [pts, np.zeros((pts.shape[0], max_iters - pts.shape[1]), dtype=np.int64)], axis=1
                )
            sidx_parts.append(np.full(pts.shape[0], si, dtype=np.int64))
            pt_parts.append(pts)
            time_parts.append(times)
    if time_dim is None:
        time_dim = 0
    if not pt_parts:
        return names, np.zeros(0, np.int64), np.zeros((0, max_iters), np.int64), np.zeros((0, time_dim), np.int64)
    return names, np.concatenate(sidx_parts), np.concatenate(pt_parts), np.concatenate(time_parts)


def instances_in_order(model: KernelModel, schedule) -> list[Instance]:
    """Every instance of every statement, sorted by its time vector under `schedule`.

    `schedule` is an isl UnionMap from statement instances (tuple name = statement
    name) to time vectors, all of one dimension.  An instance is `(stmt name,
    point)` with the point in the order of `stmt.iters` (LHS then reduction
    iterators).  Two instances with the same time vector raise ValueError (a schedule
    must be injective), as do instances without a time or with several.
    """
    names, sidx, pts, times = timed_instances(model, schedule)
    n = sidx.shape[0]
    if n == 0:
        return []
    if times.shape[1] == 0:
        order = np.arange(n)
    else:
        order = np.lexsort(times.T[::-1])
    st = times[order]
    if n > 1:
        if st.shape[1] == 0:
            same = np.ones(n - 1, dtype=bool)
        else:
            same = np.all(st[1:] == st[:-1], axis=1)
        if same.any():
            k = int(np.argmax(same))
            a, b = order[k], order[k + 1]
            na, nb = names[sidx[a]], names[sidx[b]]
            pa = pts[a, : len(model.stmts[sidx[a]].iters)]
            pb = pts[b, : len(model.stmts[sidx[b]].iters)]
            raise ValueError(
                f"the schedule is not injective: {na}{_fmt_point(pa)} and {nb}{_fmt_point(pb)} "
                f"both run at time {_fmt_point(st[k])}"
            )
    nits = [len(s.iters) for s in model.stmts]
    sidx_l = sidx[order].tolist()
    pts_l = pts[order].tolist()
    return [(names[s], tuple(p[: nits[s]])) for s, p in zip(sidx_l, pts_l)]


def program_order(model: KernelModel) -> isl.UnionMap:
    """The original order: statement at position p, instance [x...] -> [p, x..., 0, ...].

    x are the LHS iterators then the reduction iterators; time vectors are padded with
    zeros to 1 + the largest number of iterators.  The map is restricted to the domains.
    """
    from tdsl.compiler.model.dependences import program_order_maps  # the order the dependences are computed against

    result = isl.UnionMap.empty(isl.Space.params_alloc(_ctx_of(model), 0))
    for m in program_order_maps(model).values():
        result = result.union(isl.UnionMap.from_map(m))
    return result


# =============================================================== statement compilation


@dataclass
class EarlyRead:
    """A read of an element of a temp / output whose statement had not finished it."""

    reader: str
    point: tuple[int, ...]
    tensor: str
    index: tuple[int, ...]
    done: int  # instances of the element executed before the read
    expected: int  # instances of the element in the whole order


@dataclass
class Trace:
    """Optional bookkeeping filled by `run(..., trace=Trace())`.

    counts[t]: instances executed per element of the tensor written by a statement;
    expected[t]: instances per element in the executed order (so an element is complete
    when counts == expected); early_reads: the first `max_early_reads` reads of an
    element that was incomplete at the time (never written: done == 0), n_early_reads
    counts them all.
    """

    max_early_reads: int = 100
    counts: dict[str, np.ndarray] = field(default_factory=dict)
    expected: dict[str, np.ndarray] = field(default_factory=dict)
    early_reads: list[EarlyRead] = field(default_factory=list)
    n_early_reads: int = 0
    n_instances: int = 0

    def complete(self, tensor: str) -> np.ndarray:
        return self.counts[tensor] == self.expected[tensor]


class _Compiler:
    """Turns one statement into Python source for `def inst(p): ...`."""

    def __init__(self, model: KernelModel, stmt: Stmt, state: "_State", ns: dict, trace: bool):
        self.model = model
        self.stmt = stmt
        self.state = state
        self.ns = ns
        self.trace = trace
        self.iter_pos = {name: k for k, name in enumerate(stmt.iters)}
        self.n_tmp = 0

    def err(self, msg: str, node=None) -> ValueError:
        span = getattr(node, "span", None)
        where = f" (line {span.line}, column {span.column})" if span and span.line else ""
        return ValueError(f"statement {self.stmt.name!r}: {msg}{where}")

    def const(self, value, kind="c") -> str:
        # the namespace is shared by all statements of a run: number constants globally
        k = self.ns["__nconst__"] = self.ns.get("__nconst__", 0) + 1
        name = f"_{kind}{k}"
        assert name not in self.ns
        self.ns[name] = value
        return name

    def tmp(self) -> str:
        name = f"_a{self.n_tmp}"
        self.n_tmp += 1
        return name

    # ---------------------------------------------------------- index expressions
    def index(self, e) -> str:
        if isinstance(e, ast.IntLit):
            return repr(int(e.value))
        if isinstance(e, ast.Name):
            if e.name in self.iter_pos:
                return f"x{self.iter_pos[e.name]}"
            if e.name in self.model.sizes:
                v = self.model.sizes[e.name]
                if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                    raise self.err(f"size {e.name!r} = {v!r} is not a bound integer in an index", e)
                return repr(int(v))
            raise self.err(f"unknown name {e.name!r} in an index", e)
        if isinstance(e, ast.Neg):
            return f"(-{self.index(e.operand)})"
        if isinstance(e, ast.BinOp):
            if e.op not in ("+", "-", "*", "//", "%"):
                raise self.err(f"operator {e.op!r} in an index expression", e)
            return f"({self.index(e.lhs)} {e.op} {self.index(e.rhs)})"
        raise self.err(f"{type(e).__name__} in an index expression", e)

    # ---------------------------------------------------------- value expressions
    def value(self, e) -> str:
        if isinstance(e, (ast.IntLit, ast.FloatLit)):
            return self.const(np.float32(e.value))
        if isinstance(e, ast.Name):
            if e.name in self.iter_pos:
                return f"_f32(x{self.iter_pos[e.name]})"
            if e.name in self.model.sizes:
                v = self.model.sizes[e.name]
                if v is None or isinstance(v, bool) or not isinstance(v, numbers.Real):
                    raise self.err(f"size / constant {e.name!r} is not bound to a number ({v!r})", e)
                return self.const(np.float32(v))
            raise self.err(f"unknown name {e.name!r}", e)
        if isinstance(e, ast.Neg):
            return f"(-{self.value(e.operand)})"
        if isinstance(e, ast.BinOp):
            if e.op not in ("+", "-", "*", "/"):
                raise self.err(f"operator {e.op!r} is only allowed in index expressions", e)
            return f"({self.value(e.lhs)} {e.op} {self.value(e.rhs)})"
        if isinstance(e, ast.Access):
            return self.access(e)
        if isinstance(e, ast.Call):
            return self.call(e)
        if isinstance(e, ast.Compare):
            raise self.err("a comparison is only allowed as the condition of where()", e)
        if isinstance(e, ast.Reduce):
            raise self.err("a reduction inside a statement value (the model should have split it)", e)
        raise self.err(f"unknown expression node {type(e).__name__}", e)

    def compare(self, e) -> str:
        if not isinstance(e, ast.Compare):
            raise self.err("the condition of where() must be a comparison", e)
        if e.op not in ("<", "<=", ">", ">=", "==", "!="):
            raise self.err(f"unknown comparison {e.op!r}", e)
        return f"({self.value(e.lhs)} {e.op} {self.value(e.rhs)})"

    def call(self, e: ast.Call) -> str:
        f, args = e.func, e.args

        def arity(n):
            if len(args) != n:
                raise self.err(f"{f}() takes {n} argument(s), got {len(args)}", e)

        if f == "where":
            arity(3)
            c = self.compare(args[0])
            return f"({self.value(args[1])} if {c} else {self.value(args[2])})"
        if f in dt.NUMPY_DTYPES:
            arity(1)
            return f"_round_{f}({self.value(args[0])})"
        if f in _BINARY_FUNCS:
            arity(2)
            return f"_f{f}({self.value(args[0])}, {self.value(args[1])})"
        if f in _UNARY_FUNCS or f in COMPOSITIONS:
            arity(1)
            return f"_{f}({self.value(args[0])})"
        raise self.err(f"unknown function {f!r}", e)

    def access(self, e: ast.Access) -> str:
        t = self.model.tensors.get(e.tensor)
        if t is None:
            raise self.err(f"read of unknown tensor {e.tensor!r}", e)
        shape = tensor_shape(t)
        if len(e.indices) != len(shape):
            raise self.err(
                f"{e.tensor} has {len(shape)} dimensions but is indexed with {len(e.indices)}", e
            )
        arr = self.state.values[e.tensor]
        arr_name = self.const(arr, "T")
        idx_src = [self.index(x) for x in e.indices]
        if not shape:
            key = "()"
            cond = "True"
        else:
            tmps = [self.tmp() for _ in shape]
            cond = " and ".join(
                f"0 <= ({tv} := {src}) < {n}" for tv, src, n in zip(tmps, idx_src, shape)
            )
            key = "(" + ", ".join(tmps) + ("," if len(tmps) == 1 else "") + ")"
        oob = self.const(
            (e.tensor, shape, e), "oob"
        )
        lam = "lambda: (" + ", ".join(idx_src) + ("," if len(idx_src) == 1 else "") + ")"
        if self.trace and t.kind != "input":
            cnt = self.const(self.state.counts[e.tensor], "C")
            exp = self.const(self.state.expected[e.tensor], "E")
            read = f"_traced_read({arr_name}, {cnt}, {exp}, {key}, {e.tensor!r}, {self.stmt.name!r}, p)"
        else:
            read = f"{arr_name}[{key}]"
        if cond == "True":
            return read
        return f"({read} if ({cond}) else _oob({oob}, {lam}, p))"

    # ---------------------------------------------------------- the statement
    def compile(self) -> Callable:
        stmt, model = self.stmt, self.model
        t = model.tensors.get(stmt.name)
        if t is None:
            raise self.err("writes a tensor that is not declared in the model")
        if t.kind == "input":
            raise self.err("writes an input tensor")
        shape = tensor_shape(t)
        if len(stmt.lhs_iters) != len(shape):
            raise self.err(
                f"{stmt.name} has {len(shape)} dimensions but {len(stmt.lhs_iters)} LHS iterators"
            )
        nlhs = len(stmt.lhs_iters)
        niters = len(stmt.iters)
        body = self.value(stmt.value)
        vals = self.const(self.state.values[stmt.name], "V")
        cnt = self.const(self.state.counts[stmt.name], "C")
        rst = self.const(dt.scalar_rounder(stmt.dtype), "r")
        rst_call = (lambda s: s) if stmt.dtype == "f32" else (lambda s: f"{rst}({s})")
        oob = self.const((stmt.name, shape, None), "oob")
        lines = ["def inst(p):"]
        if niters:
            lines.append(f"    {', '.join(f'x{k}' for k in range(niters))}{',' if niters == 1 else ''} = p")
        if nlhs:
            key = "(" + ", ".join(f"x{k}" for k in range(nlhs)) + ("," if nlhs == 1 else "") + ")"
            cond = " and ".join(f"0 <= x{k} < {n}" for k, n in enumerate(shape))
            lines.append(f"    if not ({cond}):")
            lines.append(f"        _oob({oob}, lambda: {key}, p)")
        else:
            key = "()"
        lines.append(f"    v = {body}")
        if stmt.reduce_op is None:
            lines.append(f"    {vals}[{key}] = {rst_call('v')}")
            lines.append(f"    {cnt}[{key}] += 1")
        else:
            acc_dtype = stmt.accum_dtype or "f32"
            dt.numpy_dtype(acc_dtype)
            acc = self.const(self.state.accs[stmt.name], "A")
            racc = self.const(dt.scalar_rounder(acc_dtype), "r")
            racc_call = (lambda s: s) if acc_dtype == "f32" else (lambda s: f"{racc}({s})")
            init = self.const(np.float32(0.0) if stmt.reduce_op == "sum" else np.float32(-np.inf))
            combine = (lambda x, y: f"{x} + {y}") if stmt.reduce_op == "sum" else (lambda x, y: f"_fmax({x}, {y})")
            seg = segments(stmt)
            if seg is None:
                lines.append(f"    a = {acc}[{key}] if {cnt}[{key}] else {init}")
                lines.append(f"    a = {racc_call(combine('a', 'v'))}")
                lines.append(f"    {acc}[{key}] = a")
            else:
                # `combine segments(N)`: one accumulator per segment of the first reduction iterator, each
                # started from the identity; the element is the partial results folded in segment order.
                parts = self.const(self.state.seg_accs[stmt.name], "S")
                skey = "(" + ", ".join([f"x{k}" for k in range(nlhs)] + [f"x{seg.position} // {seg.length}"]) + ",)"
                lines.append(f"    {parts}[{skey}] = {racc_call(combine(f'{parts}[{skey}]', 'v'))}")
                lines.append(f"    a = {init}")
                lines.append(f"    for q in {parts}[{key}]:")
                lines.append(f"        a = {racc_call(combine('a', 'q'))}")
                lines.append(f"    {acc}[{key}] = a")
            lines.append(f"    {cnt}[{key}] += 1")
            lines.append(f"    {vals}[{key}] = {rst_call('a')}")
        src = "\n".join(lines) + "\n"
        code = compile(src, f"<tdsl stmt {stmt.name}>", "exec")
        exec(code, self.ns)
        fn = self.ns.pop("inst")
        fn.__tdsl_source__ = src
        return fn


# =============================================================== runtime helpers

_f32 = np.float32
_ONE = np.float32(1.0)
_NAN32 = np.float32(np.nan)  # the canonical quiet NaN, 0x7FC00000
_copysign = math.copysign


# max and min are IEEE 754-2019 maximum / minimum with one NaN: -0.0 < +0.0, and a NaN operand gives the canonical
# quiet NaN whichever operand (and payload) it was.  So the result never depends on the order of the operands, and
# a `max` reduction gives the same bits in any order and grouping (docs/interpreter.md#semantics).


def _fmax(a, b):
    if a > b:
        return a
    if b > a:
        return b
    if a == b:  # the same value: the same bits, or +0.0 and -0.0
        return b if _negative(a) else a
    return _NAN32


def _fmin(a, b):
    if a < b:
        return a
    if b < a:
        return b
    if a == b:
        return a if _negative(a) else b
    return _NAN32


def _negative(x) -> bool:
    return _copysign(1.0, x) < 0.0


_INF32 = np.float32(np.inf)
_ZERO32 = np.float32(0.0)
_NEG_INF32 = np.float32(-np.inf)

# exp / log / tanh: the float64 libm result rounded to f32 (i.e. the correctly rounded f32
# result except in astronomically rare double-rounding cases), so the oracle gives the same
# bits on every machine (numpy's float32 SIMD ufuncs differ between CPUs by an ulp).
_mexp = math.exp
_mlog = math.log
_mtanh = math.tanh
_msqrt = math.sqrt


def _exp(x):
    if x > 89.0:  # e**89 > f32 max; also keeps math.exp from raising OverflowError
        return _INF32
    return _f32(_mexp(x))  # nan -> nan, -inf -> 0


def _log(x):
    if x > 0.0:
        return _f32(_mlog(x))  # inf -> inf
    if x == 0.0:
        return _NEG_INF32
    return _NAN32  # negative or NaN


def _sqrt(x):
    if x >= 0.0:
        return _f32(_msqrt(x))  # correctly rounded (f64 sqrt then f32 rounding is exact)
    return _NAN32 if x != 0.0 else x


def _tanh(x):
    return _f32(_mtanh(x))


def _abs(x):
    return abs(x)


def _oob(info, indices, p):
    tensor, shape, node = info
    idx = indices()
    what = "read of" if node is not None else "store to"
    where = ""
    span = getattr(node, "span", None)
    if span is not None and span.line:
        where = f" (line {span.line}, column {span.column})"
    raise IndexError(
        f"{what} {tensor}{_fmt_point(idx)} out of bounds (shape {list(shape)}) "
        f"at instance {_fmt_point(p)}{where}"
    )


def _runtime_namespace(trace: Optional[Trace]) -> dict:
    ns = {
        "_f32": _f32,
        "_fmax": _fmax,
        "_fmin": _fmin,
        "_exp": _exp,
        "_log": _log,
        "_sqrt": _sqrt,
        "_tanh": _tanh,
        "_abs": _abs,
        "_ONE": _ONE,
        "_oob": _oob,
    }
    for func in COMPOSITIONS:  # rsqrt, sigmoid, silu: built from their one definition (compiler/model/functions.py)
        ns[f"_{func}"] = eval(f"lambda x: {python_source(func, 'x')}", dict(ns))  # noqa: S307 - our own text
    for name in dt.NUMPY_DTYPES:
        ns[f"_round_{name}"] = dt.scalar_rounder(name)
    if trace is not None:

        def _traced_read(arr, cnt, exp, key, tensor, reader, p):
            done = int(cnt[key])
            if done < exp[key]:
                trace.n_early_reads += 1
                if len(trace.early_reads) < trace.max_early_reads:
                    trace.early_reads.append(
                        EarlyRead(reader, tuple(p), tensor, tuple(int(k) for k in key), done, int(exp[key]))
                    )
            return arr[key]

        ns["_traced_read"] = _traced_read
    return ns


@dataclass
class _State:
    values: dict[str, np.ndarray]  # f32 value of every tensor element
    counts: dict[str, np.ndarray]  # instances executed per element (written tensors)
    accs: dict[str, np.ndarray]  # reduction accumulators (f32 arrays holding accum-dtype values)
    expected: dict[str, np.ndarray]
    seg_accs: dict[str, np.ndarray] = field(default_factory=dict)  # `combine segments(N)`: [element..., segment]


def _init_state(model: KernelModel, inputs: dict[str, np.ndarray]) -> _State:
    values, counts, accs = {}, {}, {}
    unknown = set(inputs) - set(model.tensors)
    if unknown:
        raise ValueError(f"inputs for unknown tensors: {sorted(unknown)}")
    for name, t in model.tensors.items():
        shape = tensor_shape(t)
        dt.numpy_dtype(t.dtype)
        if t.kind == "input":
            if name not in inputs:
                raise ValueError(f"missing input tensor {name!r}")
            arr = np.asarray(inputs[name])
            if arr.shape != shape:
                raise ValueError(f"input {name!r} has shape {arr.shape}, expected {shape}")
            values[name] = np.array(dt.round_to(t.dtype, arr), dtype=np.float32, copy=True)
        else:
            values[name] = np.full(shape, np.nan, dtype=np.float32)
            counts[name] = np.zeros(shape, dtype=np.int64)
    seg_accs = {}
    for stmt in model.stmts:
        if stmt.reduce_op is not None and stmt.name in values:
            accs[stmt.name] = np.zeros(values[stmt.name].shape, dtype=np.float32)
            seg = segments(stmt)
            if seg is not None:
                identity = 0.0 if stmt.reduce_op == "sum" else -np.inf
                shape = values[stmt.name].shape + (seg.count,)
                seg_accs[stmt.name] = np.full(shape, identity, dtype=np.float32)
    expected = {name: np.zeros_like(c) for name, c in counts.items()}
    return _State(values, counts, accs, expected, seg_accs)


# =============================================================== public entry points


def compile_statements(model: KernelModel, state: _State, trace: Optional[Trace] = None) -> dict[str, Callable]:
    ns = _runtime_namespace(trace)
    fns = {}
    for stmt in model.stmts:
        _check_stmt(stmt)
        fns[stmt.name] = _Compiler(model, stmt, state, ns, trace is not None).compile()
    return fns


def run(
    model: KernelModel,
    order,
    inputs: dict[str, np.ndarray],
    trace: Optional[Trace] = None,
) -> dict[str, np.ndarray]:
    """Execute the statement instances `order` (a sequence of (stmt name, point)) in turn.

    A point lists the statement's iterators in `stmt.iters` order (LHS, then reduction).
    `inputs` holds every input tensor (any float array; values are rounded to the
    tensor's dtype).  Returns every output and temp tensor as an array of its
    `Tensor.dtype` storage numpy dtype (stores round to `Stmt.dtype`; the two agree in
    a well-formed model).  Never-written elements are NaN.  With `trace=Trace()`, fills
    the per-element instance counts and the early reads.
    """
    state = _init_state(model, inputs)
    if trace is not None:
        order = list(order)
        nits = {s.name: len(s.lhs_iters) for s in model.stmts}
        for name, p in order:
            if name in state.expected:
                state.expected[name][tuple(p[: nits[name]])] += 1
    fns = compile_statements(model, state, trace)
    n = 0
    with np.errstate(all="ignore"):
        for name, p in order:
            try:
                fn = fns[name]
            except KeyError:
                raise ValueError(f"instance of unknown statement {name!r}") from None
            fn(p)
            n += 1
    if trace is not None:
        trace.counts = state.counts
        trace.expected = state.expected
        trace.n_instances = n
    out = {}
    for name, t in model.tensors.items():
        if t.kind != "input":
            out[name] = dt.to_storage(t.dtype, state.values[name])
    return out


def interpret(
    model: KernelModel,
    schedule,
    inputs: dict[str, np.ndarray],
    trace: Optional[Trace] = None,
) -> dict[str, np.ndarray]:
    """`run(model, instances_in_order(model, schedule), inputs)`."""
    return run(model, instances_in_order(model, schedule), inputs, trace)


def random_inputs(model: KernelModel, seed: int, scale: float = 1.0) -> dict[str, np.ndarray]:
    """Standard-normal (times `scale`) inputs rounded to each input's dtype, deterministic in `seed`."""
    rng = np.random.default_rng(seed)
    return {
        t.name: dt.random_array(t.dtype, tensor_shape(t), rng, scale)
        for t in model.tensors.values()
        if t.kind == "input"
    }
