"""Targets are data: each module holds the figures of one accelerator, with its sources in comments."""

from __future__ import annotations

import re

import pytest

from tdsl.compiler import targets as targets_pkg
from tdsl.compiler.targets import KiB, get_target, names
from tdsl.frontend.diagnostics import TdslError

from catalog import ROOT

TARGET_DIR = ROOT / "compiler" / "targets"


def test_the_five_targets():
    assert names() == ["h100", "h200", "rtx-pro-6000", "ascend-910b", "ascend-950"]
    for name in names():
        t = get_target(name)
        assert t.name == name and t.units > 0 and t.dram_bandwidth > 0 and t.peak("bf16") > 0
        assert t.default_scope in t.scopes and t.sources
        for scope in t.scopes.values():
            if scope.name != "global":
                assert scope.per_block and scope.per_unit and scope.per_block <= scope.per_unit


def test_h100_is_the_chapters_sm():
    """5.1.5: 132 SMs, 2048 threads / 32 blocks / 64K registers per SM, 228 KB shared (233,472 B), 1 KiB reserve."""
    t = get_target("h100")
    assert t.units == 132
    assert (t.max_threads_per_unit, t.max_blocks_per_unit, t.registers_per_unit) == (2048, 32, 65536)
    assert t.max_warps_per_unit == 64
    shared = t.scope("shared")
    assert (shared.per_unit, shared.per_block, shared.reserved_per_block) == (233472, 232448, 1024)
    assert t.dram_bandwidth == 3.35e12 and t.peak("bf16") == 989.4e12
    # the chapter's per-SM shares (5.1.5): about 25.4 GB/s and 7.50 TFLOP/s
    assert round(t.dram_bandwidth / t.units / 1e9, 1) == 25.4
    assert round(t.peak("bf16") / t.units / 1e12, 2) == 7.50


def test_h200_has_the_h100_sm_and_faster_memory():
    h100, h200 = get_target("h100"), get_target("h200")
    assert h200.dram_bandwidth == 4.8e12 and h200.dram_bandwidth_measured == 4.27e12
    assert h200.scopes == h100.scopes and h200.units == h100.units and h200.peak("bf16") == h100.peak("bf16")


def test_rtx_pro_6000():
    t = get_target("rtx-pro-6000")
    shared = t.scope("shared")
    assert (shared.per_unit, shared.per_block, shared.reserved_per_block) == (102400, 101376, 1024)  # 5.2.2, 5.3.3
    assert t.dram_bandwidth == 1792e9 and t.peak("bf16") == 503.8e12
    assert t.max_warps_per_unit == 48  # compute capability 12.x


def test_ascend_buffers():
    b910 = get_target("ascend-910b")
    assert b910.scope("L1").per_block == 524032 and b910.scope("UB").per_block == 196352  # tilelang-ascend
    assert (b910.scope("L0A").per_block, b910.scope("L0B").per_block, b910.scope("L0C").per_block) == (
        64 * KiB, 64 * KiB, 128 * KiB)
    assert b910.scope("shared").name == "UB"  # alias, as T.alloc_shared in TileLang-Ascend
    a950 = get_target("ascend-950")
    assert a950.scope("UB").per_unit == 262144 and a950.scope("UB").per_block == 253952


def test_unknown_names_are_clear_errors():
    with pytest.raises(TdslError, match=r"unknown target 'h10'.*did you mean 'h100'"):
        get_target("h10")
    with pytest.raises(TdslError, match=r"memory scope 'L0A' does not exist on target h100 \(scopes: .*shared"):
        get_target("h100").scope("L0A")


def test_every_figure_cites_its_source():
    """Each numeric field of a target module carries a comment (the source of the figure)."""
    field = re.compile(r"^\s*(\w+)=(.*\d.*),\s*(#.*)?$")
    for path in sorted(TARGET_DIR.glob("*.py")):
        if path.name == "__init__.py":
            continue
        text = path.read_text()
        assert '"""' in text and "Sources" in text, path.name
        for n, line in enumerate(text.splitlines(), 1):
            m = field.match(line)
            if not m or m.group(1) in ("name", "description", "unit_name", "default_scope", "vendor", "note", "sources"):
                continue
            assert m.group(3), f"{path.name}:{n}: the figure `{line.strip()}` has no source comment"


def test_targets_doc_lists_every_target():
    text = (ROOT / "docs" / "targets.md").read_text()
    for name in names():
        assert f"`{name}`" in text
    assert targets_pkg.__doc__ and "docs/targets.md" in targets_pkg.__doc__
