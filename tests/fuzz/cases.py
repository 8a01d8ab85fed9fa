"""A fuzz case: a program, sizes, schedule steps and an input seed -- everything needed to replay it."""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field, replace
from typing import Optional

import numpy as np

from tdsl.compiler.model import dtypes as dt
from tdsl.compiler.reference.interpreter import tensor_shape

from .schedules import Step

FUZZ_SCHEDULE = "__fuzz"

# Standard-normal inputs make small f32 sums exact and hide a reordered reduction; values spread over
# 2^-8..2^8 with random signs do not.  "special" (on request: fuzz.py --distributions) is standard normal with a
# share SPECIAL_SHARE of the elements an infinity, a NaN or a signed zero: what IEEE arithmetic defines and a
# compiler's float rewrites (x - x -> 0, x * 0 -> 0) or a NaN-dropping max get wrong.
DISTRIBUTIONS = ("normal", "wide")
ALL_DISTRIBUTIONS = DISTRIBUTIONS + ("special",)
SPECIAL_VALUES = (np.inf, -np.inf, np.nan, 0.0, -0.0)
SPECIAL_SHARE = 0.03


def parse_distributions(text: str) -> tuple:
    """`normal,special` -> ("normal", "special"); ValueError naming the choices for anything else."""
    names = tuple(d for d in text.split(",") if d)
    if not names or set(names) - set(ALL_DISTRIBUTIONS):
        raise ValueError(f"--distributions takes some of {', '.join(ALL_DISTRIBUTIONS)}, not {text!r}")
    return names


def inputs_for(model, seed: int, dist: str) -> dict:
    rng = np.random.default_rng([seed, ALL_DISTRIBUTIONS.index(dist)])
    out = {}
    for t in model.inputs():
        shape = tensor_shape(t)
        if dist == "normal":
            values = rng.standard_normal(shape)
        elif dist == "wide":
            values = rng.choice([-1.0, 1.0], size=shape) * np.exp2(rng.uniform(-8, 8, size=shape))
        else:
            values = rng.standard_normal(shape)
            special = rng.random(shape) < SPECIAL_SHARE
            values = np.where(special, rng.choice(SPECIAL_VALUES, size=shape), values)
        out[t.name] = dt.to_storage(t.dtype, values)
    return out


@dataclass
class Case:
    name: str  # the program's label (an example's name, or random-<seed>)
    source: str  # the program text, without the fuzzer's schedule
    sizes: dict
    steps: list = field(default_factory=list)
    seed: int = 0
    filename: str = "fuzz.tdsl"
    kernel: Optional[str] = None
    distributions: tuple = DISTRIBUTIONS
    trace_text: str = ""  # the accepted schedule's trace, as .tdsl lines
    symbolic: bool = False  # generate kernels with `param` sizes left to run time

    def with_schedule(self, trace: str) -> str:
        body = "\n".join(f"  {line}" for line in trace.splitlines())
        head = f"schedule {FUZZ_SCHEDULE}" + (f" for {self.kernel}" if self.kernel else "")
        return f"{self.source}\n\n{head} {{\n{body}\n}}\n"

    def ident(self) -> str:
        return f"{zlib.crc32(self.to_json().encode()):08x}"

    def but(self, **changes) -> "Case":
        return replace(self, **changes)

    # ------------------------------------------------------------ replayable text

    def to_json(self) -> str:
        return json.dumps({
            "name": self.name, "source": self.source, "sizes": self.sizes, "seed": self.seed,
            "kernel": self.kernel, "steps": [_step_json(s) for s in self.steps], "symbolic": self.symbolic,
            **({} if self.distributions == DISTRIBUTIONS else {"distributions": list(self.distributions)}),
        }, indent=1)

    @staticmethod
    def from_json(text: str) -> "Case":
        d = json.loads(text)
        return Case(d["name"], d["source"], d["sizes"], [_step_from(s) for s in d["steps"]], d["seed"],
                    kernel=d.get("kernel"), symbolic=d.get("symbolic", False),
                    distributions=tuple(d.get("distributions", DISTRIBUTIONS)))

    def describe(self) -> str:
        sizes = ", ".join(f"{k}={v}" for k, v in self.sizes.items()) + (" (params symbolic)" * self.symbolic)
        steps = "\n".join(f"    {s}" for s in self.steps) or "    (program order)"
        return f"{self.name} at {sizes}, input seed {self.seed}:\n{steps}"


def _step_json(step: Step) -> dict:
    return {"primitive": step.primitive, "args": list(step.args), "kwargs": [list(kv) for kv in step.kwargs],
            "names": list(step.names) if step.names is not None else None}


def _step_from(d: dict) -> Step:
    names = tuple(d["names"]) if d.get("names") is not None else None
    return Step(d["primitive"], tuple(d["args"]), tuple(tuple(kv) for kv in d["kwargs"]), names)
