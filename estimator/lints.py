"""The structure verifier: findings about one revision that are true for the model transformers builds from it.

Pure: ``lint(LintInputs)`` reads the config, the weight manifest (tensor name -> (safetensors dtype, shape)), the
tokenizer's facts, the declared transformers version and the repo's file list, and returns one ``Finding`` per
inconsistency, each with its rule's id, severity, evidence (config keys, tensor names and shapes) and fix. The rules
(``RULES``) are the table the documentation is generated from.

Severities are the project's: ``critical`` (loading fails or generation breaks), ``warning`` (the model loads but
does something other than it claims), ``notice`` (worth fixing, rarely harmful), ``info`` (advice). Whatever the
input, no exception escapes: a value that cannot be read is itself a finding.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from packaging.version import InvalidVersion, Version

from .graph import structure_graph
from .lint_manifest import LintManifest
from .lint_rules import RULES, SEVERITIES, Rule
from .lint_tables import (
    DTYPES,
    EMBEDDING,
    EMBEDDING_WORDS,
    FINAL_NORM,
    FLOATS,
    HEAD_DIM_HONOURED,
    HEAD_SUFFIXES,
    HEAD_WORDS,
    LAYER_NORM,
    LAYER_NORM_WORDS,
    LEARNED_POSITIONS,
    LIMITS,
    LM_HEAD,
    LM_HEAD_WORDS,
    MAX_PLAUSIBLE_PARAMETERS,
    NO_LIMIT,
    NORM_WORDS,
    NOT_TEXT,
    ROPE_FAMILY_TYPES,
    ROPE_REQUIRED,
    ROPE_TYPE_KEY_SINCE,
    ROPE_TYPE_SINCE,
    ROTARY,
    SIZE_KEYS,
    SPLIT_HIDDEN,
    SUB_CONFIGS,
    TIE_DEFAULTS,
    TWO_FIELD_ROPE,
    UNSCALED_INIT,
    WEIGHT_SUFFIXES,
)

__all__ = ["RULES", "Finding", "LintInputs", "Rule", "TokenizerFacts", "lint", "worst"]

@dataclass(frozen=True)
class TokenizerFacts:
    """What the verifier needs of a tokenizer: the ids it can produce (its largest id + 1, None when unknown), the
    special tokens it names (role -> (text, id)), and its model_max_length (None when not given)."""

    size: int | None = None
    largest: tuple[str, int] | None = None
    special: Mapping[str, tuple[str, int]] = field(default_factory=dict)
    model_max_length: float | None = None
    source: str = "tokenizer.json"


@dataclass(frozen=True)
class LintInputs:
    """One revision as the verifier reads it. ``manifest`` holds every tensor of the weights read (None: none);
    ``weights_complete`` whether every weight file's header was read (a missing tensor means something only then);
    ``indexes`` each weight index's parsed JSON by path; ``transformers_version`` defaults to the config's."""

    config: Any
    manifest: Mapping[str, tuple[str, tuple[int, ...]]] | None = None
    tokenizer: TokenizerFacts | None = None
    generation_config: Any = None
    transformers_version: str | None = None
    files: tuple[str, ...] = ()
    indexes: Mapping[str, Any] = field(default_factory=dict)
    weights_complete: bool = True
    config_error: str | None = None  # why config.json could not be parsed (then ``config`` is None)


@dataclass(frozen=True)
class Finding:
    """One lint that holds: its rule's id and severity, a sentence, the evidence and the fix."""

    id: str
    severity: str
    message: str
    evidence: dict[str, Any]
    fix: str

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "severity": self.severity, "message": self.message, "evidence": self.evidence,
                "fix": self.fix}

    @property
    def key(self) -> str:
        """What identifies the finding between revisions: its rule and where it is (the first evidence key)."""
        return f"{self.id}:{self.evidence.get('where', '')}"


def lint(inputs: LintInputs) -> list[Finding]:
    """Every finding of the revision, most severe first (then by id)."""
    config = inputs.config
    if inputs.config_error is not None:
        return [_finding("config-invalid", f"config.json cannot be read: {inputs.config_error}",
                         {"where": "config.json", "error": inputs.config_error[:300]})]
    if not isinstance(config, dict):
        return [_finding("config-invalid", f"config.json is a {type(config).__name__}, not a JSON object",
                         {"where": "config.json", "found": type(config).__name__})]
    ctx = _Context(inputs, config)
    found = [*ctx.invalid]
    for check in CHECKS:
        found.extend(check(ctx))
    order = {s: i for i, s in enumerate(reversed(SEVERITIES))}
    return sorted(found, key=lambda f: (order[f.severity], f.id, f.key))


def _finding(rule_id: str, message: str, evidence: dict[str, Any], severity: str | None = None,
             fix: str | None = None) -> Finding:
    rule = RULES[rule_id]
    return Finding(rule_id, severity or rule.severity, message, evidence, fix or rule.fix)


class _Context:
    """The config's (sub-)configs with their sizes validated, and the manifest's tensors that the checks ask for."""

    def __init__(self, inputs: LintInputs, config: dict[str, Any]) -> None:
        self.inputs = inputs
        self.config = config
        self.model_type = config.get("model_type") if isinstance(config.get("model_type"), str) else ""
        self.custom = config.get("auto_map") is not None
        self.invalid: list[Finding] = []
        self.parts = [("", config, self.model_type)]  # (path, dict, model type)
        for key in SUB_CONFIGS:
            sub = config.get(key)
            if isinstance(sub, dict):
                kind = sub.get("model_type") if isinstance(sub.get("model_type"), str) else \
                    (f"{self.model_type}_{key.split('_')[0]}_model" if self.model_type in ("clip", "siglip") else "")
                self.parts.append((key, sub, kind))
        self.sizes: dict[str, int] = {}  # "path.key" -> validated value
        for path, part, _ in self.parts:
            for key, kind in SIZE_KEYS.items():
                if key in part and part[key] is not None:
                    self._size(path, key, part[key], kind)
        self.manifest = LintManifest(inputs.manifest)
        self.weights = bool(self.manifest.text) and bool(self.manifest.counted())
        self.missing_shards = _missing_shards(inputs)
        # A missing tensor means something only when every weight file was read and no indexed shard is absent.
        self.complete = self.weights and inputs.weights_complete and not any(self.missing_shards.values())
        self.quantized = config.get("quantization_config") is not None or self.manifest.packed()
        self._embeddings: list[tuple[str, tuple[int, ...]]] | None = None
        self._output_graph: _OutputGraph | None = None

    def output_graph(self) -> _OutputGraph:
        if self._output_graph is None:
            self._output_graph = _output_graph(self)
        return self._output_graph

    def tied(self) -> bool:
        """Whether the text model ties its head to the embeddings (config.json, else its family's default)."""
        part = self.text()[1]
        flag = self.config.get("tie_word_embeddings", part.get("tie_word_embeddings"))
        return flag if isinstance(flag, bool) else TIE_DEFAULTS.get(self.text()[2], True)

    def _size(self, path: str, key: str, value: Any, kind: str) -> None:
        where = f"{path}.{key}" if path else key
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        minimum = 0 if key in ("intermediate_size", "n_inner") else 1  # an MLP may be absent; heads may not
        if key == "n_inner" and value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int):
            self.invalid.append(_finding("config-value-invalid", f"{where} is {value!r}, not an integer",
                                         {"where": where, "value": _json_safe(value)}))
        elif value < minimum:
            self.invalid.append(_finding("config-value-invalid", f"{where} is {value}: a size must be at least {minimum}",
                                         {"where": where, "value": value}))
        elif value > LIMITS[kind]:
            self.invalid.append(_finding("config-value-invalid",
                                         f"{where} is {value:,}, beyond any real model (limit {LIMITS[kind]:,})",
                                         {"where": where, "value": value, "limit": LIMITS[kind]}))
        else:
            self.sizes[where] = value

    def size(self, path: str, *keys: str) -> tuple[str, int] | None:
        """The first of ``keys`` the (sub-)config at ``path`` gives with a valid value, as (its full name, value)."""
        for key in keys:
            where = f"{path}.{key}" if path else key
            if where in self.sizes:
                return where, self.sizes[where]
        return None

    def text(self) -> tuple[str, dict[str, Any], str]:
        """The (sub-)config of the text model: text_config when it names a vocabulary, else the top level."""
        for path, part, kind in self.parts:
            if path == "text_config" and "vocab_size" in part:
                return path, part, kind or self.model_type
        return self.parts[0]

    def vocab(self) -> tuple[str, int] | None:
        path = self.text()[0]
        return self.size(path, "vocab_size") or (self.size("", "vocab_size") if path else None)

    def embeddings(self) -> list[tuple[str, tuple[int, ...]]]:
        """The text model's token embedding tensors (2-D, floating)."""
        if self._embeddings is None:
            self._embeddings = [(n, shape) for n in self.manifest.top(EMBEDDING, EMBEDDING_WORDS)
                                if not NOT_TEXT.search(n) and "position" not in n
                                and (shape := self.manifest.shape(n, FLOATS)) is not None and len(shape) == 2]
        return self._embeddings

    def embedding_rows(self) -> tuple[str, int] | None:
        """(tensor, rows) of the token embedding when the weights hold one, else (vocab key, value)."""
        found = self.embeddings()
        if found:
            return found[0][0], found[0][1][0]
        return self.vocab()

    def architecture(self) -> str:
        archs = self.config.get("architectures")
        return archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else ""


def _json_safe(value: Any) -> Any:
    return value if isinstance(value, (str, int, float, bool, type(None))) else repr(value)[:80]


# -- the checks ------------------------------------------------------------------------------------------------


def _implausible(ctx: _Context) -> Iterator[Finding]:
    path = ctx.text()[0]
    hidden = ctx.size(path, "hidden_size", "n_embd", "d_model", "dim")
    layers = ctx.size(path, "num_hidden_layers", "n_layer", "num_layers", "n_layers")
    if hidden is None or layers is None:
        return
    vocab = ctx.vocab()
    implied = 12 * layers[1] * hidden[1] ** 2 + (vocab[1] if vocab else 0) * hidden[1]
    if implied > MAX_PLAUSIBLE_PARAMETERS:
        yield _finding("config-size-implausible",
                       f"{hidden[0]}={hidden[1]:,} over {layers[0]}={layers[1]:,} layers implies about "
                       f"{implied:.2e} parameters in its dense part, more than any published dense model",
                       {"where": hidden[0], "keys": {hidden[0]: hidden[1], layers[0]: layers[1],
                                                     **({vocab[0]: vocab[1]} if vocab else {})},
                        "parameters": implied})


def _vocab_embedding(ctx: _Context) -> Iterator[Finding]:
    vocab = ctx.vocab()
    if vocab is None or ctx.quantized:
        return
    for name, shape in ctx.embeddings():
        if shape[0] != vocab[1]:
            yield _finding("vocab-size-embedding",
                           f"{vocab[0]} is {vocab[1]:,} but {name} has {shape[0]:,} rows",
                           {"where": vocab[0], vocab[0]: vocab[1], "tensor": name, "shape": list(shape)})


def _vocab_tokenizer(ctx: _Context) -> Iterator[Finding]:
    facts = ctx.inputs.tokenizer
    rows = ctx.embedding_rows()
    if facts is None or facts.size is None or rows is None or ctx.quantized:
        return
    if facts.size > rows[1]:
        largest = facts.largest
        yield _finding("vocab-size-tokenizer",
                       f"the tokenizer produces ids up to {facts.size - 1:,}"
                       + (f" ({largest[0]!r})" if largest else "")
                       + f", past the {rows[1]:,} rows of {rows[0]}",
                       {"where": rows[0], "tokenizer_size": facts.size, "largest_id": facts.size - 1,
                        **({"largest_token": largest[0]} if largest else {}), "rows": rows[1], "rows_from": rows[0],
                        "source": facts.source})


SPECIAL_ID_KEYS = ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id", "sep_token_id",
                   "cls_token_id", "unk_token_id", "mask_token_id")


def _special_ids(ctx: _Context) -> Iterator[Finding]:
    rows = ctx.embedding_rows()
    if rows is None or ctx.quantized:
        return
    named: list[tuple[str, int]] = []
    sources = [("config.json", p, part) for p, part, _ in ctx.parts if p in ("", "text_config")]
    if isinstance(ctx.inputs.generation_config, dict):
        sources.append(("generation_config.json", "", ctx.inputs.generation_config))
    for file, path, part in sources:
        for key in SPECIAL_ID_KEYS:
            value = part.get(key)
            values = value if isinstance(value, list) else [value]
            for v in values:
                if isinstance(v, int) and not isinstance(v, bool):
                    named.append((f"{file} {path + '.' if path else ''}{key}", v))
    facts = ctx.inputs.tokenizer
    for role, (text, token_id) in sorted((facts.special if facts else {}).items()):
        named.append((f"{facts.source} {role} {text!r}", token_id))  # type: ignore[union-attr]
    seen = set()
    for where, token_id in named:
        if token_id >= rows[1] and (where, token_id) not in seen:
            seen.add((where, token_id))
            yield _finding("special-token-out-of-vocab",
                           f"{where} is {token_id:,}, outside the {rows[1]:,} rows of {rows[0]}",
                           {"where": where, "id": token_id, "rows": rows[1], "rows_from": rows[0]})


def _kv_heads(ctx: _Context) -> Iterator[Finding]:
    for path, _, _ in ctx.parts:
        heads = ctx.size(path, "num_attention_heads", "n_head", "n_heads")
        kv = ctx.size(path, "num_key_value_heads")
        if heads and kv and kv[1] and heads[1] % kv[1]:
            yield _finding("kv-heads-divide", f"{heads[0]}={heads[1]} is not a multiple of {kv[0]}={kv[1]}",
                           {"where": kv[0], heads[0]: heads[1], kv[0]: kv[1]})


HIDDEN_KEYS = ("hidden_size", "n_embd", "d_model", "dim")
HEAD_KEYS = ("num_attention_heads", "n_head", "n_heads", "encoder_attention_heads")


def _head_dim(ctx: _Context) -> Iterator[Finding]:
    for path, _part, kind in ctx.parts:
        if ctx.custom or kind not in SPLIT_HIDDEN | HEAD_DIM_HONOURED:
            continue
        hidden, heads = ctx.size(path, *HIDDEN_KEYS), ctx.size(path, *HEAD_KEYS)
        if hidden is None or heads is None:
            continue
        head_dim = ctx.size(path, "head_dim")
        if kind in HEAD_DIM_HONOURED and head_dim is not None:
            continue
        evidence = {"where": heads[0], hidden[0]: hidden[1], heads[0]: heads[1]}
        if hidden[1] % heads[1]:
            yield _finding("head-dim-hidden", f"{hidden[0]}={hidden[1]} does not split into {heads[0]}={heads[1]} "
                                              f"heads ({kind} computes head size as {hidden[0]} // heads)", evidence)
        elif head_dim is not None and head_dim[1] * heads[1] != hidden[1]:
            yield _finding("head-dim-hidden",
                           f"{head_dim[0]}={head_dim[1]} x {heads[1]} heads is not {hidden[0]}={hidden[1]}; {kind} "
                           f"ignores head_dim and uses {hidden[1] // heads[1]}", {**evidence, head_dim[0]: head_dim[1]})


def _attention_shapes(ctx: _Context) -> Iterator[Finding]:
    if not ctx.weights or ctx.quantized or ctx.custom:
        return
    path, _, kind = ctx.text()
    if kind not in HEAD_DIM_HONOURED:
        return
    hidden, heads = ctx.size(path, "hidden_size"), ctx.size(path, "num_attention_heads")
    if hidden is None or heads is None:
        return
    explicit = ctx.size(path, "head_dim")
    if explicit is None and hidden[1] % heads[1]:
        return  # head-dim-hidden says it
    head_dim = explicit[1] if explicit else hidden[1] // heads[1]
    kv = ctx.size(path, "num_key_value_heads") or heads
    for role, count, key in (("q_proj", heads[1], heads[0]), ("k_proj", kv[1], kv[0])):
        names = ctx.manifest.ending(f".layers.0.self_attn.{role}.weight")
        shape = ctx.manifest.shape(names[0]) if names else None
        if not shape or len(shape) != 2:
            continue
        if shape[0] != count * head_dim:
            yield _finding("attention-shape-mismatch",
                           f"{names[0]} has {shape[0]:,} rows; {key}={count} x head_dim {head_dim} is {count * head_dim:,}",
                           {"where": key, "tensor": names[0], "shape": list(shape), key: count, "head_dim": head_dim})


def _tie(ctx: _Context) -> Iterator[Finding]:
    if not ctx.complete or ctx.custom or not ctx.architecture().endswith("ForCausalLM"):
        return
    path, part, kind = ctx.text()
    flag = ctx.config.get("tie_word_embeddings", part.get("tie_word_embeddings"))
    if not isinstance(flag, bool):
        if kind not in TIE_DEFAULTS:
            return
        flag, source = TIE_DEFAULTS[kind], f"{kind}'s default"
    else:
        source = "config.json"
    heads = ctx.manifest.top(LM_HEAD, LM_HEAD_WORDS)
    embeddings = ctx.embeddings()
    if flag and heads and embeddings:
        yield _finding("tie-word-embeddings-head",
                       f"tie_word_embeddings is true ({source}), yet the weights store {heads[0]} apart from "
                       f"{embeddings[0][0]}: transformers discards it and uses the embeddings",
                       {"where": "tie_word_embeddings", "tie_word_embeddings": True, "source": source,
                        "head": heads[0], "head_shape": list(ctx.manifest.shape(heads[0]) or ()), "embedding": embeddings[0][0]})


def _head_present(ctx: _Context) -> Iterator[Finding]:
    arch = ctx.architecture()
    suffix = next((s for s in HEAD_SUFFIXES if arch.endswith(s)), None)
    if suffix is None or not ctx.complete or ctx.custom:
        return
    if _head_found(ctx, suffix):
        return
    evidence = {"where": "architectures", "architecture": arch, "head_expected": HEAD_SUFFIXES[suffix].pattern,
                "tie_word_embeddings": ctx.config.get("tie_word_embeddings")}
    graph = ctx.output_graph()
    if graph.decides:
        if not graph.findings:  # the graph's verdict stands: what the weights end at is no normalization
            yield _finding("head-missing", f"{arch} promises a head, but the weights hold none: transformers "
                                           "initialises it at random", evidence)
        return
    # No graph of this family (or none with the head in it): the tensor names are all there is to read
    norm = _last_norm(ctx)
    if norm is not None:
        yield _finding("bn-at-output", f"{arch} promises a head, but the weights end at {norm[0]} "
                                       f"({'x'.join(map(str, norm[1]))}): nothing follows the normalization, so "
                                       "the head transformers adds is random",
                       {**evidence, "norm": norm[0], "norm_shape": list(norm[1]), "from": "tensor names"})
    else:
        yield _finding("head-missing", f"{arch} promises a head, but the weights hold none: transformers "
                                       "initialises it at random", evidence)


def _head_found(ctx: _Context, suffix: str) -> bool:
    """Whether the weights hold the head ``suffix``'s class promises, or tie it to the embeddings they hold."""
    pattern = HEAD_SUFFIXES[suffix]
    if ctx.manifest.top(pattern, HEAD_WORDS[suffix]):
        return True
    if pattern is LM_HEAD or suffix == "ForMaskedLM":
        return ctx.tied() and bool(ctx.embeddings())
    return False


def _norm_at_output(ctx: _Context) -> Iterator[Finding]:
    """bn-at-output read from the module graph (graph.py): per tower, the last module the weights store, when it
    is a normalization and the graph has modules with weights after it (a head, a projection) that the weights
    lack. A tower that ends at its normalization by design (a base model's hidden states) is not a finding."""
    yield from ctx.output_graph().findings


@dataclass
class _OutputGraph:
    """What the graph says of each tower's output: ``decides`` when a graph of the family exists and puts modules
    after the head class's final normalization (so the tensor-name fallback is not needed), and its findings."""

    decides: bool = False
    findings: list[Finding] = field(default_factory=list)


NORM_TYPE = re.compile(r"Norm")
WEIGHTED_TYPE = re.compile(r"Linear|Conv|Embedding|Norm|LayerScale|^Parameter$")
# transformers 5 ties T5's lm_head to the shared embeddings whatever tie_word_embeddings says (T5Config)
ALWAYS_TIED = frozenset({"t5", "mt5", "umt5"})
WALK_LIMIT = 64  # weighted nodes walked back from a tower's end before it says nothing (a manifest of other names)


def _output_graph(ctx: _Context) -> _OutputGraph:
    out = _OutputGraph()
    if ctx.custom or not ctx.complete:
        return out
    graph = structure_graph(ctx.config, seq_len_cap=1)  # never raises (test_no_input_raises fuzzes it here)
    if not graph["modelled"]:
        return out
    arch = ctx.architecture()
    suffix = next((s for s in HEAD_SUFFIXES if arch.endswith(s)), None)
    head_words = (*HEAD_WORDS[suffix], "lm_head") if suffix else ()
    head_stored = suffix is not None and _head_found(ctx, suffix)
    vocab = ctx.vocab()
    # a projection onto the vocabulary shares the embeddings' tensor when tied: nothing of its own is stored
    tied_rows = vocab[1] if vocab and (ctx.tied() or ctx.model_type in ALWAYS_TIED) and ctx.embeddings() else None
    covered = suffix is None
    for tower in graph["towers"]:
        nodes = [n for n in tower["nodes"] if WEIGHTED_TYPE.search(n["type"])]
        last_norm = max((i for i, n in enumerate(nodes) if NORM_TYPE.search(n["type"])), default=None)
        if last_norm is not None and any("pooler" not in n["name"] for n in nodes[last_norm + 1:]):
            covered = True
        after: list[dict] = []
        for node in reversed(nodes[-WALK_LIMIT:]):
            name = node["name"]
            tensor = _stored(ctx.manifest, name)
            if tensor is None and head_stored and any(w in name for w in head_words):
                tensor = name  # the class's head, stored under a name of its own (embed_out) or tied
            if tensor is None and tied_rows and "Linear" in node["type"] and node["output_shape"][-1:] == [tied_rows]:
                tensor = name
            if tensor is None:
                if "pooler" not in name:
                    after.append(node)
                continue
            if NORM_TYPE.search(node["type"]) and after:
                after.reverse()
                shape = ctx.manifest.shape(tensor) or ()
                missing = ", ".join(n["name"] for n in after[:4]) + (f" and {len(after) - 4} more" if len(after) > 4 else "")
                out.findings.append(_finding(
                    "bn-at-output",
                    f"{arch or tower['name']}'s {tower['name']} tower: the weights end at {name} ({node['type']}, "
                    f"{tensor}); in the module tree transformers builds, {missing} follow it and the weights lack "
                    "them, so the output goes through random modules after the normalization",
                    {"where": tensor, "architecture": arch, "tower": tower["name"], "norm": tensor,
                     "norm_shape": list(shape), "norm_node": name, "norm_type": node["type"],
                     "missing_after": [n["name"] for n in after], "from": "graph"}))
            break
    out.decides = covered
    return out


def _stored(manifest: LintManifest, module: str) -> str | None:
    """The first tensor the weights hold for ``module`` (its path in the graph): under that path, under it less
    the class's base prefix (``model.norm`` stored as ``norm.weight``), or under a prefix of its own
    (``base_model.model.model.norm.weight``); None when there is none."""
    stripped = module.partition(".")[2]
    for literal in (f"\n{module}.", f".{module}.", *((f"\n{stripped}.",) if stripped else ()), f"\n{module}\n"):
        at = manifest.text.find(literal)
        if at >= 0:
            start = manifest.text.rfind("\n", 0, at + 1) + 1
            return manifest.text[start:manifest.text.find("\n", at + 1)]
    return None


def _last_norm(ctx: _Context) -> tuple[str, tuple[int, ...]] | None:
    """The text model's final normalization: a norm outside the numbered layers, else the last layer's output norm."""
    finals = [(n, shape) for n in ctx.manifest.top(FINAL_NORM, NORM_WORDS)
              if not NOT_TEXT.search(n) and (shape := ctx.manifest.shape(n)) is not None]
    if finals:
        return finals[0]
    layered = [(int(m.group(1)), n) for n in ctx.manifest.matching(LAYER_NORM, LAYER_NORM_WORDS)
               if (m := LAYER_NORM.search(n)) and not NOT_TEXT.search(n)]
    if not layered:
        return None
    name = max(layered)[1]
    return name, ctx.manifest.shape(name) or ()


def _init(ctx: _Context) -> Iterator[Finding]:
    if any(f.endswith(WEIGHT_SUFFIXES) for f in ctx.inputs.files) or ctx.weights or ctx.custom:
        return
    path, part, kind = ctx.text()
    layers = ctx.size(path, "num_hidden_layers")
    if kind not in UNSCALED_INIT or layers is None or layers[1] < 12:
        return
    std = part.get("initializer_range", 0.02)
    yield _finding("deep-attention-default-init",
                   f"{layers[1]} stacked attention layers and no weights: trained from this config, {kind}'s "
                   f"initialisation draws residual projections with std {std} at every depth",
                   {"where": layers[0], layers[0]: layers[1], "initializer_range": _json_safe(std),
                    "weight_files": 0},
                   fix=f"Scale residual output projections by depth: nn.init.normal_(w, std={std} / "
                       f"math.sqrt(2 * {layers[1]}))")


def _dtype(ctx: _Context) -> Iterator[Finding]:
    if not ctx.weights or ctx.quantized:
        return
    for key, part in (("torch_dtype", ctx.config), ("dtype", ctx.config)):
        declared = part.get(key)
        if isinstance(declared, str):
            break
    else:
        return
    name = DTYPES.get(declared.removeprefix("torch."))
    if name is None:
        return
    by_dtype: dict[str, int] = {}
    for (dtype, shape), count in ctx.manifest.counted().items():
        if dtype in FLOATS:
            by_dtype[dtype] = by_dtype.get(dtype, 0) + math.prod(shape) * count
    if not by_dtype:
        return
    stored = max(by_dtype, key=lambda d: by_dtype[d])
    if stored != name:
        yield _finding("torch-dtype-weights",
                       f"{key} is {declared} but {100 * by_dtype[stored] / sum(by_dtype.values()):.0f}% of the "
                       f"weights are {stored}",
                       {"where": key, key: declared, "elements_by_dtype": dict(sorted(by_dtype.items()))})


def _positions(ctx: _Context) -> Iterator[Finding]:
    facts = ctx.inputs.tokenizer
    limit = facts.model_max_length if facts else None
    if limit is None or limit >= NO_LIMIT or ctx.custom:
        return
    path, part, kind = ctx.text()
    family = ctx.model_type if ctx.model_type in LEARNED_POSITIONS else kind
    if family in LEARNED_POSITIONS:
        key, offset = LEARNED_POSITIONS[family]
        found = ctx.size(path, key)
        if found is None:
            return
        usable = found[1] - offset
        if limit > usable:
            yield _finding("max-position-tokenizer",
                           f"model_max_length is {limit:,.0f} but {found[0]}={found[1]:,} gives "
                           f"{usable:,} learned positions: longer inputs index past the table",
                           {"where": found[0], "model_max_length": limit, found[0]: found[1], "usable": usable})
        return
    if kind not in ROTARY:
        return
    found = ctx.size(path, "max_position_embeddings", "n_positions")
    if found is None:
        return
    rope = _rope_of(part)[1]
    rope = rope if isinstance(rope, dict) else {}
    factor = rope.get("factor") if isinstance(rope.get("factor"), (int, float)) else 1
    kind_of_rope = rope.get("rope_type", rope.get("type"))
    extended = found[1] * max(factor, 1) if kind_of_rope in ("linear", "dynamic", "yarn") else found[1]
    if limit > extended:
        yield _finding("max-position-tokenizer",
                       f"model_max_length is {limit:,.0f} but {found[0]}={found[1]:,}"
                       + (f" with rope_scaling {kind_of_rope} x{factor}" if rope else " without rope_scaling")
                       + f" reaches {extended:,.0f}: longer inputs are past what the model was trained for",
                       {"where": found[0], "model_max_length": limit, found[0]: found[1],
                        "rope_scaling": _json_safe(kind_of_rope), "extended": extended}, severity="info")


def _rope(ctx: _Context) -> Iterator[Finding]:
    if ctx.custom:
        return
    declared = ctx.inputs.transformers_version or ctx.config.get("transformers_version")
    try:
        version = Version(declared) if isinstance(declared, str) else None
    except InvalidVersion:
        version = None
    for path, part, kind_of_family in ctx.parts:
        key, rope = _rope_of(part)
        if rope is None:
            continue
        where = f"{path}.{key}" if path else key
        if not isinstance(rope, dict):
            yield _finding("rope-scaling-invalid", f"{where} is {_json_safe(rope)!r}, not an object",
                           {"where": where, "value": _json_safe(rope)})
            continue
        kind = rope.get("rope_type", rope.get("type"))
        if not isinstance(kind, str):
            yield _finding("rope-scaling-invalid", f"{where} names no type (rope_type or type)",
                           {"where": where, "keys": sorted(rope)})
            continue
        yield from _rope_keys(ctx, path, part, where, kind, rope)
        if kind in ROPE_FAMILY_TYPES or version is None:
            continue
        since = ROPE_TYPE_SINCE.get(kind)
        if since is None:
            yield _finding("rope-scaling-version", f"{where} type {kind!r} is known to no transformers version",
                           {"where": where, "type": kind, "transformers_version": declared,
                            "known": sorted(ROPE_TYPE_SINCE)})
        elif Version(version.base_version) < Version(since):
            yield _finding("rope-scaling-version",
                           f"{where} type {kind!r} arrived in transformers {since}; the config declares {declared}",
                           {"where": where, "type": kind, "transformers_version": declared, "since": since})
        elif (Version(version.base_version) < Version(ROPE_TYPE_KEY_SINCE) and kind_of_family in TWO_FIELD_ROPE
              and set(rope) != {"type", "factor"}):
            yield _finding("rope-scaling-version",
                           f"{where} has {', '.join(sorted(rope))}; the transformers {declared} the config declares "
                           f"takes exactly type and factor for {kind_of_family} (4.43.0 reads more)",
                           {"where": where, "type": kind, "transformers_version": declared, "keys": sorted(rope),
                            "since": ROPE_TYPE_KEY_SINCE})
        elif "rope_type" in rope and "type" not in rope and Version(version.base_version) < Version(ROPE_TYPE_KEY_SINCE):
            yield _finding("rope-scaling-version",
                           f"{where} names its type with 'rope_type', which transformers reads from "
                           f"{ROPE_TYPE_KEY_SINCE}; the config declares {declared} (it reads 'type')",
                           {"where": where, "type": kind, "transformers_version": declared,
                            "since": ROPE_TYPE_KEY_SINCE})


def _rope_of(part: dict[str, Any]) -> tuple[str, Any]:
    """(the key, the rope settings): rope_scaling, or transformers 5's rope_parameters (which holds the type too)."""
    if part.get("rope_scaling") is not None:
        return "rope_scaling", part["rope_scaling"]
    return "rope_parameters", part.get("rope_parameters")


def _rope_keys(ctx: _Context, path: str, part: dict[str, Any], where: str, kind: str,
               rope: dict[str, Any]) -> Iterator[Finding]:
    missing = [k for k in ROPE_REQUIRED.get(kind, ()) if k not in rope]
    if missing:
        yield _finding("rope-scaling-invalid", f"{where} of type {kind!r} lacks {', '.join(missing)}",
                       {"where": where, "type": kind, "missing": missing, "keys": sorted(rope)})
        return
    factor = rope.get("factor")
    if "factor" in ROPE_REQUIRED.get(kind, ()) and (isinstance(factor, bool) or not isinstance(factor, (int, float))
                                                     or factor < 1):
        yield _finding("rope-scaling-invalid", f"{where}.factor is {_json_safe(factor)!r}: it must be a number >= 1",
                       {"where": where, "type": kind, "factor": _json_safe(factor)})
    if kind == "longrope":
        hidden, heads = ctx.size(path, "hidden_size"), ctx.size(path, "num_attention_heads")
        head_dim = ctx.size(path, "head_dim")
        dim = head_dim[1] if head_dim else (hidden[1] // heads[1] if hidden and heads else None)
        rotary = part.get("partial_rotary_factor", 1.0)
        if dim is not None and isinstance(rotary, (int, float)) and not isinstance(rotary, bool) and 0 < rotary <= 1:
            half = int(dim * rotary) // 2
            for key in ("short_factor", "long_factor"):
                value = rope[key]
                if not isinstance(value, list) or len(value) != half:
                    yield _finding("rope-scaling-invalid",
                                   f"{where}.{key} has {len(value) if isinstance(value, list) else 'no'} entries; "
                                   f"head_dim {dim} needs {half}",
                                   {"where": f"{where}.{key}", "type": kind, "entries": len(value) if isinstance(
                                       value, list) else None, "expected": half})


def _missing_shards(inputs: LintInputs) -> dict[str, dict[str, int]]:
    """Per weight index: the shards it names that the repo lacks, with how many tensors each holds."""
    files = set(inputs.files)
    out = {}
    for index_path, doc in sorted(inputs.indexes.items()):
        weight_map = doc.get("weight_map") if isinstance(doc, dict) else None
        if not isinstance(weight_map, dict):
            continue
        folder = index_path.rpartition("/")[0]
        by_shard: dict[str, int] = {}
        for shard in weight_map.values():
            if isinstance(shard, str):
                by_shard[shard] = by_shard.get(shard, 0) + 1
        out[index_path] = {s: n for s, n in sorted(by_shard.items()) if (f"{folder}/{s}" if folder else s) not in files}
    return out


def _index(ctx: _Context) -> Iterator[Finding]:
    for index_path, missing in ctx.missing_shards.items():
        if missing:
            shown = ", ".join(list(missing)[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
            yield _finding("index-missing-shard",
                           f"{index_path} maps {sum(missing.values()):,} tensors to {shown}, not in the repo",
                           {"where": index_path, "index": index_path, "missing": list(missing),
                            "tensors": sum(missing.values())})


CHECKS = (_implausible, _vocab_embedding, _vocab_tokenizer, _special_ids, _kv_heads, _head_dim, _attention_shapes,
          _tie, _head_present, _norm_at_output, _init, _dtype, _positions, _rope, _index)


def worst(findings: list[Finding]) -> str | None:
    """The highest severity among ``findings`` (None when there are none)."""
    return max((f.severity for f in findings), key=SEVERITIES.index, default=None)
