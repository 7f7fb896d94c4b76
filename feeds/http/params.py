"""Request parameters shared by feeds, pages and the API, validated into clear 404/422 answers."""

from __future__ import annotations

import enum
import re
from typing import Annotated, Any

from fastapi import HTTPException, Path, Request
from pydantic import AfterValidator, StringConstraints, WithJsonSchema

from storage import kinds
from storage.kinds import (
    BRANCH_MAX_CHARS,
    BRANCH_PATTERN,
    BRANCH_RULES,
    EVENT_KIND_PATTERN,
    FILTER_WORDS,
    REPO_NAME_PATTERN,
    SEVERITIES,
    is_branch_name,
    is_filter_kind,
    repo_key,
)
from storage.read_model import ReadModel

NAME_PATTERN = rf"^{REPO_NAME_PATTERN}$"
REPO_ID_PATTERN = rf"^{kinds.REPO_ID_PATTERN}$"
REPO_KEY_PATTERN = rf"^{kinds.REPO_KEY_PATTERN}$"  # a model's id or a dataset's key (`datasets/org/name`)
SHA_PATTERN = r"^[0-9a-fA-F]{4,40}$"
# One `kind` filter value: a change kind, `advisory`, or a dotted event kind. Declared in the OpenAPI document.
KIND_PATTERN = rf"^({'|'.join(FILTER_WORDS)}|{EVENT_KIND_PATTERN})$"
Kind = Annotated[str, StringConstraints(pattern=KIND_PATTERN, max_length=80)]



def _branch(value: str) -> str:
    if not is_branch_name(value):
        raise ValueError(f"not a branch name ({BRANCH_RULES})")
    return value


# A branch name (storage.kinds' rules, checked in Python: the pattern's look-aheads are beyond pydantic's
# regex engine), declared in the OpenAPI document by the same pattern.
Branch = Annotated[
    str,
    StringConstraints(min_length=1, max_length=BRANCH_MAX_CHARS),
    AfterValidator(_branch),
    WithJsonSchema({"type": "string", "pattern": f"^{BRANCH_PATTERN}$", "minLength": 1, "maxLength": BRANCH_MAX_CHARS}),
]

Severity = enum.Enum("Severity", {name: name for name in SEVERITIES}, type=str)  # type: ignore[misc]


OrgPath = Path(pattern=NAME_PATTERN, max_length=96, description="The org or user (first half of the repo id)")
NamePath = Path(pattern=NAME_PATTERN, max_length=96, description="The repo name (second half of the repo id)")


# A dataset's routes are its model routes with `datasets/` before the org (`/repos/datasets/{org}/{name}/...`, as
# its key `datasets/org/name` and its Hub URL are written): `DatasetPaths` answers them with the same routes, the
# request marked as a dataset's.
DATASET_PATH = re.compile(r"^(?P<head>(?:/api/v1)?/(?:repos|watches|renovate))/datasets(?P<tail>/[^/]+/[^/]+(?:/.*)?)$")
REPO_TYPE_SCOPE_KEY = "hubwatch.repo_type"
ORIGINAL_PATH_SCOPE_KEY = "hubwatch.original_path"


class DatasetPaths:
    """ASGI middleware: `/repos/datasets/{org}/{name}...` (and the API's `/api/v1/repos/...`, `/api/v1/watches/...`,
    `/api/v1/renovate/...`) routed to the model routes with the request marked as a dataset's (`repo_type_of`)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and (match := DATASET_PATH.match(scope["path"])):
            path = match["head"] + match["tail"]
            raw = scope.get("raw_path") or scope["path"].encode()
            scope = {**scope, "path": path, "raw_path": raw.replace(b"/datasets/", b"/", 1),
                     REPO_TYPE_SCOPE_KEY: "dataset", ORIGINAL_PATH_SCOPE_KEY: scope["path"]}
        await self.app(scope, receive, send)


def repo_type_of(request: Request | None) -> str:
    """"dataset" for a request that came in under a dataset's path (`DatasetPaths`), else "model"."""
    return request.scope.get(REPO_TYPE_SCOPE_KEY, "model") if request is not None else "model"


def repo_id_of(org: str, name: str, request: Request | None = None) -> str:
    """The stored key the path names: `org/name`, or `datasets/org/name` under a dataset's path."""
    repo_id = f"{org}/{name}"
    if ".." in repo_id:
        raise HTTPException(404, f"{repo_id} is not a Hub repo id")
    return repo_key(repo_id, repo_type_of(request))


class RepoRenamed(HTTPException):
    """The repo's history moved to its new name after a rename on the Hub: answered as a permanent redirect to the
    same URL under the new name (app.py's handler writes `Location`), so feed readers and API clients follow it."""

    def __init__(self, old: str, new: str) -> None:
        super().__init__(301, f"{old} was renamed to {new} on the Hub: its history is under {new}")
        self.old, self.new = old, new

    def location(self, request: Request) -> str:
        """The request's path and query with the old repo id replaced by the new one."""
        path = request.scope.get(ORIGINAL_PATH_SCOPE_KEY, request.url.path).replace(f"/{self.old}", f"/{self.new}", 1)
        return f"{path}?{request.url.query}" if request.url.query else path


def known_repo(queries: ReadModel, org: str, name: str, request: Request | None = None) -> str:
    """The repo id (a dataset's key under a dataset's path), or a 404 naming it when it is neither watched nor has
    history; RepoRenamed when its history moved to another name (a rename on the Hub) and nothing is stored under
    this one again."""
    repo_id = repo_id_of(org, name, request)
    if not queries.repo_known(repo_id):
        new = queries.renamed_to(repo_id)
        if new is not None:
            raise RepoRenamed(repo_id, new)
        raise HTTPException(404, f"{repo_id} is not watched and has no stored history")
    return repo_id


def bad_kinds(kinds: list[str] | tuple[str, ...]) -> list[str]:
    """The kinds that are neither a change kind (`chat_template`) nor a dotted event kind (`revision.ingested`)."""
    return [k for k in kinds if not is_filter_kind(k)]


def base_url(request: Request) -> str:
    """The public URL the operator configured, else the one the request came in on."""
    configured = request.app.state.services.options.public_url
    if configured:
        return configured.rstrip("/")
    return str(request.base_url).rstrip("/")
