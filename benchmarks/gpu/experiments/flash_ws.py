"""Experiment (hand-written, not generated): FlashAttention-3's arrangement in TileLang, with tdsl's arithmetic.

The question before any backend work: does a warp-specialised kernel written in TileLang 0.1.15 reach issue 12's
>= 1.0x SDPA on the H200 where the generated kernel (T.Pipelined, 0.44-0.72x) does not?  The kernel here computes
exactly what examples/mha.tdsl's `flash` schedule computes (P rounded to bf16 before its row sum and its product,
exp((S - m) * scale) as __expf, the rescaling factor 1 where the maximum did not move, O = U / l rounded to bf16)
and differs only in how the work is arranged, as in FlashAttention-3:

- one producer warp group loads Q once and K, V per key block through TMA into a ring of `stages` slots, with a
  full and an empty mbarrier per slot (K and V separately, so K's slot frees as soon as its QKᵀ is done);
- two consumer warp groups (64 query rows each) issue QKᵀ of key block k asynchronously (`T.wgmma_gemm`), then
  rescale U and issue P·V of block k-1, wait for QKᵀ only (`T.wait_wgmma(1)`), and form the softmax of block k
  while P·V still runs on the tensor cores;
- registers moved from the producer to the consumers (`setmaxnreg`).

    .venv/bin/python benchmarks/gpu/experiments/flash_ws.py lower                 # here: lowers every variant
    PYTHONPATH=/tmp/site python3 benchmarks/gpu/experiments/flash_ws.py run --out $OUT/flash_ws.json
"""
import argparse, json, time

SCALE = 0.08838834764831845
SHAPES = [(1, 1, 8192), (8, 32, 4096), (2, 32, 16384)]
RAGGED_CHECK = [(2, 3, 1024)]  # small shape checked against a float64 reference first (multiples of the block)


# ex2.approx without nvcc's global --use_fast_math (which would also make the division O = U / l approximate)
EX2 = ('extern "C" __device__ __forceinline__ float tdsl_ex2(float x) '
       '{ float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }\n')


def arithmetic(arith):
    """P from (S, m), and the rescaling factor from (the maximum a sum was built with, the current maximum).

    tdsl      -- the program's: exp((S - m) * scale) as __expf (FSUB, FMUL, FMUL by log2 e, ex2), rounded to bf16,
                 the row sum adding the rounded values
    tdsl_ex2  -- the same rounding; exp2 of (S * c - m * c), c = scale * log2 e (one FFMA per element, m * c per row)
    fa_sum    -- the program's exp, the row sum adding the unrounded values (P rounded only for the product)
    fa        -- FlashAttention's: exp2 with one FFMA, summed unrounded
    """
    import tilelang.language as T

    f32, bf16 = "float32", "bfloat16"
    C, C2 = SCALE, SCALE * 1.4426950408889634
    ex2 = arith in ("tdsl_ex2", "fa")
    rounded = arith in ("tdsl", "tdsl_ex2")

    def e(x, mx):
        return T.call_extern(f32, "tdsl_ex2", x * C2 - mx * C2) if ex2 else T.__exp((x - mx) * C)

    def p_of(x, mx):
        return T.Cast(f32, T.Cast(bf16, e(x, mx))) if rounded else e(x, mx)

    def alpha_of(ref, mx):
        return T.if_then_else(ref == mx, 1.0, e(ref, mx))

    return p_of, alpha_of


def flash_ws(B, H, L, causal, bm=128, bn=128, stages=2, D=128, overlap=True, pingpong=False, arith="tdsl",
             heavy_first=False):
    import tilelang.language as T

    nq = (L + bm - 1) // bm
    assert L % bn == 0 and (not causal or bm == bn)
    bf16, f32 = "bfloat16", "float32"
    p_of, alpha_of = arithmetic(arith)

    @T.prim_func
    def main(Q: T.Tensor((B, H, L, D), bf16), K: T.Tensor((B, H, L, D), bf16), V: T.Tensor((B, H, L, D), bf16),
             O: T.Tensor((B, H, L, D), bf16)):
        # heavy_first: the causal kernel's longest query blocks (most key blocks) are launched first, for every
        # head (heads vary fastest in the launch order)
        with T.Kernel(*((B * H, nq) if heavy_first else (nq, B * H)), threads=384) as (g0, g1):
            bx = (nq - 1 - g1) if heavy_first else g0
            by = g0 if heavy_first else g1
            Q_s = T.alloc_shared((bm, D), bf16)
            K_s = T.alloc_shared((stages, bn, D), bf16)
            V_s = T.alloc_shared((stages, bn, D), bf16)
            acc_S = T.alloc_fragment((bm, bn), f32)
            P_f = T.alloc_fragment((bm, bn), bf16)
            acc_U = T.alloc_fragment((bm, D), f32)
            m = T.alloc_fragment((bm,), f32)
            m_prev = T.alloc_fragment((bm,), f32)
            ref_U = T.alloc_fragment((bm,), f32)
            alpha = T.alloc_fragment((bm,), f32)
            l = T.alloc_fragment((bm,), f32)
            q_full = T.alloc_barrier(arrive_count=128)
            k_full = T.alloc_barrier(arrive_count=[128] * stages)
            v_full = T.alloc_barrier(arrive_count=[128] * stages)
            k_empty = T.alloc_barrier(arrive_count=[256] * stages)
            v_empty = T.alloc_barrier(arrive_count=[256] * stages)
            b = by // H
            h = by % H
            nk = (bx + 1) if causal else (L // bn)

            T.import_source(EX2)
            with T.ws(2):
                T.dec_max_nreg(24)
                T.tma_copy(Q[b, h, bx * bm:(bx + 1) * bm, :], Q_s, barrier=q_full)
                T.barrier_arrive(q_full)
                for k in T.serial(nk):
                    T.barrier_wait(k_empty[k % stages], ((k // stages) % 2) ^ 1)
                    T.tma_copy(K[b, h, k * bn:(k + 1) * bn, :], K_s[k % stages, :, :], barrier=k_full[k % stages])
                    T.barrier_arrive(k_full[k % stages])
                    T.barrier_wait(v_empty[k % stages], ((k // stages) % 2) ^ 1)
                    T.tma_copy(V[b, h, k * bn:(k + 1) * bn, :], V_s[k % stages, :, :], barrier=v_full[k % stages])
                    T.barrier_arrive(v_full[k % stages])

            with T.ws(0, 1):
                T.inc_max_nreg(240)
                wg = T.get_thread_binding() // 128
                if pingpong:
                    # the second consumer lets the first issue its products first
                    if wg == 1:
                        T.named_barrier_arrive(5, 256)
                T.fill(m, -T.infinity(f32))
                T.fill(ref_U, -T.infinity(f32))
                T.fill(l, 0.0)
                T.fill(acc_U, 0.0)
                T.barrier_wait(q_full, 0)
                T.barrier_wait(k_full[0], 0)
                if pingpong:
                    T.sync_threads(5 + wg, 256)
                T.wgmma_gemm(Q_s, K_s[0, :, :], acc_S, transpose_B=True, policy=T.GemmWarpPolicy.FullRow,
                             clear_accum=True)
                if pingpong:
                    T.named_barrier_arrive(6 - wg, 256)
                T.wait_wgmma(0)
                T.barrier_arrive(k_empty[0])
                # softmax of key block 0
                if causal:
                    if nk == 1:
                        for i, j in T.Parallel(bm, bn):
                            acc_S[i, j] = T.if_then_else(i >= j, acc_S[i, j], -T.infinity(f32))
                for i in T.Parallel(bm):
                    m_prev[i] = m[i]
                T.reduce_max(acc_S, m, dim=1, clear=False)
                for i, j in T.Parallel(bm, bn):
                    acc_S[i, j] = p_of(acc_S[i, j], m[i])
                for i in T.Parallel(bm):
                    alpha[i] = alpha_of(m_prev[i], m[i])
                for i in T.Parallel(bm):
                    l[i] = l[i] * alpha[i]
                T.reduce_sum(acc_S, l, dim=1, clear=False)
                T.copy(acc_S, P_f)
                for k in T.serial(1, nk):
                    T.barrier_wait(k_full[k % stages], (k // stages) % 2)
                    if pingpong:
                        T.sync_threads(5 + wg, 256)
                    T.wgmma_gemm(Q_s, K_s[k % stages, :, :], acc_S, transpose_B=True,
                                 policy=T.GemmWarpPolicy.FullRow, clear_accum=True)
                    # U follows the running maximum: rescale it to the maximum P of block k-1 was formed with
                    for i in T.Parallel(bm):
                        alpha[i] = alpha_of(ref_U[i], m[i])
                    for i, j in T.Parallel(bm, D):
                        acc_U[i, j] = acc_U[i, j] * alpha[i]
                    for i in T.Parallel(bm):
                        ref_U[i] = m[i]
                    T.barrier_wait(v_full[(k - 1) % stages], ((k - 1) // stages) % 2)
                    T.wgmma_gemm(P_f, V_s[(k - 1) % stages, :, :], acc_U, policy=T.GemmWarpPolicy.FullRow)
                    if pingpong:
                        T.named_barrier_arrive(6 - wg, 256)
                    if overlap:
                        T.wait_wgmma(1)
                    else:
                        T.wait_wgmma(0)
                    T.barrier_arrive(k_empty[k % stages])
                    if causal:
                        if k == nk - 1:
                            for i, j in T.Parallel(bm, bn):
                                acc_S[i, j] = T.if_then_else(i >= j, acc_S[i, j], -T.infinity(f32))
                    for i in T.Parallel(bm):
                        m_prev[i] = m[i]
                    T.reduce_max(acc_S, m, dim=1, clear=False)
                    for i, j in T.Parallel(bm, bn):
                        acc_S[i, j] = p_of(acc_S[i, j], m[i])
                    for i in T.Parallel(bm):
                        alpha[i] = alpha_of(m_prev[i], m[i])
                    for i in T.Parallel(bm):
                        l[i] = l[i] * alpha[i]
                    T.reduce_sum(acc_S, l, dim=1, clear=False)
                    T.wait_wgmma(0)
                    T.barrier_arrive(v_empty[(k - 1) % stages])
                    T.copy(acc_S, P_f)
                # the last block's P·V
                for i in T.Parallel(bm):
                    alpha[i] = alpha_of(ref_U[i], m[i])
                for i, j in T.Parallel(bm, D):
                    acc_U[i, j] = acc_U[i, j] * alpha[i]
                T.barrier_wait(v_full[(nk - 1) % stages], ((nk - 1) // stages) % 2)
                if pingpong:
                    T.sync_threads(5 + wg, 256)
                T.wgmma_gemm(P_f, V_s[(nk - 1) % stages, :, :], acc_U, policy=T.GemmWarpPolicy.FullRow)
                if pingpong:
                    T.named_barrier_arrive(6 - wg, 256)
                T.wait_wgmma(0)
                for i, j in T.Parallel(bm, D):
                    O[b, h, bx * bm + i, j] = T.Cast(bf16, acc_U[i, j] / l[i])

    return main


def flash_pipelined(B, H, L, causal, bm=128, bn=128, stages=2, D=128, arith="tdsl"):
    """The generated kernel's arrangement (T.Pipelined over key blocks, 256 threads, TileLang's own producer
    warp group for the copies, each T.gemm waited at once), with the arithmetic of `arithmetic(arith)`."""
    import tilelang.language as T

    nq = (L + bm - 1) // bm
    bf16, f32 = "bfloat16", "float32"
    p_of, alpha_of = arithmetic(arith)

    @T.prim_func
    def main(Q: T.Tensor((B, H, L, D), bf16), K: T.Tensor((B, H, L, D), bf16), V: T.Tensor((B, H, L, D), bf16),
             O: T.Tensor((B, H, L, D), bf16)):
        with T.Kernel(nq, B * H, threads=256) as (bx, by):
            T.import_source(EX2)
            Q_s = T.alloc_shared((bm, D), bf16)
            K_s = T.alloc_shared((bn, D), bf16)
            V_s = T.alloc_shared((bn, D), bf16)
            acc_S = T.alloc_fragment((bm, bn), f32)
            P_f = T.alloc_fragment((bm, bn), bf16)
            acc_U = T.alloc_fragment((bm, D), f32)
            m = T.alloc_fragment((bm,), f32)
            m_prev = T.alloc_fragment((bm,), f32)
            alpha = T.alloc_fragment((bm,), f32)
            l = T.alloc_fragment((bm,), f32)
            b = by // H
            h = by % H
            nk = (bx + 1) if causal else (L // bn)
            T.fill(m, -T.infinity(f32))
            T.fill(l, 0.0)
            T.fill(acc_U, 0.0)
            T.copy(Q[b, h, bx * bm:(bx + 1) * bm, :], Q_s)
            for k in T.Pipelined(nk, num_stages=stages):
                T.copy(K[b, h, k * bn:(k + 1) * bn, :], K_s)
                T.gemm(Q_s, K_s, acc_S, transpose_B=True, policy=T.GemmWarpPolicy.FullRow, clear_accum=True)
                if causal:
                    if k == nk - 1:
                        for i, j in T.Parallel(bm, bn):
                            acc_S[i, j] = T.if_then_else(i >= j, acc_S[i, j], -T.infinity(f32))
                for i in T.Parallel(bm):
                    m_prev[i] = m[i]
                T.reduce_max(acc_S, m, dim=1, clear=False)
                for i, j in T.Parallel(bm, bn):
                    acc_S[i, j] = p_of(acc_S[i, j], m[i])
                for i in T.Parallel(bm):
                    alpha[i] = alpha_of(m_prev[i], m[i])
                for i in T.Parallel(bm):
                    l[i] = l[i] * alpha[i]
                T.reduce_sum(acc_S, l, dim=1, clear=False)
                for i, j in T.Parallel(bm, D):
                    acc_U[i, j] = acc_U[i, j] * alpha[i]
                T.copy(acc_S, P_f)
                T.copy(V[b, h, k * bn:(k + 1) * bn, :], V_s)
                T.gemm(P_f, V_s, acc_U, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(bm, D):
                O[b, h, bx * bm + i, j] = T.Cast(bf16, acc_U[i, j] / l[i])

    return main


# The roles synchronise through their mbarriers only; TileLang's automatic __syncthreads() between the producer's
# block and the consumers' (it sees Q_s, K_s, V_s written in one and read in the other) would deadlock the ring
PASS_CONFIGS = {"tl.disable_thread_storage_sync": True}


def configs(kw):
    return PASS_CONFIGS if kw.get("kernel", "ws") == "ws" else {}


def build(b, h, n, causal, kw):
    kw = dict(kw)
    return (flash_ws if kw.pop("kernel", "ws") == "ws" else flash_pipelined)(b, h, n, causal, **kw)


# Runs 1 and 2 (benchmarks/gpu/results/2026-12-02-flash-ws-run{1,2}.json): stages 3, no intra-group overlap,
# pingpong and heavy-first launch order gained nothing or lost; FlashAttention's arithmetic (then with nvcc's
# fast math) gained ~30 %
VARIANTS = {
    "ws_s2": dict(),
    "ws_s2_tdsl_ex2": dict(arith="tdsl_ex2"),
    "ws_s2_fa_sum": dict(arith="fa_sum"),
    "ws_s2_fa": dict(arith="fa"),
    "pipe_s2": dict(kernel="pipe"),
    "pipe_s2_fa": dict(kernel="pipe", arith="fa"),
}


def lower():
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    import tilelang
    from tilelang import tvm
    from tilelang.backend.target import determine_target

    target = determine_target({"kind": "cuda", "arch": "sm_90a"}, return_object=True)
    for name, kw in VARIANTS.items():
        for causal in (False, True):
            fn = build(2, 3, 1024, causal, kw)
            with tvm.transform.PassContext(opt_level=3, config=configs(kw)), target:
                src = tilelang.lower(fn, target=target).kernel_source
            Path(f"/tmp/flash_ws_{name}_{'causal' if causal else 'full'}.cu").write_text(src)
            print(name, causal, len(src), "chars of CUDA")


def run(out):
    import torch, triton, tilelang, torch.nn.functional as F
    rows = []
    for b, h, n in RAGGED_CHECK + SHAPES:
        torch.manual_seed(0)
        q, k, v = (torch.randn(b, h, n, 128, device="cuda").to(torch.bfloat16) for _ in range(3))
        for causal in (False, True):
            flops = 4 * b * h * n * n * 128 * (0.5 if causal else 1.0)
            small = (b, h, n) in RAGGED_CHECK
            ref = (F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal, scale=SCALE)
                   if small else F.scaled_dot_product_attention(q, k, v, is_causal=causal)).float()
            sdpa = triton.testing.do_bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
            for name, kw in VARIANTS.items():
                row = {"shape": [b, h, n], "causal": causal, "variant": name, "sdpa_us": sdpa * 1e3}
                try:
                    t0 = time.time()
                    kern = tilelang.compile(build(b, h, n, causal, kw), target="cuda", pass_configs=configs(kw))
                    row["compile_s"] = round(time.time() - t0, 1)
                    o = torch.full((b, h, n, 128), float("nan"), device="cuda", dtype=torch.bfloat16)
                    kern(q, k, v, o)
                    torch.cuda.synchronize()
                    row["max_err"] = (o.float() - ref).abs().max().item()
                    if not small:
                        t = triton.testing.do_bench(lambda: kern(q, k, v, o))
                        row.update(us=t * 1e3, tflops=flops / t / 1e9, vs_sdpa=sdpa / t)
                except Exception as e:  # noqa: BLE001 -- an experiment: record and go on
                    row["error"] = f"{type(e).__name__}: {str(e)[-600:]}"
                print(json.dumps(row), flush=True)
                rows.append(row)
    json.dump({"date": time.strftime("%Y-%m-%d %H:%M"), "rows": rows}, open(out, "w"), indent=1)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["lower", "run"])
    ap.add_argument("--out")
    a = ap.parse_args()
    lower() if a.cmd == "lower" else run(a.out)
