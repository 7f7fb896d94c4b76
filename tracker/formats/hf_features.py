"""The datasets library's feature types, as one line a user reads (`Value("int64")`, `ClassLabel(names=[neg, pos])`,
`Sequence(Value("string"))`, `Image`), from both places a dataset states them: the `huggingface` key-value
metadata of its Parquet files (`Features.to_dict()`: `{"dtype": "int64", "_type": "Value"}`) and its card's
`dataset_info.features` (the YAML list: `dtype: int64`, `dtype: {class_label: {names: {'0': neg}}}`,
`sequence: string`, `list: string`, `struct: [...]`). The same feature reads the same from either, so a card's
features compare with a footer's, and a column retyped between revisions is a changed string.

Input is untrusted: nesting is capped (`MAX_DEPTH`), long label lists are shown by count and digest, and a type
longer than `MAX_TYPE_CHARS` is cut with its digest, so the comparison stays exact and the text bounded.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

MAX_DEPTH = 32
SHOW_NAMES = 16  # ClassLabel names shown; more are a count and a digest
MAX_TYPE_CHARS = 2_000
MAX_COLUMNS = 100_000
# `dtype: image` in a card: the feature types whose YAML form is their lowercased name
NAMED_TYPES = {"image": "Image", "audio": "Audio", "video": "Video", "pdf": "Pdf", "nifti": "Nifti"}
QUIET_PARAMS = {"id", "_type", "decode"}  # parameters that do not change what a column holds


class FeatureError(ValueError):
    """A feature description we cannot read (too deep, or not a feature)."""


def feature_types(features: Any) -> tuple[dict[str, str] | None, str | None]:
    """{column: type} for a `Features.to_dict()` mapping, and a note when some or all of it is unreadable."""
    if not isinstance(features, dict):
        return None, "features are not a mapping"
    out, bad = {}, []
    for name, feature in list(features.items())[:MAX_COLUMNS]:
        try:
            out[str(name)] = _bounded(json_type(feature))
        except (FeatureError, RecursionError) as err:
            bad.append(f"{name}: {err}")
    note = f"features not read: {'; '.join(bad[:5])}" if bad else None
    if len(features) > MAX_COLUMNS:
        note = f"{len(features):,} features: the first {MAX_COLUMNS:,} read" + (f"; {note}" if note else "")
    return out, note


def json_type(feature: Any, depth: int = 0) -> str:
    """One feature of `Features.to_dict()` as its type line."""
    if depth > MAX_DEPTH:
        raise FeatureError(f"nested deeper than {MAX_DEPTH}")
    if isinstance(feature, list):  # the old `[feature]`: a list of it
        if len(feature) != 1:
            raise FeatureError(f"a list feature holds {len(feature)} types, not 1")
        return f"List({json_type(feature[0], depth + 1)})"
    if not isinstance(feature, dict):
        raise FeatureError(f"not a feature: {type(feature).__name__}")
    kind = feature.get("_type")
    if kind is None:  # a dict of features: a struct
        return _struct([(str(k), json_type(v, depth + 1)) for k, v in feature.items()])
    if kind == "Value":
        return f'Value("{feature.get("dtype")}")'
    if kind == "ClassLabel":
        return _class_label(feature.get("names"))
    params = {k: v for k, v in feature.items() if k not in QUIET_PARAMS}
    inner = params.pop("feature", None)
    args = [json_type(inner, depth + 1)] if inner is not None else []
    if kind in ("Sequence", "List", "LargeList") and params.get("length", -1) in (-1, None):
        params.pop("length", None)
    args += [f"{k}={_scalar(v)}" for k, v in sorted(params.items())]
    return f"{kind}({', '.join(args)})" if args else str(kind)


def yaml_type(entry: Any, depth: int = 0) -> str:
    """One item of a card's `dataset_info.features` list (without its `name`) as its type line."""
    if depth > MAX_DEPTH:
        raise FeatureError(f"nested deeper than {MAX_DEPTH}")
    if isinstance(entry, str):  # `sequence: string`: a Value, or a named type
        return NAMED_TYPES.get(entry, f'Value("{entry}")')
    if isinstance(entry, list):  # a struct as a list of named features
        return _struct([(str(item.get("name")), yaml_type(_without_name(item), depth + 1))
                        for item in entry if isinstance(item, dict)])
    if not isinstance(entry, dict):
        raise FeatureError(f"not a feature: {type(entry).__name__}")
    length = entry.get("length")
    for key, wrapper in (("sequence", "Sequence"), ("list", "List"), ("large_list", "LargeList")):
        if key in entry:
            inner = yaml_type(entry[key], depth + 1)
            suffix = f", length={length}" if isinstance(length, int) and length != -1 else ""
            return f"{wrapper}({inner}{suffix})"
    if "struct" in entry:
        return yaml_type(entry["struct"] if isinstance(entry["struct"], list) else [], depth + 1)
    dtype = entry.get("dtype")
    if isinstance(dtype, str):
        return NAMED_TYPES.get(dtype, f'Value("{dtype}")')
    if isinstance(dtype, dict) and len(dtype) == 1:
        (kind, params), = dtype.items()
        if kind == "class_label":
            names = (params or {}).get("names") if isinstance(params, dict) else None
            if isinstance(names, dict):  # {'0': neg, '1': pos}, in label order
                names = [names[k] for k in sorted(names, key=_label_index)]
            return _class_label(names)
        name = NAMED_TYPES.get(str(kind), str(kind))
        shown = {k: v for k, v in (params or {}).items() if k not in QUIET_PARAMS} if isinstance(params, dict) else {}
        args = [f"{k}={_scalar(v)}" for k, v in sorted(shown.items())]
        return f"{name}({', '.join(args)})" if args else name
    raise FeatureError("no dtype, sequence, list or struct")


def card_feature_types(items: Any) -> tuple[dict[str, str] | None, str | None]:
    """{column: type} for a card's `features` list (the YAML form), and a note when some is unreadable."""
    if isinstance(items, dict):  # a card that wrote the to_dict() form
        return feature_types(items)
    if not isinstance(items, list):
        return None, "features are not a list"
    out, bad = {}, []
    for item in items[:MAX_COLUMNS]:
        if not isinstance(item, dict) or "name" not in item:
            bad.append("an entry without a name")
            continue
        try:
            out[str(item["name"])] = _bounded(yaml_type(_without_name(item)))
        except (FeatureError, RecursionError) as err:
            bad.append(f"{item['name']}: {err}")
    return out, (f"features not read: {'; '.join(bad[:5])}" if bad else None)


def _without_name(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k != "name"}


def _label_index(key: Any) -> tuple[int, str]:
    try:
        return int(key), ""
    except (TypeError, ValueError):
        return 2**31, str(key)


def _struct(fields: list[tuple[str, str]]) -> str:
    return "{" + ", ".join(f"{name}: {kind}" for name, kind in fields) + "}"


def _class_label(names: Any) -> str:
    if not isinstance(names, list):
        return "ClassLabel"
    names = [str(n) for n in names]
    if len(names) <= SHOW_NAMES:
        return f"ClassLabel(names=[{', '.join(names)}])"
    return f"ClassLabel({len(names):,} names, {_digest(names)})"


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    return json.dumps(value, sort_keys=True, default=str)[:200]


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _bounded(text: str) -> str:
    if len(text) <= MAX_TYPE_CHARS:
        return text
    return f"{text[:MAX_TYPE_CHARS - 40]}… ({_digest(text)})"
