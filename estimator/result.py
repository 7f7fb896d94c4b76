"""The estimate as returned: plain data with a stable JSON shape (integers for parameters and bytes)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Estimate:
    """Parameters derived and/or counted, the input shape used, memory per mode, batches per card."""

    parameters: dict
    input: dict
    memory: dict
    cards: dict
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    serving: dict | None = None  # serving memory per card (serving.py); absent from estimates stored before it
    structure: dict | None = None  # every tower's module graph (graph.py); absent from estimates stored before it
    split: dict | None = None  # two-card splits where one card cannot hold batch 1 (split.py); absent when none
    cost: dict | None = None     # time and money per run and per million tokens (cost.py), when asked for

    @property
    def total(self) -> int | None:
        return self.parameters["total"]

    def to_dict(self) -> dict:
        out = {"parameters": self.parameters, "input": self.input, "memory": self.memory, "cards": self.cards,
               "notes": list(self.notes), "warnings": list(self.warnings)}
        if self.serving is not None:
            out["serving"] = self.serving
        if self.structure is not None:
            out["structure"] = self.structure
        if self.split:
            out["split"] = self.split
        if self.cost is not None:
            out["cost"] = self.cost
        return out
