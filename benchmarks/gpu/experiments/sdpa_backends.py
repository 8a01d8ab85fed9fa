"""Which kernel does `F.scaled_dot_product_attention` run on the H200 at issue 12's shapes, and how fast is each of
its backends?  The attention benchmarks (attention_mha.py, flash_ws_generated.py) time SDPA without forcing a
backend; issue 12 names "SDPA with the flash backend".  This times, in one call, SDPA as called there (its own
choice) and under `sdpa_kernel` with each backend forced, and names the CUDA kernels the default call launches
(torch.profiler).  Every forced backend's output is checked against the default's first.

    python3 benchmarks/gpu/experiments/sdpa_backends.py --out $OUT/sdpa_backends.json      # the H200
"""

from __future__ import annotations

import argparse
import json

SHAPES = [(1, 1, 8192), (8, 32, 4096), (2, 32, 16384)]  # (B, H, L), d = 128, bf16 (issue 12)
D = 128
SCALE = D ** -0.5


def kernels_of(call) -> list:
    """The CUDA kernels one call launches, by name."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        call()
        torch.cuda.synchronize()
    return sorted({e.key for e in prof.key_averages() if e.device_type.name == "CUDA"})


def main() -> None:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from triton.testing import do_bench

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="sdpa_backends.json")
    args = ap.parse_args()
    backends = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
                "efficient": SDPBackend.EFFICIENT_ATTENTION}
    rows = []
    for b, h, length in SHAPES:
        torch.manual_seed(0)
        q, k, v = (torch.randn(b, h, length, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        for causal in (False, True):
            def default():
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=SCALE)

            flops = 4 * b * h * length * length * D * (0.5 if causal else 1.0)
            want = default()
            row = {"shape": [b, h, length], "causal": causal, "default_kernels": kernels_of(default)}
            t = do_bench(default, warmup=50, rep=300)
            row["default"] = {"us": t * 1e3, "tflops": flops / t / 1e9}
            for name, backend in backends.items():
                def forced():
                    with sdpa_kernel(backend):
                        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=SCALE)
                try:
                    diff = float((forced().float() - want.float()).abs().max())
                    t = do_bench(forced, warmup=50, rep=300)
                    row[name] = {"us": t * 1e3, "tflops": flops / t / 1e9, "max_diff_to_default": diff,
                                 "kernels": kernels_of(forced)}
                except RuntimeError as err:  # the backend refuses the shape or is not built
                    row[name] = {"error": str(err).splitlines()[0][:200]}
            rows.append(row)
            print(json.dumps({k: (v if k != "default_kernels" else v[:3]) for k, v in row.items()})[:600], flush=True)
    with open(args.out, "w") as f:
        json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
