"""The task heads real repos ship on top of a base model, driven by the config's ``architectures``: sequence
classification, token classification and question answering for the decoders and encoders, image classification for
the CLIP and SigLIP vision towers. Which family has which head, its module names and where it reads the base model's
output are transformers' own (checked against its models on the meta device, tests/estimator/test_estimator_graph.py).

A builder asks ``start`` for its module root and head, builds the base model, and ends with ``add`` (or its own
native head: a causal LM's ``lm_head``, BERT's masked-LM head). An ``architectures`` entry naming a head this table
does not list keeps the base model's graph, and a note says so.
"""

from __future__ import annotations

from .graph_nodes import Dims, Tower, activation

SEQ, TOKEN, QA, IMAGE = ("ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering",
                         "ForImageClassification")
NAMES = {SEQ: "sequence classification", TOKEN: "token classification", QA: "question answering",
         IMAGE: "image classification"}

# model_type -> the heads transformers defines for it (the three text heads unless said otherwise)
_TEXT = (SEQ, TOKEN, QA)
FAMILY_HEADS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("llama", "mistral", "qwen2", "qwen3", "gpt2", "gpt_neox", "falcon", "bloom", "bert", "roberta",
                     "xlm-roberta", "electra", "distilbert", "deberta-v2"), _TEXT),
    **dict.fromkeys(("gemma", "gemma2", "phi3", "phi", "starcoder2"), (SEQ, TOKEN)),
    "gemma3_text": (SEQ,), "gptj": (SEQ, QA), "opt": (SEQ, QA), "t5": (TOKEN, QA), "bart": (QA,),
    "clip": (IMAGE,), "siglip": (IMAGE,),
}
# decoders whose token-classification layer is ``classifier`` (the Llama-style ones call it ``score``)
_TOKEN_CLASSIFIER = ("gpt2", "gpt_neox", "falcon", "bloom")
# decoders whose question-answering model keeps the base model under ``transformer.`` instead of their own prefix
_QA_UNDER_TRANSFORMER = ("llama", "qwen2", "qwen3")


def arch_of(d: Dims) -> str:
    archs = d.data.get("architectures")
    return archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else ""


def is_base(arch: str) -> bool:
    return not arch or arch.endswith("Model") and not arch.endswith("LMHeadModel")


def head_of(arch: str, family: str) -> str | None:
    """The task head ``arch`` names, where this family has it in the table."""
    return next((kind for kind in FAMILY_HEADS.get(family, ()) if arch.endswith(kind)), None)


def start(d: Dims, family: str, prefix: str, native: str | tuple[str, ...]) -> tuple[str, str | None, list[str]]:
    """(module root, head, notes) for a builder: ``native`` is the suffix (or suffixes) of the head the builder
    models itself, returned as the head when the architecture ends with it; else a task head from the table; a base
    model is the transformer itself (root ""), anything else the base model's graph with a note."""
    arch = arch_of(d)
    notes: list[str] = []
    natives = (native,) if isinstance(native, str) else native
    head = next((suffix for suffix in natives if suffix and arch.endswith(suffix)), None) or head_of(arch, family)
    if head is None and not is_base(arch):
        notes.append(f"the head of {arch} is not modelled: the graph is the base model's")
    if is_base(arch):
        return "", None, notes
    if head == QA and family in _QA_UNDER_TRANSFORMER:
        prefix = "transformer."
    return prefix, head, notes


def labels(d: Dims) -> int | None:
    """The classes a classification head outputs: id2label's size, else num_labels (transformers' default 2)."""
    names = d.data.get("id2label")
    if isinstance(names, dict) and names:
        return len(names)
    return d.int("num_labels", default=2)


def add(t: Tower, d: Dims, family: str, head: str | None, seq: int | None, h: int | None, root: str = "") -> None:
    """The nodes of a task head on tower ``t`` whose base model outputs (seq, h); ``root`` is the base model's
    module prefix (BERT's pooler lives under it). A head other than the table's adds nothing."""
    if head not in (SEQ, TOKEN, QA, IMAGE):
        return
    n = labels(d)
    if head == IMAGE:  # CLIP and SigLIP: a linear classifier on the pooled image features
        t.add("classifier", "Linear", (n,))
    elif head == QA:
        if family == "distilbert":
            t.add("dropout", "Dropout", (seq, h))
        t.add("qa_outputs", "Linear", (seq, 2))  # start and end logits per token
    elif head == TOKEN:
        t.add("dropout", "Dropout", (seq, h))
        token = "score" if _decoder(family) and family not in _TOKEN_CLASSIFIER else "classifier"
        t.add(token, "Linear", (seq, n))
    elif _decoder(family):  # a decoder scores every token; the last real token's row is read after the layer
        t.add("score", "Linear", (seq, n))
    else:
        _sequence_classifier(t, d, family, root, h, n)


def _decoder(family: str) -> bool:
    return family not in ("bert", "roberta", "xlm-roberta", "electra", "distilbert", "deberta-v2", "t5", "bart",
                          "clip", "siglip")


def _sequence_classifier(t: Tower, d: Dims, family: str, root: str, h: int | None, n: int | None) -> None:
    """An encoder's sequence classifier, on the first token (BERT through its pooler)."""
    if family == "bert":
        t.add(f"{root}pooler.dense", "Linear", (h,))
        t.add(f"{root}pooler.activation", "Tanh", (h,))
        t.add("dropout", "Dropout", (h,))
        t.add("classifier", "Linear", (n,))
    elif family in ("roberta", "xlm-roberta", "electra"):
        t.add("classifier.dropout", "Dropout", (h,))
        t.add("classifier.dense", "Linear", (h,))
        if family == "electra":  # GELU whatever hidden_act says
            t.add("classifier.activation", activation("gelu"), (h,))
        t.add("classifier.dropout", "Dropout", (h,))
        t.add("classifier.out_proj", "Linear", (n,))
    elif family == "distilbert":
        t.add("pre_classifier", "Linear", (h,))
        t.add("dropout", "Dropout", (h,))
        t.add("classifier", "Linear", (n,))
    elif family == "deberta-v2":  # the context pooler (its activation is functional), then the classifier
        pooled = d.int("pooler_hidden_size", default=h)
        t.add("pooler.dropout", "Dropout", (h,))
        t.add("pooler.dense", "Linear", (pooled,))
        t.add("dropout", "Dropout", (pooled,))
        t.add("classifier", "Linear", (n,))
