"""Running the estimator on a revision, and saying what its answer means next to the previous one."""

from __future__ import annotations

from typing import Any

from estimator import EstimateError, crossings, estimate, serving_crossings
from estimator.compare import mode_label
from estimator.gguf_inputs import estimate_gguf
from estimator.graph import structure_graph
from storage.history import NewEstimate
from tracker.formats.gguf import is_gguf
from tracker.revision.changes import Change, ChangeKind, Severity
from tracker.revision.classify import is_safetensors
from tracker.revision.snapshot import Snapshot

# The modes people plan for.
MODES = ("full_finetune", "lora", "qlora", "inference")


def manifest_of(snapshot: Snapshot) -> dict[str, tuple[str, tuple[int, ...]]] | None:
    """Every tensor of the revision's safetensors headers; for a repo without any, of its torch checkpoints'
    pickles (a repo shipping both, or Meta's original/ beside the transformers shards, is counted once);
    None when it has none readable."""
    readable = {path: m for path, m in snapshot.manifests.items() if not m.error}
    preferred = {p: m for p, m in readable.items() if is_safetensors(p)} or readable
    tensors = {t.name: (t.dtype, t.shape) for m in preferred.values() for t in m.tensors}
    return tensors or None


def gguf_scans(snapshot: Snapshot) -> dict[str, dict[str, Any]]:
    """The facts of every GGUF header the revision's scans read (path -> tracker/formats/gguf.py's facts, with
    the scan's `note` when it could not read all of it)."""
    return {path: {**scan.result, **({"note": scan.note} if scan.note else {})} for path, scan in snapshot.scans.items()
            if scan.format == "gguf" and path in snapshot.files and (scan.result.get("tensors") or scan.result.get("metadata"))}


def estimate_snapshot(snapshot: Snapshot, seq_len_cap: int = 2048, lora_rank: int = 16,
                      lora_targets: str | tuple[str, ...] = "all-linear", serve_contexts: tuple[int, ...] = (),
                      kv_dtype: str | None = None, gpu_memory_utilization: float = 0.9,
                      **costing: Any) -> NewEstimate | None:
    """The estimate of a revision (LoRA of ``lora_rank`` on ``lora_targets``; serving at ``serve_contexts`` too,
    with the cache at ``kv_dtype``); a repo of GGUF files alone is estimated from their headers
    (estimator/gguf_inputs.py); None when it has no config.json, no weight headers and no GGUF header. ``costing``
    (``cost``: a workload, ``cards``: the card table) adds what a run costs (estimator/cost.py)."""
    config, error = snapshot.read_json("config.json")
    manifest = manifest_of(snapshot)
    options: dict[str, Any] = {"seq_len_cap": seq_len_cap, "lora_rank": lora_rank, "lora_targets": lora_targets,
                               "serve_contexts": serve_contexts, "kv_dtype": kv_dtype,
                               "gpu_memory_utilization": gpu_memory_utilization, **costing}
    if config is None and manifest is None:
        if "config.json" in snapshot.files:
            return NewEstimate(None, None, error)
        ggufs = gguf_scans(snapshot)
        if not ggufs:
            return None
        try:
            result = estimate_gguf(ggufs, **options)
        except EstimateError as err:
            return NewEstimate(None, None, f"from the GGUF header: {err}")
        return None if result is None else NewEstimate(result.total, result.to_dict(), None)
    if config is not None and not isinstance(config, dict):
        return NewEstimate(None, None, "config.json is not a JSON object")
    try:
        result = estimate(config or {}, manifest, **options)
    except EstimateError as err:
        return NewEstimate(None, None, str(err))
    if config is not None:
        result.structure = structure_graph(config, seq_len_cap)  # every tower's module graph, for the pages and API
    return NewEstimate(result.total, result.to_dict(), None)


def should_estimate(is_baseline: bool, changes: list[Change], previous: dict[str, Any] | None) -> bool:
    """On a repo's first revision, when its structure changed, when a GGUF file was added, removed or changed (a
    GGUF-only repo's estimate reads them), or when no estimate stands yet."""
    return is_baseline or previous is None or any(
        c.structural or (c.kind == ChangeKind.WEIGHTS and is_gguf(c.path)) for c in changes)


def _card_lines(before: dict[str, Any], after: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Sentences for the (mode, card) pairs whose largest batch shrank, and those that now fit; then the cards
    whose serving concurrency fell, and those where it rose from none."""
    lost, gained = [], []
    for crossing in [*crossings(before, after), *serving_crossings(before, after)]:
        if crossing.before is None or crossing.after is None:
            continue
        if crossing.after < crossing.before:
            lost.append(crossing.summary)
        elif crossing.before == 0:
            gained.append(crossing.summary)
    return lost, gained


def _gib(value: int | None) -> str:
    return "?" if value is None else f"{value / 2**30:.1f} GiB"


def estimate_change(old: NewEstimate | None, new: NewEstimate, path: str = "config.json") -> Change | None:
    """The `estimate` Change between two estimates; None when nothing a person would notice moved. A GGUF-only
    repo's change names the GGUF file it was estimated from."""
    chosen = ((new.result or {}).get("serving") or {}).get("gguf", {}).get("chosen")
    path = chosen if isinstance(chosen, str) and path == "config.json" else path
    if new.result is None:
        if old is not None and old.result is None and old.error == new.error:
            return None
        return Change(
            kind=ChangeKind.ESTIMATE,
            path=path,
            summary=f"estimate: cannot be made: {new.error}",
            severity=Severity.NOTICE,
            detail={"error": new.error, "before": old.result if old else None},
        )
    before = old.result if old is not None else None
    if before is None:
        total = new.parameters_total
        full = new.result["memory"].get("full_finetune", {}).get("batch_1_bytes")
        return Change(
            kind=ChangeKind.ESTIMATE,
            path=path,
            summary=f"estimate: {total:,} parameters; full fine-tune at batch 1 needs {_gib(full)}"
            if total is not None
            else "estimate: " + "; ".join(new.result.get("notes", [])[:1]),
            severity=Severity.INFO,
            detail={"before": None, "after": _headline(new.result)},
        )
    parts = []
    old_total, new_total = before["parameters"].get("total"), new.result["parameters"].get("total")
    if old_total != new_total:
        parts.append(f"parameters {_count(old_total)} -> {_count(new_total)}")
    for mode in ("full_finetune", "lora"):
        a = before["memory"].get(mode, {}).get("batch_1_bytes")
        b = new.result["memory"].get(mode, {}).get("batch_1_bytes")
        if a != b:
            parts.append(f"{mode_label(mode)} batch 1 {_gib(a)} -> {_gib(b)}")
            continue
        per_a = before["memory"].get(mode, {}).get("per_sample_bytes")
        per_b = new.result["memory"].get(mode, {}).get("per_sample_bytes")
        if per_a != per_b and per_a is not None and per_b is not None:
            phase = new.result["memory"][mode].get("peak_phase_batch_1") or "step"
            parts.append(f"{mode_label(mode)} batch 1 peak unchanged at {_gib(b)} ({phase}-bound), activations "
                         f"{_gib(per_a)} -> {_gib(per_b)} a sample")
    lost, gained = _card_lines(before, new.result)
    if not parts and not lost and not gained:
        return None
    shown = (lost + gained)[:3]
    summary = "estimate: " + "; ".join(parts + shown)
    if len(lost) + len(gained) > len(shown):
        summary += f"; +{len(lost) + len(gained) - len(shown)} more card changes"
    return Change(
        kind=ChangeKind.ESTIMATE,
        path=path,
        summary=summary,
        severity=Severity.WARNING if lost else Severity.NOTICE,
        detail={"before": _headline(before), "after": _headline(new.result), "no_longer_fits": lost, "now_fits": gained},
    )


def _count(value: int | None) -> str:
    return "?" if value is None else f"{value:,}"


def _headline(result: dict[str, Any]) -> dict[str, Any]:
    """The figures an estimate change is about (the full result stays on the revision)."""
    return {
        "parameters": result["parameters"].get("total"),
        "used": result["parameters"].get("used"),
        "memory_batch_1": {m: result["memory"].get(m, {}).get("batch_1_bytes") for m in MODES},
        "max_batch": {card: data.get("max_batch", {}) for card, data in result.get("cards", {}).items()},
        **({"serving": _serving_headline(result["serving"])} if result.get("serving") else {}),
    }


def _serving_headline(serving: dict[str, Any]) -> dict[str, Any]:
    """Per card: whether the model loads and the concurrent sequences at each context; and the full context."""
    return {"full_context": serving.get("full_context"),
            "cards": {card: {k: row[k] for k in ("loads", "longest_context", "concurrency") if k in row}
                      for card, row in (serving.get("cards") or {}).items()}}
