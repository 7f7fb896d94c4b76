"""What a run costs: a roofline estimate of training time and money per card, and serving throughput and money
per million output tokens. Pure: the structure, the memory figures and the serving section in, plain JSON out.

Training FLOPs per sample come from the structure's own matmuls (``Structure.flop_matmuls``: every linear's
weight elements times the tokens a sample pushes through it, the LM head and patch convolutions included) and
attention's two products (QK^T and AV, 2 x tokens x keys x query width each, counted over the full square as
PaLM's and Chinchilla's FLOP counts do; a causal kernel that skips the masked half does less). A full fine-tune
is forward + backward = 3 x forward (backward computes the activations' and the weights' gradients); gradient
checkpointing adds one forward; LoRA's frozen base needs the activations' gradients but not its weights',
so about 2 x forward, plus the adapters' own 3 x (2 x rank x (in + out)) a token.

Time per optimizer step is the larger of compute (FLOPs / (dense peak x utilisation)) and memory traffic (bytes /
(bandwidth x its utilisation)) per micro-batch, plus the optimizer's traffic; a run is epochs x ceil(samples /
batch) steps. Where the batch does not fit a card, micro-batches of the largest batch that fits accumulate to it;
where batch 1 does not fit, gradient checkpointing is tried; where nothing fits, the card gets no time.

Serving: at the concurrency that fits the KV budget (serving.py's), each decode step reads the weights once and
every sequence's KV cache (bandwidth-bound) or computes 2 x active parameters a token (compute-bound), whichever
is slower; each request's prompt is prefilled compute-bound. Tokens per second and USD per million output
tokens follow.

No figure here was measured on a card: the utilisations are derived from published measurements
(utilisation.py), each with its source and the day it was read.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from . import utilisation
from .cards import PRICED_CARDS, Card
from .errors import EstimateError
from .kv_cache import layout
from .serving import MAX_NUM_SEQS, per_sequence
from .structure import Structure

# Declared from published measurements (estimator/utilisation.py: the sources, the rows and the rule, the median
# rounded down to 5%); tests/estimator/test_utilisation.py checks them. Rows hubwatch measures itself
# (benchmarks/bench_cost_gpu.py on a CUDA card) replace the published ones of their kind once committed there.
TRAIN_UTILISATION = utilisation.declared("train")          # MFU of bf16 training: 40% (H100 runs' median 41.9%)
SERVE_UTILISATION = utilisation.declared("serve")          # prefill and batched decode compute: 45%
BANDWIDTH_UTILISATION = utilisation.declared("bandwidth")  # decode bandwidth over the datasheet's: 65%
# Bytes moved per parameter (memory.py's layout: fp32 master weights, bf16 autocast copies, fp32 grads, AdamW):
FULL_MICRO_BYTES = 14         # a micro-batch: bf16 copy read in the forward (2) and twice in the backward (4),
                              # fp32 gradient accumulated (read and write, 8)
FULL_STEP_BYTES = 34          # an optimizer step: AdamW reads weight, grad, m, v and writes weight, m, v (28);
                              # autocast's bf16 copies made again from the fp32 weights (4 read, 2 written)
LORA_MICRO_BYTES = 4          # a frozen bf16 base read in the forward and once in the backward
LORA_STEP_BYTES = 34          # per adapter parameter, as a full fine-tune's
TRAIN_DTYPE = "bf16"          # bf16 autocast (fp16 on a card without bf16)

DEFAULT_EPOCHS = 10           # the seed pages' workload: 10 epochs at batch 32 over 50,000 samples
DEFAULT_BATCH = 32
DEFAULT_SAMPLES = 50_000
DEFAULT_PROMPT_TOKENS = 1024  # a serving request: its prompt and the tokens generated for it
DEFAULT_OUTPUT_TOKENS = 256
MAX_WORKLOAD = 10**12


@dataclass(frozen=True)
class Workload:
    """The run priced: ``epochs`` over ``samples`` at ``batch``; serving requests of ``prompt_tokens`` in and
    ``output_tokens`` out."""

    epochs: int = DEFAULT_EPOCHS
    batch: int = DEFAULT_BATCH
    samples: int = DEFAULT_SAMPLES
    prompt_tokens: int = DEFAULT_PROMPT_TOKENS
    output_tokens: int = DEFAULT_OUTPUT_TOKENS

    def __post_init__(self) -> None:
        for name in ("epochs", "batch", "samples", "prompt_tokens", "output_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_WORKLOAD:
                raise EstimateError(f"cost.{name}", f"expected an integer from 1 to {MAX_WORKLOAD:,}, got {value!r}")

    @property
    def steps(self) -> int:
        return self.epochs * math.ceil(self.samples / self.batch)

    def to_dict(self) -> dict:
        return {"epochs": self.epochs, "batch": self.batch, "samples": self.samples, "optimizer_steps": self.steps,
                "serve_prompt_tokens": self.prompt_tokens, "serve_output_tokens": self.output_tokens}


@dataclass(frozen=True)
class Flops:
    """Forward FLOPs per sample: the matmuls', attention's, and LoRA's adapters (forward, at ``rank``)."""

    matmuls: int
    attention: int
    adapters: int

    @property
    def forward(self) -> int:
        return self.matmuls + self.attention

    def train(self, mode: str) -> int:
        """FLOPs per sample of one training step in ``mode`` (full_finetune, lora, with ``_gc`` or not)."""
        recompute = self.forward if mode.endswith("_gc") else 0
        if mode.startswith("lora"):
            return 2 * self.forward + 3 * self.adapters + recompute
        return 3 * self.forward + recompute


def tower_tokens(s: Structure) -> dict[str, float]:
    """Tokens a sample pushes through each tower's layers (a layer-weighted mean where stacks differ)."""
    layers: dict[str, int] = {}
    weighted: dict[str, float] = {}
    for st in s.stacks:
        layers[st.tower] = layers.get(st.tower, 0) + st.layers
        weighted[st.tower] = weighted.get(st.tower, 0) + st.layers * st.tokens
    return {t: weighted[t] / layers[t] for t in layers if layers[t]}


def flops(s: Structure, rank: int = 16, roles: list[str] | None = None) -> Flops:
    """Forward FLOPs per sample from the structure; LoRA's adapters at ``rank`` on ``roles`` (every one: None)."""
    tokens = tower_tokens(s)
    matmuls = 0.0
    for tower, elements, n in s.flop_matmuls:
        matmuls += 2 * elements * (tokens.get(tower, 1) if n is None else n)
    attention = 0.0
    for st in s.stacks:
        width = st.attn_width or st.hidden
        attention += st.layers * 2 * 2 * st.tokens * st.tokens * width  # QK^T and AV over the full square
        if st.cross_kv_tokens:
            attention += st.layers * 2 * 2 * st.tokens * st.cross_kv_tokens * width
    chosen = [s.lora_roles[r] for r in (s.lora_roles if roles is None else roles)]
    adapters = sum(2 * rank * (lin.dims / max(sum(lin.count.values()), 1)) * sum(
        count * tokens.get(tower, 1) for tower, count in lin.count.items()) for lin in chosen)
    return Flops(int(matmuls), int(attention), int(adapters))


def _mode_for(cards: Mapping, card: str, batch: int, prefix: str) -> tuple[str | None, int | None, str | None]:
    """(mode, micro-batch, note): the mode that holds at least batch 1 (gradient checkpointing when the plain one
    does not), and the largest micro-batch up to ``batch``; (None, None, why) when neither holds batch 1."""
    row = cards.get(card) or {}
    batches = row.get("max_batch") or {}
    for mode in (prefix, prefix + "_gc"):
        largest = batches.get(mode)
        if largest is None and mode in batches:
            return mode, batch, "activations unknown: the batch is assumed to fit"
        if largest:
            note = None if largest >= batch else f"batch {batch} does not fit: {math.ceil(batch / min(largest, batch))} " \
                                                 f"micro-batches of {min(largest, batch)} accumulate to it"
            return mode, min(largest, batch), note
    return None, None, "does not fit at batch 1, even with gradient checkpointing"


def _train_card(card: Card, mode_cards: Mapping, prefix: str, f: Flops, params: int, adapter_params: int,
                memory: Mapping, w: Workload) -> dict:
    mode, micro, note = _mode_for(mode_cards, card.name, w.batch, prefix)
    out: dict = {"mode": mode, "micro_batch": micro, "hours": None, "usd": None, "bound": None}
    if mode is None or micro is None:
        out["note"] = note
        return out
    peak, dtype = card.peak_flops(TRAIN_DTYPE)
    bandwidth = card.bandwidth_gb_s * 1e9 * BANDWIDTH_UTILISATION
    parts = (memory.get(mode) or {}).get("parts") or {}
    per_sample = (parts.get("activations_per_sample") or 0) + (parts.get("logits_and_loss_per_sample") or 0)
    lora = prefix == "lora"
    micro_bytes = (LORA_MICRO_BYTES if lora else FULL_MICRO_BYTES) * params + 2 * micro * per_sample
    step_bytes = LORA_STEP_BYTES * adapter_params if lora else FULL_STEP_BYTES * params
    accumulate = math.ceil(w.batch / micro)
    compute_s = f.train(mode) * (w.batch / accumulate) / (peak * TRAIN_UTILISATION)
    memory_s = micro_bytes / bandwidth
    step_s = accumulate * max(compute_s, memory_s) + step_bytes / bandwidth
    hours = w.steps * step_s / 3600
    out.update(hours=hours, bound="compute" if compute_s >= memory_s else "memory", dtype=dtype,
               usd=None if card.usd_per_hour is None else hours * card.usd_per_hour)
    notes = [n for n in (note, None if card.usd_per_hour is not None else "no price") if n]
    if notes:
        out["note"] = "; ".join(notes)
    return out


def train(s: Structure | None, f: Flops | None, params: int | None, memory: Mapping, mode_cards: Mapping,
          w: Workload, table: Mapping[str, Card], lora_params: int = 0) -> dict:
    """The ``train`` section: FLOPs per sample and, per card, hours and USD for a full fine-tune, with LoRA's
    beside them."""
    if f is None or params is None:
        why = "the structure is unknown (custom code or an unmodelled architecture without weights to read)" \
            if s is None else "no parameter count"
        return {"flops_per_sample": None, "unknown": f"FLOPs cannot be counted: {why}",
                "cards": [{"card": name, "hours": None, "usd": None, "note": "FLOPs unknown"} for name in table]}
    cards = []
    for name, card in table.items():
        full = _train_card(card, mode_cards, "full_finetune", f, params, lora_params, memory, w)
        lora = _train_card(card, mode_cards, "lora", f, params, lora_params, memory, w)
        lora_note = "; ".join(n for n in (lora.get("note") or "").split("; ") if n and n != "no price")
        cards.append({"card": name, **full, "lora": {k: lora[k] for k in ("hours", "usd", "mode", "micro_batch", "bound")}
                      | ({"note": lora_note} if lora_note else {})})
    return {"flops_per_sample": f.train("full_finetune"), "forward_flops_per_sample": f.forward,
            "attention_flops_per_sample": f.attention, "lora_flops_per_sample": f.train("lora"),
            "total_flops": f.train("full_finetune") * w.epochs * w.samples, "cards": cards}


def decoder_flops(s: Structure | None, params: int | None) -> tuple[float, int, int]:
    """(matmul FLOPs per generated token, attention layers, query width) of the text decoder: every text and
    head matmul (2 x elements), or 2 x the parameters without a structure."""
    if s is None:
        return 2.0 * (params or 0), 0, 0
    per_token = sum(2 * e for tower, e, n in s.flop_matmuls if tower in ("text", "head"))
    text = [st for st in s.stacks if st.tower == "text"]
    layers = sum(st.layers for st in text)
    width = max((st.attn_width or st.hidden for st in text), default=0)
    return float(per_token), layers, width


def serve(config: dict, s: Structure | None, params: int | None, serving: Mapping | None, w: Workload,
          table: Mapping[str, Card]) -> dict:
    """The ``serve`` section: per card, output tokens per second at the concurrency that fits, and USD per
    million output tokens."""
    generates = s is None or any(st.kv_per_token or st.cross_kv_tokens for st in s.stacks)
    if not generates or not serving or serving.get("unknown") or not serving.get("cards"):
        why = "the model generates no tokens (an encoder)" if not generates else \
            (serving or {}).get("unknown") or "no serving figures"
        return {"unknown": f"no decoder to serve: {why}",
                "cards": [{"card": name, "tokens_per_s": None, "usd_per_mtok": None, "note": "no decoder"} for name in table]}
    lay = layout(config)
    element = serving.get("kv_bytes_per_element") or 2
    weights = (serving.get("weights") or {}).get("bytes")
    full = serving.get("full_context") or (w.prompt_tokens + w.output_tokens)
    context = min(w.prompt_tokens + w.output_tokens, full)
    prompt = min(w.prompt_tokens, context)
    output = max(context - prompt, 1)
    matmul, layers, width = decoder_flops(s, params)
    # fp8 checkpoints run fp8 matmuls where the card has them (vLLM's w8a8); everything else bf16 (fp16 on a T4)
    serve_dtype = "fp8" if "fp8" in str((serving.get("weights") or {}).get("source", "")).lower() else TRAIN_DTYPE
    mean_kv = per_sequence(lay, prompt + output // 2, element)
    cards = []
    for name, card in table.items():
        row = (serving.get("cards") or {}).get(name) or {}
        out: dict = {"card": name, "tokens_per_s": None, "usd_per_mtok": None, "concurrency": 0, "context": context}
        budget = row.get("kv_budget_bytes")
        if weights is None or budget is None or not row.get("weights_fit"):
            out["note"] = "the weights do not fit" if row.get("weights_fit") is False else "weights' size unknown"
            cards.append(out)
            continue
        sequences = min(MAX_NUM_SEQS, max(0, budget // per_sequence(lay, context, element)))
        if sequences == 0:
            out["note"] = f"one sequence of {context:,} tokens does not fit beside the weights"
            cards.append(out)
            continue
        peak, dtype = card.peak_flops(serve_dtype)
        compute = peak * SERVE_UTILISATION
        bandwidth = card.bandwidth_gb_s * 1e9 * BANDWIDTH_UTILISATION
        step_flops = sequences * (matmul + 4 * layers * (prompt + output / 2) * width)
        step_bytes = weights + sequences * mean_kv
        step_s = max(step_flops / compute, step_bytes / bandwidth)
        prefill_s = (prompt * matmul + 4 * layers * prompt * prompt * width) / compute
        tokens_per_s = sequences * output / (output * step_s + sequences * prefill_s)
        out.update(tokens_per_s=tokens_per_s, concurrency=sequences, dtype=dtype,
                   decode_bound="memory" if step_bytes / bandwidth >= step_flops / compute else "compute",
                   usd_per_mtok=None if card.usd_per_hour is None else card.usd_per_hour / 3600 / tokens_per_s * 1e6)
        if card.usd_per_hour is None:
            out["note"] = "no price"
        cards.append(out)
    return {"context": context, "prompt_tokens": prompt, "output_tokens": output, "cards": cards}


def cost(config: dict, s: Structure | None, params: int | None, memory: Mapping, mode_cards: Mapping,
         serving: Mapping | None, *, workload: Workload | None = None, table: Mapping[str, Card] | None = None,
         rank: int = 16, roles: list[str] | None = None) -> dict:
    """The ``cost`` section of an estimate (plain JSON data)."""
    w = workload or Workload()
    table = PRICED_CARDS if table is None else table
    f = flops(s, rank, roles) if s is not None and s.flop_matmuls else None
    lora_params = 0 if s is None else rank * sum(s.lora_roles[r].dims for r in (s.lora_roles if roles is None else roles))
    own = any(utilisation.summary(k)["measured_by_hubwatch"] for k in utilisation.RULES)
    notes = [f"estimates, not measurements: a roofline at {TRAIN_UTILISATION:.0%} of the dense {TRAIN_DTYPE} peak "
             f"for training, {SERVE_UTILISATION:.0%} for serving and {BANDWIDTH_UTILISATION:.0%} of the datasheet "
             "bandwidth, each the median of measured utilisations rounded down to 5% ("
             + ("timed by hubwatch on a CUDA card" if own else "published: MosaicML LLM Foundry's MFU tables, "
                                                               "gpt-fast's decode bandwidth") + ")"]
    missing = [name for name, c in table.items() if c.usd_per_hour is None]
    if missing:
        notes.append(f"no price for {', '.join(missing)}: their hours and tokens/s are given, not their cost")
    if s is not None and s.inputs.get("structure_source") == "weights":
        notes.append("structure read from the weight manifest: mixture-of-experts weights stored as 3-D tensors are "
                     "not counted in the FLOPs")
    return {"estimate": True, "workload": w.to_dict(),
            "assumptions": {"train_utilisation": TRAIN_UTILISATION, "serve_utilisation": SERVE_UTILISATION,
                            "bandwidth_utilisation": BANDWIDTH_UTILISATION, "train_dtype": TRAIN_DTYPE,
                            "measured": own,
                            "sources": {k: utilisation.summary(k) for k in utilisation.RULES},
                            "text": "roofline: the larger of compute (FLOPs / (dense peak x utilisation)) and memory "
                                    "traffic (bytes / (bandwidth x utilisation)); attention over the full square; "
                                    "full fine-tune 3 x forward, LoRA 2 x forward + adapters, checkpointing + 1 "
                                    "forward"},
            "train": train(s, f, params, memory, mode_cards, w, table, lora_params),
            "serve": serve(config, s, params, serving, w, table),
            "cards": {name: c.to_dict() for name, c in table.items()},
            "notes": notes}


def reprice(cost: Mapping | None, table: Mapping[str, Card] | None = None, on: str | None = None) -> dict | None:
    """A stored ``cost`` section with its money at ``table``'s prices: what a page or the API shows.

    The stored figures that do not depend on a price (hours, tokens per second, FLOPs, concurrency) stay as they
    were computed; ``usd`` (a run, full and LoRA) is hours x the card's hourly price now, ``usd_per_mtok`` the
    price / 3600 / tokens per second x 10^6. Each card's ``usd_per_hour`` and its source are the table's now, and
    ``priced`` says so: the prices used, each with its source (which names its date), ``on`` (the day they were
    applied, given by the caller: this module reads no clock), and the cards whose stored price differed. A card the
    table no longer has keeps its stored figures. Never raises on a stored section of any shape: what cannot be
    read is left as it is."""
    if not isinstance(cost, Mapping) or not cost:
        return None
    table = PRICED_CARDS if table is None else table
    out = dict(cost)
    stored_cards = cost.get("cards") if isinstance(cost.get("cards"), Mapping) else {}
    changed = []
    cards_now = {}
    for name, stored in stored_cards.items():
        card = table.get(name)
        if card is None or not isinstance(stored, Mapping):
            cards_now[name] = stored
            continue
        if stored.get("usd_per_hour") != card.usd_per_hour:
            changed.append({"card": name, "stored_usd_per_hour": stored.get("usd_per_hour"),
                            "usd_per_hour": card.usd_per_hour})
        cards_now[name] = {**stored, "usd_per_hour": card.usd_per_hour,
                           "sources": {**(stored.get("sources") if isinstance(stored.get("sources"), Mapping) else {}),
                                       "usd_per_hour": card.sources.get("usd_per_hour", "")}}
    out["cards"] = cards_now
    named = [*stored_cards, *(r.get("card") for section in ("train", "serve")
                              for r in (cost.get(section) or {}).get("cards") or [] if isinstance(r, Mapping))
             ] if all(isinstance(cost.get(s) or {}, Mapping) for s in ("train", "serve")) else list(stored_cards)
    shown = [n for n in dict.fromkeys(named) if isinstance(n, str) and n in table]
    price = {name: table[name].usd_per_hour for name in shown}

    def priced_rows(section: str, money: str, time: str, to_money: Callable[[float, float], float | None]) -> None:
        block = cost.get(section)
        if not isinstance(block, Mapping) or not isinstance(block.get("cards"), list):
            return
        rows = []
        for row in block["cards"]:
            if not isinstance(row, Mapping) or row.get("card") not in price:
                rows.append(row)
                continue
            hourly = price[row["card"]]
            new = {**row, money: _priced(row.get(time), hourly, to_money)}
            if isinstance(row.get("lora"), Mapping) and section == "train":
                new["lora"] = {**row["lora"], money: _priced(row["lora"].get(time), hourly, to_money)}
            new = _price_note(new, hourly)
            rows.append(new)
        out[section] = {**block, "cards": rows}

    priced_rows("train", "usd", "hours", lambda hours, hourly: hours * hourly)
    priced_rows("serve", "usd_per_mtok", "tokens_per_s", lambda tps, hourly: hourly / 3600 / tps * 1e6 if tps else None)
    out["priced"] = {"on": on, "changed": changed,
                     "prices": {name: {"usd_per_hour": table[name].usd_per_hour,
                                       "source": table[name].sources.get("usd_per_hour", "")}
                                for name in shown}}
    missing = [name for name in shown if table[name].usd_per_hour is None]
    notes = [n for n in (cost.get("notes") or []) if isinstance(n, str) and not n.startswith("no price for ")]
    if missing:
        notes.append(f"no price for {', '.join(missing)}: their hours and tokens/s are given, not their cost")
    if changed:
        notes.append("dollars at today's card prices, not the ones stored with the estimate: "
                     + ", ".join(f"{c['card']} {_hourly(c['stored_usd_per_hour'])} -> {_hourly(c['usd_per_hour'])}"
                                 for c in changed))
    out["notes"] = notes
    return out


def _priced(time: object, hourly: float | None, to_money: Callable[[float, float], float | None]) -> float | None:
    if hourly is None or isinstance(time, bool) or not isinstance(time, (int, float)) or time < 0:
        return None
    return to_money(float(time), hourly)


def _price_note(row: dict, hourly: float | None) -> dict:
    """The row's note with "no price" present exactly when the card has none now."""
    parts = [n for n in str(row.get("note") or "").split("; ") if n and n != "no price"]
    if hourly is None and (row.get("hours") is not None or row.get("tokens_per_s") is not None):
        parts.append("no price")
    out = {k: v for k, v in row.items() if k != "note"}
    if parts:
        out["note"] = "; ".join(parts)
    return out


def _hourly(value: float | None) -> str:
    return "no price" if value is None else f"${value:,.4g}/h"
