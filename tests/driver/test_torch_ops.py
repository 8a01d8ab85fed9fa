"""Compiled schedules as torch custom ops: callable kernels, fake shapes, torch.compile without a graph break,
one kernel for every run-time size, the on-disk module cache (compiler/driver/kernels.py)."""

import pytest

import tdsl
from catalog import EXAMPLES
from tdsl.compiler.driver.api import loads

torch = pytest.importorskip("torch")

# RMSNorm with the number of rows known only at run time, and SwiGLU: the two kernels of a small MLP block
RMSNORM = """
param M
const N = 96
kernel rmsnorm(X: bf16[M, N], g: bf16[N]) -> (Y: bf16[M, N]) {
  ss[i] = sum(j) X[i, j] * X[i, j] accum f32
  r[i] = rsqrt(ss[i] / N + 1e-6)
  Y[i, j] = X[i, j] * r[i] * g[j]
}
schedule rows {
  compute_at(r, Y.i)
  compute_at(ss, Y.i)
  bind(Y.i, grid.x)
}
"""
SWIGLU = """
param M
const F = 64
kernel swiglu(G: bf16[M, F], U: bf16[M, F]) -> (Z: bf16[M, F]) {
  Z[i, j] = silu(G[i, j]) * U[i, j]
}
schedule tiles {
  io, jo, ii, jj = tile(Z.i, Z.j, 4, 64)
  bind(Z.io, grid.x)
}
"""


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TDSL_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _bf16(x):
    return x.to(torch.bfloat16).float()


def _rmsnorm_reference(x, g):
    xf = x.float()
    r = torch.rsqrt((xf * xf).sum(-1, keepdim=True) / x.shape[-1] + 1e-6)
    return _bf16(xf * r * g.float())


class Block(torch.nn.Module):
    """norm -> gate and up projections (torch) -> SwiGLU -> down projection (torch)."""

    def __init__(self, norm, swiglu):
        super().__init__()
        self.norm, self.swiglu = norm, swiglu
        gen = torch.Generator().manual_seed(0)
        self.g = torch.nn.Parameter(torch.randn(96, generator=gen).to(torch.bfloat16), requires_grad=False)
        self.w_gate, self.w_up, self.w_down = (
            torch.nn.Parameter((torch.randn(a, b, generator=gen) / 8).to(torch.bfloat16), requires_grad=False)
            for a, b in ((96, 64), (96, 64), (64, 96)))

    def forward(self, x):
        h = self.norm(x, self.g)
        return self.swiglu(h @ self.w_gate, h @ self.w_up) @ self.w_down


def test_a_module_with_tdsl_kernels_runs_under_torch_compile_and_matches_eager_pytorch():
    norm = tdsl.compile(loads(RMSNORM, "rmsnorm.tdsl"), "rows")
    swiglu = tdsl.compile(loads(SWIGLU, "swiglu.tdsl"), "tiles")
    block = Block(norm, swiglu)

    def reference(x):
        h = _rmsnorm_reference(x, block.g).to(torch.bfloat16)
        g, u = h @ block.w_gate, h @ block.w_up
        z = _bf16(torch.nn.functional.silu(g.float()) * u.float()).to(torch.bfloat16)
        return z @ block.w_down

    compiled = torch.compile(block, fullgraph=True)  # fullgraph: a graph break would be an error
    for rows in (13, 5):  # one tdsl kernel for every number of rows (param M)
        x = torch.randn(rows, 96).to(torch.bfloat16)
        got, want = compiled(x), reference(x)
        assert got.shape == (rows, 96)
        assert torch.allclose(got.float(), want.float(), rtol=2e-2, atol=2e-2), (got - want).abs().max()
        assert torch.equal(got, block(x))  # compiled and eager calls of the same kernels agree exactly


def test_the_op_passes_torch_library_opcheck_and_has_fake_shapes():
    norm = tdsl.compile(loads(RMSNORM, "rmsnorm.tdsl"), "rows")
    x, g = torch.randn(7, 96).to(torch.bfloat16), torch.randn(96).to(torch.bfloat16)
    torch.library.opcheck(norm.op, (x, g))
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        fake = norm(torch.empty(1000, 96, dtype=torch.bfloat16), torch.empty(96, dtype=torch.bfloat16))
    assert fake.shape == (1000, 96) and fake.dtype == torch.bfloat16
    assert torch.allclose(norm(x, g).float(), _rmsnorm_reference(x, g), rtol=2e-2, atol=2e-2)
    # one line, not the module's text (probe Z, 29th session)
    assert repr(norm).startswith("<tdsl Kernel rmsnorm(X, g): 1 output(s), module of ") and "\n" not in repr(norm)


def test_generated_modules_are_cached_on_disk(cache, monkeypatch):
    first = tdsl.compile(EXAMPLES / "rmsnorm.tdsl", "row_per_program", sizes={"M": 4, "N": 64})
    assert len(list(cache.glob("*/rmsnorm.py"))) == 1

    def no_generation(*args, **kwargs):
        raise AssertionError("the module should come from the cache")

    monkeypatch.setattr("tdsl.compiler.driver.generate.generate_schedule", no_generation)
    again = tdsl.compile(EXAMPLES / "rmsnorm.tdsl", "row_per_program", sizes={"M": 4, "N": 64})
    assert again.text == first.text and again.op is first.op


def test_a_schedule_built_in_python_compiles():
    prog = tdsl.load(EXAMPLES / "gemm.tdsl", sizes={"M": 32, "N": 32, "K": 32})
    s = prog.schedule()
    s.tile("C.i", "C.j", 16, 16)
    s.bind("C.io", "grid.x")
    kernel = s.compile(target="nvidia")
    a, b = torch.randn(32, 32).to(torch.bfloat16), torch.randn(32, 32).to(torch.bfloat16)
    assert "tile(C.i, C.j, 16, 16)" in kernel.text
    assert torch.allclose(kernel(a, b), a.float() @ b.float(), rtol=1e-4, atol=1e-3)


def test_compile_needs_the_program_of_the_schedule():
    from tdsl.compiler.schedule.schedule import Schedule
    from tdsl.frontend.diagnostics import TdslError

    model = tdsl.load(EXAMPLES / "gemm.tdsl").model()
    with pytest.raises(TdslError, match="compile needs the program the schedule was made from"):
        Schedule(model).compile()



def test_an_op_of_a_kernel_without_run_time_sizes_has_fixed_fake_shapes():
    text = "const N = 8\nkernel Scale(X: f32[N]) -> (Y: f32[N]) { Y[i] = X[i] * 2.0 }\n"
    kernel = tdsl.compile(loads(text, "scale.tdsl"))
    x = torch.arange(8, dtype=torch.float32)
    assert torch.equal(kernel(x), x * 2)
    assert "tdsl::scale_" in str(kernel.op)
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        assert kernel(torch.empty(8)).shape == (8,)


def test_a_run_time_size_of_zero_is_refused_at_launch():
    # An empty dimension launched no program and returned outputs that were never written.
    norm = tdsl.compile(loads(RMSNORM, "rmsnorm.tdsl"), "rows")
    with pytest.raises(ValueError, match=r"rmsnorm: M = 0 \(dimension 0 of X\): a size is at least 1"):
        norm(torch.empty(0, 96, dtype=torch.bfloat16), torch.empty(96, dtype=torch.bfloat16))


IN_PLACE_GEMM = """
param M, N, K
kernel gemm(C_in: f32[M, N], A: f32[M, K], B: f32[K, N]) -> (C: f32[M, N] in C_in) {
  C[i, j] = sum(k) A[i, k] * B[k, j] from C_in[i, j]
}
schedule tiles {
  io, jo, ii, jj = tile(C.i, C.j, 16, 16)
  ko, kk = split(C.k, 16)
  reorder(C, io, jo, ko, ii, jj, kk)
  bind(C.io, grid.x)
  bind(C.jo, grid.y)
}
"""


def test_an_output_that_shares_memory_with_an_input_it_does_not_update_is_refused():
    """k(a, a, b) wrote C over A while other programs still read A: 2,964 off, silently (probe of the 24th
    session).  torch.mm(a, b, out=a) refuses the same."""
    gemm = tdsl.compile(loads(IN_PLACE_GEMM, "gemm.tdsl"), "tiles")
    a, b, c = torch.randn(64, 64), torch.randn(64, 64), torch.randn(64, 64)
    for args, other in (((a, a, b), "A"), ((b, a, b), "B")):
        with pytest.raises(ValueError, match=rf"gemm: output C overlaps input {other} in memory, and the kernels "
                                             rf"write C while {other} is read"):
            gemm(*args)
    assert torch.allclose(gemm(c.clone(), a, b), c + a @ b, rtol=1e-5, atol=1e-4)  # its own input: in place
    columns = a[:, :32]  # not contiguous: the launcher reads a copy, which shares nothing with C
    assert torch.allclose(gemm(a[:, :32].contiguous(), columns, b[:32, :32]), columns + columns @ b[:32, :32],
                          rtol=1e-5, atol=1e-4)
    two = tdsl.compile(loads("const N = 8\nkernel two(X: f32[N]) -> (Y: f32[N], Z: f32[N]) {\n  Y[i] = X[i] * 2.0\n"
                             "  Z[i] = X[i] + 1.0\n}\n", "two.tdsl"))
    out = torch.empty(8)
    with pytest.raises(ValueError, match=r"two: output Y overlaps output Z in memory"):
        two.module.two(torch.ones(8), Y=out, Z=out)


def test_the_tilelang_launcher_checks_the_same_overlaps():
    from tdsl.compiler.driver.generate import generate

    text = generate(loads(IN_PLACE_GEMM, "gemm.tdsl", sizes={"M": 64, "N": 64, "K": 64}), "tiles", backend="tilelang")
    assert "if _overlaps(C, A):" in text and "if _overlaps(C, B):" in text and "_overlaps(C, C_in)" not in text


def test_a_cached_module_is_written_whole_and_belongs_to_the_code_that_generated_it(cache, monkeypatch):
    """A module truncated by a killed run was loaded by every later compile (probe of the 24th session); and the
    cache key held tdsl's version only, so a checkout's edited code kept loading modules of its old code."""
    from tdsl.compiler.driver import kernels

    tdsl.compile(EXAMPLES / "rmsnorm.tdsl", "row_per_program", sizes={"M": 4, "N": 64})
    (module,) = cache.glob("*/rmsnorm.py")
    assert not list(cache.glob("*/*.tmp"))
    monkeypatch.setattr(kernels, "code_digest", lambda: "other code")
    tdsl.compile(EXAMPLES / "rmsnorm.tdsl", "row_per_program", sizes={"M": 4, "N": 64})
    assert len(list(cache.glob("*/rmsnorm.py"))) == 2


def test_an_output_whose_size_is_an_expression_of_a_run_time_size_has_a_fake_shape():
    """`Y: f32[N + 1]`: the fake implementation passed the text '(N + 1)' to torch.empty, so FakeTensorMode and
    torch.compile failed where the eager call worked (probe of the 24th session)."""
    text = ("param N\nkernel k(X: f32[N], Z: f32[N + 1]) -> (Y: f32[N + 1], W: f32[N]) {\n  Y[i] = Z[i] * 2.0\n"
            "  W[i] = X[i] + 1.0\n}\nschedule s {\n  io, ii = split(Y.i, 16)\n  bind(Y.io, grid.x)\n"
            "  jo, ji = split(W.i, 16)\n  bind(W.jo, grid.x)\n}\n")
    kernel = tdsl.compile(loads(text, "k.tdsl"), "s")
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        y, w = kernel(torch.empty(4), torch.empty(5))
        assert y.shape == (5,) and w.shape == (4,)
    x, z = torch.randn(6), torch.randn(7)
    y, w = torch.compile(lambda x, z: kernel(x, z), fullgraph=True)(x, z)
    assert torch.equal(y, z * 2) and torch.equal(w, x + 1)


def test_a_cache_folder_that_cannot_be_written_is_a_one_line_error(tmp_path, monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    monkeypatch.setenv("TDSL_CACHE_DIR", str(blocker))
    from tdsl.frontend.diagnostics import TdslError

    with pytest.raises(TdslError, match=r"cannot write the kernel cache at .*a_file: Not a directory; set "
                                        r"TDSL_CACHE_DIR to a folder this process can write"):
        tdsl.compile(EXAMPLES / "rmsnorm.tdsl", "row_per_program", sizes={"M": 4, "N": 64})


def test_a_call_with_a_tensor_of_another_rank_or_the_wrong_arguments_says_which():
    """A rank-1 X was reported as "must have shape (64, 64)" (a shape read off the wrong tensor), a rank-0 one
    as a bare IndexError, a missing input as the op's argument 'a1'; inputs could not be passed by name (probe of
    the 24th session)."""
    norm = tdsl.compile(loads(RMSNORM, "rmsnorm.tdsl"), "rows")
    x, g = torch.randn(4, 96).to(torch.bfloat16), torch.ones(96, dtype=torch.bfloat16)
    for wrong, rank in ((torch.randn(96), 1), (torch.randn(2, 4, 96), 3), (torch.tensor(1.0), 0)):
        with pytest.raises(ValueError, match=rf"rmsnorm: X must have 2 dimensions \[M, 96\], got {rank}"):
            norm(wrong.to(torch.bfloat16), g)
    assert torch.equal(norm(X=x, g=g), norm(x, g)) and torch.equal(norm(x, g=g), norm(x, g))
    for args, named, says in (((x,), {}, "missing g"), ((x, g, g), {}, "got 3"), ((x,), {"h": g}, "no input is named h"),
                              ((x, g), {"X": x}, "X given by position and by name")):
        with pytest.raises(TypeError, match=rf"rmsnorm takes 2 inputs \(X, g\)[;,] {says}"):
            norm(*args, **named)


def test_an_input_may_be_called_self_and_passed_by_name():
    """`kern(self=a, ...)` met the method's own `self` (TypeError: multiple values; probe of the 25th session)."""
    kern = tdsl.compile(loads("const M = 4, N = 8\nkernel k(self: f32[M, N], args: f32[M, N]) -> (Y: f32[M, N]) {\n"
                              "  Y[i, j] = self[i, j] - args[i, j]\n}\n", "selfish.tdsl"), None)
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    assert torch.equal(kern(self=a, args=b), kern(a, b)) and torch.equal(kern(a, b), a - b)


def test_a_backward_through_a_kernel_is_refused_with_what_to_do():
    """Parameters that require grad made torch.compile fail with "no autograd formula was registered" (probe of
    the 24th session); the formula now refuses the backward pass itself, saying what to do."""
    norm = tdsl.compile(loads(RMSNORM, "rmsnorm.tdsl"), "rows")
    g = torch.nn.Parameter(torch.ones(96, dtype=torch.bfloat16))
    y = norm(torch.randn(4, 96).to(torch.bfloat16), g)
    assert y.requires_grad
    with pytest.raises(RuntimeError, match=r"rmsnorm: a tdsl kernel has no backward; call it under torch.no_grad\(\)"):
        y.float().sum().backward()


def test_an_in_place_kernel_refuses_inputs_that_require_grad():
    """A kernel that updates an input in place had no autograd formula (torch allows none for a mutating op),
    and torch ran it on tensors requiring grad: C_in's gradient came out 1 where it is 1.25, A's was dropped
    (probe KK).  Under torch.no_grad() the same call updates the tensor, as an optimiser's step does."""
    gemm = tdsl.compile(loads(IN_PLACE_GEMM, "gemm.tdsl"), "tiles")
    a, b = torch.randn(5, 12), torch.randn(12, 7)
    for c, a_in in ((torch.randn(5, 7, requires_grad=True), a), (torch.randn(5, 7, requires_grad=True) * 1.0, a),
                    (torch.randn(5, 7), a.clone().requires_grad_())):
        with pytest.raises(RuntimeError, match=r"gemm: a tdsl kernel that updates C_in in place has no backward"):
            gemm(c, a_in, b)
        with pytest.raises(RuntimeError, match=r"updates C_in in place has no backward"):
            gemm.op(c, a_in, b)  # the op itself (torch.ops.tdsl...), not only the Kernel call
    c = torch.randn(5, 7, requires_grad=True)
    want = c.detach() + a @ b
    with torch.no_grad():
        assert gemm(c, a, b) is c
    assert torch.allclose(c.detach(), want, rtol=1e-5, atol=1e-4)


def test_inputs_on_two_devices_are_refused_not_answered_with_empty_memory(cache):
    """One input on the meta device sends the call to the op's fake implementation, which made the outputs on
    the first input's device with torch.empty: a CPU tensor of whatever memory held (probe R, 27th session)."""
    import torch

    gemm = tdsl.load(EXAMPLES / "gemm.tdsl", sizes={"M": 3, "N": 6, "K": 4}).schedule(None).compile(target="nvidia")
    a, b = torch.ones(3, 4, dtype=torch.bfloat16), torch.ones(4, 6, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"gemm: the inputs are on several devices \(cpu, meta\)"):
        gemm(a, b.to("meta"))


def test_a_kernel_without_inputs_allocates_where_it_runs():
    """Its launcher allocated the outputs on "cuda" also under Triton's interpreter (an AssertionError from torch
    on a machine without CUDA: probe KK); its fake implementation allocates on the same device."""
    ramp = tdsl.compile(loads("const N = 5\nkernel ramp() -> (Y: f32[N]) {\n  Y[i] = i * 2.0\n}\n", "ramp.tdsl"))
    assert torch.equal(ramp(), torch.arange(5.0) * 2)
    assert torch.compile(lambda: ramp() + 1, fullgraph=True)().tolist() == [1.0, 3.0, 5.0, 7.0, 9.0]


@pytest.mark.parametrize("given, error, says", [
    (5, TypeError, "k: Y must be a torch.Tensor, got int"),
    ([0.0], TypeError, "k: Y must be a torch.Tensor, got list"),
    ("meta", ValueError, "k: Y is on the meta device, which holds no values"),
    ("transposed", ValueError, "k: output Y must be contiguous"),
])
def test_an_output_argument_that_is_no_tensor_of_the_kernel_is_named(given, error, says):
    """`mod.k(x, Y=5)` met `.is_contiguous()` before the type check (AttributeError), a meta tensor torch's own
    NotImplementedError (probe KK)."""
    double = tdsl.compile(loads("const M = 4, N = 8\nkernel k(X: f32[M, N]) -> (Y: f32[M, N]) {\n"
                                "  Y[i, j] = X[i, j] * 2.0\n}\n", "double.tdsl"))
    if isinstance(given, str):
        given = {"meta": torch.empty(4, 8, device="meta"), "transposed": torch.empty(8, 4).t()}[given]
    with pytest.raises(error, match=says):
        double.module.k(torch.ones(4, 8), Y=given)
    with pytest.raises(TypeError, match="k: X must be a torch.Tensor, got list"):  # not torch's "a0 ... Value: [[1.0"
        double([[1.0] * 8] * 4)


def test_compile_for_an_ascend_target_says_what_to_do_instead():
    """The Ascend modules are no torch ops: tdsl.compile failed inside the module (950: no attribute; 910B:
    TileLang's own TypeError, probe KK).  A target that is no name is named as such (it was 'none')."""
    from tdsl.frontend.diagnostics import TdslError

    prog = loads("const N = 5\nkernel z(X: f32[N]) -> (Y: f32[N]) {\n  Y[i] = X[i]\n}\n", "copy.tdsl")
    for target in ("ascend-950", "ascend-910b"):
        with pytest.raises(TdslError, match=rf"makes torch ops of NVIDIA kernels only; the {target} module"):
            tdsl.compile(prog, target=target)
    with pytest.raises(TdslError, match="a target is a name such as 'nvidia', 'h200' or 'ascend-950', got None"):
        tdsl.compile(prog, target=None)


def test_the_api_takes_source_text_and_names_what_it_does_not_take():
    """tdsl.compile(source) read the whole text as a path; tdsl.loads was not at the top; load(123) and
    schedule(sizes=5) raised pathlib's and dict's own errors (probe KK)."""
    from tdsl.frontend.diagnostics import TdslError

    source = "const N = 4\nkernel inc(X: f32[N]) -> (Y: f32[N]) {\n  Y[i] = X[i] + 1.0\n}\n"
    assert torch.equal(tdsl.compile(source)(torch.zeros(4)), torch.ones(4))
    assert tdsl.loads(source).kernel_name() == "inc"
    for bad in (123, None, b"x.tdsl"):
        with pytest.raises(TypeError, match=rf"load takes the path of a .tdsl file \(a str or a path\), got "
                                            rf"{type(bad).__name__}"):
            tdsl.load(bad)
    with pytest.raises(TypeError, match="loads takes .tdsl source text"):
        tdsl.loads(5)
    with pytest.raises(TdslError, match="sizes must map size names to values"):
        tdsl.loads(source).schedule(sizes=5)
    with pytest.raises(TypeError, match=r"schedule is the name of a schedule block, .*got \['io, ii = split"):
        tdsl.compile(source, ["io, ii = split(Y.i, 2)"])  # it said: has no schedule '[...]'



def test_an_empty_run_time_size_is_refused_under_torch_compile_as_it_is_eagerly():
    """`norm(x, g) + 1` compiled with dynamic shapes returned an empty tensor for M = 0 (inductor drops a call
    whose output is empty) where the eager call raises (probe KK): the fake implementation refuses it too."""
    norm = tdsl.compile(loads(RMSNORM, "rmsnorm.tdsl"), "rows")
    g = torch.ones(96, dtype=torch.bfloat16)
    shifted = torch.compile(lambda x: norm(x, g) + 1, fullgraph=True, dynamic=True)
    assert shifted(torch.randn(3, 96).to(torch.bfloat16)).shape == (3, 96)
    for call in (norm, shifted):
        with pytest.raises(Exception, match=r"rmsnorm: M = 0 \(dimension 0 of X\): a size is at least 1"):
            call(torch.empty(0, 96, dtype=torch.bfloat16), *([g] if call is norm else []))
