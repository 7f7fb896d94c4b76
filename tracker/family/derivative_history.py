"""A followed derivative's own history, at its base's budget, without a watch row: the family pass
(tracker/family/derivatives.py) stores its baseline at the head it first checks from what that check read (the file
list, the part files, one GGUF header; every other file a watch would read is marked not read), and once its
head moves, its new commits go through the watch's pipeline (`Ingestor.ingest_since`), oldest first, one write
each. So `history`, `show`, `diff`, its feed and webhooks work as for a watched repo. A derivative the user
also watches is left to the watch's own polls.

Requests made here count in the pass's report (`counting_requests`): the budget plans a family at what its
last pass cost. Whatever fails an ingest is raised as NotIngested (gone and gated as they are): the pass names
the derivative and keeps its last head, so the next pass resumes after the last revision stored.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TypeVar

import structlog

from storage.health import write_failure
from tracker.errors import HubwatchError, RepoGated, RepoGone
from tracker.formats.registry import scanner_for
from tracker.hub.client import CommitInfo, RepoHead, counting_requests
from tracker.pipeline.ingest import IngestTarget
from tracker.pipeline.snapshot_io import FetchedSnapshot
from tracker.revision.classify import is_safetensors, should_download
from tracker.revision.snapshot import Snapshot
from tracker.revision.stored import load_snapshot

if TYPE_CHECKING:
    from tracker.hub.client import CardHead
    from tracker.pipeline.ingest import Ingestor

T = TypeVar("T")
NOT_READ = "not read: derivative followed at its base's budget (watch it to read every file)"
BASELINE_TITLE = "(the head when its family was first checked; commit not read)"


class NotIngested(Exception):
    """A derivative's revisions could not be stored this pass (what was stored before stays)."""


def counted(endpoint: str, add: Callable[[int], None], run: Callable[[], T]) -> T:
    """`run()`, its requests to the Hub at `endpoint` given to `add`; a failure other than gone or gated becomes
    NotIngested."""
    with counting_requests(endpoint) as requests:
        try:
            return run()
        except (RepoGone, RepoGated, NotIngested):
            raise
        except HubwatchError as err:
            raise NotIngested(str(err)) from err
        except Exception as err:
            reason = write_failure(err)
            if reason is None:
                structlog.get_logger(__name__).error("derivative_ingest_crashed", error=f"{type(err).__name__}: {err}"[:300],
                                                     exc_info=err)
                raise NotIngested(f"internal error: {type(err).__name__}: {err}"[:500]) from err
            raise NotIngested(f"storage failing: {reason}") from err
        finally:
            add(requests[0])


def has_history(ingestor: Ingestor, repo_id: str) -> bool:
    """Whether the derivative has a stored revision to continue from."""
    return bool(ingestor.store.history.list_revisions(repo_id, limit=1))


def owned_by_watch(ingestor: Ingestor, repo_id: str) -> bool:
    """The user watches it (any branch): its history is the watch's."""
    return ingestor.store.watches.get_watch(repo_id) is not None


def store_baseline(ingestor: Ingestor, repo_id: str, head: CardHead, read: FetchedSnapshot) -> None:
    """The derivative's baseline at `head`, from what its check read: nothing more is asked of the Hub."""
    snapshot = read.snapshot
    for path in snapshot.files:
        unread = (should_download(path) and path not in snapshot.contents) or is_safetensors(path) or (
            scanner_for(path) is not None and path not in snapshot.scans)
        if unread:
            snapshot.unavailable[path] = NOT_READ
    when = head.last_modified or datetime.now(UTC)
    commit = CommitInfo(head.sha, BASELINE_TITLE, "", (), when)
    ingestor.ingest_commit(IngestTarget(repo_id), _repo_head(head), commit, read)


def catch_up(ingestor: Ingestor, repo_id: str, head: CardHead) -> Snapshot:
    """Ingest the derivative's commits up to `head`; its snapshot there (read back when stored already)."""
    _, snapshot = ingestor.ingest_since(IngestTarget(repo_id), _repo_head(head))
    if snapshot is not None:
        return snapshot
    revision = ingestor.store.history.find_revision(repo_id, head.sha)
    return load_snapshot(ingestor.store, revision, ingestor.settings.scan.rules)


def _repo_head(head: CardHead) -> RepoHead:
    return RepoHead(sha=head.sha, gated=head.gated, last_modified=head.last_modified)
