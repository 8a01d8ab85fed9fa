"""How measurements are taken (GPU-free parts): the CUDA graph with its fallback (compiler/tune/measure.py), the input
rotation, and benchmarks/gpu/tune.py's interleaved head-to-head with ratios paired within a round."""

import importlib.util
import sys

import pytest

from catalog import ROOT
from tdsl.compiler.tune import measure


def _gpu_tune_script():
    spec = importlib.util.spec_from_file_location("gpu_tune_script", ROOT / "benchmarks" / "gpu" / "tune.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


def test_a_call_that_cannot_be_captured_is_timed_by_do_bench(monkeypatch):
    import torch
    import triton.testing

    def no_graph(calls):
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(measure, "graph_us", no_graph)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(triton.testing, "do_bench", lambda call, warmup, rep: 0.25)
    us, method = measure.time_call(lambda: None)
    assert us == 250.0 and method.startswith("do_bench median (no CUDA graph: operation not permitted")


def test_every_call_is_timed_by_a_cuda_graph_when_it_can_be(monkeypatch):
    monkeypatch.setattr(measure, "graph_us", lambda calls: 81.5)
    assert measure.time_call(lambda: None) == (81.5, measure.GRAPH_METHOD)


@pytest.mark.parametrize("input_bytes, sets", [(8 << 20, 8), (38 << 20, 4), (64 << 20, 2), (200 << 20, 1)])
def test_input_sets_together_exceed_twice_the_l2(input_bytes, sets):
    assert measure.rotation_sets(input_bytes) == sets


def test_head_to_head_turns_the_order_each_round_and_pairs_ratios_within_a_round(monkeypatch):
    script = _gpu_tune_script()
    order, clock = [], [0]

    def fake_time_call(call):  # every round runs 10 % slower than the one before; "ref" 5 % slower than "tuned"
        name = call()
        order.append(name)
        clock[0] += 1
        return {"tuned": 100.0, "ref": 105.0}[name] * 1.1 ** ((clock[0] - 1) // 2), "fake"

    monkeypatch.setattr(script, "time_call", fake_time_call)
    final = script.head_to_head({"tuned": lambda: "tuned", "ref": lambda: "ref"}, rounds=4)
    assert [order[2 * r] for r in range(4)] == ["tuned", "ref", "tuned", "ref"]  # each round starts one later
    assert script.paired_ratios(final) == {"ref": pytest.approx(1.05)}


def test_a_reference_that_fails_is_reported_not_timed(monkeypatch):
    script = _gpu_tune_script()
    monkeypatch.setattr(script, "time_call", lambda call: (call(), "fake"))

    def missing():
        raise AttributeError("module 'torch' has no attribute '_scaled_mm'")

    final = script.head_to_head({"tuned": lambda: 10.0, "_scaled_mm": missing}, rounds=2)
    assert final["_scaled_mm"] == {"error": "AttributeError: module 'torch' has no attribute '_scaled_mm'"}
    assert final["tuned"] == {"median_us": 10.0, "rounds_us": [10.0, 10.0]}


def _cost_vs_measured():
    spec = importlib.util.spec_from_file_location("cost_vs_measured", ROOT / "benchmarks" / "cost_vs_measured.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_estimate_is_compared_with_times_of_one_method_per_workload(tmp_path):
    """A workload with any candidate timed in a CUDA graph keeps only its graph times (do_bench timed
    quant_gemm's host dispatch); a workload timed by do_bench alone keeps those."""
    import json

    def line(kernel, steps, us, timing=None):
        row = {"kernel": kernel, "sizes": {"M": 8}, "steps": steps, "us": us, "ok": True, "logged": f"t{us}"}
        return json.dumps({**row, **({"timing": timing} if timing else {})})

    (tmp_path / "a-tune-1.jsonl").write_text("\n".join([
        line("chain", "a", 150.0), line("chain", "b", 120.0, "do_bench median"),
        line("chain", "b", 90.0, measure.GRAPH_METHOD), line("gemm", "c", 300.0)]))
    times = _cost_vs_measured().tune_log_measurements(tmp_path)
    assert {key[0] + key[2]: us for key, (us, _) in times.items()} == {"chainb": 90.0, "gemmc": 300.0}
