"""Change detection by listing: one pass over the Hub's models sorted by last modification tells which
watched repos moved; only those get the full per-repo ingest.

A pass reads pages (1,000 models each on the Hub) newest first and stops at the previous pass's
high-water mark (the newest lastModified it saw, and the repos listed at exactly that time), stored
per scope in the database: "*" for every model (the individually watched repos), "author:ORG" for an
org or user followed with `watch add 'ORG/*'` (whose new models become watches of their own here).
Only the Hub's timestamps are compared, never our clock, so a skewed local clock cannot hide a move.

Datasets: an org's datasets followed with `watch add 'ORG/*' --type dataset` are the author `datasets/ORG` (the
prefix of their keys, `datasets/ORG/NAME`), read from the Hub's dataset listing (`/api/datasets?author=ORG`) in a
pass of their own, never from the listing of every model. Datasets watched on their own are read from the listing
of every dataset (`/api/datasets`, the scope "datasets:*"), a pass made only while there are some, as the listing
of every model is for models.

What a listing cannot promise (a page that repeats or skips entries, a cursor that loops, a sha the
repo's own model info does not confirm, a private or renamed repo) is caught by the slow per-repo
reconcile ([poll] reconcile_interval) and by the ingest itself: a poll ingests only commits it has
not stored, so a repo polled twice (listing, reconcile, Hub webhook) is never ingested twice.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from storage.listing_state import ALL_DATASETS, ALL_MODELS, AUTHOR_SOURCE, ListingStore, author_scope
from storage.models import AuthorWatch, ListingState, Watch
from storage.sessions import Clock, utc_now
from tracker.config import Settings
from tracker.errors import HubError
from tracker.polling.budget import WINDOW_S
from tracker.polling.pass_choice import AuthorCost, HubCost, choose_passes, pages_of, quiet_cadence_s

if TYPE_CHECKING:
    from storage.derivatives import DerivativeStore
    from tracker.polling.budget import RequestBudget

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class ListedModel:
    """One entry of the Hub's model listing: the repo, its default branch's commit, when it last moved."""

    repo_id: str
    sha: str | None
    last_modified: datetime | None


class ModelListing(Protocol):
    """The Hub's model (or dataset) listing, newest modification first (tracker/hub/client.py's HubClient, handed
    in)."""

    def list_models_by_modification(self, author: str | None = None, repo_type: str = "model") -> Iterator[ListedModel]: ...


DATASET_AUTHOR_PREFIX = "datasets/"  # a followed org's datasets: the author `datasets/ORG`


def owner_of(repo_id: str) -> str:
    """The author a watch's repo belongs to as follows are keyed: `org` of a model `org/name`, `datasets/org` of a
    dataset `datasets/org/name`."""
    return repo_id.rpartition("/")[0]


def is_dataset_author(author: str) -> bool:
    return author.startswith(DATASET_AUTHOR_PREFIX)


def _listing_of(author: str | None, scope: str = ALL_MODELS) -> tuple[str | None, str]:
    """What to ask the Hub's listing for a scope: (author, repo type)."""
    if scope == ALL_DATASETS:
        return None, "dataset"
    if author is not None and is_dataset_author(author):
        return author[len(DATASET_AUTHOR_PREFIX):], "dataset"
    return author, "model"

PAGE = 1000  # the Hub's page of /api/models
MAX_ENTRIES = 100_000  # a pass that has not met its mark after this many models is cut (and retried)
RECONCILE_DEFAULT_S = 86_400  # [poll] reconcile_interval = "auto": a day...
RECONCILE_REQUESTS_PER_MIN = 1  # ...or longer, so that reconciling costs at most this
DEFAULT_BRANCH = "main"  # the listing's sha is the default branch's; other branches are polled when listed
FRESH_AFTER_ROUNDS = 3  # a pass over every model idle this many (stretched) intervals starts afresh, one page deep


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
    via: str | None = None  # an author read from the pass over every model ("*"), not listed on its own
    pages: int = 0  # Hub pages read (entries / 1,000, rounded up; at least one for a request made)


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
        hub: ModelListing,
        clock: Clock = utc_now,
        max_entries: int = MAX_ENTRIES,
        first_entries: int = PAGE,
    ) -> None:
        self._first_entries = first_entries
        self._listings = listings
        self._hub = hub
        self._clock = clock
        self._max_entries = max_entries

    def run(
        self,
        include_all: bool = True,
        on_moved: Callable[[list[tuple[str, str]]], object] | None = None,
        due: Collection[str] | None = None,
        fresh_after_s: float | None = None,
    ) -> list[ScopePass]:
        """One round: the pass over every model, when it lists the other watches (`include_all`) or costs less
        than the followed authors' own passes (`choose_passes`), with the authors it covers read from it; then
        an own pass for each author it does not cover (or for those `due`, None: all, when per-author passes
        are cheaper). One summary log line. `on_moved` gets each pass's moved watches before its mark moves
        past them: a pass cut there (a killed worker) leaves the mark where it was, and the next pass lists
        them again. `fresh_after_s`: a pass over every model idle longer starts afresh (only when it lists
        followed authors alone: their own passes cover the gap)."""
        every = self._listings.list_author_watches()
        followed = {a.author for a in every}
        authors = [a for a in every if not is_dataset_author(a.author)]  # the listing of every model holds no dataset
        dataset_authors = [a.author for a in every if is_dataset_author(a.author) and (due is None or a.author in due)]
        others = include_all and self._listings.watch_count(except_authors=followed, datasets=False) > 0
        datasets_alone = include_all and self._listings.watch_count(except_authors=followed, datasets=True) > 0
        choice = choose_passes(*self.costs(authors, due, fresh_after_s, others), hub_needed=others)
        passes: list[ScopePass] = []
        covered: set[str] = set()
        if choice.hub:
            hub_pass, author_passes = self._scan_every_model(followed, set(choice.via_hub), others, choice.fresh, on_moved)
            passes += [hub_pass, *author_passes]
            covered = {p.scope.removeprefix("author:") for p in author_passes}
        own = [*choice.own, *(a for a in choice.via_hub if a not in covered), *dataset_authors]
        passes += [self._scan(author_scope(author), author, followed, on_moved) for author in own]
        if datasets_alone:  # the datasets watched on their own: the listing of every dataset
            passes.append(self._scan(ALL_DATASETS, None, followed, on_moved))
        log.info(
            "listing_pass_finished",
            scopes=len(passes),
            requests=sum(p.pages for p in passes),
            listed=sum(p.listed for p in passes),
            moved=sum(len(p.moved) for p in passes),
            discovered=sum(len(p.discovered) for p in passes),
            cut=[p.scope for p in passes if not p.complete],
            every_model=choice.hub,
            authors_via_every_model=len(covered),
            authors_own=len(own),
            choice=choice.reason,
        )
        return passes

    def costs(
        self, authors: Sequence[AuthorWatch], due: Collection[str] | None, fresh_after_s: float | None, others: bool
    ) -> tuple[list[AuthorCost], HubCost]:
        """What each pass cost last time, from the listing state: the followed authors' and the pass over every
        model's (resumable from its mark unless idle past `fresh_after_s` while it lists authors alone)."""
        states = {state.scope: state for state in self._listings.listing_states()}
        hub = states.get(ALL_MODELS)
        marked = hub is not None and hub.high_water_at is not None
        idle = (
            not others and fresh_after_s is not None and hub is not None and hub.last_pass_at is not None
            and (self._clock() - hub.last_pass_at).total_seconds() > fresh_after_s
        )
        hub_cost = HubCost(hub.pages if hub else 0, hub.last_pass_at if hub else None, resumable=marked and not idle)
        author_costs = [
            AuthorCost(a.author, _pages(states.get(author_scope(a.author))), a.last_listed_at, due is None or a.author in due)
            for a in authors
        ]
        return author_costs, hub_cost

    def _scan(self, scope: str, author: str | None, followed: set[str],
              on_moved: Callable[[list[tuple[str, str]]], object] | None = None) -> ScopePass:
        """One scope's pass. The watches looked at are those of the repos it listed (of that author, or,
        for every model or every dataset, of the authors not followed)."""
        started = self._clock()
        state = self._listings.listing_state(scope)
        mark = state.high_water_at if state else None
        result, seen = self._read(scope, author, mark)
        watches = [w for w in self._listings.watches_of(seen) if author is not None or owner_of(w.repo_id) not in followed]
        self._moved(result, seen, watches)
        if author is not None and (result.complete or seen):
            result.discovered = self._listings.add_discovered_watches(author, seen)
            result.moved += [(repo_id, DEFAULT_BRANCH) for repo_id in result.discovered]
        if on_moved is not None and result.moved:
            on_moved(result.moved)
        self._record(result, seen, mark)
        if result.complete and author is not None:
            self._listings.mark_author_listed(author, started)  # covered up to the pass's first page
        return result

    def _read(self, scope: str, author: str | None, mark: datetime | None) -> tuple[ScopePass, dict[str, ListedModel]]:
        """Read `author`'s listing (None: every model's) newest first back to `mark`: what was seen, and
        whether the pass is complete (or why it was cut)."""
        result = ScopePass(scope)
        seen: dict[str, ListedModel] = {}
        # With no mark, the listing of every model is read one Hub page deep (it holds millions): what
        # moved before is the watches' own first polls' business. An author's listing is read whole.
        limit = self._first_entries if mark is None and author is None else self._max_entries
        repeats_in_row = 0
        try:
            asked, repo_type = _listing_of(author, scope)
            listed = (self._hub.list_models_by_modification(asked, repo_type=repo_type) if repo_type != "model"
                      else self._hub.list_models_by_modification(asked))
            for item in listed:
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
        result.pages = max(1, math.ceil((len(seen) + result.repeated) / PAGE))
        return result, seen

    def _record(self, result: ScopePass, seen: dict[str, ListedModel], mark: datetime | None) -> ListingState:
        """The pass's new mark and pages (complete), or the reason it was cut (the mark stays)."""
        if result.repeated:
            log.warning("listing_repeated_entries", scope=result.scope, repeated=result.repeated)
        if result.complete:
            newest, ids = _newest(seen.values())
            return self._listings.record_listing_pass(result.scope, newest or mark, ids if newest else [], pages=result.pages)
        log.warning("listing_pass_cut", scope=result.scope, error=result.error, listed=result.listed)
        return self._listings.record_listing_pass(result.scope, None, [], error=result.error, pages=result.pages)

    def _scan_every_model(
        self, followed: set[str], via_hub: set[str], others: bool, fresh: bool,
        on_moved: Callable[[list[tuple[str, str]]], object] | None,
    ) -> tuple[ScopePass, list[ScopePass]]:
        """The pass over every model: the moves of the watches of authors not followed (with `others`), and,
        when it completes, a ScopePass per author in `via_hub` read from it (its moves, its new models, its
        mark moved, and it counts as listed as of this pass). `fresh`: from no mark, one page deep."""
        state = self._listings.listing_state(ALL_MODELS)
        mark = None if fresh or state is None else state.high_water_at
        result, seen = self._read(ALL_MODELS, None, mark)

        owner = owner_of

        wanted = [r for r in seen if owner(r) in via_hub or (others and owner(r) not in followed)] if result.complete else []
        if others and not result.complete:
            wanted = [r for r in seen if owner(r) not in followed]
        found = ScopePass("")
        self._moved(found, seen, self._listings.watches_of(wanted))
        result.moved = [m for m in found.moved if owner(m[0]) not in followed]
        authors: dict[str, ScopePass] = {}
        if result.complete:
            for author in sorted(via_hub):
                mine = {r: item for r, item in seen.items() if owner(r) == author}
                scope = ScopePass(author_scope(author), listed=len(mine), complete=True, via=ALL_MODELS)
                scope.moved = [m for m in found.moved if owner(m[0]) == author]
                scope.discovered = self._listings.add_discovered_watches(author, mine) if mine else []
                scope.moved += [(repo_id, DEFAULT_BRANCH) for repo_id in scope.discovered]
                authors[author] = scope
        moved = [m for p in [result, *authors.values()] for m in p.moved]
        if on_moved is not None and moved:
            on_moved(moved)
        recorded = self._record(result, seen, mark)
        if result.complete:
            for author, scope in authors.items():
                newest, ids = _newest(item for r, item in seen.items() if owner(r) == author)
                if newest is not None:
                    self._listings.record_listing_pass(scope.scope, newest, ids)
            # covered up to this pass: the next one reads back to its mark (see pass_choice.py)
            self._listings.mark_authors_listed(list(authors), recorded.last_pass_at or self._clock())
        return result, list(authors.values())

    @staticmethod
    def _moved(result: ScopePass, seen: dict[str, ListedModel], watches: Iterable[Watch]) -> None:
        """Watches whose repo was listed with a commit they have not seen (their default branch), or
        listed at all (another branch: the listing cannot tell which branch moved)."""
        for watch in watches:
            item = seen.get(watch.repo_id)
            if item is None:
                continue
            back = (watch.repo_state or "active") != "active"  # listed at all: the repo answers again
            if not back and watch.branch == DEFAULT_BRANCH and watch.last_sha is not None and item.sha == watch.last_sha:
                continue
            result.moved.append((watch.repo_id, watch.branch))


class ListingJob:
    """The daemon's listing: whether it covers the watch list, its periodic pass (moved watches are handed
    to `trigger`), and the intervals it and the request budget give each watch (the scheduler's plan).

    [poll] listing = "auto" turns the listing of every model on from listing_min_watches watches: below,
    per-repo polling costs less than a pass each listing_interval (see docs/operating/request-budget.md).
    Followed authors (ORG/*) are always listed: it is the only way to see their new models."""

    def __init__(
        self,
        settings: Settings,
        listings: ListingStore,
        hub: ModelListing,
        trigger: Callable[[str, str], object],
        budget: RequestBudget | None = None,
        clock: Clock = utc_now,
        derivatives: DerivativeStore | None = None,
    ) -> None:
        poll = settings.poll
        self.mode, self.min_watches = poll.listing, poll.listing_min_watches
        self.interval_s = poll.listing_interval_s
        # None: auto, from the number of watches the listing covers (`reconcile_interval_s`)
        self.reconcile_s = poll.reconcile_interval_s
        self._listings, self._trigger, self._budget = listings, trigger, budget
        self._derivatives = derivatives  # followed families: their passes are planned with their base's polls
        self._pass = ListingPass(listings, hub, clock)
        self._clock = clock
        self.stretch = 1.0  # the request budget's stretch of every interval, the listing's included (`plan`)
        self._last_round_at: datetime | None = None

    def covers(self, watch_count: int) -> bool:
        """Whether the listing of every model stands in for per-repo polling of `watch_count` watches."""
        return self.mode == "on" or (self.mode == "auto" and watch_count >= self.min_watches)

    def __call__(self) -> list[ScopePass]:
        """One pass (when there is anything to list), then a poll of each watch that moved, and of each
        watch it covers whose last poll failed and is due for its retry (the listing will not report that
        move again). A failing database or Hub is logged, never raised: the next pass tries again."""
        try:
            include_all = self.covers(self._listings.watch_count())
            authors = self._listings.list_author_watches()
            if not include_all and not authors:
                return []
            now = self._clock()
            if not self.round_due(now):
                return []
            self._last_round_at = now
            fresh_after_s = FRESH_AFTER_ROUNDS * self.interval_s * self.stretch
            passes = self._pass.run(include_all, on_moved=self._poll_moved, due=self.authors_due(authors, now),
                                    fresh_after_s=fresh_after_s)
        except Exception as err:  # noqa: BLE001 - the daemon's periodic job: one line, then the next pass
            log.error("listing_pass_failed", error=f"{type(err).__name__}: {err}")
            return []
        wanted: list[tuple[str, str]] = []
        try:
            followed = {scope.scope.removeprefix("author:") for scope in passes if scope.scope != ALL_MODELS}
            wanted = [(r, b) for r, b in self._listings.watches_to_retry() if include_all or owner_of(r) in followed]
        except Exception as err:  # noqa: BLE001 - as above: the moves found are still polled
            log.error("listing_retries_failed", error=f"{type(err).__name__}: {err}")
        polled = {move for scope in passes for move in scope.moved}
        self._poll_moved([move for move in wanted if move not in polled])
        return passes

    def round_due(self, now: datetime) -> bool:
        """Whether a listing round is due: every listing interval, stretched like every other interval when the
        request budget cannot hold the plan (the job is called every listing interval and skips the rounds in
        between; half an interval of slack absorbs the scheduler's jitter)."""
        if self._last_round_at is None or self.stretch <= 1.0:
            return True  # unstretched, the scheduler's own timing is the listing interval
        return now - self._last_round_at >= timedelta(seconds=self.interval_s * (self.stretch - 0.5))

    def authors_due(self, authors: Sequence[AuthorWatch], now: datetime) -> set[str]:
        """The followed authors whose own pass is due (when per-author passes are chosen): a quiet author's
        less often (`quiet_cadence_s`, from its newest model's lastModified), stretched with the budget."""
        states = {state.scope: state for state in self._listings.listing_states()}
        due = set()
        for author in authors:
            state = states.get(author_scope(author.author))
            cadence_s = quiet_cadence_s(self.interval_s, state.high_water_at if state else None, now) * self.stretch
            if author.last_listed_at is None or now - author.last_listed_at >= timedelta(seconds=cadence_s - self.interval_s / 2):
                due.add(author.author)
        return due

    def listing_requests_per_window(self, include_all: bool) -> float:
        """The Hub requests a window of listing rounds is expected to cost, from what each pass cost last time:
        the pass over every model and the own passes of the authors it does not cover, or a round of per-author
        passes at each author's cadence, whichever `choose_passes` would pick."""
        every = self._listings.list_author_watches()
        if not include_all and not every:
            return 0.0
        followed = {a.author for a in every}
        others = include_all and self._listings.watch_count(except_authors=followed, datasets=False) > 0
        datasets_alone = include_all and self._listings.watch_count(except_authors=followed, datasets=True) > 0
        authors = [a for a in every if not is_dataset_author(a.author)]
        datasets = [a for a in every if is_dataset_author(a.author)]
        states = {state.scope: state for state in self._listings.listing_states()}
        now = self._clock()
        own_datasets = (WINDOW_S / self.interval_s) * pages_of(_pages(states.get(ALL_DATASETS))) if datasets_alone else 0.0
        own_datasets += sum(
            pages_of(_pages(states.get(author_scope(a.author)))) * WINDOW_S
            / quiet_cadence_s(self.interval_s, getattr(states.get(author_scope(a.author)), "high_water_at", None), now)
            for a in datasets
        )
        author_costs, hub = self._pass.costs(authors, None, None, others)
        choice = choose_passes(author_costs, hub, hub_needed=others)
        rounds = WINDOW_S / self.interval_s
        if choice.hub:
            return rounds * pages_of(hub.pages) + own_datasets  # the authors not covered yet are listed once, then covered
        return own_datasets + sum(
            pages_of(cost.pages) * WINDOW_S
            / quiet_cadence_s(self.interval_s, getattr(states.get(author_scope(cost.author)), "high_water_at", None), now)
            for cost in author_costs
        )

    def family_requests_per_window(self, own: dict[str, int]) -> float:
        """The Hub requests a window of derivative passes is expected to cost: each followed family's last pass
        (its report's request count) once per poll of its base, at the base's shortest interval in `own`. A
        family not passed yet, or whose base is not polled, costs nothing yet."""
        if self._derivatives is None:
            return 0.0
        try:
            follows = self._derivatives.follows()
        except Exception as err:  # noqa: BLE001 - a failing database leaves the plan to the watches alone
            log.error("family_plan_failed", error=f"{type(err).__name__}: {err}")
            return 0.0
        return sum(family_need(f.base_repo_id, (f.last_report or {}).get("requests"), own) for f in follows)

    def _poll_moved(self, moved: list[tuple[str, str]]) -> None:
        """Hand moved watches to the scheduler (with several workers: made due in the database, so they are
        polled even if this worker dies next). Watches parked while their repo was gone or disabled are woken
        first: listed, the repo is back."""
        if moved:
            try:
                self._listings.wake_parked(repo_id for repo_id, _ in moved)
            except Exception as err:  # noqa: BLE001 - the moves are still handed on; a parked one waits for its recheck
                log.error("listing_wake_failed", error=f"{type(err).__name__}: {err}")
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
        stretched alike when the total, listing passes included (what they cost last time), needs more than
        the budget holds; the listing rounds are stretched by the same factor."""
        listing = self.covers(len(watches))
        try:
            followed = {a.author for a in self._listings.list_author_watches()}
        except Exception as err:  # noqa: BLE001 - a failing database leaves the plan to the watch list alone
            log.error("listing_plan_failed", error=f"{type(err).__name__}: {err}")
            followed = set()
        # a model by the listing of every model, a dataset by that of every dataset, either by its followed org's
        covered = [listing or owner_of(w.repo_id) in followed for w in watches]
        reconcile_s = self.reconcile_interval_s(sum(covered))
        own = {
            f"{w.repo_id}@{w.branch}": max(w.interval_s, reconcile_s) if listed else w.interval_s
            for w, listed in zip(watches, covered, strict=True)
        }
        try:
            listing_requests = self.listing_requests_per_window(listing)
        except Exception as err:  # noqa: BLE001 - as above: a pass a round for each scope, as a guess
            log.error("listing_plan_failed", error=f"{type(err).__name__}: {err}")
            listing_requests = (len(followed) + (1 if listing else 0)) * WINDOW_S / self.interval_s
        needed = sum(WINDOW_S / s for s in own.values()) + listing_requests + self.family_requests_per_window(own)
        factor = self._budget.stretch_factor(needed) if self._budget is not None else 1.0
        self.stretch = factor  # the listing rounds stretch alike (`round_due`)
        return {job_id: math.ceil(s * factor) for job_id, s in own.items()}


def family_need(base_repo_id: str, requests: Any, own: dict[str, int]) -> float:
    """One family's requests a window: its last pass's `requests` every poll of its base (the shortest interval
    of the base's watches in `own`, "repo@branch" -> seconds); nothing when the base is not polled."""
    intervals = [s for job_id, s in own.items() if job_id.rpartition("@")[0] == base_repo_id]
    if not intervals or not isinstance(requests, int) or requests <= 0:
        return 0.0
    return requests * WINDOW_S / min(intervals)


def _pages(state: ListingState | None) -> int:
    return state.pages if state is not None else 0


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

