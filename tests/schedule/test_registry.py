"""The primitive registry (compiler/schedule/primitives/registry.py): one `@primitive` declaration per primitive, in its
own module, from which the `Schedule` methods, the usage texts of errors, the `.tdsl` keywords, the trace form
and `Schedule.can` are built.

Tested here: every primitive has a documented method with its real signature; the usage texts, keywords and
listing order are the ones the CLI has always printed; a call is recorded in the trace as declared and replays;
a primitive declared outside compiler/ gets all of it with nothing else written; a declaration that does not
describe its function is refused; `can` answers like the method would, commits nothing, and lets internal errors
through.  (Self-contained: no helper modules, so the file runs wherever it sits under tests/.)
"""

from __future__ import annotations

import inspect
import pydoc
import sys

import pytest

from tdsl.compiler.driver.api import loads
from tdsl.compiler.errors import DependenceViolation, LegalityError, ScheduleError
from tdsl.compiler.schedule.primitives import registry
from tdsl.compiler.schedule.primitives.common import check_stmt, positive_int
from tdsl.compiler.schedule.primitives.registry import INT, LOOP, STMT, arg, option, primitive, primitives
from tdsl.compiler.schedule.schedule import Schedule
from tdsl.compiler.schedule.tree_view import tree_text

GEMM_SILU = """
const M = 128, K = 64, N = 128
kernel gemm_silu(A: bf16[M, K], W: bf16[K, N]) -> (Y: bf16[M, N]) {
  C[i, j]: bf16 = sum(k) A[i, k] * W[k, j] accum f32
  Y[i, j] = silu(C[i, j])
}
"""

# Y reads T one row up and one column right: once T and Y share loops i and j, swapping them is illegal.
STENCIL = """
const N = 8
kernel scan(X: f32[N, N]) -> (Y: f32[N, N]) {
  T[i, j] = X[i, j] + 1.0
  Y[i, j : i >= 1 and j < 7] = T[i - 1, j + 1]
}
"""

# What the CLI has always printed (the table schedule.py kept by hand before the registry), in listing order.
USAGE = {
    "split": "split(STMT.LOOP, FACTOR)",
    "tile": "tile(STMT.L1, ..., STMT.Ln, F1, ..., Fn)",
    "reorder": "reorder(STMT, L1, L2, ...)",
    "fuse": "fuse(STMT.L1, STMT.L2)",
    "distribute": "distribute(STMT.LOOP)",
    "skew": "skew(STMT.LOOP, STMT.OUTER, FACTOR)",
    "shift": "shift(STMT.LOOP, OFFSET)",
    "reverse": "reverse(STMT.LOOP)",
    "compute_at": "compute_at(STMT, TARGET.LOOP)",
    "recompute_at": "recompute_at(STMT, TARGET.LOOP)",
    "reverse_compute_at": "reverse_compute_at(STMT, TARGET.LOOP)",
    "compute_inline": "compute_inline(STMT[, round=false])",
    "cache_read": "cache_read(TENSOR, SCOPE, at=STMT.LOOP[, dtype=DTYPE])",
    "cache_write": "cache_write(TENSOR, SCOPE, at=STMT.LOOP[, dtype=DTYPE])",
    "fold_storage": "fold_storage(TENSOR, ITER, PLANES)",
    "store_in": "store_in(TENSOR, TENSOR)",
    "pipeline": "pipeline(STMT.LOOP, stages=N[, warp_specialize=true])",
    "bind": "bind(STMT.LOOP, grid.x)",
    "launch": "launch(STMT, warps=N[, group=N][, persistent=true])",
    "host": "host(STMT.LOOP)",
    "rfactor": "rfactor(STMT.LOOP[, segments=N][, dtype=DTYPE])",
    "online": "online(STMT)",
}

# The Python signatures of the hand-written methods the generated ones replace; names= is keyword-only (a step's
# extra positional argument is a mistake, not the names of its loops).
SIGNATURES = {
    "split": "(self, loop, factor, *, names=None)",
    "tile": "(self, *args, names=None)",
    "reorder": "(self, *loops)",
    "fuse": "(self, first, second, *, names=None)",
    "distribute": "(self, loop)",
    "skew": "(self, loop, by, factor, *, names=None)",
    "shift": "(self, loop, offset)",
    "reverse": "(self, loop)",
    "compute_at": "(self, stmt, loop=None, at=None)",
    "recompute_at": "(self, stmt, loop=None, at=None)",
    "reverse_compute_at": "(self, stmt, loop=None, at=None)",
    "compute_inline": "(self, stmt, round=True)",
    "cache_read": "(self, tensor, scope, at=None, dtype=None)",
    "cache_write": "(self, tensor, scope, at=None, dtype=None)",
    "fold_storage": "(self, tensor, dim, planes)",
    "store_in": "(self, output, array)",
    "pipeline": "(self, loop, stages=2, warp_specialize=False)",
    "bind": "(self, loop, axis)",
    "launch": "(self, stmt, warps=4, group=1, persistent=False)",
    "host": "(self, loop)",
    "rfactor": "(self, loop, segments=None, dtype=None)",
    "online": "(self, stmt)",
}

# The keywords a .tdsl step may write, and the primitives that make loops (`a, b = split(...)`).
KEYWORDS = {
    "split": {"factor"}, "tile": set(), "reorder": set(), "fuse": set(), "distribute": set(), "skew": {"by", "factor"},
    "shift": {"offset"}, "reverse": set(), "compute_at": {"at"}, "recompute_at": {"at"},
    "reverse_compute_at": {"at"}, "compute_inline": {"round"}, "cache_read": {"at", "scope", "dtype"},
    "cache_write": {"at", "scope", "dtype"}, "fold_storage": {"planes"}, "store_in": set(), "pipeline": {"stages", "warp_specialize"}, "bind": {"axis"}, "launch": {"warps", "group", "persistent"},
    "host": set(), "rfactor": {"segments", "dtype"}, "online": set(),
}
MAKE_LOOPS = {"split", "tile", "fuse", "skew"}


def sched(text: str = GEMM_SILU) -> Schedule:
    return loads(text).schedule()


def step_error(step: str, text: str = GEMM_SILU) -> str:
    """The message of the error a one-step schedule block raises (without its location and source lines)."""
    prog = loads(text + f"schedule s {{\n  {step}\n}}\n", "t.tdsl")
    with pytest.raises(Exception) as err:
        prog.schedule("s")
    return str(err.value).splitlines()[0].split(": error: ", 1)[1]


def plain(sig: inspect.Signature) -> str:
    """A signature without its annotations."""
    params = [p.replace(annotation=p.empty) for p in sig.parameters.values()]
    return str(sig.replace(parameters=params, return_annotation=sig.empty))


# ---------------------------------------------------------------- the table and the methods


def test_the_table_lists_every_primitive_in_the_order_the_cli_prints():
    assert list(primitives()) == list(USAGE)
    assert step_error("splitt(C.i, 4)") == (
        "splitt: unknown primitive (did you mean 'split'?); primitives: " + ", ".join(USAGE))


@pytest.mark.parametrize("name", list(USAGE))
def test_every_primitive_has_a_documented_method_with_its_real_signature(name):
    prim = primitives()[name]
    method = getattr(Schedule, name)
    assert method.__primitive__ is prim and method.__qualname__ == f"Schedule.{name}"
    # The contract: the before/after docstring of the primitive's own module, then how to call it.
    module_doc = sys.modules[prim.fn.__module__].__doc__.strip()
    assert prim.fn.__module__.startswith("tdsl.compiler.schedule.primitives.")
    assert method.__doc__.startswith(module_doc)
    assert f"Schedule step: ``{USAGE[name]}``." in method.__doc__
    for p in prim.params:
        assert f"    {'*' * (p.form == 'rest')}{p.name} " in method.__doc__  # every argument is described
    assert "Arguments:" in pydoc.render_doc(method, renderer=pydoc.plaintext)
    # The signature inspect (and so help() and IDEs) sees is the declared one, with the old parameters.
    sig = inspect.signature(method)
    assert sig == prim.signature(method=True)
    assert plain(sig) == SIGNATURES[name]
    assert all(p.annotation is not p.empty for p in list(sig.parameters.values())[1:])


def test_help_shows_the_before_and_after():
    text = pydoc.render_doc(Schedule.split, renderer=pydoc.plaintext)
    assert "split(self, loop: 'str | LoopRef', factor: 'int', *, names: 'str | Sequence[str] | None' = None)" in text
    assert "After ``io, ii = split(C.i, 64)``" in text
    assert "Returns the names of the loops it makes" in text


@pytest.mark.parametrize("name", list(USAGE))
def test_usage_keywords_and_results_come_from_the_declaration(name):
    prim = primitives()[name]
    assert prim.usage == USAGE[name]
    assert set(prim.keywords) == KEYWORDS[name]
    assert prim.new_loops == (name in MAKE_LOOPS)


def test_a_call_that_does_not_fit_fails_as_a_python_call_does():
    s = sched()
    with pytest.raises(TypeError, match=r"Schedule.split\(\) missing 1 required positional argument: 'factor'"):
        s.split("C.i")
    with pytest.raises(TypeError, match=r"Schedule.reorder\(\) got an unexpected keyword argument 'names'"):
        s.reorder("C.j", "C.i", names=["a"])
    assert len(s.trace) == 0


# ---------------------------------------------------------------- error texts


def test_errors_print_the_usage():
    assert step_error("bind(C.i)") == "bind: wrong arguments; expected bind(STMT.LOOP, grid.x)"
    assert step_error("cache_read(tensor=A, scope=shared, at=C.k)") == (
        "cache_read: unknown keyword 'tensor' (cache_read(TENSOR, SCOPE, at=STMT.LOOP[, dtype=DTYPE]))")
    assert step_error("compute_at(Y, loop=C.j)") == "compute_at: unknown keyword 'loop' (compute_at(STMT, TARGET.LOOP))"
    assert step_error("compute_at(Y)") == "compute_at: name the target loop once: compute_at(STMT, TARGET.LOOP)"
    assert step_error("x = reverse(C.i)") == "reverse: returns no loops; remove the names before '='"
    assert step_error("fuse(C.i, C.j, names=x)") == "fuse: unknown keyword 'names' (fuse(STMT.L1, STMT.L2))"
    with pytest.raises(ScheduleError, match=r"^reverse_compute_at: name the target loop once: "
                                            r"reverse_compute_at\(STMT, TARGET.LOOP\)$"):
        sched().reverse_compute_at("Y", "C.j", at="C.j")


def test_a_factor_written_twice_is_wrong_arguments():
    """`split(C.i, 4, factor=4)` names the factor twice.  (Before the registry, split alone moved a `factor=`
    keyword to the end of the positional arguments, where it became `names=4`.)"""
    assert step_error("split(C.i, 4, factor=4)") == "split: wrong arguments; expected split(STMT.LOOP, FACTOR)"


# ---------------------------------------------------------------- the trace


def test_the_trace_records_each_argument_as_declared_and_replays():
    s = sched()
    s.split("C.k", 16)
    s.reorder("C", "j", "i")
    s.cache_read("A", "shared", at="C.ko")  # at= always printed, dtype= left out at its default
    s.cache_write("C", "register", at="C.i", dtype=None)
    s.pipeline("C.ko")  # stages= printed even at its default
    s.reverse_compute_at("Y", at="C.j")  # the target loop, written as at=, prints positionally
    s.launch("C")
    text = str(s.trace)
    assert text.splitlines() == [
        "ko, kk = split(C.k, 16)",
        "reorder(C, j, i)",
        "cache_read(A, shared, at=C.ko)",
        "cache_write(C, register, at=C.i)",
        "pipeline(C.ko, stages=2)",
        "reverse_compute_at(Y, C.j)",
        "launch(C, warps=4)",
    ]
    again = s.trace.replay(sched())
    assert str(again.trace) == text and again.time_map().is_equal(s.time_map())
    block = loads(GEMM_SILU + "schedule s {\n" + text + "\n}\n").schedule("s")
    assert str(block.trace) == text


# ---------------------------------------------------------------- can


def test_can_a_legal_split():
    s = sched()
    before = tree_text(s.model, s.tree)
    assert s.can("split", "C.i", 32)
    assert s.can("split", "C.i", 32, names=("a", "b"))
    assert len(s.trace) == 0 and tree_text(s.model, s.tree) == before  # nothing applied
    assert s.split("C.i", 32) == ("io", "ii")  # and the step itself is still there to take


def test_can_an_illegal_reorder_on_a_stencil():
    s = sched(STENCIL)
    s.fuse("T.i", "Y.i")
    s.fuse("T.j", "Y.j")
    trace, tree = str(s.trace), tree_text(s.model, s.tree)
    assert s.can("reorder", "T", "j", "i") is False
    assert s.can("bind", "T.i", "grid.x") is False  # Y reads T one row up: i carries a dependence
    assert s.can("reverse", "T.i") is False and s.can("reverse", "T.j")  # i carries it, j does not
    assert s.can("split", "T.j", 4)
    assert str(s.trace) == trace and tree_text(s.model, s.tree) == tree  # unchanged, accepted or not
    with pytest.raises(DependenceViolation):  # the method agrees
        s.reorder("T", "j", "i")


def test_can_a_wrong_name():
    s = sched()
    assert s.can("split", "C.q", 4) is False  # no loop q
    assert s.can("split", "D.i", 4) is False  # no statement D
    assert s.can("split", "i", 4) is False  # ambiguous: C.i and Y.i
    assert s.can("split", "C.i", 4, names=("j", "x")) is False  # j is taken on C's path
    assert s.can("cache_read", "Q", "shared", at="C.k") is False  # no tensor Q
    assert s.can("compute_at", "Y") is False  # no target loop
    assert len(s.trace) == 0


def test_can_answers_what_the_method_does():
    steps = [("split", ("C.i", 0), {}), ("split", ("C.k", 16), {}), ("tile", ("C.i", "C.j", 8, 8), {}),
             ("reorder", ("C", "k", "i"), {}), ("reorder", ("Y", "j", "i"), {}), ("fuse", ("C.i", "Y.i"), {}),
             ("reverse", ("C.k",), {}), ("reverse", ("Y.j",), {}), ("compute_at", ("C", "Y.i"), {}),
             ("reverse_compute_at", ("Y",), {"at": "C.j"}), ("reverse_compute_at", ("Y", "C.k"), {}),
             ("compute_inline", ("C",), {}), ("cache_read", ("A", "shared"), {"at": "C.k"}),
             ("cache_read", ("A", "nowhere"), {"at": "C.k"}), ("cache_write", ("C", "register"), {"at": "C.k"}),
             ("pipeline", ("C.k",), {"stages": 3}), ("bind", ("C.i", "grid.x"), {}), ("bind", ("C.k", "grid.x"), {}),
             ("launch", ("C",), {"warps": 3}), ("rfactor", ("C.k",), {"segments": 4})]
    for name, args, kwargs in steps:
        s = sched()
        answer = s.can(name, *args, **kwargs)
        try:
            getattr(s, name)(*args, **kwargs)
            applied = True
        except (ScheduleError, LegalityError):
            applied = False
        assert answer == applied, (name, args, kwargs)


def test_can_raises_for_questions_that_are_not_steps():
    s = sched()
    with pytest.raises(ValueError, match=r"unknown primitive \(did you mean 'split'\?\)"):
        s.can("splitt", "C.i", 4)
    with pytest.raises(TypeError):
        s.can("split", "C.i")  # the arguments do not fit split at all


def test_copy_is_independent():
    s = sched()
    s.split("C.i", 32)
    t = s.copy()
    t.split("C.j", 32)
    assert len(s.trace) == 1 and len(t.trace) == 2
    assert [l.name for l in s.tree.path("C")] == ["io", "ii", "j", "k"]


# ---------------------------------------------------------------- a primitive declared here


TOUCH_DOC = """touch: a primitive that changes nothing (declared by a test, to show what a declaration gives).

Before::          After ``touch(C, times=2)``::

    for i: C          for i: C
"""


def _touch(state, stmt: str, times: int = 1) -> None:
    check_stmt(state, "touch", stmt)
    positive_int("touch", "times", times)


def _broken(state, loop) -> None:
    raise KeyError(loop)  # a bug inside a primitive


@pytest.fixture
def declared():
    """`touch` and `broken`, declared as a primitive module would, and removed afterwards."""
    primitive(arg("stmt", STMT), option("times", INT, 1), rank=100_001, name="touch", doc=TOUCH_DOC)(_touch)
    primitive(arg("loop", LOOP), rank=100_002, name="broken", doc="broken: raises KeyError.")(_broken)
    yield
    registry.unregister("touch")
    registry.unregister("broken")
    assert not hasattr(Schedule, "touch") and "touch" not in primitives()


def test_a_new_primitive_needs_only_its_declaration(declared):
    assert list(primitives())[-2:] == ["touch", "broken"]
    assert plain(inspect.signature(Schedule.touch)) == "(self, stmt, times=1)"
    assert Schedule.touch.__doc__.startswith(TOUCH_DOC.strip())
    s = sched()
    assert s.touch("C") is None
    assert s.can("touch", "C", times=2) and not s.can("touch", "Q") and not s.can("touch", "C", times=0)
    assert str(s.trace) == "touch(C, times=1)"
    assert str(s.trace.replay(sched()).trace) == "touch(C, times=1)"
    block = loads(GEMM_SILU + "schedule s {\n  touch(Y, times=3)\n  split(C.i, 4)\n}\n").schedule("s")
    assert str(block.trace) == "touch(Y, times=3)\nio, ii = split(C.i, 4)"
    assert step_error("touch(C, 2, 3)") == "touch: wrong arguments; expected touch(STMT, times=N)"
    assert step_error("touch(C, twice=2)") == "touch: unknown keyword 'twice' (touch(STMT, times=N))"
    assert step_error("touch(Q)") == "touch: unknown statement 'Q' (statements: C, Y)"


def test_can_lets_internal_errors_through(declared):
    s = sched()
    with pytest.raises(KeyError):
        s.can("broken", "C.i")
    assert len(s.trace) == 0


def test_a_declaration_must_describe_its_function():
    def misnamed(state, stmt):
        pass

    with pytest.raises(ValueError, match=r"declares parameters \[\('loop', 'one'\)\] but the function takes "
                                         r"\[\('stmt', 'one'\)\]"):
        primitive(arg("loop", LOOP), rank=100_003)(misnamed)

    def makes_loops(state, loop):
        pass

    with pytest.raises(ValueError, match=r"declares parameters"):
        primitive(arg("loop", LOOP), new_loops=True, rank=100_004)(makes_loops)  # no names= parameter

    def other_default(state, loop, stages=3):
        pass

    with pytest.raises(ValueError, match=r"stages defaults to 2 here and to 3 in the function"):
        primitive(arg("loop", LOOP), option("stages", INT, 2), rank=100_005)(other_default)

    def split(state, loop, factor, names=None):
        pass

    with pytest.raises(ValueError, match=r"primitive split is declared twice"):
        primitive(arg("loop", LOOP), arg("factor", INT), new_loops=True, rank=100_006)(split)

    def model(state, loop):
        pass

    with pytest.raises(ValueError, match=r"would replace Schedule.model"):
        primitive(arg("loop", LOOP), rank=100_007)(model)
    assert list(primitives()) == list(USAGE)
