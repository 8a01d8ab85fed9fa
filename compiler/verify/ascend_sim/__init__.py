"""The Ascend execution model: an emitted Ascend kernel module (ascend-950, ascend-910b) executed in NumPy and
checked as it runs.  A verification tool: it checks what backends/ascend emits, and no backend imports it.

No NPU and no Ascend compiler exist here, so the generated module is executed *as Python*: its text is
parsed, three mechanical rewrites are applied (below), and it is run with a fake `tilelang` package whose
`T` namespace implements each tile operation the backends emit in NumPy, on buffers of the declared shapes
and dtypes.  Nothing is re-derived from the tile program: what runs is the emitted source.

    sim = simulate(text, inputs)                      # text: the module `tdsl compile --target ascend-*` writes
    sim.tensors["Y"]                                  # every GM tensor after all kernels (storage dtype)
    sim.kernels[0].footprint                          # bytes per scope one block allocated (stages included)

The namespaces
--------------
* ascend-950 (`import tilelang.ascend.language as T`, mainline TileLang 0.1.15's Ascend dialect):
  `T.prim_func`, `T.Tensor`, `T.dynamic`, `T.Kernel(n) as cid`, `T.alloc_l1 / alloc_l0a / alloc_l0b /
  alloc_l0c / alloc_shared` (UB), `T.copy`, `T.gemm(..., transpose_A/B, clear_accum)`, `T.Pipelined`,
  `T.serial`, `T.Parallel`, `T.SimtVF`, `T.Cast`, `T.cast`, `T.if_then_else`, `T.And`, `T.Or`,
  `T.infinity`, `T.exp / log / sqrt / tanh / abs / max / min`, `T.evaluate`.  Parameter names follow the
  real functions (the tests check them against the installed tilelang where it is importable).
* ascend-910b (`import tilelang.language as T`, tilelang-ascend 0.1.4): exactly the surface of
  `backends/ascend910b/api.py`, with its signatures: `T.Kernel(n, is_npu=True) as (cid, vid)`, `T.alloc_L1 / L0A / L0B /
  L0C / ub`, `T.copy(..., transpose)`, `T.mma(..., init)`, `T.gemm_v0`, `T.Pipelined`, `T.serial`,
  `T.Scope("C" | "V")`, `T.set_cross_flag / wait_cross_flag`, `T.reduce_sum / reduce_max`, `T.tile.*`
  (fill, add/sub/mul/div/max/min, bitwise_and/or, exp/ln/abs/sqrt/rsqrt/sigmoid/silu, cast,
  createvecindex, compare, select), `T.Cast`, `T.infinity`, scalar math.  A function outside that surface
  is an AttributeError.

Execution model
---------------
* The kernels run in the module's launch order: `launches()` where it has one (the 950 module of a schedule that
  runs loops on the host: each kernel with the loops' values, its `T.int32` parameters after its tensors), else
  every kernel of `KERNELS` once, in order.
* A kernel runs block by block: the prim_func is called once per block, `T.Kernel` returns that block's id
  (on the 910B each `T.Scope("V")` runs twice, as vector core 0 and then 1 (`vid`): the kernels give all
  vector work to core 0 behind `if vid == 0`, and only cross-core flag calls, which both cores must make,
  stand outside it -- checked statically; a `T.Scope("V")` with other content is `Unsupported`).  Within a
  block the statements run in program order; on the 910B the cube scope's work therefore precedes the
  vector scope's.
* Every on-chip buffer is allocated per block and filled with NaN (integer buffers: INT_POISON), so a
  read of something never written shows up in the result.  Outputs, temporaries and workspaces in GM start
  NaN-filled too.  Buffers and tensors are bfloat16, float16, float32, float8_e4m3fn, int32, int16,
  uint16 or uint8 (the 910B modules use the integer ones for masks, indices and FP8 bytes).
* `T.Parallel(e0, e1, ...)` runs its body once with all lanes at once: the loop variables are broadcast
  index arrays.  That is exact only if the lanes are independent, and it is checked: within one
  `T.Parallel`, an element stored by two lanes, or stored by one lane and read by another (in either
  order), is an error.
* Loads and stores are bounds-checked on the lanes that perform them (GM and on-chip); a copy region must
  lie inside both buffers; a store into an input tensor is an error.
* Dtypes are those of TIR: a store needs the buffer's dtype (`T.Cast` is explicit in TIR), casts round
  with `compiler.dtypes` (RNE, single rounding; f8e4m3 saturating), f32 arithmetic stays f32, and
  `exp/log/sqrt/tanh` are the float64 result rounded to f32 (the reference interpreter's definitions).
  `T.tile.cast` float -> integer: CAST_RINT rounds half to even, CAST_NONE must be exact, a value outside
  the integer type is an error; integer -> float rounds to nearest even.
* `T.gemm` / `T.mma`: the operands widened to f32 and multiplied with `np.matmul` in f32 (the product of
  two bf16/f16/fp8 values is exact in f32; the f32 sums are in BLAS's order), then added to, or written
  into, the f32 L0C accumulator.
* Data paths: `T.copy` must move data along a path the core has (950: GM->L1, GM->UB, L1->L0A/L0B,
  L0C->UB, L0C->GM, UB->GM, UB->UB; 910B: GM->L1, L1->L0A/L0B, L0C->GM in the cube scope, GM->UB, UB->GM,
  UB->UB in the vector scope), must not convert dtypes (DMA does not), and lanes of vector code may touch
  only GM and UB.  `T.gemm` / `T.mma` take L0A, L0B and an f32 L0C.
* Capacities: the bytes allocated per scope in one block are summed (an L1 buffer that a `T.copy` from GM
  fills inside `T.Pipelined(num_stages=S)` counts S times on the 950, whose dialect multi-buffers it; the
  910B kernels allocate their stage slots explicitly) and compared with `compiler/targets`
  (`scope(S).per_block`) at every allocation: exceeding one is `CapacityExceeded`.
* 910B synchronisation: `T.set_cross_flag(pipe, f)` publishes the GM writes its core made on `pipe`
  (L0C->GM is the FIX pipe, UB->GM MTE3) and `T.wait_cross_flag(f)` makes them visible to the waiting
  core; reading GM elements the other core wrote in this block without such a flag, waiting for a flag no
  one set (a deadlock), or leaving a flag unconsumed is an error.  The flags follow CrossCoreSetFlag's mode
  2: one the cube sets counts once for each vector core, which must each wait for it; the cube's wait goes
  on only when both vector cores have set the flag; ids 0..10, at most 16 pending sets.  Writes are recorded element by element.
  On the 950 the dialect inserts the synchronisation itself and nothing is checked.
* 910B copies between GM and the chip clip the GM region as tilelang-ascend's lowering does (ascend.cc:
  336-421): its start must be >= 0, its valid extent along the copied rows and columns (the last two
  dimensions of extent != 1) is min(extent, max(shape - start, 0)), and a region leaving the tensor along
  another dimension is Unsupported (the real copy would not clip it).  GM -> UB fills the whole UB region
  with `pad_value` (None: 0, in the UB dtype; not for 8-bit dtypes, which AscendC::Duplicate lacks) before
  copying the valid part into its leading corner (copy_gm_to_ub, common.h:199-226); GM -> L1 zero-fills it
  (copy_gm_to_l1, common.h:57-86); UB -> GM and L0C -> GM write only the valid part, taken from the leading
  corner (common.h:156-177, 229-236).  A region entirely outside the tensor, three dimensions of extent > 1,
  and a UB side whose rows are not adjacent or not whole 32-byte blocks (DataCopyPad) are errors.  On the
  950 a region must lie inside its tensor.
* 910B `T.tile.*` take a pointer and an element count (ascend_tile.py): a region must be contiguous, the
  element counts of dst and sources must agree (not the shapes), and a subscript `b[i]` passed as an
  operand is TIR's BufferLoad, which the real functions read at `indices[0]`: it must index a 1-D UB buffer
  (a name bound by `p = b[i, j]` is a scalar and may come from any buffer).  `T.tile.compare` writes one bit
  per element into a uint8 mask, element i at bit i % 8 of byte i // 8 (AscendC's Compare), on a multiple of
  256 bytes of input (codegen_ascend.cc:1790); `T.tile.select` takes src0 where the mask bit is set, src1
  (a buffer, or a scalar in VSEL_TENSOR_SCALAR_MODE) elsewhere; VSEL_CMPMASK_SPR reads the same first
  256 / itemsize bits in every 256-byte repeat (AscendC Select mode 0).  `T.tile.div` by a scalar operand
  multiplies by its f32 reciprocal (codegen_ascend.cc:1721-1765).
* FP8 on the 910B, which has no E4M3 type: the module lists at top level `E4M3_BYTES = [names]` of uint8 GM
  tensors holding E4M3 bit patterns; `simulate` encodes their inputs (compiler.dtypes, saturating), starts
  the others as 0x7F bytes (E4M3 NaN), and gives them back in `Simulation.tensors` decoded to float32.

The rewrites (all inside `@T.prim_func` bodies)
-----------------------------------------------
1. `if c: A else: B` becomes `for __sim_ in __sim__.when(c): A` / `... __sim__.unless(c): B`: with lanes,
   the condition is a mask, under which loads and stores act only on the lanes where it holds.
2. `T.if_then_else(c, a, b)` becomes `__sim__.select(c, lambda: a, lambda: b)`: TIR evaluates only the
   chosen operand per lane (a guarded out-of-range load is legal), so each operand is evaluated under its
   mask.
3. A subscript passed to `T.copy` (`T.copy(A[r0, c0], A_l1)`) becomes a region object (TileLang reads the
   extent of a point region from the other operand, right-aligned); one passed to `T.tile.*` or
   `T.reduce_*` becomes a region if it has a slice (`acc[r, :]`, a BufferRegion) and a BufferLoad object
   otherwise (`p[r]`).  `X = T.alloc_*(...)` becomes `X = __sim__.named("X")(T.alloc_*(...))`, which only
   records the name X for messages.

The rewrites bind and read only names that start with `__sim` (no program name may start with `__`), and the
910B's vector core index is the name the kernel binds in `T.Kernel(...) as (cid, vid)`, whatever it is.
A module whose tensors are renamed (its `RENAMED` table, backends/common/names.py) takes `inputs` and gives back
`tensors` under the program's names.

What this does not model is in docs/target-ascend.md ("What the NumPy execution proves").

The modules
-----------
buffers.py     dtypes, errors, results, buffers, regions and the helpers on them
machine.py     the machine `__sim__`: blocks, allocation and capacities, lanes and masks, element access;
               its mixins regions.py (regions, T.copy, the cube, the 910B's tile views) and cross_core.py
               (the 910B's cross-core flags and GM ordering between its cores)
copy_rules.py  the data paths of each target, the 910B's clipping of GM regions
lang_common.py what both fake `T` namespaces share; lang950.py, lang910b.py and tile910b.py (`T.tile.*`)
rewrite.py     the rewrites above;  load.py: `simulate`, `load_module`;  check.py: `check_schedule`
"""

from tdsl.compiler.verify.ascend_sim.buffers import CapacityExceeded, KernelRun, Simulation, SimulationError, TensorSpec, Unsupported
from tdsl.compiler.verify.ascend_sim.check import check_schedule
from tdsl.compiler.verify.ascend_sim.load import (capacities, detect_target, load_module, namespace_functions,
                                                  output_arrays, simulate)

__all__ = [
    "CapacityExceeded",
    "KernelRun",
    "Simulation",
    "SimulationError",
    "TensorSpec",
    "Unsupported",
    "capacities",
    "check_schedule",
    "detect_target",
    "load_module",
    "namespace_functions",
    "output_arrays",
    "simulate",
]
