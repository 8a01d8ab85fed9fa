"""Ahead-of-time compilation of generated Triton kernels for a GPU this machine does not have.

`compile_kernel(module, kernel, target=GPUTarget("cuda", 90, 32))` compiles
one `@triton.jit` function of a generated module to PTX/cubin with the same
specialisation the JIT would use on a real launch (16-byte divisible
pointers, the schedule's num_warps / num_stages), so `metadata.shared` is
the shared memory the kernel will ask for on an H100/H200.

A kernel is found by its function's identifier in the module (`function`, from backends/common/names.py; the tile
program's kernel name when not given) and its parameters by position: tensors, run-time sizes and host loop
variables (`TileKernel.scalars`), TMA descriptors (typed by their annotations), INTERPRET.
"""

from __future__ import annotations

from tdsl.compiler.lower.tileir import TileKernel

POINTER_TYPES = {"bf16": "*bf16", "f16": "*fp16", "f32": "*fp32", "f8e4m3": "*fp8e4nv"}


def compile_kernel(module, kernel: TileKernel, arch: int = 90, function: str = ""):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = getattr(module, function or kernel.name)
    params = list(fn.arg_names)  # the module's identifiers: tensors, run-time sizes, host loop variables, INTERPRET
    # then TMA descriptors (compiler/lower/passes/tma.py), each annotated with its type (`tensordesc<bf16[128, 64]>`)
    described = [p.annotation for p in fn.params if p.annotation.startswith("tensordesc")]
    if len(params) != len(kernel.tensors) + len(kernel.scalars) + len(described) + 1:
        raise ValueError(f"{fn.__name__} takes {params}, not the tensors and sizes of {kernel.name}")
    kinds = [POINTER_TYPES[t.dtype] for t in kernel.tensors] + ["i32"] * len(kernel.scalars) + described + ["constexpr"]
    signature = dict(zip(params, kinds))
    constexprs = {params[-1]: False}
    # The JIT marks pointers (and sizes) divisible by 16 on a real launch with aligned tensors.
    attrs = {(n,): [["tt.divisibility", 16]] for n in range(len(kernel.tensors))}
    source = ASTSource(fn, signature, constexprs, attrs)
    options = {"num_warps": kernel.num_warps, "num_stages": kernel.num_stages, "enable_fp_fusion": False}  # as launched
    return triton.compile(source, target=GPUTarget("cuda", arch, 32), options=options)


def kernel_spec(kernel: TileKernel, function: str = "") -> dict:
    return {
        "name": kernel.name,
        "function": function or kernel.name,
        "tensors": [[t.name, t.dtype] for t in kernel.tensors],
        "scalars": list(kernel.scalars),
        "num_warps": kernel.num_warps,
        "num_stages": kernel.num_stages,
    }


def compile_in_subprocess(module_path, kernels: list[TileKernel], arch: int = 90, program=None) -> dict:
    """AOT-compile in another process, without TRITON_INTERPRET (the variable is read at decoration time, so one
    process cannot hold both interpreted and compiled kernels).  `program` (the tile program the module was
    printed from) names the kernels' functions when the module had to rename them.  The process stays up for the
    next module: its imports (torch, triton: about 3 s) are paid once per calling process."""
    import json

    from tdsl.backends.common.names import ModuleNames

    names = ModuleNames(program) if program is not None else None
    specs = [kernel_spec(k, names.kernel(k.name) if names else "") for k in kernels]
    return _server().compile(json.dumps({"module": str(module_path), "arch": arch, "kernels": specs}))


RESULT = "tdsl-aot-result "  # the prefix of the server's answer lines (Triton may print to stdout too)
_SERVER = None


def _server() -> "_CompileServer":
    global _SERVER
    if _SERVER is None or _SERVER.proc.poll() is not None:
        _SERVER = _CompileServer()
    return _SERVER


class _CompileServer:
    """`python -m tdsl.backends.triton.aot`: reads one JSON spec a line, answers one line (`RESULT` + JSON)."""

    def __init__(self):
        import atexit
        import os
        import subprocess
        import sys
        import tempfile

        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
        self.log = tempfile.NamedTemporaryFile(prefix="tdsl-aot-", suffix=".log", delete=False)
        self.proc = subprocess.Popen([sys.executable, "-m", "tdsl.backends.triton.aot"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, text=True, env=env)
        atexit.register(self.close)

    def compile(self, spec: str) -> dict:
        import json

        try:
            self.proc.stdin.write(spec + "\n")
            self.proc.stdin.flush()
            for line in self.proc.stdout:
                if line.startswith(RESULT):
                    answer = json.loads(line[len(RESULT):])
                    if "error" in answer:
                        raise RuntimeError(f"AOT compilation failed:\n{answer['error']}\n{self._log_tail()}")
                    return answer["kernels"]
        except BrokenPipeError:
            pass
        raise RuntimeError(f"AOT compilation failed: the compiling process ended\n{self._log_tail()}")

    def _log_tail(self) -> str:
        with open(self.log.name, errors="replace") as f:
            return f.read()[-4000:]

    def close(self) -> None:
        import os

        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait()
        self.log.close()
        if os.path.exists(self.log.name):
            os.unlink(self.log.name)


def _compile_spec(spec: dict) -> dict:
    import importlib.util
    from types import SimpleNamespace

    loader = importlib.util.spec_from_file_location("tdsl_aot_module", spec["module"])
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    results = {}
    for k in spec["kernels"]:
        kernel = SimpleNamespace(
            name=k["name"],
            tensors=[SimpleNamespace(name=n, dtype=d) for n, d in k["tensors"]],
            scalars=k["scalars"],
            num_warps=k["num_warps"],
            num_stages=k["num_stages"],
        )
        compiled = compile_kernel(module, kernel, spec["arch"], k["function"])
        ptx = compiled.asm.get("ptx", "")
        results[k["name"]] = {"shared": compiled.metadata.shared, "wgmma": "wgmma" in ptx, "ptx_lines": ptx.count("\n"),
                              "fma": ptx.count("fma.rn.f32")}
    return results


def _main() -> None:
    import json
    import sys
    import traceback

    for line in sys.stdin:
        try:
            answer = {"kernels": _compile_spec(json.loads(line))}
        except Exception:  # noqa: BLE001 - the caller raises it, with the traceback
            answer = {"error": traceback.format_exc()[-4000:]}
        print(RESULT + json.dumps(answer), flush=True)


if __name__ == "__main__":
    _main()
