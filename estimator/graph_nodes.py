"""The graph's pieces: nodes, towers, tolerant reads of a config (estimator/graph.py says what a graph is)."""

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

    def positive(self, key: str) -> bool:
        """Whether the key holds a number above zero (a fuzzed string, list or dict is not one)."""
        value = self.raw(key)
        return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0

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


def patch_embedding(d: Dims, tower: Tower, node: str, h: int | None, image: int | None, patch: int | None,
                    class_tokens: int, defaults: dict[str, Any] | None = None) -> int | None:
    """The patch convolution `node` (Conv2d to (h, grid, grid)) and the tokens it gives: grid x grid patches and
    `class_tokens` more; None, with the first missing key or a patch larger than the image on `node`."""
    grid = tokens = None
    if d.require(tower, node, "num_channels", "image_size", "patch_size", "hidden_size", defaults=defaults):
        if patch > image:  # type: ignore[operator]
            tower.fail(node, f"patch {patch} is larger than the image {image}")
        else:
            grid = image // patch  # type: ignore[operator]
            tokens = grid * grid + class_tokens
    tower.add(node, "Conv2d", (h, grid, grid))
    return tokens


class Block:
    """One layer of a stack, its nodes named from inside the layer (``self_attn.q_proj``), built once and listed
    for every layer a tower lists under ``{prefix}.{i}.`` (``stamp``): the layers of a stack are the same shape,
    but for a node only the first layer has (``first``: T5's relative-position table). ``at`` names a node of one
    layer (the first by default), where the checks made once per stack report a failure."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.nodes: list[tuple[str, str, Shape, bool]] = []

    def at(self, suffix: str, layer: int = 0) -> str:
        return f"{self.prefix}.{layer}.{suffix}"

    def add(self, suffix: str, kind: str, shape: Shape, first: bool = False) -> None:
        self.nodes.append((suffix, kind, tuple(shape), first))

    def stamp(self, tower: Tower, indices: range) -> None:
        for i in indices:
            head = f"{self.prefix}.{i}."
            for suffix, kind, shape, first in self.nodes:
                if i == 0 or not first:
                    tower.add(head + suffix, kind, shape, i)
