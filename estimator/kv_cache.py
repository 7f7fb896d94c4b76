"""The KV cache of one sequence, layer by layer, as transformers' cache and vLLM's paged cache hold it.

Each layer is read from config.json into a kind (full attention, sliding window, latent attention, a
fixed-size mamba/linear-attention/conv state, encoder-decoder cross-attention, or nothing), then priced per
runtime:

- transformers (5.x, ``DynamicCache`` built from the config, ``cache_utils.py``): a full layer keeps every
  token's K and V; a sliding layer keeps the last ``sliding_window - 1`` tokens (``DynamicSlidingWindowLayer``);
  DeepSeek's latent attention keeps the compressed ``kv_lora_rank`` latent and the ``qk_rope_head_dim`` rope
  key per token (one "head"; transformers 4.x decompressed them, see ``decompressed_bytes_per_token``);
  ``LinearAttentionLayer`` keeps a conv state of ``d_conv`` columns in the model dtype and an fp32 recurrent
  state; cross-attention keeps the encoder's tokens. Checked to the byte by tests/estimator (groundtruth).
- vLLM (v1, ``vllm/v1/kv_cache_interface.py``): pages of 16 tokens; ``FullAttentionSpec`` reserves
  ``cdiv(len, 16)`` pages; ``SlidingWindowSpec`` at most ``cdiv(min(window - 1 + max_num_batched_tokens, len),
  16) + 1`` pages; ``MLAAttentionSpec`` one head of ``kv_lora_rank + qk_rope_head_dim`` (no separate V);
  ``MambaSpec`` one state per sequence whose shapes are ``MambaStateShapeCalculator``'s
  (``vllm/model_executor/layers/mamba/mamba_utils.py``: conv states keep ``d_conv - 1`` columns, states in the
  model dtype as ``mamba_ssm_cache_dtype="auto"``, except Nemotron-H, whose ``NemotronHForCausalLMConfig`` takes
  the config's ``mamba_ssm_cache_dtype``, float32 when absent, Qwen3.5, whose hook takes the config's
  ``mamba_ssm_dtype``, and Kimi's delta attention, whose state is float32); ``CrossAttentionSpec`` the encoder's
  length.

Hybrids are read layer by layer, never by a formula per family: which layer holds attention, a state, both
(Falcon-H1, Zamba2's ``hybrid`` layers, where a shared attention block runs before the layer's mamba and keeps
its own K/V at every place it runs) or nothing (Nemotron-H's MLP-only ``-`` layers) comes from ``layer_types`` /
``layers_block_type``, Nemotron-H's ``hybrid_override_pattern``, Bamba's ``attn_layer_indices``, Kimi Linear's
``linear_attn_config`` (1-based) or the family's period (Jamba, Qwen3-Next).

Nothing here raises on odd input: a layer that cannot be read is priced by an assumption that is noted, and
a config with no layer this module can read yields a layout whose ``unknown`` says why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .families.vision import LLAMA_TEXT

RUNTIMES = ("transformers", "vllm")
VLLM_BLOCK_TOKENS = 16          # vLLM's default block_size (CacheConfig)
VLLM_BATCHED_TOKENS = 2048      # vLLM's default max_num_batched_tokens for online serving (SchedulerConfig)
KV_DTYPES = {"bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2, "half": 2, "fp8": 1, "fp8_e4m3": 1,
             "fp8_e5m2": 1, "fp32": 4, "float32": 4, "auto": None}
STATE_BYTES = 2                 # conv states, and vLLM's ssm states, in the serving dtype (bf16/fp16)
RECURRENT_BYTES_TRANSFORMERS = 4  # transformers keeps mamba/linear-attention recurrent states in fp32
MAX_CONTEXT = 100_000_000       # past this a context is not a figure but a typo

FULL = {"full_attention", "attention", "global_attention", "global", "full"}
SLIDING = {"sliding_attention", "chunked_attention", "local_attention", "local", "sliding", "swa"}
LINEAR = {"linear_attention", "mamba", "mamba2", "conv", "ssm", "linear", "short_conv"}
NO_CACHE = {"moe", "mlp", "dense", "dummy"}
SEQ2SEQ = {"t5", "mt5", "umt5", "bart", "mbart", "marian", "pegasus", "whisper", "m2m_100", "nllb_moe"}
LATENT_TYPES = {"deepseek_v2", "deepseek_v3", "kimi_k2", "kimi_k25", "glm4_moe_lite", "longcat_flash"}
PATTERN_LETTERS = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}  # Nemotron-H's hybrid_override_pattern
SSM_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}  # vLLM's mamba_ssm_cache_dtype, where a family sets it


@dataclass(frozen=True)
class Layers:
    """One kind of layer and how many: per token bytes per layer for each runtime, or a fixed state."""

    kind: str                       # full | sliding | latent | state | cross
    count: int
    token_elements: int = 0         # K+V elements one token adds to one layer (at the cache dtype)
    window: int | None = None       # sliding: the window; cross: the encoder's fixed length, when fixed
    state: dict = field(default_factory=dict)  # state layers: bytes per runtime
    transformers_elements: int | None = None  # where transformers caches more than vLLM (Falcon expands K/V)

    def elements(self, runtime: str) -> int:
        if runtime == "transformers" and self.transformers_elements is not None:
            return self.transformers_elements
        return self.token_elements


@dataclass
class KvLayout:
    """Every layer of one config, with what reading them assumed; ``unknown`` when nothing could be read."""

    groups: list[Layers]
    notes: list[str]
    max_context: int | None
    model_dtype_bytes: int = 2
    unknown: str | None = None
    decompressed_elements_per_token: int | None = None  # MLA: K and V as transformers 4.x cached them

    def token_bytes(self, kv_bytes: int) -> dict[str, int]:
        """Per runtime, the bytes one more token adds to one sequence (sliding layers past their window add 0)."""
        return {r: sum(g.count * g.elements(r) * kv_bytes for g in self.groups if g.kind in ("full", "latent"))
                for r in RUNTIMES}

    def at_context(self, runtime: str, context: int, kv_bytes: int) -> int:
        """Bytes one sequence of ``context`` tokens holds, growing part only (see ``fixed_bytes``)."""
        total = 0
        for g in self.groups:
            if g.kind in ("full", "latent"):
                total += g.count * g.elements(runtime) * kv_bytes * _tokens(runtime, context)
            elif g.kind == "sliding":
                total += g.count * g.elements(runtime) * kv_bytes * _window_tokens(runtime, context, g.window or 0)
            elif g.kind == "cross" and g.window is None:
                total += g.count * g.elements(runtime) * kv_bytes * _tokens(runtime, context)
        return total

    def fixed_bytes(self, runtime: str, kv_bytes: int) -> int:
        """Bytes one sequence holds whatever its length: recurrent/conv states, a fixed encoder's cross K/V."""
        total = 0
        for g in self.groups:
            if g.kind == "state":
                total += g.count * g.state[runtime]
            elif g.kind == "cross" and g.window is not None:
                total += g.count * g.elements(runtime) * kv_bytes * _tokens(runtime, g.window)
        return total


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _tokens(runtime: str, context: int) -> int:
    return context if runtime == "transformers" else _cdiv(context, VLLM_BLOCK_TOKENS) * VLLM_BLOCK_TOKENS


def _window_tokens(runtime: str, context: int, window: int) -> int:
    if runtime == "transformers":
        return min(context, max(window - 1, 0))
    kept = min(window - 1 + VLLM_BATCHED_TOKENS, context)
    return min((_cdiv(kept, VLLM_BLOCK_TOKENS) + 1) * VLLM_BLOCK_TOKENS, _tokens(runtime, context))


def _int(data: dict, *keys: str) -> int | None:
    for key in keys:
        value = data.get(key)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def text_config(config: dict) -> dict:
    """The decoder's config: ``text_config`` of a multimodal checkpoint (over transformers' defaults for a Llama
    text model, which llava's leaves to them), else the config itself."""
    sub = config.get("text_config")
    if not isinstance(sub, dict):
        return config
    base = LLAMA_TEXT if sub.get("model_type", "llama") == "llama" else {}
    return {**base, **sub, "model_type": sub.get("model_type") or config.get("model_type")}


def layout(config: Any) -> KvLayout:
    """The cache layout of a config.json (a dict); never raises."""
    if not isinstance(config, dict):
        return KvLayout([], [], None, unknown=f"config is not a JSON object ({type(config).__name__})")
    notes: list[str] = []
    if config.get("is_encoder_decoder") is True or config.get("model_type") in SEQ2SEQ:
        return _seq2seq(config, notes)
    c = text_config(config)
    layers = _int(c, "num_hidden_layers", "n_layer", "num_layers", "n_layers")
    if layers is None:
        return KvLayout([], notes, None, unknown="no layer count (num_hidden_layers) in config.json")
    max_context = _int(c, "max_position_embeddings", "n_positions", "max_sequence_length", "seq_length",
                       "n_ctx")
    attn = _attention(c, notes)
    kinds = _kinds(c, layers, notes)
    groups: list[Layers] = []
    decompressed = None
    if attn is None and any(k in ("full", "sliding", "hybrid") for k in kinds):
        return KvLayout([], notes, max_context, unknown="the attention layers' heads cannot be read: " + notes[-1]
                        if notes else "the attention layers' heads cannot be read")
    for kind in ("full", "sliding"):
        n = kinds.count(kind) + (kinds.count("hybrid") if kind == "full" else 0)
        if n and attn is not None:
            if attn.get("latent"):
                groups.append(Layers("latent", n, attn["latent"]))
                decompressed = attn["decompressed"]
            else:
                window = _int(c, "sliding_window", "attention_chunk_size") if kind == "sliding" else None
                if kind == "sliding" and window is None:
                    notes.append("sliding layers without a sliding_window: priced as full attention")
                    groups.append(Layers("full", n, attn["kv"]))
                else:
                    groups.append(Layers(kind, n, attn["kv"], window, transformers_elements=attn.get("expanded")))
    states = kinds.count("state") + kinds.count("hybrid")
    if states:
        state = _state(c, notes)
        if state is None:
            return KvLayout([], notes, max_context, unknown="the mamba/linear-attention state's size cannot be read: "
                            + (notes[-1] if notes else "no state keys"))
        groups.append(Layers("state", states, state=state))
    if not groups:
        return KvLayout([], notes, max_context, unknown="no attention or state layer in config.json")
    sinks = "sinks" if c.get("model_type") == "gpt_oss" else None
    if sinks:
        notes.append("attention sinks (gpt-oss) are learned per-head logits, not cached tokens: they add no "
                     "cache bytes")
    return KvLayout(groups, notes, max_context, decompressed_elements_per_token=decompressed)


def _attention(c: dict, notes: list[str]) -> dict | None:
    """K+V elements per token per attention layer, or the latent's, from the heads; None (noted) when unread."""
    heads = _int(c, "num_attention_heads", "n_head", "num_heads", "n_heads")
    hidden = _int(c, "hidden_size", "n_embd", "d_model", "dim")
    rank, rope = _int(c, "kv_lora_rank"), c.get("qk_rope_head_dim")
    if rank is not None and (c.get("model_type") in LATENT_TYPES or "qk_nope_head_dim" in c):
        rope = rope if isinstance(rope, int) and rope >= 0 else 0
        nope, v = _int(c, "qk_nope_head_dim") or 0, _int(c, "v_head_dim") or 0
        decompressed = (heads or 0) * (nope + rope + v)
        return {"latent": rank + rope, "decompressed": decompressed}
    if heads is None:
        notes.append("no attention head count (num_attention_heads)")
        return None
    kv = c.get("num_key_value_heads", c.get("num_kv_heads", c.get("n_head_kv")))
    if c.get("multi_query") is True and not c.get("new_decoder_architecture"):
        kv = 1
    if kv is None:
        kv = heads
    if isinstance(kv, bool) or not isinstance(kv, int) or kv < 1:
        notes.append(f"num_key_value_heads {kv!r} is not a positive integer: assumed {heads} (one per head)")
        kv = heads
    elif kv > heads or heads % kv:
        notes.append(f"contradictory head counts: {kv} key/value heads for {heads} attention heads; the cache "
                     f"is priced at the {kv} key/value heads the config states")
    head_dim = _int(c, "head_dim", "d_kv", "attention_head_dim")
    if c.get("model_type") == "zamba2" and hidden is not None:
        # Zamba2Config sets attention_head_dim to 2 * hidden_size / heads whatever the file says: the shared
        # block attends over the hidden state concatenated with the embeddings. vLLM keeps no GQA there.
        head_dim = 2 * hidden // heads
        if kv != heads:
            notes.append(f"zamba2: transformers caches {kv} key/value heads, vLLM all {heads}")
            return {"kv": 2 * heads * head_dim, "expanded": 2 * kv * head_dim}
        return {"kv": 2 * kv * head_dim, "expanded": None}
    if head_dim is None:
        if hidden is None:
            notes.append("neither head_dim nor a hidden size")
            return None
        if hidden % heads:
            notes.append(f"{heads} heads do not divide the hidden size {hidden}: head_dim assumed "
                         f"{hidden // heads} (rounded down)")
        head_dim = hidden // heads
    expanded = None
    if c.get("model_type") == "falcon" and c.get("new_decoder_architecture") and kv != heads:
        # transformers' Falcon broadcasts the grouped K/V to every head before its cache update; vLLM keeps kv
        expanded = 2 * heads * head_dim
        notes.append(f"transformers' Falcon caches K/V expanded to all {heads} heads; vLLM keeps the {kv} groups")
    return {"kv": 2 * kv * head_dim, "expanded": expanded}


def _kinds(c: dict, layers: int, notes: list[str]) -> list[str]:
    """Per layer: full, sliding, state, hybrid (attention and state side by side) or none."""
    mt = c.get("model_type")
    types = c.get("layer_types")
    if types is None and isinstance(c.get("layers_block_type"), list):
        types = c["layers_block_type"]
    if isinstance(types, list):
        if len(types) == layers and all(isinstance(t, str) for t in types):
            return [_kind_of(t, notes) for t in types]
        notes.append(f"layer_types has {len(types)} entries for {layers} layers: ignored, the layers read from "
                     "the family's rule instead")
    pattern = c.get("hybrid_override_pattern")
    if isinstance(pattern, str) and pattern:
        if len(pattern) == layers:
            unknown = sorted(set(pattern) - set(PATTERN_LETTERS))
            if unknown:
                notes.append(f"hybrid_override_pattern letters {unknown} are not known: priced as full attention")
            return [_kind_of(PATTERN_LETTERS[letter], notes) if letter in PATTERN_LETTERS else "full"
                    for letter in pattern]
        notes.append(f"hybrid_override_pattern has {len(pattern)} letters for {layers} layers: ignored")
    indices = c.get("attn_layer_indices")
    if isinstance(indices, list) and indices:
        attention = {i for i in indices if isinstance(i, int) and not isinstance(i, bool) and 0 <= i < layers}
        if len(attention) != len(indices):
            notes.append(f"attn_layer_indices {indices!r} names layers outside 0..{layers - 1}: those ignored")
        return ["full" if i in attention else "state" for i in range(layers)]  # Bamba: mamba everywhere else
    lac = c.get("linear_attn_config")
    if mt == "kimi_linear" and isinstance(lac, dict):
        # Kimi Linear's checkpoint numbers its layers from 1 (KimiLinearConfig reads them so)
        full, kda = lac.get("full_attn_layers"), lac.get("kda_layers")
        if isinstance(full, list) and isinstance(kda, list):
            kinds = ["none"] * layers
            for name, listed in (("full", full), ("state", kda)):
                for n in listed:
                    if isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= layers:
                        kinds[n - 1] = name
            if kinds.count("none"):
                notes.append(f"linear_attn_config names {layers - kinds.count('none')} of {layers} layers: the "
                             "others priced as keeping nothing")
            return kinds
    if mt == "kimi_linear":
        return ["full" if i and i % 4 == 0 else "state" for i in range(layers)]
    if mt == "jamba":
        period, offset = _int(c, "attn_layer_period") or 8, c.get("attn_layer_offset", 4)
        return ["full" if i % period == offset else "state" for i in range(layers)]
    if mt == "falcon_h1":
        return ["hybrid"] * layers
    if mt == "qwen3_next":
        interval = _int(c, "full_attention_interval") or 4
        return ["state" if (i + 1) % interval else "full" for i in range(layers)]
    if mt == "lfm2" and isinstance(c.get("full_attn_idxs"), list):
        full = set(c["full_attn_idxs"])
        return ["full" if i in full else "state" for i in range(layers)]
    if mt in ("mamba", "mamba2", "falcon_mamba"):
        return ["state"] * layers
    if mt in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe"):
        if c.get("use_sliding_window") and _int(c, "sliding_window"):
            first = c.get("max_window_layers", 28)
            return ["sliding" if i >= first else "full" for i in range(layers)]
        return ["full"] * layers
    pattern = _int(c, "sliding_window_pattern")
    if mt == "gemma2":
        pattern = 2
    if pattern and _int(c, "sliding_window"):
        return ["full" if (i + 1) % pattern == 0 else "sliding" for i in range(layers)]
    if _int(c, "sliding_window") and mt in ("mistral", "mixtral", "starcoder2", "phi3", "minimax", "mistral3"):
        return ["sliding"] * layers
    return ["full"] * layers


def _kind_of(name: str, notes: list[str]) -> str:
    low = name.lower()
    if low in FULL:
        return "full"
    if low in SLIDING:
        return "sliding"
    if low in LINEAR:
        return "state"
    if low in NO_CACHE:
        return "none"
    if low == "hybrid":
        return "hybrid"
    notes.append(f"layer type {name!r} is not known: priced as full attention")
    return "full"


def _state(c: dict, notes: list[str]) -> dict | None:
    """Per sequence and layer, the state's bytes: transformers (conv at d_conv, recurrent fp32) and vLLM
    (conv at d_conv - 1, everything in the serving dtype)."""
    mt = c.get("model_type")
    hidden = _int(c, "hidden_size", "d_model")
    if mt in ("lfm2", "lfm2_moe"):
        width, kernel = hidden, _int(c, "conv_L_cache") or 3
        if width is None:
            notes.append(f"{mt} without hidden_size")
            return None
        return _priced(width, kernel, 0)
    if mt == "qwen3_next" or "linear_num_value_heads" in c:
        # gated delta net (Qwen3-Next, Qwen3.5, OLMo hybrid): conv over q, k and v; a (v heads, k dim, v dim) state
        kh, vh = _int(c, "linear_num_key_heads"), _int(c, "linear_num_value_heads")
        kd, vd, kernel = _int(c, "linear_key_head_dim"), _int(c, "linear_value_head_dim"), _int(c, "linear_conv_kernel_dim")
        if None in (kh, vh, kd, vd, kernel):
            notes.append(f"{mt} without its linear_* keys (gated delta net heads and widths)")
            return None
        ssm_bytes = STATE_BYTES
        if str(mt).startswith("qwen3_5") and "mamba_ssm_dtype" in c:
            # vLLM's Qwen3.5 config hook keeps the state at the checkpoint's mamba_ssm_dtype (float32 as published)
            ssm_bytes = SSM_BYTES.get(str(c["mamba_ssm_dtype"]), 4)
            if str(c["mamba_ssm_dtype"]) not in SSM_BYTES:
                notes.append(f"mamba_ssm_dtype {c['mamba_ssm_dtype']!r} is not known: vLLM's state priced at float32")
        return _priced(2 * kh * kd + vh * vd, kernel, vh * kd * vd, ssm_bytes)  # type: ignore[operator]
    if mt == "kimi_linear" or "linear_num_heads" in c:
        # Kimi delta attention: conv over q, k and v of heads x head_dim each; a (heads, dim, dim) state, fp32 in both.
        # The checkpoint states them in linear_attn_config, which KimiLinearConfig reads over the flat keys
        lac = c.get("linear_attn_config") if isinstance(c.get("linear_attn_config"), dict) else {}
        heads, dim = _int(lac, "num_heads") or _int(c, "linear_num_heads"), _int(lac, "head_dim") or _int(c, "linear_head_dim")
        kernel = _int(lac, "short_conv_kernel_size") or _int(c, "linear_conv_kernel_dim") or 4
        if not any(k in lac or f"linear_{k}" in c for k in ("num_heads", "head_dim")):
            heads, dim = 32, 128
            notes.append("kimi_linear states no delta-attention heads: KimiLinearConfig's 32 heads of 128 assumed")
        if heads is None or dim is None:
            notes.append(f"{mt} without positive linear_num_heads / linear_head_dim")
            return None
        return _priced(3 * heads * dim, kernel, heads * dim * dim, vllm_ssm_bytes=4)
    kernel = _int(c, "mamba_d_conv", "conv_kernel", "d_conv") or 4
    d_state = _int(c, "mamba_d_state", "state_size", "ssm_state_size", "d_state")
    expand = _int(c, "mamba_expand", "expand") or 2
    heads = _int(c, "mamba_n_heads", "mamba_num_heads", "n_mamba_heads",
                 "num_heads" if mt in ("mamba2",) else "mamba_n_heads")
    if d_state is None or hidden is None:
        notes.append("no mamba state size (mamba_d_state) or hidden size")
        return None
    if heads:  # mamba2: Falcon-H1, Bamba, Granite 4, Nemotron-H, Zamba2
        groups = _int(c, "mamba_n_groups", "n_groups", "mamba_ngroups") or 1
        d_ssm = _int(c, "mamba_d_ssm")
        if mt == "zamba2":  # Zamba2Config derives the head width; a mamba_headdim in the file is not read
            head_dim = expand * hidden // heads
        else:
            # a hybrid's head_dim is its attention's (a GGUF header gives only that): the SSM's width per head is
            # mamba_d_head, else d_ssm / heads as llama.cpp reads it, else expand * hidden / heads
            head_dim = (_int(c, "mamba_d_head", "mamba_head_dim", "head_dim" if mt == "mamba2" else "mamba_d_head")
                        or (d_ssm // heads if d_ssm else expand * hidden // heads))
        inner = d_ssm or heads * head_dim
        ssm_bytes = STATE_BYTES
        if mt == "nemotron_h":
            # vLLM's NemotronHForCausalLMConfig: the config's mamba_ssm_cache_dtype, float32 when absent
            declared = c.get("mamba_ssm_cache_dtype", "float32")
            ssm_bytes = SSM_BYTES.get(str(declared), 4)
            if str(declared) not in SSM_BYTES:
                notes.append(f"mamba_ssm_cache_dtype {declared!r} is not known: vLLM's SSM state priced at float32")
        return _priced(inner + 2 * groups * d_state, kernel, heads * head_dim * d_state, ssm_bytes)
    inner = expand * hidden  # mamba1: Jamba, Mamba
    return _priced(inner, kernel, inner * d_state)


def _priced(conv_width: int, kernel: int, recurrent: int, vllm_ssm_bytes: int = STATE_BYTES) -> dict:
    return {"transformers": STATE_BYTES * conv_width * kernel + RECURRENT_BYTES_TRANSFORMERS * recurrent,
            "vllm": STATE_BYTES * conv_width * (kernel - 1) + vllm_ssm_bytes * recurrent}


def _seq2seq(config: dict, notes: list[str]) -> KvLayout:
    """Encoder-decoder: the decoder's self-attention grows with the context; its cross-attention keeps the
    encoder's tokens (Whisper's fixed 1500 frames; for text, a source as long as the context)."""
    layers = _int(config, "decoder_layers", "num_decoder_layers", "num_layers")
    if config.get("model_type") in ("t5", "mt5", "umt5") and not _int(config, "num_decoder_layers"):
        notes.append("num_decoder_layers absent: the decoder has num_layers layers, as T5's config defaults")
    heads = _int(config, "decoder_attention_heads", "num_heads", "num_attention_heads")
    hidden = _int(config, "d_model", "hidden_size")
    head_dim = _int(config, "d_kv") or (hidden // heads if hidden and heads else None)
    if layers is None or heads is None or head_dim is None:
        return KvLayout([], notes, None, unknown="the decoder's layers or heads cannot be read")
    kv = 2 * heads * head_dim
    source = _int(config, "max_source_positions") if config.get("model_type") == "whisper" else None
    max_context = _int(config, "max_target_positions", "max_position_embeddings", "n_positions")
    if source is None:
        notes.append("cross-attention priced at a source as long as the context")
    return KvLayout([Layers("full", layers, kv), Layers("cross", layers, kv, source)], notes, max_context)


def cache_dtype_bytes(kv_dtype: str | None, config: dict) -> tuple[int, str]:
    """The cache's element size and its name: the one asked, else the model's torch_dtype (bf16 by default)."""
    if kv_dtype and kv_dtype != "auto":
        size = KV_DTYPES.get(kv_dtype.lower())
        if size:
            return size, kv_dtype.lower()
    declared = str(text_config(config).get("torch_dtype") or config.get("torch_dtype") or config.get("dtype") or "")
    if declared in ("float32", "float"):
        return 2, "bfloat16"  # servers run an fp32 checkpoint in half precision
    return 2, declared if declared in ("bfloat16", "float16") else "bfloat16"
