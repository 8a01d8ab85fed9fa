"""tune(): measuring through an executor, the resumable log, the winner, `compile --tuned`, the CLI, and the two
executors (local worker processes; Ray on a local instance with CPU workers)."""

import json
import re
from dataclasses import replace
import shutil
import subprocess
import sys

import pytest

import tdsl
from catalog import EXAMPLES, ROOT
from tdsl.compiler.driver.tune_command import _which
from tdsl.compiler.tune import log as tuning_log
from tdsl.compiler.tune.executors import LocalExecutor
from tdsl.compiler.tune.measure import Job, run_job
from tdsl.compiler.tune.tuner import tune
from tdsl.frontend.diagnostics import TdslError

SOFTMAX = {"M": 20, "N": 70}


class Inline:
    """An executor that checks candidates in this process (the Triton interpreter, as in every test)."""

    gpus = 0

    def __init__(self):
        self.jobs = []

    def describe(self):
        return "this process"

    def run(self, jobs):
        for job in jobs:
            self.jobs.append(job)
            yield run_job(job)


def softmax():
    return tdsl.load(EXAMPLES / "softmax.tdsl", sizes=SOFTMAX)


def test_tune_checks_logs_and_resumes(tmp_path):
    path = tmp_path / "tune.jsonl"
    first = tune(softmax(), target="h200", trials=2, runner=Inline(), log_path=path, blocks=False)
    assert len(first.measured) == 2 and all(r["ok"] for r in first.measured), first.measured
    assert all("vs interpreter" in r["detail"] for r in first.measured)
    assert not first.timed  # no GPU: checked, not timed; the model's choice wins
    assert first.winner_steps == first.search.ranked[0].text
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [x["kernel"] for x in lines] == ["softmax", "softmax"] and lines[0]["sizes"] == SOFTMAX
    runner = Inline()
    again = tune(softmax(), target="h200", trials=3, runner=runner, log_path=path, blocks=False)
    assert len(runner.jobs) == 1  # the two logged candidates are not measured again
    assert runner.jobs[0].steps not in {x["steps"] for x in lines}
    assert len(again.logged) == 3
    # another workload (other sizes) in the same log starts from nothing
    other = Inline()
    tune(tdsl.load(EXAMPLES / "softmax.tdsl", sizes={"M": 20, "N": 71}), target="h200", trials=1, runner=other,
         log_path=path, blocks=False)
    assert len(other.jobs) == 1


def test_the_command_says_what_it_did_with_the_log():
    """Without a GPU --trials is 0 and the log was silently not written (compile --tuned then found no log); a
    resumed run did not say what it reused (probe NN)."""
    from tdsl.compiler.driver.tune_command import _log_line

    first = tune(softmax(), target="h200", trials=0, runner=Inline(), blocks=False)
    assert _log_line("t.jsonl", first).startswith("log t.jsonl: not written: nothing was measured or checked")
    grown = replace(first, measured=[{"steps": "a"}], logged=[{"steps": "b"}, {"steps": "a"}])
    assert _log_line("t.jsonl", grown) == "log t.jsonl: 1 record(s) added, 1 earlier one(s) of this workload reused"
    assert _log_line("t.jsonl", replace(first, logged=[{"steps": "b"}])) == (
        "log t.jsonl: 1 earlier record(s) of this workload reused, none added")


def test_a_failing_candidate_is_logged_with_its_reason_and_never_wins(tmp_path):
    prog = softmax()
    job = Job(prog.ast.source, prog.filename, None, SOFTMAX, "bind(Y.i, grid.x)\nbind(Y.j, grid.x)", "h200", None)
    record = run_job(job)
    assert not record["ok"] and "grid" in record["detail"]
    assert tuning_log.best([record]) is None


def test_best_is_the_fastest_correct_record():
    records = [{"ok": True, "us": 9.0, "steps": "a"}, {"ok": False, "us": 1.0, "steps": "b"},
               {"ok": True, "us": 7.5, "steps": "c"}, {"ok": True, "us": None, "steps": "d", "t_estimate": 0.0}]
    assert tuning_log.best(records)["steps"] == "c"
    assert tuning_log.best([records[3]])["steps"] == "d"  # nothing timed: the model's first


def test_a_torn_last_line_is_skipped(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"ok": true, "steps": "x"}\n{"ok": tr')
    assert tuning_log.read(path) == [{"ok": True, "steps": "x"}]
    path.write_text('{"ok": tr\n{"ok": true}\n')
    with pytest.raises(TdslError, match="t.jsonl:1"):
        tuning_log.read(path)
    path.write_text("not json\n")  # a whole line, newline and all: no torn write, not a log (was: an empty log)
    with pytest.raises(TdslError, match=r"t.jsonl:1: not a tuning log line"):
        tuning_log.read(path)


def test_a_record_appended_after_a_torn_line_starts_a_line_of_its_own(tmp_path):
    # It used to continue the torn line: both records were lost and the log refused from then on.
    path = tmp_path / "t.jsonl"
    path.write_text('{"ok": true, "steps": "x"}\n{"ok": tr')
    workload = tuning_log.Workload.of("src", "k", {"N": 8}, "h200", "triton")
    tuning_log.append(path, workload, {"ok": True, "steps": "y", "us": 1.0}, "v")
    assert [r["steps"] for r in tuning_log.read(path)] == ["x", "y"]
    path.write_text('{"ok": tr')  # a torn first line: the log is empty after it
    tuning_log.append(path, workload, {"ok": True, "steps": "z", "us": 1.0}, "v")
    assert [r["steps"] for r in tuning_log.read(path)] == ["z"]


def test_a_record_matches_its_workload_by_value_and_type(tmp_path):
    """A record's size 8.0 is not the program's size 8 (probe EE: Python's == said it was), nor a float
    constant's 1 the float 1.0; the same values of the same types match, whatever the order of the sizes."""
    workload = tuning_log.Workload.of("src", "k", {"N": 8, "eps": 1.0}, "h200", "triton")
    path = tmp_path / "t.jsonl"
    line = tuning_log.append(path, workload, {"ok": True, "steps": "y", "us": 1.0}, "v")
    assert workload.matches(tuning_log.read(path)[0])
    assert workload.matches({**line, "sizes": {"eps": 1.0, "N": 8}})
    assert not workload.matches({**line, "sizes": {"N": 8.0, "eps": 1.0}})
    assert not workload.matches({**line, "sizes": {"N": 8, "eps": 1}})
    assert not workload.matches({**line, "sizes": {"N": 8, "eps": 1.0, "M": 2}})


def _cli(*args, cwd=ROOT):
    proc = subprocess.run([sys.executable, "-m", "tdsl.compiler.driver.cli", *args], capture_output=True, text=True,
                          cwd=cwd)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_compile_tuned_takes_the_logs_fastest_schedule(tmp_path):
    prog = softmax()
    model = prog.model()
    workload = tuning_log.Workload.of(tuning_log.kernels_text(prog), "softmax", dict(model.sizes), "h200", "triton")
    steps = "compute_at(s, Y.i)\ncompute_at(e, Y.i)\ncompute_at(m, Y.i)\nbind(Y.i, grid.x)\nlaunch(Y, warps={})"
    log = tmp_path / "tune.jsonl"
    for warps, us in ((2, 5.0), (8, 3.0), (16, 1.0)):
        tuning_log.append(log, workload, {"ok": warps != 16, "us": us, "steps": steps.format(warps)}, "test")
    out = tmp_path / "k.py"
    proc = _cli("compile", str(EXAMPLES / "softmax.tdsl"), "--size", "M=20,N=70", "--target", "h200", "--tuned",
                str(log), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert "schedule tuned" in text and "num_warps=8" in text  # the correct 3.0 us one, not the failed 1.0 us one
    proc = _cli("compile", str(EXAMPLES / "softmax.tdsl"), "--target", "h200", "--tuned", str(log), "-o", str(out))
    assert proc.returncode != 0 and "M=20,N=70" in proc.stderr  # other sizes: it says what the log holds
    # a block added to the program (as `tune --append` does) changes no kernel: the log still serves it
    edited = tmp_path / "softmax.tdsl"
    edited.write_text((EXAMPLES / "softmax.tdsl").read_text() + "\nschedule mine {\n  bind(Y.i, grid.x)\n}\n")
    proc = _cli("compile", str(edited), "--size", "M=20,N=70", "--target", "h200", "--tuned", str(log), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "num_warps=8" in out.read_text()


def test_compile_tuned_on_run_time_sizes_asks_for_them(tmp_path):
    source = tmp_path / "softmax.tdsl"
    source.write_text(re.sub(r"const M = \d+, N = \d+", "param M, N", (EXAMPLES / "softmax.tdsl").read_text()))
    prog = tdsl.load(source, sizes={"M": 20, "N": 70})
    workload = tuning_log.Workload.of(tuning_log.kernels_text(prog), "softmax", dict(prog.model().sizes), "h200",
                                      "triton")
    log = tmp_path / "tune.jsonl"
    tuning_log.append(log, workload, {"ok": True, "us": 1.0, "steps": "compute_at(s, Y.i)\nbind(Y.i, grid.x)"}, "t")
    out = tmp_path / "k.py"
    proc = _cli("compile", str(source), "--target", "h200", "--tuned", str(log), "-o", str(out))
    assert proc.returncode == 2 and "give --size for M, N" in proc.stderr and "M=20,N=70" in proc.stderr
    proc = _cli("compile", str(source), "--size", "M=20,N=70", "--target", "h200", "--tuned", str(log), "-o", str(out))
    assert proc.returncode == 0, proc.stderr


def test_cli_tune_without_gpu_names_the_models_choice_and_appends(tmp_path):
    prog = tmp_path / "softmax.tdsl"
    shutil.copy(EXAMPLES / "softmax.tdsl", prog)
    proc = _cli("tune", str(prog), "--size", "M=20,N=70", "--target", "h200", "--append", "--name", "mine",
                "--no-blocks")
    assert proc.returncode == 0, proc.stderr
    assert "candidates screened" in proc.stdout and "model's choice, 1.506 us predicted (no GPU here" in proc.stdout
    assert "schedule mine {" in proc.stdout and "appended schedule mine" in proc.stdout
    assert _cli("check", str(prog), "--size", "M=20,N=70", "--schedule", "mine").returncode == 0
    # with the program's blocks, the model's best of all: row_fused (1.502 us) before the search's best (1.506 us)
    proc = _cli("tune", str(prog), "--size", "M=20,N=70", "--target", "h200")
    assert proc.returncode == 0 and "model's choice, the program's own schedule 'row_fused', 1.502 us" in proc.stdout
    proc = _cli("tune", str(prog), "--size", "M=20,N=70", "--target", "h200", "--append", "--name", "mine")
    assert proc.returncode == 2 and "already has a schedule 'mine'" in proc.stderr
    assert "candidates screened" not in proc.stdout  # said before the search


def test_cli_tune_appends_in_the_programs_own_line_endings(tmp_path):
    """A CRLF program got its appended block with LF endings, a file of mixed endings (probe NN)."""
    prog = tmp_path / "softmax.tdsl"
    prog.write_bytes((EXAMPLES / "softmax.tdsl").read_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"))
    proc = _cli("tune", str(prog), "--size", "M=20,N=70", "--target", "h200", "--append", "--name", "mine",
                "--no-blocks")
    assert proc.returncode == 0, proc.stderr
    data = prog.read_bytes()
    assert b"schedule mine {" in data and data.count(b"\n") == data.count(b"\r\n")


def test_cli_tune_append_refuses_a_taken_default_name_before_searching(tmp_path):
    prog = tmp_path / "softmax.tdsl"
    prog.write_text((EXAMPLES / "softmax.tdsl").read_text() + "\nschedule tuned_h200 {\n  bind(Y.i, grid.x)\n}\n")
    proc = _cli("tune", str(prog), "--size", "M=20,N=70", "--target", "h200", "--append")
    assert proc.returncode == 2 and "already has a schedule 'tuned_h200'" in proc.stderr and "give --name" in proc.stderr
    assert "candidates screened" not in proc.stdout


def test_cli_tune_names_what_it_cannot_tune(tmp_path):
    prog = tmp_path / "scan.tdsl"
    prog.write_text("const M = 8\nkernel r(X: f32[M]) -> (Y: f32[M]) {\n  Y[i] = where(i == 0, X[i], Y[i - 1] + X[i])\n}\n")
    proc = _cli("tune", str(prog), "--target", "h200")
    assert proc.returncode != 0 and "recurrence" in proc.stderr


def _job():
    prog = softmax()
    steps = "compute_at(s, Y.i)\ncompute_at(e, Y.i)\ncompute_at(m, Y.i)\nbind(Y.i, grid.x)\nlaunch(Y, warps=2)"
    return Job(prog.ast.source, prog.filename, None, SOFTMAX, steps, "h200", None, time_it=False)


def test_local_executor_checks_in_a_worker_process():
    runner = LocalExecutor(1)
    try:
        records = list(runner.run([_job()]))
        records += list(runner.run([replace(_job(), seed=1)]))  # a second round: the same worker process
    finally:
        runner.close()
    assert len(records) == 2 and records[1]["ok"]
    assert len(records) == 2 and records[0]["ok"], records
    assert "Triton interpreter" in records[0]["detail"]


def test_ray_executor_on_a_local_instance():
    pytest.importorskip("ray", reason="the ray extra (CI installs it)")
    from tdsl.compiler.tune.executors import RayExecutor

    runner = RayExecutor(workers=1)
    try:
        assert "Ray cluster" in runner.describe() and runner.gpus == 0
        records = list(runner.run([_job()]))
    finally:
        runner.close()
    assert len(records) == 1 and records[0]["ok"], records


def test_local_executor_checks_then_times_in_two_stages():
    # The GPU path's bookkeeping (check on the builders, time on one process per GPU, records merged), run on
    # this CPU: the workers find no CUDA, so the timing stage records "not timed" -- the merge is what is tested.
    runner = LocalExecutor(1)
    runner.gpus, runner.builders = 1, 2
    bad = Job(_job().source, _job().filename, None, SOFTMAX, "bind(Y.i, grid.x)\nbind(Y.j, grid.x)", "h200", None)
    try:
        records = {r["steps"]: r for r in runner.run([replace(_job(), time_it=True), bad])}
    finally:
        runner.close()
    good = records[_job().steps]
    assert good["ok"] and "vs interpreter" in good["detail"] and good["device"] == "cpu (not timed)"
    assert not records[bad.steps]["ok"]


class Synthetic:
    """A GPU whose times disagree with the model: 16 x 32 tiles are fastest, 1 stage best."""

    gpus = 1

    def describe(self):
        return "a synthetic GPU"

    def run(self, jobs):
        import math

        for job in jobs:
            c = job.choice
            us = 10 + abs(math.log2(c["C.BM"] / 16)) + abs(math.log2(c["C.BN"] / 32)) + abs(c["C.stages"] - 1)
            yield {"choice": c, "steps": job.steps, "t_estimate": job.t_estimate, "ok": True, "us": us}


def test_measurements_correct_the_models_ranking_round_by_round():
    prog = tdsl.load(ROOT / "benchmarks/programs/gemm_bf16.tdsl", sizes={"M": 512, "N": 512, "K": 256})
    result = tune(prog, target="h200", trials=32, samples=64, runner=Synthetic(), blocks=False)
    first_round = min(r["us"] for r in result.measured[:8])
    assert len(result.measured) == 32
    assert result.winner_us <= first_round - 2  # at least two knob steps better than the model's first choices


def test_user_errors_of_tune_and_compile_tuned_are_one_line_each(tmp_path, monkeypatch):
    prog = tmp_path / "p.tdsl"
    prog.write_text("param M\nconst N = 8\nkernel e(X: f32[M, N]) -> (Y: f32[M, N]) {\n  Y[i, j] = X[i, j] * 2.0\n}\n")
    proc = _cli("tune", str(prog), "--target", "h200")
    assert proc.returncode == 2 and "give a value to each param (M=..." in proc.stderr
    proc = _cli("compile", str(EXAMPLES / "softmax.tdsl"), "--target", "h200", "--tuned", str(tmp_path / "none.jsonl"),
                "-o", str(tmp_path / "k.py"))
    assert proc.returncode == 2 and "no such tuning log" in proc.stderr
    proc = _cli("compile", str(EXAMPLES / "softmax.tdsl"), "--schedule", "row_fused", "--tuned", "x.jsonl", "-o",
                str(tmp_path / "k.py"))
    assert proc.returncode == 2 and "choose --schedule or --tuned" in proc.stderr
    import tdsl.compiler.tune.executors as executors

    monkeypatch.setattr(executors, "local_gpus", lambda: 1)
    with pytest.raises(TdslError, match="more than the 1 local GPUs"):
        LocalExecutor(2)


class OrdersCombine:
    """A GPU on which a grouped order helps only with a persistent launch (as the H200's GEMM measured): that
    pair is 20% faster than the estimate, every other candidate exactly as estimated."""

    gpus = 1

    def describe(self):
        return "a GPU whose launch orders combine"

    def run(self, jobs):
        for job in jobs:
            both = job.choice.get("C.group") == 8 and job.choice.get("C.persistent")
            yield {"choice": job.choice, "steps": job.steps, "t_estimate": job.t_estimate, "ok": True,
                   "us": job.t_estimate * 1e6 * (0.8 if both else 1.0)}


def test_the_fastest_candidates_launch_orders_are_measured_in_every_combination():
    from tdsl.compiler.tune import space

    prog = tdsl.load(ROOT / "benchmarks/programs/gemm_bf16.tdsl", sizes={"M": 4096, "N": 4096, "K": 4096})
    result = tune(prog, target="h200", trials=24, samples=32, runner=OrdersCombine(), blocks=False)
    fastest = min(result.measured[:8], key=lambda r: r["us"])  # the first round: the model's best, spread
    variants = {space.key(c) for c in space.orders(result.search.sketch, fastest["choice"])}
    accepted = {k for k in variants if result.search.judged[k].accepted}
    assert len(variants) == 7 and len(accepted) >= 4
    assert accepted <= {space.key(r["choice"]) for r in result.measured}
    assert "group=8, persistent=true" in result.winner_steps


class FasterByHand:
    """A GPU on which the program's schedule block `row_fused` runs 10x faster than its estimate, everything else
    in its estimate."""

    gpus = 1

    def __init__(self):
        self.jobs = []

    def describe(self):
        return "a GPU that prefers the user's schedule"

    def run(self, jobs):
        for job in jobs:
            self.jobs.append(job)
            faster = 0.1 if job.block == "row_fused" else 1.0
            yield {"choice": job.choice, "steps": job.steps, "t_estimate": job.t_estimate, "ok": True,
                   "us": job.t_estimate * 1e6 * faster, **({"block": job.block} if job.block else {})}


def test_the_programs_own_blocks_are_measured_first_and_can_win(tmp_path, capsys):
    prog = softmax()
    runner, log = FasterByHand(), tmp_path / "tune.jsonl"
    result = tune(prog, target="h200", trials=6, runner=runner, log_path=log)
    # `normalize_early` and `exp_before_max` use incomplete reductions (illegal on purpose): never candidates
    assert [v.block for v in result.blocks] == ["row_fused"]
    assert runner.jobs[0].block == "row_fused" and not any(j.block for j in runner.jobs[1:])
    assert result.winner_block == "row_fused" and result.winner_steps == result.blocks[0].text
    assert tuning_log.read(log)[0].get("block") == "row_fused"
    # resumed: the logged block is not measured again; without blocks none is
    again = FasterByHand()
    tune(prog, target="h200", trials=8, runner=again, log_path=log)
    assert len(again.jobs) == 2 and not any(j.block for j in again.jobs)
    none = FasterByHand()
    assert tune(prog, target="h200", trials=3, runner=none, blocks=False).winner_block is None
    assert len(none.jobs) == 3 and not any(j.block for j in none.jobs)


def test_a_block_outside_the_space_does_not_steer_the_search():
    """A block has no knob values: the fitted correction and the neighbour search ignore its record."""
    from tdsl.compiler.tune import residual

    records = [{"ok": True, "us": 10.0 * (i + 1), "t_estimate": 1e-5, "choice": {"C.BM": 64 * (i % 2 + 1)}}
               for i in range(4)]
    with_block = records + [{"ok": True, "us": 1.0, "t_estimate": 1e-5, "choice": {}, "block": "fast"}]
    assert residual.fit(with_block).bias == residual.fit(records).bias


def test_tune_says_how_the_winner_compares_with_the_programs_blocks():
    from types import SimpleNamespace

    from tdsl.compiler.driver.tune_command import _versus_blocks

    logged = [{"ok": True, "us": 10.0, "block": "fast"}, {"ok": True, "us": 12.0, "block": "slow"},
              {"ok": True, "us": 8.0}]
    line = _versus_blocks(SimpleNamespace(logged=logged, winner_block=None, winner_us=8.0))
    assert line == ", 1.25x the program's fastest schedule 'fast' (10.0 us)"
    assert _versus_blocks(SimpleNamespace(logged=logged, winner_block="fast", winner_us=10.0)) == ""
    assert _versus_blocks(SimpleNamespace(logged=logged[2:], winner_block=None, winner_us=8.0)) == ""


@pytest.mark.parametrize("content,says", [
    (b"[1, 2]\n", ":1: not a tuning log line (a JSON object expected, found [1, 2])"),
    (b'{"steps": 3}\n{"ok": true}\n', ":1: not a tuning log line (its 'steps' is 3)"),
    (b'{"steps": "bind(Y.i, grid.x)", "ok": 1}\n', "its 'ok' is 1"),
    (b'{"steps": "bind(Y.i, grid.x)", "us": true}\n', "its 'us' is true"),
    (b'{"ok": true}\n{"steps": "x"}\n', ":1: not a tuning log line (no 'steps', the schedule's text)"),
    (b"\xff\xfe{}\n", "not a tuning log (byte 0 is not UTF-8 text)"),
    (None, "is a folder, not a tuning log"),
])
def test_a_file_that_is_no_tuning_log_is_a_usage_error_for_tune_and_compile(tmp_path, content, says):
    """Whatever --log or --tuned names, a log that is not one is one located line, exit 2, never a traceback."""
    log = tmp_path / "given.jsonl"
    if content is None:
        log.mkdir()
    else:
        log.write_bytes(content)
    proc = _cli("compile", str(EXAMPLES / "softmax.tdsl"), "--target", "h200", "--tuned", str(log), "-o",
                str(tmp_path / "k.py"))
    assert proc.returncode == 2 and says in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    proc = _cli("tune", str(EXAMPLES / "softmax.tdsl"), "--size", "M=3,N=5", "--quiet", "--samples", "2",
                "--trials", "0", "--log", str(log))
    assert proc.returncode == 2 and says in proc.stderr, proc.stderr


@pytest.mark.parametrize("name,says", [("1bad", "is not a name"), ("kernel", "is a word of the language"),
                                       ("a-b", "is not a name"), ("", "is not a name")])
def test_tune_refuses_a_name_no_schedule_block_can_have_before_touching_the_program(tmp_path, name, says):
    prog = tmp_path / "p.tdsl"
    prog.write_text((EXAMPLES / "softmax.tdsl").read_text())
    before = prog.read_bytes()
    proc = _cli("tune", str(prog), "--size", "M=3,N=5", "--quiet", "--samples", "2", "--trials", "0", "--name",
                name, "--append")
    assert proc.returncode == 2 and f"--name '{name}' {says}" in proc.stderr, proc.stderr
    assert prog.read_bytes() == before


@pytest.mark.parametrize("flag,value", [("--trials", "-1"), ("--samples", "0"), ("--workers", "0"),
                                        ("--seed", "-1"), ("--seed", "x")])
def test_tune_counts_and_seeds_out_of_range_are_usage_errors(flag, value):
    proc = _cli("tune", str(EXAMPLES / "softmax.tdsl"), "--size", "M=3,N=5", "--quiet", flag, value)
    assert proc.returncode == 2 and f"argument {flag}:" in proc.stderr, proc.stderr


def test_an_appended_block_is_legal_at_every_size_and_names_its_kernel(tmp_path):
    """Three ways `tune --append` broke the file it wrote to, and `compile --tuned LOG -o LOG` its log (probe of
    the 24th session)."""
    stencil = tmp_path / "sten.tdsl"
    stencil.write_text("param N\nkernel st(X_in: f32[N], B: f32[N]) -> (Y: f32[N] in X_in) {\n"
                       "  Y[i : i < N - 1] = X_in[i] + X_in[i + 1] + B[i]\n}\n")
    before = stencil.read_text()
    proc = _cli("tune", str(stencil), "--size", "N=100", "--target", "h200", "--append", "--name", "tw")
    # at N = 100 a split by 128 has one iteration, so binding it is legal there and not at N = 130
    assert proc.returncode == 2 and "not appended: the winner holds at the tuned sizes but not at every size" \
        in proc.stderr and "parallel-dependence" in proc.stderr and "no other candidate does" in proc.stderr
    assert stencil.read_text() == before
    two = tmp_path / "two.tdsl"
    two.write_text("const M = 40, N = 96\nkernel first(X: f32[M, N]) -> (Y: f32[M, N]) {\n  Y[i, j] = X[i, j] * 2.0\n}\n"
                   "kernel second(X: f32[M, N]) -> (Y: f32[M, N]) {\n  ss[i] = sum(j) X[i, j] * X[i, j] accum f32\n"
                   "  Y[i, j] = X[i, j] * rsqrt(ss[i] / N + 1e-6)\n}\n")
    proc = _cli("tune", str(two), "--target", "h200", "--kernel", "second", "--append", "--name", "ts")
    assert proc.returncode == 0, proc.stderr
    assert "schedule ts for second {" in two.read_text()
    assert _cli("check", str(two), "--kernel", "second", "--schedule", "ts").returncode == 0
    log = tmp_path / "tune.jsonl"
    log.write_text("")
    proc = _cli("compile", str(two), "--kernel", "second", "--tuned", str(log), "-o", str(log))
    assert proc.returncode == 2 and "refusing to overwrite" in proc.stderr and log.read_text() == ""


def test_a_row_of_run_time_length_is_walked_in_segments_and_the_appended_block_compiles(tmp_path):
    """A `param` softmax tuned at N = 70 appended a block keeping each row whole: legal, but a whole row of
    run-time length is a tile of no fixed size, which `tdsl compile` refused (probe of the 24th session).  The
    search now walks such a row in segments of fixed length (one at the tuned length), and `--append` checks that
    the block compiles with the sizes unbound."""
    prog = tmp_path / "softmax.tdsl"
    prog.write_text((EXAMPLES / "softmax.tdsl").read_text().replace("const M = 1024, N = 4096", "param M, N"))
    proc = _cli("tune", str(prog), "--size", "M=20,N=70", "--target", "h200", "--append", "--name", "tp")
    assert proc.returncode == 0, proc.stderr
    assert "Y.segment=whole" not in proc.stdout and "Y.segment=512" in proc.stdout
    assert _cli("check", str(prog), "--schedule", "tp").returncode == 0
    assert _cli("compile", str(prog), "--schedule", "tp", "-o", str(tmp_path / "k.py")).returncode == 0
    # at a fixed length the whole row stays a candidate
    fixed = tmp_path / "fixed.tdsl"
    fixed.write_text((EXAMPLES / "softmax.tdsl").read_text().replace("const M = 1024, N = 4096", "const M = 20, N = 70"))
    assert "Y.segment=whole" in _cli("tune", str(fixed), "--target", "h200").stdout


def test_tune_refuses_to_name_its_winner_none(tmp_path):
    """`none` means program order on the command line, so a block called so could never be chosen."""
    proc = _cli("tune", str(EXAMPLES / "softmax.tdsl"), "--size", "M=3,N=5", "--quiet", "--name", "none")
    assert proc.returncode == 2 and "--name 'none' means program order" in proc.stderr, proc.stderr


def test_ray_addresses_that_reach_no_cluster_are_one_line_errors(tmp_path):
    """`--ray-address auto` without a cluster printed Ray's traceback; `--ray-address` without `--executor ray` was
    ignored (probe of the 24th session)."""
    pytest.importorskip("ray")
    prog = tmp_path / "softmax.tdsl"
    shutil.copy(EXAMPLES / "softmax.tdsl", prog)
    args = ("tune", str(prog), "--size", "M=20,N=70", "--target", "h200", "--trials", "2")
    proc = _cli(*args, "--executor", "ray", "--ray-address", "auto")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--executor ray: cannot start or reach the Ray cluster at auto" in proc.stderr
    proc = _cli(*args, "--ray-address", "auto")
    assert proc.returncode == 2 and "--ray-address is for --executor ray" in proc.stderr


@pytest.mark.parametrize("steps, says", [
    ("bind(Y.nope, grid.x)", "no loop 'nope'"),
    ("compute_at(s, Y.i)\nbind(Y.i, grid.x)\nbind(Y.i, grid.y)", "already bound"),
])
def test_a_log_record_whose_steps_do_not_apply_is_the_logs_error(tmp_path, steps, says):
    """The error was located at lines of the program that do not exist (the steps appended to it), and named
    neither the log nor the record (probe of the 24th session)."""
    prog = softmax()
    workload = tuning_log.Workload.of(tuning_log.kernels_text(prog), "softmax", dict(prog.model().sizes), "h200",
                                      "triton")
    log = tmp_path / "tune.jsonl"
    tuning_log.append(log, workload, {"ok": True, "us": 1.0, "steps": steps}, "test")
    proc = _cli("compile", str(EXAMPLES / "softmax.tdsl"), "--size", "M=20,N=70", "--target", "h200", "--tuned",
                str(log), "-o", str(tmp_path / "k.py"))
    assert proc.returncode == 2, proc.stderr
    assert f"{log}: no correct record of kernel softmax applies to {EXAMPLES / 'softmax.tdsl'} (1 tried)" \
        in proc.stderr
    assert says in proc.stderr and "softmax.tdsl:3" not in proc.stderr


# A log is a file: its records may come from another tdsl, another program, or a hand (probe CC, 30th session).
FOREIGN_RECORDS = [
    ("jo, jj = split(s.j, 16)\nreverse_compute_at(Y, s.jo)", "[rule reduction-incomplete]"),  # illegal
    ("io, ii = split(C.i, 64)\nbind(C.io, grid.x)", "unknown statement 'C'"),  # another kernel's steps
    ("compute_at(s, Y.i)\ncompute_at(e, Y.i)\ncompute_at(m, Y.i)\nbind(Y.i, grid.x)\nlaunch(Y, warps=64)", "warps"),
]


def _workload(prog):
    return tuning_log.Workload.of(tuning_log.kernels_text(prog), "softmax", dict(prog.model().sizes), "h200", "triton")


@pytest.mark.parametrize("steps, why", FOREIGN_RECORDS)
def test_a_log_record_the_screen_refuses_never_wins(tmp_path, steps, why):
    """The record claims 0.001 us; the tuner took it as the winner and printed its schedule (exit 0)."""
    prog = softmax()
    log = tmp_path / "tune.jsonl"
    tuning_log.append(log, _workload(prog), {"ok": True, "us": 0.001, "steps": steps, "t_estimate": 1e-6}, "t")
    result = tune(prog, target="h200", trials=2, runner=Inline(), log_path=log)
    assert result.winner_steps and result.winner_steps != steps and result.winner_us != 0.001
    assert [r["steps"] for r, _ in result.log_left_out] == [steps] and why in result.log_left_out[0][1]
    # tune says "a record of LOG left out (no knobs): why" for a hand-made record (probe GG: "((no knobs))")
    assert _which(result.log_left_out[0][0]) == "no knobs"
    # compile --tuned takes the fastest record that applies, and says which it skipped
    proc = _cli("compile", str(EXAMPLES / "softmax.tdsl"), "--size", "M=20,N=70", "--target", "h200", "--tuned",
                str(log), "-o", str(tmp_path / "k.py"))
    assert proc.returncode == 0, proc.stderr
    assert "skipped a faster record that does not apply" in proc.stderr
    assert "launch(Y, warps=64)" not in (tmp_path / "k.py").read_text()


def test_a_log_record_that_wins_is_printed_as_the_schedule_prints_it(tmp_path):
    """A record edited by hand, legal, with a comment and odd spacing: the winner's steps were its text verbatim."""
    prog = softmax()
    log = tmp_path / "tune.jsonl"
    steps = "compute_at(s,   Y.i)  # the sum first\ncompute_at(e, Y.i)\n\ncompute_at(m,Y.i)\nbind( Y.i , grid.x )"
    tuning_log.append(log, _workload(prog), {"ok": True, "us": 0.001, "steps": steps, "t_estimate": 1e-6}, "t")
    result = tune(prog, target="h200", trials=2, runner=Inline(), log_path=log)
    assert result.winner_us == 0.001
    assert result.winner_steps == "compute_at(s, Y.i)\ncompute_at(e, Y.i)\ncompute_at(m, Y.i)\nbind(Y.i, grid.x)"


def test_compile_tuned_skips_a_record_the_screen_refuses_for_its_registers(tmp_path):
    """A record whose 128 x 256 accumulator on 4 warps is past the registers: tune leaves it out
    (capacity:registers), and compile --tuned compiled it all the same (probe GG of the 31st session)."""
    prog = tdsl.load(EXAMPLES / "gemm.tdsl")
    workload = tuning_log.Workload.of(tuning_log.kernels_text(prog), "gemm", dict(prog.model().sizes), "h100",
                                      "triton")
    tile = ("io, jo, ii, ji = tile(C.i, C.j, 128, {n})\nko, ki = split(C.k, 32)\nreorder(C, io, jo, ko, ii, ji, ki)\n"
            "cache_read(A, shared, at=C.ko)\ncache_read(B, shared, at=C.ko)\ncache_write(C, register, at=C.jo)\n"
            "pipeline(C.ko, stages=2)\nbind(C.io, grid.x)\nbind(C.jo, grid.y)\nlaunch(C, warps={w})")
    log = tmp_path / "tune.jsonl"
    tuning_log.append(log, workload, {"ok": True, "us": 1.0, "steps": tile.format(n=256, w=4)}, "t")
    tuning_log.append(log, workload, {"ok": True, "us": 2.0, "steps": tile.format(n=128, w=8)}, "t")
    proc = _cli("compile", str(EXAMPLES / "gemm.tdsl"), "--target", "h100", "--tuned", str(log),
                "-o", str(tmp_path / "k.py"))
    assert proc.returncode == 0, proc.stderr
    assert "capacity:registers" in proc.stderr and "256 registers a thread on 4 warps" in proc.stderr
    assert "tile(C.i, C.j, 128, 128)" in (tmp_path / "k.py").read_text()


@pytest.mark.parametrize("us", ["-5.0", "NaN", "Infinity", "0"])
def test_a_time_that_is_no_time_is_not_a_log_line(tmp_path, us):
    """-5, NaN and Infinity ranked first (min over the times)."""
    log = tmp_path / "tune.jsonl"
    log.write_text('{"ok": true, "steps": "bind(Y.i, grid.x)", "us": %s}\n' % us)
    with pytest.raises(TdslError, match=r"tune.jsonl:1: not a tuning log line \(its 'us' is .*not a measured time"):
        tuning_log.read(log)


def test_without_timings_the_winner_is_the_models_best_whatever_was_checked(tmp_path):
    """--trials 1 without a GPU checked the program's first block only, and that block won as "the model's choice"
    although the model ranked others first."""
    prog = softmax()
    ranked_alone = tune(prog, target="h200", trials=0, blocks=True)
    checked = tune(prog, target="h200", trials=1, runner=Inline(), blocks=True)
    assert len(checked.measured) == 1
    assert checked.winner_steps == ranked_alone.winner_steps and checked.winner_us is None
    every = [*checked.search.ranked, *checked.blocks]
    assert checked.winner_estimate == min(v.t_estimate for v in every)


def test_the_printed_block_takes_a_name_the_program_does_not_use(tmp_path):
    prog = tmp_path / "softmax.tdsl"
    prog.write_text((EXAMPLES / "softmax.tdsl").read_text() + "\nschedule tuned_h100 {\n  bind(Y.i, grid.x)\n}\n")
    proc = _cli("tune", str(prog), "--size", "M=4,N=8", "--target", "h100", "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert "schedule tuned_h100_2 {" in proc.stdout


def test_a_row_longer_than_a_tile_is_searched_in_segments():
    """softmax at N = 100,000 (a constant): every candidate kept the row whole, a tile of 131,072 lanes the
    lowering refuses, and nothing passed (probe CC of the 30th session); a run-time N was walked in segments."""
    from tdsl.compiler.tune.search import search

    found = search(tdsl.load(EXAMPLES / "softmax.tdsl", sizes={"M": 3, "N": 100_000}), None, None, "h100",
                   "triton", samples=32)
    assert found.ranked and all("split(Y.j, " in v.text for v in found.ranked)
    assert not any(rule.startswith("backend:") for rule in found.screen.rejected)


@pytest.mark.parametrize("line", ['{"ok": true, "steps": "", "us": 1%s}' % ("0" * 400),
                                  '{"ok": true, "steps": "", "t_estimate": 1%s}' % ("0" * 400),
                                  '{"ok": true, "steps": "", "us": 1%s}' % ("0" * 5000)])
def test_a_number_no_float_holds_is_not_a_log_line(tmp_path, line):
    """OverflowError / ValueError tracebacks from math.isfinite and json.loads (probe EE, 30th session)."""
    log = tmp_path / "tune.jsonl"
    log.write_text(line + "\n")
    with pytest.raises(TdslError, match=r"tune.jsonl:1: not a tuning log line"):
        tuning_log.read(log)


def test_program_order_can_win(tmp_path):
    """A record of no steps (a block `schedule plain { }`, program order) measured fastest: `tune` said "no
    measured candidate matched the interpreter" (its steps, "", tested as no winner; probe EE, 30th session)."""
    prog = softmax()
    log = tmp_path / "tune.jsonl"
    tuning_log.append(log, _workload(prog), {"ok": True, "us": 0.5, "steps": "", "t_estimate": 1e-6}, "t")
    result = tune(prog, target="h200", trials=0, log_path=log)
    assert result.winner_steps == "" and result.winner_us == 0.5
    assert result.block == "schedule tuned_h200 {\n\n}\n"
