"""The bundled tokenizer corpus is exactly what its committed generator writes."""

from __future__ import annotations

import json
from collections import Counter

from tracker.corpus import CORPUS, load_corpus
from tracker.corpus.make_corpus import build


def test_the_committed_corpus_is_what_the_generator_writes():
    """Re-running make_corpus.py gives the committed corpus.json byte for byte in content (deterministic)."""
    assert json.loads(CORPUS.read_text(encoding="utf-8")) == build()


def test_the_corpus_has_a_thousand_samples_in_every_category():
    """1,000 samples with unique ids, every category present; chat samples carry turns, the others text."""
    samples = load_corpus()["samples"]
    assert len(samples) == 1000 and len({s["id"] for s in samples}) == 1000
    counts = Counter(s["category"] for s in samples)
    assert set(counts) == {"prose", "scripts", "code", "math", "whitespace_emoji", "chat"}
    assert all(("turns" in s) == (s["category"] == "chat") for s in samples)
