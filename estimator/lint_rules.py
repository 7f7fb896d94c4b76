"""The structure verifier's rules: each lint's id, severity, what it checks, its evidence and its fix. The docs'
table of lints is generated from ``RULES`` (docs/hooks), and a test checks every rule is described and raised."""

from __future__ import annotations

from dataclasses import dataclass

SEVERITIES = ("info", "notice", "warning", "critical")


@dataclass(frozen=True)
class Rule:
    """One lint: what it checks, how loud it is, what a finding carries as evidence, and how to fix it."""

    id: str
    severity: str
    title: str
    checks: str
    evidence: str
    fix: str


RULES: dict[str, Rule] = {rule.id: rule for rule in (
    Rule("config-invalid", "critical", "config.json cannot be read as a model config",
         "config.json is a JSON object.", "the type found",
         "Write config.json as a JSON object (transformers' `config.save_pretrained`)."),
    Rule("config-value-invalid", "critical", "A structural size is not a positive integer",
         "Every size that shapes the model (hidden size, heads, layers, vocabulary, positions, intermediate size, "
         "head_dim) is an integer, at least 1 (0 allowed where it means none), within the bounds of any real model.",
         "the config key and its value",
         "Correct the value: a zero, negative, fractional or absurd size builds no model."),
    Rule("config-size-implausible", "warning", "The config derives more parameters than any published dense model",
         "The parameters the config's dense part implies (embeddings plus 12 x hidden^2 a layer; experts are not "
         "counted, so a mixture of experts is held to its dense part) stay under 10^12: the largest published "
         "dense models are about 0.5 x 10^12 (Megatron-Turing NLG 530B; Llama 3.1 405B).",
         "the keys used and the parameters they imply",
         "Check the sizes for a typo (an extra digit in hidden_size or num_hidden_layers)."),
    Rule("vocab-size-embedding", "critical", "vocab_size differs from the embedding rows in the weights",
         "The token embedding's rows in the weights equal the config's vocab_size.",
         "vocab_size, the embedding tensor's name and shape",
         "Set vocab_size to the embedding's rows (or resize the embeddings and save the weights again): "
         "from_pretrained refuses a size mismatch."),
    Rule("vocab-size-tokenizer", "critical", "The tokenizer produces ids past the embedding",
         "The tokenizer's largest id is below the embedding's rows (vocab_size when no weights are read). A "
         "vocabulary padded above the tokenizer (Qwen, Phi) is fine and not reported.",
         "the tokenizer's size and largest id, the embedding rows or vocab_size",
         "Resize the token embeddings to the tokenizer (`model.resize_token_embeddings(len(tokenizer))`) and save "
         "the weights and config, or remove the added tokens."),
    Rule("special-token-out-of-vocab", "critical", "A special token id lies outside the vocabulary",
         "Every special token id the config, generation config or tokenizer names (bos, eos, pad, "
         "decoder start, ...) is below the embedding rows.",
         "the file and key naming the id, the id, the embedding rows",
         "Point the key at a token the vocabulary holds (or resize the embeddings to include it)."),
    Rule("kv-heads-divide", "critical", "num_attention_heads is not a multiple of num_key_value_heads",
         "Grouped-query attention shares each key/value head between num_attention_heads / num_key_value_heads "
         "query heads, which must divide evenly.",
         "num_attention_heads, num_key_value_heads",
         "Set num_key_value_heads to a divisor of num_attention_heads (the value the weights were trained with: "
         "k_proj's rows / head_dim)."),
    Rule("head-dim-hidden", "critical", "Heads times head size does not give the hidden size the family needs",
         "Families that split the hidden state into heads (BERT, GPT-2, CLIP, ViT, Whisper, ... and the Llama "
         "lineage when the config gives no head_dim) need hidden_size divisible by the heads, and an explicit "
         "head_dim that such a family ignores must agree with it.",
         "hidden_size, num_attention_heads, head_dim",
         "Make hidden_size = num_attention_heads x head_dim, or (Llama lineage) give head_dim explicitly."),
    Rule("attention-shape-mismatch", "critical", "The attention projections in the weights do not match the config",
         "q_proj's rows equal num_attention_heads x head_dim and k_proj's num_key_value_heads x head_dim.",
         "the tensors' names and shapes, the heads and head_dim they imply",
         "Correct num_attention_heads, num_key_value_heads or head_dim to the trained shapes."),
    Rule("tie-word-embeddings-head", "warning", "Tied embeddings, yet the weights store a separate head",
         "With tie_word_embeddings true transformers points lm_head at the input embeddings and discards a "
         "stored lm_head tensor; a checkpoint trained with a separate head then loads with the wrong one.",
         "tie_word_embeddings (explicit or the family's default), the head and embedding tensors",
         "Set tie_word_embeddings to false when the head was trained apart from the embeddings; else drop the "
         "redundant lm_head tensor."),
    Rule("bn-at-output", "critical", "A normalization is the last layer before a head's output",
         "Read from the module graph transformers builds (estimator/graph.py): per tower, the last module whose "
         "weights are stored is a normalization, and the graph has modules with weights after it (the head, a "
         "projection) that the weights lack and that are not tied to the embeddings, so the output passes through "
         "random modules. Not reported where the tree ends at the normalization by design (a base model's hidden "
         "states; an optional pooler left out), nor where the final norm feeds a head or projection the weights "
         "hold (CLIP's projections, a pre-norm LM's lm_head, Pythia's embed_out, T5's tied head). For a family "
         "without a graph the tensor names decide: a head class whose weights hold no head but a final norm.",
         "the tower, the normalization's node, type and tensor (name and shape), the modules after it the weights "
         "lack, and whether the graph or the tensor names decided (evidence.from)",
         "Ship the head's weights (or set tie_word_embeddings when the head shares the embeddings)."),
    Rule("head-missing", "critical", "The weights lack the head the class promises",
         "As bn-at-output, for a model whose last stored module is not a normalization.",
         "the class and the head tensor expected",
         "Ship the head's weights, or name the base class in architectures."),
    Rule("deep-attention-default-init", "info", "A deep stack trained from this config starts with unscaled residuals",
         "Only for a repo without weights (a config to train from): the family's initialisation draws residual "
         "output projections with the same std at every depth (GPT-2 scales them by 1/sqrt(2 x layers), the Llama "
         "lineage and BERT do not), so with 12 or more attention layers the residual stream's variance grows with "
         "depth. Trained weights make the initialisation moot, so a checkpoint (CLIP's) is never reported.",
         "the layer count, initializer_range, the absence of weight files",
         "Scale residual output projections by depth at initialisation: "
         "nn.init.normal_(w, std=initializer_range / math.sqrt(2 * num_hidden_layers))."),
    Rule("torch-dtype-weights", "notice", "torch_dtype differs from the dtype the weights are stored in",
         "The declared torch_dtype (dtype) equals the floating dtype holding most of the weights. Quantized or "
         "packed checkpoints are not compared.",
         "torch_dtype, the weights' elements by dtype",
         "Set torch_dtype to the stored dtype (serving engines and torch_dtype=\"auto\" load what it says: a "
         "float32 declaration doubles a bfloat16 checkpoint's memory)."),
    Rule("max-position-tokenizer", "critical", "The tokenizer accepts more tokens than the model has positions",
         "The tokenizer's model_max_length (its 1e30 'no limit' sentinel excepted) fits the positions: the learned "
         "position table's rows (critical: longer inputs index past it), or for rotary models "
         "max_position_embeddings extended by rope_scaling (info: longer inputs are unsupported, not an error).",
         "model_max_length, max_position_embeddings, rope_scaling",
         "Lower model_max_length in tokenizer_config.json to the positions, or extend them (rope_scaling) for a "
         "rotary model trained for it."),
    Rule("rope-scaling-invalid", "critical", "rope_scaling lacks what its type requires",
         "Each rope type has the keys transformers requires (factor >= 1 for linear, dynamic, yarn and llama3; "
         "low/high_freq_factor and original_max_position_embeddings for llama3; short_factor and long_factor of "
         "head_dim / 2 entries for longrope).",
         "the rope_scaling keys, the type, head_dim",
         "Complete rope_scaling as the type's documentation says (transformers refuses it at load otherwise)."),
    Rule("rope-scaling-version", "critical", "The declared transformers version does not know this rope_scaling",
         "The rope type (or the `rope_type` key) exists in the transformers version the config declares "
         "(transformers_version): linear and dynamic from 4.31.0; yarn, longrope, llama3, default and the "
         "`rope_type` key from 4.43.0; proportional from 5.5.0; before 4.43.0 the Llama lineage's configs (llama, "
         "gpt_neox, falcon, phi, olmo, persimmon, stablelm, fuyu) take exactly type and factor. Custom code "
         "(auto_map) brings its own and is not checked.",
         "rope_scaling's type, transformers_version, the version that added the type",
         "Declare (and require) a transformers version that knows the type, or use a type the declared one knows."),
    Rule("index-missing-shard", "critical", "The weight index names shards that are not in the repo",
         "Every file a weight index (model.safetensors.index.json, pytorch_model.bin.index.json) maps a tensor "
         "to is in the repo.",
         "the index, the missing shards and how many tensors they hold",
         "Upload the missing shards, or regenerate the index from the shards present."),
)}
