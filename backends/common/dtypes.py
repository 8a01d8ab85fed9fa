"""How the generated code spells each dtype of the language, in one table (sizes are compiler/dtypes.BYTES).

    TORCH["bf16"]     -> "torch.bfloat16"   (launchers, torch tensors)
    TRITON["bf16"]    -> "tl.bfloat16"
    TILELANG["bf16"]  -> "bfloat16"         (T.Tensor / T.alloc_* dtype strings; the 950 dialect too)
    ASCEND_910B["f8e4m3"] -> "uint8"        (tilelang-ascend has no FP8 type: E4M3 tensors are bytes)
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Spelling:
    torch: str  # the attribute of the torch module
    triton: str
    tilelang: str
    ascend_910b: str


SPELLING = {
    "bf16": Spelling("bfloat16", "tl.bfloat16", "bfloat16", "bfloat16"),
    "f16": Spelling("float16", "tl.float16", "float16", "float16"),
    "f32": Spelling("float32", "tl.float32", "float32", "float32"),
    "f8e4m3": Spelling("float8_e4m3fn", "tl.float8e4nv", "float8_e4m3fn", "uint8"),
}

TORCH_NAMES = {name: s.torch for name, s in SPELLING.items()}
TORCH = {name: f"torch.{s.torch}" for name, s in SPELLING.items()}
TRITON = {name: s.triton for name, s in SPELLING.items()}
TILELANG = {name: s.tilelang for name, s in SPELLING.items()}
ASCEND_910B = {**{name: s.ascend_910b for name, s in SPELLING.items()}, "u8": "uint8"}  # u8: its raw byte buffers
