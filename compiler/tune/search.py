"""The model-guided search: sample the sketch's space, screen every candidate, climb from the best ones.

    result = search(prog, target="h200")            # kernel, sizes, backend as for `tdsl compile`
    result.ranked[0].text                           # the steps of the model's favourite
    result.rejected                                 # Counter: rule -> candidates it rejected

1. **Sample** `samples` distinct choices of the sketch's parameters (all of them when the space is smaller).
2. **Screen** each one (compiler/tune/screen.py): legality, capacity, backend, then the cost model.
3. **Climb**: from the `beam` best accepted candidates, judge every neighbour (one knob moved one step) not
   judged yet; repeat while the beam improves, at most `rounds` times.  This is the model's own optimum
   around the samples, not a guarantee of the global one; the measurement decides among the top ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from tdsl.frontend.diagnostics import TdslError

from tdsl.compiler.tune import space
from tdsl.compiler.tune.screen import Screen, Verdict
from tdsl.compiler.tune.sketches import Sketch, sketch


@dataclass
class SearchResult:
    sketch: Sketch
    ranked: list[Verdict]  # accepted candidates, best predicted time first
    screen: Screen
    judged: dict = field(default_factory=dict)  # space.key(choice) -> Verdict

    @property
    def rejected(self):
        return self.screen.rejected

    def summary(self) -> str:
        """One line per rule that rejected candidates, with its first message."""
        n, ok = len(self.judged), len(self.ranked)
        lines = [f"{n} candidates screened from a space of {self.sketch.size():,}: {ok} accepted, {n - ok} rejected"]
        for rule, count in self.rejected.most_common():
            first = self.screen.examples[rule].splitlines()[0]
            lines.append(f"  {count:5d}  {rule}: {first}")
        return "\n".join(lines)


def search(prog, kernel: Optional[str] = None, sizes: Optional[dict] = None, target: str = "h200",
           backend: Optional[str] = None, samples: int = 256, beam: int = 4, rounds: int = 8, seed: int = 0,
           progress: Optional[Callable[[int], None]] = None) -> SearchResult:
    from tdsl.compiler.driver.generate import resolve_target  # the target vocabulary of `tdsl compile`

    kind, backend, device = resolve_target(target, backend)
    base = prog.schedule(None, kernel=kernel, sizes=sizes)
    if base.model.params:
        given = ",".join(f"{p}=..." for p in base.model.params)
        raise TdslError(f"tuning measures one size of every dimension: give a value to each param ({given}; "
                        f"--size {given} on the command line)")
    sk = sketch(base.model, free=_run_time_model(prog, kernel))
    screen = Screen(base, device, kind, backend)
    result = SearchResult(sk, [], screen)
    _judge_all(result, space.sample(sk, samples, seed), progress)
    best = _best_keys(result, beam)
    for _ in range(rounds):
        fresh = [n for k in best for n in space.neighbours(sk, result.judged[k].choice)
                 if space.key(n) not in result.judged]
        _judge_all(result, fresh, progress)
        improved = _best_keys(result, beam)
        if improved == best:
            break
        best = improved
    result.ranked = sorted((v for v in result.judged.values() if v.accepted), key=_rank)
    return result


def _run_time_model(prog, kernel: Optional[str]):
    """The kernel with the program's run-time sizes (`param`) unbound: the sizes a tuned block must hold at."""
    from tdsl.compiler.driver.api import Program

    return Program(prog.ast, prog.kernels).model(kernel)


def neighbours(result: SearchResult, choice: dict) -> list[Verdict]:
    """The accepted neighbours of a choice (one knob moved one step), judged now if they were not yet."""
    return accepted(result, space.neighbours(result.sketch, choice))


def orders(result: SearchResult, choice: dict) -> list[Verdict]:
    """The accepted launch-order variants of a choice (space.orders), judged now if they were not yet."""
    return accepted(result, space.orders(result.sketch, choice))


def accepted(result: SearchResult, choices: list[dict]) -> list[Verdict]:
    """The accepted ones of `choices`, each judged now if it was not yet."""
    _judge_all(result, choices, None)
    return [result.judged[space.key(c)] for c in choices if result.judged[space.key(c)].accepted]


def _judge_all(result: SearchResult, choices: list[dict], progress) -> None:
    # Sorted by their steps so that consecutive candidates share the longest prefixes (screen.py).
    todo = {space.key(c): c for c in choices if space.key(c) not in result.judged}
    built = sorted(((result.sketch.steps(c), k, c) for k, c in todo.items()), key=lambda t: [str(s) for s in t[0]])
    for steps, k, c in built:
        result.judged[k] = result.screen.judge(c, steps)
        if progress:
            progress(1)


def _best_keys(result: SearchResult, beam: int) -> list[str]:
    """The best `beam` accepted candidates of distinct estimates: candidates the model ties (the same tiles
    walked in another grid order) would fill the beam with one point of the space and climb from it alone."""
    ranked = sorted(((k, v) for k, v in result.judged.items() if v.accepted), key=lambda kv: _rank(kv[1]))
    keys, seen = [], set()
    for k, v in ranked:
        if len(keys) == beam:
            break
        if v.t_estimate not in seen:
            seen.add(v.t_estimate)
            keys.append(k)
    return keys


def _rank(v: Verdict) -> tuple:
    """Predicted time, then the roofline bound, then the steps' text: a total order, the same in every run."""
    return (v.t_estimate, v.t_bound, v.text)
