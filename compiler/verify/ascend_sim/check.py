"""An emitted schedule against the reference interpreter: generate, simulate on random inputs, compare."""

from __future__ import annotations

from typing import Optional

import numpy as np

from tdsl.compiler.verify.compare import compare
from tdsl.compiler.verify.ascend_sim.load import simulate


def check_schedule(prog, schedule: Optional[str], target: str, seed: int = 0, reference: Optional[dict] = None,
                   inputs: Optional[dict] = None) -> dict:
    """Generate `schedule` for `target`, simulate it on random inputs and compare with the interpreter.

    Returns {tensor: compiler.verify.Comparison} for every output and every GM temporary the schedule keeps in
    the program's shape (`recompute_at` gives each tile its own copy of a temporary: another shape, with
    the elements of a tile's edges in several places); `reference` (the interpreter's result on program order
    for these inputs) may be passed in to reuse it.
    """
    from tdsl.compiler.driver.generate import generate
    from tdsl.compiler.reference.interpreter import interpret, program_order_inputs, random_inputs

    text = generate(prog, schedule, target=target)
    original = prog.schedule()
    model = original.model
    inputs = inputs if inputs is not None else random_inputs(model, seed=seed)
    if reference is None:
        reference = interpret(model, original.time_map(), program_order_inputs(prog.schedule(schedule).model, inputs))
    sim = simulate(text, inputs, target)
    result = {}
    for name, t in model.tensors.items():
        if t.kind == "input" or name not in sim.tensors or name not in reference:
            continue
        if t.kind == "temp" and sim.tensors[name].shape != reference[name].shape:
            continue
        result[name] = compare(reference[name].astype(np.float32), sim.tensors[name].astype(np.float32), t.dtype)
    return result
