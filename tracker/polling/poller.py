"""One watch's poll as `hubwatch poll` and both schedulers run it: the database read first (no Hub request
while it cannot be written: the storage gate), a watch backing off after errors left alone, and the
unchanged watch kept for the next poll's cheap path."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from storage.errors import StorageError
from storage.health import probe_write, write_failure
from storage.sessions import Clock
from tracker.config import PollSettings
from tracker.errors import NotWatched
from tracker.polling.outcome import PollOutcome
from tracker.polling.storage_gate import StorageGate

if TYPE_CHECKING:
    from storage.front import Storage
    from storage.models import Watch
    from storage.watches import ScheduledWatch

T = TypeVar("T")


class Ingesting(Protocol):
    """What polls a watch: the pipeline's Ingestor (tracker/pipeline/ingest.py), handed in from above."""

    def poll(self, watch: Watch, *, backfill: int | None = None, cached: bool = False,
             head_sha: str | None = None) -> PollOutcome: ...


class Polled(Protocol):
    """What a poll needs (tracker/cli/app.py's App builds them on first use): the store, the ingest, and
    the check of a base's followed derivatives after its own poll (tracker/family/derivatives.py)."""

    @property
    def store(self) -> Storage: ...

    @property
    def ingestor(self) -> Ingesting: ...

    def follow_derivatives(self, repo_id: str) -> None: ...


FOLLOWED_BASES_TTL_S = 30.0


class Poller:
    """Polls the watches through the ingestor, behind the storage gate."""

    def __init__(self, app: Polled, poll: PollSettings, clock: Clock) -> None:
        self._app, self._clock = app, clock
        self.gate = StorageGate(
            lambda: probe_write(app.store.engine),
            clock,
            poll.retry_min_s,
            poll.retry_max_s,
        )
        # (repo_id, branch) -> the watch as its last (unchanged) poll left it, for the next poll's cheap path.
        self._unchanged_watches: dict[tuple[str, str], Watch] = {}
        # The bases whose derivatives are followed, read at most every FOLLOWED_BASES_TTL_S: an unchanged poll
        # stays one UPDATE, and a family followed meanwhile is picked up within that time.
        self._followed_bases: tuple[float, frozenset[str]] | None = None

    def watches_for(self, repo_ids: Iterable[str]) -> list[Watch]:
        """The watches of the named repos (all watches when none are named)."""
        watches = self._app.store.watches.list_watches()
        wanted = list(repo_ids)
        if not wanted:
            return watches
        out = []
        for repo_id in wanted:
            matched = [w for w in watches if w.repo_id == repo_id]
            if not matched:
                new = self._app.store.read_model.renamed_to(repo_id)
                if new is not None:
                    raise NotWatched(f"{repo_id} is not watched: it was renamed to {new} on the Hub and its watch moved "
                                     f"there (hubwatch poll {new})")
                raise NotWatched(f"{repo_id} is not watched (add it with: hubwatch watch add {repo_id})")
            out.extend(matched)
        return out

    def poll(self, repo_ids: Iterable[str] = (), backfill: int | None = None) -> list[PollOutcome]:
        """One ingest pass over the named watches (all when none are named); one summary log line.
        While the database cannot be written no Hub request is made: those watches fail unpolled."""
        watches = self._reading(lambda: self.watches_for(repo_ids))
        outcomes = []
        for watch in watches:
            outcome = self._poll_watch(watch, backfill)
            if outcome is None:
                error = f"not polled: storage failing: {self.gate.state()['error']}"
                outcome = PollOutcome(watch.repo_id, watch.branch, "failed", error=error, storage_error=error)
            outcomes.append(outcome)
        _log().info(
            "poll_finished",
            repos=len(outcomes),
            failed=sum(o.failed for o in outcomes),
            revisions=sum(len(o.revisions) for o in outcomes),
        )
        return outcomes

    def poll_if_due(self, repo_id: str, branch: str, head_sha: str | None = None) -> PollOutcome | None:
        """The scheduler's job: poll unless the watch is backing off after errors or the database cannot
        be written (None: not polled). A fault of the world is recorded and logged, never raised.
        `head_sha`: the branch's head as a Hub webhook named it (Ingestor.poll checks it before using it).

        After an unchanged poll the watch is kept here: the next one reads nothing and writes one guarded
        UPDATE (Ingestor.poll `cached`); any other outcome drops the copy, and the next poll reads the row."""
        key = (repo_id, branch)
        watch = self._unchanged_watches.pop(key, None)
        cached = watch is not None
        if watch is None:
            try:
                watch = self._reading(lambda: self._app.store.watches.get_watch(repo_id, branch))
            except StorageError as err:
                self.gate.failed(str(err))
                return None
        if watch is None:
            return None
        if watch.next_retry_at is not None and watch.next_retry_at > self._clock():
            _log().info("repo_poll_deferred", repo_id=repo_id, branch=branch, until=watch.next_retry_at.isoformat())
            return None
        outcome = self._poll_watch(watch, None, cached, head_sha)
        if outcome is not None and outcome.stamped:
            self._unchanged_watches[key] = watch
        return outcome

    def scheduled_watches(self) -> list[ScheduledWatch] | None:
        """Every watch as the scheduler needs it (no ORM rows); None while the database cannot be read
        (jobs stay as they are)."""
        try:
            return self._reading(self._app.store.watches.watch_schedule)
        except StorageError as err:
            self.gate.failed(str(err))
            return None

    def watch_list_version(self) -> tuple[Any, ...] | None:
        """The watch list's fingerprint (one aggregate query), for the scheduler's cheap change check;
        None while the database cannot be read."""
        try:
            return self._reading(self._app.store.watches.watch_list_version)
        except StorageError as err:
            self.gate.failed(str(err))
            return None

    def _poll_watch(self, watch: Watch, backfill: int | None, cached: bool = False,
                    head_sha: str | None = None) -> PollOutcome | None:
        """Poll one watch if the database takes writes (None when it does not: no Hub request made)."""
        gate = self.gate
        if not gate.allows_polling():
            return None
        outcome = self._app.ingestor.poll(watch, backfill=backfill, cached=cached, head_sha=head_sha)
        if outcome.storage_error is not None:
            gate.failed(outcome.storage_error)
        elif not outcome.failed:
            gate.succeeded()
            if watch.repo_id in self._bases_followed():
                self._follow_derivatives(watch.repo_id)
        return outcome

    def _bases_followed(self) -> frozenset[str]:
        now = self._clock().timestamp()
        if self._followed_bases is None or now - self._followed_bases[0] >= FOLLOWED_BASES_TTL_S:
            try:
                bases = frozenset(f.base_repo_id for f in self._app.store.derivatives.follows())
            except StorageError as err:
                _log().warning("derivatives_unreadable", error=str(err)[:300])
                return frozenset()
            self._followed_bases = (now, bases)
        return self._followed_bases[1]

    def _follow_derivatives(self, repo_id: str) -> None:
        """The base's followed derivatives, checked on its poll schedule (nothing when none are followed)."""
        try:
            self._app.follow_derivatives(repo_id)
        except Exception as err:  # noqa: BLE001 - a failed family pass never fails the base's own poll
            _log().warning("derivatives_failed", repo_id=repo_id, error=f"{type(err).__name__}: {err}"[:300])

    @staticmethod
    def _reading(read: Callable[[], T]) -> T:
        """`read()`, with a database that cannot be read reported as StorageError (no traceback)."""
        try:
            return read()
        except Exception as err:  # classified: only a failing database becomes StorageError
            reason = write_failure(err)
            if reason is None:
                raise
            raise StorageError(f"the database cannot be used: {reason}") from err


def _log() -> Any:
    """structlog's logger, imported with the polling stack: commands that only read never load it."""
    import structlog

    return structlog.get_logger(__name__)
