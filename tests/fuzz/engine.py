"""The differential fuzzer: random schedules of random programs at random ragged sizes, every oracle checked.

    from fuzz.engine import Fuzzer
    result = Fuzzer(backends=("triton", "ascend-910b")).run(seed=1, sequences=50)
    for finding, case in result.findings: print(case.describe(), finding)

One *sequence* is a program (a file of the chosen libraries -- the examples by default -- or a generated one)
at random sizes, sometimes starting from one of the file's named schedules, grown by random steps (each
either accepted or rejected with a typed error), then checked by every oracle in `oracles.py`.  Findings are
shrunk to a minimal case (fewest steps, smallest sizes) before they are reported.  Everything is
deterministic in the seed.
"""

from __future__ import annotations

import random
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from tdsl.compiler.driver.api import loads
from tdsl.compiler.errors import LegalityError
from tdsl.frontend.diagnostics import TdslError

from . import oracles
from .cases import DISTRIBUTIONS, Case
from .programs import library_sources, random_program
from .schedules import named_steps, random_step

ROOT = Path(__file__).resolve().parents[2]

# Sizes drawn for every size of a program: ragged, tiny, and a few just past powers of two.
SIZE_CHOICES = (1, 1, 2, 3, 4, 5, 6, 7, 9, 11, 13, 16, 17, 19, 24, 31, 33, 40, 65)
# Now and then every size 1 or 2 at once, where statements lose all their instances (trisolv's later rows at
# N = 1) and loops have one iteration: drawn one by one, every size of a program is rarely that small together.
SMALLEST_SIZES, SMALLEST_SHARE = (1, 2), 0.15
MAX_INSTANCES = 12_000  # the interpreter runs one Python call per instance; keep each sequence fast


@dataclass
class Result:
    sequences: int = 0
    steps_tried: int = 0
    steps_accepted: Counter = field(default_factory=Counter)
    steps_rejected: Counter = field(default_factory=Counter)
    backend: Counter = field(default_factory=Counter)  # (backend, outcome) -> count
    refusals: Counter = field(default_factory=Counter)  # (backend, first line of the refusal) -> count
    findings: list = field(default_factory=list)  # (Finding, shrunk Case)

    def merge(self, other: "Result") -> None:
        self.sequences += other.sequences
        self.steps_tried += other.steps_tried
        self.steps_accepted.update(other.steps_accepted)
        self.steps_rejected.update(other.steps_rejected)
        self.backend.update(other.backend)
        self.refusals.update(other.refusals)
        self.findings.extend(other.findings)

    def summary(self) -> str:
        lines = [f"{self.sequences} sequences, {self.steps_tried} steps tried, "
                 f"{sum(self.steps_accepted.values())} accepted, {len(self.findings)} findings"]
        lines.append("  accepted: " + ", ".join(f"{k} {v}" for k, v in sorted(self.steps_accepted.items())))
        lines.append("  rejected: " + ", ".join(f"{k} {v}" for k, v in self.steps_rejected.most_common()))
        by_backend: dict = {}
        for (backend, outcome), n in self.backend.items():
            by_backend.setdefault(backend, Counter())[outcome] += n
        for backend, counts in sorted(by_backend.items()):
            lines.append(f"  {backend}: " + ", ".join(f"{k} {v}" for k, v in counts.most_common()))
        return "\n".join(lines)

    def counts(self) -> dict:
        """The run's figures as plain data (for benchmarks/RESULTS.md and --json)."""
        return {
            "sequences": self.sequences, "steps_tried": self.steps_tried,
            "steps_accepted": sum(self.steps_accepted.values()), "findings": len(self.findings),
            "findings_by_kind": dict(Counter(f.kind for f, _ in self.findings)),
            "backend_outcomes": {f"{b} {o}": n for (b, o), n in sorted(self.backend.items())},
        }

    def refusal_summary(self, top: int = 15) -> str:
        return "\n".join(f"  {n:4d} {b}: {why}" for (b, why), n in self.refusals.most_common(top))


@dataclass
class Fuzzer:
    backends: tuple = ("triton", "ascend-950", "ascend-910b", "tilelang")
    max_steps: int = 8
    random_programs: float = 0.4  # share of sequences on generated programs (the rest on the libraries' files)
    libraries: tuple = ("examples",)  # programs.LIBRARIES: examples, polybench, programs
    named_start: float = 0.0  # share of the files' sequences that start from one of the file's named schedules
    tilelang_every: int = 10  # TileLang lowering takes seconds: check every n-th sequence only
    sm90_every: int = 5  # so does compiling a Triton module for sm_90 (backend triton-sm90, when asked for)
    shrink: bool = True
    workdir: Optional[Path] = None
    distributions: tuple = DISTRIBUTIONS  # the inputs every case is checked on (cases.py)

    def run(self, seed: int, sequences: int, on_result=None) -> Result:
        return self.run_range(seed, 0, sequences, on_result)

    def run_range(self, seed: int, first: int, count: int, on_result=None) -> Result:
        """Sequences first .. first+count-1 of `seed` (sequence n is seeded seed * 1000003 + n)."""
        total = Result()
        workdir = self.workdir or Path(tempfile.mkdtemp(prefix="tdsl-fuzz-"))
        for n in range(first, first + count):
            one = self.sequence(seed * 1_000_003 + n, workdir)
            total.merge(one)
            if on_result:
                on_result(n, one)
        return total

    # ------------------------------------------------------------ one sequence

    def sequence(self, seed: int, workdir: Path) -> Result:
        rng = random.Random(seed)
        result = Result(sequences=1)
        case = self._program(rng, seed)
        if case is None:
            return result
        grown, finding = self._grow(rng, case, result)
        if finding is None:
            every = {"tilelang": self.tilelang_every, "triton-sm90": self.sm90_every}
            backends = [b for b in self.backends if seed % every.get(b, 1) == 0]
            finding = self.check(grown, backends, workdir, result)
        if finding is not None:
            if self.shrink:
                grown = shrink(grown, finding, self, workdir)
                finding = self.check(grown, list(self.backends), workdir, Result()) or finding
            result.findings.append((finding, grown))
        return result

    def _program(self, rng: random.Random, seed: int) -> Optional[Case]:
        if rng.random() < self.random_programs:
            name, source = f"random-{seed}", random_program(rng)
        else:
            name, source = rng.choice([f for library in self.libraries for f in library_sources(library)])
        prog = loads(source, "fuzz.tdsl")
        kernel = next(iter(prog.kernels))
        decls = prog.kernels[kernel].sizes
        ints = [n for n, d in decls.items() if isinstance(d.value, int) or d.is_param]
        choices = SMALLEST_SIZES if rng.random() < SMALLEST_SHARE else SIZE_CHOICES
        for _ in range(20):
            sizes = {n: rng.choice(choices) for n in ints}
            try:
                model = prog.model(sizes=sizes)
            except TdslError:
                continue
            if instance_count(model) <= MAX_INSTANCES:
                has_params = any(decls[n].is_param for n in ints)
                case = Case(name, source, sizes, [], seed=rng.randrange(1 << 30),
                            symbolic=has_params and rng.random() < 0.5, distributions=self.distributions)
                return self._named_start(rng, prog, case)
        return None

    def _named_start(self, rng: random.Random, prog, case: Case) -> Case:
        """Sometimes the case begins with the steps of one of its file's schedule blocks (the random steps then
        build on a hand-written tiling, skew or time tiling, at the case's sizes)."""
        if not (self.named_start and prog.schedule_names and rng.random() < self.named_start):
            return case
        block = rng.choice(prog.schedule_names)
        return case.but(name=f"{case.name} from {block}", steps=named_steps(prog, block))

    def _grow(self, rng: random.Random, case: Case, result: Result):
        """Try random steps; the case keeps every step tried (a rejected one included, since what it leaves
        behind is part of what is tested)."""
        try:
            prog, sched, _ = oracles.apply_steps(case)
        except Exception as err:  # noqa: BLE001
            return case, oracles.internal("program order", err)
        steps = list(case.steps)
        for _ in range(rng.randint(0, self.max_steps)):
            step = random_step(rng, sched)
            if step is None:
                continue
            steps.append(step)
            result.steps_tried += 1
            before = oracles.state_of(sched)
            try:
                step.apply(sched)
            except TdslError as err:
                result.steps_rejected[_outcome(step, err)] += 1
                if not oracles.same_state(before, oracles.state_of(sched)):
                    return case.but(steps=steps), oracles.Finding(
                        "rejected-step-changed-state", f"step {step}", str(err).splitlines()[0])
                continue
            except Exception as err:  # noqa: BLE001
                return case.but(steps=steps), oracles.internal(f"step {step}", err)
            result.steps_accepted[step.primitive] += 1
        return case.but(steps=steps, trace_text=str(sched.trace)), None

    # ------------------------------------------------------------ every oracle

    def check(self, case: Case, backends, workdir: Path, result: Result) -> Optional[oracles.Finding]:
        try:
            prog, sched, finding = oracles.apply_steps(case)
        except Exception as err:  # noqa: BLE001
            return oracles.internal("program order", err)
        if finding:
            return finding
        case = case.but(trace_text=str(sched.trace))
        finding = oracles.check_trace(case, sched)
        if finding:
            return finding
        try:
            original = prog.schedule(kernel=case.kernel)
            refs = oracles.references(case, original, sched)
        except Exception as err:  # noqa: BLE001
            return oracles.internal("interpreter (program order)", err)
        finding = oracles.check_interpreter(case, original, sched, refs)
        if finding:
            return finding
        for backend in backends:
            outcome: dict = {}
            finding = oracles.check_backend(case, backend, original, refs, workdir, outcome)
            said = outcome.get(backend, "finding")
            result.backend[backend, _short(said)] += 1
            if said.startswith("refused"):
                result.refusals[backend, said[len("refused: "):]] += 1
            if finding:
                return finding
        printers = [b for b in backends if b not in ("tilelang", "triton-sm90")] + ["tilelang"]  # sm90: Triton's text
        finding = oracles.check_pure_emission(sched, printers)
        return finding or oracles.check_plan_matches_lowering(sched) or oracles.check_cost_report(sched)


def instance_count(model) -> int:
    return sum(s.domain.count_val().to_python() for s in model.stmts)


def _outcome(step, err: TdslError) -> str:
    if isinstance(err, LegalityError):
        return f"{step.primitive}: {err.rule}"
    return f"{step.primitive}: {type(err).__name__}"


def _short(outcome: str) -> str:
    return outcome if not outcome.startswith("refused") else "refused"


# ---------------------------------------------------------------- shrinking


def shrink(case: Case, finding: oracles.Finding, fuzzer: Fuzzer, workdir: Path) -> Case:
    """The smallest case (fewest steps, then smallest sizes) that still shows the same kind of finding."""
    want = finding.key()

    def still_fails(candidate: Case) -> bool:
        got = _replay_finding(candidate, fuzzer, workdir)
        return got is not None and got.key() == want

    changed = True
    while changed:
        changed = False
        for k in reversed(range(len(case.steps))):
            candidate = case.but(steps=case.steps[:k] + case.steps[k + 1:])
            if still_fails(candidate):
                case, changed = candidate, True
        for name, value in sorted(case.sizes.items()):
            for smaller in sorted({1, 2, 3, value // 2, value - 1}):
                if 1 <= smaller < value and still_fails(case.but(sizes={**case.sizes, name: smaller})):
                    case, changed = case.but(sizes={**case.sizes, name: smaller}), True
                    break
    return case


def _replay_finding(case: Case, fuzzer: Fuzzer, workdir: Path) -> Optional[oracles.Finding]:
    return fuzzer.check(case, list(fuzzer.backends), workdir, Result())
