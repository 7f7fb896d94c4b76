"""Hub webhooks in: `POST /hooks/hub` triggers an ingest of a watched repo the moment it moves.

The Hub sends the shared secret verbatim in `X-Webhook-Secret` (no HMAC): it is compared in constant
time before the body is even parsed. The raw JSON is read (huggingface_hub's model drops `headSha`),
strictly (`feeds.http.strict_json`), after a body limit that holds for chunked bodies too (`feeds.http.body_limit`).
Refused without side effects: Hub webhooks not enabled here (403, naming the setting that enables them),
a bad or missing secret (401), a body over the limit (413), a body that
is not a Hub payload (400, hostile JSON too), a repo nobody watches (404). A payload whose commit is
already stored (a replay, or a retry after we ingested) is a no-op (200), as is one for a branch nobody
watches.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import structlog
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from feeds.http.auth import same_secret
from feeds.http.body_limit import BodyTooLarge
from feeds.http.strict_json import HostileJSON, strict_loads
from storage.kinds import REPO_TYPES, is_branch_name, is_repo_id, repo_key, repo_type_of

log = structlog.get_logger(__name__)

CONTENT_SCOPES = ("repo", "repo.content", "repo.config")
COMMIT_SHA = re.compile(r"[0-9a-f]{40}")  # what a payload's sha must be to be handed to the poll


class HookAnswer(BaseModel):
    status: str  # triggered | ignored | refused
    detail: str
    repo_id: str | None = None
    branches: list[str] = []


router = APIRouter(tags=["hooks"])


def _answer(request: Request, code: int, status: str, detail: str, repo_id: str | None = None,
            branches: list[str] | None = None) -> JSONResponse:
    request.app.state.services.metrics.count("hub_webhooks", detail.split(":")[0] if status != "triggered" else "triggered")
    body = HookAnswer(status=status, detail=detail, repo_id=repo_id, branches=branches or [])
    return JSONResponse(status_code=code, content=body.model_dump())


def _parse(raw: bytes) -> tuple[dict[str, Any] | None, str]:
    try:
        payload = strict_loads(raw)
    except HostileJSON as err:
        return None, f"malformed: {err}"
    if not isinstance(payload, dict) or not isinstance(payload.get("repo"), dict):
        return None, "malformed: no repo object in the payload"
    if not isinstance(payload["repo"].get("name"), str):
        return None, "malformed: repo.name is missing"
    if not is_repo_id(payload["repo"]["name"]):
        return None, "malformed: repo.name is not a Hub repo id"
    refs = payload.get("updatedRefs", [])
    if not isinstance(refs, list) or not all(isinstance(r, dict) for r in refs):
        return None, "malformed: updatedRefs is not a list of objects"
    return payload, ""


def _moved_branches(payload: dict[str, Any]) -> dict[str, str | None] | None:
    """branch -> the sha it moved to, from updatedRefs (`refs/heads/B` is branch B, a pull request's
    `refs/pr/N` is watched by that name); None when the payload names no ref. Names git would refuse
    are dropped: no watch can have them."""
    refs = payload.get("updatedRefs") or []
    if not refs:
        return None
    moved: dict[str, str | None] = {}
    for ref in refs:
        name = ref.get("ref")
        if not isinstance(name, str):
            continue
        branch = name.removeprefix("refs/heads/")
        if is_branch_name(branch) and (branch != name or name.startswith("refs/pr/")):
            new = ref.get("newSha")
            moved[branch] = new if isinstance(new, str) else None
    return moved


@router.post(
    "/hooks/hub",
    response_model=HookAnswer,
    status_code=202,
    summary="Hub webhook: ingest a watched repo now",
    responses={
        200: {"model": HookAnswer, "description": "Nothing to do (replay, other branch, other scope)"},
        400: {"model": HookAnswer, "description": "Not a Hub webhook payload"},
        401: {"model": HookAnswer, "description": "Missing or wrong X-Webhook-Secret"},
        404: {"model": HookAnswer, "description": "The repo is not watched"},
        413: {"model": HookAnswer, "description": "Body too large"},
        403: {"model": HookAnswer, "description": "Hub webhooks are not enabled here: set [server] hub_webhook_secret_env"},
    },
)
async def hub_webhook(request: Request) -> JSONResponse:
    received_at = datetime.now(UTC)  # the start of a delivery's path, on the hub_webhook_accepted line
    services = request.app.state.services
    secret = services.options.hub_webhook_secret
    if not secret or services.trigger is None:  # a feature switched off, not a server failing: 4xx, saying how
        return _answer(request, 403, "refused", "disabled: set [server] hub_webhook_secret_env to receive Hub webhooks")
    if not same_secret(request.headers.get("x-webhook-secret"), secret):
        log.warning("hub_webhook_refused", reason="bad secret")
        return _answer(request, 401, "refused", "unauthorized: missing or wrong X-Webhook-Secret")
    try:  # the limit holds for chunked bodies too: reading stops as soon as it is passed
        raw = await request.body()
    except BodyTooLarge as err:  # the middleware closes the connection: the rest is never read
        return _answer(request, 413, "refused", str(err.detail))
    payload, problem = _parse(raw)
    if payload is None:
        return _answer(request, 400, "refused", problem)
    repo = payload["repo"]
    repo_type = repo.get("type", "model")
    event = payload.get("event") if isinstance(payload.get("event"), dict) else {}
    scope = str(event.get("scope", "repo.content"))
    if repo_type not in REPO_TYPES:
        return _answer(request, 200, "ignored", f"not a model or dataset: {repo_type} repos are not tracked", repo["name"])
    repo_id = repo_key(repo["name"], repo_type)  # a dataset's watch is keyed datasets/org/name
    if scope not in CONTENT_SCOPES:
        return _answer(request, 200, "ignored", f"other scope: {scope} does not change the repo's files", repo_id)
    # Storage calls are synchronous SQL: off the event loop, in one hop (each hop waits for a thread). The polls
    # are asked for in that hop, before the answer: a trigger only queues a poll (its own threads run it), so
    # no ingest holds the answer up, the poll starts without waiting for the answer to be written and for a
    # second hop, and a move the Hub is told was taken (202) has been handed to the scheduler.
    code, status, detail, branches = await run_in_threadpool(_accept, services, repo_id, payload, received_at)
    return _answer(request, code, status, detail, repo_id, branches)


def _accept(services: Any, repo_id: str, payload: dict[str, Any], received_at: datetime) -> tuple[int, str, str, list[str]]:
    """The branches due (see `_due_branches`), each of their polls asked for when there are some."""
    answer = _due_branches(services, repo_id, payload)
    if answer[0] == 202:
        _trigger(services.trigger, repo_id, answer[3], payload, received_at)
    return answer


def _trigger(trigger: Any, repo_id: str, branches: list[str], payload: dict[str, Any], received_at: datetime) -> None:
    """Each branch's poll, told the sha the payload says the branch moved to (a commit sha, else None): the
    poll takes it in place of a head request once the walk from it leads back to the last commit stored."""
    # With no ref named, `repo.headSha` is the default branch's head: taken for another watched branch whose
    # last commit it descends from (a branch merged into the default one), it would move that branch where it
    # never went. Only a ref's own `newSha` stands in for the head request.
    shas = _branch_shas(payload, branches) if _moved_branches(payload) is not None and not _is_move(payload) else {}
    for branch in branches:
        sha = shas.get(branch)
        trigger(repo_id, branch, sha if isinstance(sha, str) and COMMIT_SHA.fullmatch(sha) else None)
    head_sha = payload["repo"].get("headSha")
    log.info("hub_webhook_accepted", repo_id=repo_id, branches=branches, sha=head_sha if isinstance(head_sha, str) else None,
             received_at=received_at.isoformat(), triggered_ms=round((datetime.now(UTC) - received_at).total_seconds() * 1000, 1))


def _is_move(payload: dict[str, Any]) -> bool:
    """A Hub webhook telling a rename: `event.action` "move" with `movedTo.name` a repo id."""
    event = payload.get("event") if isinstance(payload.get("event"), dict) else {}
    moved_to = payload.get("movedTo")
    return event.get("action") == "move" and isinstance(moved_to, dict) and is_repo_id(moved_to.get("name"))


def _branch_shas(payload: dict[str, Any], branches: list[str]) -> dict[str, str | None]:
    """Of the watched `branches`, those the payload moved, each with the sha it names for it (a ref's
    `newSha`; with no ref named, `repo.headSha` for every watched branch)."""
    moved = _moved_branches(payload)
    if moved is None:  # no refs named: the head moved, on whichever branch it is
        head_sha = payload["repo"].get("headSha")
        moved = dict.fromkeys(branches, head_sha if isinstance(head_sha, str) else None)
    return {b: sha for b, sha in moved.items() if b in branches}


def _due_branches(services: Any, repo_id: str, payload: dict[str, Any]) -> tuple[int, str, str, list[str]]:
    """Look up the one repo's watches (an index lookup, never the whole watch list) and skip the branches
    whose new commit is stored already: (status code, status, detail, the branches to ingest)."""
    branches = sorted({w.branch for w in services.store.watches.repo_watches(repo_id)})
    if not branches:
        log.info("hub_webhook_refused", repo_id=repo_id, reason="not watched")
        return 404, "refused", f"not watched: {repo_id} is not watched here", []
    if _is_move(payload):  # a rename: not about a commit, every watched branch is polled (it follows the 307)
        new = repo_key(payload["movedTo"]["name"], repo_type_of(repo_id))
        return 202, "triggered", f"triggered: {repo_id} moved to {new}: poll started", branches
    moved = _moved_branches(payload)
    wanted = _branch_shas(payload, branches)
    if not wanted:
        return 200, "ignored", f"other branch: none of {', '.join(sorted(moved or {})) or 'the refs'} is watched", []
    due = [branch for branch, sha in sorted(wanted.items())
           if not (sha and services.store.history.has_revision(repo_id, sha))]  # stored: a replay, or the scheduler got there first
    if not due:
        shas = ", ".join(s[:12] for s in wanted.values() if s)
        return 200, "ignored", f"already ingested: {repo_id} at {shas}", []
    return 202, "triggered", f"triggered: ingest of {repo_id} started", due
