"""Ground truth for a whole training step (test-only): the peak of live tensor bytes per phase.

Two AdamW steps (foreach, as on a GPU) under bf16 autocast with CUDA's rules (cuda_policy: a 1-byte dropout
mask, CUDA autocast's fp32 ops), run under ``FakeTensorMode`` so real widths cost no memory or compute. An
allocator-like ``TorchDispatchMode`` counts every storage from the op that makes it until it is freed (sizes
rounded up to the CUDA caching allocator's 512-byte blocks) and keeps the peak per phase: ``forward``,
``backward`` and ``optimizer`` (AdamW's step), the maximum over both steps. Parameters and buffers are counted
from the start. Attention-probability dropout is set to 0 (a GPU's fused kernel keeps
no score matrix for it; the CPU's would). LoRA is PEFT's: ``LoraConfig(r=16, target_modules="all-linear")`` on a
bf16 base (PEFT casts the adapters to fp32), dropout on the adapter input. A mode ending in ``_gc`` turns on
transformers' non-reentrant gradient checkpointing first, as benchmarks/gpu_step_peaks.py does on a card (the
recomputation in backward follows CUDA's rules too). Two things transformers does on a card are made to run on
fake tensors (``_runnable_on_fake_tensors``): LLaVA's data-reading image-token check is skipped (the inputs
match by construction), and grouped-mm experts over fp32 weights (a full fine-tune of Mixtral or Qwen2-MoE) run
through transformers' own fallback op, which keeps what an fp32 ``grouped_mm`` keeps.
"""

from __future__ import annotations

import contextlib
import copy
import weakref

import torch
import transformers
from cuda_policy import CudaRules
from estimator_configs import case_config  # noqa: F401 - its name here too (benchmarks, generate_step_truth)
from estimator_shapes import ATTENTION_DROPOUT_KEYS, inputs_for
from estimator_truth import hf_config, model_class
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

BLOCK = 512
PHASES = ("forward", "backward", "optimizer")
LORA_RANK = 16
LORA_DROPOUT = 0.05


def _rounded(nbytes: int) -> int:
    return -(-nbytes // BLOCK) * BLOCK


class LiveBytes(TorchDispatchMode):
    """Live storage bytes after every op, and the peak per phase (set ``phase`` between phases)."""

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.phase = "setup"
        self.peaks: dict[str, int] = {}
        self._seen: set[int] = set()

    def track(self, tensor: torch.Tensor) -> None:
        storage = tensor.untyped_storage()
        key = storage._cdata
        if key in self._seen:
            return
        self._seen.add(key)
        size = _rounded(storage.nbytes())
        self.live += size
        weakref.finalize(storage, self._free, key, size)

    def _free(self, key: int, size: int) -> None:
        self._seen.discard(key)
        self.live -= size

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for leaf in tree_flatten(out)[0]:
            if isinstance(leaf, torch.Tensor):
                self.track(leaf)
        self.peaks[self.phase] = max(self.peaks.get(self.phase, 0), self.live)
        return out


def _lora(model, rank: int = LORA_RANK, targets: str | list[str] = "all-linear"):
    from peft import LoraConfig, get_peft_model
    from peft.tuners.tuners_utils import _maybe_include_all_linear_layers

    config = LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=LORA_DROPOUT, target_modules=targets)
    # "all-linear" expanded here, by PEFT's own rule: PEFT 0.19 rewrites the target names of models whose weights
    # transformers 5 converts (Mixtral, Qwen2-MoE) before expanding it, and splits the string into letters
    return get_peft_model(model, _maybe_include_all_linear_layers(config, model))


def without_attention_dropout(config: dict) -> dict:
    """A copy with attention-probability dropout at 0: a GPU's fused SDPA kernel applies it without storing
    the score matrix, which the CPU kernel cannot do (it would fall back to the math path)."""
    cfg = copy.deepcopy(config)
    for sub in (cfg, cfg.get("text_config"), cfg.get("vision_config")):
        for key in ATTENTION_DROPOUT_KEYS:
            if isinstance(sub, dict) and key in sub:
                sub[key] = 0.0
    return cfg


def _build(config: dict, mode: str, rank: int = LORA_RANK, targets: str | list[str] = "all-linear"):
    """The model on the meta device (fp32, or a bf16 base with PEFT's LoRA adapters of ``rank`` on ``targets``);
    ``_gc`` modes with non-reentrant gradient checkpointing."""
    base = mode.removesuffix("_gc")
    if base not in ("full_finetune", "lora"):
        raise ValueError(mode)
    config = without_attention_dropout(config)
    dtype = torch.bfloat16 if base == "lora" else torch.float32
    cls = model_class(config)
    with torch.device("meta"):
        if cls is None:
            model = transformers.AutoModel.from_config(hf_config(config), dtype=dtype)
        else:
            model = cls._from_config(hf_config(config), dtype=dtype)
    if mode.endswith("_gc"):
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return _lora(model, rank, targets) if base == "lora" else model


def step_inputs(config: dict, batch: int, seq: int) -> dict:
    """The step's inputs: ``inputs_for``'s, and those it does not build: a lone CLIP tower (its own image or
    text), LLaVA's prompt (``seq`` tokens of which the first are one ``<image>`` token per image feature)."""
    mt = config["model_type"]
    if mt == "clip_text_model":
        return dict(input_ids=torch.zeros(batch, config.get("max_position_embeddings", 77), dtype=torch.long))
    if mt == "clip_vision_model":
        size = config.get("image_size", 224)
        return dict(pixel_values=torch.zeros(batch, config.get("num_channels", 3), size, size))
    if mt == "llava":
        vision = config["vision_config"]
        size, patch = vision.get("image_size", 224), vision.get("patch_size", 14)
        features = (size // patch) ** 2 + (config.get("vision_feature_select_strategy") == "full")
        if features > seq:
            raise ValueError(f"{features} image tokens do not fit a sequence of {seq}")
        ids = torch.zeros(batch, seq, dtype=torch.long)
        ids[:, :features] = config.get("image_token_index", config.get("image_token_id", 32000))
        return dict(input_ids=ids, pixel_values=torch.zeros(batch, 3, size, size), labels=ids)
    return inputs_for(config, batch, seq)


def _materialize(model) -> None:
    """Meta parameters and buffers replaced by fake CPU tensors (call under FakeTensorMode); ties kept.

    PEFT casts its adapters with ``Module.to()``, which cannot swap fake parameters, so the model is built on
    the meta device and made fake afterwards.
    """
    made: dict[int, torch.Tensor] = {}
    originals = []  # kept alive so that no id() is reused while ties are matched
    for module in model.modules():
        for table, wrap in ((module._parameters, True), (module._buffers, False)):
            for name, tensor in table.items():
                if tensor is None:
                    continue
                if id(tensor) not in made:
                    originals.append(tensor)
                    fake = torch.empty(tensor.shape, dtype=tensor.dtype, device="cpu")
                    made[id(tensor)] = torch.nn.Parameter(fake, requires_grad=tensor.requires_grad) if wrap else fake
                table[name] = made[id(tensor)]


def _loss(output) -> torch.Tensor:
    if getattr(output, "loss", None) is not None:
        return output.loss
    first = output[0] if isinstance(output, tuple) else next(iter(output.values()))
    return first.float().mean()  # a base model without a head: a scalar over its last hidden state


def _backward(loss: torch.Tensor) -> None:
    """``loss.backward()`` with the active TorchFunctionModes left on: ``Tensor.backward`` would hand itself to
    the mode, which runs it with the mode popped (and a checkpointed layer's recomputation without CUDA's rules)."""
    torch.autograd.graph._engine_run_backward((loss,), (torch.ones_like(loss),), False, False, (),
                                              allow_unreachable=True, accumulate_grad=True)


@contextlib.contextmanager
def _runnable_on_fake_tensors():
    """What transformers does on a card, made to run on fake CPU tensors (a no-op for the other families):
    LLaVA's check that the image tokens match the image features reads tensor data (skipped: ``step_inputs``
    makes them match), and the grouped-mm experts (Mixtral, Qwen2-MoE) over fp32 weights, which torch's fake
    ``grouped_mm`` refuses, go through transformers' own fallback op: an fp32 grouped matmul that keeps its fp32
    input and weight for backward, as a card's fp32 ``grouped_mm`` does."""
    from transformers.integrations import moe
    from transformers.models.llava import modeling_llava

    check, can_group = modeling_llava.torch_compilable_check, moe._can_use_grouped_mm
    modeling_llava.torch_compilable_check = lambda *args, **kwargs: None
    moe._can_use_grouped_mm = lambda i, w, o: w.dtype == torch.bfloat16 and can_group(i, w, o)
    try:
        yield
    finally:
        modeling_llava.torch_compilable_check, moe._can_use_grouped_mm = check, can_group


def step_peaks(config: dict, mode: str, batch: int, seq: int, *, steps: int = 2, cuda_rules: bool = True,
               lora_rank: int = LORA_RANK, lora_targets: str | list[str] = "all-linear") -> dict[str, int]:
    """Peak live bytes per phase of ``steps`` AdamW steps; ``mode`` is "full_finetune" or "lora" (PEFT's adapters
    of ``lora_rank`` on ``lora_targets``), either with "_gc" (gradient checkpointing); ``cuda_rules`` False runs
    the CPU's own dropout and autocast policy (to show what the rules change)."""
    rules = CudaRules if cuda_rules else contextlib.nullcontext
    tracker = LiveBytes()
    model = _build(config, mode, lora_rank, lora_targets)  # on meta, initialisation costs nothing (and no_init_weights would untie)
    with FakeTensorMode(), _runnable_on_fake_tensors():
        _materialize(model)
        model.train()
        trainable = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(trainable, lr=1e-4, weight_decay=0.01, foreach=True)
        inputs = step_inputs(config, batch, seq)
        with tracker:
            for t in [*model.parameters(), *model.buffers(), *inputs.values()]:
                if isinstance(t, torch.Tensor):
                    tracker.track(t)
            for _ in range(steps):
                tracker.phase = "forward"
                with torch.autocast("cpu", dtype=torch.bfloat16), rules():
                    loss = _loss(model(**inputs))
                tracker.phase = "backward"
                with rules():  # so that a checkpointed layer's recomputation follows them too
                    _backward(loss)
                del loss
                tracker.phase = "optimizer"
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
    return {phase: tracker.peaks[phase] for phase in PHASES}
