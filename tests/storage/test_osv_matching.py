"""Which own records hold a stored commit (storage/osv_index.py `matching`, one SQL statement for a whole batch),
on a history with a branch and a second baseline: a record holds a commit from its `introduced` commit on, until a
`fixed` commit the commit descends from, and no later than a `last_affected` one it descends from (OSV's GIT range
rule). Run on PostgreSQL too (the asks travel as one JSON parameter, read by each database's JSON functions)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from sqlmodel import select

from storage.advisories import own_columns
from storage.front import Storage
from storage.models import OwnAdvisory, Revision
from storage.osv_index import Ask
from tests.support.databases import migrated_storage

pytestmark = pytest.mark.postgres
NOW = datetime(2026, 12, 5, tzinfo=UTC)
REPO, OTHER = "org/model", "org/copy"
#   a - b - c - d          main
#        \
#         x - y            a branch forked at b
#   p - q                  a second baseline (history stored from p on; its parent never stored)
PARENTS = {"a": None, "b": "a", "c": "b", "d": "c", "x": "b", "y": "x", "p": "gone", "q": "p"}


def sha(name: str) -> str:
    return name.encode().hex().ljust(40, "0")


def record(record_id: str, introduced: str, fixed: str | None = None, last: str | None = None,
           withdrawn: bool = False) -> dict:
    events = [{"introduced": sha(introduced)}, *([{"fixed": sha(fixed)}] if fixed else []),
              *([{"last_affected": sha(last)}] if last else [])]
    out = {"id": record_id, "modified": "2026-12-01T00:00:00Z", "affected": [{"ranges": [{"type": "GIT", "events": events}]}]}
    return out | ({"withdrawn": "2026-12-02T00:00:00Z"} if withdrawn else {})


CASES = {  # record id -> (introduced, fixed, last_affected), and the commits it holds
    "R1": (("b", None, None), {"b", "c", "d", "x", "y"}),
    "R2": (("b", "d", None), {"b", "c", "x", "y"}),
    "R3": (("b", "x", None), {"b", "c", "d"}),
    "R4": (("b", None, "c"), {"b", "c", "x", "y"}),
    "R5": (("q", None, None), {"q"}),
    "R6": (("a", None, "a"), {"a"}),
}


@pytest.fixture(scope="module")
def store(module_database_url: str) -> Iterator[Storage]:
    with migrated_storage(module_database_url, NOW) as filled:
        _fill(filled)
        yield filled


def _fill(store: Storage) -> None:
    with store.history.session() as s:
        ids = {}
        for repo in (REPO, OTHER):
            for name, parent in PARENTS.items():
                if repo == OTHER and name not in ("a", "b", "c"):
                    continue
                row = Revision(repo_id=repo, sha=sha(name), parent_sha=sha(parent) if parent else None, committed_at=NOW,
                               ingested_at=NOW, authors=[])
                s.add(row)
                s.flush()
                ids[(repo, name)] = row.id
        rows = [(REPO, rid, *events) for rid, (events, _) in CASES.items()]
        rows += [(REPO, "W", "a", None, None, True), (OTHER, "O1", "b", None, None), (OTHER, "O2", "a", "c", None)]
        for repo, rid, introduced, fixed, last, *withdrawn in rows:
            doc = record(rid, introduced, fixed, last, withdrawn=bool(withdrawn))
            s.add(OwnAdvisory(id=rid, repo_id=repo, revision_id=ids[(repo, introduced)], sha=sha(introduced), class_id="x",
                              severity="medium", record=doc, published_at=NOW, modified_at=NOW,
                              fixed_sha=sha(fixed) if fixed else None, **own_columns(doc)))
        s.commit()


@pytest.mark.parametrize("at", sorted(PARENTS))
def test_each_commit_is_held_by_the_records_whose_range_holds_it(store: Storage, at: str) -> None:
    """Introduced at or before, not fixed at or before, not past a last_affected; withdrawn never; ordered by id."""
    (found,) = store.osv_index.matching([Ask(REPO, sha(at), 100)])
    assert [r.id for r in found] == sorted(rid for rid, (_, held) in CASES.items() if at in held)


def test_a_batch_is_answered_per_ask_in_order(store: Storage) -> None:
    """Many asks at once, each its own answer; a commit asked without a repo is placed in every repo holding it
    (by repo, then id); a repo without a commit lists all its records; an unknown commit or a limit of 0 finds none."""
    asks = [Ask(REPO, sha("d"), 100), Ask(None, sha("c"), 100), Ask(OTHER, None, 100), Ask(REPO, sha("zz"), 100),
            Ask(REPO, sha("c"), 0), Ask(REPO, sha("c"), 2), Ask(None, "f" * 40, 100), Ask(REPO, None, 100)]
    found = [[r.id for r in rows] for rows in store.osv_index.matching(asks)]
    assert found[0] == ["R1", "R3"]
    assert found[1] == ["O1", "R1", "R2", "R3", "R4"]  # org/copy before org/model
    assert found[2] == ["O1", "O2"]
    assert found[3] == found[4] == found[6] == []
    assert found[5] == ["R1", "R2"]
    assert found[7] == sorted(CASES)


def test_a_row_carries_its_range(store: Storage) -> None:
    """What the row holds is the record's own range: introduced, then fixed or last_affected."""
    (found,) = store.osv_index.matching([Ask(REPO, None, 100)])
    by_id = {r.id: r for r in found}
    assert by_id["R2"].events == [{"introduced": sha("b")}, {"fixed": sha("d")}]
    assert by_id["R4"].events == [{"introduced": sha("b")}, {"last_affected": sha("c")}]
    assert by_id["R1"].modified == "2026-12-01T00:00:00Z" and not by_id["R1"].withdrawn


def test_a_parent_loop_in_hand_edited_data_does_not_hang(database_url: str) -> None:
    """Two revisions naming each other as parent (never written by the ingest): the walk ends and answers."""
    with migrated_storage(database_url, NOW) as store:
        with store.history.session() as s:
            for name, parent in (("a", "b"), ("b", "a")):
                s.add(Revision(repo_id=REPO, sha=sha(name), parent_sha=sha(parent), committed_at=NOW, ingested_at=NOW, authors=[]))
            s.flush()
            revision_id = s.exec(select(Revision.id)).first()
            doc = record("L", "a")
            s.add(OwnAdvisory(id="L", repo_id=REPO, revision_id=revision_id, sha=sha("a"), class_id="x", severity="medium",
                              record=doc, published_at=NOW, modified_at=NOW, **own_columns(doc)))
            s.commit()
        (found,) = store.osv_index.matching([Ask(REPO, sha("b"), 10)])
        assert [r.id for r in found] == ["L"]


def test_the_migration_copies_each_stored_record_into_its_row(empty_database_url: str) -> None:
    """A database from before the match columns: upgrading fills `modified`, `withdrawn` and `last_affected_sha` from
    each stored record, and matching reads them."""
    import sqlalchemy as sa
    from alembic import command

    from storage.db import alembic_config, create_db_engine, migrate

    engine = create_db_engine(empty_database_url)
    try:
        command.upgrade(alembic_config(engine), "0019")
        docs = [record("B1", "b", last="c"), record("B2", "b", withdrawn=True)]
        with engine.begin() as conn:
            for name, parent in (("a", None), ("b", "a"), ("c", "b"), ("d", "c")):
                conn.execute(sa.text("INSERT INTO revision (repo_id, sha, parent_sha, branch, committed_at, title, message, "
                                     "authors, ingested_at, is_baseline, file_count) VALUES (:r, :s, :p, 'main', :t, '', '', "
                                     "'[]', :t, false, 0)"), {"r": REPO, "s": sha(name), "p": sha(parent) if parent else None, "t": NOW})
            revision_id = conn.execute(sa.text("SELECT id FROM revision WHERE sha = :s"), {"s": sha("b")}).scalar_one()
            for doc in docs:
                conn.execute(sa.text("INSERT INTO own_advisory (id, repo_id, revision_id, sha, class_id, severity, record, "
                                     "published_at, modified_at) VALUES (:i, :r, :v, :s, 'x', 'medium', :d, :t, :t)"),
                             {"i": doc["id"], "r": REPO, "v": revision_id, "s": sha("b"), "d": json.dumps(doc), "t": NOW})
        migrate(engine)
        store = Storage(engine, clock=lambda: NOW)
        (listed,) = store.osv_index.matching([Ask(REPO, None, 10)])
        assert [(r.id, r.modified, r.last_affected_sha) for r in listed] == [("B1", "2026-12-01T00:00:00Z", sha("c"))]
        found = [[r.id for r in rows] for rows in store.osv_index.matching([Ask(REPO, sha(n), 10) for n in "abcd"])]
        assert found == [[], ["B1"], ["B1"], []]
    finally:
        engine.dispose()
