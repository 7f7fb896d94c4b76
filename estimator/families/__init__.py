"""Family builders: model_type -> function(reader, seq_len_cap) -> Structure."""

from __future__ import annotations

from . import decoders, encoders, seq2seq, vision

BUILDERS = {**decoders.BUILDERS, **encoders.BUILDERS, **seq2seq.BUILDERS, **vision.BUILDERS}
