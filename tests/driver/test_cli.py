"""The command line: exit codes 0 / 1 / 2, readable output, never a traceback for a user mistake."""

import ast
import contextlib
import io
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass

import pytest

from catalog import EXAMPLES, ROOT
from tdsl.compiler.driver.cli import main


@dataclass
class Done:
    returncode: int
    stdout: str
    stderr: str


# In a process of their own: `run` (it switches Triton to its interpreter for the whole process) and the
# commands that only print and exit (so that the real `python -m` entry point is exercised too).
OWN_PROCESS = {"run", "--help", "--version"}


def tdsl(*args, cwd=ROOT):
    """The CLI on `args` in folder `cwd`: exit code, stdout, stderr.  Other commands run in this process through
    `main` (a process each would take most of this file's time); an exception escaping it fails the test."""
    if args[0] in OWN_PROCESS:
        proc = subprocess.run([sys.executable, "-m", "tdsl.compiler.driver.cli", *args], capture_output=True,
                              text=True, cwd=cwd)
        assert "Traceback" not in proc.stderr, proc.stderr
        return proc
    out, err, here = io.StringIO(), io.StringIO(), os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exit_:  # argparse's usage errors
                code = exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
    finally:
        os.chdir(here)
    return Done(code, out.getvalue(), err.getvalue())


def test_help():
    proc = tdsl("--help")
    assert proc.returncode == 0
    for command in ("tree", "check", "run"):
        assert command in proc.stdout
    for command in ("tree", "check", "run"):
        assert tdsl(command, "--help").returncode == 0


def test_tree_of_gemm_shows_the_chapter_structure():
    proc = tdsl("tree", "examples/gemm.tdsl")
    assert proc.returncode == 0, proc.stderr
    after = proc.stdout.split("# after: schedule tiled")[1].splitlines()
    assert after[1].startswith("Domain { C[i, j, k]")
    assert after[2] == "└── Band {io, jo, ko}"
    assert after[3].strip() == "│   C: io = floor(i/64)   jo = floor(j/64)   ko = floor(k/32)"
    assert after[4].strip() == "└── Band {ii, jj, kk}"
    assert after[5].strip() == "│   C: ii = i mod 64   jj = j mod 64   kk = k mod 32"
    before = proc.stdout.split("# after")[0]
    assert "Band {i, j, k}" in before


def test_tree_yaml_is_isl_yaml():
    proc = tdsl("tree", "examples/gemm_silu.tdsl", "--format", "yaml")
    assert proc.returncode == 0, proc.stderr
    assert "domain:" in proc.stdout and "schedule:" in proc.stdout and "sequence:" in proc.stdout
    assert "floor((k)/32)" in proc.stdout


def test_tree_yaml_is_two_documents_isl_reads_back():
    # one YAML document per tree: a YAML reader used to merge before and after into one mapping
    import islpy as isl

    proc = tdsl("tree", "examples/gemm_silu.tdsl", "--format", "yaml")
    assert proc.returncode == 0, proc.stderr
    starts = [n for n, line in enumerate(proc.stdout.splitlines()) if line.startswith("---")]
    assert len(starts) == 2
    lines = proc.stdout.splitlines()
    documents = ["\n".join(lines[a + 1:b]) for a, b in zip(starts, starts[1:] + [len(lines)])]
    before, after = (isl.Schedule.read_from_str(isl.DEFAULT_CONTEXT, doc) for doc in documents)
    assert before.get_domain().is_equal(after.get_domain())
    assert not before.get_map().is_equal(after.get_map())  # the schedule moved the instances


def test_version():
    proc = tdsl("--version")
    assert proc.returncode == 0 and proc.stdout.startswith("tdsl 0.")


def test_python_dash_m_tdsl_is_the_command_line():
    """`python -m tdsl` (probe Z of the 29th session: "'tdsl' is a package and cannot be directly executed")."""
    proc = subprocess.run([sys.executable, "-m", "tdsl", "check", "examples/softmax.tdsl", "--schedule", "none"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0 and proc.stdout.startswith("program order: legal (0 steps, "), proc.stderr


def test_check_of_program_order():
    proc = tdsl("check", "examples/gemm_silu.tdsl", "--schedule", "none")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("program order: legal (0 steps, ")


def test_check_exit_codes():
    legal = tdsl("check", "examples/gemm_silu.tdsl", "--schedule", "fused")
    assert legal.returncode == 0 and "legal" in legal.stdout
    illegal = tdsl("check", "examples/gemm_silu.tdsl", "--schedule", "silu_in_ko")
    assert illegal.returncode == 1
    err = illegal.stderr
    assert "examples/gemm_silu.tdsl:" in err and "reverse_compute_at is illegal [rule reduction-incomplete]" in err
    assert "C(i=0, j=0, k=32) must run before Y(i=0, j=0)" in err
    everything = tdsl("check", "examples/softmax.tdsl", "--all")
    assert everything.returncode == 1
    assert "schedule row_fused: legal" in everything.stdout and "schedule normalize_early: illegal" in everything.stdout


def test_usage_and_parse_errors_exit_2(tmp_path):
    assert tdsl("check", "missing.tdsl").returncode == 2
    bad = tmp_path / "bad.tdsl"
    bad.write_text("const M = 4\nkernel k(A: f32[M]) -> (B: f32[M]) {\n  B[i] = A[i] +\n}\n")
    proc = tdsl("check", str(bad))
    assert proc.returncode == 2 and f"{bad}:3:" in proc.stderr
    assert tdsl("check", "examples/gemm.tdsl", "--schedule", "nope").returncode == 2
    assert tdsl("run", "examples/gemm.tdsl", "--interp", "--size", "M=x").returncode == 2
    assert tdsl("run", "examples/gemm.tdsl", "--interp", "--size", "Q=3").returncode == 2
    assert tdsl("bogus").returncode == 2


def test_schedule_misuse_in_a_file_points_at_the_step(tmp_path):
    prog = tmp_path / "misuse.tdsl"
    prog.write_text(
        "const N = 8\nkernel k(A: f32[N]) -> (B: f32[N]) {\n  B[i] = A[i]\n}\nschedule s {\n  io, ii = split(B.q, 4)\n}\n"
    )
    proc = tdsl("check", str(prog))
    assert proc.returncode == 2
    assert f"{prog}:6:3: error: split: statement B has no loop 'q'; its loops are i" in proc.stderr
    assert "^" in proc.stderr


def test_run_interp_compares_schedule_with_program_order():
    proc = tdsl("run", "examples/gemm_silu.tdsl", "--interp", "--size", "M=9,N=70,K=40", "--seed", "3")
    assert proc.returncode == 0, proc.stderr
    assert "Y [9, 70] bf16: schedule fused vs program order: bit-identical" in proc.stdout


def test_run_interp_refuses_huge_sizes():
    proc = tdsl("run", "examples/gemm.tdsl", "--interp")
    assert proc.returncode == 2 and "choose smaller sizes with --size" in proc.stderr


# ---------------------------------------------------------------- compile -o: where the module goes


def _program_copy(tmp_path):
    prog = tmp_path / "prog.tdsl"
    prog.write_text((EXAMPLES / "gemm.tdsl").read_text())
    return prog


def test_compile_never_overwrites_its_input(tmp_path):
    prog = _program_copy(tmp_path)
    original = prog.read_text()
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.tdsl").symlink_to("prog.tdsl")
    os.link(prog, tmp_path / "hard.tdsl")
    for source, output in [("prog.tdsl", "prog.tdsl"), ("prog.tdsl", "./prog.tdsl"), ("prog.tdsl", str(prog)),
                           ("./prog.tdsl", "sub/../prog.tdsl"), ("link.tdsl", "prog.tdsl"),
                           ("prog.tdsl", "link.tdsl"), ("prog.tdsl", "hard.tdsl")]:
        proc = tdsl("compile", source, "-o", output, cwd=tmp_path)
        assert proc.returncode == 2, (source, output, proc.stdout)
        assert f"-o {output} is the same file as the input {source}; refusing to overwrite" in proc.stderr
        assert prog.read_text() == original and (tmp_path / "link.tdsl").is_symlink()
    # A folder as output gets PROG's stem + .py, which for a program named x.py is the program itself.
    (tmp_path / "x.py").write_text(original)
    proc = tdsl("compile", "x.py", "-o", ".", cwd=tmp_path)
    assert proc.returncode == 2 and "-o . (that is x.py) is the same file as the input x.py" in proc.stderr
    assert (tmp_path / "x.py").read_text() == original


def test_compile_to_stdout(tmp_path):
    prog = _program_copy(tmp_path)
    proc = tdsl("compile", str(prog), "-o", "-", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("# Generated by tdsl from prog.tdsl, schedule tiled. Do not edit.\n")
    ast.parse(proc.stdout)  # the module alone: the summary goes to stderr
    assert "wrote the module to stdout: 1 kernel launch(es)" in proc.stderr
    assert not (tmp_path / "-").exists()


def test_compile_into_a_folder(tmp_path, capsys):
    prog = _program_copy(tmp_path)
    (tmp_path / "existing").mkdir()
    for output, written in [("existing", "existing/prog.py"), ("fresh/", "fresh/prog.py")]:
        assert main(["compile", str(prog), "-o", str(tmp_path / output) + ("/" if output.endswith("/") else "")]) == 0
        assert (tmp_path / written).read_text().startswith("# Generated by tdsl from prog.tdsl")
        assert f"wrote {tmp_path / written}: " in capsys.readouterr().out


def test_compile_output_folder_that_cannot_be_made(tmp_path):
    prog = _program_copy(tmp_path)
    proc = tdsl("compile", str(prog), "-o", "prog.tdsl/out.py", cwd=tmp_path)
    assert proc.returncode == 2 and "cannot write prog.tdsl/out.py: prog.tdsl is not a folder" in proc.stderr
    long_name = "x" * 300  # longer than any file system's name limit
    proc = tdsl("compile", str(prog), "-o", f"{long_name}/out.py", cwd=tmp_path)
    assert proc.returncode == 2 and f"tdsl: error: cannot create the folder {long_name}" in proc.stderr
    assert "File name too long" in proc.stderr


# ---------------------------------------------------------------- fuse: a long chain stays fast


def test_fuse_report_of_a_50_statement_chain(tmp_path, capsys, monkeypatch):
    n = 50
    steps = [f"  T{k}[i] = T{k - 1}[i] + 1.0" for k in range(2, n + 1)]
    prog = tmp_path / "chain.tdsl"
    prog.write_text("\n".join([f"const N = 16\nkernel chain(A: f32[N]) -> (T{n}: f32[N]) {{",
                               "  T1[i] = A[i] * 2.0", *steps, "}"]) + "\n")
    from tdsl.compiler.reference import interpreter

    runs, interpret = [], interpreter.interpret
    monkeypatch.setattr(interpreter, "interpret", lambda *a, **k: runs.append(a[1]) or interpret(*a, **k))
    start = time.process_time()  # CPU time: other processes do not count
    assert main(["fuse", str(prog)]) == 0
    elapsed = time.process_time() - start
    out = capsys.readouterr().out
    assert f"{n - 1} producer -> consumer edges" in out
    for k in range(1, n):
        assert f"=> deepest fusion: compute_inline(T{k}) (T{k} is computed inside T{k + 1}, no buffer)" in out
    assert out.count("interpreter: bit-identical to program order") == 4 * (n - 1) and "rejected" not in out
    # Program order runs once, not once per attempt, and the attempts of one edge that build the same schedule
    # (compute_at, reverse_compute_at and fuse here) run it once: 1 + 2 runs per edge, not 8.
    assert len(runs) <= 1 + 2 * (n - 1)
    assert elapsed < 15, f"tdsl fuse took {elapsed:.1f} s on a {n}-statement chain"


def test_a_generated_module_called_on_cpu_tensors_says_what_to_do(tmp_path):
    # without TRITON_INTERPRET=1 Triton used to answer "0 active drivers"
    from tdsl.compiler.driver.api import load
    from tdsl.compiler.driver.generate import generate

    (tmp_path / "gemm_mod.py").write_text(generate(load(EXAMPLES / "gemm.tdsl", sizes={"M": 32, "N": 32, "K": 32}),
                                                   "tiled"))
    code = ("import torch, gemm_mod\n"
            "a = torch.zeros((32, 32), dtype=torch.bfloat16)\n"
            "gemm_mod.gemm(a, a)\n")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert proc.returncode != 0
    assert "A is on the CPU, and Triton kernels run on a GPU" in proc.stderr
    assert "TRITON_INTERPRET=1" in proc.stderr


def test_target_names_hardware_in_every_command(tmp_path):
    # one vocabulary: compile, run, fuse and cost all take device names; nvidia is the default NVIDIA device (h100)
    h200, nvidia = tmp_path / "h200.py", tmp_path / "nvidia.py"
    assert tdsl("compile", "examples/gemm.tdsl", "--target", "h200", "-o", str(h200)).returncode == 0
    assert tdsl("compile", "examples/gemm.tdsl", "--target", "nvidia", "-o", str(nvidia)).returncode == 0
    assert h200.read_text() == nvidia.read_text()
    small = tdsl("compile", "examples/gemm_silu.tdsl", "--schedule", "fast", "--target", "rtx-pro-6000",
                 "-o", str(tmp_path / "rtx.py"))
    assert small.returncode == 1 and "does not fit rtx-pro-6000 [rule capacity]" in small.stderr
    assert tdsl("cost", "examples/gemm.tdsl", "--target", "nvidia").stdout == tdsl(
        "cost", "examples/gemm.tdsl", "--target", "h100").stdout
    fuse = tdsl("fuse", "examples/gemm_silu.tdsl", "--target", "h300", "--no-run")
    assert fuse.returncode == 2 and "unknown target 'h300'" in fuse.stderr


def test_check_with_a_target_runs_the_code_generators_rules():
    # legal, but the RTX PRO 6000's 99 KiB of shared memory cannot hold gemm_silu's 3-stage 128x256 tiles
    small = tdsl("check", "examples/gemm_silu.tdsl", "--schedule", "fast", "--target", "rtx-pro-6000")
    assert small.returncode == 1, small.stderr
    assert "schedule fast: legal" in small.stdout and "schedule fast: not generated for rtx-pro-6000" in small.stdout
    assert "does not fit rtx-pro-6000 [rule capacity]" in small.stdout and "46,080 B over" in small.stdout
    big = tdsl("check", "examples/gemm_silu.tdsl", "--schedule", "fast", "--target", "h200")
    assert big.returncode == 0 and "schedule fast: generated for h200" in big.stdout
    every = tdsl("check", "examples/mha.tdsl", "--all", "--target", "ascend-910b", "--size", "L=256")
    assert every.returncode == 1 and "schedule unfused: generated for ascend-910b" in every.stdout
    assert "schedule flash_ascend: generated for ascend-910b" in every.stdout
    assert "schedule flash: not generated for ascend-910b" in every.stdout


def test_run_all_compares_every_schedule_block_with_program_order():
    proc = tdsl("run", "examples/softmax.tdsl", "--interp", "--all", "--size", "M=2,N=1100")
    assert proc.returncode == 1, proc.stderr  # softmax has illegal blocks: reported, not run
    assert "schedule row_fused vs program order: bit-identical" in proc.stdout
    assert "schedule normalize_early: illegal, not run" in proc.stdout
    legal = tdsl("run", "examples/gemm_silu.tdsl", "--interp", "--all", "--size", "M=8,N=8,K=8")
    assert "schedule fused vs program order: bit-identical" in legal.stdout


@pytest.mark.parametrize("target, where", [("nvidia", "Triton interpreter"), ("ascend-950", "NumPy model of the ascend-950"),
                                           ("ascend-910b", "NumPy model of the ascend-910b")])
def test_run_compiles_for_the_target_and_compares_with_the_interpreter(target, where):
    proc = tdsl("run", "examples/gemm_silu.tdsl", "--schedule", "fused", "--size", "M=70,N=136,K=40", "--target", target,
                "--seed", "4")
    if target == "nvidia" and "GPU vs" in proc.stdout:
        where = "GPU"
    assert proc.returncode == 0, proc.stderr
    assert f"schedule fused: {where} vs reference interpreter, seed 4" in proc.stdout
    assert "Y [70, 136] bf16: ok" in proc.stdout


RUN_TIME_ROWS = """param N
const M = 8

kernel k(X: f32[M, N]) -> (Y: f32[M, N]) {
  s[i] = sum(j) X[i, j]
  Y[i, j] = X[i, j] - s[i] / N
}

schedule split_both {
  compute_at(s, Y.i)
  jo, ji = split(Y.j, 4)
  so, si = split(s.j, 4)
  bind(Y.i, grid.x)
}

schedule row_whole {
  compute_at(s, Y.i)
  bind(Y.i, grid.x)
}
"""


def test_run_builds_a_triton_kernel_that_takes_the_params_at_run_time(tmp_path):
    """`run --target` runs the kernel `compile` without --size builds: --size gives the inputs' shapes; a tile
    whose size depends on a param is refused there, as compile refuses it (it ran when --size fixed N)."""
    prog = tmp_path / "rows.tdsl"
    prog.write_text(RUN_TIME_ROWS)
    for n in ("1", "13"):
        proc = tdsl("run", str(prog), "--schedule", "split_both", "--size", f"N={n},M=3", "--target", "nvidia")
        assert proc.returncode == 0, proc.stderr
        assert "; N given at run time" in proc.stdout and f"Y [3, {n}] f32: ok" in proc.stdout
    refused = tdsl("run", str(prog), "--schedule", "row_whole", "--size", "N=13", "--target", "nvidia")
    assert refused.returncode == 2 and "the tile of s along j has no fixed size" in refused.stderr
    assert "note: the kernel was built with N given at run time" in refused.stderr
    fixed = tdsl("run", str(prog), "--schedule", "row_whole", "--size", "N=13", "--target", "nvidia", "--fixed-sizes")
    assert fixed.returncode == 0 and "given at run time" not in fixed.stdout and "Y [8, 13] f32: ok" in fixed.stdout
    ascend = tdsl("run", str(prog), "--schedule", "row_whole", "--size", "N=13", "--target", "ascend-950")
    assert ascend.returncode == 0 and "given at run time" not in ascend.stdout  # compiled for fixed sizes
    misuse = tdsl("run", str(prog), "--interp", "--size", "N=3", "--fixed-sizes")
    assert misuse.returncode == 2 and "use it with --target" in misuse.stderr


def test_run_leaves_out_what_the_program_does_not_determine_and_says_so():
    """Rank-deficient gramschmidt (6 columns in R^5): Q's last column is rounding noise over its own norm, and a
    kernel's tile sums (allowed by default) give other noise.  `run` checks the rest and names what it left out
    (compiler/verify/compare.py UNDETERMINED)."""
    proc = tdsl("run", "benchmarks/polybench/solvers/gramschmidt.tdsl", "--schedule", "none", "--size", "M=5,N=6",
                "--target", "nvidia", "--seed", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Q [5, 6] f32: ok" in proc.stdout and "elements not checked" in proc.stdout


def test_run_says_what_a_target_cannot_run_here():
    proc = tdsl("run", "examples/softmax.tdsl", "--size", "M=20,N=70", "--target", "h200", "--backend", "tilelang-ascend")
    assert proc.returncode == 2 and "target h200 has no backend 'tilelang-ascend' (backends: triton, tilelang)" in proc.stderr
    import torch

    if not torch.cuda.is_available():
        proc = tdsl("run", "examples/softmax.tdsl", "--size", "M=20,N=70", "--target", "h200", "--backend", "tilelang")
        assert proc.returncode == 2 and "TileLang kernels run only on an NVIDIA GPU" in proc.stderr
    proc = tdsl("run", "examples/gemm_silu.tdsl", "--schedule", "silu_in_ko", "--size", "M=8,N=8,K=64", "--target",
                "ascend-950")
    assert proc.returncode == 1 and "[rule reduction-incomplete]" in proc.stderr  # illegal: refused before anything runs


@pytest.mark.parametrize("args,says", [
    (("run", "examples/gemm.tdsl", "--interp", "--seed", "-1"), "argument --seed: -1 is out of range: give a seed 0 or more"),
    (("fuse", "examples/gemm.tdsl", "--seed", "-3"), "argument --seed: -3 is out of range"),
    (("cost", "examples/gemm.tdsl", "--regs", "0"), "argument --regs: 0 is out of range: give registers per thread from 1 to 255"),
    (("cost", "examples/gemm.tdsl", "--regs", "256"), "argument --regs: 256 is out of range"),
    (("cost", "examples/gemm.tdsl", "--regs", "-5"), "argument --regs: -5 is out of range"),
    (("run", "examples/gemm.tdsl", "--interp", "--size", "M=3,M=4"), "--size gives M twice; give each size once"),
    # Python's int() also reads other scripts' digits and underscores
    (("run", "examples/gemm.tdsl", "--interp", "--size", "M=\uff18"), "--size M: '\uff18' is not an integer"),
    (("run", "examples/gemm.tdsl", "--interp", "--size", "M=1_0"), "--size M: '1_0' is not an integer"),
    (("run", "examples/gemm.tdsl", "--interp", "--seed", "1_0"), "'1_0' is not a whole number"),
    (("cost", "examples/gemm.tdsl", "--sweep", "io=32", "--sweep", "io=64"), "--sweep names io more than once"),
    (("check", "examples/gemm.tdsl", "--all", "--schedule", "tiled"), "choose --all or --schedule, not both"),
    # the last of two was kept: `--size M=8 --size N=4,K=4` ran at the file's M (probe NN)
    (("run", "examples/gemm.tdsl", "--interp", "--size", "M=8", "--size", "N=4,K=4"),
     "--size is given twice: give it once with every size in it (--size M=8,N=4)"),
    (("check", "examples/gemm.tdsl", "--schedule", "tiled", "--schedule", "none"), "--schedule is given twice"),
    (("check", "examples/gemm.tdsl", "--schedul", "tiled"), "unrecognized arguments: --schedul tiled"),  # no abbreviation
    # options that mean nothing beside the others were ignored (probe NN)
    (("run", "examples/gemm.tdsl", "--interp", "--backend", "triton", "--size", "M=4,N=4,K=4"),
     "--backend chooses the code generator of --target: use it with --target"),
    (("fuse", "examples/gemm.tdsl", "--no-run", "--seed", "5"), "--seed draws the inputs of the interpreter evidence, "
                                                                 "which --no-run skips"),
    (("cost", "examples/gemm.tdsl", "--target", "ascend-950", "--regs", "32"), "--regs is the registers a GPU thread "
                                                                               "holds, for the occupancy; ascend-950 "
                                                                               "has none"),
    (("tree", "examples/gemm.tdsl", "--format", "text", "-o", "x.svg"), "-o x.svg names an SVG file, but --format is "
                                                                        "text"),
])
def test_numbers_out_of_their_range_are_usage_errors(args, says):
    proc = tdsl(*args)
    assert proc.returncode == 2 and says in proc.stderr, proc.stderr


@pytest.mark.parametrize("step,keyword", [("io, ii = split(B.i, factor=4, factor=5)", "factor"),
                                          ("pipeline(B.i, stages=2, stages=3)", "stages")])
def test_a_keyword_given_twice_in_a_step_is_a_located_error(tmp_path, step, keyword):
    prog = tmp_path / "twice.tdsl"
    prog.write_text(f"const N = 8\nkernel k(A: f32[N]) -> (B: f32[N]) {{\n  B[i] = A[i]\n}}\nschedule s {{\n  {step}\n}}\n")
    proc = tdsl("check", str(prog))
    assert proc.returncode == 2 and f"{prog}:6:" in proc.stderr, proc.stderr
    assert f"'{keyword}' is given twice in this step" in proc.stderr and "^" in proc.stderr


TWO_KERNELS = """\
const N = 8
kernel f(X: f32[N]) -> (Y: f32[N]) {
  Y[i] = X[i] + 1.0
}
kernel g(X: f32[N]) -> (Y: f32[N]) {
  Y[i] = X[i] * 2.0
}
schedule s for g {
  io, ii = split(Y.i, 4)
}
schedule t for f {
  bind(Y.i, grid.x)
}
"""


def test_a_kernel_named_with_kernel_gets_its_own_schedule_and_never_another_kernels(tmp_path):
    # Once the file's first block (`s`, for g) was used with --kernel f: run reported a MISMATCH (g's kernel
    # against f's interpreter), compile wrote g's module for f, check called s legal for f.
    prog = tmp_path / "two.tdsl"
    prog.write_text(TWO_KERNELS)
    proc = tdsl("compile", str(prog), "--kernel", "f", "-o", str(tmp_path / "f.py"))
    assert proc.returncode == 0 and "schedule t" in proc.stdout, proc.stderr
    assert "# kernel f(" in (tmp_path / "f.py").read_text()
    proc = tdsl("run", str(prog), "--kernel", "f", "--interp")
    assert proc.returncode == 0 and "schedule t vs program order: bit-identical" in proc.stdout, proc.stdout
    for command in (["check"], ["compile", "-o", str(tmp_path / "x.py")], ["cost"], ["tree"], ["fuse"],
                    ["run", "--interp"]):
        proc = tdsl(command[0], str(prog), "--kernel", "f", "--schedule", "s", *command[1:])
        assert proc.returncode == 2, (command, proc.stdout)
        assert "schedule 's' is for kernel g, not f: name one of f's schedules (t) or --kernel g" in proc.stderr
    # a block names its kernel: without --kernel it is used on that one; without either, every command asks
    proc = tdsl("check", str(prog), "--schedule", "s")
    assert proc.returncode == 0 and "schedule s: legal" in proc.stdout
    extra = {"run": ["--interp"], "compile": ["-o", str(tmp_path / "x.py")]}
    for command in ("check", "compile", "cost", "tree", "run"):
        proc = tdsl(command, str(prog), *extra.get(command, []))
        assert proc.returncode == 2 and "has several kernels (f, g); name one (--kernel NAME" in proc.stderr, (command, proc.stderr)
    proc = tdsl("check", str(prog), "--all", "--kernel", "g")
    assert proc.returncode == 0 and "schedule s: legal" in proc.stdout and "schedule t" not in proc.stdout


def test_tune_checks_tilelang_candidates_only_on_a_gpu(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    proc = tdsl("tune", "examples/softmax.tdsl", "--size", "M=8,N=16", "--trials", "1", "--samples", "4", "--quiet",
                "--backend", "tilelang")
    assert proc.returncode == 2
    assert "TileLang kernels run only on an NVIDIA GPU, and the executor has none" in proc.stderr, proc.stderr


def test_run_interp_holds_a_declared_reordering_to_its_bound(tmp_path):
    # `check` accepts reordering a `combine deterministic` sum; `run --interp` compared bit for bit and said
    # DIFFERENT (exit 1) where every backend's oracle allows the reordering.
    prog = tmp_path / "det.tdsl"
    prog.write_text("""\
const M = 13, N = 70, K = 33
kernel g(A: bf16[M, K], B: bf16[K, N]) -> (D: bf16[M, N]) {
  D[i, j] = sum(k) A[i, k] * B[k, j] accum bf16 combine deterministic
}
schedule rf_det {
  ko, kk = split(D.k, 8)
  rfactor(D.ko)
  reorder(D_rf, ko, i, j, kk)
  bind(D_rf.ko, grid.x)
}
""")
    proc = tdsl("run", str(prog), "--interp")
    assert proc.returncode == 0, proc.stdout
    assert "schedule rf_det vs program order: within the reordering bound (" in proc.stdout
    strict = tmp_path / "strict.tdsl"  # the same schedule of a strict sum is refused: no bound to be within
    strict.write_text(prog.read_text().replace(" combine deterministic", ""))
    assert tdsl("check", str(strict)).returncode == 1


MM_SILU = """const M = 128, N = 128, K = 64
kernel mm_silu(A: bf16[M, K], W: bf16[K, N]) -> (Y: bf16[M, N]) {
  C[i, j]: bf16 = sum(k) A[i, k] * W[k, j] accum f32
  Y[i, j] = silu(C[i, j])
}
schedule ub {
  io, ii = split(C.i, 16)
  cache_read(A, UB, at=C.io)
}
schedule plain {
  io, ii = split(C.i, 16)
}
"""


def test_a_scope_the_target_lacks_is_a_refusal_at_the_block(tmp_path):
    """`UB` on an NVIDIA target (probe P): an unlocated error, exit 2 from check --target, which stopped at the
    block instead of reporting it as not generated for the target and going on to the next."""
    prog = tmp_path / "mm.tdsl"
    prog.write_text(MM_SILU)
    check = tdsl("check", str(prog), "--all", "--target", "h100")
    assert check.returncode == 1
    assert "schedule ub: not generated for h100" in check.stdout and "schedule plain: generated for h100" in check.stdout
    assert "mm.tdsl:6:1: error: cannot generate code (h100): memory scope 'UB' does not exist" in check.stdout
    for command in ("cost", "compile"):
        extra = ["-o", str(tmp_path / "x.py")] if command == "compile" else []
        proc = tdsl(command, str(prog), "--schedule", "ub", "--target", "h100", *extra)
        assert proc.returncode == 2 and "mm.tdsl:6:1: error: cannot generate code (h100)" in proc.stderr


def test_steps_of_a_tuning_log_that_do_not_parse_are_the_logs_error(tmp_path):
    """A log's steps are not text of the program: a syntax error in them, or text that closes the block and adds
    to the program, is reported against the log (probe P: at a line the program does not have)."""
    import json

    prog = tmp_path / "p.tdsl"
    prog.write_text("const M = 8, N = 8\nkernel k(X: f32[M, N]) -> (Y: f32[M, N]) {\n  Y[i, j] = X[i, j] * 2.0\n}\n")
    assert tdsl("tune", str(prog), "--target", "h100", "--trials", "1", "--log", str(tmp_path / "t.jsonl")).returncode == 0
    record = json.loads((tmp_path / "t.jsonl").read_text().splitlines()[0])
    for steps, says in (("split(Y.i,, 4)", "expected ')'"), ("}\nkernel x() {", "expected '->'"),
                        ("}\nschedule evil {\n  bind(Y.i, grid.x)", "the steps are not one schedule block")):
        log = tmp_path / "bad.jsonl"
        log.write_text(json.dumps({**record, "steps": steps, "us": 1.0, "ok": True}) + "\n")
        proc = tdsl("compile", str(prog), "--tuned", str(log), "--target", "h100", "-o", str(tmp_path / "x.py"))
        assert proc.returncode == 2
        assert f"{log}: no correct record of kernel k applies to {prog} (1 tried); the fastest: " in proc.stderr
        assert f"({says}" in proc.stderr


@pytest.mark.parametrize("text, says", [
    ("const N = 4, eps = 0.5\nkernel k(X: f32[N]) -> (Y: f32[N]) {\n  Y[i] = eps[i]\n}\n",
     "'eps' is a float constant, not a tensor"),
    ("const N = 8\nkernel k(X: f32[N]) -> (Y: f32[N]) {\n  P[i] = X[i] * 2.0\n  Q[i] = X[i] + 2.0\n"
     "  Y[i] = P[i] + Q[i]\n}\nschedule s {\n  fuse(P.i, Y.i)\n}\n",
     "fuse: loops P.i and Y.i are neither nested"),
])
def test_messages_name_what_the_program_wrote(tmp_path, text, says):
    prog = tmp_path / "p.tdsl"
    prog.write_text(text)
    proc = tdsl("check", str(prog), "--all")
    assert proc.returncode == 2 and says in proc.stderr + proc.stdout


def test_exit_codes_of_misuse_and_target_checks_follow_the_table(tmp_path):
    """Probe P: run --interp --all said 1 (a verdict) for a block with a schedule misuse, where check --all says
    2; check --schedule none --target ignored the target and its backend; a --sweep factor past 32 bits became a
    table row and exit 0."""
    prog = tmp_path / "p.tdsl"
    prog.write_text("const N = 8\nkernel k(X: f32[N]) -> (Y: f32[N]) {\n  Y[i] = X[i] * 2.0\n}\n"
                    "schedule bad {\n  split(Y.q, 4)\n}\nschedule good {\n  io, ii = split(Y.i, 4)\n}\n")
    assert tdsl("run", str(prog), "--interp", "--all").returncode == 2
    assert tdsl("check", str(prog), "--all").returncode == 2
    wrong = tdsl("check", str(prog), "--schedule", "none", "--target", "nvidia", "--backend", "tilelang-ascend")
    assert wrong.returncode == 2 and "target nvidia has no backend 'tilelang-ascend'" in wrong.stderr
    plain = tdsl("check", str(prog), "--schedule", "none", "--target", "ascend-950")
    assert plain.returncode == 0 and "program order: generated for ascend-950" in plain.stdout
    sweep = tdsl("cost", str(prog), "--schedule", "good", "--target", "h100", "--sweep", "io=99999999999")
    assert sweep.returncode == 2 and "--sweep: a factor must be at most 2147483647" in sweep.stderr


@pytest.mark.parametrize("command", ["check", "cost", "run", "compile"])
@pytest.mark.parametrize("schedule", ["quantize_before_rowmax", "separate"])
def test_a_backend_the_target_lacks_is_a_usage_error_before_any_verdict(command, schedule, tmp_path):
    """Probe GG: `check` and `cost` gave an illegal schedule's verdict (exit 1) with a backend the target does not
    have, and `check` printed a legal one's verdict before the usage error; a usage error comes first (exit 2)."""
    out = ["-o", str(tmp_path / "k.py")] if command == "compile" else []
    proc = tdsl(command, "examples/quant_gemm.tdsl", "--schedule", schedule, "--target", "ascend-910b",
                "--backend", "triton", *out)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "target ascend-910b has no backend 'triton' (backends: tilelang-ascend)" in proc.stderr
    assert "legal" not in proc.stdout and "illegal" not in proc.stderr


def test_control_characters_of_an_argument_are_escaped_in_messages():
    proc = tdsl("check", "examples/softmax.tdsl", "--schedule", "\x1b[31mX")
    assert proc.returncode == 2 and "\x1b" not in proc.stderr and "'\\x1b[31mX'" in proc.stderr


@pytest.mark.parametrize("sizes, says", [
    ({1: 64}, "sizes must map size names (strings) to values; got the key 1"),
    ("M=4", "sizes must map size names to values, e.g. {'N': 64}; got str 'M=4'"),
])
def test_sizes_of_the_wrong_type_are_tdsl_errors(sizes, says):
    from tdsl.compiler.driver.api import loads
    from tdsl.frontend.diagnostics import TdslError

    with pytest.raises(TdslError, match=re.escape(says)):
        loads("const N = 4\nkernel k(X: f32[N]) -> (Y: f32[N]) {\n  Y[i] = X[i]\n}\n", sizes=sizes)


def test_an_empty_output_path_is_a_usage_error():
    proc = tdsl("compile", "examples/softmax.tdsl", "-o", "")
    assert proc.returncode == 2 and "-o is empty" in proc.stderr


def test_can_names_its_primitive_with_a_string():
    from tdsl.compiler.driver.api import load

    with pytest.raises(TypeError, match="can: name the primitive with a string"):
        load(EXAMPLES / "softmax.tdsl").schedule().can(5)


def test_tree_takes_its_format_from_the_file_name_and_cost_makes_the_plots_folder(tmp_path):
    """`tree -o x.svg` wrote the text tree into the .svg; `cost --plot` into a folder not yet made printed the
    whole report and then failed (tree -o and compile -o make it: probe NN)."""
    assert tdsl("tree", "examples/gemm.tdsl", "-o", str(tmp_path / "t.dot")).returncode == 0
    assert (tmp_path / "t.dot").read_text().startswith("digraph")
    assert tdsl("tree", "examples/gemm.tdsl", "-o", str(tmp_path / "t.txt")).returncode == 0
    assert "Domain" in (tmp_path / "t.txt").read_text()
    plot = tmp_path / "new" / "roofline.png"
    assert tdsl("cost", "examples/gemm.tdsl", "--plot", str(plot)).returncode == 0 and plot.stat().st_size > 0


def test_cost_refuses_more_registers_than_a_block_of_the_kernels_threads_may_hold(tmp_path):
    """`--regs 255` on 32 warps gave 0 resident blocks beside a time (probe NN)."""
    prog = tmp_path / "wide.tdsl"
    prog.write_text("const N = 4096\nkernel ew(X: f32[N]) -> (Z: f32[N]) {\n  Z[i] = X[i] + 1.0\n}\n"
                    "schedule t {\n  io, ii = split(Z.i, 1024)\n  bind(Z.io, grid.x)\n  launch(Z, warps=32)\n}\n")
    proc = tdsl("cost", str(prog), "--regs", "255")
    assert proc.returncode == 2 and ("--regs 255: kernel ew_0 has 1024 threads a block, and a block may have 65,536 "
                                     "registers, so at most 64 a thread") in proc.stderr
    assert tdsl("cost", str(prog), "--regs", "64").returncode == 0


def test_run_all_runs_the_blocks_of_every_kernel_of_a_file(tmp_path):
    """check --all took a file of several kernels and run --interp --all refused it ("name one": probe NN)."""
    prog = tmp_path / "two.tdsl"
    prog.write_text("const N = 8\nkernel a(X: f32[N]) -> (Y: f32[N]) {\n  Y[i] = X[i] * 2.0\n}\n"
                    "kernel b(X: f32[N]) -> (Z: f32[N]) {\n  Z[i] = sum(j) X[j] * X[i]\n}\n"
                    "schedule sa for a {\n  io, ii = split(Y.i, 4)\n}\nschedule sb for b {\n  jo, ji = split(Z.j, 2)\n}\n")
    proc = tdsl("run", str(prog), "--interp", "--all")
    assert proc.returncode == 0, proc.stderr
    assert "kernel a: 8 instances" in proc.stdout and "schedule sa vs program order: bit-identical" in proc.stdout
    assert "kernel b: 64 instances" in proc.stdout and "schedule sb vs program order: bit-identical" in proc.stdout
    only = tdsl("run", str(prog), "--interp", "--all", "--kernel", "b")
    assert only.returncode == 0 and "kernel a" not in only.stdout and "schedule sb" in only.stdout
