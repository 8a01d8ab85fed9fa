"""Lower the kernels of a generated TileLang module without a GPU or NPU (used by the tests and the docs).

    sources = lower_module(module, "sm_90a")     # NVIDIA: CUDA C++ per kernel (TMA, wgmma on sm_90a)
    sources = lower_module(module, "ascend")     # Ascend 950: AscendC per kernel (mainline TileLang)
    shared = dynamic_shared_bytes(lower_kernels(module, "sm_90a")[name])  # what the kernel asks for at launch

`tilelang.lower` needs a `PassContext` and a target context; the device compiler (nvcc, bisheng) is not
run.  `compile_cubin` runs nvcc through `tilelang.compile(..., execution_backend="tvm_ffi")`.
"""

from __future__ import annotations


def _target(arch: str):
    from tilelang.backend.target import determine_target

    if arch == "ascend":
        return determine_target("ascend", return_object=True)
    return determine_target({"kind": "cuda", "arch": arch}, return_object=True)


def lower_module(module, arch: str = "sm_90a", names=None) -> dict:
    """kernel -> its device source (CUDA C++ or AscendC)."""
    return {name: artifact.kernel_source for name, artifact in lower_kernels(module, arch, names).items()}


def lower_kernels(module, arch: str = "sm_90a", names=None) -> dict:
    """kernel -> TileLang's compiled artifact (host and device IR modules, the device source)."""
    import tilelang
    from tilelang import tvm

    target = _target(arch)
    artifacts = {}
    for name, fn in module.KERNELS.items():
        if names is not None and name not in names:
            continue
        # a kernel's own pass configuration (PASS_CONFIGS: a warp-specialised loop), as the module compiles it
        with tvm.transform.PassContext(opt_level=3, config=getattr(module, "PASS_CONFIGS", {}).get(name, {})), target:
            artifacts[name] = tilelang.lower(fn, target=target)
    return artifacts


def dynamic_shared_bytes(artifact) -> int:
    """The shared memory a lowered kernel asks for at launch: TileLang merges every shared buffer into one dynamic
    allocation, whose size the device function carries (`dyn_shared_memory_buf`)."""
    return sum(int(fn.attrs["dyn_shared_memory_buf"]) for fn in artifact.device_mod.functions.values()
               if fn.attrs is not None and "dyn_shared_memory_buf" in fn.attrs)


def compile_cubin(module, name: str, arch: str = "sm_90a"):
    """nvcc the kernel to a cubin (no driver needed); returns the JIT kernel (its source via get_kernel_source())."""
    import tilelang

    return tilelang.compile(module.KERNELS[name], target={"kind": "cuda", "arch": arch}, execution_backend="tvm_ffi",
                            pass_configs=getattr(module, "PASS_CONFIGS", {}).get(name, {}))
