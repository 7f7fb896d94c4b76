"""The weights differ on all-MiniLM-L6-v2's real safetensors header (tensor names, dtypes, shapes)."""

from __future__ import annotations

import copy
import json

import pytest

from tracker.differs import weights
from tracker.formats.manifest import WeightManifest
from tracker.revision.changes import ChangeKind, Severity

MINILM = "all-minilm-l6-v2"
SIZE = 90_868_376  # the real model.safetensors


def f32_to_f16(header):
    for name, spec in header.items():
        if name != "__metadata__" and spec["dtype"] == "F32":
            spec["dtype"] = "F16"


def prefix_bert(header):
    for name in [n for n in header if n != "__metadata__"]:
        header["bert." + name] = header.pop(name)


def grow_embeddings(header):
    header["embeddings.word_embeddings.weight"]["shape"] = [30528, 384]


def add_head(header):
    header["classifier.weight"] = {"dtype": "F32", "shape": [2, 384], "data_offsets": [0, 3072]}
    header["classifier.bias"] = {"dtype": "F32", "shape": [2], "data_offsets": [3072, 3080]}


def drop_pooler(header):
    del header["pooler.dense.weight"], header["pooler.dense.bias"]


def snapshot(kit, header, seed, config=None, extra_lfs=None):
    files = {"model.safetensors": kit.lfs(seed, SIZE), **(extra_lfs or {})}
    manifests = {"model.safetensors": kit.manifest(header)} if header is not None else {}
    return kit.build(
        {"config.json": config or kit.bytes(f"{MINILM}/config.json")}, lfs_files=files, manifests=manifests
    )


HEADER_EDITS = [
    # (id, edit, checkpoint summary fragment, tensor counts)
    ("dtype", f32_to_f16, "model.safetensors: dtype changed: 103 F32 -> F16", {"dtype_changed": 103}),
    ("renamed", prefix_bert, "104 renamed (embeddings.LayerNorm.bias -> bert.embeddings.LayerNorm.bias, ...)",
     {"renamed": 104}),
    ("shape", grow_embeddings,
     "shape changed: embeddings.word_embeddings.weight [30522, 384] -> [30528, 384], parameters +2,304 "
     "(22,713,728 -> 22,716,032)", {"shape_changed": 1}),
    ("added", add_head, "2 tensors added, parameters +770", {"added": 2}),
    ("removed", drop_pooler, "2 tensors removed, parameters -147,840", {"removed": 2}),
]


@pytest.mark.parametrize("edit, fragment, counts", [r[1:] for r in HEADER_EDITS], ids=[r[0] for r in HEADER_EDITS])
def test_tensor_changes(kit, minilm_header, edit, fragment, counts):
    """Header edits give a file Change and a structural tensor-level Change with counts and examples."""
    new_header = copy.deepcopy(minilm_header)
    edit(new_header)
    file_change, tensor_change = weights.diff(snapshot(kit, minilm_header, "a"), snapshot(kit, new_header, "b"))
    assert file_change.summary == "model.safetensors changed (same size 90.87 MB, new sha256)"
    assert file_change.structural and not file_change.security
    assert tensor_change.kind is ChangeKind.WEIGHTS and tensor_change.path == "model.safetensors"
    assert fragment in tensor_change.summary
    assert tensor_change.detail["tensors"]["counts"] == counts
    assert tensor_change.structural and tensor_change.severity is Severity.WARNING
    json.dumps([file_change.to_dict(), tensor_change.to_dict()])


def test_silent_weight_swap(kit, minilm_header):
    """New sha256, same tensors, config.json unchanged: a silent weight swap (warning, security)."""
    [change] = weights.diff(snapshot(kit, minilm_header, "a"), snapshot(kit, minilm_header, "b"))
    assert "silent weight swap" in change.summary and change.detail["silent_weight_swap"]
    assert (change.severity, change.security, change.structural) == (Severity.WARNING, True, False)


def test_new_weights_with_a_config_change_are_not_a_silent_swap(kit, minilm_header):
    """When config.json changed in the same revision, new weights are an ordinary notice."""
    config = kit.bytes(f"{MINILM}/config.json").replace(b'"use_cache": true', b'"use_cache": false')
    [change] = weights.diff(snapshot(kit, minilm_header, "a"), snapshot(kit, minilm_header, "b", config=config))
    assert change.severity is Severity.NOTICE and not change.security
    assert "silent_weight_swap" not in change.detail


def test_per_file_parameters(kit, minilm_header):
    """The file Change carries its parameter count before and after."""
    new_header = copy.deepcopy(minilm_header)
    add_head(new_header)
    file_change, tensor_change = weights.diff(snapshot(kit, minilm_header, "a"), snapshot(kit, new_header, "b"))
    assert file_change.detail["parameters"] == {"old": 22_713_728, "new": 22_714_498, "delta": 770}
    assert tensor_change.detail["parameters"]["per_file"]["model.safetensors"]["delta"] == 770


@pytest.mark.parametrize(
    "old_lfs, new_lfs, path, severity, security, fragment",
    [
        ({}, {"pytorch_model.bin": ("p", 90_900_000)}, "pytorch_model.bin", Severity.WARNING, True,
         "pytorch_model.bin added (90.90 MB); pickle format, could not be checked (not scanned)"),
        ({"pytorch_model.bin": ("p", 90_900_000)}, {"pytorch_model.bin": ("q", 90_900_000)}, "pytorch_model.bin",
         Severity.WARNING, True, "pickle format, could not be checked"),
        ({}, {"training_args.bin": ("t", 5_304)}, "training_args.bin", Severity.WARNING, True,
         "pickle format, could not be checked"),
        ({"pytorch_model.bin": ("p", 90_900_000)}, {}, "pytorch_model.bin", Severity.NOTICE, False,
         "pytorch_model.bin removed (90.90 MB)"),
        ({}, {"model-q4_k_m.gguf": ("g", 4_920_000_000)}, "model-q4_k_m.gguf", Severity.WARNING, True,
         "model-q4_k_m.gguf added (4.92 GB); GGUF"),
        ({"model.gguf": ("g", 10)}, {"model.gguf": ("h", 12)}, "model.gguf", Severity.WARNING, True,
         "model.gguf changed (10 B -> 12 B); GGUF"),
        ({}, {"onnx/model.onnx": ("o", 90_000_000)}, "onnx/model.onnx", Severity.NOTICE, False,
         "onnx/model.onnx added (90.00 MB)"),
    ],
    ids=["pickle-added", "pickle-changed", "training-args", "pickle-removed", "gguf-added", "gguf-changed",
         "onnx-added"],
)
def test_formats(kit, old_lfs, new_lfs, path, severity, security, fragment):
    """A pickle added or changed but not scanned is a warning (could not be checked); GGUF without a header
    read a warning; other formats a notice; all by sha256 and size (scanned pickles: test_pickle_verdicts)."""
    old = kit.build(lfs_files={p: kit.lfs(*v) for p, v in old_lfs.items()})
    new = kit.build(lfs_files={p: kit.lfs(*v) for p, v in new_lfs.items()})
    [change] = weights.diff(old, new)
    assert change.path == path and fragment in change.summary
    assert (change.severity, change.security) == (severity, security)


def test_safetensors_replaced_by_pickle(kit, minilm_header):
    """model.safetensors removed while pytorch_model.bin remains: critical, naming the pickle file."""
    old = snapshot(kit, minilm_header, "a", extra_lfs={"pytorch_model.bin": kit.lfs("p", SIZE)})
    new = kit.build({"config.json": kit.bytes(f"{MINILM}/config.json")},
                    lfs_files={"pytorch_model.bin": kit.lfs("p", SIZE)})
    file_change, tensor_change = weights.diff(old, new)
    assert "pickle weights remain: pytorch_model.bin" in file_change.summary
    assert (file_change.severity, file_change.security) == (Severity.CRITICAL, True)
    assert file_change.detail["replaced_by_pickle"] == ["pytorch_model.bin"]
    assert tensor_change.summary.startswith("model.safetensors removed: 104 tensors removed")


def test_safetensors_removed_alone_is_not_critical(kit, minilm_header):
    """Removing safetensors with no pickle beside it is a notice."""
    file_change, _ = weights.diff(snapshot(kit, minilm_header, "a"), kit.build({}))
    assert file_change.severity is Severity.NOTICE and not file_change.security


def test_unreadable_header(kit, minilm_header):
    """A header that cannot be read becomes a warning carrying the reason."""
    error = "header length 10737418240 is larger than the 100,000 bytes read"
    new = kit.build({"config.json": kit.bytes(f"{MINILM}/config.json")},
                    lfs_files={"model.safetensors": kit.lfs("b", SIZE)},
                    manifests={"model.safetensors": WeightManifest(error=error)})
    [change] = weights.diff(snapshot(kit, minilm_header, "a"), new)
    assert change.severity is Severity.WARNING and change.detail["header_error"] == error
    assert f"header unreadable: {error}" in change.summary


def test_header_error_on_an_unchanged_file(kit, minilm_header):
    """A header newly unreadable on an unchanged file is still reported, once."""
    old = snapshot(kit, minilm_header, "a")
    new = snapshot(kit, None, "a")
    new.manifests["model.safetensors"] = WeightManifest(error="truncated header")
    [change] = weights.diff(old, new)
    assert change.summary == "model.safetensors: header unreadable (truncated header)"
    assert weights.diff(new, new) == []


def sharded(kit, header, cuts, seed):
    """A snapshot with the header's tensors spread over len(cuts)+1 shards and an index."""
    names = [n for n in header if n != "__metadata__"]
    bounds = [0, *cuts, len(names)]
    count = len(bounds) - 1
    weight_map, manifests, files = {}, {}, {}
    for i in range(count):
        shard = f"model-{i + 1:05d}-of-{count:05d}.safetensors"
        part = {n: header[n] for n in names[bounds[i] : bounds[i + 1]]}
        weight_map.update(dict.fromkeys(part, shard))
        manifests[shard], files[shard] = kit.manifest(part), kit.lfs(f"{seed}{shard}", 1000 + i)
    index = {"metadata": {"total_size": 90_861_824}, "weight_map": weight_map}
    return kit.build({"model.safetensors.index.json": index, "config.json": kit.bytes(f"{MINILM}/config.json")},
                     lfs_files=files, manifests=manifests)


def test_shards_recut(kit, minilm_header):
    """The same tensors re-cut from 2 into 3 shards: one index Change, no tensor changes."""
    changes = weights.diff(sharded(kit, minilm_header, [52], "a"), sharded(kit, minilm_header, [30, 70], "b"))
    index_change = next(c for c in changes if c.path == "model.safetensors.index.json")
    assert "shards re-cut (2 -> 3 files" in index_change.summary
    assert index_change.severity is Severity.NOTICE and not index_change.structural
    assert "tensors" not in index_change.detail


def test_sharded_tensor_change(kit, minilm_header):
    """A tensor re-shaped inside a sharded checkpoint is reported once, on the index."""
    grown = copy.deepcopy(minilm_header)
    grow_embeddings(grown)
    changes = weights.diff(sharded(kit, minilm_header, [52], "a"), sharded(kit, grown, [52], "b"))
    index_change = next(c for c in changes if c.path == "model.safetensors.index.json")
    assert "shape changed: embeddings.word_embeddings.weight" in index_change.summary
    assert index_change.structural and index_change.severity is Severity.WARNING


def test_malformed_index(kit, minilm_header):
    """An index that is not valid JSON is a warning with the parse error."""
    old = sharded(kit, minilm_header, [52], "a")
    new = sharded(kit, minilm_header, [52], "a")
    new.contents["model.safetensors.index.json"] = b'{"weight_map": '
    new.files["model.safetensors.index.json"] = kit.build({"model.safetensors.index.json": b'{"weight_map": '}).files[
        "model.safetensors.index.json"
    ]
    [change] = weights.diff(old, new)
    assert change.severity is Severity.WARNING and "not valid JSON" in change.detail["error"]


def test_renames_recognised_by_prefix_rule():
    """`transformer.h.N.` -> `model.layers.N.` renames pair up even where many tensors share a shape."""
    old = {f"transformer.h.{i}.attn.weight": ("BF16", (64, 64)) for i in range(4)}
    new = {f"model.layers.{i}.attn.weight": ("BF16", (64, 64)) for i in range(4)}
    pairs = weights.match_renames(old, new)
    assert sorted(pairs) == [(f"transformer.h.{i}.attn.weight", f"model.layers.{i}.attn.weight") for i in range(4)]


def test_first_revision_and_unchanged(kit, minilm_header):
    """No Change for the first revision, nor when nothing changed."""
    snap = snapshot(kit, minilm_header, "a")
    assert weights.diff(None, snap) == []
    assert weights.diff(snap, snapshot(kit, minilm_header, "a")) == []
