"""A serial loop's bounds are isl functions of the loops around it, defined where some instance lies below
(compiler/lower/loops.py).  Where none does, the emitted formula used to take one of its pieces: the programs of
a skewed, tiled jacobi-2d outside the current wavefront walked `range(-75, 4)`, tens of empty, masked iterations
each (CPU fuzz seed 5457: over 30 minutes in the Triton interpreter).  Such a loop now runs no iteration there.

The check runs the generated loop nest itself: every program of every launch, every serial loop's emitted
bounds evaluated, and each value a loop walks compared with the values its statements take."""

from __future__ import annotations

import itertools

import islpy as isl

from tdsl.compiler.driver.api import loads
from tdsl.compiler.lower import tileir as T
from tdsl.compiler.lower.loops import _empty_outside
from tdsl.compiler.lower.pipeline import lower_for
from tdsl.compiler.schedule.tree import pw_affs_to_map, statements_under, walk_loops

from catalog import ROOT

JACOBI_2D = ROOT / "benchmarks" / "polybench" / "stencils" / "jacobi_2d.tdsl"

# The fuzz case's steps: both sweeps shifted and fused into one (i, j) nest, skewed by t, (t, i) tiled 4 x 8, the
# tiles' wavefront W walked on the host, its tiles T as programs.
WAVEFRONT = """
schedule wavefront {
shift(Bn.i, 1)
shift(Bn.j, 1)
shift(An.i, 2)
shift(An.j, 2)
i = fuse(Ap.i, Bn.i)
i = fuse(Ap.i, An.i)
j = fuse(Ap.j, Bn.j)
j = fuse(Ap.j, An.j)
i = skew(Ap.i, Ap.t, 2)
j = skew(Ap.j, Ap.t, 2)
T, I, tt, ii = tile(Ap.t, Ap.i, 4, 8)
distribute(Ap.j)
W = skew(Ap.I, Ap.T, 1)
reorder(Ap, W, T)
host(Ap.W)
bind(Ap.T, grid.x)
store_in(A, A_in)
store_in(B, B_in)
}
"""

_BIN = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "//": lambda a, b: a // b,
        "%": lambda a, b: a % b, "min": min, "max": max, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
        ">": lambda a, b: a > b, ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
        "and": lambda a, b: a and b, "or": lambda a, b: a or b}


def value(e, env: dict) -> int:
    """An integer index expression of the tile program, at the loop variables' values `env`."""
    if isinstance(e, T.Const):
        return e.value
    if isinstance(e, T.Var):
        return env[e.name]
    if isinstance(e, T.Neg):
        return -value(e.operand, env)
    if isinstance(e, T.Select):
        return value(e.then, env) if value(e.cond, env) else value(e.other, env)
    if isinstance(e, T.Bin):
        return _BIN[e.op](value(e.lhs, env), value(e.rhs, env))
    raise TypeError(f"not an index expression: {e!r}")


def walked(body, env: dict, out: dict) -> None:
    """Every value each serial loop of `body` takes in one program, added to out[var]."""
    for op in body:
        if isinstance(op, T.SerialLoop):
            for v in range(value(op.lower, env), value(op.upper, env)):
                out.setdefault(op.var, set()).add(v)
                walked(op.body, {**env, op.var: v}, out)


def programs(kernel: T.TileKernel, sizes: dict):
    """The loop variables of every program of every launch of a kernel (host loops, then the grid's variables,
    each over its own range: a fused grid axis launches every combination)."""
    def hosts(k, env):
        if k == len(kernel.host):
            yield env
            return
        h = kernel.host[k]
        for v in range(value(h.lower, env), value(h.upper, env)):
            yield from hosts(k + 1, {**env, h.var: v})
    for env in hosts(0, dict(sizes)):
        ranges = [range(value(lo, env), value(lo, env) + value(n, env))
                  for axis in kernel.grid for lo, n in zip(axis.lowers, axis.extents)]
        names = [v for axis in kernel.grid for v in axis.vars]
        for values in itertools.product(*ranges):
            yield {**env, **dict(zip(names, values))}


def statement_values(sched) -> dict:
    """Loop name -> the values its statements take under the schedule (the loop's overall range)."""
    model, out = sched.state.model, {}
    for loop in walk_loops(sched.state.tree.body):
        if loop.n_dims != 1:
            continue
        for s in statements_under(loop):
            image = pw_affs_to_map([loop.exprs[s][0]], model.stmt(s).domain).range()
            lo, hi = image.lexmin().sample_point(), image.lexmax().sample_point()
            bounds = (lo.get_coordinate_val(isl.dim_type.set, 0).to_python(), hi.get_coordinate_val(isl.dim_type.set, 0).to_python())
            old = out.get(loop.name, bounds)
            out[loop.name] = (min(old[0], bounds[0]), max(old[1], bounds[1]))
    return out


def test_no_serial_loop_walks_values_its_statements_never_take():
    sizes = {"TSTEPS": 12, "N": 6}
    sched = loads(JACOBI_2D.read_text() + WAVEFRONT, sizes=sizes).schedule("wavefront")
    overall = statement_values(sched)
    program = lower_for(sched, "triton")
    checked = 0
    for kernel in program.kernels:
        for env in programs(kernel, sizes):
            seen: dict = {}
            walked(kernel.body, env, seen)
            for var, values in seen.items():
                name = var[2:] if var.startswith("l_") and var not in overall else var
                lo, hi = overall[name]
                assert lo <= min(values) and max(values) <= hi, (
                    f"{kernel.name} at {env}: loop {var} walks {min(values)}..{max(values)}, its statements "
                    f"take {lo}..{hi}")
                checked += 1
    assert checked >= 10  # (program, loop) pairs: the wavefront's loops were walked


def test_bounds_of_several_pieces_give_an_empty_loop_where_they_are_undefined():
    ctx = isl.Context()
    lo = isl.PwAff.read_from_str(ctx, "{ [w] -> [(0)] : 0 <= w <= 3; [w] -> [(2w - 6)] : 4 <= w <= 9 }")
    hi = isl.PwAff.read_from_str(ctx, "{ [w] -> [(w)] : 0 <= w <= 3; [w] -> [(3)] : 4 <= w <= 9 }")
    new_lo, new_hi = _empty_outside(lo, hi)
    for w in (-5, -1, 10, 40):
        at = isl.Set.read_from_str(ctx, f"{{ [{w}] }}")
        assert new_lo.intersect_domain(at).max_val().to_python() > new_hi.intersect_domain(at).max_val().to_python()
    inside = isl.Set.read_from_str(ctx, "{ [w] : 0 <= w <= 9 }")
    assert new_lo.intersect_domain(inside).is_equal(lo) and new_hi.intersect_domain(inside).is_equal(hi)
    single = isl.PwAff.read_from_str(ctx, "{ [w] -> [(w)] : 0 <= w <= 9 }")
    assert _empty_outside(single, single) == (single, single)  # one affine formula: left as it is
