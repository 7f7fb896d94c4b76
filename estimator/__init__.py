"""Pure estimator: (config.json, weight manifest) -> structure, parameters, memory per card.

No I/O, no torch: ``estimate(config, manifest)`` returns an ``Estimate``; ``render_table`` prints it.
"""

from .api import estimate
from .compare import Crossing, crossings, serving_crossings
from .errors import EstimateError
from .memory import at_batch
from .render import render_table
from .result import Estimate

__all__ = ["Crossing", "Estimate", "EstimateError", "at_batch", "crossings", "estimate", "render_table",
           "serving_crossings"]
