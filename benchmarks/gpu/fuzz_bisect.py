"""Find the kernel at fault in a GPU fuzz case whose TileLang module disagrees with its Triton module.

`fuzz_run.py` compares each module's outputs with the reference interpreter; when the Triton module matches and
the TileLang module does not, this script runs the Triton module once, keeping every tensor each kernel launch
takes before and after the launch, then runs each TileLang kernel alone on a copy of the Triton launch's
tensors from before it and compares what it leaves with what the Triton launch left.  The first launch whose
results differ is the wrong kernel (its inputs were right).  Temporaries start as NaN, so elements no kernel
writes are NaN on both sides.

    PYTHONPATH=/tmp/site python3 benchmarks/gpu/fuzz_bisect.py benchmarks/gpu/fuzz_cases_pb/case_00181 ...
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import traceback
from pathlib import Path

import numpy as np

DTYPES = ("bf16", "f16", "f32", "f8e4m3")


def _load(folder: Path, filename: str, tag: str):
    spec = importlib.util.spec_from_file_location(f"bisect_{folder.name}_{tag}", folder / filename)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _NanTorch:
    """The module's `torch`, whose `empty` gives NaN-filled tensors (what no kernel writes stays NaN)."""

    def __init__(self, torch):
        self._torch = torch

    def __getattr__(self, name):
        return getattr(self._torch, name)

    def empty(self, *shape, **kwargs):
        return self._torch.full(*shape, float("nan"), **kwargs) if shape and isinstance(shape[0], tuple) \
            else self._torch.full(shape, float("nan"), **kwargs)


def _triton_launches(module, entry: str, args):
    """Run the Triton launcher; the tensors of every launch before and after it, by parameter name."""
    import torch
    from triton.runtime.jit import JITFunction

    launches = []

    class Recorder:
        def __init__(self, name, fn):
            self.name, self.fn = name, fn

        def __getitem__(self, grid):
            def launch(*a, **k):
                names = list(self.fn.arg_names)
                before = {n: v.clone() for n, v in zip(names, a) if isinstance(v, torch.Tensor)}
                self.fn[grid](*a, **k)
                torch.cuda.synchronize()
                after = {n: v.clone() for n, v in zip(names, a) if isinstance(v, torch.Tensor)}
                scalars = {n: v for n, v in zip(names, a) if not isinstance(v, torch.Tensor)}
                launches.append((self.name, before, after, scalars))
            return launch

    for name, value in list(vars(module).items()):
        if isinstance(value, JITFunction) and not name.startswith("_"):
            setattr(module, name, Recorder(name, value))
    module.torch = _NanTorch(torch)
    getattr(module, entry)(*args)
    torch.cuda.synchronize()
    return launches


def _tilelang_param_names(prim_func) -> list[str]:
    return [prim_func.buffer_map[p].name if p in prim_func.buffer_map else p.name for p in prim_func.params]


def _differences(want, got) -> str:
    w, g = want.float().cpu().numpy().ravel(), got.float().cpu().numpy().ravel()
    both_nan = np.isnan(w) & np.isnan(g)
    scale = np.nanmax(np.abs(w)) if np.isfinite(w).any() else 1.0
    bad = ~both_nan & ~(np.abs(w - g) <= 1e-4 * max(scale, 1e-30))
    if not bad.any():
        return ""
    idx = np.flatnonzero(bad)[:6]
    shape = tuple(want.shape)
    at = ", ".join(f"{np.unravel_index(i, shape)}: {w[i]:.6g} vs {g[i]:.6g}" for i in idx)
    return f"{int(bad.sum())}/{w.size} differ (Triton vs TileLang) e.g. {at}"


def bisect(folder: Path, sources: Path = None) -> list[str]:
    import torch

    meta = json.loads((folder / "meta.json").read_text())
    dist = meta["distributions"][0]
    ins = np.load(folder / f"inputs_{dist}.npz")
    torch_dtypes = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32,
                    "f8e4m3": torch.float8_e4m3fn}
    args = [torch.from_numpy(ins[t["name"]]).to(torch_dtypes[t["dtype"]]).cuda() for t in meta["inputs"]]
    triton_module = _load(folder, "module.py", "triton")
    entry = getattr(triton_module, "RENAMED", {}).get(meta["kernel"], meta["kernel"])
    launches = _triton_launches(triton_module, entry, args)
    tl_module = _load(folder, "module_tilelang.py", "tilelang")
    lines = [f"{folder.name}: {meta['case']['name']} at {meta['case']['sizes']}, {len(launches)} launches"]
    for n, (name, before, after, scalars) in enumerate(launches):
        prim = tl_module.KERNELS[name]
        params = _tilelang_param_names(prim)
        call = []
        for p in params:
            if p in before:
                call.append(before[p].clone())
            elif p in scalars:
                call.append(scalars[p])
            else:
                lines.append(f"  launch {n} {name}: TileLang parameter {p} has no Triton counterpart; stop")
                return lines
        try:
            tl_module._kernel(name)(*call)
            torch.cuda.synchronize()
        except Exception as err:  # noqa: BLE001
            lines.append(f"  launch {n} {name}: TileLang failed: {type(err).__name__}: {str(err)[-300:]}")
            return lines
        diffs = [(p, _differences(after[p], got)) for p, got in zip(params, call) if p in after]
        wrong = [(p, d) for p, d in diffs if d]
        scal = f" ({', '.join(f'{k}={v}' for k, v in scalars.items() if k != 'INTERPRET')})" if len(scalars) > 1 else ""
        if wrong:
            lines.append(f"  launch {n} {name}{scal}: WRONG " + "; ".join(f"{p}: {d}" for p, d in wrong))
            if sources is not None:  # the CUDA source TileLang compiled, to read beside the module
                sources.mkdir(parents=True, exist_ok=True)
                (sources / f"{folder.name}_{name}.cu").write_text(tl_module._kernel(name).get_kernel_source())
            return lines
        lines.append(f"  launch {n} {name}{scal}: same")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cases", nargs="+")
    ap.add_argument("--sources", help="write the CUDA source of each wrong kernel into this folder")
    args = ap.parse_args(argv)
    for case in args.cases:
        try:
            print("\n".join(bisect(Path(case), Path(args.sources) if args.sources else None)), flush=True)
        except Exception:  # noqa: BLE001
            print(f"{case}: the bisection failed\n{traceback.format_exc()[-2000:]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
