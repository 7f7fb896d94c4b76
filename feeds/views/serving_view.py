"""An estimate's serving figures (estimator/serving.py's `serving` section) as the pages show them: per card whether
the model loads, the longest context one sequence holds and the concurrent sequences at 8k, 32k and the full
context; the KV cache per runtime; the weights, the runtime allowance and the usable fraction with their sources.

Reads stored JSON defensively: an estimate stored before serving figures existed, or a field missing, shows as
absent, never as an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

GIB = 2**30
RUNTIME_LABELS = {"transformers": "transformers (DynamicCache)", "vllm": "vLLM (paged cache)"}
UTILIZATION_SOURCE = "vLLM's gpu_memory_utilization (its default 0.9 unless [estimate] gpu_memory_utilization says)"


@dataclass
class CardRow:
    name: str
    memory_gib: float | None
    usable_gib: float | None
    verdict: str  # "loads", "does not load at its full context", "weights do not fit", "unknown: ..."
    loads: bool
    longest_context: int | None
    concurrency: list[int | None]  # at each of ServingView.contexts


@dataclass
class RuntimeRow:
    label: str
    bytes_per_token: int | None
    fixed_bytes: int | None
    at_context: list[int | None]  # bytes at each of ServingView.contexts


@dataclass
class GgufRow:
    name: str
    file_type: str
    weights_gib: float | None
    loads_on: list[str]  # cards where it loads at its full context
    full_context: int | None


@dataclass
class ServingView:
    contexts: list[int]  # 8k, 32k, the full context and any asked, ascending
    full_context: int | None
    kv_dtype: str
    weights_gib: float | None
    weights_source: str
    allowance_gib: float | None
    allowance_text: str
    utilization: float | None
    utilization_source: str = UTILIZATION_SOURCE
    cards: list[CardRow] = field(default_factory=list)
    runtimes: list[RuntimeRow] = field(default_factory=list)
    layers: str = ""
    unknown: str | None = None
    notes: list[str] = field(default_factory=list)
    gguf: list[GgufRow] = field(default_factory=list)
    gguf_chosen: str | None = None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _gib(value: Any) -> float | None:
    n = _int(value)
    return None if n is None else n / GIB


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def context_label(n: int) -> str:
    """8192 -> "8k", 131072 -> "128k", 1000 -> "1,000"."""
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else f"{n:,}"


def _verdict(row: Mapping[str, Any]) -> str:
    if row.get("unknown"):
        return f"unknown: {row['unknown']}"
    if row.get("loads"):
        return "loads"
    if row.get("weights_fit") is False:
        return "weights do not fit"
    return "does not load at its full context"


def serving_view(result: Mapping[str, Any] | None) -> ServingView | None:
    """The serving section of a stored estimate, or None when it has none."""
    serving = _map(_map(result).get("serving"))
    if not serving:
        return None
    contexts = sorted({c for c in (_int(c) for c in serving.get("contexts") or []) if c})
    weights, allowance = _map(serving.get("weights")), _map(serving.get("allowance"))
    utilization = serving.get("gpu_memory_utilization")
    view = ServingView(
        contexts=contexts, full_context=_int(serving.get("full_context")), kv_dtype=str(serving.get("kv_dtype") or "?"),
        weights_gib=_gib(weights.get("bytes")), weights_source=str(weights.get("source") or "unknown"),
        allowance_gib=_gib(allowance.get("bytes")), allowance_text=str(allowance.get("text") or ""),
        utilization=float(utilization) if isinstance(utilization, int | float) and not isinstance(utilization, bool)
        else None,
        unknown=str(serving["unknown"]) if serving.get("unknown") else None,
        notes=[str(n) for n in serving.get("notes") or [] if isinstance(n, str)][:30],
    )
    for name, row in _map(serving.get("cards")).items():
        row = _map(row)
        concurrency = _map(row.get("concurrency"))
        view.cards.append(CardRow(str(name), _gib(row.get("memory_bytes")), _gib(row.get("usable_bytes")), _verdict(row),
                                  bool(row.get("loads")), _int(row.get("longest_context")),
                                  [_int(concurrency.get(str(c))) for c in contexts]))
    kv = _map(serving.get("kv_cache"))
    for runtime, label in RUNTIME_LABELS.items():
        entry = _map(kv.get(runtime))
        if entry:
            at = _map(entry.get("at_context"))
            view.runtimes.append(RuntimeRow(label, _int(entry.get("bytes_per_token")),
                                            _int(entry.get("fixed_bytes_per_sequence")),
                                            [_int(at.get(str(c))) for c in contexts]))
    view.layers = ", ".join(_layer_text(_map(g)) for g in kv.get("layers") or [] if isinstance(g, Mapping))
    gguf = _map(serving.get("gguf"))
    view.gguf_chosen = str(gguf["chosen"]) if gguf.get("chosen") else None
    for model in gguf.get("models") or []:
        model = _map(model)
        cards = _map(model.get("cards"))
        view.gguf.append(GgufRow(str(model.get("name") or "?"), str(model.get("file_type") or "type unknown"),
                                 _gib(model.get("weights_bytes")),
                                 [str(c) for c, r in cards.items() if _map(r).get("loads")],
                                 _int(model.get("full_context"))))
    return view


def _layer_text(group: Mapping[str, Any]) -> str:
    kind, count, window = group.get("kind"), group.get("count"), group.get("window")
    return f"{count} {kind}" + (f" (window {window:,})" if isinstance(window, int) else "")
