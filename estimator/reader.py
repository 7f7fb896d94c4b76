"""Typed, bounded reads of config.json keys; every failure names the key that caused it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .errors import EstimateError

_MISSING = object()

# Upper bounds that no real checkpoint reaches; past them a value is a typo or an attack, not a model.
LIMITS = {
    "layers": 10_000,
    "width": 1_000_000,
    "heads": 100_000,
    "vocab": 100_000_000,
    "positions": 100_000_000,
    "experts": 100_000,
    "image": 100_000,
    "labels": 1_000_000,
    "channels": 10_000,
}


class ConfigReader:
    """Reads one (sub-)config dict; ``path`` prefixes key names in messages (``text_config.hidden_size``).

    ``defaults`` are transformers' own config-class defaults: a nested sub-config in a real checkpoint
    (llava's ``text_config``, siglip's ``vision_config``) leaves most keys to them. Each default used is
    recorded in ``defaulted`` so the estimate can say so.
    """

    def __init__(self, data: Any, path: str = "", defaults: dict[str, Any] | None = None) -> None:
        if not isinstance(data, dict):
            raise EstimateError(path or "config", f"expected a JSON object, got {type(data).__name__}")
        self.data = data
        self.path = path
        self.defaults = defaults or {}
        self.defaulted: list[str] = []

    def name(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def raw(self, key: str, default: Any = _MISSING) -> Any:
        value = self.data.get(key)
        if value is not None:
            return value
        if default is not _MISSING:
            return default
        if key in self.defaults:
            self.defaulted.append(f"{self.name(key)}={self.defaults[key]!r}")
            return self.defaults[key]
        raise EstimateError(self.name(key), "missing (needed to derive the structure)")

    def int(self, key: str, kind: str, default: Any = _MISSING, minimum: int = 1) -> int:
        value = self.raw(key, default)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise EstimateError(self.name(key), f"expected an integer, got {value!r}")
        if value < minimum:
            raise EstimateError(self.name(key), f"must be at least {minimum}, got {value}")
        if value > LIMITS[kind]:
            raise EstimateError(self.name(key), f"{value} is beyond any real model (limit {LIMITS[kind]:,})")
        return value

    def first_int(self, keys: Iterable[str], kind: str, default: Any = _MISSING, minimum: int = 1) -> int:
        """The first of several synonymous keys that is present (``n_embd`` / ``hidden_size``)."""
        keys = list(keys)
        for key in keys:
            if self.has(key):
                return self.int(key, kind, minimum=minimum)
        for key in keys:
            if key in self.defaults:
                return self.int(key, kind, minimum=minimum)
        if default is not _MISSING:
            return default
        raise EstimateError(self.name(keys[0]), "missing (needed to derive the structure)")

    def bool(self, key: str, default: Any = _MISSING) -> bool:
        value = self.raw(key, default)
        if not isinstance(value, bool):
            raise EstimateError(self.name(key), f"expected true or false, got {value!r}")
        return value

    def number(self, key: str, default: Any = _MISSING) -> float:
        value = self.raw(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise EstimateError(self.name(key), f"expected a number, got {value!r}")
        return float(value)

    def str(self, key: str, default: Any = _MISSING) -> str:
        value = self.raw(key, default)
        if not isinstance(value, str):
            raise EstimateError(self.name(key), f"expected a string, got {value!r}")
        return value

    def sub(self, key: str, defaults: dict[str, Any] | None = None) -> ConfigReader:
        value = self.data.get(key)
        return ConfigReader({} if value is None else value, self.name(key), defaults)

    def num_labels(self) -> int:
        labels = self.data.get("id2label")
        if isinstance(labels, dict) and labels:
            return len(labels)
        return self.int("num_labels", "labels", default=2)

    def head_dim(self, hidden: int, heads: int, key: str = "head_dim") -> int:
        """``head_dim`` when given, else hidden / heads, which must divide evenly."""
        if self.has(key):
            return self.int(key, "width")
        if hidden % heads:
            raise EstimateError(self.name("num_attention_heads"),
                                f"{heads} heads do not divide the hidden size {hidden}")
        return hidden // heads

    def kv_heads(self, heads: int, key: str = "num_key_value_heads") -> int:
        kv = self.int(key, "heads", default=heads)
        if heads % kv:
            raise EstimateError(self.name(key), f"{kv} key/value heads do not divide {heads} attention heads")
        return kv
