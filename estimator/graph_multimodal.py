"""Graph builders for the models that join a vision tower to a language model: LLaVA. Three towers, each as
transformers runs it: the CLIP vision transformer on the image, the multi-modal projector on the image features it
selects (one hidden layer, the class token dropped by the default strategy), and the Llama-style language model on
the text, whose image-placeholder tokens the projected features fill. The whole forward stops at that placeholder
check on meta tensors, so the towers are checked apart against transformers' modules (tests/estimator/
test_estimator_graph.py: the image features through ``get_image_features``, the language model on the ids alone)."""

from __future__ import annotations

from collections.abc import Callable

from .families.vision import CLIP_VISION, LLAMA_TEXT
from .graph_families import DECODERS, Built, _arch, _clip_vision, _decoder
from .graph_nodes import Dims, Tower, activation, mul


def llava(d: Dims, cap: int) -> Built:
    notes: list[str] = []
    vision_type = d.sub("vision_config").str("model_type", "clip_vision_model")
    text_type = d.sub("text_config").str("model_type", "llama")
    if vision_type != "clip_vision_model":
        return [], [f"LLaVA's vision tower {vision_type!r} is not modelled (modelled: 'clip_vision_model')"]
    if text_type not in DECODERS:
        return [], [f"LLaVA's language model {text_type!r} is not modelled (modelled: {', '.join(sorted(DECODERS))})"]
    arch = _arch(d)
    generate = arch.endswith("ForConditionalGeneration")
    if arch and not generate and arch != "LlavaModel":
        notes.append(f"the head of {arch} is not modelled: the graph is the base model's")
    root = "" if arch == "LlavaModel" else "model."
    vd = d.sub("vision_config", CLIP_VISION)
    td = d.sub("text_config", LLAMA_TEXT if text_type == "llama" else None)
    vision = _clip_vision(vd, f"{root}vision_tower.", None, None, notes)

    hv, ht = vd.int("hidden_size"), td.int("hidden_size")
    image, patch, vlayers = vd.int("image_size"), vd.int("patch_size"), vd.int("num_hidden_layers")
    tokens = (image // patch) ** 2 + 1 if image and patch and patch <= image else None
    if tokens is not None and d.str("vision_feature_select_strategy", "default") == "default":
        tokens -= 1  # the class token dropped
    layer = d.raw("vision_feature_layer", -2)
    chosen = layer if isinstance(layer, list) else [layer]
    p = f"{root}multi_modal_projector."
    projector = Tower("projection", "image_features", (tokens, mul(hv, len(chosen))))
    for index in chosen:
        if isinstance(index, bool) or not isinstance(index, int) or (
                vlayers is not None and not -(vlayers + 1) <= index <= vlayers):
            projector.fail(p + "linear_1", f"vision_feature_layer={index!r} is not one of the vision tower's "
                                           f"{vlayers + 1 if vlayers else '?'} hidden states")
            break
    projector.add(p + "linear_1", "Linear", (tokens, ht))
    projector.add(p + "act", activation(d.str("projector_hidden_act", "gelu")), (tokens, ht))
    projector.add(p + "linear_2", "Linear", (tokens, ht))

    (text,), more = _decoder(td, cap, text_type, root=f"{root}language_model.",
                             head="ForCausalLM" if generate else None)
    notes.extend(more)
    seq = text.input_shape[0] if text.input_shape else None
    if seq and tokens and seq < tokens:
        text.fail(f"{root}language_model.embed_tokens", f"{seq} text tokens cannot hold the {tokens} image "
                                                        "features the projector gives")
    return [vision, projector, text], notes


BUILDERS: dict[str, Callable[[Dims, int], Built]] = {"llava": llava}
