"""Own OSV records planted in a stored history, as the advisory check writes them (tracker/advisories/own.py
builds each record from a Change), for the OSV API, export and benchmark to read: real record shapes, rows
written in one transaction."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from storage.advisories import own_columns
from storage.front import Storage
from storage.models import OwnAdvisory
from tracker.advisories.own import ChangeView, osv_time, own_records

HUB = "https://huggingface.co"


def dangerous_pickle(path: str = "pytorch_model.bin") -> ChangeView:
    """A pickle added that imports os.system: the pickle-dangerous-import class."""
    return ChangeView(kind="weights", path=path, summary=f"{path} added: pickle imports os.system", severity="critical",
                      security=True, detail={"status": "added", "format": "pickle",
                                             "pickle_scan": {"verdict": "dangerous", "callables": ["os.system"]}})


def custom_code(path: str = "modeling_x.py") -> ChangeView:
    return ChangeView(kind="custom_code", path=path, summary=f"{path} added", severity="critical", security=True,
                      detail={"status": "added"})


@dataclass(frozen=True)
class Planted:
    id: str
    repo_id: str
    sha: str
    fixed_sha: str | None
    withdrawn: bool
    record: dict[str, Any]


def record_for(repo_id: str, sha: str, change: ChangeView, *, at: datetime, fixed_sha: str | None = None,
               withdrawn: bool = False, hub_url: str = HUB, salt: str = "") -> dict[str, Any]:
    """The record own.py writes for `change` at `sha`, closed at `fixed_sha` and withdrawn as asked."""
    view = change if not salt else ChangeView(change.kind, f"{salt}/{change.path}", change.summary, change.severity,
                                              change.security, change.detail)
    (record,) = own_records(repo_id, sha, [view], hub_url=hub_url, published_at=at)
    record = copy.deepcopy(record)
    if salt:  # a distinct id per planted record of one class and commit
        record["id"] = f"{record['id']}-{salt}"
    if fixed_sha:
        record["affected"][0]["ranges"][0]["events"].append({"fixed": fixed_sha})
        record["database_specific"]["hubwatch"]["fixed_sha"] = fixed_sha
    if withdrawn:
        record["withdrawn"] = osv_time(at)
    return record


def plant(store: Storage, records: Iterable[dict[str, Any]], revision_ids: dict[tuple[str, str], int],
          modified_at: datetime | None = None) -> list[Planted]:
    """Write each record as an own advisory row of the revision it was introduced at."""
    planted = []
    with store.advisories.session() as s:
        for record in records:
            ours = record["database_specific"]["hubwatch"]
            repo_id, sha = ours["repo_id"], ours["introduced_sha"]
            when = modified_at or datetime.fromisoformat(record["modified"].replace("Z", "+00:00"))
            s.add(OwnAdvisory(id=record["id"], repo_id=repo_id, revision_id=revision_ids[(repo_id, sha)], sha=sha,
                              class_id=ours["class"], severity=ours["severity"], record=record, published_at=when,
                              modified_at=when, fixed_sha=ours.get("fixed_sha"), **own_columns(record)))
            planted.append(Planted(record["id"], repo_id, sha, ours.get("fixed_sha"), bool(record.get("withdrawn")), record))
        s.commit()
    return planted


def at(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp).replace(tzinfo=UTC)
