"""The verifier's knowledge of transformers: which families split the hidden size into heads or honour head_dim,
their tying defaults and initialisation, position tables, rope types by release, and the tensor names of embeddings,
heads and norms (as transformers' module trees name them; tests/estimator/test_lints_groundtruth.py builds them)."""

from __future__ import annotations

import re

# Bounds past which a size is a typo or an attack rather than a model (the estimator's reader uses the same scale).
LIMITS = {"width": 1_000_000, "heads": 100_000, "layers": 10_000, "vocab": 100_000_000, "positions": 100_000_000}
SIZE_KEYS = {
    "hidden_size": "width", "n_embd": "width", "d_model": "width", "dim": "width", "intermediate_size": "width",
    "n_inner": "width", "ffn_dim": "width", "d_ff": "width", "head_dim": "width", "d_kv": "width",
    "num_attention_heads": "heads", "n_head": "heads", "n_heads": "heads", "num_key_value_heads": "heads",
    "encoder_attention_heads": "heads", "decoder_attention_heads": "heads",
    "num_hidden_layers": "layers", "n_layer": "layers", "n_layers": "layers", "num_layers": "layers",
    "encoder_layers": "layers", "decoder_layers": "layers",
    "vocab_size": "vocab", "max_position_embeddings": "positions", "n_positions": "positions",
}
MAX_PLAUSIBLE_PARAMETERS = 10**12  # dense part: twice the largest published dense model
# Any value of model_max_length at or above this is transformers' "no limit" sentinel (VERY_LARGE_INTEGER, 1e30).
NO_LIMIT = 10**29
SUB_CONFIGS = ("text_config", "vision_config", "audio_config", "encoder", "decoder", "llm_config")

# Families whose attention splits hidden_size into heads (hidden // heads), whatever head_dim a config adds.
SPLIT_HIDDEN = frozenset({
    "gpt2", "gpt_neox", "gptj", "bloom", "opt", "falcon", "phi", "bert", "roberta", "xlm-roberta", "electra",
    "distilbert", "deberta-v2", "bart", "whisper", "clip", "clip_text_model", "clip_vision_model", "siglip",
    "siglip_text_model", "siglip_vision_model", "vit", "dinov2", "starcoder2", "mpnet", "camembert"})
# Families that read an explicit head_dim (and split hidden_size only without one).
HEAD_DIM_HONOURED = frozenset({"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma",
                               "gemma2", "gemma3_text", "phi3", "olmo2", "granite"})
# tie_word_embeddings when the config does not say, for the causal-LM families whose default is known.
TIE_DEFAULTS = {"llama": False, "mistral": False, "mixtral": False, "qwen2": False, "qwen2_moe": False,
                "qwen3": False, "qwen3_moe": False, "phi3": False, "gemma": True, "gemma2": True,
                "gemma3_text": True}
# Families whose _init_weights draws every linear with initializer_range alone (no depth scaling).
UNSCALED_INIT = frozenset({"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma",
                           "gemma2", "gemma3_text", "phi3", "bert", "roberta", "xlm-roberta", "electra",
                           "gpt_neox", "gptj", "opt", "bloom", "falcon", "phi", "starcoder2"})
# Learned absolute position tables: the key, and the rows a padding offset takes from them.
LEARNED_POSITIONS = {"gpt2": ("n_positions", 0), "opt": ("max_position_embeddings", 0),
                     "bert": ("max_position_embeddings", 0), "electra": ("max_position_embeddings", 0),
                     "distilbert": ("max_position_embeddings", 0), "roberta": ("max_position_embeddings", 2),
                     "xlm-roberta": ("max_position_embeddings", 2), "camembert": ("max_position_embeddings", 2),
                     "bart": ("max_position_embeddings", 0), "clip": ("max_position_embeddings", 0),
                     "siglip": ("max_position_embeddings", 0)}
ROTARY = frozenset({"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2",
                    "gemma3_text", "phi3", "gpt_neox", "gptj", "phi", "starcoder2", "olmo2", "granite"})

# When each rope type (and the `rope_type` key) arrived in transformers: read in its releases' source
# (models/llama/configuration_llama.py of 4.30.2 has no rope_scaling, 4.31.0 linear and dynamic; 4.42.4 still only
# those two; modeling_rope_utils.py of 4.43.0 adds default, yarn, longrope, llama3; 5.5.0 adds proportional).
ROPE_TYPE_SINCE = {"linear": "4.31.0", "dynamic": "4.31.0", "default": "4.43.0", "yarn": "4.43.0",
                   "longrope": "4.43.0", "llama3": "4.43.0", "proportional": "5.5.0"}
ROPE_TYPE_KEY_SINCE = "4.43.0"
# Families whose config class before 4.43.0 refused any rope_scaling but {type, factor} ("must be a dictionary with
# two fields": read in 4.42.4's configuration modules).
TWO_FIELD_ROPE = frozenset({"falcon", "fuyu", "gpt_neox", "llama", "olmo", "persimmon", "phi", "stablelm"})
# Types some families accept outside the generic table (multimodal rotary, Phi-3's first name for longrope).
ROPE_FAMILY_TYPES = frozenset({"mrope", "su", "3d", "2d"})
ROPE_REQUIRED = {"linear": ("factor",), "dynamic": ("factor",), "yarn": ("factor",), "longrope": ("short_factor", "long_factor"),
                 "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")}

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".gguf", ".npz", ".onnx")
EMBEDDING = re.compile(r"(^|\.)(embed_tokens|wte|word_embeddings|token_embedding|embed_in|shared)\.weight$")
NOT_TEXT = re.compile(r"(^|\.)(vision_model|vision_tower|visual|vision_encoder|vision|audio_tower|audio_model)\.")
LM_HEAD = re.compile(r"(^|\.)(lm_head|embed_out)\.weight$")
FINAL_NORM = re.compile(r"^(?:[\w]+\.)*?(norm|final_layer_norm|ln_f|final_layernorm|norm_f|post_layernorm|"
                        r"layernorm|layer_norm)\.weight$")
LAYER_NORM = re.compile(r"\.(\d+)\.(?:[\w.]*?)(LayerNorm|layer_norm|final_layer_norm|output_layernorm|ln_2|"
                        r"post_attention_layernorm|post_feedforward_layernorm)\.weight$")
HEAD_SUFFIXES = {  # class suffix -> the head's tensors, by name
    "ForCausalLM": LM_HEAD, "LMHeadModel": LM_HEAD,
    "ForSequenceClassification": re.compile(r"(^|\.)(score|classifier)(\.[\w.]+)?\.weight$"),
    "ForTokenClassification": re.compile(r"(^|\.)(score|classifier)(\.[\w.]+)?\.weight$"),
    "ForImageClassification": re.compile(r"(^|\.)(classifier|head)(\.[\w.]+)?\.weight$"),
    "ForQuestionAnswering": re.compile(r"(^|\.)qa_outputs\.weight$"),
    "ForMaskedLM": re.compile(r"(^|\.)(lm_head|cls\.predictions|vocab_projector|vocab_transform|generator_lm_head|"
                              r"generator_predictions)\.|(^|\.)lm_head\.weight$"),
}
DIGIT = re.compile(r"\d")
# The literal parts a name matching each pattern holds (the names are found by substring search first).
EMBEDDING_WORDS = ("embed", "wte", "shared")
LM_HEAD_WORDS = ("lm_head", "embed_out")
NORM_WORDS = ("norm",)
LAYER_NORM_WORDS = ("LayerNorm", "layer_norm", "output_layernorm", "ln_2", "post_attention_layernorm",
                    "post_feedforward_layernorm")
HEAD_WORDS = {"ForCausalLM": LM_HEAD_WORDS, "LMHeadModel": LM_HEAD_WORDS, "ForSequenceClassification": ("score", "classifier"),
              "ForTokenClassification": ("score", "classifier"), "ForImageClassification": ("classifier", "head"),
              "ForQuestionAnswering": ("qa_outputs",),
              "ForMaskedLM": ("lm_head", "cls.predictions", "vocab_projector", "vocab_transform", "generator_")}
FLOATS = {"F64", "F32", "F16", "BF16"}
DTYPES = {"float32": "F32", "float": "F32", "float16": "F16", "half": "F16", "bfloat16": "BF16", "float64": "F64"}
