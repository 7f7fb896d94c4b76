"""The two-card split: where one card cannot hold batch 1 of a mode, the model cut once between two layers (pipeline
parallel, two cards of the same kind) and the memory on each card.

Computed only where a card's largest batch is 0. The mode's batch-1 peak is shared out as it is built: each card
holds its own CUDA context; the fixed bytes (weights, gradients, optimizer state) follow the parameters: the
embeddings on the first card, each layer's block parameters with its layer, the norms, heads and projections on the
last; the activations at batch 1 follow the layers' saved bytes, the embeddings' and head's (with the loss's
logits) on the cards that hold them. The cut is the layer boundary that makes the larger card smallest. An
estimate like the rest: a pipeline schedule's in-flight micro-batches are not counted.
"""

from __future__ import annotations

from .memory import CARDS, CUDA_CONTEXT_BYTES, HEADROOM, Mode
from .structure import Structure

SPLIT_TEXT = ("a two-card split is a contiguous layer cut (pipeline parallel) over two cards of the same kind, "
              "computed only where one card cannot hold batch 1: each card its CUDA context, the embeddings on the "
              "first, the head and the loss on the second, the layers cut where the larger card is smallest; "
              "a pipeline schedule's in-flight micro-batches are not counted")


def two_card_splits(s: Structure | None, modes: list[Mode], cards: dict) -> dict:
    """{card: {mode: split}} for every (card, mode) whose batch 1 does not fit one card; {} when none (or when
    the structure, and so the layers, is unknown)."""
    if s is None or not s.stacks or s.total <= 0:
        return {}
    layers = _layers(s)
    if len(layers) < 2:
        return {}
    out: dict = {}
    for card, row in cards.items():
        for mode in modes:
            if row["max_batch"].get(mode.name) != 0:
                continue
            split = _split(s, mode, layers, CARDS[card])
            if split is not None:
                out.setdefault(card, {})[mode.name] = split
    return out


def _layers(s: Structure) -> list[tuple[str, int, float, float]]:
    """Every layer in order: (its stack, index in it, its block parameters, its saved bytes at batch 1)."""
    blocks = {tower: parts.get("blocks", 0) for tower, parts in s.params.items()}
    in_tower = {tower: sum(st.layers for st in s.stacks if st.tower == tower) for tower in blocks}
    out = []
    for st in s.stacks:
        params = blocks.get(st.tower, 0) / in_tower[st.tower] if in_tower.get(st.tower) else 0
        saved = st.saved_per_sample() + st.saved_per_layer
        out.extend((f"{st.tower} {st.name}", i, params, saved) for i in range(st.layers))
    return out


def _split(s: Structure, mode: Mode, layers: list[tuple[str, int, float, float]], card_bytes: int) -> dict | None:
    peak = mode.at_batch(1)
    if peak is None:
        return None
    fixed = mode.floor_bytes() - CUDA_CONTEXT_BYTES
    activations = peak - mode.floor_bytes()
    per_param = fixed / s.total
    embeddings = sum(parts.get("embeddings", 0) for parts in s.params.values())
    layer_saved = sum(a for *_, a in layers)
    head_saved = s.fixed_saved_per_sample + s.loss_transient_per_sample
    scale = activations / (layer_saved + head_saved) if layer_saved + head_saved > 0 else 0.0
    best = None
    first_params, first_saved = embeddings, 0.0
    for k in range(1, len(layers)):
        first_params += layers[k - 1][2]
        first_saved += layers[k - 1][3]
        one = CUDA_CONTEXT_BYTES + per_param * first_params + scale * first_saved
        two = (CUDA_CONTEXT_BYTES + per_param * (s.total - first_params)
               + scale * (layer_saved - first_saved + head_saved))
        if best is None or max(one, two) < max(best[1], best[2]):
            best = (k, one, two)
    if best is None:
        return None
    k, one, two = best
    usable = card_bytes * (1 - HEADROOM)
    last_stack, last_index = layers[k - 1][0], layers[k - 1][1]
    return {"cut_after": f"{last_stack} layer {last_index}", "layers": [k, len(layers) - k],
            "card_bytes": [int(one), int(two)], "fits": max(one, two) <= usable}


def render_split(split: dict | None) -> str:
    """The CLI's lines: per card and mode, where the cut falls and each card's bytes."""
    if not split:
        return ""
    lines = ["Two-card split where one card cannot hold batch 1 (pipeline parallel, contiguous layers)"]
    for card, modes in split["cards"].items():
        for mode, cut in modes.items():
            one, two = (b / 1024**3 for b in cut["card_bytes"])
            lines.append(f"  2 x {card:<11} {mode:<17} layers {cut['layers'][0]} | {cut['layers'][1]} "
                         f"(cut after {cut['cut_after']}): {one:.2f} GiB + {two:.2f} GiB, "
                         + ("fits" if cut["fits"] else "does not fit"))
    lines.append(f"  - {split['text']}")
    return "\n".join(lines)
