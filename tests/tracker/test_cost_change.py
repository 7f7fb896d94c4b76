"""A rerun estimate's cost against its parent's (tracker/pipeline/cost_change.py): past the threshold on any card
is a change with the figures before and after; below it, or without a cost on either side, nothing."""

from __future__ import annotations

import pytest

from estimator import estimate
from estimator.cards import with_overrides
from estimator.cost import Workload
from tests.estimator.estimator_configs import load_config
from tracker.pipeline.cost_change import cost_change
from tracker.revision.changes import Severity


def _cost(train: dict[str, tuple[float | None, float | None]], serve: dict[str, tuple[float | None, float | None]]) -> dict:
    """A cost section: card -> (usd, hours) for training, card -> (usd_per_mtok, tokens_per_s) for serving."""
    return {"workload": {"epochs": 10},
            "train": {"cards": [{"card": c, "usd": u, "hours": h} for c, (u, h) in train.items()]},
            "serve": {"cards": [{"card": c, "usd_per_mtok": u, "tokens_per_s": t} for c, (u, t) in serve.items()]}}


BASE = _cost({"A10G 24GB": (1.0, 1.0), "H200 141GB": (None, 0.5)}, {"A10G 24GB": (0.5, 400.0)})


@pytest.mark.parametrize(("after", "severity", "words"), [
    (_cost({"A10G 24GB": (1.2, 1.2), "H200 141GB": (None, 0.5)}, {"A10G 24GB": (0.5, 400.0)}), Severity.WARNING,
     "a training run on A10G 24GB $1.00 -> $1.20 (+20%)"),
    (_cost({"A10G 24GB": (0.5, 0.5), "H200 141GB": (None, 0.25)}, {"A10G 24GB": (0.5, 400.0)}), Severity.NOTICE,
     "training on H200 141GB 0.50 h -> 0.25 h (-50%)"),
    (_cost({"A10G 24GB": (1.0, 1.0), "H200 141GB": (None, 0.5)}, {"A10G 24GB": (None, None)}), Severity.WARNING,
     "serving on A10G 24GB 400 tokens/s -> none"),
    (_cost({"A10G 24GB": (1.0, 1.0), "H200 141GB": (None, 0.5)}, {"A10G 24GB": (0.3, 600.0)}), Severity.NOTICE,
     "a million tokens on A10G 24GB $0.50 -> $0.30 (-40%)"),
], ids=["dearer", "unpriced-card-compared-on-hours", "no-longer-served", "cheaper-serving"])
def test_a_move_past_the_threshold_is_a_change(after: dict, severity: Severity, words: str) -> None:
    """Dearer is a warning, cheaper a notice; a card without a price is compared on time; a figure that vanished
    counts whatever the threshold; the detail keeps both sides."""
    change = cost_change(BASE, after, 0.10)
    assert change is not None and change.severity == severity and words in change.summary, change and change.summary
    assert change.detail["before"]["train"]["A10G 24GB"]["usd"] == 1.0
    assert change.detail["after"]["train"] == {r["card"]: {"usd": r["usd"], "hours": r["hours"]} for r in after["train"]["cards"]}


@pytest.mark.parametrize(("before", "after", "threshold"), [
    (BASE, _cost({"A10G 24GB": (1.05, 1.05), "H200 141GB": (None, 0.52)}, {"A10G 24GB": (0.52, 390.0)}), 0.10),
    (BASE, _cost({"A10G 24GB": (1.3, 1.3), "H200 141GB": (None, 0.5)}, {"A10G 24GB": (0.5, 400.0)}), 0.50),
    (None, BASE, 0.10),
    (BASE, None, 0.10),
    ({}, BASE, 0.10),
], ids=["under-10%", "under-a-higher-threshold", "parent-without-cost", "child-without-cost", "empty"])
def test_nothing_under_the_threshold_or_without_a_cost(before, after, threshold: float) -> None:
    """Moves within the threshold, or an estimate stored before costs existed, make no change."""
    assert cost_change(before, after, threshold) is None


def test_real_estimates_a_price_rise_on_one_card() -> None:
    """Two real estimates of CLIP whose A10G price rose 25%, compared as given: exactly that card moves, in training
    only (the pipeline never compares them so: it reprices both sides first, next test)."""
    config = load_config("clip/CLIP-ViT-B-32-laion2B-s34B-b79K.json")
    before = estimate(config, cost=Workload()).cost
    after = estimate(config, cost=Workload(), cards=with_overrides(["A10G 24GB:usd_per_hour=1.2575"])).cost
    change = cost_change(before, after, 0.10)
    assert change is not None and [(m["section"], m["card"]) for m in change.detail["moved"]] == [("train", "A10G 24GB")]
    assert change.detail["moved"][0]["change"] == pytest.approx(0.25, abs=1e-4)


def test_a_price_alone_moves_nothing_once_both_sides_are_at_todays_prices() -> None:
    """What ingest compares: the parent's stored cost and the rerun's, both repriced at the table configured now.
    A price raised 25% (or removed) between them is no change; the structure doubling the context still is, and
    its dollars on both sides are at the new price."""
    from estimator.cost import reprice

    config = load_config("clip/CLIP-ViT-B-32-laion2B-s34B-b79K.json")
    before = estimate(config, cost=Workload()).cost
    now = with_overrides(["A10G 24GB:usd_per_hour=1.2575", "T4 16GB:usd_per_hour=none"])
    after = estimate(config, cost=Workload(), cards=now).cost
    assert cost_change(before, after, 0.10) is not None
    assert cost_change(reprice(before, now), reprice(after, now), 0.10) is None
    qwen = load_config("qwen2/Qwen2.5-0.5B.json")
    short = estimate({**qwen, "max_position_embeddings": 1024}, cost=Workload()).cost
    long = estimate(qwen, cost=Workload(), cards=now).cost
    change = cost_change(reprice(short, now), reprice(long, now), 0.10)
    assert change is not None
    a10g = [m for m in change.detail["moved"] if m["card"] == "A10G 24GB" and m["section"] == "train"]
    assert a10g and a10g[0]["figure"] == "usd"
    hours = next(r["hours"] for r in short["train"]["cards"] if r["card"] == "A10G 24GB")
    assert a10g[0]["before"] == pytest.approx(hours * 1.2575)
