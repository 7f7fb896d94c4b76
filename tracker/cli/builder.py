"""`hubwatch run`'s polling, wired in one place: the request budget on the Hub client, the listing pass,
this process's scheduler (one process, or a worker leasing watches beside others) and the periodic jobs
(listing, OSV re-check and retries, pickle verdicts judged again). The CLI starts the HTTP server and the dispatcher beside it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog

from tracker.advisories.rejudging import rejudge_job
from tracker.hub.client import install_budget
from tracker.polling.budget import RequestBudget, budget_state, set_process_budget
from tracker.polling.listing import ListingJob
from tracker.polling.scheduler import Scheduler
from tracker.polling.shared import SharedScheduler

if TYPE_CHECKING:
    from tracker.cli.app import App

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Polling:
    """The daemon's polling, built and not yet started (`scheduler.run_until_signalled()` runs it)."""

    scheduler: Scheduler
    wake_parked: Callable[[list[str]], object] | None = None  # watches parked while their repo was gone: due again

    def trigger(self, repo_id: str, branch: str | None, head_sha: str | None = None) -> bool:
        """A Hub webhook's poll: at once, on the urgent threads; `head_sha` the branch's new head as the
        webhook named it (the poll takes it in place of a head request once it checks out). A watch parked
        while its repo was gone or disabled is woken first: the Hub says the repo did something."""
        if self.wake_parked is not None:
            try:
                self.wake_parked([repo_id])
            except Exception as err:  # noqa: BLE001 - polled all the same when not parked; logged once
                log.warning("hub_webhook_wake_failed", repo_id=repo_id, error=f"{type(err).__name__}: {err}")
        return self.scheduler.trigger(repo_id, branch or "main", head_sha=head_sha)

    def state(self) -> dict[str, Any]:
        """Overdue polls and the Hub request budget, for /healthz and /metrics."""
        return {**self.scheduler.poll_state(), "hub_budget": budget_state()}


def build_polling(app: App, on_revisions: Callable[[], object]) -> Polling:
    """Everything `run` polls with. `on_revisions` is called after a scheduled poll stored revisions
    (the server renders their feed entries before anyone asks)."""
    jitter_s = app.settings.poll.jitter_s
    rejudge = rejudge_job(app.advisories.rejudge_pickles, lambda: app.settings.scan.rules_problem)
    rejudge()  # rules that changed since the last start: stored verdicts judged again

    poll = watch_poll(app, on_revisions)
    triggers: list[Any] = []  # the listing triggers polls through the scheduler, built next
    # a pass may find many moved repos: they share the scheduled polls' threads (urgent ones are Hub webhooks')
    listing = start_listing(app, lambda repo_id, branch: triggers[0](repo_id, branch, urgent=False))
    scheduler = build_scheduler(app, poll, jitter_s, plan=listing.plan)
    triggers.append(scheduler.trigger)
    scheduler.add_periodic("__listing__", listing, listing.interval_s)
    scheduler.add_periodic("__pickle_rejudge__", rejudge, app.settings.scan.rejudge_interval_s)
    osv = app.settings.osv
    if osv.enabled:
        every = osv.recheck_interval_s
        scheduler.add_periodic("__osv_recheck__", app.advisories.recheck, every, app.advisories.recheck_due_at(every))
        scheduler.add_periodic(
            "__osv_pending__", app.advisories.retry_pending,
            osv.retry_pending_interval_s,
        )
    return Polling(scheduler, app.store.listing.wake_parked)


def watch_poll(app: App, on_revisions: Callable[[], object]) -> Callable[..., bool]:
    """The schedulers' poll of one watch: False when the database could not take it (polling paused, or the
    poll's write failed), so that the watch stays due and a poll asked for is not used up; else True (polled,
    or left alone while it backs off after errors, or no longer watched)."""

    def poll(repo_id: str, branch: str, head_sha: str | None = None) -> bool:
        outcome = app.poller.poll_if_due(repo_id, branch, head_sha)
        if outcome is not None and outcome.revisions:
            on_revisions()
        stored = outcome is not None and outcome.storage_error is None
        return stored or not app.poller.gate.failing

    return poll


def build_scheduler(app: App, poll: Callable[..., bool | None], jitter_s: int, **options: Any) -> Scheduler:
    """This process's scheduler: timing every watch itself (one worker: SQLite's default), or leasing due
    watches from the database beside other workers ([poll] coordination; shared is PostgreSQL's default)."""
    mode = app.settings.poll.coordination
    if mode == "auto":
        mode = "shared" if app.store.engine.dialect.name == "postgresql" else "local"
    poller = app.poller
    common = {"version": poller.watch_list_version, **options}
    leases = app.store.leases
    if mode == "local":  # polls asked for (listing moves, Hub webhooks) are written down before they run
        return Scheduler(poller.scheduled_watches, poll, jitter_s=jitter_s, requests=leases, **common)
    return SharedScheduler(poller.scheduled_watches, poll, jitter_s, leases, app.settings.poll.lease_s, clock=app.clock,
                           on_database_back=poller.gate.succeeded, **common)


def start_listing(app: App, trigger: Callable[[str, str], object]) -> ListingJob:
    """The daemon's listing job with the request budget installed on the Hub client: shared through the
    database with every other process on it (its state is what `budget_state()` reports)."""
    hub_settings = app.settings.hub
    shared = app.store.budget  # one budget for every process on this database
    budget = RequestBudget(hub_settings.api_requests_per_5min, hub_settings.resolve_requests_per_5min, shared=shared.claim)
    install_budget(budget, hub_settings.endpoint)
    set_process_budget(budget)
    return ListingJob(app.settings, app.store.listing, app.hub, trigger, budget, app.clock, app.store.derivatives)
