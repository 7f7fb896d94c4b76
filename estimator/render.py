"""The readable table the CLI prints for an estimate."""

from __future__ import annotations

from .result import Estimate


def _n(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _gib(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 1024**3 / 10:
        return f"{value / 1024**2:.1f} MiB"
    return f"{value / 1024**3:.2f} GiB"


def render_table(result: Estimate) -> str:
    p = result.parameters
    lines = ["Parameters"]
    delta = p.get("delta")
    lines.append(f"  total      {_n(p['total'])}  (used: {p.get('used') or 'none'})")
    from_weights = result.input.get("structure_source") == "weights"
    lines.append(f"  derived    {_n(p['derived'])}"
                 + ("  (structure read from the weight manifest)" if from_weights else ""))
    lines.append(f"  checkpoint {_n(p['checkpoint'])}"
                 + (f"  delta {delta['parameters']:+,} ({delta['percent']:+.2f}%)" if delta else ""))
    for title, key in (("by tower", "by_tower"), ("by component", "by_component"), ("by dtype", "by_dtype")):
        if p.get(key):
            lines.append(f"  {title}: " + ", ".join(f"{k} {_n(v)}" for k, v in p[key].items()))
    lines.append("Input")
    for key, value in result.input.items():
        lines.append(f"  {key}: {value}")
    modes = [name for name in result.memory if name != "assumptions"]
    if modes:
        lines.append("Memory at batch 1")
        width = max(len(m) for m in modes)
        for name in modes:
            m = result.memory[name]
            per = m["per_sample_bytes"]
            phase = m.get("peak_phase_batch_1")
            lines.append(f"  {name:<{width}}  {_gib(m['batch_1_bytes']):>12}   (+{_gib(per)} a sample"
                         + (f"; peak in {phase})" if phase else f"; activations unknown, at least "
                            f"{_gib(m.get('floor_bytes'))})"))
        a = result.memory["assumptions"]
        lines.append(f"  includes a {a['cuda_context_bytes'] / 1024**2:.0f} MiB CUDA-context allowance; "
                     f"cards keep {a['headroom_fraction']:.0%} free")
    if result.cards:
        lines.append("Largest batch per card (0: does not fit)")
        header = "  " + f"{'card':<12}" + "".join(f"{m:>17}" for m in modes)
        lines.append(header)
        for card, row in result.cards.items():
            cells = "".join(f"{_n(row['max_batch'].get(m)):>17}" for m in modes)
            lines.append(f"  {card:<12}{cells}")
        unsure = [f"{card}: " + ", ".join(f"{m} {v.replace('_', ' ')}" for m, v in row["verdict_batch_1"].items()
                                         if v in ("borderline", "activations_unknown"))
                  for card, row in result.cards.items() if "verdict_batch_1" in row]
        unsure = [line for line in unsure if not line.endswith(": ")]
        if unsure:
            lines.append("  batch 1 too close to call (within " f"{result.memory['assumptions']['borderline_fraction']:.0%}"
                         " of the card) or unknown: " + "; ".join(unsure))
    for title, items in (("Notes", result.notes), ("Warnings", result.warnings)):
        if items:
            lines.append(title)
            lines.extend(f"  - {item}" for item in items)
    return "\n".join(lines)


def render_serving(serving: dict | None) -> str:
    """The serving section as a table: the cache per sequence per runtime, then per card whether the model
    loads, its longest context and the concurrent sequences at each context."""
    if not serving:
        return "Serving\n  unknown: no serving figures"
    lines = ["Serving (vLLM's paged cache; transformers' cache beside it)"]
    if serving.get("unknown"):
        lines.append(f"  unknown: {serving['unknown']}")
    w = serving.get("weights") or {}
    lines.append(f"  weights    {_gib(w.get('bytes'))}  ({w.get('source')})")
    a = serving.get("allowance") or {}
    lines.append(f"  allowance  {_gib(a.get('bytes'))}  (CUDA context, vLLM's profile run, CUDA graphs)")
    lines.append(f"  KV cache at {serving.get('kv_dtype')}, usable fraction {serving.get('gpu_memory_utilization')}, "
                 f"full context {_n(serving.get('full_context'))}")
    contexts = [str(c) for c in serving.get("contexts", [])]
    kv = serving.get("kv_cache") or {}
    for runtime in ("transformers", "vllm"):
        r = kv.get(runtime) or {}
        if "at_context" in r:
            cells = ", ".join(f"{c}: {_gib(r['at_context'][c])}" for c in contexts)
            lines.append(f"  {runtime:<12} per sequence {cells}; fixed {_gib(r['fixed_bytes_per_sequence'])}")
    if kv.get("mla"):
        m = kv["mla"]
        lines.append(f"  latent attention: {m['latent_bytes_per_token']:,} bytes a token (latent), "
                     f"{m['decompressed_bytes_per_token']:,} decompressed")
    if serving.get("cards"):
        lines.append("  " + f"{'card':<12}{'loads':>6}{'longest':>10}" + "".join(f"{'@' + c:>10}" for c in contexts))
        for card, row in serving["cards"].items():
            if "concurrency" not in row:
                lines.append(f"  {card:<12}  unknown: {row.get('unknown')}")
                continue
            cells = "".join(f"{_n(row['concurrency'].get(c)):>10}" for c in contexts)
            lines.append(f"  {card:<12}{'yes' if row['loads'] else 'no':>6}{_n(row['longest_context']):>10}{cells}")
    gguf = serving.get("gguf") or {}
    if gguf.get("models"):
        lines.append(f"  GGUF models (the figures above are {gguf.get('chosen')}'s, the largest):")
        for m in gguf["models"]:
            loads = [card for card, row in (m.get("cards") or {}).items() if row.get("loads")]
            lines.append(f"    {m.get('name')}  {m.get('file_type') or '?'}  {_gib(m.get('weights_bytes'))}  "
                         f"loads on: {', '.join(loads) or 'no card'}")
    for note in serving.get("notes", []):
        lines.append(f"  - {note}")
    return "\n".join(lines)
