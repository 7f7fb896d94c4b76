"""Which kind each file of a repo belongs to, and which files hubwatch downloads to diff."""

from __future__ import annotations

import posixpath

from tracker.revision.changes import ChangeKind

CONFIG_NAMES = frozenset(
    {
        "config.json",
        "generation_config.json",
        "preprocessor_config.json",
        "processor_config.json",
        "image_processor_config.json",
        "video_preprocessor_config.json",
        "feature_extractor_config.json",
        "config_sentence_transformers.json",
        "sentence_bert_config.json",
        "modules.json",
        "model_index.json",
        "adapter_config.json",
        "scheduler_config.json",
    }
)
TOKENIZER_JSON_NAMES = frozenset(
    {"tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "tokenizer.json"}
)
# Tokenizer files compared by content id only (binary, or superseded by tokenizer.json).
TOKENIZER_OPAQUE_NAMES = frozenset(
    {"vocab.json", "vocab.txt", "merges.txt", "tokenizer.model", "spiece.model", "sentencepiece.bpe.model"}
)
CHAT_TEMPLATE_NAMES = frozenset({"chat_template.jinja", "chat_template.json"})
WEIGHT_INDEX_NAMES = frozenset({"model.safetensors.index.json", "pytorch_model.bin.index.json"})

SAFETENSORS_SUFFIX = ".safetensors"
# Formats that run code when loaded (pickle and friends).
PICKLE_SUFFIXES = frozenset({".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle", ".joblib", ".npy", ".npz"})
WEIGHT_SUFFIXES = frozenset(
    {SAFETENSORS_SUFFIX, ".gguf", ".h5", ".msgpack", ".onnx", ".tflite", ".ot", ".mlmodel", ".keras"}
    | PICKLE_SUFFIXES
)
CODE_SUFFIX = ".py"
REQUIREMENTS_NAMES = frozenset({"requirements.txt"})
MODEL_CARD = "README.md"


def suffix(path: str) -> str:
    return posixpath.splitext(path)[1].lower()


# Pickles a trainer writes beside the model (their basenames start so): not the model's weights.
TRAINING_STATE = ("training_args", "optimizer", "scheduler", "rng_state", "trainer_state")


def is_pickle(path: str) -> bool:
    return suffix(path) in PICKLE_SUFFIXES


def is_safetensors(path: str) -> bool:
    return suffix(path) == SAFETENSORS_SUFFIX


def is_chat_template_file(path: str) -> bool:
    """chat_template.jinja / .json, and the direct children of additional_chat_templates/ (transformers
    ignores deeper files, so they are ordinary files here too)."""
    if path in CHAT_TEMPLATE_NAMES:
        return True
    folder, base = posixpath.split(path)
    return folder == "additional_chat_templates" and base.endswith(".jinja")


def kind_of(path: str) -> ChangeKind:
    """The kind a file's own changes are reported under."""
    base = posixpath.basename(path)
    if base in WEIGHT_INDEX_NAMES or suffix(path) in WEIGHT_SUFFIXES:
        return ChangeKind.WEIGHTS
    if is_chat_template_file(path):
        return ChangeKind.CHAT_TEMPLATE
    if base in TOKENIZER_JSON_NAMES or base in TOKENIZER_OPAQUE_NAMES:
        return ChangeKind.TOKENIZER
    if base in CONFIG_NAMES:
        return ChangeKind.CONFIG
    if suffix(path) == CODE_SUFFIX or base in REQUIREMENTS_NAMES:
        return ChangeKind.CUSTOM_CODE
    return ChangeKind.FILES


def should_download(path: str) -> bool:
    """True for files whose bytes the differs read. Weights are never downloaded (headers by Range)."""
    base = posixpath.basename(path)
    if base in WEIGHT_INDEX_NAMES:
        return True
    kind = kind_of(path)
    if kind is ChangeKind.WEIGHTS:
        return False
    if kind is ChangeKind.TOKENIZER:
        return base in TOKENIZER_JSON_NAMES
    if kind is ChangeKind.FILES:
        return path == MODEL_CARD
    return True
