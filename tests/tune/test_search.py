"""The search never yields a schedule that is illegal, over capacity, refused by the backend, or that changes the
result -- on the chapter's programs at their sizes and on random kernels (tests/fuzz/programs.py)."""

import random

import pytest

import tdsl
from catalog import EXAMPLES, ROOT
from fuzz.programs import random_program
from tdsl.compiler.analysis.buffer_plan import plan_kernels
from tdsl.compiler.analysis.cost import analyze
from tdsl.compiler.analysis.cost.backend_rules import staged_overflow
from tdsl.compiler.driver.api import loads
from tdsl.compiler.driver.generate import generate
from tdsl.compiler.driver.testing import assert_legal
from tdsl.compiler.tune.measure import block_source
from tdsl.compiler.tune.search import search
from tdsl.compiler.tune.sketches import NoSketch
from tdsl.compiler.targets import get_target
from tdsl.frontend.diagnostics import TdslError


def assert_sound(prog, verdict, sizes=None, run=True):
    """The candidate, as the block a user pastes: legal, within capacity, generated, bit-identical."""
    pasted = loads(block_source(prog.ast.source, "cand", verdict.text), "cand.tdsl", sizes=sizes or prog.sizes)
    # legal; run: bit-identical in the interpreter (within the declared policy: online, reassoc)
    sched = assert_legal(pasted, "cand", run=run)
    assert not analyze(sched, "h200").violations, verdict.text
    # nor over the shared memory with the operand copies Triton makes itself (compiler/analysis/cost/staging.py)
    assert staged_overflow(sched.model, plan_kernels(sched, get_target("h200")), get_target("h200"), "triton") is None
    generate(pasted, "cand", target="h200")


def test_gemm_at_its_size_rejects_only_for_named_rules_and_accepts_only_what_fits():
    prog = tdsl.load(ROOT / "benchmarks/programs/gemm_bf16.tdsl")
    result = search(prog, target="h200", samples=60, rounds=1, seed=3)
    assert result.ranked and result.rejected  # 256-wide tiles with 4-5 stages overflow shared memory
    # capacity:staged: persistent candidates whose stored tile does not fit beside the operands (cost/staging.py)
    # capacity:registers: a 128 x 256 (or larger) accumulator on 4 warps, more registers than a thread has
    assert set(result.rejected) <= {"capacity:shared", "capacity:register", "capacity:staged", "capacity:registers"}
    assert "capacity" in result.summary() and "candidates screened" in result.summary()
    for rule in result.rejected:  # each rule's first message whole (probe GG: cut at 160 characters)
        assert result.screen.examples[rule].splitlines()[0] in result.summary()
    for v in result.ranked[:3] + result.ranked[-2:]:
        assert_sound(prog, v, run=False)  # 1024 x 12288 x 4096: too large for the interpreter
    # every rejection carries its rule's message, and nothing rejected is ranked
    assert all(not v.accepted for v in result.judged.values() if v.rule)
    assert all(v.accepted for v in result.ranked)


def test_an_accumulator_past_the_registers_is_never_measured():
    """quant_gemm's 128 x 256 product tile on 4 warps holds 256 f32 values a thread in its accumulator alone:
    8.9 ms on the H100 (49x the best candidate; Triton gave it 32 registers and 9 KiB of local memory a
    thread).  On 8 warps the same tile holds 128 a thread and passes."""
    from tdsl.compiler.tune.screen import Screen

    prog = tdsl.load(EXAMPLES / "quant_gemm.tdsl")
    base = prog.schedule(None)
    steps = ["ko, ki = split(amax.k, 4096)", "bind(amax.i, grid.x)", "launch(amax, warps=8)",
             "io, ko, ii, ki = tile(Aq.i, Aq.k, 2, 512)", "bind(Aq.io, grid.x)", "bind(Aq.ko, grid.y)",
             "launch(Aq, warps=2)", "io, jo, ii, ji = tile(P.i, P.j, 128, 256)", "ko, ki = split(P.k, 128)",
             "reorder(P, io, jo, ko, ii, ji, ki)", "reverse_compute_at(Out, P.jo)", "cache_read(Aq, shared, at=P.ko)", "cache_read(W, shared, at=P.ko)",
             "cache_write(P, register, at=P.jo)", "bind(P.jo, grid.x)", "bind(P.io, grid.y)"]

    def verdict(warps):
        sched = loads(block_source(prog.ast.source, "c", "\n".join(steps + [f"launch(P, warps={warps})"])),
                      "c.tdsl").schedule("c")
        return Screen(base, "h100", "nvidia", "triton").judge({}, list(sched.trace.steps))

    four = verdict(4)
    assert four.rule == "capacity:registers"
    assert "256 registers a thread on 4 warps" in four.message and "P (128x256 f32" in four.message
    assert verdict(8).accepted


def test_search_is_deterministic_for_a_seed():
    prog = tdsl.load(EXAMPLES / "gemm_silu.tdsl", sizes={"M": 70, "N": 65, "K": 33})
    a = search(prog, target="h200", samples=6, beam=2, rounds=1, seed=5)
    b = search(prog, target="h200", samples=6, beam=2, rounds=1, seed=5)
    assert [v.text for v in a.ranked] == [v.text for v in b.ranked]


@pytest.mark.parametrize("name, sizes", [
    ("gemm_silu", {"M": 70, "N": 65, "K": 33}),
    ("quant_gemm", {"M": 40, "N": 48, "K": 36}),
    ("rmsnorm", {"M": 20, "N": 70}),
    ("softmax", {"M": 20, "N": 70}),
    ("softmax", {"M": 5, "N": 1}),  # rows of one element: every candidate was refused (e.j dropped by compute_at)
    ("rmsnorm", {"M": 5, "N": 1}),
    ("swiglu_quant", {"M": 20, "N": 70}),
    ("attention", {"L": 24, "D": 8}),
    ("mha", {"B": 1, "H": 2, "L": 70, "D": 8}),  # the flash rule: online(m), key blocks of 32-128
])
def test_examples_accepted_candidates_are_sound(name, sizes):
    prog = tdsl.load(EXAMPLES / f"{name}.tdsl", sizes=sizes)
    # a beam of two climbs from two points: their neighbours are the other half of what is judged
    result = search(prog, target="h200", samples=12, beam=2, rounds=1, seed=1)
    assert result.ranked, result.summary()
    rng = random.Random(0)
    for v in [result.ranked[0]] + rng.sample(result.ranked[1:], min(1, len(result.ranked) - 1)):
        assert_sound(prog, v)


def test_random_kernels_accepted_candidates_are_sound():
    covered = 0
    for seed in range(20):  # at least 8 tunable (the others: recurrences, time loops, refused storage, param-dependent reads)
        text = random_program(random.Random(1000 + seed))
        try:
            prog = loads(text, f"fz{seed}.tdsl")
            sizes = {p: 8 for p in prog.model().params}
            prog = loads(text, f"fz{seed}.tdsl", sizes=sizes)
            result = search(prog, target="h200", samples=6, beam=2, rounds=1, seed=seed)
        except NoSketch:
            continue  # recurrences and time loops: named, not tuned (test_sketches)
        except TdslError as err:
            # a generated program only valid for some param values, or one whose result is stored in an input
            # its own terms read after it replaced it: the loader refuses both by their rule
            assert "reads an element" in str(err) or "[rule storage-overwrite]" in str(err)
            continue
        covered += 1
        for v in result.ranked[:2]:
            assert_sound(prog, v)
    assert covered >= 8


def test_params_must_be_bound_to_tune():
    text = "param M\nconst N = 8\nkernel e(X: f32[M, N]) -> (Y: f32[M, N]) {\n  Y[i, j] = X[i, j] * 2.0\n}\n"
    with pytest.raises(TdslError, match="give a value to each param"):
        search(loads(text), target="h200")
