"""A weight manifest whose dtypes are ggml types (a GGUF's tensors) counts its stored bytes exactly."""

from __future__ import annotations

import pytest
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

from estimator.manifest import count_manifest
from tests.support.gguf_files import GgufSpec, default_tensors


@pytest.mark.parametrize("quant", ["Q4_K", "Q8_0", "IQ2_XXS", "Q5_1", "F16", "TQ1_0", "MXFP4"])
def test_stored_bytes_of_a_gguf_manifest_are_exact(quant):
    """sum over tensors of ceil(n / block) * type size, as the gguf package sizes each type."""
    spec = GgufSpec(quant=quant, tokens=[f"t{i}" for i in range(512)], merges=[])
    tensors = default_tensors(spec)
    manifest = {name: (type_name, list(shape)) for name, shape, type_name in tensors}
    expected = 0
    for _, shape, type_name in tensors:
        block, size = GGML_QUANT_SIZES[GGMLQuantizationType[type_name]]
        n = 1
        for d in shape:
            n *= d
        expected += -(-n // block) * size
    counted = count_manifest(manifest)
    assert counted.stored_bytes == expected
    assert counted.quantized  # every spec has a Q6_K output head
