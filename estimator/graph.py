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

from dataclasses import dataclass, field
from typing import Any

# transformers' ACT2CLS: hidden_act -> the activation module's class
ACTIVATIONS = {"gelu": "GELUActivation", "gelu_10": "ClippedGELUActivation", "gelu_fast": "FastGELUActivation",
               "gelu_new": "NewGELUActivation", "gelu_python": "GELUActivation", "gelu_pytorch_tanh": "GELUTanh",
               "gelu_python_tanh": "GELUTanh", "gelu_accurate": "AccurateGELUActivation", "quick_gelu":
               "QuickGELUActivation", "relu": "ReLU", "relu2": "ReLUSquaredActivation", "relu6": "ReLU6",
               "sigmoid": "Sigmoid", "silu": "SiLUActivation", "swish": "SiLU", "tanh": "Tanh", "mish":
               "MishActivation", "leaky_relu": "LeakyReLU", "linear": "LinearActivation"}
PARAMETER = "Parameter"
Shape = tuple  # of int | None: None where a dimension is not a valid size


@dataclass
class Node:
    name: str               # the module path as transformers names it
    type: str               # the module's class (or "Parameter")
    output_shape: Shape     # batch excluded; a parameter's own shape
    layer: int | None = None  # the block it belongs to, for pages that collapse repeated blocks

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type, "output_shape": list(self.output_shape)}


@dataclass
class Tower:
    name: str
    input_name: str
    input_shape: Shape
    layers: int | None = None
    nodes: list[Node] = field(default_factory=list)
    failure: dict[str, str] | None = None  # the first node that cannot be built or run: {node, reason}

    def add(self, name: str, kind: str, shape: Shape, layer: int | None = None) -> Shape:
        self.nodes.append(Node(name, kind, tuple(shape), layer))
        return tuple(shape)

    def fail(self, node: str, reason: str) -> None:
        if self.failure is None:
            self.failure = {"node": node, "reason": reason}

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "input": {"name": self.input_name, "shape": list(self.input_shape)},
                "layers": self.layers, "node_count": len(self.nodes),
                "forward_pass": self.failure is None, "failure": self.failure,
                "output_shape": list(self.nodes[-1].output_shape) if self.nodes else list(self.input_shape),
                "nodes": [n.to_dict() for n in self.nodes]}


class Dims:
    """Tolerant reads of one (sub-)config: a value, or None where it is missing or not a positive integer;
    ``problem`` says what is wrong with a key, for the node that needs it."""

    def __init__(self, data: Any, path: str = "", defaults: dict[str, Any] | None = None) -> None:
        self.data = data if isinstance(data, dict) else {}
        self.path = path
        self.defaults = defaults or {}

    def name(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def raw(self, key: str, default: Any = None) -> Any:
        value = self.data.get(key)
        if value is None:
            value = self.defaults.get(key, default)
        return value

    def int(self, *keys: str, default: Any = None) -> int | None:
        value = self.raw(keys[0])
        for key in keys[1:]:
            if value is None:
                value = self.raw(key)
        value = default if value is None else value
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            return None
        return value

    def problem(self, key: str, default: Any = None) -> str | None:
        value = self.raw(key, default)
        if value is None:
            return f"{self.name(key)} is missing"
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            return f"{self.name(key)}={value!r} is not a positive integer"
        return None

    def require(self, tower: Tower, node: str, *keys: str, defaults: dict[str, Any] | None = None) -> bool:
        """True when every key is a positive integer; else the tower fails at ``node``, naming the first bad key."""
        for key in keys:
            issue = self.problem(key, (defaults or {}).get(key))
            if issue:
                tower.fail(node, issue)
                return False
        return True

    def str(self, key: str, default: str) -> str:
        value = self.raw(key, default)
        return value if isinstance(value, str) else default

    def bool(self, key: str, default: bool) -> bool:
        value = self.raw(key, default)
        return value if isinstance(value, bool) else default

    def sub(self, key: str, defaults: dict[str, Any] | None = None) -> Dims:
        return Dims(self.data.get(key), self.name(key), defaults)


def activation(name: str) -> str:
    return ACTIVATIONS.get(name, name)


def heads_divide(tower: Tower, node: str, width: int | None, heads: int | None, what: str = "hidden size") -> None:
    """Families that split their width into heads (CLIP, ViT, BERT, GPT-2) fail to build when heads do not divide it."""
    if width and heads and width % heads:
        tower.fail(node, f"{heads} attention heads do not divide the {what} {width}")


def mul(*values: int | None) -> int | None:
    out = 1
    for v in values:
        if v is None:
            return None
        out *= v
    return out


def structure_graph(config: Any, seq_len_cap: int = 2048) -> dict[str, Any]:
    """Every tower's graph for one config.json, as plain data (the ``structure`` section of an estimate)."""
    from .graph_families import BUILDERS  # the builders use the types above

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
    failed = next((t for t in towers if t.failure), None)
    layers = [t.layers for t in towers if t.layers is not None]
    return {"modelled": True, "towers": [t.to_dict() for t in towers], "layers": sum(layers) if layers else None,
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
