"""Change detection by listing: one pass over the Hub's models sorted by last modification tells which
watched repos moved; only those get the full per-repo ingest.

A pass reads pages (1,000 models each on the Hub) newest first and stops at the previous pass's
high-water mark (the newest lastModified it saw, and the repos listed at exactly that time), stored
per scope in the database: "*" for every model (the individually watched repos), "author:ORG" for an
org or user followed with `watch add 'ORG/*'` (whose new models become watches of their own here).
Only the Hub's timestamps are compared, never our clock, so a skewed local clock cannot hide a move.

What a listing cannot promise (a page that repeats or skips entries, a cursor that loops, a sha the
repo's own model info does not confirm, a private or renamed repo) is caught by the slow per-repo
reconcile ([poll] reconcile_interval) and by the ingest itself: a poll ingests only commits it has
not stored, so a repo polled twice (listing, reconcile, Hub webhook) is never ingested twice.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import structlog

from storage.listing_state import ALL_MODELS, AUTHOR_SOURCE, ListingStore, author_scope
from storage.models import Watch
from storage.sessions import Clock, utc_now
from tracker.budget import WINDOW_S
from tracker.config import Settings, parse_interval
from tracker.errors import HubError
from tracker.hub import HubClient, ListedModel

if TYPE_CHECKING:
    from tracker.app import App
    from tracker.budget import RequestBudget

log = structlog.get_logger(__name__)

PAGE = 1000  # the Hub's page of /api/models
MAX_ENTRIES = 100_000  # a pass that has not met its mark after this many models is cut (and retried)
RECONCILE_DEFAULT_S = 86_400  # [poll] reconcile_interval = "auto": a day...
RECONCILE_REQUESTS_PER_MIN = 1  # ...or longer, so that reconciling costs at most this
DEFAULT_BRANCH = "main"  # the listing's sha is the default branch's; other branches are polled when listed


@dataclass
class ScopePass:
    """What one pass over one scope found. `moved`: (repo_id, branch) to poll now; `complete`: it reached
    its mark (or the end of the listing) and the mark moved; else `error` says why it was cut."""

    scope: str
    listed: int = 0
    repeated: int = 0
    moved: list[tuple[str, str]] = field(default_factory=list)
    discovered: list[str] = field(default_factory=list)
    complete: bool = False
    error: str | None = None


@dataclass(frozen=True)
class FollowOutcome:
    """`watch add 'ORG/*'`: how many models the Hub lists for the author now, and the watches added."""

    author: str
    listed: int
    added: list[str]


def follow_author(
    listings: ListingStore, author: str, interval_s: int, models: list[ListedModel] | None, source: str = "cli"
) -> FollowOutcome:
    """Follow every model of `author`. With `models` (its listing now, all pages) each becomes a watch
    (its first poll is its baseline) and the scope's mark is set, so the next pass costs one request.
    With None (not checked), the first listing pass finds them. Raises WatchExists when followed."""
    listings.add_author_watch(author, interval_s, source)
    added = listings.add_discovered_watches(author, [m.repo_id for m in models or []])
    if models is not None:
        newest, ids = _newest(models)
        listings.record_listing_pass(author_scope(author), newest, ids)
        listings.mark_author_listed(author, listings.clock())
    return FollowOutcome(author, len(models or []), added)


class ListingPass:
    """One listing pass over every scope; `run` returns what to poll (the caller polls it)."""

    def __init__(
        self,
        listings: ListingStore,
        hub: HubClient,
        clock: Clock = utc_now,
        max_entries: int = MAX_ENTRIES,
        first_entries: int = PAGE,
    ) -> None:
        self._first_entries = first_entries
        self._listings = listings
        self._hub = hub
        self._clock = clock
        self._max_entries = max_entries

    def run(self, include_all: bool = True, on_moved: Callable[[list[tuple[str, str]]], object] | None = None) -> list[ScopePass]:
        """A pass per followed author, then (with `include_all`) one over every model for the other
        watches (skipped when there are none). One summary log line. `on_moved` gets each scope's moved
        watches before its mark moves past them: a pass cut there (a killed worker) leaves the mark where it
        was, and the next pass lists them again."""
        authors = [a.author for a in self._listings.list_author_watches()]
        followed = set(authors)
        passes = [self._scan(author_scope(author), author, followed, on_moved) for author in authors]
        if include_all and self._listings.watch_count(except_authors=followed):
            passes.append(self._scan(ALL_MODELS, None, followed, on_moved))
        log.info(
            "listing_pass_finished",
            scopes=len(passes),
            listed=sum(p.listed for p in passes),
            moved=sum(len(p.moved) for p in passes),
            discovered=sum(len(p.discovered) for p in passes),
            cut=[p.scope for p in passes if not p.complete],
        )
        return passes

    def _scan(self, scope: str, author: str | None, followed: set[str],
              on_moved: Callable[[list[tuple[str, str]]], object] | None = None) -> ScopePass:
        """One scope's pass. The watches looked at are those of the repos it listed (of that author, or,
        for every model, of the authors not followed)."""
        state = self._listings.listing_state(scope)
        mark = state.high_water_at if state else None
        result = ScopePass(scope)
        seen: dict[str, ListedModel] = {}
        # With no mark, the listing of every model is read one Hub page deep (it holds millions): what
        # moved before is the watches' own first polls' business. An author's listing is read whole.
        limit = self._first_entries if mark is None and author is None else self._max_entries
        repeats_in_row = 0
        try:
            for item in self._hub.list_models_by_modification(author):
                if item.repo_id in seen:
                    result.repeated += 1
                    repeats_in_row += 1
                    if repeats_in_row >= PAGE:
                        result.error = f"the listing repeats itself (a cursor that loops?) after {len(seen)} models"
                        break
                    continue
                repeats_in_row = 0
                if mark is not None and item.last_modified is not None and item.last_modified < mark:
                    result.complete = True
                    break
                seen[item.repo_id] = item
                if len(seen) >= limit:
                    result.complete = mark is None and author is None
                    if not result.complete:
                        result.error = f"cut after {len(seen)} models without reaching the previous pass's mark"
                    break
            else:
                result.complete = True
        except HubError as err:
            result.error = str(err)
        result.listed = len(seen)
        watches = [w for w in self._listings.watches_of(seen) if author is not None or w.repo_id.split("/")[0] not in followed]
        self._moved(result, seen, watches)
        if author is not None and (result.complete or seen):
            result.discovered = self._listings.add_discovered_watches(author, seen)
            result.moved += [(repo_id, DEFAULT_BRANCH) for repo_id in result.discovered]
        if on_moved is not None and result.moved:
            on_moved(result.moved)
        newest, ids = _newest(seen.values())
        if result.complete:
            self._listings.record_listing_pass(scope, newest or mark, ids if newest else [])
            if author is not None:
                self._listings.mark_author_listed(author, self._clock())
        else:
            self._listings.record_listing_pass(scope, None, [], error=result.error)
            log.warning("listing_pass_cut", scope=scope, error=result.error, listed=result.listed)
        if result.repeated:
            log.warning("listing_repeated_entries", scope=scope, repeated=result.repeated)
        return result

    @staticmethod
    def _moved(result: ScopePass, seen: dict[str, ListedModel], watches: Iterable[Watch]) -> None:
        """Watches whose repo was listed with a commit they have not seen (their default branch), or
        listed at all (another branch: the listing cannot tell which branch moved)."""
        for watch in watches:
            item = seen.get(watch.repo_id)
            if item is None:
                continue
            if watch.branch == DEFAULT_BRANCH and watch.last_sha is not None and item.sha == watch.last_sha:
                continue
            result.moved.append((watch.repo_id, watch.branch))


class ListingJob:
    """The daemon's listing: whether it covers the watch list, its periodic pass (moved watches are handed
    to `trigger`), and the intervals it and the request budget give each watch (the scheduler's plan).

    [poll] listing = "auto" turns the listing of every model on from listing_min_watches watches: below,
    per-repo polling costs less than a pass each listing_interval (see README, "Change detection by
    listing"). Followed authors (ORG/*) are always listed: it is the only way to see their new models."""

    def __init__(
        self,
        settings: Settings,
        listings: ListingStore,
        hub: HubClient,
        trigger: Callable[[str, str], object],
        budget: RequestBudget | None = None,
        clock: Clock = utc_now,
    ) -> None:
        poll = settings.poll
        self.mode, self.min_watches = poll.listing, poll.listing_min_watches
        self.interval_s = parse_interval(poll.listing_interval, "[poll] listing_interval")
        # None: auto, from the number of watches the listing covers (`reconcile_interval_s`)
        self.reconcile_s = None if poll.reconcile_interval == "auto" else parse_interval(
            poll.reconcile_interval, "[poll] reconcile_interval")
        self._listings, self._trigger, self._budget = listings, trigger, budget
        self._pass = ListingPass(listings, hub, clock)

    def covers(self, watch_count: int) -> bool:
        """Whether the listing of every model stands in for per-repo polling of `watch_count` watches."""
        return self.mode == "on" or (self.mode == "auto" and watch_count >= self.min_watches)

    def __call__(self) -> list[ScopePass]:
        """One pass (when there is anything to list), then a poll of each watch that moved, and of each
        watch it covers whose last poll failed and is due for its retry (the listing will not report that
        move again). A failing database or Hub is logged, never raised: the next pass tries again."""
        try:
            include_all = self.covers(self._listings.watch_count())
            if not include_all and not self._listings.list_author_watches():
                return []
            passes = self._pass.run(include_all, on_moved=self._poll_moved)
        except Exception as err:  # noqa: BLE001 - the daemon's periodic job: one line, then the next pass
            log.error("listing_pass_failed", error=f"{type(err).__name__}: {err}")
            return []
        wanted: list[tuple[str, str]] = []
        try:
            followed = {scope.scope.removeprefix("author:") for scope in passes if scope.scope != ALL_MODELS}
            wanted = [(r, b) for r, b in self._listings.watches_to_retry() if include_all or r.split("/")[0] in followed]
        except Exception as err:  # noqa: BLE001 - as above: the moves found are still polled
            log.error("listing_retries_failed", error=f"{type(err).__name__}: {err}")
        polled = {move for scope in passes for move in scope.moved}
        self._poll_moved([move for move in wanted if move not in polled])
        return passes

    def _poll_moved(self, moved: list[tuple[str, str]]) -> None:
        """Hand moved watches to the scheduler (with several workers: made due in the database, so they are
        polled even if this worker dies next)."""
        for repo_id, branch in dict.fromkeys(moved):
            self._trigger(repo_id, branch)

    def reconcile_interval_s(self, covered: int) -> int:
        """How often a watch the listing covers is polled on its own: the setting, or with "auto" a day,
        stretched from 1,440 covered watches on so that reconciling them costs one request a minute at most
        (10,000 watches: about a week)."""
        if self.reconcile_s is not None:
            return self.reconcile_s
        return max(RECONCILE_DEFAULT_S, math.ceil(covered * 60 / RECONCILE_REQUESTS_PER_MIN))

    def plan(self, watches: Sequence[Any]) -> dict[str, int]:
        """Each watch's interval ("repo@branch" -> seconds): the reconcile interval when a listing covers
        it (every model's, or its followed author's; never shorter than its own), then every interval
        stretched alike when the total, listing passes included, needs more than the budget holds."""
        listing = self.covers(len(watches))
        try:
            followed = {a.author for a in self._listings.list_author_watches()}
        except Exception as err:  # noqa: BLE001 - a failing database leaves the plan to the watch list alone
            log.error("listing_plan_failed", error=f"{type(err).__name__}: {err}")
            followed = set()
        covered = [listing or w.repo_id.split("/")[0] in followed for w in watches]
        reconcile_s = self.reconcile_interval_s(sum(covered))
        own = {
            f"{w.repo_id}@{w.branch}": max(w.interval_s, reconcile_s) if listed else w.interval_s
            for w, listed in zip(watches, covered, strict=True)
        }
        passes = len(followed) + (1 if listing else 0)
        needed = sum(WINDOW_S / s for s in own.values()) + passes * WINDOW_S / self.interval_s
        factor = self._budget.stretch_factor(needed) if self._budget is not None else 1.0
        return {job_id: math.ceil(s * factor) for job_id, s in own.items()}


def _newest(models: Iterable[ListedModel]) -> tuple[datetime | None, list[str]]:
    """The newest lastModified among `models` and the repos listed at exactly that time."""
    newest: datetime | None = None
    ids: list[str] = []
    for model in models:
        if model.last_modified is None:
            continue
        if newest is None or model.last_modified > newest:
            newest, ids = model.last_modified, [model.repo_id]
        elif model.last_modified == newest:
            ids.append(model.repo_id)
    return newest, ids


__all__ = ["AUTHOR_SOURCE", "FollowOutcome", "ListingJob", "ListingPass", "ScopePass", "follow_author"]


def start_listing(app: App, trigger: Callable[[str, str], object]) -> ListingJob:
    """The daemon's listing job with the request budget installed on the Hub client: shared through the
    database with every other process on it (its state is what `tracker.budget.budget_state()` reports)."""
    from tracker.budget import RequestBudget, set_process_budget
    from tracker.hub import install_budget

    hub_settings = app.settings.hub
    shared = app.store.budget  # one budget for every process on this database
    budget = RequestBudget(hub_settings.api_requests_per_5min, hub_settings.resolve_requests_per_5min, shared=shared.claim)
    install_budget(budget, hub_settings.endpoint)
    set_process_budget(budget)
    listings = app.store.listing
    return ListingJob(app.settings, listings, app.hub, trigger, budget, app.clock)
