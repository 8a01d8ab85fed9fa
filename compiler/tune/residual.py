"""What a tuning run's measurements teach the model about the workload it tunes (TVM's learned cost model, in
small).

The estimate (compiler/analysis/cost) is a model of the machine; on one workload it is off by factors that
follow the knobs (on the H200 the GEMM's persistent launch helped at one shape and cost 6% at another, which
no term of the estimate separates).  After each round of measurements the tuner fits

    log(measured / estimated) ~ bias + sum over knobs of w[knob = value]

by ridge-regularised least squares over the candidates measured so far (one indicator per knob value), and
ranks the candidates not measured yet by `estimate x exp(fitted)`.  A knob value no measured candidate had
counts as UNTRIED, a little better than the model says (optimism where nothing is known, so that the ranking
tries new values rather than re-measuring near copies of known ones); the ridge term shrinks what few
measurements support.  With fewer than MIN_RECORDS timed candidates nothing is fitted and the estimate ranks
alone.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

MIN_RECORDS = 4  # timed candidates needed before the fit says anything
RIDGE = 1.0  # the penalty on each weight: a knob value seen once moves the prediction about half its error
UNTRIED = math.log(0.9)  # the weight of a knob value no timed candidate had


class Residual:
    """The fitted correction of one workload's estimates: `factor(choice)` multiplies a candidate's estimate."""

    def __init__(self, records: list[dict]):
        # the program's own schedule blocks have no knob values (compiler/tune/tuner.py): nothing to fit them by
        timed = [r for r in records if r.get("ok") and r.get("us") and r.get("t_estimate") and r.get("choice")]
        self.features = sorted({_feature(k, v) for r in timed for k, v in r["choice"].items()})
        self.bias, self.weights = 0.0, {}
        if len(timed) < MIN_RECORDS:
            return
        index = {f: i for i, f in enumerate(self.features)}
        x = np.zeros((len(timed), len(self.features)))
        for row, r in enumerate(timed):
            for k, v in r["choice"].items():
                x[row, index[_feature(k, v)]] = 1.0
        y = np.array([math.log(r["us"] * 1e-6 / r["t_estimate"]) for r in timed])
        self.bias = float(y.mean())
        a = x.T @ x + RIDGE * np.eye(len(self.features))
        w = np.linalg.solve(a, x.T @ (y - self.bias))
        self.weights = dict(zip(self.features, (float(v) for v in w)))

    @property
    def fitted(self) -> bool:
        return bool(self.weights)

    def factor(self, choice: dict) -> float:
        """exp(bias + the weights of the choice's knob values): measured / estimated, as the fit predicts it."""
        return math.exp(self.bias + sum(self.weights.get(_feature(k, v), UNTRIED) for k, v in choice.items()))

    def predicted(self, t_estimate: float, choice: dict) -> float:
        return t_estimate * self.factor(choice)

    def strongest(self, count: int = 3) -> list[tuple[str, float]]:
        """The knob values the measurements moved most, with their factor (for the tuner's report)."""
        ranked = sorted(self.weights.items(), key=lambda kv: -abs(kv[1]))[:count]
        return [(f, math.exp(w)) for f, w in ranked]


def _feature(knob: str, value) -> str:
    return f"{knob}={value}"


def fit(records: list[dict]) -> Optional[Residual]:
    """The correction the records support, or None when they are too few."""
    residual = Residual(records)
    return residual if residual.fitted else None
