"""The TileLang backend for NVIDIA: every legal schedule of every example compiles to a TileLang module whose
kernels lower with `tilelang.lower` for sm_90a (TMA + wgmma for the matrix kernels), its text matches the golden
file, and one kernel goes through nvcc to a cubin where nvcc exists.  Numerics need a GPU: benchmarks/gpu/
run_tilelang.py on the H200."""

import os
import shutil
import subprocess
import re

import pytest

from catalog import CHAPTER_SIZES, EXAMPLES, EXPECTED, LEGAL, LEGAL_IDS, REFUSED, ROOT, padded_tile_gemm, size_flags

os.environ.setdefault("TILELANG_CACHE_DIR", str(ROOT / ".cache" / "tilelang"))
tilelang = pytest.importorskip("tilelang")

from tdsl.backends.tilelang.lowering import compile_cubin, dynamic_shared_bytes, lower_kernels, lower_module  # noqa: E402
from tdsl.compiler.analysis.buffer_plan import plan_kernels  # noqa: E402
from tdsl.compiler.analysis.buffer_sharing import working_sets  # noqa: E402
from tdsl.compiler.analysis.cost.backend_rules import padded_bytes  # noqa: E402
from tdsl.compiler.analysis.cost.staging import as_generated  # noqa: E402
from tdsl.compiler.targets import get_target  # noqa: E402
from tdsl.compiler.driver.api import load, loads  # noqa: E402
from tdsl.compiler.driver.generate import generate, load_module  # noqa: E402
from tdsl.compiler.errors import BackendError  # noqa: E402


@pytest.fixture(scope="module")
def modules(tmp_path_factory):
    out = tmp_path_factory.mktemp("tilelang")
    cache = {}

    def get(example, name):
        if (example, name) not in cache:
            text = generate(load(EXAMPLES / f"{example}.tdsl", sizes=CHAPTER_SIZES.get(example)), name, target="nvidia", backend="tilelang")
            cache[example, name] = (text, load_module(text, out / f"{example}__{name}.py"))
        return cache[example, name]

    return get


@pytest.mark.parametrize("example,name", LEGAL, ids=LEGAL_IDS)
def test_every_legal_schedule_lowers_for_sm90a(example, name, modules, golden):
    if (example, name, "tilelang") in REFUSED:
        prog = load(EXAMPLES / f"{example}.tdsl", sizes=CHAPTER_SIZES.get(example))
        with pytest.raises(BackendError, match=re.escape(REFUSED[example, name, "tilelang"])):
            generate(prog, name, target="nvidia", backend="tilelang")
        return
    text, module = modules(example, name)
    golden(text, suffix=".py")
    artifacts = lower_kernels(module, "sm_90a")
    assert set(artifacts) == set(module.KERNELS)
    planned = _shared_as_generated(example, name)
    for kernel, artifact in artifacts.items():
        assert f"{kernel}_kernel" in artifact.kernel_source and "__global__" in artifact.kernel_source
        # the shared memory TileLang asks for is the cost model's plan with the printer's operand copies
        # (compiler/analysis/cost/staging.py); a cross-warp reduction adds TileLang's own 512-byte workspace
        shared, expected = dynamic_shared_bytes(artifact), planned[kernel]
        expected = TILELANG_SHARED_APART.get((example, name, kernel), expected)
        assert shared - expected in (0, REDUCTION_WORKSPACE), f"{kernel}: TileLang {shared} B, the cost model {expected} B"


REDUCTION_WORKSPACE = 512
# Where TileLang's shared memory is not the cost model's, with its bytes:
TILELANG_SHARED_APART = {
    # 64-row tiles on 8 warps leave T.gemm no warp partition (placement.MATRIX_UNITS), so both products run on the
    # vector units and the printer copies the register operand P into shared memory for the FMA loop (P_s_<n>,
    # 8 KiB; placement.REGISTER_STAGING).  The cost model, which has no warp partition, puts the bf16 P·V on the
    # tensor cores, which read P from registers.
    **{(example, "flash_ascend", f"{example}_0"): 122880 for example in ("mha", "mha_causal", "mha_fa")},
}


def _shared_as_generated(example, name) -> dict:
    """kernel -> the shared bytes of the cost model's plan as the TileLang printer generates it."""
    sched = load(EXAMPLES / f"{example}.tdsl", sizes=CHAPTER_SIZES.get(example)).schedule(name)
    tgt = get_target("h100")
    return {kp.name: as_generated(sched.model, kp, tgt, "tilelang").working_set.get("shared", 0)
            for kp in plan_kernels(sched, tgt)}


# PolyBench ports whose kernels the cost model's copies once missed: a tensor multiplied by itself (covariance's
# D[k, i] * D[k, j], two 100 x 16 copies allocated at 128 x 16), a product too small for a Dot (doitgen, one row a
# program: no copy), products of cache_read tiles (3mm)
PORTS_SHARED = [("datamining/covariance", "tiled", None), ("datamining/correlation", "tiled", None),
                ("kernels/doitgen", "tiled", None), ("kernels/k3mm", "tiled", None)]


@pytest.mark.parametrize("port,name,sizes", PORTS_SHARED, ids=[p[0].split("/")[1] for p in PORTS_SHARED])
def test_polybench_kernels_ask_for_the_shared_memory_the_cost_model_plans(port, name, sizes, tmp_path):
    """The shared bytes TileLang asks for are the cost model's plan as generated, every tile padded to its lanes."""
    prog = load(ROOT / "benchmarks" / "polybench" / f"{port}.tdsl", sizes=sizes)
    module = load_module(generate(prog, name, target="nvidia", backend="tilelang"), tmp_path / "port.py")
    sched, tgt = prog.schedule(name), get_target("h100")
    for kp in plan_kernels(sched, tgt):
        generated = as_generated(sched.model, kp, tgt, "tilelang")
        planned = working_sets(generated.buffers, generated.slots, len(kp.stmts), padded_bytes)[0].get("shared", 0)
        shared = dynamic_shared_bytes(lower_kernels(module, "sm_90a", names=[kp.name])[kp.name])
        assert shared - planned in (0, REDUCTION_WORKSPACE), \
            f"{kp.name}: TileLang {shared} B, the cost model {planned} B"


def test_chapter_gemm_silu_uses_shared_fragment_pipeline_and_wgmma(modules):
    text, module = modules("gemm_silu", "fused")
    for line in ('A_s_1 = T.alloc_shared((64, 32), "bfloat16")  # cache_read A -> shared at ko (plan [64, 32] bf16)',
                 'acc_C = T.alloc_fragment((64, 64), "float32")  # cache_write C -> register',
                 "for ko in T.Pipelined(0, 128, num_stages=3):",
                 "T.copy(A[(64 * io), (32 * ko)], A_s_1)",
                 "T.gemm(A_s_1, W_s_2, acc_C)",
                 "with T.Kernel(16, 192, threads=128) as (bx, by):",
                 'acc_C[l0, l1] = T.Cast("float32", T.Cast("bfloat16", acc_C[l0, l1]))'):
        assert line in text, line
    src = lower_module(module, "sm_90a")["gemm_silu_0"]
    assert "wgmma" in src and "tma_load" in src  # Hopper: TMA copies into shared memory, wgmma from it


def test_reductions_are_tile_reduces_and_elementwise_tiles_are_parallel(modules):
    text, _ = modules("softmax", "row_fused")
    # a max reduces the terms' ordered keys (a NaN term wins) and combines them with the NaN-keeping max
    assert "T.reduce_max(k_m, r_m_1, dim=0, clear=True)" in text
    # (the hardware's max.NaN: no use can tell the zero of softmax's row maximum, compiler/analysis/zero_signs.py)
    assert 'acc_m[0] = T.call_extern("float32", "tdsl_max_either", acc_m[0], T.call_extern("float32", "tdsl_from_key", r_m_1[0]))' in text
    assert "T.reduce_sum(p_s, acc_s, dim=0, clear=False)" in text
    assert "for l0 in T.Parallel(4096):" in text


def test_f32_and_mixed_operands_use_exact_multiply_add(modules):
    text, _ = modules("attention", "unfused")
    assert "T.gemm(Q_s_1, K_s_2, acc_S, transpose_B=True)" in text  # bf16 x bf16: tensor cores
    assert "for kk in T.serial(64):" in text  # P (f32) x V (bf16): no tf32 rounding


def _flash(example: str, sizes: dict, variant: str = "", block: tuple = (128, 128), warps: int = 8) -> str:
    """The TileLang module of an example's flash schedule at `sizes` (another block and warps: a variant)."""
    text = (EXAMPLES / f"{example}.tdsl").read_text()
    if variant:
        body = re.search(r"schedule flash \{\n(.*?)\n\}", text, re.S).group(1)
        body = body.replace("split(l.i, 128)", f"split(l.i, {block[0]})").replace("split(l.j, 128)", f"split(l.j, {block[1]})")
        text += f"\nschedule {variant} {{\n{body.replace('warps=8', f'warps={warps}')}\n}}\n"
    return generate(loads(text, filename=f"{example}.tdsl", sizes=sizes), variant or "flash", target="nvidia",
                    backend="tilelang")


@pytest.mark.parametrize("example", ["mha", "mha_causal"])
def test_flash_attention_is_one_kernel_with_the_running_state_in_fragments(example, tmp_path):
    """The online softmax in TileLang: both products on T.gemm (P from a bf16 fragment, every warp owning whole
    rows), the statistics and their rescaling in fragments, Q copied once, only Q, K, V and O in global memory,
    the masked rest of the key loop (diagonal blocks, the ragged end) not pipelined; and it lowers for sm_90a
    at a ragged length with the staging buffers of one pipelined loop (3 x 32 KB for K and V, 32 KB for Q)."""
    text = _flash(example, {"B": 1, "H": 2, "L": 1000})
    assert "def mha" in text and text.count("T.Tensor(") == 4  # Q, K, V, O: no global temporaries
    assert "T.gemm(Q_pre, K_s_1, acc_S, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)" in text
    assert re.search(r'P_f_\d+ = T\.alloc_fragment\(\(128, 128\), "bfloat16"\)', text)
    assert re.search(r"T.gemm\(P_f_\d+, V_s_\d+, acc_U, policy=T.GemmWarpPolicy.FullRow\)", text)
    assert "T.fill(ref_U, -T.infinity(\"float32\"))" in text
    assert re.search(r"acc_U\[l0, l1\] = acc_U\[l0, l1\] \* alpha_U_\d+\[l0\]", text)
    assert "T.copy(Q[" in text and "for ko in T.Pipelined(" in text and "num_stages=3" in text
    assert re.search(r"for ko in T.serial\(", text)  # the rest: no second pipeline
    module = load_module(text, tmp_path / f"{example}.py")
    src = lower_module(module, "sm_90a")[f"{example}_0"]
    assert src.count("wgmma") > 0
    offsets = {int(x) for x in re.findall(r"buf_dyn_shmem \+ (\d+)", src)}
    assert max(offsets) <= 131072  # Q at 0, K at 32 KB, V at 128 KB: 224 KB in all


def test_flash_attention_with_too_few_rows_per_warp_multiplies_on_the_vector_units(tmp_path):
    """With rows split among warps, each warp needs 16 rows of the product tile: a 64-row tile over 8 warps
    cannot, and its products are the exact f32 multiply-add loop instead (placement decides, not the printer);
    P then goes through shared memory, where every lane can read its row."""
    text = _flash("mha", {"B": 1, "H": 1, "L": 200}, "flash_m64_w8", block=(64, 64), warps=8)
    assert "T.gemm(" not in text and "for kk in T.serial(" in text
    assert re.search(r'P_s_\d+ = T\.alloc_shared\(\(64, 64\), "bfloat16"\)', text)
    assert "mha_0" in lower_module(load_module(text, tmp_path / "m64.py"), "sm_90a")
    assert _flash("mha", {"B": 1, "H": 1, "L": 200}, "flash_m64_w4", block=(64, 64), warps=4).count("T.gemm(") == 4


def _flash_ws(example: str, sizes: dict, edit=None) -> str:
    """The TileLang module of an example's flash_ws schedule (pipeline warp_specialize=true) at `sizes`; `edit`
    rewrites the schedule's text first (a variant the backend refuses)."""
    text = (EXAMPLES / f"{example}.tdsl").read_text()
    if edit is not None:
        body = re.search(r"schedule flash_ws \{\n(.*?)\n\}", text, re.S).group(1)
        text += f"\nschedule variant {{\n{edit(body)}\n}}\n"
    return generate(loads(text, filename=f"{example}.tdsl", sizes=sizes), "variant" if edit else "flash_ws",
                    target="nvidia", backend="tilelang")


@pytest.mark.parametrize("length", [4096, 1000], ids=["aligned", "ragged"])
@pytest.mark.parametrize("example", ["mha", "mha_causal"])
def test_warp_specialized_flash_attention_lowers_for_sm90a(example, length, tmp_path):
    """FlashAttention-3's arrangement (backends/tilelang/warp_specialized.py): a producer warp group loading Q once
    and K, V into a 2-slot ring through TMA, two consumer warp groups issuing QKᵀ of block ko before P·V of block
    ko - 1 and waiting for QKᵀ only; compiled without TileLang's automatic __syncthreads between the roles.  A key
    loop split at its masked blocks (causal: the diagonal; ragged: the partial last block) is one loop for the
    producer, and the consumers take the masked forms under `if ko < split`."""
    text = _flash_ws(example, {"B": 2, "H": 2, "L": length})
    for line in ("with T.Kernel(", "threads=384) as (bx, by):", "with T.ws(2):", "T.dec_max_nreg(24)",
                 "with T.ws(0, 1):", "T.inc_max_nreg(240)",
                 'K_ring = T.alloc_shared((2, 128, 128), "bfloat16")', "T.alloc_barrier(arrive_count=[256, 256])",
                 "T.tma_copy(Q[bh_0, bh_1, (128 * qo):(128 * qo) + 128, 0:128], Q_ws, barrier=Q_full)",
                 "T.barrier_wait(K_empty[ko % 2], (ko // 2) % 2 ^ 1)",
                 "T.wgmma_gemm(Q_ws, K_ring[ko % 2, :, :], acc_S, transpose_B=True, "
                 "policy=T.GemmWarpPolicy.FullRow, clear_accum=True)",
                 "T.wgmma_gemm(P_f_4, V_ring[(ko - 1) % 2, :, :], acc_U, policy=T.GemmWarpPolicy.FullRow)",
                 "T.wait_wgmma(1)", "T.barrier_arrive(V_empty[(ko - 1) % 2])",
                 "PASS_CONFIGS = {'" + f"{example}_0': {{'tl.device_compile_flags': ['--fmad=false'], "
                 "'tl.disable_thread_storage_sync': True}}",
                 "pass_configs=PASS_CONFIGS.get(name, {})"):
        assert line in text, line
    assert "T.Pipelined(" not in text and "T.copy(K[" not in text and "T.sync_threads()" not in text
    split = length % 128 or example == "mha_causal"
    assert ("if ko < " in text) == bool(split)  # the masked forms of the split loop's rest
    module = load_module(text, tmp_path / f"{example}_{length}.py")
    src = lower_module(module, "sm_90a")[f"{example}_0"]
    assert "wait_wgmma<1>" in src and "tma_load" in src and src.count("__syncthreads") == 1  # after barrier init


def _persistent(body: str) -> str:
    return body.replace("launch(l, warps=8)", "launch(l, warps=8, persistent=true)")


def test_persistent_warp_specialized_kernel_walks_its_tiles(tmp_path):
    """`launch(persistent=true)` with a warp-specialised loop (warp_specialized.PersistentWalk): one program per
    multiprocessor, each role walking the same tiles; the ring's slots and phases run on across tiles (counted in
    `walked`), Q gets an empty barrier, and every slot a tile fills is freed again, the last block's too (without
    that the next tile's producer waits for ever: found on the H200)."""
    text = _flash_ws("mha_causal", {"B": 2, "H": 3, "L": 1000}, _persistent)
    for line in ("mha_causal_0(Q: T.Tensor((2, 3, 1000, 128), \"bfloat16\"), K: ", "programs: T.int32):",
                 "with T.Kernel(T.min((2) * (3) * (8), programs), threads=384) as (pid,):",
                 "for tile in T.serial(pid, (2) * (3) * (8), T.min((2) * (3) * (8), programs)):",
                 "qo = (tile % ((8)))  # grid.x", "bh_1 = 0 + ((tile // ((8))) // (1)) % (3)  # grid.y",
                 "T.barrier_wait(Q_empty, walked[0] % 2 ^ 1)", "T.barrier_wait(Q_full, walked[0] % 2)",
                 "T.barrier_arrive(Q_empty)",
                 "T.barrier_wait(K_empty[(walked[1] + ko) % 2], ((walked[1] + ko) // 2) % 2 ^ 1)",
                 "T.barrier_wait(K_full[walked[1] % 2], (walked[1] // 2) % 2)",
                 "T.barrier_arrive(V_empty[(walked[1] + (ko - 1)) % 2])",
                 "T.barrier_arrive(V_empty[(walked[1] + ((qo + 1) - 1)) % 2])",  # the last block's slot
                 "walked[1] = walked[1] + (qo + 1)",
                 "_kernel(\"mha_causal_0\")(Q, K, V, O, _programs(Q))",
                 "return torch.cuda.get_device_properties(tensor.device).multi_processor_count"):
        assert line in text, line
    assert text.count("for tile in T.serial(") == 2 and text.count("walked[0] = walked[0] + 1") == 2
    module = load_module(text, tmp_path / "persistent.py")
    src = lower_module(module, "sm_90a")["mha_causal_0"]
    assert "int programs" in src and "Q_empty[0].arrive()" in src


def test_persistent_warp_specialized_kernel_in_groups_is_refused():
    with pytest.raises(BackendError, match=re.escape("launch(group=...) with persistent=true is not generated for a "
                                                     "warp-specialised TileLang loop")):
        _flash_ws("mha", {"B": 2, "H": 2, "L": 4096},
                  lambda s: s.replace("launch(l, warps=8)", "launch(l, warps=8, group=4, persistent=true)"))


def test_warp_specialized_kernels_elsewhere_run_the_pipelined_loop():
    """Triton prints the flash kernel with its key loop pipelined over the stages; the loop's comment says that
    the arrangement is TileLang's."""
    prog = load(EXAMPLES / "mha.tdsl", sizes={"L": 4096})
    text = generate(prog, "flash_ws", target="nvidia", backend="triton")
    assert "num_stages=2" in text and "warp_specialize=true (TileLang's arrangement" in text


@pytest.mark.parametrize("edit,refusal", [
    (lambda s: s.replace("warps=8", "warps=16"), "the kernel runs 16 warps; launch it with warps=4 or warps=8"),
    (lambda s: s.replace("split(l.i, 128)", "split(l.i, 64)"), "the product of S is not on the tensor cores"),
    # 294,912 B: refused as every kernel that does not fit as generated is (backend_rules.generated_overflow)
    (lambda s: s.replace("stages=2", "stages=4"), "(Q 1x1x128x128 x1, K 1x1x128x128 x4, V 1x1x128x128 x4): 288 KiB "
                                                  "per block, but h100 has 227 KiB"),
], ids=["warps", "rows", "stages"])
def test_warp_specialized_loops_of_another_form_are_refused(edit, refusal):
    from tdsl.compiler.analysis.buffer_records import CapacityError

    with pytest.raises((BackendError, CapacityError), match=re.escape(refusal)):
        _flash_ws("mha", {"B": 2, "H": 2, "L": 4096}, edit)


def test_warp_specialized_loop_with_tiles_too_small_for_the_tensor_cores_is_refused():
    """At L = 30 every tile shrinks to 32 rows, and the products go to the exact FMA path: no arrangement."""
    with pytest.raises(BackendError, match=r"loop ko is warp-specialised \(pipeline\(\.\.\., warp_specialize=true\)\) "
                                           r"but the product of S is not on the tensor cores"):
        _flash_ws("mha", {"B": 1, "H": 2, "L": 30})


@pytest.mark.skipif(shutil.which("nvcc") is None and not os.environ.get("CUDA_HOME"), reason="no nvcc here")
def test_warp_specialized_causal_kernel_compiles_to_a_cubin_with_nvcc(tmp_path):
    module = load_module(_flash_ws("mha_causal", {"B": 1, "H": 2, "L": 1000}), tmp_path / "ws.py")
    kernel = compile_cubin(module, "mha_causal_0")
    assert "mha_causal_0_kernel" in kernel.get_kernel_source()


def test_launcher_checks_its_arguments_before_compiling(modules):
    import torch

    _, module = modules("gemm_silu", "fused")
    a = torch.zeros(1024, 4096, dtype=torch.float32)
    w = torch.zeros(4096, 12288, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="A must have dtype torch.bfloat16"):
        module.gemm_silu(a, w)


@pytest.mark.skipif(shutil.which("nvcc") is None and not os.environ.get("CUDA_HOME"), reason="no nvcc here")
def test_gemm_silu_compiles_to_a_cubin_with_nvcc(modules):
    _, module = modules("gemm_silu", "fused")
    kernel = compile_cubin(module, "gemm_silu_0")
    assert "gemm_silu_0_kernel" in kernel.get_kernel_source()


def test_a_grid_with_a_gap_is_a_clear_error():
    text = """
const M = 64, N = 64
kernel k(X: f32[M, N]) -> (Y: f32[M, N]) {
  Y[i, j] = X[i, j] * 2.0
}
schedule only_y {
  io, ii = split(Y.i, 16)
  bind(Y.io, grid.y)
}
"""
    with pytest.raises(BackendError, match=r"grid axes y leave a gap; TileLang's T.Kernel takes x, y, z in order"):
        generate(loads(text), "only_y", target="nvidia", backend="tilelang")


def test_cli_compiles_every_example_for_the_tilelang_backend(tmp_path, capsys):
    from tdsl.compiler.driver.cli import main

    for example in EXPECTED:
        if (example, next(iter(EXPECTED[example])), "tilelang") in REFUSED:
            continue  # its first schedule is refused by this backend (tests above check the message)
        out = tmp_path / f"{example}.py"
        code = main(["compile", str(EXAMPLES / f"{example}.tdsl"), "--target", "nvidia", "--backend", "tilelang",
                     "-o", str(out), *size_flags(example)])
        printed = capsys.readouterr()
        assert code == 0, printed.err
        assert "target nvidia" in printed.out and out.exists()


FP8_PRODUCT = """const M = 256, K = 256, N = 128
kernel q(Aq: f8e4m3[M, K], Wt: f8e4m3[N, K]) -> (P: bf16[M, N]) {{
  P[i, j] = sum(k) Aq[i, k] * Wt[j, k] accum f32{combine}
}}
schedule s {{
  io, jo, ii, jj = tile(P.i, P.j, 128, 128)
  ko, kk = split(P.k, {k})
  reorder(P, io, jo, ko, ii, jj, kk)
  cache_read(Aq, shared, at=P.ko)
  cache_read(Wt, shared, at=P.ko)
  pipeline(P.ko, stages=2)
  launch(P, warps=8)
}}
"""


@pytest.mark.parametrize("combine,k,gemms", [
    ("", 64, ["T.gemm(Aq_s_1[0:128, 0:32], Wt_s_2[0:128, 0:32], part_P, transpose_B=True, clear_accum=True)",
              "T.gemm(Aq_s_1[0:128, 32:64], Wt_s_2[0:128, 32:64], part_P, transpose_B=True, clear_accum=True)"]),
    (" combine fast_accum(64)", 128, [
        "T.gemm(Aq_s_1[0:128, 0:64], Wt_s_2[0:128, 0:64], part_P, transpose_B=True, clear_accum=True)",
        "T.gemm(Aq_s_1[0:128, 64:128], Wt_s_2[0:128, 64:128], part_P, transpose_B=True, clear_accum=True)"]),
    (" combine fast_accum(128)", 64, ["T.gemm(Aq_s_1, Wt_s_2, part_P, transpose_B=True, clear_accum=True)"]),
    (" combine fast_accum", 128, ["T.gemm(Aq_s_1, Wt_s_2, acc_P, transpose_B=True)"]),
])
def test_fp8_products_reach_the_f32_sum_as_the_program_declares(combine, k, gemms, tmp_path):
    """T.gemm into one fragment keeps FP8 products in the tensor core's reduced-precision accumulator for the
    whole loop: only `combine fast_accum` allows that.  Otherwise each step of at most the declared number of terms
    (one instruction's 32 without a declaration) goes to a cleared fragment and is added to the f32 sum."""
    text = generate(loads(FP8_PRODUCT.format(combine=combine, k=k)), "s", target="h200", backend="tilelang")
    printed = [line.strip() for line in text.splitlines() if "T.gemm(" in line]
    assert printed == gemms
    adds = text.count("acc_P[l0, l1] = acc_P[l0, l1] + part_P[l0, l1]")
    assert adds == (0 if combine == " combine fast_accum" else len(gemms))
    sources = lower_module(load_module(text, tmp_path / "fp8.py"), "sm_90a")
    assert all("wgmma" in src for src in sources.values())


def test_a_tile_of_lanes_past_its_extent_lowers(tmp_path):
    """A 48 × 96 tile gets 64 × 128 lanes (compiler/lower/tile_rules.py): the shared boxes are the lanes, the
    copies zero the lanes past the tile along k, and the store writes the tile's 96 columns only."""
    prog = loads(padded_tile_gemm(128, 144, 192))
    text = generate(prog, "s", target="h200", backend="tilelang")
    assert 'B_s_2 = T.alloc_shared((64, 128), "bfloat16")  # cache_read B -> shared at ko (plan [48, 96] bf16)' in text
    assert ('A_s_1[l0, l1] = T.if_then_else((((48 * ko) + 47) >= ((48 * ko) + l1)), '
            'A[((64 * io) + l0), ((48 * ko) + l1)], T.cast(0, "bfloat16"))') in text
    assert "if (((96 * jo) + 95) >= ((96 * jo) + l1)):" in text
    lower_module(load_module(text, tmp_path / "padded.py"), "sm_90a")


def test_a_kernel_that_reads_back_its_stores_declares_no_restrict_pointer(tmp_path):
    """trmm's recurrence Bs[i, j, k] = where(k == i + 1, B_in[i, j], Bs[i, j, k - 1]) + ...: with __restrict__
    parameters nvcc made the `where` one load from a selected pointer (B_in or Bs) through the read-only cache
    (ld.global.nc), which does not see the kernel's own stores, and the H200 read Bs's initial values
    (tests/fuzz/findings/tilelang-read-only-cache-load-of-a-stored-tensor.json).  A kernel that reads back what
    it stores names every parameter in T.annotate_restrict_buffers; the others keep __restrict__."""
    text = generate(loads((ROOT / "benchmarks" / "polybench" / "blas" / "trmm.tdsl").read_text(encoding="utf-8"),
                          sizes={"M": 17, "N": 4}), None, target="h200", backend="tilelang")
    sources = lower_module(load_module(text, tmp_path / "trmm.py"), "sm_90a")
    recurrence = next(src for src in sources.values() if "tdsl_reload(" in src and "__global__" in src)
    assert "__restrict__" not in recurrence
    assert any("__restrict__" in src for src in sources.values() if "tdsl_reload(" not in src)
    if shutil.which("nvcc"):  # the load itself, where nvcc is at hand
        cu = tmp_path / "trmm_0.cu"
        cu.write_text("\n".join(line for line in recurrence.splitlines() if "tl_templates" not in line))
        subprocess.run(["nvcc", "-arch=sm_90a", "-O3", "-ptx", str(cu), "-o", str(tmp_path / "trmm_0.ptx")], check=True)
        assert "ld.global.nc" not in (tmp_path / "trmm_0.ptx").read_text()


def test_loads_after_a_barrier_stay_after_it(tmp_path):
    """A value one thread stores and the others read back after the barrier (attention's row maximum m, computed in
    the key loop's first iteration): TVM declares every pointer parameter __restrict__, and nvcc moved the others'
    load of m above the barrier on the H200 (tests/fuzz/findings/load-of-a-value-another-thread-stored-moved-above-
    the-barrier.json).  Each barrier is followed by an asm that takes the pointer of every tensor the kernel stores."""
    text = generate(loads((EXAMPLES / "attention.tdsl").read_text() + """
schedule read_back {
  compute_at(m, P.j)
  reverse_compute_at(U, P.j)
}
""", sizes={"L": 5, "D": 17}), "read_back", target="h200", backend="tilelang")
    barriers = [line.strip() for line in text.splitlines() if "T.sync_threads()" in line]
    assert barriers and all('T.call_extern("handle", "tdsl_reload", m.data)' in line for line in barriers)
    sources = lower_module(load_module(text, tmp_path / "read_back.py"), "sm_90a").values()
    synced = [src for src in sources if "__syncthreads();" in src]
    assert synced and all(part.lstrip().startswith("tdsl_reload(")
                          for src in synced for part in src.split("__syncthreads();")[1:])


NAN_KEEPING = """
const M = 5, K = 7
kernel k(X: f32[M, K], Y: f32[M, K]) -> (L: f32[M], Q: f8e4m3[M, K], Z: f32[M, K]) {
  L[i] = min(k) (X[i, k] - X[i, k]) * Y[i, k]
  Q[i, k]: f8e4m3 = X[i, k] * 1000.0
  Z[i, k] = max(X[i, k], Y[i, k])
}
schedule serial_min {
  io, ii = split(L.i, 8)
  bind(L.io, grid.x)
  ko, kk = split(L.k, 1)
}
"""


def test_max_and_min_keep_a_nan_on_nvidia(tmp_path):
    """The language's max and min give a NaN if either operand is one, and rounding to E4M3 keeps a NaN (it
    saturates numbers at +-448).  TileLang's T.max / T.min are CUDA's fmaxf / fminf, which drop a NaN: a min
    reduction of inf - inf and an E4M3 store of NaN came out numbers on the H100 (GPU fuzz seed 33, cases 145 and
    261).  Every max and min the NVIDIA printer writes, the clamp and a reduction's update included, is PTX's
    max.NaN / min.NaN (CUDA_HELPERS), and nvcc takes it where it exists.  (Here the min adds one term a step; a
    tile reduction reduces ordered keys: test_ieee_operands.py.)"""
    prog = loads(NAN_KEEPING, "nan.tdsl")
    text = generate(prog, "serial_min", target="nvidia", backend="tilelang")
    assert not re.search(r"T\.(max|min)\(", text)
    assert "tdsl_min" in text and "tdsl_max" in text and "max.NaN.f32" in text and "min.NaN.f32" in text
    lower_kernels(load_module(text, tmp_path / "nan.py"), "sm_90a")
    if shutil.which("nvcc") or os.environ.get("CUDA_HOME"):
        module = load_module(text, tmp_path / "nan_cubin.py")
        for name in module.KERNELS:
            assert "NaN.f32" in compile_cubin(module, name).get_kernel_source()


def test_a_reduction_of_terms_read_from_memory_lowers_beside_other_reductions(tmp_path):
    """mha_fa_exp2's flash kernel with P and U fused one query row at a time (GPU fuzz seed 33) at D = 24, L = 5:
    U's P·V is a tile reduction of terms read from memory, and its accumulator is rescaled by and divided by
    row values other reductions made.  Reduced with T.reduce_sum, TileLang's layout inference found no layout
    ("no available layout found"); such terms are now added one step of k at a time (`unanchored`)."""
    text = (EXAMPLES / "mha_fa_exp2.tdsl").read_text()
    flash = text[text.index("schedule flash {"):]
    flash = flash[:flash.index("}")]
    steps = flash + "  z = fuse(P.i, U.i)\n}\n"
    prog = loads(text + "\n" + steps.replace("schedule flash {", "schedule fused_rows {"), "mha.tdsl",
                 sizes={"B": 1, "H": 1, "D": 24, "L": 5})
    module = generate(prog, "fused_rows", target="nvidia", backend="tilelang")
    assert "T.reduce_sum(p_U" not in module
    lower_kernels(load_module(module, tmp_path / "fused_rows.py"), "sm_90a")


def test_the_launcher_refuses_tensors_off_the_gpu(tmp_path):
    """Before anything is compiled, as the Triton launcher does (TileLang has no interpreter: given CPU tensors
    it used to compile and fail inside TileLang with the whole CUDA source)."""
    torch = pytest.importorskip("torch")
    program = loads("const M = 4\nkernel k(A: f32[M]) -> (B: f32[M]) {\n  B[i] = A[i] * 2.0\n}\n", "k.tdsl")
    module = load_module(generate(program, None, target="nvidia", backend="tilelang"), tmp_path / "k.py")
    with pytest.raises(ValueError, match=r"k: A is on cpu; TileLang kernels run on an NVIDIA GPU: move it there"):
        module.k(torch.ones(4))
