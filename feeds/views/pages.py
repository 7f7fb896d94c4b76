"""HTML pages: home, a repo's timeline (filtered by change kind, severity, security), one revision
(with its advisories and, for a followed base, which derivatives carry its changes), any two revisions compared,
a repo's estimates over time, and a base's followed derivatives.

Rendered by Jinja with autoescape (feeds.views.view_models); a strict Content-Security-Policy forbids scripts
outright, so even a template mistake could not run upstream text as code.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import HTMLResponse

from feeds.http.auth import require_read
from feeds.http.params import NamePath, OrgPath, RepoRenamed, base_url, known_repo
from feeds.views.behaviour_view import behaviour_view
from feeds.views.cost_view import cost_view
from feeds.views.dataset_view import dataset_view
from feeds.views.estimate_chart import card_capacities, estimate_tables, memory_panel, parameters_panel
from feeds.views.family_view import PART_COLUMNS, family_rows, reach_view
from feeds.views.serving_view import serving_view
from feeds.views.structure_view import structure_view
from feeds.views.view_models import PAGE_LIMITS, advisories_of, change_view, render
from storage.kinds import CHANGE_KINDS, DERIVATIVES_REACHED, REVISION_INGESTED, SEVERITIES
from storage.read_model import EventFilter, RevisionFilter

PAGE_SIZE = 50
TABLE_ROWS = 100  # the estimates page's table of figures: the newest rows (the chart holds every point)
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

router = APIRouter(include_in_schema=False, dependencies=[Depends(require_read)])


def _page(name: str, status: int = 200, **context: Any) -> HTMLResponse:
    return HTMLResponse(render(name, **context), status_code=status, headers={"Content-Security-Policy": CSP})


def error_page(status: int, message: str) -> HTMLResponse:
    """The error page: the status and a sentence saying what was wrong."""
    return _page("error.html", status=status, status_code=status, message=message)


def is_page(request: Request) -> bool:
    """Whether the request was routed to one of these pages (its errors are answered with `error_page`)."""
    return any(getattr(route, "endpoint", None) is request.scope.get("endpoint") for route in router.routes)


def _known(request: Request, org: str, name: str) -> str | HTMLResponse:
    try:
        return known_repo(request.app.state.services.queries, org, name, request)
    except RepoRenamed:
        raise  # a redirect to the new name's page, not an error page
    except HTTPException as err:
        return error_page(err.status_code, str(err.detail))


@router.get("/", response_class=HTMLResponse)
def home(request: Request) -> HTMLResponse:
    services = request.app.state.services
    events = services.queries.events(EventFilter(), 30)
    watches = sorted(services.store.watches.list_watches(), key=lambda w: (w.repo_id, w.branch))
    return _page("home.html", repos=services.queries.repos(), events=events, base=base_url(request), watches=watches)


@dataclass(frozen=True)
class FilterLink:
    label: str
    href: str
    current: bool


def _query(kinds: list[str], min_severity: str | None, security: bool) -> str:
    params = [("kind", k) for k in kinds] + ([("min_severity", min_severity)] if min_severity else [])
    params += [("security", "1")] if security else []
    return "?" + urllib.parse.urlencode(params) if params else "?"


def _filter_links(kinds: list[str], min_severity: str | None, security: bool) -> dict[str, list[FilterLink]]:
    """Plain links for each filter, each keeping the other filters as they are."""
    return {
        "kind": [FilterLink("any kind", _query([], min_severity, security), not kinds)]
        + [FilterLink(k.replace("_", " "), _query([k], min_severity, security), kinds == [k]) for k in CHANGE_KINDS],
        "severity": [FilterLink("any severity", _query(kinds, None, security), min_severity is None)]
        + [FilterLink(f"{s} and above" if s != "critical" else s, _query(kinds, s, security), min_severity == s) for s in SEVERITIES[1:]],
        "security": [FilterLink("all changes", _query(kinds, min_severity, False), not security),
                     FilterLink("security only", _query(kinds, min_severity, True), security)],
    }


@router.get("/repos/{org}/{name}", response_class=HTMLResponse)
def timeline(
    request: Request,
    org: str = OrgPath,
    name: str = NamePath,
    page: int = Query(default=1, ge=1, le=100_000),
    kind: list[str] = Query(default=[], max_length=len(CHANGE_KINDS)),  # noqa: B008 - FastAPI's way to declare a parameter
    min_severity: str | None = Query(default=None, max_length=20),
    security: bool = Query(default=False),
) -> HTMLResponse:
    repo_id = _known(request, org, name)
    if isinstance(repo_id, HTMLResponse):
        return repo_id
    unknown = [k for k in kind if k not in CHANGE_KINDS] + ([min_severity] if min_severity and min_severity not in SEVERITIES else [])
    if unknown:
        return error_page(422, f"unknown filter value {unknown[0]!r}: kinds are {', '.join(CHANGE_KINDS)}; "
                               f"severities {', '.join(SEVERITIES)}")
    services = request.app.state.services
    flt = RevisionFilter(kinds=tuple(dict.fromkeys(kind)), min_severity=min_severity, security_only=security)
    revisions, matching = services.queries.timeline(repo_id, flt, PAGE_SIZE, (page - 1) * PAGE_SIZE)
    changes = services.store.history.changes_by_revision(r.id for r in revisions)
    rows = [(r, changes[r.id]) for r in revisions]  # the timeline shows each change's summary line only
    datasets = {}  # a dataset revision's one-line summary (its configs, splits, rows and schema changes)
    if repo_id.startswith("datasets/"):
        payloads = services.queries.revision_payloads((r.id for r in revisions), REVISION_INGESTED)
        datasets = {rid: view.line for rid, p in payloads.items() if (view := dataset_view(p)) is not None}
        for r in revisions:  # ingested before events carried a table: made from the stored summaries
            if r.id not in datasets and (view := dataset_view({"dataset": services.dataset_table(None, r)})) is not None:
                datasets[r.id] = view.line
    query = _query(list(flt.kinds), min_severity, security)
    return _page("timeline.html", repo_id=repo_id, rows=rows, page=page, more=page * PAGE_SIZE < matching, matching=matching,
                 total=services.queries.count_revisions(repo_id), filtered=flt != RevisionFilter(), hub=services.options.hub_url,
                 links=_filter_links(list(flt.kinds), min_severity, security), query=query.rstrip("?") + ("&" if len(query) > 1 else "?"),
                 watches=services.store.watches.repo_watches(repo_id), datasets=datasets)


def _advisory_section(store: Any, revision: Any, hub_url: str) -> dict[str, Any]:
    """OSV matches (marked relevant or not, with the reason when the check gave one), the loader
    advice and hubwatch's own records for one revision."""
    advisories = store.advisories
    links = advisories.links(revision.id)
    facts = advisories.facts([revision.id]).get(revision.id)
    own = [o for o in advisories.own(revision.repo_id) if o.revision_id == revision.id]
    matches = [
        {
            "key": link.advisory_key, "package": link.package, "version": link.version, "status": link.status,
            "summary": link.summary, "aliases": [i for i in link.ids or [] if i != link.advisory_key],
            "relevant": getattr(link, "relevant", True) is not False, "relevance": _reason(getattr(link, "relevance", None)),
            "url": f"https://osv.dev/vulnerability/{urllib.parse.quote(link.advisory_key, safe='')}",
        }
        for link in links
    ]
    matches.sort(key=lambda m: (not m["relevant"], m["key"]))
    advice = facts.advice if facts is not None and isinstance(facts.advice, dict) else {}
    return {
        "matches": matches,
        "advice": [str(advice[k]) for k in ("sentence", "package_sentence") if advice.get(k)]
        + [str(n) for n in advice.get("notes") or [] if isinstance(n, str)],
        "own": [{"id": o.id, "severity": o.severity, "summary": str((o.record or {}).get("summary") or o.class_id),
                 "fixed": o.fixed_sha, "withdrawn": (o.record or {}).get("withdrawn"),
                 "url": _first_reference(o.record) or f"{hub_url}/{o.repo_id}/commit/{o.sha}"} for o in own],
    }


def _reason(relevance: str | None) -> str:
    """The reason of a relevance marking, without the verdict the page already shows."""
    text = relevance or ""
    for verdict in ("not relevant to this model: ", "relevant: "):
        text = text.removeprefix(verdict)
    return text


def _first_reference(record: Any) -> str:
    refs = record.get("references") if isinstance(record, dict) else None
    for ref in refs or []:
        url = ref.get("url") if isinstance(ref, dict) else None
        if isinstance(url, str) and url.startswith(("https://", "http://")):
            return url
    return ""


@router.get("/repos/{org}/{name}/revisions/{sha}", response_class=HTMLResponse)
def revision_page(request: Request, sha: str, org: str = OrgPath, name: str = NamePath) -> HTMLResponse:
    repo_id = _known(request, org, name)
    if isinstance(repo_id, HTMLResponse):
        return repo_id
    services = request.app.state.services
    revision = services.store.history.find_revision(repo_id, sha)
    changes = services.store.history.changes_by_revision([revision.id])[revision.id]
    events = services.queries.events_for_revision(revision.id)
    hub = services.options.hub_url
    estimate = services.store.history.estimate_for(revision.id)
    extras = services.revision_extras(revision)
    behaviour = behaviour_view(({"kind": c.kind, "detail": c.detail} for c in changes), extras)
    return _page("revision.html", repo_id=repo_id, revision=revision, events=events, hub=hub, behaviour=behaviour,
                 changes=[change_view(c, PAGE_LIMITS) for c in changes], estimate=estimate,
                 serving=serving_view(estimate.result if estimate is not None else None),
                 structure=structure_view(estimate.result if estimate is not None else None),
                 cost=cost_view(services.priced(estimate.result) if estimate is not None else None),
                 advisories=[a for e in events for a in advisories_of(e) if e.kind.startswith("advisory.")],
                 checks=_advisory_section(services.store, revision, hub), files=services.store.history.revision_files(revision.id),
                 reaches=[reach_view(e.title, e.payload or {}) for e in events if e.kind == DERIVATIVES_REACHED],
                 lints=services.revision_lints(revision), **_dataset_section(services, repo_id, revision, events))


def _dataset_section(services: Any, repo_id: str, revision: Any, events: list[Any]) -> dict[str, Any]:
    """A dataset revision's table as its event carries it, or, for a revision ingested before events carried one,
    made from the stored summaries; `dataset_unrecorded` when neither gives one (the page says so)."""
    if not repo_id.startswith("datasets/"):
        return {"dataset": None}
    view = next((v for e in events if e.kind == REVISION_INGESTED and (v := dataset_view(e.payload))), None)
    if view is None:
        view = dataset_view({"dataset": services.dataset_table(None, revision)})
    return {"dataset": view, "dataset_unrecorded": view is None}


@router.get("/repos/{org}/{name}/derivatives", response_class=HTMLResponse)
def derivatives_page(request: Request, org: str = OrgPath, name: str = NamePath) -> HTMLResponse:
    repo_id = _known(request, org, name)
    if isinstance(repo_id, HTMLResponse):
        return repo_id
    tree = request.app.state.services.store.derivatives.tree(repo_id)
    return _page("derivatives.html", repo_id=repo_id, tree=tree, rows=family_rows(tree) if tree else [], columns=PART_COLUMNS)


@router.get("/repos/{org}/{name}/estimates", response_class=HTMLResponse)
def estimates_page(request: Request, org: str = OrgPath, name: str = NamePath) -> HTMLResponse:
    repo_id = _known(request, org, name)
    if isinstance(repo_id, HTMLResponse):
        return repo_id
    queries = request.app.state.services.queries
    points = queries.estimate_points(repo_id)
    newest = queries.repo_estimates(repo_id, 1)
    result = newest[0][1].result if newest else None
    charted = [p for p in points if p.parameters is not None]
    panels = [parameters_panel(charted), memory_panel(charted, card_capacities(result))] if charted else []
    return _page("estimates.html", repo_id=repo_id, newest=newest[0] if newest else None, tables=estimate_tables(result),
                 serving=serving_view(result), panels=panels, points=list(reversed(points))[:TABLE_ROWS], estimated=len(points))


@router.get("/repos/{org}/{name}/compare/{spec}", response_class=HTMLResponse)
def compare_page(request: Request, spec: str, org: str = OrgPath, name: str = NamePath) -> HTMLResponse:
    repo_id = _known(request, org, name)
    if isinstance(repo_id, HTMLResponse):
        return repo_id
    if spec.count("...") != 1:
        return error_page(404, "compare two revisions as A...B (two commit shas)")
    left, right = spec.split("...")
    services = request.app.state.services
    a, b = services.store.history.find_revision(repo_id, left), services.store.history.find_revision(repo_id, right)
    changes = services.diff_revisions(a, b)
    if changes is None:
        return error_page(501, "this server has no differ wired in: run it with `hubwatch serve` or `hubwatch run`")
    dataset = dataset_view({"dataset": services.dataset_table(a, b)}) if repo_id.startswith("datasets/") else None
    return _page("compare.html", repo_id=repo_id, a=a, b=b, changes=[change_view(c, PAGE_LIMITS) for c in changes],
                 dataset=dataset, dataset_unrecorded=repo_id.startswith("datasets/") and dataset is None,
                 dataset_before=f"revision {a.sha[:12]}")

