"""Serving memory per card: weights at the checkpoint's own precision, a runtime allowance, and what is left for
the KV cache: whether the model loads (as vLLM starts: one sequence at the model's full context must fit, its
default max_model_len), whether its weights fit at all, the longest context one sequence can hold, and how many
sequences fit at the model's full context, at 8k, at 32k and at any context asked (vLLM's "maximum
concurrency" with max_model_len set to that context).

The card figures use vLLM's cache (``kv_cache.py``); transformers' is reported beside it. Never raises: what
cannot be read is "unknown: reason" or a figure with its assumption in ``notes``.
"""

from __future__ import annotations

from collections.abc import Iterable

from .kv_cache import MAX_CONTEXT, RUNTIMES, KvLayout, cache_dtype_bytes, layout, text_config
from .memory import CARDS, CUDA_CONTEXT_BYTES, NF4_BYTES

GPU_MEMORY_UTILIZATION = 0.9     # vLLM's default share of a card it may use
DEFAULT_CONTEXTS = (8192, 32768)
MAX_NUM_SEQS = 256               # vLLM's default max_num_seqs: its sampler warm-up runs this many rows
BATCHED_TOKENS = 2048            # vLLM's default max_num_batched_tokens (online serving)
CUDA_GRAPH_BYTES = 512 * 1024**2  # hubwatch's assumption for vLLM's captured CUDA graphs (not derived)
HALF = 2

# Bits per weight of GGUF's ggml types (llama.cpp's ggml.c type_traits: block bytes * 8 / block size).
GGML_BITS = {"F32": 32, "F16": 16, "BF16": 16, "Q8_0": 8.5, "Q8_1": 9, "Q4_0": 4.5, "Q4_1": 5, "Q5_0": 5.5,
             "Q5_1": 6, "Q2_K": 2.625, "Q3_K": 3.4375, "Q4_K": 4.5, "Q5_K": 5.5, "Q6_K": 6.5625, "Q8_K": 9.125,
             "IQ2_XXS": 2.0625, "IQ2_XS": 2.3125, "IQ2_S": 2.5, "IQ3_XXS": 3.0625, "IQ3_S": 3.4375,
             "IQ1_S": 1.5625, "IQ1_M": 1.75, "IQ4_NL": 4.5, "IQ4_XS": 4.25, "TQ1_0": 1.6875, "TQ2_0": 2.0625,
             "MXFP4": 4.25, "I8": 8, "I16": 16, "I32": 32, "F64": 64}


def gguf_weight_bytes(elements_by_type: dict[str, int]) -> tuple[int | None, list[str]]:
    """Bytes of GGUF tensors from their element counts per ggml type name; unknown types are noted."""
    total, notes = 0.0, []
    for name, count in elements_by_type.items():
        bits = GGML_BITS.get(str(name).upper())
        if bits is None:
            notes.append(f"unknown: ggml type {name!r} has no known size; its {count:,} elements are not counted")
            continue
        total += count * bits / 8
    return int(total), notes


def weight_bytes(config: dict, parameters: int | None, linear: int | None, stored_bytes: int | None,
                 stored_from: str = "safetensors headers") -> tuple[int | None, str, list[str]]:
    """(bytes, how they were found, notes): the checkpoint's stored bytes when its headers (``stored_from``) were
    read, else the parameters at the precision its ``quantization_config`` (or torch_dtype) states."""
    notes: list[str] = []
    q = config.get("quantization_config") or text_config(config).get("quantization_config")
    method = str(q.get("quant_method", "")).lower() if isinstance(q, dict) else ""
    if stored_bytes:
        return stored_bytes, f"checkpoint's stored bytes ({stored_from})" + (f", {method}" if method else ""), notes
    if parameters is None:
        return None, "unknown: no parameter count and no weight headers", notes
    if linear is None or linear > parameters:
        linear = parameters
        if method:
            notes.append("the quantized share is taken as every parameter (the linear layers are not known)")
    rest = parameters - linear
    if not method:
        return HALF * parameters, "parameters at bf16/fp16", notes
    per = _bytes_per_weight(method, q, notes)  # type: ignore[arg-type]
    if per is None:
        notes.append(f"unknown quantization method {method!r}: weights assumed at bf16")
        return HALF * parameters, f"parameters at bf16 (unknown quant_method {method})", notes
    return int(linear * per + HALF * rest), f"{method}: {per:.4g} bytes per linear weight, the rest at bf16", notes


def _bytes_per_weight(method: str, q: dict, notes: list[str]) -> float | None:
    bits = q.get("bits", q.get("w_bit"))
    group = q.get("group_size", q.get("q_group_size", 128))
    if method in ("gptq", "awq"):
        bits = bits if isinstance(bits, int) and 1 <= bits <= 8 else 4
        group = group if isinstance(group, int) and group > 0 else 128  # -1: one group per row (scale negligible)
        return bits / 8 + (HALF + bits / 8) / group  # packed weights, an fp16 scale and a packed zero per group
    if method == "bitsandbytes":
        if q.get("load_in_8bit"):
            return 1.0
        return NF4_BYTES if q.get("bnb_4bit_use_double_quant") else 0.5 + 4 / 64
    if method in ("fp8", "fbgemm_fp8", "compressed-tensors", "modelopt", "fp8_e4m3"):
        if method == "compressed-tensors":
            notes.append("compressed-tensors: weights taken as 8-bit (the scheme's bits are not read)")
        return 1.0
    if method == "mxfp4":
        return 4.25 / 8
    return None


def allowance(config: dict) -> tuple[int, dict]:
    """The runtime's own bytes beside weights and cache, stated: the CUDA context, vLLM's profile run (a
    forward of max_num_batched_tokens tokens and the sampler's fp32 logits over max_num_seqs rows) and CUDA
    graphs (an assumption)."""
    c = text_config(config)
    hidden = _positive(c, "hidden_size", "n_embd", "d_model") or 0
    ffn = _positive(c, "intermediate_size", "moe_intermediate_size", "ffn_dim", "n_inner", "d_ff") or 4 * hidden
    vocab = _positive(c, "vocab_size") or 0
    forward = BATCHED_TOKENS * HALF * (4 * hidden + 2 * ffn)
    sampler = MAX_NUM_SEQS * vocab * 4
    parts = {"cuda_context_bytes": CUDA_CONTEXT_BYTES, "profile_forward_bytes": forward,
             "sampler_logits_bytes": sampler, "cuda_graph_bytes": CUDA_GRAPH_BYTES,
             "text": f"CUDA context {CUDA_CONTEXT_BYTES // 2**20} MiB (measured on an H200, memory.py); vLLM's "
                     f"profile run (gpu_model_runner.profile_run): a forward of {BATCHED_TOKENS} tokens holding "
                     "the residual stream, the attention's q/k/v/out and the MLP's two halves in bf16 at one "
                     f"layer's peak (2 x (4 x hidden + 2 x intermediate) bytes a token), and the sampler's "
                     f"fp32 logits for {MAX_NUM_SEQS} sequences; CUDA graphs {CUDA_GRAPH_BYTES // 2**20} MiB "
                     "(assumed, not derived)"}
    return CUDA_CONTEXT_BYTES + forward + sampler + CUDA_GRAPH_BYTES, parts


def _positive(c: dict, *keys: str) -> int | None:
    for key in keys:
        value = c.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def serving(config: dict, *, parameters: int | None = None, linear: int | None = None,
            stored_bytes: int | None = None, contexts: Iterable[object] = (), kv_dtype: str | None = None,
            gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION, stored_from: str = "safetensors headers") -> dict:
    """The ``serving`` section of an estimate (plain JSON data); ``stored_from`` names the headers
    ``stored_bytes`` were read from."""
    notes: list[str] = []
    if not isinstance(config, dict):
        return {"unknown": "config is not a JSON object", "notes": notes}
    lay = layout(config)
    notes.extend(lay.notes)
    if isinstance(gpu_memory_utilization, bool) or not isinstance(gpu_memory_utilization, (int, float)) \
            or not 0 < gpu_memory_utilization <= 1:
        notes.append(f"gpu_memory_utilization {gpu_memory_utilization!r} is not in (0, 1]: "
                     f"{GPU_MEMORY_UTILIZATION} used")
        gpu_memory_utilization = GPU_MEMORY_UTILIZATION
    if kv_dtype and kv_dtype.lower() not in ("auto", "bf16", "bfloat16", "fp16", "float16", "half", "fp8",
                                             "fp8_e4m3", "fp8_e5m2", "fp32", "float32"):
        notes.append(f"unknown cache dtype {kv_dtype!r}: the model's dtype used")
        kv_dtype = None
    element, dtype_name = cache_dtype_bytes(kv_dtype, config)
    if element == 1 and lay.groups:
        notes.append("fp8 cache: transformers' default DynamicCache keeps the model dtype; its figure assumes a "
                     "cache that stores fp8")
    asked = _contexts(contexts, lay, notes)
    weights, source, weight_notes = weight_bytes(config, parameters, linear, stored_bytes, stored_from)
    notes.extend(weight_notes)
    extra, parts = allowance(config)
    out: dict = {"kv_dtype": dtype_name, "kv_bytes_per_element": element, "full_context": lay.max_context,
                 "contexts": asked, "gpu_memory_utilization": gpu_memory_utilization,
                 "weights": {"bytes": weights, "source": source}, "allowance": {"bytes": extra, **parts},
                 "unknown": lay.unknown, "notes": notes}
    if lay.unknown:
        out["kv_cache"] = {r: {"unknown": lay.unknown} for r in RUNTIMES}
        out["cards"] = {}
        return out
    out["kv_cache"] = _kv_section(lay, asked, element)
    out["cards"] = _cards(lay, asked, element, weights, extra, gpu_memory_utilization)
    return out


def _contexts(contexts: Iterable[object], lay: KvLayout, notes: list[str]) -> list[int]:
    wanted: list[int] = []
    for context in [*DEFAULT_CONTEXTS, *([lay.max_context] if lay.max_context else []), *contexts]:
        if isinstance(context, bool) or not isinstance(context, int) or context < 1:
            notes.append(f"unknown: context {context!r} is not a positive integer, left out")
            continue
        if context > MAX_CONTEXT:
            notes.append(f"unknown: context {context:,} is beyond {MAX_CONTEXT:,} tokens, left out")
            continue
        if context in wanted:
            continue
        if lay.max_context and context > lay.max_context:
            notes.append(f"context {context:,} is beyond the model's {lay.max_context:,} positions: priced as "
                         "asked, though the model was not trained for it")
        wanted.append(context)
    return sorted(wanted)


def _kv_section(lay: KvLayout, asked: list[int], element: int) -> dict:
    per_token = lay.token_bytes(element)
    out: dict = {}
    for runtime in RUNTIMES:
        out[runtime] = {"at_context": {str(n): lay.at_context(runtime, n, element) for n in asked},
                        "fixed_bytes_per_sequence": lay.fixed_bytes(runtime, element),
                        "bytes_per_token": per_token[runtime]}
    out["layers"] = [{"kind": g.kind, "count": g.count, **({"window": g.window} if g.window else {})}
                     for g in lay.groups]
    if lay.decompressed_elements_per_token is not None:
        latent = next(g for g in lay.groups if g.kind == "latent")
        out["mla"] = {"latent_bytes_per_token": latent.count * latent.token_elements * element,
                      "decompressed_bytes_per_token": latent.count * lay.decompressed_elements_per_token * element,
                      "text": "latent: kv_lora_rank + qk_rope_head_dim a layer, as vLLM/SGLang (MLAAttentionSpec) "
                              "and transformers 5.x cache it; decompressed: every head's K (nope + rope) and V, as "
                              "transformers 4.x cached them"}
    return out


def per_sequence(lay: KvLayout, context: int, element: int) -> int:
    """vLLM's bytes for one sequence of ``context`` tokens, growing and fixed parts together."""
    return lay.at_context("vllm", context, element) + lay.fixed_bytes("vllm", element)


def _cards(lay: KvLayout, asked: list[int], element: int, weights: int | None, extra: int,
           utilization: float) -> dict:
    out = {}
    for card, size in CARDS.items():
        usable = int(size * utilization)
        if weights is None:
            out[card] = {"memory_bytes": size, "usable_bytes": usable, "unknown": "the weights' size is unknown"}
            continue
        budget = usable - weights - extra
        fits = budget >= per_sequence(lay, 1, element)
        full = lay.max_context or 1
        out[card] = {"memory_bytes": size, "usable_bytes": usable, "kv_budget_bytes": budget,
                     "weights_fit": fits, "loads": budget >= per_sequence(lay, full, element),
                     "longest_context": _longest(lay, element, budget) if fits else 0,
                     "concurrency_full_context": max(0, budget // per_sequence(lay, full, element)),
                     "concurrency": {str(n): max(0, budget // per_sequence(lay, n, element)) if fits else 0
                                     for n in asked}}
    return out


def _longest(lay: KvLayout, element: int, budget: int) -> int:
    """The longest context one sequence can hold in ``budget`` (capped at the model's positions)."""
    cap = lay.max_context or MAX_CONTEXT
    if per_sequence(lay, cap, element) <= budget:
        return cap
    low, high = 1, cap
    while low < high:
        mid = (low + high + 1) // 2
        if per_sequence(lay, mid, element) <= budget:
            low = mid
        else:
            high = mid - 1
    return low
