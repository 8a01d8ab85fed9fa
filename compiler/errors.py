"""Typed scheduling errors.

`ScheduleError` is a misuse of a primitive (unknown loop, bad factor,
a structure the primitive does not accept): exit code 2, like a parse
error.  `LegalityError` is a well-formed transformation that would change
the program's result: exit code 1.  Each legality rule has its own class;
`rule` is the stable name tests and `assert_illegal(..., rule=...)` use.
"""

from __future__ import annotations

from typing import Optional

from tdsl.frontend.ast import Span
from tdsl.frontend.diagnostics import SourceError, TdslError


class ScheduleError(TdslError):
    """A primitive was called in a way it does not accept."""

    exit_code = 2

    def __init__(self, primitive: str, message: str):
        self.primitive = primitive
        self.message = message
        super().__init__(f"{primitive}: {message}")


class LegalityError(TdslError):
    """A transformation that would change what the program computes."""

    exit_code = 1
    rule = "legality"
    explanation = ""
    # ((src, point), (dst, point), sizes) of the counterexample where a dependence gives it (legality/checks.py)
    pair = None
    placed = ""  # where compute_at / reverse_compute_at put a moved instance of the pair, and why

    def __init__(self, primitive: str, statements: list[str], detail: str, counterexample: str,
                 explanation: Optional[str] = None):
        self.primitive = primitive
        self.statements = list(statements)
        self.detail = detail
        self.counterexample = counterexample
        if explanation is not None:  # a rule can explain itself better for one case (e.g. a row statistic)
            self.explanation = explanation
        # What the rejected step would have built (a `State`: model, tree, dependences), so a test can run it
        # in the interpreter and see the result change.  Filled by `Schedule` when the step is rejected.
        self.rejected = None
        super().__init__(self.render())

    @classmethod
    def rules(cls) -> list[str]:
        """This rule and the more general rules it refines, most specific first."""
        return [k.rule for k in cls.__mro__ if isinstance(k, type) and issubclass(k, LegalityError)]

    def render(self) -> str:
        lines = [f"{self.primitive} is illegal [rule {self.rule}]: {self.detail}"]
        if self.counterexample:
            lines.append(f"  counterexample: {self.counterexample}")
        if self.placed:
            lines.append(f"  placed: {self.placed}")
        if self.explanation:
            lines.append(f"  why: {self.explanation}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.render()


class DependenceViolation(LegalityError):
    rule = "dependence"
    explanation = "a value must be written before it is read, and not overwritten before every earlier read"


class StorageOverwrite(DependenceViolation):
    """A storage decision (`fold_storage`, `store_in`) whose location is written again before a read of the value
    it held."""

    rule = "storage-overwrite"
    explanation = ("a place that holds several values in turn (a folded tensor, an output stored in an input) must "
                   "give each value to all its reads before the next one is written there: a folded tensor in program "
                   "order, an input in the order the schedule runs its reads and the writes that replace them")


class ReductionIncomplete(DependenceViolation):
    rule = "reduction-incomplete"
    explanation = (
        "a consumer of a reduction must wait until every partial result is combined; applying it to "
        "partial results changes the result (for example SiLU(1) + SiLU(-1) != SiLU(1 + -1), chapter 5.4.3)"
    )


class ReductionOrder(DependenceViolation):
    rule = "reduction-order"
    explanation = (
        "the order in which a reduction combines its terms is part of its definition: floating-point "
        "addition is not associative (1 + 2^-24 + 2^-24 differs by grouping); declare `combine reassoc` to allow it"
    )


class PipelineOverlap(DependenceViolation):
    """`pipeline(L, warp_specialize=true)`: the first product of iteration k+1 would overlap the last statement
    group of iteration k, which a dependence orders before it (compiler/legality/overlap.py)."""

    rule = "pipeline-overlap"
    explanation = ("a warp-specialised loop issues its first matrix product of iteration k+1 before the last "
                   "statement group of iteration k and waits for it after, so no dependence may connect the two")


class ParallelDependence(LegalityError):
    rule = "parallel-dependence"
    explanation = "iterations of a loop bound to grid axes run concurrently, so no dependence may cross them"


class ParallelReduction(ParallelDependence):
    rule = "parallel-reduction"
    explanation = (
        "binding a reduction loop to grid axes splits the reduction into independent partial results "
        "combined in an unspecified order; declare `combine reassoc` to allow it"
    )


class CacheConflict(LegalityError):
    rule = "cache-conflict"
    explanation = "an on-chip copy must not go stale: the cached region may not change while the copy lives"


class CombineViolation(LegalityError):
    """A step that combines a reduction's terms in a way its `combine` policy does not allow."""

    rule = "combine"


class ReductionGrouping(CombineViolation):
    rule = "reduction-grouping"
    explanation = (
        "partial sums change how the terms of a reduction are grouped, and floating-point addition is not "
        "associative: (1 + 2^-24) + 2^-24 = 1 but 1 + (2^-24 + 2^-24) = 1 + 2^-23 (chapter 5.2.4); declare "
        "`combine reassoc`, `combine deterministic` or a matching `combine segments(N)` to allow it"
    )


class SegmentCount(CombineViolation):
    rule = "segment-count"
    explanation = (
        "the number of segments fixes which terms are added together; it must be the one the program declares "
        "and must not depend on a problem size, or the same row gives different results for different batch "
        "sizes (chapter 5.2.4: 1 segment is 175.2 ULP from the exact sum of squares, 8 segments 9.2 ULP)"
    )


class AtomicCombine(CombineViolation):
    rule = "atomic-combine"
    explanation = (
        "atomic adds combine partial results in the order the programs finish, which changes from run to run; "
        "a `deterministic` or `segments(N)` reduction must add its partial results in a fixed order "
        "(rfactor them into a buffer and combine that), only `combine reassoc` allows atomics"
    )


class RoundingViolation(LegalityError):
    """A step that moves, drops or adds a rounding: every store rounds to its dtype, at its place."""

    rule = "rounding"


class RoundingRemoved(RoundingViolation):
    rule = "rounding-removed"
    explanation = (
        "every store rounds to its dtype, and a fused or cached value must be rounded at the same place: "
        "where to keep a value and in which format are independent decisions (chapter 5.4.3: a register copy "
        "of C still rounds to bf16 before SiLU)"
    )


class RoundingAdded(RoundingViolation):
    rule = "rounding-added"
    explanation = (
        "a copy or an accumulator in a narrower format rounds values the program keeps exact: the bits lost "
        "cannot be recovered by later steps, so the result changes"
    )


class OnlineViolation(LegalityError):
    """The online-softmax rewrite (`online`, compiler/model/online.py) where it would change the result in a way
    the program does not allow."""

    rule = "online"


class OnlinePolicy(OnlineViolation):
    rule = "online-policy"
    explanation = (
        "letting readers use a running maximum and rescaling the sums built with it moves roundings: in floating "
        "point exp((x - m1)·c) · exp((m1 - m2)·c) is not exp((x - m2)·c), and a sum multiplied by a factor "
        "then extended is not the sum of the rescaled terms; declare `combine online` on the maximum to allow it"
    )


class OnlineRescale(OnlineViolation):
    rule = "online-rescale"
    explanation = (
        "a value computed with a partial maximum is right only if everything built from it is rescaled when the "
        "maximum grows: a sum linear in the exponential can be, a normalised value, a quantized value or a "
        "second maximum keeps the stale value for good (chapter 5.3.3)"
    )


class OnlineOrder(OnlineViolation):
    rule = "online-order"
    explanation = (
        "with a running maximum, an exponential must see its own term in the maximum (or exp((x - m)·c) can "
        "overflow), a sum must add a term before the maximum moves on (its rescaling uses the maximum's current "
        "value), and a reader of the sums must wait for the complete maximum"
    )


class InternalError(Exception):
    """A broken invariant of tdsl itself: a bug to report, never a user's mistake (not a TdslError, so no
    caller mistakes it for a refusal; `tdsl` exits with code 3 and asks for a report)."""


class BackendError(TdslError):
    """A valid schedule that a code generator cannot express (exit code 2)."""

    exit_code = 2

    def __init__(self, message: str, backend: str = "tile lowering"):
        self.backend = backend
        self.reason = message
        super().__init__(f"cannot generate code ({backend}): {message}")


class CountError(TdslError):
    """A set whose integer points the cost model cannot count exactly (exit code 2): it is unbounded, it
    depends on parameters that are not fixed to one value, or it has too many points to enumerate."""

    exit_code = 2


class StepError(TdslError):
    """An error raised while replaying a `schedule` block: adds the step's source location."""

    def __init__(self, error: TdslError, span: Optional[Span], source: str, filename: str):
        self.error = error
        self.exit_code = error.exit_code
        self.rule = getattr(error, "rule", None)
        text = str(error)
        head, _, rest = text.partition("\n")
        located = SourceError(head, span, source, filename).render()
        if rest:
            located += "\n" + rest
        super().__init__(located)
