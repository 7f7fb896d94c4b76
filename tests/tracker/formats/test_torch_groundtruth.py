"""Ground truth with live torch and numpy: files they write now scan safe, with the manifest torch itself loads."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from tests.support.pickle_bytes import npy_bytes, numpy_object_array_pickle
from tests.support.torch_fixtures import FILES, FIXTURES, write_all
from tracker.formats.pickle_files import scan_file
from tracker.formats.ranged import BytesSource
from tracker.formats.torch_manifest import to_weight_manifest

pytestmark = pytest.mark.groundtruth

SAFETENSORS_NAMES = {
    "torch.float32": "F32", "torch.float16": "F16", "torch.bfloat16": "BF16", "torch.float64": "F64",
    "torch.int64": "I64", "torch.int32": "I32", "torch.int8": "I8", "torch.uint8": "U8", "torch.bool": "BOOL",
    "torch.float8_e4m3fn": "F8_E4M3",
}  # fmt: skip


def _scan(path: Path) -> dict:
    return scan_file(path.name, BytesSource(path.read_bytes()))[0]


@pytest.mark.parametrize("name", sorted(FILES))
def test_live_torch_save_scans_safe_with_the_manifest_torch_loads(name: str, tmp_path: Path) -> None:
    """torch.save's file, written now: safe, and its manifest is what torch.load(weights_only=True) returns."""
    import torch

    path = write_all(tmp_path)[name]
    result = _scan(path)
    assert result["verdict"] == "safe"
    loaded = torch.load(path, weights_only=True)
    state = loaded[FILES[name]] if FILES[name] else loaded
    truth = [(k, SAFETENSORS_NAMES[str(v.dtype)], tuple(v.shape)) for k, v in state.items()]
    manifest = to_weight_manifest(result["tensors"])
    assert [(t.name, t.dtype, t.shape) for t in manifest.tensors] == truth


@pytest.mark.parametrize("name", sorted(FILES))
def test_the_committed_fixtures_scan_as_live_torch_writes_them(name: str, tmp_path: Path) -> None:
    """The committed file and a fresh torch.save agree: same imports, same tensors."""
    fresh, committed = _scan(write_all(tmp_path)[name]), _scan(FIXTURES / name)
    assert fresh["imports"] == committed["imports"]
    assert [(t["name"], t["dtype"], t["shape"]) for t in fresh["tensors"]] == [
        (t["name"], t["dtype"], t["shape"]) for t in committed["tensors"]
    ]


def test_numpy_object_arrays_scan_as_the_hand_written_one() -> None:
    """np.save of an object array imports exactly what tests/support's hand-written copy does, all safe."""
    import numpy as np

    out = io.BytesIO()
    np.save(out, np.array(["x", "y"], dtype=object), allow_pickle=True)
    real = scan_file("a.npy", BytesSource(out.getvalue()))[0]
    written = scan_file("a.npy", BytesSource(npy_bytes("|O", (2,), numpy_object_array_pickle(["x", "y"]))))[0]
    assert real["verdict"] == "safe"
    assert real["imports"] == written["imports"]


def test_a_live_torchscript_archive_is_judged_by_what_python_would_unpickle() -> None:
    """torch.jit.save's zip: data.pkl and constants.pkl judged (its __torch__ classes unknown, as before), its
    Python source no pickle, its code/*.debug_pkl (torch.jit's own unpickler, TorchScript helpers such as
    torch.jit._pickle.build_intlist) not read: never dangerous."""
    import torch

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(4, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.linear(x).relu()

    out = io.BytesIO()
    torch.jit.save(torch.jit.script(Net()), out)
    result, _, note = scan_file("model.pt", BytesSource(out.getvalue()))
    assert result["verdict"] == "unknown" and note is None
    members = {o["member"] for o in result["occurrences"]}
    assert members == {"archive/data.pkl"}
    assert {i["verdict"] for i in result["imports"] if i["module"].startswith("__torch__")} == {"unknown"}


@pytest.mark.parametrize("compressed", [False, True], ids=["savez", "savez_compressed"])
def test_live_numpy_npz_object_arrays_are_judged_and_number_arrays_not_read(compressed: bool) -> None:
    """numpy's own .npz: an object array's pickle judged (safe: numpy's reconstruction), an array of numbers
    read no further than its header."""
    import numpy as np

    save = np.savez_compressed if compressed else np.savez
    out = io.BytesIO()
    save(out, numbers=np.arange(200_000), objects=np.array([{"x": 1}, "s"], dtype=object))
    source = BytesSource(out.getvalue())
    result, _, note = scan_file("arrays.npz", source)
    assert result["verdict"] == "safe" and "objects.npy" in {o["member"] for o in result["occurrences"]}
    assert source.bytes_read < 40_000 < len(out.getvalue())
