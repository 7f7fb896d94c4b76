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
    (4, 8) (torch._utils._rebuild_tensor_v2 over FloatStorage key N), plus `payload` (a pickle fragment
    without PROTO/STOP that leaves one value: a callable's result) stored under the key "x" when given."""
    ops = Ops().empty_dict.mark
    for n in range(tensors):
        ops.string(f"layers.{n}.weight").glob("torch._utils", "_rebuild_tensor_v2").mark.mark.string("storage")
        ops.glob("torch", "FloatStorage").string(str(n)).string("cpu").int1(32).tuple_.binpersid.int1(0)
        ops.int1(4).int1(8).tuple2.int1(8).int1(1).tuple2.raw(b"\x89").glob("collections", "OrderedDict")
        ops.empty_tuple.reduce.tuple_.raw(b"R")  # REDUCE: the tensor
    if payload:
        ops.string("x").raw(payload)
    return ops.setitems.stop.bytes()


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
