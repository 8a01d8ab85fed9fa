"""TVM's simplifier, which TileLang runs on every kernel, rewrites float arithmetic as if it were exact (`x - x`
to 0, `(x + y) - x` to y, `x * 0` to 0, `x == x` to true...; backends/tilelang/ieee.py).  The TileLang printers
hide an operand of each such operation; here every form is lowered (CUDA for sm_90a, AscendC for the 950) and the
kernel must still read every tensor the form reads: a folded form drops the tensor it cancelled from the kernel's
parameters (before the fix, `(X[i] + Y[i]) - X[i]` lowered to a kernel of Y alone)."""

import os
import re

import pytest

from catalog import ROOT

os.environ.setdefault("TILELANG_CACHE_DIR", str(ROOT / ".cache" / "tilelang"))
pytest.importorskip("tilelang")

from tdsl.backends.tilelang.lowering import lower_module  # noqa: E402
from tdsl.compiler.driver.api import loads  # noqa: E402
from tdsl.compiler.driver.generate import generate, load_module  # noqa: E402

# form -> why TVM's rule changes the result (the interpreter computes each in IEEE f32)
FORMS = {
    "X[i] - X[i]": "inf - inf is NaN, not 0",
    "(X[i] + Y[i]) - X[i]": "(1e8 + 1) - 1e8 is 0 in f32, not 1",
    "X[i] - (X[i] + Y[i])": "the sum rounds",
    "(X[i] * Y[i]) - (X[i] * Y[i])": "an overflowing product is inf",
    "(X[i] + Y[i] + 1.0) - (X[i] + Y[i])": "the sum rounds",
    "X[i] * 0.0": "inf * 0 is NaN",
    "0.0 * X[i]": "NaN * 0 is NaN",
    "0.0 / X[i]": "0 / 0 is NaN",
    "X[i] * -0.0": "inf * -0 is NaN",
    "where(X[i] == X[i], 1.0, 2.0)": "NaN == NaN is false",
    "where(X[i] != X[i], 1.0, 2.0)": "NaN != NaN is true",
    "min(X[i] - X[i], Y[i])": "the NaN of inf - inf reaches the min",
    "((X[i] + 2.0) - 2.0) - X[i]": "(1e-8 + 2) - 2 is 0 in f32, not 1e-8",
    "where(X[i] + 1.0 > 1.0, X[i], Y[i])": "1e-8 + 1 > 1 is false in f32",
}

PROGRAM = """const N = 100
kernel k(X: f32[N], Y: f32[N]) -> (R: f32[N]) {{
  R[i] = {form} + Y[i]
}}
schedule s {{
  io, ii = split(R.i, 32)
  bind(R.io, grid.x)
}}
"""


def _lowered(form: str, target: str, tmp_path) -> str:
    text = generate(loads(PROGRAM.format(form=form), "forms.tdsl"), "s", target=target,
                    **({"backend": "tilelang"} if target == "nvidia" else {}))
    module = load_module(text, tmp_path / "forms.py")
    (source,) = lower_module(module, "sm_90a" if target == "nvidia" else "ascend").values()
    return source


def _reads(source: str, tensor: str) -> bool:
    """Whether the lowered kernel (its device functions) takes `tensor` as a parameter."""
    heads = re.findall(r"(?:__global__|__simt_vf__)[^{]*\(([^)]*)\)", source)
    return any(re.search(rf"\b{tensor}\b", params) for params in heads)


@pytest.mark.parametrize("target", ["nvidia", "ascend-950"])
@pytest.mark.parametrize("form", list(FORMS))
def test_tvm_does_not_fold_float_arithmetic(form, target, tmp_path):
    source = _lowered(form, target, tmp_path)
    assert _reads(source, "X"), f"{form}: TVM folded the reads of X away ({FORMS[form]})"


@pytest.mark.parametrize("target", ["nvidia", "ascend-950"])
def test_adding_a_literal_zero_keeps_the_addition(target, tmp_path):
    """`x + 0.0` is +0.0 where x is -0.0 (1 / that is +inf): TVM's `x + 0 -> x` would keep -0.0."""
    source = _lowered("(X[i] + 0.0) * Y[i]", target, tmp_path)
    assert re.search(r"\+ zero\)", source), "the addition of the literal zero was folded"


def test_shared_operands_hide_only_where_a_rule_applies():
    """What is hidden: the right operand of a subtraction or comparison whose sides read the same thing, and
    literal zeros; a subtraction of unrelated operands (softmax's x - max) prints as it did."""
    text = generate(loads(PROGRAM.format(form="(X[i] + Y[i]) - X[i] + (X[i] - Y[i]) * (X[i] + X[i])"), "f.tdsl"),
                    "s", target="nvidia", backend="tilelang")
    line = next(x for x in text.splitlines() if x.strip().startswith("v_R[l0] ="))
    assert line.count('T.Cast("float64"') == 1  # only the first subtraction's X


def test_the_950_model_computes_the_hidden_forms():
    """The NumPy model of the 950 runs the hidden operands (the int32 round trip, the zero variables) and gives
    the interpreter's results on inputs where each rule would be wrong: infinities, NaN, -0.0, 1e8 beside 1."""
    import numpy as np

    from tdsl.compiler.reference.interpreter import interpret
    from tdsl.compiler.verify import compare
    from tdsl.compiler.verify.ascend_sim import simulate

    body = " + ".join(f"({form})" for form in FORMS)
    prog = loads(PROGRAM.format(form=body).replace("+ Y[i]\n", "\n", 1), "forms.tdsl")
    special = [np.inf, -np.inf, np.nan, -0.0, 0.0, 1e8, 1.0, -3.5]
    x = np.resize(np.array(special, np.float32), 100)
    y = np.resize(np.array(special[::-1] + [1.0], np.float32), 100)
    inputs = {"X": x, "Y": y}
    original = prog.schedule()
    want = interpret(original.model, original.time_map(), inputs)["R"]
    got = simulate(generate(prog, "s", target="ascend-950"), inputs, "ascend-950").tensors["R"]
    assert np.isnan(want).any() and not np.isnan(want).all()
    assert compare(want.astype(np.float32), got.astype(np.float32), "f32").ok


# ---------------------------------------------------------------- max / min tile reductions keep a NaN term

HOST_SHIM = """#include <cstring>
static inline int __float_as_int(float x) { int b; std::memcpy(&b, &x, 4); return b; }
static inline float __int_as_float(int b) { float x; std::memcpy(&x, &b, 4); return x; }
#define __device__
#define __forceinline__
"""


@pytest.fixture(scope="module")
def ordered_keys(tmp_path_factory):
    """The NVIDIA printer's key helpers (CUDA_HELPERS, the text the kernels import) built for the host."""
    import ctypes
    import shutil
    import subprocess

    from tdsl.backends.tilelang.emit import CUDA_HELPERS

    if not shutil.which("g++"):
        pytest.skip("no host C++ compiler")
    out = tmp_path_factory.mktemp("keys")
    (out / "keys.cpp").write_text(HOST_SHIM + "\n".join(CUDA_HELPERS[f] for f in ("max_key", "min_key", "from_key")))
    subprocess.run(["g++", "-O2", "-shared", "-fPIC", "-o", str(out / "keys.so"), str(out / "keys.cpp")], check=True)
    lib = ctypes.CDLL(str(out / "keys.so"))
    for name in ("tdsl_max_key", "tdsl_min_key"):
        getattr(lib, name).argtypes, getattr(lib, name).restype = [ctypes.c_float], ctypes.c_int
    lib.tdsl_from_key.argtypes, lib.tdsl_from_key.restype = [ctypes.c_int], ctypes.c_float
    return lib


def test_ordered_keys_reduce_as_the_floats_with_a_nan_winning(ordered_keys):
    """T.reduce_max / T.reduce_min drop a NaN term (fmaxf / fminf); the printer reduces integer keys instead.  On
    special and random floats: the keys order as the floats do, a NaN has the largest key for a max and the
    smallest for a min, and a key turns back into its float bit for bit (a NaN's into a NaN)."""
    import numpy as np

    rng = np.random.default_rng(7)
    tiny = np.float32(1e-45)
    values = np.concatenate([np.array([np.inf, -np.inf, 0.0, -0.0, tiny, -tiny, 3.4e38, -3.4e38, 1.0, -1.0],
                                      np.float32), (rng.standard_normal(60) * 10.0 ** rng.integers(-30, 30, 60))
                             .astype(np.float32)])
    for keyed, nan_key in ((ordered_keys.tdsl_max_key, 2**31 - 1), (ordered_keys.tdsl_min_key, -2**31)):
        keys = [keyed(float(v)) for v in values]
        for a, ka in zip(values, keys):
            back = np.float32(ordered_keys.tdsl_from_key(ka))
            assert back.tobytes() == a.tobytes()
            for b, kb in zip(values, keys):
                if a < b:
                    assert ka < kb, (a, b)
        assert keyed(float("nan")) == nan_key and np.isnan(ordered_keys.tdsl_from_key(nan_key))
        assert all(nan_key > k for k in keys) if nan_key > 0 else all(nan_key < k for k in keys)


def test_a_max_over_a_register_tile_reduces_keys(tmp_path):
    """softmax's row max: the terms' keys are reduced as integers and the row's key combines through the
    NaN-keeping max (max.NaN.f32); the module lowers for sm_90a and nvcc takes the helpers."""
    from tdsl.backends.tilelang.lowering import compile_cubin
    from tdsl.compiler.driver.api import load

    from catalog import EXAMPLES

    text = generate(load(EXAMPLES / "softmax.tdsl"), "row_fused", target="nvidia", backend="tilelang")
    assert "T.reduce_max(k_m" in text and "tdsl_from_key" in text and "T.reduce_max(p_" not in text
    module = load_module(text, tmp_path / "softmax.py")
    (source,) = lower_module(module, "sm_90a").values()
    assert "tl::AllReduce<tl::MaxOp" in source and "int r_m" in source
    import shutil
    if shutil.which("nvcc") or os.environ.get("CUDA_HOME"):
        assert "tdsl_max_key" in compile_cubin(load_module(text, tmp_path / "softmax_c.py"), "softmax_0").get_kernel_source()


# A loop of extent 1 binds its iterator to the constant 0, which TVM folds like a literal (GPU fuzz seed 39:
# `max(XMN[i, j], XM[i]) * (j / (abs(XMN[i, j]) + 1.0))` at N = 1 gave 0 where XMN was inf, not NaN).
ONE_COLUMN = """const M = 100, N = 1
kernel k(X: f32[M, N], Y: f32[M, N]) -> (R: f32[M, N]) {{
  R[i, j] = {form} + Y[i, j]
}}
schedule s {{
  io, ii = split(R.i, 32)
  bind(R.io, grid.x)
}}
"""


@pytest.mark.parametrize("target", ["nvidia", "ascend-950"])
@pytest.mark.parametrize("form", ["X[i, j] * j", "j * X[i, j]", "j / X[i, j]", "X[i, j] * (j / (abs(X[i, j]) + 1.0))"])
def test_an_iterator_bound_to_zero_folds_nothing(form, target, tmp_path):
    text = generate(loads(ONE_COLUMN.format(form=form), "column.tdsl"), "s", target=target,
                    **({"backend": "tilelang"} if target == "nvidia" else {}))
    module = load_module(text, tmp_path / "column.py")
    (source,) = lower_module(module, "sm_90a" if target == "nvidia" else "ascend").values()
    assert _reads(source, "X"), f"{form}: TVM folded the reads of X away (inf * 0 and 0 / 0 are NaN)"
