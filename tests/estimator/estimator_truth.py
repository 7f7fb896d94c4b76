"""Ground truth from transformers itself (test-only): parameter counts and saved-for-backward bytes.

Parameter counts come from the model built on the meta device; saved bytes come from one forward pass
under bf16 autocast with CUDA's rules (cuda_policy) inside ``saved_tensors_hooks``, run under ``FakeTensorMode`` so real widths cost no
memory or compute. Fake and real CPU runs save the same tensors (``test_fake_run_matches_real_run``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
import transformers
from cuda_policy import CudaRules
from estimator_configs import FIXTURES, load_config  # noqa: F401 - their names here too
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode
from transformers.initialization import no_init_weights


def model_class(config_dict: dict):
    """The class named by ``architectures`` (what the checkpoint holds), else the base AutoModel."""
    archs = config_dict.get("architectures") or []
    if archs and hasattr(transformers, archs[0]):
        return getattr(transformers, archs[0])
    return None


def hf_config(config_dict: dict):
    """A transformers config object built from a raw config dict."""
    cfg = copy.deepcopy(config_dict)
    model_type = cfg.pop("model_type")
    return transformers.AutoConfig.for_model(model_type, **cfg)


def build(config_dict: dict, device):
    """Build the model the config names, on ``device`` (meta, or a FakeTensorMode)."""
    config = hf_config(config_dict)
    cls = model_class(config_dict)
    with device:
        if cls is None:
            return transformers.AutoModel.from_config(config, dtype=torch.float32)
        return cls._from_config(config, dtype=torch.float32)


def count_parameters(config_dict: dict) -> int:
    """Parameters of the model transformers builds for this config, tied tensors counted once.

    Where transformers 5.x ties what the checkpoint keeps apart (T5 v1.1 / flan-T5, whose raw config says
    ``tie_word_embeddings: false``), the untied head is added back: the checkpoint is the truth.
    """
    model = build(config_dict, torch.device("meta"))
    total = sum(p.numel() for p in model.parameters())
    if config_dict.get("model_type") == "t5" and config_dict.get("tie_word_embeddings") is False:
        head = getattr(model, "lm_head", None)
        if head is not None:
            total += head.weight.numel()
    return total


def _storage_key(tensor: torch.Tensor) -> int:
    return tensor.untyped_storage()._cdata


class _ParamCasts(TorchDispatchMode):
    """Marks the storages that are autocast copies of parameters (weights, not activations)."""

    def __init__(self, keys: set[int]):
        super().__init__()
        self.keys = keys

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is torch.ops.aten._to_copy.default and _storage_key(args[0]) in self.keys:
            self.keys.add(_storage_key(out))
        return out


@dataclass
class Saved:
    """Bytes saved for backward in one forward pass, split into activations and weight copies."""

    activation_bytes: int
    weight_copy_bytes: int


def saved_bytes(model, inputs: dict) -> Saved:
    """Run one training-mode forward under bf16 autocast and sum unique saved storages."""
    param_keys = {_storage_key(p) for p in model.parameters()}
    seen: dict[int, int] = {}
    kept = []  # holding every saved tensor keeps storage addresses from being reused mid-pass

    def pack(tensor):
        kept.append(tensor)
        seen.setdefault(_storage_key(tensor), tensor.untyped_storage().nbytes())
        return tensor

    model.train()
    with (
        torch.autocast("cpu", dtype=torch.bfloat16),
        CudaRules(),
        _ParamCasts(param_keys),
        torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t),
    ):
        model(**inputs)
    weights = sum(n for k, n in seen.items() if k in param_keys)
    return Saved(sum(seen.values()) - weights, weights)


def measure(config_dict: dict, inputs_for, *, fake: bool = True) -> Saved:
    """Saved bytes for one config, built fresh under FakeTensorMode (or on the real CPU)."""
    if not fake:
        # real tensors, built the way the fake run builds them; zeros rather than transformers' random init,
        # which costs more than the forward and changes no size the run saves
        with no_init_weights():
            model = build(config_dict, torch.device("cpu"))
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.zero_()
        return saved_bytes(model, inputs_for(config_dict))
    with FakeTensorMode(), no_init_weights():
        model = build(config_dict, torch.device("cpu"))
        return saved_bytes(model, inputs_for(config_dict))


def tower_counts(config_dict: dict, modules: dict[str, list[str]], loose: dict[str, int]) -> dict[str, int]:
    """Parameters per tower of transformers' model: the named submodules' (plus loose tensors such as logit_scale)."""
    model = build(config_dict, torch.device("meta"))
    counts = {tower: sum(p.numel() for name in names for p in model.get_submodule(name).parameters())
              + loose.get(tower, 0) for tower, names in modules.items()}
    counts.update({t: n for t, n in loose.items() if t not in counts})
    return counts


def linear_roles(config_dict: dict) -> dict[str, int]:
    """Each linear of transformers' model by its name within a layer (embeddings left out): in + out, summed."""
    model = build(config_dict, torch.device("meta"))
    real: dict[str, int] = {}
    for name, module in model.named_modules():
        weight = getattr(module, "weight", None)
        if isinstance(weight, torch.nn.Parameter) and weight.dim() == 2 and "embed" not in name:
            parts = name.split(".")
            numbered = [i for i, p in enumerate(parts) if p.isdigit()]
            role = ".".join(parts[numbered[-1] + 1:]) if numbered else name
            real[role] = real.get(role, 0) + sum(weight.shape)
    return real


def saved_tensors(config_dict: dict) -> dict[str, list]:
    """What save_pretrained would write, by name: ["param" | "int_buffer" | "float_buffer", shape], each parameter
    once (tied ones once) and the persistent buffers."""
    model = build(config_dict, torch.device("meta"))
    out: dict[str, list] = {name: ["param", list(p.shape)] for name, p in model.named_parameters()}
    persistent = set(model.state_dict())
    for name, buf in model.named_buffers():
        if name in persistent:
            out[name] = ["float_buffer" if buf.is_floating_point() else "int_buffer", list(buf.shape)]
    return out
