"""Torch checkpoints as the pipeline meets them: a data.pkl in a torch zip, scanned into a FileScan, and
replay histories whose commits carry such files served head + tail by Range (never loaded)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.pickle_bytes import Member, Ops, sparse_torch_zip, zip_bytes
from tracker.formats import FileScan
from tracker.formats.pickle_files import scan_file
from tracker.formats.pickle_rules import BUILTIN, Rules
from tracker.formats.ranged import BytesSource

FIXTURES = Path(__file__).parent.parent / "fixtures" / "pickles"


def tensor_pickle(payload: bytes = b"", tensors: int = 2) -> bytes:
    """A data.pkl as torch.save writes a state dict: `tensors` float tensors `layers.N.weight` of shape
    (4, 8) over FloatStorage key N, plus `payload` (a pickle fragment without PROTO/STOP that leaves one
    value: a callable's result) stored under the key "x" when given."""
    return state_dict_pickle([(f"layers.{n}.weight", "FloatStorage", (4, 8)) for n in range(tensors)], payload)


def state_dict_pickle(tensors: list[tuple[str, str, tuple[int, ...]]], payload: bytes = b"") -> bytes:
    """A data.pkl as torch.save writes a state dict of contiguous tensors (name, storage type, shape), each
    `torch._utils._rebuild_tensor_v2` over its own storage (persistent id ('storage', type, key, 'cpu',
    numel)), opcode by opcode; `payload` as in tensor_pickle."""
    ops = Ops().empty_dict.mark
    for n, (name, storage, shape) in enumerate(tensors):
        numel, strides = 1, []
        for size in reversed(shape):
            strides.insert(0, numel)
            numel *= size
        ops.string(name).glob("torch._utils", "_rebuild_tensor_v2").mark.mark.string("storage")
        ops.glob("torch", storage).string(str(n)).string("cpu").raw(_int(numel)).tuple_.binpersid.int1(0)
        ops.raw(b"(")  # MARK
        for size in shape:
            ops.raw(_int(size))
        ops.raw(b"t(")  # TUPLE, MARK
        for stride in strides:
            ops.raw(_int(stride))
        ops.tuple_.raw(b"\x89").glob("collections", "OrderedDict").empty_tuple.reduce.tuple_.raw(b"R")  # REDUCE
    if payload:
        ops.string("x").raw(payload)
    return ops.setitems.stop.bytes()


def _int(value: int) -> bytes:
    """The opcode pickle writes for a non-negative int: BININT1, BININT or LONG1."""
    if value < 256:
        return b"K" + bytes([value])
    if value < 2**31:
        return b"J" + value.to_bytes(4, "little")
    data = value.to_bytes((value.bit_length() + 8) // 8, "little")
    return b"\x8a" + bytes([len(data)]) + data


def calling_fragment(module: str, name: str, *args: str) -> bytes:
    """A pickle fragment (no PROTO/STOP) calling `module.name(*args)`."""
    return Ops(None).call(module, name, *args).bytes()


def torch_zip(data_pkl: bytes, storages: int = 2, prefix: str = "archive") -> bytes:
    """A whole small torch zip: data.pkl, byteorder, one 128-byte storage per tensor, version."""
    members = [Member(f"{prefix}/data.pkl", data_pkl), Member(f"{prefix}/byteorder", b"little")]
    members += [Member(f"{prefix}/data/{n}", bytes(128)) for n in range(storages)]
    return zip_bytes([*members, Member(f"{prefix}/version", b"3\n")])


def scanned(path: str, data: bytes, rules: Rules = BUILTIN) -> FileScan:
    """The FileScan the pipeline stores for a file of these bytes (scanned from memory)."""
    source = BytesSource(data)
    result, _, note = scan_file(path, source, rules)
    return FileScan("pickle", result, source.bytes_read, note, str(result.get("rules_version")))


@dataclass(frozen=True)
class PickleFile:
    """A file served by the replay: `head` bytes, zeros, then `tail` at the end of `size` bytes."""

    head: bytes
    tail: bytes = b""
    size: int | None = None


def sparse(data_pkl: bytes, storage_bytes: int = 4 * 2**30, tensors: int = 2) -> PickleFile:
    """A torch zip of `storage_bytes` of weights whose data.pkl and central directory alone are real."""
    head, tail, size = sparse_torch_zip(data_pkl, {str(n): storage_bytes // tensors for n in range(tensors)})
    return PickleFile(head, tail, size)


def sparse_state_dict(tensors: list[tuple[str, str, tuple[int, ...]]], prefix: str = "archive") -> PickleFile:
    """A torch zip of this state dict (see state_dict_pickle) whose storages are zeros never read."""
    widths = {"BFloat16Storage": 2, "HalfStorage": 2, "FloatStorage": 4}
    sizes = {}
    for n, (_, storage, shape) in enumerate(tensors):
        numel = 1
        for size in shape:
            numel *= size
        sizes[str(n)] = numel * widths[storage]
    head, tail, size = sparse_torch_zip(state_dict_pickle(tensors), sizes, prefix)
    return PickleFile(head, tail, size)


def whole(data: bytes) -> PickleFile:
    return PickleFile(data)


def write_pickle_repo(root: Path, repo_id: str, commits: list[dict[str, Any]]) -> None:
    """A replay history whose commits carry pickle files: [{"title", "files": {path: json-or-text},
    "pickles": {path: PickleFile}}], oldest first (tests/support/synthetic_repos.write_repo's format)."""
    from tests.support.synthetic_repos import write_repo

    plain = []
    for commit in commits:
        lfs = {}
        for i, (path, spec) in enumerate(dict(commit.get("pickles", {})).items()):
            entry: dict[str, Any] = {"head": f"pickles/{i}.head", "size": spec.size or len(spec.head) + len(spec.tail)}
            if spec.tail:
                entry["tail"] = f"pickles/{i}.tail"
            lfs[path] = entry
        plain.append({**{k: v for k, v in commit.items() if k != "pickles"}, "lfs": lfs})
    write_repo(root, repo_id, plain)
    for n, commit in enumerate(commits, start=1):
        folder = root / repo_id / "commits" / f"{n:04d}-commit" / "pickles"
        for i, spec in enumerate(dict(commit.get("pickles", {})).values()):
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{i}.head").write_bytes(spec.head)
            if spec.tail:
                (folder / f"{i}.tail").write_bytes(spec.tail)
