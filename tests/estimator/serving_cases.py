"""The configs and prefill lengths the serving KV figures are checked on (test-only)."""

from __future__ import annotations

import json
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "estimator"
RECORDED_KV = FIXTURES / "recorded_kv_truth.json"

# (config under tests/fixtures/estimator, prefill tokens): every case of the KV cache, each past its window
PATHS = (
    "configs/llama/Llama-3.1-8B.json",             # GQA
    "configs/llama/Llama-2-7b-hf.json",            # MHA
    "configs/llava/llava-1.5-7b-hf.json",          # multimodal: the language model's cache over Llama defaults
    "configs/falcon/falcon-7b.json",               # MQA
    "configs/falcon/falcon-40b.json",              # grouped K/V that transformers expands to every head
    "configs/gpt2/gpt2.json",                      # MHA, n_head/n_embd names
    "configs/bloom/bloom-560m.json",
    "configs/gpt_neox/pythia-160m.json",
    "configs/gptj/gpt-j-6b.json",
    "configs/opt/opt-350m.json",
    "configs/phi/phi-2.json",
    "configs/phi3/phi-4.json",
    "configs/qwen3/Qwen3-0.6B.json",               # explicit head_dim (128 against 1024 / 16)
    "configs/gemma/gemma-2b.json",                 # MQA with head_dim 256
    "configs/mistral/Mistral-7B-v0.1.json",        # sliding window on every layer
    "configs/mixtral/Mixtral-8x7B-v0.1.json",
    "configs/starcoder2/starcoder2-3b.json",
    "configs/qwen2/Qwen2.5-7B-Instruct.json",
    "configs/qwen2/Qwen2.5-7B-Instruct.json#use_sliding_window",  # sliding from max_window_layers on
    "configs/gemma2/gemma-2-2b.json",              # interleaved local/global, every other layer
    "configs/gemma3_text/gemma-3-1b-pt.json",      # interleaved 5 local : 1 global
    "serving/cohere2/c4ai-command-r7b-12-2024.json",  # sliding_window_pattern 4
    "serving/gpt_oss/gpt-oss-20b.json",            # layer_types, window 128, attention sinks
    "serving/deepseek_v2/DeepSeek-V2-Lite.json",   # latent attention without q_lora
    "serving/deepseek_v3/DeepSeek-V3.json",        # latent attention
    "serving/jamba/Jamba-v0.1.json",               # mamba 1 beside attention every 8 layers
    "serving/falcon_h1/Falcon-H1-0.5B-Instruct.json",  # mamba 2 and attention in every layer
    "serving/qwen3_next/Qwen3-Next-80B-A3B-Instruct.json",  # gated delta net, attention every 4 layers
    "serving/lfm2/LFM2-1.2B.json",                 # short convolutions
    "configs/t5/t5-small.json",                    # encoder-decoder: cross-attention at the source length
    "configs/bart/bart-base.json",
    "configs/whisper/whisper-tiny.json",           # cross-attention at Whisper's fixed 1500 frames
)
# hybrids at 1k and 8k tokens (issue 36): every layer's state and only the attention layers' K/V. Jamba is exact
# at 300/5000 above only: without its kernels transformers' mamba 1 loops per token (a minute for 1k on the meta
# device)
HYBRID_PATHS = (
    "serving/falcon_h1/Falcon-H1-0.5B-Instruct.json",
    "serving/lfm2/LFM2-1.2B.json",
    "serving/lfm2_moe/LFM2-8B-A1B.json",           # short convolutions beside 6 attention layers, 32 experts
    "serving/bamba/Bamba-9B.json",                 # mamba 2, attention at attn_layer_indices 9, 18, 27
    "serving/zamba2/Zamba2-1.2B.json",             # one shared attention block with its own K/V at 6 layers
    "serving/granitemoehybrid/granite-4.0-h-small.json",  # layer_types: 4 attention among 36 mamba, MoE
    "serving/nemotron_h/Nemotron-H-8B-Base-8K.json",  # hybrid_override_pattern: 24 mamba, 4 attention, 24 MLP-only
)
# delta-rule hybrids behind hundreds of experts: 1k live; 8k recorded (RECORDED_ONLY_CASES: the delta rule's
# reference takes 8-15 s of CPU a case on the meta device)
DELTA_PATHS = (
    "serving/qwen3_next/Qwen3-Next-80B-A3B-Instruct.json",
    "serving/qwen3_5_moe/Qwen3.5-35B-A3B.json",    # text_config; 3 gated delta : 1 attention, 256 experts
    "serving/kimi_linear/Kimi-Linear-48B-A3B-Instruct.json",  # linear_attn_config's 1-based layers; MLA
)
KV_CASES = ([(path, tokens) for path in PATHS for tokens in (300, 5000)]
            + [(path, tokens) for path in HYBRID_PATHS for tokens in (1024, 8192)]
            # Jamba at 1k and 8k too: its attention layers measured at the length, its Mamba states at two short
            # prefills (tests/estimator/kv_truth.py, `measured_in_parts`), a few seconds where a whole prefill takes minutes
            + [("serving/jamba/Jamba-v0.1.json", tokens) for tokens in (1024, 8192)]
            + [(path, 1024) for path in DELTA_PATHS])
# Recorded by record_kv_truth.py like the cases above and compared by the default run, but not recomputed by the
# live pass: the delta rule's reference at 8k costs 8-15 CPU-s a case (over the suite's 10 s a test).
RECORDED_ONLY_CASES = [(path, 8192) for path in DELTA_PATHS]


def case_key(path: str, tokens: int) -> str:
    return f"{path}@{tokens}"


def serving_config(path: str) -> dict:
    """A fixture config; ``#use_sliding_window`` is the same config with Qwen2's sliding window switched on."""
    name, _, variant = path.partition("#")
    config = json.loads((FIXTURES / name).read_text())
    if variant == "use_sliding_window":
        config = {**config, "use_sliding_window": True, "sliding_window": 4096, "max_window_layers": 21}
    return config
