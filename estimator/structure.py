"""What a family builder derives from a config: parameters by tower and component, and layer stacks."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from .errors import EstimateError

TOWERS = ("text", "vision", "audio", "projection", "head")
COMPONENTS = ("embeddings", "blocks", "norms", "heads", "projections", "other")


@dataclass
class Stack:
    """A run of identical layers and what one layer costs in memory per sample.

    Bytes follow one forward under bf16 autocast with SDPA (fp32 residual stream, bf16 matmul outputs).
    """

    tower: str
    name: str
    layers: int
    tokens: int                      # tokens per sample through this stack
    hidden: int                      # residual width: a checkpointed layer keeps 4 * hidden bytes a token
    saved_per_token: float           # bytes saved for backward, per token, per layer
    saved_per_sample_extra: int = 0  # per sample per layer, not linear in tokens (stored score matrices)
    saved_per_layer: int = 0         # per layer, independent of the batch (e.g. Gemma's 1 + weight)
    kv_per_token: int = 0            # bf16 KV cache bytes per token per layer at inference
    cross_kv_tokens: int = 0         # encoder tokens a decoder's cross-attention caches
    cross_kv_per_token: int = 0
    attn_width: int = 0              # query width (heads x head_dim) for attention FLOPs (cost.py); 0: ``hidden``

    def saved_per_sample(self) -> float:
        return self.saved_per_token * self.tokens + self.saved_per_sample_extra


@dataclass
class Linears:
    """The LoRA-adaptable linear layers of one module role (e.g. ``self_attn.q_proj``), summed over layers."""

    dims: int = 0                                    # sum of (in + out): LoRA's parameters are rank times this
    params: int = 0                                  # weight elements
    largest: int = 0                                 # elements of the largest weight matrix
    inputs: dict = field(default_factory=dict)       # tower -> sum of d_in
    count: dict = field(default_factory=dict)        # tower -> number of layers


def targeted(roles: Iterable[str], targets: str | Sequence[str]) -> list[str]:
    """The roles PEFT's ``target_modules`` adapts: every one for "all-linear", else each role whose module path
    is a target or ends with "." and a target. A target that matches no role raises EstimateError."""
    roles = sorted(roles)
    if targets == "all-linear":
        return roles
    chosen = []
    for target in targets:
        matched = [role for role in roles if role == target or role.endswith("." + target)]
        if not matched:
            raise EstimateError("lora_targets", f"{target!r} matches no linear layer of this model "
                                                f"(its modules: {', '.join(roles) or 'none'})")
        chosen.extend(m for m in matched if m not in chosen)
    return sorted(chosen)


@dataclass
class Structure:
    """The derived model: parameter ledger, stacks, fixed activations, and the linear layers for LoRA."""

    family: str
    architecture: str
    params: dict = field(default_factory=lambda: defaultdict(lambda: defaultdict(int)))
    stacks: list[Stack] = field(default_factory=list)
    fixed_saved_per_sample: float = 0.0    # embeddings, final norm, head and loss, saved for backward
    fixed_saved_const: float = 0.0         # saved once whatever the batch (e.g. T5's position buckets)
    loss_transient_per_sample: float = 0.0  # logits, their fp32 copy and gradients at the loss
    lora_linear_dims: int = 0               # sum of (in + out) over every linear layer but the head
    quantizable: int = 0                    # parameters in block linear layers (4-bit under QLoRA)
    matmul_params: int = 0                  # parameters used in autocast matmuls (bf16 weight copies)
    largest_linear: int = 0                 # elements of the largest block weight matrix
    lora_inputs: dict = field(default_factory=dict)  # tower -> sum of d_in over its LoRA-adapted linears
    lora_frozen: dict = field(default_factory=dict)  # tower -> bytes a token full fine-tuning saves only to train norm weights
    lora_roles: dict = field(default_factory=dict)   # module role -> Linears (the same layers by role)
    lora_kept: dict = field(default_factory=dict)    # tower -> bytes a token full fine-tuning counts once, as a
    # linear's input and an activation's output (ReLU's), that the activation still keeps under LoRA
    qlora_extra: dict = field(default_factory=dict)  # tower -> bytes a token QLoRA adds: a 4-bit linear returns
    # its input's dtype, so behind an fp32 LayerNorm the MLP's activation keeps fp32 tensors
    tied_elements: int = 0                  # elements of a head tied to the embeddings (its grads add up)
    tied: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    inputs: dict = field(default_factory=dict)
    # every matmul's weight elements and the tokens a sample pushes through it, for FLOPs (cost.py):
    # (tower, elements, tokens), tokens None for the tower's stack tokens
    flop_matmuls: list = field(default_factory=list)

    def add(self, tower: str, component: str, count: int) -> None:
        self.params[tower][component] += int(count)

    def linear(self, tower: str, component: str, d_in: int, d_out: int, bias: bool, *, times: int = 1,
               lora: bool = True, module: str = "", tokens: int | None = None) -> None:
        """Record ``times`` linear layers (weight + optional bias) and what LoRA and QLoRA make of them;
        ``module`` is the role PEFT's ``target_modules`` names them by (their path within a layer); ``tokens``, the
        tokens a sample pushes through them where not their tower's (cross-attention's keys and values)."""
        count = (d_in * d_out + (d_out if bias else 0)) * times
        self.add(tower, component, count)
        self.matmul_params += d_in * d_out * times
        # block linears see every token of their tower; heads and projections the pooled one
        self.flop_matmuls.append((tower, d_in * d_out * times, tokens or (None if component == "blocks" else 1)))
        if lora:
            self.lora_linear_dims += (d_in + d_out) * times
            self.lora_inputs[tower] = self.lora_inputs.get(tower, 0) + d_in * times
            self.quantizable += d_in * d_out * times
            self.largest_linear = max(self.largest_linear, d_in * d_out)
            role = self.lora_roles.setdefault(module, Linears())
            role.dims += (d_in + d_out) * times
            role.params += d_in * d_out * times
            role.largest = max(role.largest, d_in * d_out)
            role.inputs[tower] = role.inputs.get(tower, 0) + d_in * times
            role.count[tower] = role.count.get(tower, 0) + times

    def matmul(self, tower: str, elements: int, tokens: int | None = None) -> None:
        """A matmul recorded outside ``linear`` (an LM head, a patch or audio convolution): ``elements`` weights
        multiplied for each of ``tokens`` tokens a sample (None: the tower's)."""
        self.matmul_params += elements
        self.flop_matmuls.append((tower, elements, tokens))

    @property
    def total(self) -> int:
        return sum(sum(parts.values()) for parts in self.params.values())

    def by_tower(self) -> dict[str, int]:
        return {t: sum(self.params[t].values()) for t in TOWERS if sum(self.params[t].values())}

    def by_component(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for parts in self.params.values():
            for comp, n in parts.items():
                out[comp] = out.get(comp, 0) + n
        return {c: out[c] for c in COMPONENTS if out.get(c)}
