"""Saved-for-backward bytes per layer and fixed part: transformers measured (live, or as recorded) against the
estimator. Importing this module needs no torch; measuring does."""

from __future__ import annotations

from dataclasses import dataclass

from estimator_configs import with_layers

from estimator.families import BUILDERS
from estimator.memory import constant_saved
from estimator.reader import ConfigReader


@dataclass
class Comparison:
    measured_layer: int
    estimated_layer: float
    measured_fixed: int
    estimated_fixed: float

    @property
    def layer_error(self) -> float:
        return self.estimated_layer / self.measured_layer - 1

    @property
    def fixed_error(self) -> float:
        return self.estimated_fixed / self.measured_fixed - 1


def measure_saved(config: dict, batch: int, seq: int) -> tuple[int, int]:
    """transformers' saved bytes, one vs two layers at real widths: (one layer, the fixed part). Needs torch."""
    from estimator_shapes import inputs_for
    from estimator_truth import measure

    one = measure(with_layers(config, 1), lambda c: inputs_for(c, batch, seq)).activation_bytes
    two = measure(with_layers(config, 2), lambda c: inputs_for(c, batch, seq)).activation_bytes
    return two - one, one - (two - one)


def compare_with(measured: tuple[int, int], config: dict, batch: int, seq: int) -> Comparison:
    """The estimator's saved bytes per layer and fixed part against `measured` (one layer, the fixed part)."""
    structure = BUILDERS[config["model_type"]](ConfigReader(with_layers(config, 2)), seq)
    stacks = len(structure.stacks)
    per_layer = sum(st.saved_per_sample() for st in structure.stacks) * batch
    per_layer += (constant_saved(structure) - structure.fixed_saved_const) / 2
    fixed = structure.fixed_saved_per_sample * batch + structure.fixed_saved_const
    return Comparison(measured[0], per_layer, measured[1], fixed if stacks else 0.0)


def compare(config: dict, batch: int, seq: int) -> Comparison:
    """One vs two layers at real widths: the difference is one layer, the rest is the fixed part."""
    return compare_with(measure_saved(config, batch, seq), config, batch, seq)
