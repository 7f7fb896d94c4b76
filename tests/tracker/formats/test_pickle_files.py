"""scan_file: each suffix read its way, benign checkpoints safe with their manifests, bad bytes a note, never an exception."""

from __future__ import annotations

import io
import pickle
import zipfile
import zlib

import pytest

from tests.support.pickle_bytes import Member, Ops, calling, npy_bytes, numpy_object_array_pickle, zip_bytes
from tests.support.torch_fixtures import FILES, FIXTURES, expected_manifest
from tracker.formats import pickle_files
from tracker.formats.pickle_files import scan_file, scans
from tracker.formats.pickle_rules import BUILTIN, rules_from_toml
from tracker.formats.ranged import BytesSource
from tracker.formats.torch_manifest import to_weight_manifest


@pytest.mark.parametrize("name", sorted(FILES))
def test_benign_torch_checkpoints_are_safe_with_their_manifest(name: str) -> None:
    """torch.save's files (zip, nested training checkpoint, legacy) are safe; the manifest is the state dict's."""
    data = (FIXTURES / name).read_bytes()
    result, kept, note = scan_file(name, BytesSource(data))
    assert (result["verdict"], note, result["certain"]) == ("safe", None, True)
    assert all(i["verdict"] == "safe" for i in result["imports"])
    manifest = to_weight_manifest(result["tensors"])
    assert [(t.name, t.dtype, t.shape) for t in manifest.tensors] == expected_manifest(name)
    assert manifest.metadata.get("state_dict", "") == FILES[name]
    assert kept and kept in data


def test_zip_checkpoints_carry_storage_sizes_and_keep_data_pkl() -> None:
    """Each tensor names its storage and that storage's bytes; the kept bytes are data.pkl exactly."""
    data = (FIXTURES / "state_dict.pt").read_bytes()
    result, kept, _ = scan_file("state_dict.pt", BytesSource(data))
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert kept == archive.read("state_dict/data.pkl")
        sizes = {n.rsplit("/", 1)[1]: archive.getinfo(n).file_size for n in archive.namelist() if "/data/" in n}
    assert {t["storage_key"]: t["storage_bytes"] for t in result["tensors"]} == sizes


def test_a_nested_checkpoint_lists_its_optimizer_tensors_apart() -> None:
    """Tensors outside the state dict are listed with where they are, and left out of the manifest."""
    result, _, _ = scan_file("c.ckpt", BytesSource((FIXTURES / "training_checkpoint.ckpt").read_bytes()))
    places = {t["within"] for t in result["tensors"]}
    assert "model" in places and any(p.startswith("optimizer/state") for p in places)


def test_rules_decide_the_verdict() -> None:
    """An operator's dangerous entry makes a benign-looking import dangerous."""
    data = calling("mylib", "helper")
    assert scan_file("x.pkl", BytesSource(data))[0]["verdict"] == "unknown"
    strict = rules_from_toml(b'dangerous = ["mylib"]')
    result = scan_file("x.pkl", BytesSource(data), strict)[0]
    assert result["verdict"] == "dangerous" and result["rules_version"] == strict.version


@pytest.mark.parametrize(
    ("path", "data", "verdict", "note"),
    [
        ("a.npy", npy_bytes("<f4", (2, 2), b"\0" * 16), "safe", "numpy array of <f4, no pickle"),
        ("a.npy", npy_bytes("|O", (2,), numpy_object_array_pickle(["x", "y"])), "safe", "object array"),
        ("a.npy", b"\x93NUMPY\x01\x00\xff\xff{", "unreadable", "truncated"),
        ("a.npy", b"GIF89a not numpy", "unknown", "no \\x93NUMPY magic): read as a pickle"),
        ("a.npy", b"PK\x03\x04 not numpy", "unreadable", "shorter than an end-of-central-directory record"),
        ("a.npz", zip_bytes([Member("a.npy", npy_bytes("<i8", (1,), b"\0" * 8)),
                             Member("b.npy", npy_bytes("<f2", (3,), b"\0" * 6), deflate=True)]), "safe",
         "a zip of 2 member(s), none of them a pickle"),
        ("a.npy", calling("os", "system", "id"), "dangerous", "not a .npy file"),
        ("a.npz", calling("os", "system", "id"), "dangerous", "no end-of-central-directory record in the last 64 KiB; read as a pickle"),
        ("m.pkl", pickle.dumps({"weights": [1.0, 2.0], "name": "m"}), "safe", None),
        ("m.joblib", zlib.compress(pickle.dumps({"a": [1, 2]})), "safe", "zlib-compressed"),
        ("m.pkl", b"", "unreadable", "empty file"),
        ("m.pt", b"\x00\x01garbage", "unreadable", "not a pickle from byte 0"),
        ("m.pt", b"PK\x03\x04" + b"\0" * 40, "unreadable", "no end-of-central-directory record"),
        ("m.pkl", Ops().empty_dict.bytes() + b"\xff", "unknown", "opcode b'\\xff' unknown"),
    ],
    ids=["npy", "npy-object", "npy-truncated", "npy-magic", "npy-zip-magic", "npz", "npy-pickle", "npz-pickle", "plain",
         "joblib-zlib", "empty", "garbage", "not-a-zip", "half-pickle"],
)  # fmt: skip
def test_other_formats(path: str, data: bytes, verdict: str, note: str | None) -> None:
    """numpy, joblib and plain pickles are read their own way (a .npy or .npz that is a pickle as numpy.load reads
    it); bad bytes are a verdict and a note."""
    result, _, got_note = scan_file(path, BytesSource(data))
    assert result["verdict"] == verdict
    assert got_note == note if note is None else note in got_note


def _keras(config: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("metadata.json", b"{}")
        archive.writestr("config.json", config)
    return out.getvalue()


@pytest.mark.parametrize(
    ("config", "verdict", "imports"),
    [
        (b'{"class_name": "Sequential", "module": "keras", "config": {"layers": [{"class_name": "Dense", "module":'
         b' "keras.layers", "config": {"name": "d"}}]}}', "safe", []),
        (b'{"class_name": "Functional", "config": {"layers": [{"class_name": "MyBlock", "module": "mypkg.blocks",'
         b' "registered_name": "mypkg>MyBlock", "config": {"name": "b"}}]}}', "unknown", [("mypkg.blocks", "MyBlock")]),
        (b'{"config": {"layers": [{"class_name": "Lambda", "config": {"name": "l"}}]}}', "dangerous",
         [("keras.layers", "Lambda")]),
        (b"{not json", "unreadable", []),
    ],
    ids=["dense", "custom-class", "lambda", "bad-json"],
)  # fmt: skip
def test_keras_config_layers(config: bytes, verdict: str, imports: list[tuple[str, str]]) -> None:
    """A .keras file's config.json: Lambda layers dangerous, classes from outside Keras unknown."""
    result, kept, _ = scan_file("model.keras", BytesSource(_keras(config)))
    assert result["verdict"] == verdict
    assert [(i["module"], i["name"]) for i in result["imports"]] == imports
    assert kept == config


def test_a_pickle_over_the_head_cap_reports_what_was_not_reached(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the first HEAD_CAP bytes are read; a pickle running past them is unknown with a note."""
    monkeypatch.setattr(pickle_files, "HEAD_CAP", 1000)
    data = pickle.dumps(list(range(5000)), protocol=2)
    source = BytesSource(data)
    result, _, note = scan_file("big.pkl", source)
    assert result["verdict"] == "unknown" and source.bytes_read == 4 + 1000  # the zip magic, then the cap
    assert f"first 1,000 of {len(data):,} bytes read" in note


def test_a_source_over_budget_is_unreadable_not_an_exception() -> None:
    """OverBudget from the source becomes an unreadable verdict and its note."""
    data = (FIXTURES / "state_dict.pt").read_bytes()
    result, kept, note = scan_file("x.pt", BytesSource(data, budget=100))
    assert (result["verdict"], kept) == ("unreadable", b"")
    assert "cap" in note


def test_scan_file_names_the_suffixes_it_reads() -> None:
    """Every weight suffix is read; others are refused up front."""
    assert all(scans(p) for p in ["a.bin", "a.PT", "a.pth", "a.ckpt", "a.pkl", "a.pickle", "a.joblib", "a.npy",
                                  "a.npz", "a.keras"])  # fmt: skip
    assert not scans("a.safetensors")
    with pytest.raises(ValueError, match="not a file scan_file reads"):
        scan_file("a.safetensors", BytesSource(b""), BUILTIN)


@pytest.mark.parametrize("path", ["zeros.bin", "zeros.pkl", "zeros.npy"])
def test_bytes_that_are_not_a_pickle_stop_the_read_at_the_first_chunk(path: str) -> None:
    """A 20 MB file of zeros (the replay's stand-in weights) costs one first chunk, not the 16 MiB cap."""
    source = BytesSource(bytes(20 * 2**20))
    result, kept, note = scan_file(path, source)
    assert source.bytes_read <= pickle_files.FIRST_CHUNK + 4  # the zip magic first
    assert (result["verdict"], kept) == ("unreadable", b"")
    assert "not a pickle from byte 0" in note or "not a .npy file" in note


class _Calls:
    """Pickles as a call of `os.system` (written with pickle.dumps, never loaded)."""

    def __reduce__(self) -> tuple[object, tuple[str]]:
        import os

        return os.system, ("true",)


def test_a_long_pickle_is_read_in_growing_chunks_as_far_as_it_goes() -> None:
    """A 300 KB pickle whose dangerous call sits past the first chunk is found; the zeros after it are not read."""
    body = pickle.dumps([list(range(100_000)), _Calls()], protocol=4)
    assert len(body) > 4 * pickle_files.FIRST_CHUNK
    source = BytesSource(body + bytes(20 * 2**20))
    result, kept, _ = scan_file("model.pkl", source)
    assert result["verdict"] == "dangerous"
    assert {(i["module"], i["name"]) for i in result["imports"]} == {(_Calls().__reduce__()[0].__module__, "system")}
    assert len(body) < source.bytes_read <= 2 * len(body)
    assert kept.startswith(body)  # the bytes walked (the zeros after the STOP are noted, not a pickle)
