"""The module graph of every tower, as transformers builds it: each node's module path, its type and the shape it
outputs (batch excluded), propagated from the input shape the memory estimate uses; the layer count; and whether a
forward pass goes through, or the first node where it cannot.

A node is a leaf module the forward runs (Linear, LayerNorm, an activation, a dropout transformers still calls),
in the order it runs, or a parameter a composite module owns itself (CLIP's ``class_embedding``, its
``logit_scale``), with the parameter's own shape. Checked node by node against transformers' models built on the
meta device (tests/estimator/test_estimator_graph.py, ``groundtruth``).

Pure: the graph reads config.json only and never raises on bad values. A dimension that is not a positive integer,
heads that do not divide their width, a patch larger than its image: the tower still lists every node the config
describes, and ``forward_pass`` names the first node that could not be built or run, and why.
"""

from __future__ import annotations

from typing import Any

from . import graph_encoders, graph_families, graph_lm, graph_moe, graph_multimodal, graph_seq2seq
from .graph_nodes import PARAMETER, Dims, Node, Tower

__all__ = ["BUILDERS", "PARAMETER", "Dims", "Node", "Tower", "collapse", "structure_graph"]

# model_type -> its graph builder, every module of builders together
BUILDERS = {**graph_families.BUILDERS, **graph_lm.BUILDERS, **graph_encoders.BUILDERS,
            **graph_moe.BUILDERS, **graph_seq2seq.BUILDERS, **graph_multimodal.BUILDERS}


def structure_graph(config: Any, seq_len_cap: int = 2048) -> dict[str, Any]:
    """Every tower's graph for one config.json, as plain data (the ``structure`` section of an estimate)."""
    data = config if isinstance(config, dict) else {}
    model_type = data.get("model_type")
    builder = BUILDERS.get(model_type) if isinstance(model_type, str) else None
    notes: list[str] = []
    if data.get("auto_map") is not None:
        notes.append("custom code (auto_map): the repo builds its own model; the graph is what these keys mean to "
                     "transformers' own class" if builder else "custom code (auto_map): the repo builds its own "
                     "model, so its graph cannot be read from config.json")
    if builder is None:
        notes.append(f"the module graph of model_type {model_type!r} is not modelled "
                     f"(modelled: {', '.join(sorted(BUILDERS))})")
        return {"modelled": False, "towers": [], "layers": None, "node_count": 0, "forward_pass": None,
                "failure": None, "notes": notes}
    towers, more = builder(Dims(data), seq_len_cap)
    notes.extend(more)
    if not towers:  # a sub-model this family's builder does not model (LLaVA on a SigLIP tower): no guessed graph
        return {"modelled": False, "towers": [], "layers": None, "node_count": 0, "forward_pass": None,
                "failure": None, "notes": notes}
    failed = next((t for t in towers if t.failure), None)
    layers = [t.layers for t in towers if t.layers is not None]
    dicts = [t.to_dict() for t in towers]
    for tower in dicts:
        tower["rows"] = collapse(tower["nodes"])  # what a page shows: repeated blocks once
    return {"modelled": True, "towers": dicts, "layers": sum(layers) if layers else None,
            "node_count": sum(len(t.nodes) for t in towers), "forward_pass": failed is None,
            "failure": {"tower": failed.name, **failed.failure} if failed and failed.failure else None,
            "notes": notes}


def collapse(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows for a page: runs of identical blocks (``layers.0`` .. ``layers.11`` with the same types and shapes)
    shown once, with the range of layers they cover; other nodes as they are."""
    rows: list[dict[str, Any]] = []
    i = 0
    while i < len(nodes):
        block = _block_of(nodes[i]["name"])
        if block is None:
            rows.append({**nodes[i], "repeat": 1})
            i += 1
            continue
        prefix, index = block
        first = _take_block(nodes, i, prefix, index)
        j, last, count = i + len(first), index, 1
        while True:
            nxt = _block_of(nodes[j]["name"]) if j < len(nodes) else None
            if nxt is None or nxt[0] != prefix:
                break
            body = _take_block(nodes, j, prefix, nxt[1])
            if _shape_of(body, prefix, nxt[1]) != _shape_of(first, prefix, index):
                break
            j, last, count = j + len(body), nxt[1], count + 1
        for node in first:
            name = node["name"].replace(f"{prefix}.{index}.", f"{prefix}.{index}-{last}." if count > 1
                                        else f"{prefix}.{index}.", 1)
            rows.append({**node, "name": name, "repeat": count})
        i = j
    return rows


def _block_of(name: str) -> tuple[str, int] | None:
    """("vision_model.encoder.layers", 3) for ``vision_model.encoder.layers.3.mlp.fc1``."""
    parts = name.split(".")
    for k in range(len(parts) - 1, 0, -1):
        if parts[k].isdigit() and k + 1 < len(parts):
            return ".".join(parts[:k]), int(parts[k])
    return None


def _take_block(nodes: list[dict[str, Any]], start: int, prefix: str, index: int) -> list[dict[str, Any]]:
    head = f"{prefix}.{index}."
    end = start
    while end < len(nodes) and nodes[end]["name"].startswith(head):
        end += 1
    return nodes[start:end]


def _shape_of(block: list[dict[str, Any]], prefix: str, index: int) -> list[tuple]:
    head = f"{prefix}.{index}."
    return [(n["name"][len(head):], n["type"], tuple(n["output_shape"])) for n in block]
