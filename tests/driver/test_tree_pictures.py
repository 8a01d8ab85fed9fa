"""`tdsl tree --format dot|svg` (docs/schedule-trees.md, "Pictures"): Graphviz drawings of the schedule trees.

The DOT text is checked as text (node kinds, labels, escaping); the SVG only where Graphviz's `dot` is
installed, and its absence is faked to check the error that says what to do.
"""

from __future__ import annotations

import re
import shutil

import pytest

from tdsl.compiler.driver.api import load
from tdsl.compiler.schedule.tree_dot import dot_source

from catalog import EXAMPLES

HAS_DOT = shutil.which("dot") is not None
QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')  # a DOT quoted string: any character but an unescaped quote


def run(argv, capsys):
    from tdsl.compiler.driver.cli import main

    status = main([str(a) for a in argv])
    out = capsys.readouterr()
    return status, out.out, out.err


def labels(dot: str) -> list[str]:
    """The text of every label, as Graphviz reads it (escapes undone, `\\l` line ends as newlines)."""
    found = []
    for m in re.finditer(r"label=" + QUOTED.pattern, dot):
        text = re.sub(r"\\(.)", lambda e: {"l": "\n"}.get(e.group(1), e.group(1)), m.group(1))
        found.append(text)
    return found


def test_dot_of_a_scheduled_gemm(capsys):
    status, out, _ = run(["tree", EXAMPLES / "gemm.tdsl", "--schedule", "gpu", "--format", "dot"], capsys)
    assert status == 0 and out.startswith("digraph tdsl {")
    assert out.count("subgraph cluster_") == 2
    texts = labels(out)
    assert "before: program order" in texts and "after: schedule gpu" in texts
    assert "Mark\nbind io -> grid.x\n" in texts and "Mark\npipeline ko stages=3\n" in texts
    assert "Band\nio: 32 values, tile, grid.x\nC: io = floor(i/128)\n" in texts
    assert "Band\nko: 64 values, tile, pipeline 3 stages\nC: ko = floor(k/64)\n" in texts
    assert "cache_read A\nshared 128x64 bf16 x 3 stages\nfor C\n" in texts
    assert "cache_write C\nregister 128x128 f32\nfor C\n" in texts
    assert "C\n(sum over k, accum f32, store f32)\n" in texts
    # a buffer hangs off the band whose loop holds it
    ko_band = re.search(r'(t1_n\d+) \[label="Band\\lko:', out).group(1)
    buffer_a = re.search(r'(t1_n\d+) \[label="cache_read A', out).group(1)
    assert re.search(rf"{ko_band} -> {buffer_a} \[label=\"at ko\"", out)


def test_dot_of_a_sequence_and_of_program_order_only(capsys):
    status, out, _ = run(["tree", EXAMPLES / "gemm_silu.tdsl", "--format", "dot"], capsys)
    texts = labels(out)
    assert status == 0 and "Sequence\n" in texts and "Filter {C}\n" in texts and "Filter {Y}\n" in texts
    assert "Band\ni: 64 values, point\nj: 64 values, point\nY: i = i   j = j\n" in texts  # per iteration of io, jo
    status, out, _ = run(["tree", EXAMPLES / "gemm_silu.tdsl", "--schedule", "none", "--format", "dot"], capsys)
    assert status == 0 and out.count("subgraph cluster_") == 1


def test_loops_over_a_parameter_say_how_many_values(capsys):
    status, out, _ = run(["tree", EXAMPLES / "mha.tdsl", "--schedule", "flash", "--format", "dot"], capsys)
    texts = labels(out)
    assert status == 0
    assert any(t.startswith("Band\nqo: floor((127 + L)/128) values, tile, grid.x\n") for t in texts)
    assert any("bind bh -> grid.y\nlaunch 8 warps" in t for t in texts)


HOSTILE = 'q"uote <a>{b}|c\\d ü \\l end\\'


def test_hostile_text_is_escaped():
    """Quotes, backslashes, `<>{}|` and unicode in a caption or title come out as written, inside one quoted
    string each (a name in a program is an identifier; captions and file names are not)."""
    sched = load(EXAMPLES / "gemm.tdsl").schedule("gpu")
    dot = dot_source([(HOSTILE, sched)], title=HOSTILE)
    assert labels(dot).count(HOSTILE) == 2
    assert "<a>" not in QUOTED.sub("", dot)  # nothing of it outside a quoted string


def test_a_hostile_file_name(tmp_path, capsys):
    prog = tmp_path / 'we"ird <x>{y}|z ü.tdsl'
    prog.write_text((EXAMPLES / "gemm.tdsl").read_text())
    status, out, _ = run(["tree", prog, "--format", "dot"], capsys)
    assert status == 0 and f"{prog}: kernel gemm" in labels(out)
    if HAS_DOT:  # Graphviz reads it back
        import subprocess

        svg = subprocess.run(["dot", "-Tsvg"], input=out, capture_output=True, text=True, check=True).stdout
        assert "we&quot;ird &lt;x&gt;{y}|z ü.tdsl" in svg


def test_svg_without_graphviz_says_how_to_get_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no `dot` anywhere
    status, out, err = run(["tree", EXAMPLES / "gemm.tdsl", "--format", "svg"], capsys)
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "install Graphviz (apt-get install graphviz" in err and "or use --format dot" in err


@pytest.mark.skipif(not HAS_DOT, reason="Graphviz's dot program is not installed")
def test_svg(tmp_path, capsys):
    out_file = tmp_path / "pictures" / "gemm.svg"
    status, out, _ = run(["tree", EXAMPLES / "gemm.tdsl", "--schedule", "gpu", "--format", "svg", "-o", out_file],
                         capsys)
    assert status == 0 and out == f"wrote {out_file}: 2 tree(s), format svg\n"
    svg = out_file.read_text(encoding="utf-8")
    assert "<svg" in svg and "bind io &#45;&gt; grid.x" in svg and "cache_read A" in svg


def test_output_to_a_file_never_the_program(tmp_path, capsys):
    out_file = tmp_path / "gemm.dot"
    status, _, _ = run(["tree", EXAMPLES / "gemm.tdsl", "--format", "dot", "-o", out_file], capsys)
    assert status == 0 and out_file.read_text(encoding="utf-8").startswith("digraph tdsl {")
    prog = tmp_path / "gemm.tdsl"
    prog.write_text((EXAMPLES / "gemm.tdsl").read_text())
    status, _, err = run(["tree", prog, "--format", "dot", "-o", tmp_path / "." / "gemm.tdsl"], capsys)
    assert status == 2 and "is the same file as the input" in err
    assert prog.read_text() == (EXAMPLES / "gemm.tdsl").read_text()
    status, _, _ = run(["tree", EXAMPLES / "gemm.tdsl", "-o", tmp_path / "gemm.txt"], capsys)
    assert status == 0 and (tmp_path / "gemm.txt").read_text().startswith("# before: program order\nDomain")


@pytest.mark.parametrize("command, doc", [("tree", "schedule-trees.md"), ("cost", "cost.md"), ("tune", "tuning.md")])
def test_help_and_docs_agree(command, doc):
    """Every option of `tdsl tree` / `tdsl cost` / `tdsl tune` and every choice of them is in the command's usage lines of its
    page, and each usage line's options are the command's."""
    from tdsl.compiler.driver.cli import build_parser

    from catalog import ROOT

    sub = next(a for a in build_parser()._actions if a.dest == "command").choices[command]
    text = (ROOT / "docs" / doc).read_text(encoding="utf-8")
    usage = [line for line in text.splitlines() if line.strip().startswith(f"tdsl {command} PROG")]
    assert usage, f"{doc} has no usage line of tdsl {command}"
    documented = {o for line in usage for o in re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", line)}
    options = {o for a in sub._actions for o in a.option_strings if o not in ("-h", "--help")}
    aliases = {"--output": "-o"}  # the usage lines give the short spelling
    assert documented <= options
    assert {aliases.get(o, o) for o in options} - {"--kernel", "--size", "--schedule"} <= documented
    for a in sub._actions:
        if a.choices and a.option_strings:
            choices = "|".join(a.choices)
            assert choices in text or all(c in text for c in a.choices), (a.option_strings, choices)
