"""ggml's tensor types (llama.cpp's ggml.h `enum ggml_type` and `ggml_type_traits`): id -> name, elements per
block and bytes per block, so a GGUF tensor's bytes are exact: ceil(elements / block) * type size.

Pure data. Ids llama.cpp has removed since (Q4_2, Q4_3) are absent; the repacked Q4_0_4_4/... and
IQ4_NL_4_4/... (31-33, 36-38) are kept with their sizes because older files still carry them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GgmlType:
    id: int
    name: str
    block_size: int  # elements per block
    type_size: int  # bytes per block

    def bytes_for(self, elements: int) -> int:
        return -(-elements // self.block_size) * self.type_size


_TABLE = (
    (0, "F32", 1, 4), (1, "F16", 1, 2), (2, "Q4_0", 32, 18), (3, "Q4_1", 32, 20), (6, "Q5_0", 32, 22),
    (7, "Q5_1", 32, 24), (8, "Q8_0", 32, 34), (9, "Q8_1", 32, 40), (10, "Q2_K", 256, 84), (11, "Q3_K", 256, 110),
    (12, "Q4_K", 256, 144), (13, "Q5_K", 256, 176), (14, "Q6_K", 256, 210), (15, "Q8_K", 256, 292),
    (16, "IQ2_XXS", 256, 66), (17, "IQ2_XS", 256, 74), (18, "IQ3_XXS", 256, 98), (19, "IQ1_S", 256, 50),
    (20, "IQ4_NL", 32, 18), (21, "IQ3_S", 256, 110), (22, "IQ2_S", 256, 82), (23, "IQ4_XS", 256, 136),
    (24, "I8", 1, 1), (25, "I16", 1, 2), (26, "I32", 1, 4), (27, "I64", 1, 8), (28, "F64", 1, 8),
    (29, "IQ1_M", 256, 56), (30, "BF16", 1, 2), (31, "Q4_0_4_4", 32, 18), (32, "Q4_0_4_8", 32, 18),
    (33, "Q4_0_8_8", 32, 18), (34, "TQ1_0", 256, 54), (35, "TQ2_0", 256, 66), (36, "IQ4_NL_4_4", 32, 18),
    (37, "IQ4_NL_4_8", 32, 18), (38, "IQ4_NL_8_8", 32, 18), (39, "MXFP4", 32, 17), (40, "NVFP4", 64, 36),
    (41, "Q1_0", 128, 18),
)
GGML_TYPES: dict[int, GgmlType] = {row[0]: GgmlType(*row) for row in _TABLE}
GGML_TYPES_BY_NAME: dict[str, GgmlType] = {t.name: t for t in GGML_TYPES.values()}
# Types whose elements are stored below 8 bits in blocks with scales: quantized, not plain floats.
QUANTIZED = frozenset(t.name for t in GGML_TYPES.values() if t.block_size > 1)

# llama.cpp's `enum llama_ftype` (general.file_type): what most of a file's tensors are quantized to.
FILE_TYPES: dict[int, str] = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 4: "Q4_1_SOME_F16", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
    11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K",
    19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S",
    27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 33: "Q4_0_4_4", 34: "Q4_0_4_8",
    35: "Q4_0_8_8", 36: "TQ1_0", 37: "TQ2_0", 38: "MXFP4_MOE", 39: "NVFP4", 40: "Q1_0", 1024: "GUESSED",
}
