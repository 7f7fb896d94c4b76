"""The tensors a torch pickle rebuilds, read off its scan: the manifest safetensors headers give.

torch writes each tensor as a call of one of its rebuild functions (`torch._utils._rebuild_tensor_v2`
and kin) over a persistent id `('storage', <storage type>, key, location, numel)`; the state dict is
a dict (or `collections.OrderedDict`) of those, possibly nested in a training checkpoint
(`{"model": ..., "optimizer": ..., "epoch": ...}`). Nothing here runs the pickle: the calls are the
symbolic `Call` values `pickle_scan` built.
"""

from __future__ import annotations

from typing import Any

from tracker.formats.manifest import TensorInfo, WeightManifest
from tracker.formats.pickle_scan import MAX_NESTING, Call, Global, Persistent, PickledDict, PickleScan

REBUILD = "torch._utils."
STORAGE_DTYPES = {
    "FloatStorage": "F32", "DoubleStorage": "F64", "HalfStorage": "F16", "BFloat16Storage": "BF16",
    "LongStorage": "I64", "IntStorage": "I32", "ShortStorage": "I16", "CharStorage": "I8",
    "ByteStorage": "U8", "BoolStorage": "BOOL", "ComplexFloatStorage": "C64", "ComplexDoubleStorage": "C128",
    "QInt8Storage": "I8", "QUInt8Storage": "U8", "QInt32Storage": "I32",
}  # fmt: skip
TORCH_DTYPES = {
    "float32": "F32", "float": "F32", "float64": "F64", "double": "F64", "float16": "F16", "half": "F16",
    "bfloat16": "BF16", "int64": "I64", "long": "I64", "int32": "I32", "int": "I32", "int16": "I16",
    "short": "I16", "int8": "I8", "uint8": "U8", "uint16": "U16", "uint32": "U32", "uint64": "U64",
    "bool": "BOOL", "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2", "complex64": "C64",
    "complex128": "C128", "qint8": "I8", "quint8": "U8", "qint32": "I32",
}  # fmt: skip
STATE_DICT_KEYS = ("state_dict", "model_state_dict", "model", "module", "net", "params", "ema", "weights")


def tensors_of(scan: PickleScan, storages: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """Every tensor the pickle's top-level values hold: name within its dict, the dicts around it, dtype,
    shape, storage key, numel (as the persistent id gives it) and the storage's bytes when known."""
    found: list[dict[str, Any]] = []
    seen: set[int] = set()
    for value in scan.results:
        _walk(value, (), found, seen, storages or {}, 0)
    return found


def _walk(value: Any, path: tuple[str, ...], found: list, seen: set[int], storages: dict[str, int], depth: int) -> None:
    if depth > MAX_NESTING or id(value) in seen:
        return
    tensor = tensor_of(value)
    if tensor is not None:
        if path:
            tensor = {"name": path[-1], "within": "/".join(path[:-1]), **tensor}
            if tensor["storage_key"] in storages:
                tensor["storage_bytes"] = storages[tensor["storage_key"]]
            found.append(tensor)
        return
    items = _mapping_items(value)
    if items is None:
        return
    seen.add(id(value))
    for key, item in items:
        if isinstance(key, str | int) and not isinstance(key, bool):
            _walk(item, (*path, str(key)), found, seen, storages, depth + 1)


def _mapping_items(value: Any) -> list[tuple[Any, Any]] | None:
    if isinstance(value, PickledDict):
        return value.items
    if isinstance(value, Call) and isinstance(value.func, Global) and value.func.dotted == "collections.OrderedDict":
        return value.items
    return None


def tensor_of(value: Any, depth: int = 0) -> dict[str, Any] | None:
    """The dtype, shape and storage of a rebuild call, or None when `value` is not one."""
    if depth > 4 or not isinstance(value, Call) or not isinstance(value.func, Global):
        return None
    name = value.func.dotted
    args = value.args if isinstance(value.args, tuple) else ()
    if name == "torch._tensor._rebuild_from_type_v2":
        name = REBUILD + "_rebuild_from_type_v2"
    if not name.startswith(REBUILD):
        return None
    kind = name[len(REBUILD) :]
    if kind in ("_rebuild_parameter", "_rebuild_parameter_with_state") and args:
        return tensor_of(args[0], depth + 1)
    if kind == "_rebuild_from_type_v2" and len(args) >= 3 and isinstance(args[2], tuple):
        return tensor_of(Call(args[0], args[2], value.offset), depth + 1)
    if kind == "_rebuild_meta_tensor_no_storage" and len(args) >= 2:
        return _described(_torch_dtype(args[0]), args[1], None, None)
    if kind in ("_rebuild_tensor", "_rebuild_tensor_v2", "_rebuild_tensor_v3", "_rebuild_qtensor") and len(args) >= 3:
        storage = args[0]
        pid = storage.pid if isinstance(storage, Persistent) else None
        if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage"):
            return None
        dtype = _storage_dtype(pid[1])
        if dtype == "untyped" and kind == "_rebuild_tensor_v3" and len(args) >= 7:
            dtype = _torch_dtype(args[6])
        return _described(dtype, args[2], pid[2], pid[4])
    return None


def _described(dtype: str | None, shape: Any, key: Any, numel: Any) -> dict[str, Any] | None:
    if dtype is None or not isinstance(shape, tuple) or not all(isinstance(d, int) and d >= 0 for d in shape):
        return None
    return {"dtype": dtype, "shape": list(shape), "storage_key": None if key is None else str(key),
            "numel": numel if isinstance(numel, int) else None}  # fmt: skip


def _storage_dtype(kind: Any) -> str | None:
    if not isinstance(kind, Global):
        return None
    if kind.dotted in ("torch.UntypedStorage", "torch.storage.UntypedStorage"):
        return "untyped"
    return STORAGE_DTYPES.get(kind.name) if kind.module in ("torch", "torch.storage") else None


def _torch_dtype(value: Any) -> str | None:
    if isinstance(value, Global) and value.module == "torch":
        return TORCH_DTYPES.get(value.name)
    return None


def state_dict_root(tensors: list[dict[str, Any]]) -> str:
    """Which dict is the model's state dict: the top level if it holds tensors, else the first of the
    usual checkpoint keys (`state_dict`, `model`, ...), else the dict holding the most tensors."""
    places = [t["within"] for t in tensors]
    if not places or "" in places:
        return ""
    for key in STATE_DICT_KEYS:
        if key in places:
            return key
    return max(set(places), key=places.count)


def to_weight_manifest(tensors: list[dict[str, Any]]) -> WeightManifest:
    """The project's manifest (the tensors of the state dict, dtypes as safetensors names them)."""
    root = state_dict_root(tensors)
    chosen = [t for t in tensors if t["within"] == root]
    metadata = {"format": "pt"} | ({"state_dict": root} if root else {})
    return WeightManifest(tuple(TensorInfo(t["name"], t["dtype"], tuple(t["shape"])) for t in chosen), metadata)

