"""storage: numbers past 32 bits (memory in bytes, ids and cursors users type) work on every database.
PostgreSQL's INTEGER is 32-bit and refuses to overflow where SQLite's integers are 64-bit."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from storage.event_log import NewEvent
from storage.front import Storage
from storage.history import NewChange, NewEstimate, NewRevision
from storage.read_model import EventFilter
from tests.support.databases import migrated_storage

pytestmark = pytest.mark.postgres  # its database tests run on PostgreSQL too (.ci/run)

T0 = datetime(2024, 7, 23, 15, 0, tzinfo=UTC)
BIG = 2**62  # the largest cursor and id the HTTP API accepts
FULL_BYTES, LORA_BYTES = 161_339_228_160, 2**31 + 7


@pytest.fixture
def store(database_url: str) -> Iterator[Storage]:
    with migrated_storage(database_url, T0) as storage:
        yield storage


def _revision(sha: str, estimate: NewEstimate | None = None) -> NewRevision:
    return NewRevision(
        repo_id="org/model", sha=sha, parent_sha=None, branch="main", committed_at=T0, title="Upload", message="",
        authors=["someone"], is_baseline=True, files=[], blobs={}, weight_files=[],
        changes=[NewChange(kind="repo", path="", summary="baseline", severity="info")],
        events=[NewEvent(event_id=f"ev-{sha}", kind="revision.ingested", title="t", severity="info")],
        estimate=estimate,
    )


def test_estimate_points_read_memory_past_32_bits(store: Storage) -> None:
    """The chart's points carry batch-1 memory in bytes as stored, however many bytes (8B models need 10**11)."""
    store.watches.add_watch("org/model", "main", 900)
    result = {"memory": {"full_finetune": {"batch_1_bytes": FULL_BYTES}, "lora": {"batch_1_bytes": LORA_BYTES}}}
    store.history.save_revision(_revision("a" * 40, NewEstimate(parameters_total=8_030_261_248, result=result)))
    [point] = store.read_model.estimate_points("org/model")
    assert (point.sha, point.parameters) == ("a" * 40, 8_030_261_248)
    assert (point.full_finetune_bytes, point.lora_bytes) == (FULL_BYTES, LORA_BYTES)


def test_event_cursors_past_32_bits_bound_nothing(store: Storage) -> None:
    """An `after` beyond every event finds none; a `before` beyond every event finds them all."""
    store.watches.add_watch("org/model", "main", 900)
    store.history.save_revision(_revision("b" * 40))
    queries = store.read_model
    assert queries.events(EventFilter(), 10, after_seq=BIG) == []
    assert [e.event_id for e in queries.events(EventFilter(), 10, before_seq=BIG)] == ["ev-" + "b" * 40]
    assert [h.event_id for h in queries.event_heads(EventFilter(), 10, before_seq=BIG)] == ["ev-" + "b" * 40]


def test_subscription_ids_past_32_bits_are_simply_not_there(store: Storage) -> None:
    """Looking up, enabling, disabling or removing a subscription by an id no key can hold finds none."""
    subscriptions = store.subscriptions
    assert subscriptions.get_subscription(BIG) is None
    assert subscriptions.enable_subscription(BIG) is False
    assert subscriptions.disable_subscription(BIG, "operator") is False
    assert subscriptions.remove_subscription(BIG) is False
