"""HTML pages: home, a repo's timeline, one revision, and any two revisions compared.

Rendered by Jinja with autoescape (feeds.view_models); a strict Content-Security-Policy forbids scripts
outright, so even a template mistake could not run upstream text as code.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import HTMLResponse

from feeds.auth import require_read
from feeds.params import NamePath, OrgPath, base_url, known_repo
from feeds.view_models import PAGE_LIMITS, advisories_of, change_view, render
from storage.event_queries import EventFilter

PAGE_SIZE = 50
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
        return known_repo(request.app.state.services.queries, org, name)
    except HTTPException as err:
        return error_page(err.status_code, str(err.detail))


@router.get("/", response_class=HTMLResponse)
def home(request: Request) -> HTMLResponse:
    services = request.app.state.services
    events = services.queries.events(EventFilter(), 30)
    return _page("home.html", repos=services.queries.repos(), events=events, base=base_url(request))


@router.get("/repos/{org}/{name}", response_class=HTMLResponse)
def timeline(request: Request, org: str = OrgPath, name: str = NamePath, page: int = Query(default=1, ge=1, le=100_000)) -> HTMLResponse:
    repo_id = _known(request, org, name)
    if isinstance(repo_id, HTMLResponse):
        return repo_id
    store = request.app.state.services.store
    revisions = store.list_revisions(repo_id, limit=PAGE_SIZE, offset=(page - 1) * PAGE_SIZE)
    changes = store.changes_by_revision(r.id for r in revisions)
    total = request.app.state.services.queries.count_revisions(repo_id)
    rows = [(r, [change_view(c, PAGE_LIMITS) for c in changes[r.id]]) for r in revisions]
    return _page("timeline.html", repo_id=repo_id, rows=rows, page=page, more=page * PAGE_SIZE < total, total=total,
                 watches=[w for w in store.list_watches() if w.repo_id == repo_id])


@router.get("/repos/{org}/{name}/revisions/{sha}", response_class=HTMLResponse)
def revision_page(request: Request, sha: str, org: str = OrgPath, name: str = NamePath) -> HTMLResponse:
    repo_id = _known(request, org, name)
    if isinstance(repo_id, HTMLResponse):
        return repo_id
    services = request.app.state.services
    revision = services.store.find_revision(repo_id, sha)
    changes = services.store.changes_by_revision([revision.id])[revision.id]
    events = services.queries.events_for_revision(revision.id)
    return _page("revision.html", repo_id=repo_id, revision=revision, events=events,
                 changes=[change_view(c, PAGE_LIMITS) for c in changes], estimate=services.store.estimate_for(revision.id),
                 advisories=[a for e in events for a in advisories_of(e)], files=services.store.revision_files(revision.id))


@router.get("/repos/{org}/{name}/compare/{spec}", response_class=HTMLResponse)
def compare_page(request: Request, spec: str, org: str = OrgPath, name: str = NamePath) -> HTMLResponse:
    repo_id = _known(request, org, name)
    if isinstance(repo_id, HTMLResponse):
        return repo_id
    if spec.count("...") != 1:
        return error_page(404, "compare two revisions as A...B (two commit shas)")
    left, right = spec.split("...")
    services = request.app.state.services
    a, b = services.store.find_revision(repo_id, left), services.store.find_revision(repo_id, right)
    changes = services.diff_revisions(a, b)
    if changes is None:
        return error_page(501, "this server has no differ wired in: run it with `hubwatch serve` or `hubwatch run`")
    return _page("compare.html", repo_id=repo_id, a=a, b=b, changes=[change_view(c, PAGE_LIMITS) for c in changes])

