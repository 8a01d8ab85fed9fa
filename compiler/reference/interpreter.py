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
  element therefore yields NaN.  An output may be given first contents in
  `inputs`: a kernel's result keeps what its array held where the program
  writes no element, and a schedule that stores an output in an input
  (`store_in`) makes that the input's values; `program_order_inputs` gives
  them to a program-order run that a scheduled kernel is compared with.
* A plain statement instance computes its value and stores it rounded to the
  statement's storage dtype at `tensor[lhs iterators]`.
* A reduction (`sum` / `max` / `min`) keeps one accumulator per output
  element in `accum_dtype` (None = f32), initialised to its identity (0, -inf,
  +inf: compiler/model/reduce_ops.py), or for `sum(k) ... from x` to x
  rounded to `accum_dtype`, the first time an instance of that
  element runs; each instance evaluates the body in f32 and does
  `acc = round_accum(acc + v)` (or `_fmax` / `_fmin`: a `max` or `min`
  reduction gives the same bits in any order and grouping of its terms), and after
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

The interpreter is four modules, read in this order when a result is in doubt: compiler/reference/order.py
(enumeration and ordering of the instances), compiler/reference/statements.py (a statement as Python
source, the state of a run), compiler/reference/runtime.py (the f32 functions and the trace), and this one:
the entry points `run`, `interpret` and `random_inputs`, and the names of the other three that callers
import from here.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from tdsl.compiler.model import dtypes as dt
from tdsl.compiler.model.program import KernelModel
from tdsl.compiler.reference.order import (Instance, instances_in_order, ordered_instances, program_order,
                                           sums_reordered, timed_instances)
from tdsl.compiler.reference.runtime import EarlyRead, Trace
from tdsl.compiler.reference.statements import _init_state, compile_statements, tensor_shape

__all__ = [
    "EarlyRead",
    "Instance",
    "Trace",
    "compile_statements",
    "instances_in_order",
    "interpret",
    "program_order",
    "program_order_inputs",
    "random_inputs",
    "run",
    "tensor_shape",
    "timed_instances",
    "variants",
]


# =============================================================== public entry points


def run(
    model: KernelModel,
    order,
    inputs: dict[str, np.ndarray],
    trace: Optional[Trace] = None,
) -> dict[str, np.ndarray]:
    """Execute the statement instances `order` (a sequence of (stmt name, point)) in turn.

    A point lists the statement's iterators in `stmt.iters` order (LHS, then reduction).
    `inputs` holds every input tensor (any float array; values are rounded to the
    tensor's dtype), and may hold an output's first contents (`program_order_inputs`).  Returns every output and temp tensor as an array of its
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
    return _results(model, state, trace, n)


def interpret(
    model: KernelModel,
    schedule,
    inputs: dict[str, np.ndarray],
    trace: Optional[Trace] = None,
    variant: Optional[int] = None,
    lanes: Optional[int] = None,
) -> dict[str, np.ndarray]:
    """`run(model, instances_in_order(model, schedule), inputs, trace)`, executed from the sorted arrays
    (`ordered_instances`): each statement's points become lists once and its instances take them in turn,
    without a tuple per instance.

    With `variant` (a seed), the result with the roundings an allowed kernel may do otherwise: every sum adds
    its terms of one element in another order (`sums_reordered`), and exp / exp2 are off by as much as the GPU's
    (runtime.py `_approximate_exponentials`).  With `lanes` (a power of two), every plain sum adds its terms as
    a tile reduction of that many lanes does: term n of an element into lane n % lanes, the lanes in pairs
    (statements.py `_pairwise`), an association no order of single additions gives.  Neither is the program's
    result: they show how far those freedoms move it."""
    names, sidx, pts = ordered_instances(model, schedule)
    if variant is not None:
        order = sums_reordered(model, sidx, pts, variant)
        sidx, pts = sidx[order], pts[order]
    state = _init_state(model, inputs)
    mine = [sidx == k for k in range(len(model.stmts))]
    if trace is not None:
        for stmt, rows in zip(model.stmts, mine):
            if stmt.name in state.expected:
                _count_instances(state.expected[stmt.name], pts[rows, : len(stmt.lhs_iters)])
    fns = compile_statements(model, state, trace, variant, lanes)
    calls = [fns[name] for name in names]
    points = [iter(pts[rows, : len(stmt.iters)].tolist()).__next__ for stmt, rows in zip(model.stmts, mine)]
    with np.errstate(all="ignore"):
        for k in sidx.tolist():
            calls[k](points[k]())
    return _results(model, state, trace, len(sidx))


def variants(model: KernelModel, schedule, inputs: dict[str, np.ndarray], count: int, first: int = 0) -> list[dict]:
    """`count` results with other roundings an allowed kernel may do (`interpret(..., variant=seed)`, seeds
    `first` .. first + count - 1): how far those freedoms move each output (compiler/verify/compare.py)."""
    return [interpret(model, schedule, inputs, variant=seed) for seed in range(first, first + count)]


def rounding_variants(model: KernelModel, schedule, inputs: dict[str, np.ndarray], reference: dict) -> list[dict]:
    """The variants a kernel's outputs are judged against (compiler/verify/compare.py VARIANTS), and
    MORE_VARIANTS further orders and the sums as tile reductions of TREE_LANES lanes where the first already turn
    an element of `reference` (the program-order result) into another kind of value."""
    from tdsl.compiler.verify.compare import MORE_VARIANTS, TREE_LANES, VARIANTS, kinds_change

    out = variants(model, schedule, inputs, VARIANTS)
    if kinds_change(reference, out):
        out += variants(model, schedule, inputs, MORE_VARIANTS, first=VARIANTS)
        out += [interpret(model, schedule, inputs, lanes=n) for n in TREE_LANES]
    return out


def _count_instances(expected: np.ndarray, lhs: np.ndarray) -> None:
    """One more instance at each row's element (`lhs`: the LHS iterators of one instance a row)."""
    if lhs.shape[1]:
        np.add.at(expected, tuple(lhs.T), 1)
    else:  # a scalar: every instance writes its one element
        expected[()] += lhs.shape[0]


def _results(model: KernelModel, state, trace: Optional[Trace], n: int) -> dict[str, np.ndarray]:
    """Every output and temp tensor in its storage dtype; the trace gets the counts."""
    if trace is not None:
        trace.counts = state.counts
        trace.expected = state.expected
        trace.n_instances = n
    out = {}
    for name, t in model.tensors.items():
        if t.kind != "input":
            out[name] = dt.to_storage(t.dtype, state.values[name])
    return out


def program_order_inputs(scheduled: KernelModel, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The inputs of the program-order run a kernel of the `scheduled` model is compared with: `inputs`, and each
    output the schedule stores in an input (`store_in`) starting from that input's values.  Where the program
    writes no element of the output (an empty sum, a domain smaller than the shape), the kernel leaves the
    caller's value there; program order, which keeps the input apart, must start the output from it too."""
    out = dict(inputs)
    for t in scheduled.tensors.values():
        if t.stored_in is not None and t.stored_in in inputs:
            out[t.name] = inputs[t.stored_in]
    return out


def random_inputs(model: KernelModel, seed: int, scale: float = 1.0) -> dict[str, np.ndarray]:
    """Standard-normal (times `scale`) inputs rounded to each input's dtype, deterministic in `seed`."""
    rng = np.random.default_rng(seed)
    return {
        t.name: dt.random_array(t.dtype, tensor_shape(t), rng, scale)
        for t in model.tensors.values()
        if t.kind == "input"
    }
