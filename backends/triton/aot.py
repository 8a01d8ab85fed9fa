"""Ahead-of-time compilation of generated Triton kernels for a GPU this machine does not have.

`compile_kernel(module, kernel, target=GPUTarget("cuda", 90, 32))` compiles
one `@triton.jit` function of a generated module to PTX/cubin with the same
specialisation the JIT would use on a real launch (16-byte divisible
pointers, the schedule's num_warps / num_stages), so `metadata.shared` is
the shared memory the kernel will ask for on an H100/H200.
"""

from __future__ import annotations

from tdsl.compiler.tileir import TileKernel

POINTER_TYPES = {"bf16": "*bf16", "f16": "*fp16", "f32": "*fp32", "f8e4m3": "*fp8e4nv"}


def compile_kernel(module, kernel: TileKernel, arch: int = 90):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = getattr(module, kernel.name)
    names = [t.name for t in kernel.tensors] + list(kernel.sizes) + ["INTERPRET"]
    signature = {}
    for t in kernel.tensors:
        signature[t.name] = POINTER_TYPES[t.dtype]
    for s in kernel.sizes:
        signature[s] = "i32"
    signature["INTERPRET"] = "constexpr"
    constexprs = {"INTERPRET": False}
    # The JIT marks pointers (and sizes) divisible by 16 on a real launch with aligned tensors.
    attrs = {(names.index(t.name),): [["tt.divisibility", 16]] for t in kernel.tensors}
    source = ASTSource(fn, signature, constexprs, attrs)
    options = {"num_warps": kernel.num_warps, "num_stages": kernel.num_stages}
    return triton.compile(source, target=GPUTarget("cuda", arch, 32), options=options)


def kernel_spec(kernel: TileKernel) -> dict:
    return {
        "name": kernel.name,
        "tensors": [[t.name, t.dtype] for t in kernel.tensors],
        "sizes": list(kernel.sizes),
        "num_warps": kernel.num_warps,
        "num_stages": kernel.num_stages,
    }


def compile_in_subprocess(module_path, kernels: list[TileKernel], arch: int = 90) -> dict:
    """AOT-compile in a fresh process without TRITON_INTERPRET (the variable is read at decoration time,
    so one process cannot hold both interpreted and compiled kernels)."""
    import json
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    spec = json.dumps({"module": str(module_path), "arch": arch, "kernels": [kernel_spec(k) for k in kernels]})
    proc = subprocess.run([sys.executable, "-m", "tdsl.backends.triton.aot"], input=spec, capture_output=True,
                          text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"AOT compilation failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _main() -> None:
    import importlib.util
    import json
    import sys
    from types import SimpleNamespace

    spec = json.loads(sys.stdin.read())
    loader = importlib.util.spec_from_file_location("tdsl_aot_module", spec["module"])
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    results = {}
    for k in spec["kernels"]:
        kernel = SimpleNamespace(
            name=k["name"],
            tensors=[SimpleNamespace(name=n, dtype=d) for n, d in k["tensors"]],
            sizes=k["sizes"],
            num_warps=k["num_warps"],
            num_stages=k["num_stages"],
        )
        compiled = compile_kernel(module, kernel, spec["arch"])
        ptx = compiled.asm.get("ptx", "")
        results[k["name"]] = {"shared": compiled.metadata.shared, "wgmma": "wgmma" in ptx, "ptx_lines": ptx.count("\n")}
    print(json.dumps(results))


if __name__ == "__main__":
    _main()
