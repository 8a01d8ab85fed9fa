"""Instance order for the reference interpreter: every statement instance with its time vector under a
schedule, sorted.

The statements' domains are checked against the model (`_check_stmt`), the schedule's isl parameters are
bound to the sizes, and each domain is enumerated with numpy: its bounding box, filtered by a membership
test that isl builds (`AstBuild.expr_from_set`, evaluated on whole columns by `_ast_expr_eval`); the
schedule is evaluated the same way on all points at once (`expr_from_pw_aff`) and the instances are sorted
with `np.lexsort` (`ordered_instances`; `instances_in_order` gives them as tuples).  A box over
`_BOX_LIMIT` points, or an isl expression the numpy evaluator does not know, falls back to
`Set.foreach_point`.  A schedule that misses an instance, gives one
several times, or gives two instances the same time is refused.  `program_order` is the original order.
"""

from __future__ import annotations

import math
import numbers
from typing import Optional

import islpy as isl
import numpy as np

from tdsl.compiler.model.program import KernelModel, Stmt
from tdsl.compiler.model.reduce_ops import REDUCTIONS

Instance = tuple[str, tuple[int, ...]]

# Largest bounding box (points) the numpy enumerator scans before falling back
# to isl's foreach_point for a set.
_BOX_LIMIT = 20_000_000

_DIM_PREFIX = "__tdsl_d"


# =============================================================== validation helpers


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
    if stmt.reduce_op is not None and stmt.reduce_op not in REDUCTIONS:
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


def ordered_instances(model: KernelModel, schedule) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Every instance sorted by its time vector under `schedule`, as arrays: (stmt names, stmt index per
    instance (n,), points (n, max_iters) padded with 0), in execution order.  Refuses what
    `instances_in_order` refuses; the interpreter executes from these arrays without building a tuple per
    instance."""
    names, sidx, pts, times = timed_instances(model, schedule)
    n = sidx.shape[0]
    if n == 0 or times.shape[1] == 0:
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
    return names, sidx[order], pts[order]


def sums_reordered(model: KernelModel, sidx: np.ndarray, pts: np.ndarray, seed: int = 0) -> np.ndarray:
    """A permutation of instances in execution order (`ordered_instances`) that adds the terms of every element
    of a `sum` in another order: each run of consecutive updates of one element by one statement is reversed
    (seed 0) or shuffled (another seed), everything else keeps its place.  Not a legal schedule under `combine
    strict`: it perturbs the rounding of the sums alone, to measure how far another association moves each
    result (compiler/verify/compare.py VARIANTS)."""
    n = sidx.shape[0]
    if n < 2:
        return np.arange(n)
    is_sum = np.array([s.reduce_op == "sum" for s in model.stmts], dtype=bool)[sidx]
    lhs = np.array([len(s.lhs_iters) for s in model.stmts], dtype=np.int64)[sidx]
    element = np.where(np.arange(pts.shape[1])[None, :] < lhs[:, None], pts, 0)
    same = (sidx[1:] == sidx[:-1]) & is_sum[1:] & np.all(element[1:] == element[:-1], axis=1)
    run = np.concatenate([[0], np.cumsum(~same)])
    within = -np.arange(n) if seed == 0 else np.random.default_rng(seed).permutation(n)
    return np.lexsort((within, run))


def instances_in_order(model: KernelModel, schedule) -> list[Instance]:
    """Every instance of every statement, sorted by its time vector under `schedule`.

    `schedule` is an isl UnionMap from statement instances (tuple name = statement
    name) to time vectors, all of one dimension.  An instance is `(stmt name,
    point)` with the point in the order of `stmt.iters` (LHS then reduction
    iterators).  Two instances with the same time vector raise ValueError (a schedule
    must be injective), as do instances without a time or with several.
    """
    names, sidx, pts = ordered_instances(model, schedule)
    nits = [len(s.iters) for s in model.stmts]
    return [(names[s], tuple(p[: nits[s]])) for s, p in zip(sidx.tolist(), pts.tolist())]


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
