"""Screening: every candidate is built, checked and costed before anything is measured.

A candidate passes four gates, in the order a user meets them:

1. **schedule** -- each step is applied through the `Schedule` API, which runs the primitive's own checks
   (a misuse: rule `misuse:<primitive>`) and the legality rules (dependences and rounding: rule
   `legality:<rule>`, the rule name of the typed error).
2. **capacity** -- the buffer plan of the target must fit its on-chip memories (rule `capacity:<scope>`), also
   with every tile padded to the power-of-two lanes the generated code allocates (rule `capacity:padded`,
   the judgement `tdsl cost --fit` makes: compiler/analysis/cost/backend_rules.py), and with the operand copies
   Triton makes in shared memory itself and a persistent kernel's stored tiles (rule `capacity:staged`), and
   a matrix product's accumulator must fit a thread's registers (rule `capacity:registers`: one that does not
   moves through local memory at every K step: 5-49x the best candidate's time in the H100's logs;
   compiler/analysis/cost/timing.py `unheld_accumulator`).
3. **backend** -- the code generator must take it (the tile lowering for the backend: rule
   `backend:<backend>`), so that no candidate the tuner returns is one `tdsl compile` refuses.
4. **cost** -- the cost model's `t_estimate` ranks what is left.

Candidates share prefixes of steps (the same tiling with other stages or warps): the states reached along
the last candidate's steps are kept, and the next one starts from the longest common prefix.  A state is
never changed once reached (each primitive works on a copy), so sharing it is safe.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Optional

from tdsl.frontend.diagnostics import TdslError

from tdsl.compiler.analysis.buffer_plan import plan_kernels
from tdsl.compiler.analysis.buffer_records import CapacityError
from tdsl.compiler.analysis.cost import analyze
from tdsl.compiler.analysis.cost.backend_rules import padded_overflow, staged_overflow
from tdsl.compiler.analysis.cost.timing import unheld_accumulator
from tdsl.compiler.errors import BackendError, LegalityError, ScheduleError
from tdsl.compiler.lower.pipeline import BACKENDS, lower_for
from tdsl.compiler.schedule.schedule import Schedule, Step, Trace
from tdsl.compiler.targets import Target, get_target


@dataclass
class Verdict:
    choice: dict
    steps: list[Step]
    rule: Optional[str] = None  # None: accepted
    message: str = ""
    t_estimate: float = 0.0
    t_bound: float = 0.0
    block: Optional[str] = None  # the program's own schedule block this candidate is (no knob values)
    counted: bool = True  # in the screen's statistics of the space

    @property
    def accepted(self) -> bool:
        return self.rule is None

    @property
    def text(self) -> str:
        return "\n".join(str(s) for s in self.steps)


@dataclass
class Screen:
    """Judges candidates of one kernel for one target and backend, counting rejections by rule."""

    base: Schedule  # program order
    target: str  # a device name (compiler/targets)
    kind: str  # code generator family ("nvidia", "ascend-950", ...)
    backend: str
    rejected: Counter = field(default_factory=Counter)
    examples: dict = field(default_factory=dict)  # rule -> the first message seen
    judged: int = 0
    _path: list = field(default_factory=list)  # [(step text, State)] along the last candidate built

    @property
    def device(self) -> Target:
        return get_target(self.target)

    def judge(self, choice: dict, steps: list[Step], counted: bool = True) -> Verdict:
        """The verdict on one candidate; `counted`: in the space's statistics (not for the program's own
        schedule blocks, which are not points of the space)."""
        self.judged += counted
        verdict = Verdict(choice, steps, counted=counted)
        try:
            sched = self.build(steps)
            plans = plan_kernels(sched, self.device)  # once, for the cost and the padded-tile judgement
            cost = analyze(sched, self.target, plans=plans, backend=BACKENDS[self.kind, self.backend])
            if cost.violations:
                v = cost.violations[0]
                return self._reject(verdict, f"capacity:{v.scope}", v.text())
            padded = padded_overflow(plans, self.device)
            if padded:
                return self._reject(verdict, "capacity:padded", padded)
            staged = staged_overflow(sched.model, plans, self.device, BACKENDS[self.kind, self.backend])
            if staged:
                return self._reject(verdict, "capacity:staged", staged)
            unheld = unheld_accumulator(sched.model, plans, self.device)
            if unheld:
                return self._reject(verdict, "capacity:registers", unheld)
            lower_for(sched, BACKENDS[self.kind, self.backend], self.target)
        except LegalityError as err:
            return self._reject(verdict, f"legality:{err.rule}", str(err))
        except ScheduleError as err:
            return self._reject(verdict, f"misuse:{err.primitive}", str(err))
        except CapacityError as err:
            scope = err.violations[0].scope if err.violations else "memory"
            return self._reject(verdict, f"capacity:{scope}", str(err))
        except BackendError as err:
            return self._reject(verdict, f"backend:{err.backend}", err.reason)
        except TdslError as err:  # another user-level refusal (a bind, a size): counted under its kind
            return self._reject(verdict, f"misuse:{type(err).__name__}", str(err))
        verdict.t_estimate, verdict.t_bound = cost.t_estimate, cost.t_bound
        return verdict

    def build(self, steps: list[Step]) -> Schedule:
        """The schedule after `steps`, starting from the longest prefix already reached."""
        texts = [str(s) for s in steps]
        shared = 0
        while shared < min(len(texts), len(self._path)) and self._path[shared][0] == texts[shared]:
            shared += 1
        del self._path[shared:]
        sched = self.base.copy()
        if shared:
            sched.state = self._path[shared - 1][1]
            sched.trace = Trace(list(steps[:shared]))
        for step, text in zip(steps[shared:], texts[shared:]):
            Trace([step]).replay(sched)
            self._path.append((text, sched.state))
        return sched

    def _reject(self, verdict: Verdict, rule: str, message: str) -> Verdict:
        verdict.rule, verdict.message = rule, message
        if verdict.counted:
            self.rejected[rule] += 1
            self.examples.setdefault(rule, message)
        return verdict
