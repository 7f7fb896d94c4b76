"""Weight formats read without downloading weights: GGUF headers and PyTorch pickles, fetched by range.

Every reader here takes a `RangeSource` (ranged.py) and never executes what it reads."""
