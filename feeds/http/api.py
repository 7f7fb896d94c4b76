"""The JSON API under /api/v1: watches, revisions, diffs, estimates, advisories, events, subscriptions.

Reads follow the operator's read policy (`require_read`); anything that changes state needs the API
token. The diff of two revisions is computed by the differ the composition root injects (feeds may not
import the tracker); stored changes of one revision need no differ. The bodies are `feeds.http.api_models`;
this module holds the routes and the conversions from stored rows to those bodies.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request, Response
from fastapi.responses import JSONResponse

from feeds.http.api_models import (
    ChangeOut,
    DerivativeTreeOut,
    DiffOut,
    ErrorOut,
    EstimateOut,
    EstimatePage,
    EventOut,
    EventPage,
    FileOut,
    RenovateGone,
    RenovateRelease,
    RenovateReleases,
    RepoOut,
    RevisionDetail,
    RevisionOut,
    RevisionPage,
    SubscriptionIn,
    SubscriptionOut,
    WatchIn,
    WatchOut,
)
from feeds.http.auth import require_read, require_write
from feeds.http.params import (
    NAME_PATTERN,
    REPO_KEY_PATTERN,
    SHA_PATTERN,
    Branch,
    Kind,
    NamePath,
    OrgPath,
    Severity,
    base_url,
    known_repo,
    repo_id_of,
)
from feeds.http.strict_json import StrictJSONRoute
from feeds.webhooks import FORMATS, subscribe
from storage.errors import InvalidSubscription, NotStored
from storage.kinds import UNFETCHABLE_STATES, repo_key, repo_purl, repo_type_of, short_dataset_name
from storage.models import (
    ChangeRecord,
    EstimateRecord,
    Event,
    Revision,
    RevisionFile,
    Subscription,
    Watch,
)
from storage.read_model import EventFilter


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The error answers a route documents; 422 (bad parameters) is on every route, in one shape."""
    return {code: {"model": ErrorOut} for code in (*codes, 422)}


router = APIRouter(prefix="/api/v1", tags=["api"], route_class=StrictJSONRoute)  # hostile JSON bodies: 400
read = [Depends(require_read)]
write = [Depends(require_write)]
ShaPath = Path(pattern=SHA_PATTERN, description="A full commit sha or a unique prefix (at least 4 hex digits)")


def _services(request: Request) -> Any:
    return request.app.state.services


def _change(c: ChangeRecord | dict[str, Any], brief: bool = False) -> dict[str, Any]:
    d = c if isinstance(c, dict) else c.model_dump()
    out = {k: d[k] for k in ("kind", "path", "summary", "severity", "security")}
    if not brief:
        out["structural"] = bool(d.get("structural"))
        out["detail"] = d.get("detail") or {}
    return out


def _revision(r: Revision, changes: list[ChangeRecord], brief: bool = True) -> dict[str, Any]:
    return {
        "repo_id": r.repo_id,
        "sha": r.sha,
        "parent_sha": r.parent_sha,
        "branch": r.branch,
        "committed_at": r.committed_at,
        "ingested_at": r.ingested_at,
        "title": r.title,
        "message": r.message,
        "authors": list(r.authors or []),
        "baseline": r.is_baseline,
        "file_count": r.file_count,
        "changes": [_change(c, brief) for c in changes],
        "purl": repo_purl(r.repo_id, r.sha),
    }


def _estimate(r: Revision, e: EstimateRecord, services: Any) -> EstimateOut:
    return EstimateOut(sha=r.sha, committed_at=r.committed_at, created_at=e.created_at,
                       parameters_total=e.parameters_total, result=services.priced(e.result), error=e.error)


def _file(f: RevisionFile) -> FileOut:
    return FileOut(path=f.path, kind=f.kind, oid=f.oid, size=f.size, lfs_sha256=f.lfs_sha256, held=f.held, note=f.note)


def _watch(w: Watch) -> WatchOut:
    return WatchOut(**{k: getattr(w, k) for k in WatchOut.model_fields if k != "repo_type"}, repo_type=repo_type_of(w.repo_id))


def _event(e: Event) -> EventOut:
    return EventOut(**{k: getattr(e, k) for k in EventOut.model_fields})


# -- repos and watches ---------------------------------------------------------------------------


@router.get("/repos", response_model=list[RepoOut], dependencies=read, responses=_errors(401), summary="Repos with history or a watch")
def list_repos(request: Request) -> list[RepoOut]:
    return [RepoOut(**vars(r)) for r in _services(request).queries.repos()]


@router.get("/watches", response_model=list[WatchOut], dependencies=read, responses=_errors(401), summary="Watched repo branches")
def list_watches(request: Request) -> list[WatchOut]:
    return [_watch(w) for w in _services(request).store.watches.list_watches()]


@router.post("/watches", response_model=WatchOut, status_code=201, dependencies=write, responses=_errors(400, 401, 403, 409, 413),
             summary="Watch a repo branch (polled from the next scheduler sync; the Hub is not asked here)")
def add_watch(request: Request, body: WatchIn) -> WatchOut:
    services = _services(request)
    interval_s = body.interval_s or services.options.default_interval_s
    if ".." in body.repo_id:
        raise HTTPException(422, f"{body.repo_id} is not a Hub repo id")
    repo_id = repo_key(body.repo_id, body.repo_type)
    return _watch(services.store.watches.add_watch(repo_id, body.branch, interval_s, source="api"))


@router.delete("/watches/{org}/{name}", status_code=204, dependencies=write, responses=_errors(401, 403, 404),
               summary="Stop watching a repo (every branch, or one); its history stays")
def remove_watch(
    request: Request,
    org: str = OrgPath,
    name: str = NamePath,
    branch: Annotated[Branch | None, Query(description="Only this branch (default: every watched branch)")] = None,
) -> Response:
    repo_id = repo_id_of(org, name, request)
    if not _services(request).store.watches.remove_watch(repo_id, branch):
        raise HTTPException(404, f"{repo_id}{'@' + branch if branch else ''} is not watched")
    return Response(status_code=204)


# -- history -------------------------------------------------------------------------------------


@router.get("/repos/{org}/{name}/revisions", response_model=RevisionPage, dependencies=read, responses=_errors(401, 404),
            summary="Revisions, newest first, with their change summaries")
def list_revisions(
    request: Request,
    org: str = OrgPath,
    name: str = NamePath,
    limit: int = Query(default=20, ge=1, le=100),
    offset: int = Query(default=0, ge=0, le=1_000_000),
) -> RevisionPage:
    services = _services(request)
    repo_id = known_repo(services.queries, org, name, request)
    revisions = services.store.history.list_revisions(repo_id, limit=limit, offset=offset)
    changes = services.store.history.changes_by_revision(r.id for r in revisions)
    total = services.queries.count_revisions(repo_id)
    items = [RevisionOut(**_revision(r, changes[r.id])) for r in revisions]
    following = offset + len(items)
    return RevisionPage(items=items, total=total, limit=limit, offset=offset, next_offset=following if following < total else None)


@router.get("/repos/{org}/{name}/revisions/{sha}", response_model=RevisionDetail, dependencies=read, responses=_errors(401, 404, 409),
            summary="One revision with its changes (full detail), files and estimate")
def get_revision(request: Request, org: str = OrgPath, name: str = NamePath, sha: str = ShaPath) -> RevisionDetail:
    services = _services(request)
    revision = services.store.history.find_revision(known_repo(services.queries, org, name, request), sha)
    changes = services.store.history.changes_by_revision([revision.id])[revision.id]
    estimate = services.store.history.estimate_for(revision.id)
    return RevisionDetail(
        **_revision(revision, changes, brief=False),
        files=[_file(f) for f in services.store.history.revision_files(revision.id)],
        estimate=_estimate(revision, estimate, services) if estimate is not None else None,
        lints=services.revision_lints(revision),
    )


@router.get("/repos/{org}/{name}/diff", response_model=DiffOut, dependencies=read, responses=_errors(401, 404, 409, 501),
            summary="What changed between any two stored revisions")
def diff_revisions(
    request: Request,
    org: str = OrgPath,
    name: str = NamePath,
    from_ref: str = Query(alias="from", pattern=SHA_PATTERN),
    to_ref: str = Query(alias="to", pattern=SHA_PATTERN),
) -> DiffOut:
    services = _services(request)
    repo_id = known_repo(services.queries, org, name, request)
    a, b = services.store.history.find_revision(repo_id, from_ref), services.store.history.find_revision(repo_id, to_ref)
    changes = services.diff_revisions(a, b)
    if changes is None:
        raise HTTPException(501, "this server has no differ wired in: run it with `hubwatch serve` or `hubwatch run`")
    return DiffOut(repo_id=repo_id, from_sha=a.sha, to_sha=b.sha, changes=[ChangeOut(**_change(c)) for c in changes],
                   dataset=services.dataset_table(a, b))


@router.get("/repos/{org}/{name}/estimates", response_model=EstimatePage, dependencies=read, responses=_errors(401, 404),
            summary="Stored memory and parameter estimates, newest revision first")
def list_estimates(
    request: Request,
    org: str = OrgPath,
    name: str = NamePath,
    limit: int = Query(default=20, ge=1, le=100),
    offset: int = Query(default=0, ge=0, le=1_000_000),
) -> EstimatePage:
    services = _services(request)
    repo_id = known_repo(services.queries, org, name, request)
    items = [_estimate(r, e, services) for r, e in services.queries.repo_estimates(repo_id, limit, offset)]
    total = services.queries.count_estimates(repo_id)
    following = offset + len(items)
    return EstimatePage(items=items, total=total, limit=limit, offset=offset, next_offset=following if following < total else None)


@router.get("/repos/{org}/{name}/advisories", response_model=list[EventOut], dependencies=read, responses=_errors(401, 404),
            summary="Advisory events of a repo, newest first")
def list_advisories(request: Request, org: str = OrgPath, name: str = NamePath,
                    limit: int = Query(default=100, ge=1, le=1000)) -> list[EventOut]:
    services = _services(request)
    repo_id = known_repo(services.queries, org, name, request)
    return [_event(e) for e in services.queries.events(EventFilter(repo_id=repo_id, kinds=("advisory",)), limit)]


@router.get("/repos/{org}/{name}/derivatives", response_model=DerivativeTreeOut, dependencies=read, responses=_errors(401, 404),
            summary="A followed base's derivatives, and which carry each behaviour part of the base")
def list_derivatives(request: Request, org: str = OrgPath, name: str = NamePath) -> DerivativeTreeOut:
    services = _services(request)
    repo_id = known_repo(services.queries, org, name, request)
    tree = services.store.derivatives.tree(repo_id)
    if tree is None:
        raise HTTPException(404, f"{repo_id}'s derivatives are not followed")
    return DerivativeTreeOut.model_validate(tree)


# -- Renovate -------------------------------------------------------------------------------------


@router.get("/renovate/{org}/{name}", response_model=RenovateReleases, dependencies=read,
            responses={**_errors(401, 404), 410: {"model": RenovateGone}},
            summary="Renovate customDatasources JSON: each watched branch's head as a release whose digest is its sha")
def renovate_releases(request: Request, org: str = OrgPath, name: str = NamePath) -> Any:
    """A digest pin (currentValue the branch, currentDigest the sha; renovate/hubwatch.json) is moved by
    Renovate to the `digest` of the release whose version is its branch: the head hubwatch last saw. A repo renamed
    on the Hub answers under its old name too, naming the new one (homepage, sourceUrl, `movedTo`), and so does a
    dataset's canonical short name (`datasets/wikitext`) hubwatch saw the Hub redirect to its org name; one whose
    pinned revisions cannot be fetched any more (gone, disabled, its branches deleted) answers 410 saying so."""
    services = _services(request)
    asked = repo_id_of(org, name, request)
    repo_id = asked if services.queries.repo_known(asked) else services.queries.renamed_to(asked) or asked
    watches = [w for w in services.store.watches.repo_watches(repo_id) if w.last_sha]
    if not watches and repo_id == asked and (short := short_dataset_name(asked)) is not None and asked.startswith("datasets/"):
        raise HTTPException(404, f"{asked} is a dataset's canonical short name this hubwatch has not seen the Hub "
                                 f"resolve: hubwatch watch add {short} --type dataset asks the Hub which ORG/NAME it "
                                 "redirects to and watches that; then this answers the short name too")
    if not watches:
        raise HTTPException(404, f"{asked} is not watched by this hubwatch (or not polled yet): hubwatch watch add {asked}")
    serving = [w for w in watches if w.repo_state not in UNFETCHABLE_STATES]
    if not serving:
        worst = watches[0]
        since = f" since {worst.state_since:%Y-%m-%d %H:%M} UTC" if worst.state_since else ""
        words = {"gone": "gone from the Hub (deleted, or made private)", "disabled": "disabled by the Hub",
                 "branch_missing": "without the pinned branch on the Hub"}[worst.repo_state]
        return JSONResponse(RenovateGone(
            detail=f"{repo_id} is {words}{since}: its pinned revisions cannot be fetched", repoState=worst.repo_state,
            stateSince=worst.state_since).model_dump(mode="json"), status_code=410)
    base = base_url(request).rstrip("/")
    hub = services.options.hub_url.rstrip("/")
    releases = []
    for watch in serving:
        try:
            committed_at = services.store.history.find_revision(repo_id, watch.last_sha).committed_at
        except NotStored:
            committed_at = None
        releases.append(RenovateRelease(
            version=watch.branch, digest=watch.last_sha, newDigest=watch.last_sha, releaseTimestamp=committed_at,
            changelogUrl=f"{base}/repos/{repo_id}/revisions/{watch.last_sha}", sourceUrl=f"{hub}/{repo_id}",
        ))
    detail = serving[0].state_detail or {}
    state = serving[0].repo_state or "active"
    renamed_here = state == "moved" and not detail.get("moved_from")  # renamed, its history not moved (refused)
    moved_to = repo_id if repo_id != asked else detail.get("moved_to") if renamed_here else None
    return RenovateReleases(releases=releases, homepage=f"{base}/repos/{repo_id}", sourceUrl=f"{hub}/{moved_to or repo_id}",
                            repoState=state, movedTo=moved_to, movedFrom=detail.get("moved_from") if state == "moved" else None)


# -- events --------------------------------------------------------------------------------------


@router.get("/events", response_model=EventPage, dependencies=read, responses=_errors(401),
            summary="Events with cursor pagination by seq: `after` walks forward (oldest first), otherwise newest "
            "first; `before` bounds either (with `after`: the window between)")
def list_events(
    request: Request,
    repo: str | None = Query(default=None, pattern=REPO_KEY_PATTERN,
                             description="Only this repo: a model's org/name or a dataset's datasets/org/name"),
    org: str | None = Query(default=None, pattern=NAME_PATTERN),
    kind: Annotated[
        list[Kind] | None,
        Query(description="Only these kinds: change kinds (chat_template) or event kinds (revision.ingested)"),
    ] = None,
    min_severity: Severity | None = None,
    security: bool = Query(default=False, description="Only security-relevant events"),
    after: int | None = Query(default=None, ge=0, le=2**62),
    before: int | None = Query(default=None, ge=1, le=2**62),
    limit: int = Query(default=100, ge=1, le=1000),
) -> EventPage:
    queries = _services(request).queries
    if repo is not None and not queries.repo_known(repo):
        repo = queries.renamed_to(repo) or repo  # a repo renamed on the Hub: its events are under its new name
    flt = EventFilter(repo_id=repo, org=org, kinds=tuple(kind or ()),
                      min_severity=min_severity.value if min_severity else None, security_only=security)
    events = queries.events(flt, limit, after_seq=after, before_seq=before)
    cursor = events[-1].seq if len(events) == limit else None
    return EventPage(items=[_event(e) for e in events], order="asc" if after is not None else "desc", next_cursor=cursor)


# -- subscriptions (outbound webhooks; their deliveries are the webhooks module's) ------------------


def _subscriptions(request: Request) -> Any:
    subscriptions = _services(request).subscriptions
    if subscriptions is None:
        raise HTTPException(503, "outbound webhooks are not available on this server")
    return subscriptions


def _subscription(s: Subscription, secret: str | None = None, full_url: bool = False) -> SubscriptionOut:
    """What identifies and filters a subscription. Slack and Discord URLs are secrets: listings show
    scheme and host only; the full URL and a generated secret only in the answer that created it.
    Apprise URLs carry passwords and tokens: they are shown redacted even then."""
    shown = FORMATS[s.format].shown_url(s.url, full_url)
    return SubscriptionOut(
        id=s.id, url=shown, format=s.format, repos=list(s.repos or []), kinds=list(s.kinds or []),  # type: ignore[arg-type]
        min_severity=s.min_severity, source=s.source, enabled=s.enabled, disabled_reason=s.disabled_reason, secret=secret,
    )


@router.get("/subscriptions", response_model=list[SubscriptionOut], dependencies=read, responses=_errors(401, 503),
            summary="Outbound webhook subscriptions (secrets are never shown)")
def list_subscriptions(request: Request) -> list[SubscriptionOut]:
    return [_subscription(s) for s in _subscriptions(request).list_subscriptions()]


@router.post("/subscriptions", response_model=SubscriptionOut, status_code=201, dependencies=write,
             responses=_errors(400, 401, 403, 413, 503), summary="Subscribe a URL to events")
def add_subscription(request: Request, body: SubscriptionIn) -> SubscriptionOut:
    subscriptions = _subscriptions(request)
    kinds = tuple(body.kinds)
    try:  # a user-given URL: malformed, unresolvable or private addresses are refused before storing
        options = _services(request).options
        created = subscribe(subscriptions, body.url, body.format, allow_private=options.allow_private_targets,
                            secret=body.secret, repos=tuple(body.repos), kinds=kinds, min_severity=body.min_severity.value,
                            apprise_plugins=options.apprise_allow_plugins,
                            apprise_insecure_tls=options.apprise_allow_insecure_tls)
    except InvalidSubscription as err:
        raise HTTPException(422, str(err)) from err
    return _subscription(created, secret=created.secret if body.secret is None else None, full_url=True)


@router.post("/subscriptions/{subscription_id}/enable", response_model=SubscriptionOut, dependencies=write,
             responses=_errors(401, 403, 404, 503), summary="Deliver to a subscription disabled by a 410 or an operator again")
def enable_subscription(request: Request, subscription_id: int = Path(ge=1, le=2**62)) -> SubscriptionOut:
    subscriptions = _subscriptions(request)
    if not subscriptions.enable_subscription(subscription_id):
        raise HTTPException(404, f"no subscription {subscription_id}")
    return next(_subscription(s) for s in subscriptions.list_subscriptions() if s.id == subscription_id)


@router.delete("/subscriptions/{subscription_id}", status_code=204, dependencies=write, responses=_errors(401, 403, 404, 503),
               summary="Remove a subscription (its delivery log stays)")
def remove_subscription(request: Request, subscription_id: int = Path(ge=1, le=2**62)) -> Response:
    if not _subscriptions(request).remove_subscription(subscription_id):
        raise HTTPException(404, f"no subscription {subscription_id}")
    return Response(status_code=204)
