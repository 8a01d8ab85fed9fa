"""`tdsl tune`: a schedule search that only ever measures legal, fitting, compilable schedules.

The modules, in the order the flow runs through them:

    sketches.py   roles of the statements (product, elementwise, rows, single) -> schedule templates + knobs
    space.py      choices of the knobs: sampled, enumerated, neighbours of one choice
    screen.py     each candidate built through the Schedule API (legality), sized (capacity), lowered
                  (backend), costed (the cost model's t_estimate); rejections counted by rule
    search.py     sample, screen, climb from the model's best candidates
    measure.py    one candidate compiled, checked against the interpreter at small sizes, timed on a GPU
    executors.py  where measurements run: local worker processes (one per GPU) or a Ray cluster
    log.py        the tuning log (JSON lines), resumable; the best record of a workload
    tuner.py      tune(): search, measure the best, log, name the winner

See docs/tuning.md.
"""

from tdsl.compiler.tune.search import SearchResult, search
from tdsl.compiler.tune.sketches import NoSketch, Sketch, sketch
from tdsl.compiler.tune.tuner import TuneResult, tune

__all__ = ["search", "SearchResult", "sketch", "Sketch", "NoSketch", "tune", "TuneResult"]
