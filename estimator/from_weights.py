"""Custom code: the structure read off the weight manifest when config.json names no modelled architecture.

Towers come from name prefixes, layer stacks from block indices (``layers.N.``, ``blocks.N.``, ``h.N.``),
widths from norm and projection shapes, tokens from the config or its sub-configs and from the position
embeddings. Saved bytes follow the family builders' conventions (``blocks``), so a custom model with a
stock layout comes out as its stock twin does. What the weights cannot say is assumed and listed.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field

from . import blocks
from .families.common import causal_lm_head, plain_mlp_adapters
from .manifest import EMBEDDING_NAMES, INT_DTYPES, ManifestCount, tower_of
from .reader import ConfigReader
from .structure import Stack, Structure

BLOCK_WORDS = frozenset(("layers", "layer", "blocks", "block", "h", "resblocks", "blk", "transformer_blocks"))
# The first "<container>.<index>." of an ASCII name: group 1 is everything before the index, group 2 the index.
BLOCK = re.compile(r"^((?:[^.]*\.)*?(?:" + "|".join(sorted(BLOCK_WORDS, key=len, reverse=True)) + r"))\.([0-9]+)\.")
BUFFER_LEAVES = frozenset(("position_ids", "inv_freq", "masked_bias", "final_logits_bias", "bias"))
# Towers that custom code names in its own words (after manifest.TOWER_RULES, whose default is text).
EXTRA_TOWERS = (
    ("vision", re.compile(r"(^|\.)(vpm|vit|visual_encoder|image_encoder|img_processor|vision_embed_tokens|"
                          r"vision_backbone|image_tower)(\.|$)")),
    ("projection", re.compile(r"(^|\.)(resampler|mlp1|connector|merger|abstractor|vision_projection)(\.|$)")),
)
TEXT_CONFIGS = ("text_config", "llm_config", "language_config", "text_model_config", "language_model_config")
VISION_CONFIGS = ("vision_config", "vision_model_config", "visual_config", "vit_config", "vision_tower_config")
SEQUENCE_KEYS = ("max_position_embeddings", "n_positions", "seq_length", "max_seq_len", "max_sequence_length",
                 "n_ctx")
HEAD_KEYS = ("num_attention_heads", "n_head", "n_heads", "num_heads", "heads")
HEAD_DIM_KEYS = ("head_dim", "head_width", "kv_channels", "attention_head_dim")
ACT_KEYS = ("hidden_act", "hidden_activation", "activation_function", "act_layer")
DROPOUT_KEYS = ("hidden_dropout_prob", "resid_pdrop", "hidden_dropout", "dropout")
TOP_K_KEYS = ("num_experts_per_tok", "moe_top_k", "top_k", "num_selected_experts", "moe_topk")

NORM_SEGMENT = re.compile(r"(norm|(^|_)ln(_?[0-9a-z])?$|^ln)", re.IGNORECASE)
ATTN_SEGMENT = re.compile(r"(attn|attention|^mixer$)", re.IGNORECASE)
ATTN_LEAF = re.compile(r"^(q|k|v|o|qkv|wqkv|q_proj|k_proj|v_proj|o_proj|qkv_proj|kv_proj|wq|wk|wv|wo|query|key|value|"
                       r"query_key_value|c_attn|in_proj|out_proj)$", re.IGNORECASE)
OUT_LEAF = re.compile(r"^(o|o_proj|out_proj|wo|proj|c_proj|dense|out|output|o_linear|attn_out)$", re.IGNORECASE)
DOWN_LEAF = re.compile(r"(down|fc2|w2|c_proj|dense_4h_to_h|out|output|wo|dense)", re.IGNORECASE)
EXPERT = re.compile(r"(^|\.)experts\.(\d+)\.")
SHARED = re.compile(r"shared_expert", re.IGNORECASE)
POSITION = re.compile(r"(pos_embed|position_embedding|positional_embedding|(^|\.)wpe\.|pos_emb)", re.IGNORECASE)
HEAD_NAME = re.compile(r"(^|\.)(lm_head|embed_out|output_layer|output|head|logits)\.weight$")
WEIGHT_SUFFIXES = (".parametrizations.weight.original", ".weight", ".scale", ".gamma", ".g")
LM_CLASS = re.compile(r"(CausalLM|LMHead|ConditionalGeneration|Chat|MaskedLM)")


class Unreadable(Exception):
    """The manifest gives no structure; the message is the reason the estimate states."""


@dataclass
class Linear:
    name: str            # path within the layer, without the weight suffix
    d_in: int
    d_out: int


@dataclass
class Layer:
    """One kind of layer as read from its tensors: width, bytes saved a token, KV cache a token."""

    hidden: int
    saved_per_token: float
    kv_per_token: int
    frozen_per_token: float          # normalised inputs kept only to train RMSNorm weights (LoRA drops them)
    routers: set[str] = field(default_factory=set)
    plain_mlp: tuple[int, str] | None = None  # (inner width, activation) of a plain fc1/fc2 MLP: LoRA/QLoRA terms


def structure_from_weights(config: dict, manifest: dict, counted: ManifestCount, cap: int
                           ) -> tuple[Structure | None, str]:
    """The structure the weights imply, or None and the reason (never raises on an odd manifest)."""
    try:
        return _build(config, manifest, counted, cap), ""
    except Unreadable as exc:
        return None, str(exc)
    except (ArithmeticError, LookupError, TypeError, ValueError) as exc:  # a layout no rule foresaw
        return None, f"the weight manifest could not be read as a structure ({type(exc).__name__}: {exc})"


def _build(config: dict, manifest: dict, counted: ManifestCount, cap: int) -> Structure:
    if counted.quantized:
        raise Unreadable("the checkpoint is quantized or packed, so its shapes are not the model's widths")
    stacks, loose, zero = _group(manifest)
    if not stacks:
        raise Unreadable("the weight manifest has no repeated blocks (layers.N., blocks.N., h.N. ...), so "
                         "no layer structure can be read from it")
    archs = config.get("architectures")
    s = Structure("weights", archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else "")
    s.inputs["structure_source"] = "weights"
    if zero:
        s.notes.append(f"zero-size tensors hold no parameters and are left out of the structure: "
                       f"{', '.join(f'{n} {list(params_shape)}' for n, params_shape in zero[:3])}"
                       + (f" and {len(zero) - 3} more" if len(zero) > 3 else ""))
    towers = {_tower(f"{prefix}.0.x") for prefix in stacks}
    ctx = _Context(config, towers, cap, s, loose)
    summary = []
    for prefix, layers in stacks.items():
        summary.append(_stack(s, ctx, prefix, layers))
    _loose(s, ctx, loose)
    s.notes.insert(0, "structure derived from the weight manifest (config.json names no modelled architecture): "
                   + "; ".join(summary) + "; every memory figure is read from the weights")
    s.notes.extend(f"assumed: {a}" for a in dict.fromkeys(ctx.assumed))
    if s.total != counted.parameters:
        raise Unreadable(f"the structure read from the weights holds {s.total:,} parameters where the manifest "
                         f"counts {counted.parameters:,}")
    return s


def _group(manifest: dict) -> tuple[dict[str, dict[int, dict[str, tuple]]], dict[str, tuple],
                                  list[tuple[str, tuple[int, ...]]]]:
    """The parameter tensors as count_manifest counts them (no buffers or integer storage; packed storage has
    already been ruled out), zero-size ones apart, in one pass: block tensors by container and index (prefix ->
    index -> rest -> shape), the rest loose. The first "<container>.<index>." in a name opens the block
    (layers, blocks, h, ...)."""
    stacks: dict[str, dict[int, dict[str, tuple]]] = {}
    loose: dict[str, tuple] = {}
    zero: list[tuple[str, tuple[int, ...]]] = []
    block = BLOCK.search
    # The last container's "<prefix>." and its layers: a name that starts with it and goes on "<digits>." opens
    # its block there (any earlier "<container>.<index>." would lie inside the prefix, where there is none).
    opened, cut, layers = "\0", 0, {}
    for name, (dtype, shape) in manifest.items():
        leaf = name[name.rfind(".") + 1:]
        # BUFFER_NAMES.search(name) where the leaf is one of its words: always, but for "bias" only "attn.bias"
        if leaf in BUFFER_LEAVES and (leaf != "bias" or name.endswith(".attn.bias") or name == "attn.bias") \
                or dtype.upper() in INT_DTYPES:
            continue
        if type(shape) is not tuple:
            shape = tuple(shape)
        if 0 in shape:
            zero.append((name, shape))
            continue
        if name.isascii():  # str.isdigit is [0-9] here, so the pattern finds what the loop below would
            if name.startswith(opened):
                end = name.find(".", cut)
                digits = name[cut:end]
                if end > cut and digits.isdigit():
                    index = int(digits)
                    layer = layers.get(index)
                    if layer is None:
                        layer = layers[index] = {}
                    layer[name[end + 1:]] = shape
                    continue
            found = block(name)
            if found:
                prefix = found[1]
                layers = stacks.get(prefix)
                if layers is None:
                    layers = stacks[prefix] = {}
                opened, cut = prefix + ".", len(prefix) + 1
                index = int(found[2])
                layer = layers.get(index)
                if layer is None:
                    layer = layers[index] = {}
                layer[name[found.end():]] = shape
            else:
                loose[name] = shape
            continue
        parts = name.split(".")
        at = next((i for i in range(1, len(parts) - 1) if parts[i].isdigit() and parts[i - 1] in BLOCK_WORDS), 0)
        if at:
            prefix = ".".join(parts[:at])
            stacks.setdefault(prefix, {}).setdefault(int(parts[at]), {})[".".join(parts[at + 1:])] = shape
        else:
            loose[name] = shape
    return stacks, loose, zero


def _tower(name: str) -> str:
    tower = tower_of(name)
    if tower != "text":
        return tower
    for candidate, rule in EXTRA_TOWERS:
        if rule.search(name):
            return candidate
    return "text"


class _Context:
    """What a tower's stacks share: its config keys, its token count, and the assumptions made."""

    def __init__(self, config: dict, towers: set[str], cap: int, s: Structure, loose: dict[str, tuple]) -> None:
        self.config = config
        self.cap = cap
        self.s = s
        self.loose = loose
        self.assumed: list[str] = []
        self.tokens: dict[str, int] = {}
        self.configs = {"text": [*_subs(config, TEXT_CONFIGS), config],
                        "vision": [*_subs(config, VISION_CONFIGS), *([config] if "text" not in towers else [])]}
        self.head = _lm_head(config, loose)

    def value(self, tower: str, keys: tuple[str, ...]) -> tuple[object, str]:
        """The first key present in the tower's sub-configs (then the top level), and where it was found."""
        for cfg in self.configs.get(tower, [self.config]):
            for key in keys:
                if cfg.get(key) is not None:
                    return cfg[key], key
        return None, ""

    def number(self, tower: str, keys: tuple[str, ...]) -> int | None:
        value, _ = self.value(tower, keys)
        return _positive(value)

    def token_count(self, tower: str) -> int:
        if tower not in self.tokens:
            self.tokens[tower] = self._vision_tokens() if tower == "vision" else self._sequence(tower)
        return self.tokens[tower]

    def _sequence(self, tower: str) -> int:
        value, key = self.value(tower, SEQUENCE_KEYS)
        n = _positive(value)
        source = key
        if n is None:
            n, source = _positions(self.loose, tower)
        if n is None:
            n, source = self.cap, "none"
            self.assumed.append(f"{tower} sequence length: no max_position_embeddings in the config and no "
                                f"position-embedding tensor (rotary positions), so the cap {self.cap}")
        tokens = min(n, self.cap)
        if "sequence_length" not in self.s.inputs:
            self.s.inputs["sequence_length"] = tokens
            self.s.inputs["sequence_source"] = (f"{source}={n} capped at {self.cap}" if n > self.cap
                                                else source if source != "none" else f"assumed {tokens}")
        return tokens

    def _vision_tokens(self) -> int:
        conv = next((shape for name, shape in self.loose.items() if len(shape) == 4 and _tower(name) == "vision"),
                    None)
        channels = conv[1] if conv else 3
        cls = any(re.search(r"(cls_token|class_embedding|class_token)", n) for n in self.loose if _tower(n) == "vision")
        image = _positive(_first(self.value("vision", ("image_size", "img_size", "force_image_size"))[0]))
        patch = _positive(_first(self.value("vision", ("patch_size",))[0])) or (conv[2] if conv else None)
        positions, source = _positions(self.loose, "vision")
        if image and patch and patch <= image:
            patches = (image // patch) ** 2
            tokens = patches + (1 if cls else 0)
            if positions and positions != tokens:
                self.assumed.append(f"vision tokens from image_size {image} / patch_size {patch} ({tokens}), "
                                    f"not the {positions} stored positions")
        elif positions:
            tokens, patches = positions, positions - (1 if cls else 0)
            side = math.isqrt(max(patches, 1))
            patch = patch or 14
            image = side * patch
            self.assumed.append(f"vision tokens from {source} ({positions} positions)")
        else:
            patch = patch or 14
            image = 224
            patches = (image // patch) ** 2
            tokens = patches + (1 if cls else 0)
            self.assumed.append(f"vision input: no image_size in the config and no position embedding, so a "
                                f"{image}px image in {patch}px patches")
        self.s.inputs["vision"] = {"image_size": image, "patch_size": patch, "patches": patches,
                                   "channels": channels, "tokens": tokens}
        self.s.fixed_saved_per_sample += blocks.BF16 * channels * image * image
        return tokens


def _subs(config: dict, keys: tuple[str, ...]) -> list[dict]:
    return [config[k] for k in keys if isinstance(config.get(k), dict)]


def _positive(value: object) -> int | None:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= 100_000_000:
        return None
    return value


def _first(value: object) -> object:
    """image_size given as [h, w] reads as h."""
    return value[0] if isinstance(value, list) and value else value


def _positions(loose: dict[str, tuple], tower: str) -> tuple[int | None, str]:
    """Rows of a tower's learned position embedding ([N, d] or [1, N, d])."""
    for name, shape in loose.items():
        if POSITION.search(name) and _tower(name) == tower and len(shape) in (2, 3):
            return (shape[0] if len(shape) == 2 else shape[1]), name
    return None, ""


def _lm_head(config: dict, loose: dict[str, tuple]) -> tuple[str | None, str | None, int, int]:
    """(word embedding, head tensor or None when tied, vocab, width), or no embedding at all."""
    words = [(n, sh) for n, sh in loose.items() if len(sh) == 2 and _tower(n) in ("text", "head")
             and not POSITION.search(n) and "type" not in n]
    if not words:
        return None, None, 0, 0
    vocab = max(sh[0] for _, sh in words)
    rows = [(n, sh) for n, sh in words if sh[0] == vocab]
    heads = [n for n, _ in rows if HEAD_NAME.search(n)]
    embeds = [n for n, _ in rows if n not in heads]
    if not embeds:
        return None, None, 0, 0
    head = heads[0] if heads else None
    width = loose[embeds[0]][1]
    if head is not None and loose[head] != loose[embeds[0]]:
        head = None
    return embeds[0], head, vocab, width


def _split(rest: str) -> tuple[str, str]:
    """(module path, kind): kind is weight, bias or other."""
    for suffix in WEIGHT_SUFFIXES:
        if rest.endswith(suffix):
            return rest[: -len(suffix)], "weight"
    if rest.endswith(".bias") or rest.endswith(".beta"):
        return rest[: rest.rfind(".")], "bias"
    return rest, "other"


def _role(module: str) -> str:
    """The module path PEFT's target_modules names a linear by: past any inner index (experts.3.w1 -> w1)."""
    parts = module.split(".")
    numbered = [i for i, part in enumerate(parts) if part.isdigit()]
    return ".".join(parts[numbered[-1] + 1:]) if numbered else module


def _is_norm(module: str) -> bool:
    return bool(NORM_SEGMENT.search(module.rsplit(".", 1)[-1]))


def _in_attention(module: str) -> bool:
    return any(ATTN_SEGMENT.search(seg) for seg in module.split(".")[:-1])


def _is_attention(module: str) -> bool:
    return _in_attention(module) or bool(ATTN_LEAF.match(module.rsplit(".", 1)[-1]))


def _in_mlp(module: str) -> bool:
    return any(re.search(r"(mlp|ffn|feed_forward|feedforward|intermediate|experts)", seg, re.IGNORECASE)
               for seg in module.split(".")[:-1])


# ---- stacks -----------------------------------------------------------------------------------------------

def _stack(s: Structure, ctx: _Context, prefix: str, layers: dict[int, dict[str, tuple]]) -> str:
    """Add one container's layers (a Stack per set of identical layers) and describe them."""
    tower = _tower(f"{prefix}.0.x")
    kinds: dict[frozenset, list[int]] = {}  # identical layers: equal name -> shape maps
    previous: dict[str, tuple] | None = None
    for index in sorted(layers):
        tensors = layers[index]
        if tensors != previous:  # most layers are their predecessor's twin: one dict comparison, no hashing
            indices = kinds.setdefault(frozenset(tensors.items()), [])
            previous = tensors
        indices.append(index)
    ordered = sorted(kinds.values(), key=len, reverse=True)
    if len(ordered) > 1:
        s.notes.append(_inconsistent(prefix, layers, ordered))
    tokens = ctx.token_count(tower)
    causal = tower == "text" and ctx.head[0] is not None and (ctx.head[1] is not None or _tied(ctx.config))
    parts = []
    for indices in ordered:
        signature = layers[indices[0]]
        where = f"{prefix}.{indices[0]}"
        layer = _layer(signature, ctx, tower, where)
        _ledger(s, tower, signature, len(indices), layer.routers)
        name = prefix if len(ordered) == 1 else f"{prefix} [{_ranges(indices)}]"
        s.stacks.append(Stack(tower, name, len(indices), tokens, layer.hidden, layer.saved_per_token,
                              kv_per_token=layer.kv_per_token if causal and not _masked(ctx.config) else 0))
        s.lora_frozen[tower] = s.lora_frozen.get(tower, 0) + layer.frozen_per_token * len(indices)
        if layer.plain_mlp is not None:
            plain_mlp_adapters(s, tower, layer.plain_mlp[0], len(indices), layer.plain_mlp[1])
        parts.append(f"{len(indices)} x {layer.hidden}")
    return f"{tower} tower {prefix}: {' + '.join(parts)} layers, {tokens} tokens"


def _inconsistent(prefix: str, layers: dict[int, dict[str, tuple]], ordered: list[list[int]]) -> str:
    """Name the first tensor whose shape differs from the most common layer's."""
    ref, other = layers[ordered[0][0]], min(i for group in ordered[1:] for i in group)
    odd = layers[other]
    rest = next(r for r in sorted({*ref, *odd}) if ref.get(r) != odd.get(r))
    def show(shape: tuple | None) -> str:
        return "missing" if shape is None else str(list(shape))
    return (f"inconsistent shapes across the layers of {prefix}: {prefix}.{other}.{rest} is {show(odd.get(rest))} "
            f"where {prefix}.{ordered[0][0]}.{rest} is {show(ref.get(rest))}; each set of identical layers is "
            f"stacked on its own ({len(ordered)} sets)")


def _ranges(indices: list[int]) -> str:
    runs, start = [], indices[0]
    for a, b in zip(indices, [*indices[1:], None], strict=True):
        if b != a + 1:
            runs.append(f"{start}" if start == a else f"{start}-{a}")
            start = b
    return ", ".join(runs)


def _classes(config: dict) -> list[str]:
    """The classes config.json names: ``architectures`` and the ``auto_map`` entry points."""
    archs = config.get("architectures")
    names = [*(archs if isinstance(archs, list) else []),
             *(config["auto_map"].keys() if isinstance(config.get("auto_map"), dict) else [])]
    return [n for n in names if isinstance(n, str)]


def _tied(config: dict) -> bool:
    """A language model whose head shares the embeddings: it names a language-model class and does not say
    ``tie_word_embeddings: false`` (transformers' default ties them)."""
    tied = next((c.get("tie_word_embeddings") for c in [*_subs(config, TEXT_CONFIGS), config]
                 if isinstance(c.get("tie_word_embeddings"), bool)), True)
    return tied and any(LM_CLASS.search(n) for n in _classes(config))


def _masked(config: dict) -> bool:
    """A masked LM reads its whole input at once: no KV cache at inference."""
    return any("MaskedLM" in n for n in _classes(config))


def _ledger(s: Structure, tower: str, signature: dict[str, tuple], times: int, routers: set[str]) -> None:
    """Every tensor of ``times`` identical layers, once: linears (for LoRA), norms, the rest."""
    for rest, shape in signature.items():
        module, kind = _split(rest)
        if kind == "weight" and len(shape) == 2 and not EMBEDDING_NAMES.search(rest):
            s.linear(tower, "blocks", shape[1], shape[0], False, times=times, lora=module not in routers,
                     module=_role(module))
        elif _is_norm(module) and len(shape) == 1:
            s.add(tower, "norms", shape[0] * times)
        else:
            s.add(tower, "blocks", math.prod(shape) * times)


# ---- one layer --------------------------------------------------------------------------------------------

def _layer(signature: dict[str, tuple], ctx: _Context, tower: str, where: str) -> Layer:
    """Read a layer's width and saved bytes a token from its tensors' names and shapes."""
    linears, norms = [], []
    for rest, shape in signature.items():
        module, kind = _split(rest)
        if kind == "weight" and len(shape) == 2 and not EMBEDDING_NAMES.search(rest):
            linears.append(Linear(module, shape[1], shape[0]))
        elif kind == "weight" and len(shape) == 1 and _is_norm(module):
            norms.append((module, shape[0], f"{module}.bias" in signature or f"{module}.beta" in signature))
    hidden = _hidden(norms, linears, where)
    layer = Layer(hidden, 0.0, 0, 0.0)
    attention = [lin for lin in linears if _is_attention(lin.name) and not _in_mlp(lin.name)]
    mlp = _without(linears, attention)
    if not attention and not mlp:
        raise Unreadable(f"{where} has no projection weights, so its attention and MLP cannot be read")
    if not attention:
        raise Unreadable(f"{where} has no recognisable attention projections (q/k/v/o, qkv, Wqkv ...): the "
                         "layer is not a transformer block the estimator can read")
    widths = _attention(layer, ctx, tower, attention, hidden, where)
    _mlp(layer, ctx, tower, mlp, hidden, where)
    _norms(layer, norms, hidden, widths)
    p = _dropout(ctx, tower)
    layer.saved_per_token += 2 * blocks.dropout(hidden, p)
    return layer


def _without(linears: list[Linear], drop: list[Linear]) -> list[Linear]:
    """[lin for lin in linears if lin not in drop], by the fields a Linear compares equal on, in one pass."""
    dropped = {(lin.name, lin.d_in, lin.d_out) for lin in drop}
    return [lin for lin in linears if (lin.name, lin.d_in, lin.d_out) not in dropped]


def _hidden(norms: list[tuple[str, int, bool]], linears: list[Linear], where: str) -> int:
    """The residual width: the commonest width of the layer's own norms, else of its projections' inputs."""
    residual = [w for module, w, _ in norms if not _in_attention(module) and not _in_mlp(module)
                or "output" in module.split(".")]
    if residual:
        return Counter(residual).most_common(1)[0][0]
    if linears:
        return Counter(lin.d_in for lin in linears).most_common(1)[0][0]
    raise Unreadable(f"{where} has no norm or projection weight to read its width from")


def _attention(layer: Layer, ctx: _Context, tower: str, attention: list[Linear], hidden: int,
               where: str) -> tuple[int, int, int]:
    """Each attention module (self, cross): its projections' inputs plus SDPA's saved tensors; the first
    one's (head size, query width, key/value width)."""
    groups: dict[str, list[Linear]] = {}
    for lin in attention:
        segs = lin.name.split(".")
        key = next((".".join(segs[: i + 1]) for i, seg in enumerate(segs[:-1]) if ATTN_SEGMENT.search(seg)), "")
        groups.setdefault(key, []).append(lin)
    widths: list[tuple[int, int, int]] = []
    for key, group in groups.items():
        outs = [lin for lin in group if OUT_LEAF.match(lin.name.rsplit(".", 1)[-1])
                or lin.name.endswith("output.dense")]
        if not outs:
            outs = [lin for lin in group if lin.d_out == hidden][-1:] if len(group) > 1 else []
            if not outs:
                raise Unreadable(f"{where}.{key or 'attention'} has no output projection, so its heads cannot be "
                                 "read")
        out = outs[-1]
        ins = [lin for lin in group if lin is not out]
        q_dim = out.d_in
        produced = sum(lin.d_out for lin in ins)
        kv_dim = (produced - q_dim) // 2 if produced > q_dim else q_dim
        heads, head_dim = _heads(ctx, tower, q_dim)
        fused = len(ins) == 1 and produced > q_dim
        layer.saved_per_token += (blocks.BF16 * sum(lin.d_in for lin in ins) + blocks.sdpa(q_dim, kv_dim, heads)
                                  + (blocks.BF16 * q_dim if fused else 0))
        if "cross" not in key and "encoder_attn" not in key:
            layer.kv_per_token += 2 * blocks.BF16 * kv_dim
        widths.append((head_dim, q_dim, kv_dim))
    return widths[0]


def _heads(ctx: _Context, tower: str, q_dim: int) -> tuple[int, int]:
    """(heads, head size): from the config when it divides the query width, else an assumed 128 or 64."""
    heads = ctx.number(tower, HEAD_KEYS)
    if heads and q_dim % heads == 0:
        return heads, q_dim // heads
    head_dim = ctx.number(tower, HEAD_DIM_KEYS)
    if head_dim and q_dim % head_dim == 0:
        return q_dim // head_dim, head_dim
    head_dim = 128 if q_dim >= 2048 and q_dim % 128 == 0 else 64 if q_dim % 64 == 0 else q_dim
    ctx.assumed.append(f"{tower} head size {head_dim} (no head count in the config; it only sizes SDPA's "
                       "log-sum-exp)")
    return q_dim // head_dim, head_dim


def _mlp(layer: Layer, ctx: _Context, tower: str, mlp: list[Linear], hidden: int, where: str) -> None:
    """Dense (gated or plain) or mixture-of-experts feed-forward: saved bytes a token."""
    if not mlp:
        ctx.assumed.append(f"{where} has no MLP projections: its layers are attention only")
        return
    experts = [lin for lin in mlp if EXPERT.search(lin.name)]
    if experts:
        _moe(layer, ctx, tower, mlp, experts, hidden, where)
        return
    layer.saved_per_token += _dense(layer, ctx, tower, mlp, hidden, where)


def _dense(layer: Layer, ctx: _Context, tower: str, mlp: list[Linear], hidden: int, where: str) -> float:
    downs = [lin for lin in mlp if lin.d_out == hidden and lin.d_in != hidden]
    ups = [lin for lin in mlp if lin.d_in == hidden and lin.d_out != hidden]
    if not downs:  # inner width equal to the hidden width: tell them apart by name
        downs = [lin for lin in mlp if DOWN_LEAF.search(lin.name.rsplit(".", 1)[-1])][-1:]
        ups = [lin for lin in mlp if lin not in downs]
    if len(downs) == 1:
        inner = downs[0].d_in
        if len(ups) == 2 and all(lin.d_out == inner for lin in ups) and len(mlp) == 3:
            return blocks.gated_mlp(hidden, inner)
        if len(ups) == 1 and ups[0].d_out == 2 * inner and len(mlp) == 2:
            return blocks.linear_inputs(hidden) + 4 * blocks.BF16 * inner
        if len(ups) == 1 and ups[0].d_out == inner and len(mlp) == 2:
            value, _ = ctx.value(tower, ACT_KEYS)
            act = value if isinstance(value, str) else "gelu"
            if not isinstance(value, str):
                ctx.assumed.append(f"{tower} MLP activation gelu (none named in the config)")
            layer.plain_mlp = (inner, act)
            return blocks.plain_mlp(hidden, inner, act)
    ctx.assumed.append(f"{where}: MLP layout not recognised, so each of its projections keeps its bf16 input "
                       "and output")
    return sum(blocks.BF16 * (lin.d_in + lin.d_out) for lin in mlp)


def _moe(layer: Layer, ctx: _Context, tower: str, mlp: list[Linear], experts: list[Linear], hidden: int,
         where: str) -> None:
    """Router, top-k routed experts (even routing, as the Mixtral builder assumes), shared experts."""
    indices = {EXPERT.search(lin.name).group(2) for lin in experts}  # type: ignore[union-attr]
    count = len(indices)
    first = min(indices, key=int)
    one = [lin for lin in experts if EXPERT.search(lin.name).group(2) == first]  # type: ignore[union-attr]
    rest = _without(mlp, experts)
    routers = [lin for lin in rest if lin.d_out == count and lin.d_in == hidden]
    shared = [lin for lin in rest if lin not in routers]
    layer.routers.update(lin.name for lin in routers)
    top_k = ctx.number(tower, TOP_K_KEYS)
    if not top_k or top_k > count:
        top_k = min(2, count)
        ctx.assumed.append(f"{where}: {top_k} of {count} experts active per token (no num_experts_per_tok)")
    inner = max((lin.d_in for lin in one if lin.d_out == hidden), default=hidden)
    layer.saved_per_token += (blocks.linear_inputs(hidden) + blocks.moe_router(count)
                              + top_k * (4 * hidden + 8 * inner))
    if shared:
        layer.saved_per_token += _dense(layer, ctx, tower, shared, hidden, where)
    ctx.assumed.append(f"{tower} mixture of experts: {count} experts, activations assume even routing")


def _norms(layer: Layer, norms: list[tuple[str, int, bool]], hidden: int, widths: tuple[int, int, int]) -> None:
    """Residual norms keep their input (RMSNorm also its normalised copy); norms inside attention or the MLP
    also hand a projection a fresh bf16 copy; per-head q/k norms keep what Qwen3's do."""
    head_dim, q_dim, kv_dim = widths
    for module, width, bias in norms:
        inner = _in_attention(module) or _in_mlp(module) and "output" not in module.split(".")
        if inner and width == head_dim != hidden:  # fp32 copy, normalised bf16 copy and rsqrt per head
            full = q_dim if module.rsplit(".", 1)[-1].lower().startswith("q") else kv_dim
            layer.saved_per_token += 6 * full + blocks.FP32 * (full // head_dim)
            layer.frozen_per_token += blocks.BF16 * full
            continue
        saved = blocks.layer_norm(width) if bias else blocks.rms_norm(width)
        layer.saved_per_token += saved + (blocks.BF16 * width if inner else 0)
        if not bias:
            layer.frozen_per_token += blocks.FP32 * width


def _dropout(ctx: _Context, tower: str) -> float:
    value, _ = ctx.value(tower, DROPOUT_KEYS)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 1 else 0.0


# ---- everything outside the blocks ------------------------------------------------------------------------

def _loose(s: Structure, ctx: _Context, loose: dict[str, tuple]) -> None:
    """Embeddings, final norms, heads and projections: the ledger, and what they keep per sample."""
    embed, head, vocab, width = ctx.head
    causal = embed is not None and (head is not None or _tied(ctx.config))
    final_norm = 0.0
    for name, shape in loose.items():
        tower = _tower(name)
        module, kind = _split(name)
        n = math.prod(shape)
        if name == head:
            continue
        if kind == "weight" and len(shape) == 1 and _is_norm(module):
            s.add(tower, "norms", n)
            saved = blocks.layer_norm(shape[0]) if f"{module}.bias" in loose else blocks.rms_norm(shape[0])
            if causal and tower == "text" and "emb" not in module:
                final_norm = saved
                if f"{module}.bias" not in loose:  # its normalised input is kept only to train its weight
                    s.lora_frozen["text"] = s.lora_frozen.get("text", 0) + blocks.FP32 * shape[0]
            elif tower in ctx.tokens:
                s.fixed_saved_per_sample += saved * ctx.tokens[tower]
        elif _is_norm(module) and len(shape) == 1:
            s.add(tower, "norms", n)
        elif name == embed or POSITION.search(name) or EMBEDDING_NAMES.search(name) or "token" in name:
            s.add(tower, "embeddings", n)
        elif len(shape) == 4:  # a patch embedding: a convolution the size of a linear over each patch
            s.add(tower, "embeddings", n)
            s.matmul(tower, n)
        elif kind == "weight" and len(shape) == 2:
            component = "heads" if tower == "head" else "projections"
            s.linear(tower, component, shape[1], shape[0], False, lora=False)
        else:
            s.add(tower, "other", n)
    if causal:
        if "sequence_length" not in s.inputs:
            ctx.token_count("text")
        causal_lm_head(s, ConfigReader(ctx.config), vocab, width, tied=head is None, final_norm_saved=final_norm)
    elif "text" in ctx.tokens:
        s.fixed_saved_per_sample += 16 * ctx.tokens["text"]  # token ids and attention mask (int64)
    if "text" in ctx.tokens and "vision" in ctx.tokens and not causal:
        ctx.assumed.append("two towers trained contrastively: the batch-by-batch logits are negligible")
