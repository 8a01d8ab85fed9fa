"""`analyze`: the cost of a scheduled program on a target, kernel by kernel, and its peak global memory.

It puts together the counts of traffic.py, the times of timing.py and the ranking estimate of estimate.py for
every kernel of the buffer plan.
"""

from __future__ import annotations

from typing import Optional

from tdsl.compiler.analysis.buffer_plan import DTYPE_BYTES, KernelPlan, plan_kernels
from tdsl.compiler.analysis.cost.estimate import kernel_estimate
from tdsl.compiler.analysis.cost.results import KernelCost, ProgramCost
from tdsl.compiler.analysis.cost.staging import as_generated, copies, unmade_copies
from tdsl.compiler.analysis.cost.timing import occupancy, roofline, step_time
from tdsl.compiler.analysis.cost.traffic import kernel_flops, kernel_transfers, loop_iterations
from tdsl.compiler.analysis.cost.work import products, promotion_register_bytes
from tdsl.compiler.schedule.empty_statements import without_empty_statements
from tdsl.compiler.schedule.schedule import Schedule
from tdsl.compiler.schedule.tree import global_tensors, launches, statements_under
from tdsl.compiler.targets import Target, get_target


def analyze(schedule: Schedule, target="h100", regs: Optional[int] = None,
            plans: Optional[list[KernelPlan]] = None, backend: Optional[str] = None) -> ProgramCost:
    """The cost report of a (scheduled) program on a target; `plans`: its buffer plan, when the caller has it;
    `backend` (a key of compiler/lower/pipeline.BACKENDS): the code generator whose own copies the occupancy and
    the estimate count (staging.py `as_generated`: TileLang's for "tilelang", Triton's otherwise; "none": no code
    generator's, the plan's buffers alone)."""
    tgt = get_target(target)
    schedule = without_empty_statements(schedule)  # the schedule the plans were made from
    model = schedule.model
    plans = plans if plans is not None else plan_kernels(schedule, tgt)
    generator = {"tilelang": "tilelang", "none": None}.get(backend, "triton")
    kernels = [_kernel_cost(schedule, tgt, kp, regs, generator) for kp in plans]
    peak, peak_at, sizes = _peak_global_memory(schedule)
    touched = {a.tensor for s in model.stmts for a in s.reads} | {s.write.tensor for s in model.stmts}
    compulsory = sum(sizes[t.name] for t in model.tensors.values()
                     if t.kind == "output" or (t.kind == "input" and t.name in touched))
    return ProgramCost(model.name, schedule.name, tgt, kernels, peak, peak_at, compulsory, sizes,
                       _recomputed(model))


def _recomputed(model) -> dict:
    """Each statement recomputed per tile (`recompute_at`): the instances its copies compute, and the distinct
    elements among them (their difference is the redundant work)."""
    out = {}
    for t in model.tensors.values():
        if t.copies:
            out[t.name] = (int(model.stmt(t.name).domain.count_val().to_python()), t.copied)
    return out


def _kernel_cost(schedule: Schedule, tgt: Target, kp: KernelPlan, regs: Optional[int],
                 generator: Optional[str]) -> KernelCost:
    transfers = kernel_transfers(kp)
    model = schedule.model
    fm, fv, mdtype = kernel_flops(model, kp.stmts)
    iterations = loop_iterations(schedule, kp)
    programs = iterations[kp.grid_loops[-1].name] if kp.grid_loops else 1
    global_bytes = sum(t.bytes for t in transfers if t.is_global)
    t_memory, t_compute = roofline(tgt, global_bytes, fm, fv, mdtype)
    prods = products(model, kp)
    extra = promotion_register_bytes(model, prods, tgt)
    generated = as_generated(model, kp, tgt, generator, prods) if generator else kp  # what the kernel will hold
    occ = occupancy(generated, tgt, regs, extra) if tgt.vendor == "nvidia" else None
    cost = KernelCost(kp.index, kp.name, list(kp.stmts), programs, [l.name for l in kp.grid_loops], kp.warps,
                      kp.buffers, kp.working_set, kp.violations, transfers, fm, fv, mdtype, iterations, occ,
                      t_memory, t_compute)
    cost.copied = copies(generated) if generated is not kp else []
    cost.unmade = unmade_copies(kp, prods, generator) if generator else []
    cost.step = step_time(kp, cost, tgt)
    cost.estimate = kernel_estimate(model, tgt, generated, cost, prods)
    return cost


def _peak_global_memory(schedule: Schedule) -> tuple[int, str, dict]:
    """Peak bytes of global tensors alive, kernel by kernel: a kernel's outputs are allocated before it runs,
    and the inputs / intermediates it read for the last time are freed after it (the chapter's 5.3.1 rule).  An
    output stored in an input (`store_in`) takes no memory of its own, and the input lives to the end."""
    model, tree = schedule.model, schedule.tree
    globals_ = global_tensors(model, tree)
    holders = {t.stored_in for t in model.tensors.values() if t.stored_in}
    sizes = {}
    for t in model.tensors.values():
        n = DTYPE_BYTES[t.dtype]
        for d in t.shape:
            n *= d if isinstance(d, int) else 0
        sizes[t.name] = n
    units = launches(tree)
    kernels = [statements_under(launch.node) for launch in units]
    last_read = {}
    for k, stmts in enumerate(kernels):
        # inside a host loop a tensor read by one of its kernels is read again at the next iteration: it lives
        # until the loop's last kernel
        until = max((j for j, other in enumerate(units) if units[k].host and other.host[:1] == units[k].host[:1]),
                    default=k)
        for s in stmts:
            for a in model.stmt(s).reads:
                last_read[a.tensor] = max(last_read.get(a.tensor, -1), until)
    written = {s.write.tensor for s in model.stmts}
    # the inputs, and the results no kernel writes (their statements have no instance here): the caller's arrays
    live = {t.name for t in model.tensors.values()
            if t.kind == "input" or (t.kind == "output" and t.name not in written and not t.stored_in)}
    peak, peak_at = sum(sizes[t] for t in live), "before the first kernel"
    for k, stmts in enumerate(kernels):
        live |= {model.stmt(s).write.tensor for s in stmts
                 if model.stmt(s).write.tensor in globals_ and not model.tensors[model.stmt(s).write.tensor].stored_in}
        total = sum(sizes[t] for t in live)
        if total > peak:
            peak, peak_at = total, f"kernel {model.name}_{k} ({', '.join(sorted(live))})"
        for t in list(live):
            if model.tensors[t].kind != "output" and t not in holders and last_read.get(t, -1) <= k:
                live.discard(t)
    return peak, peak_at, sizes
