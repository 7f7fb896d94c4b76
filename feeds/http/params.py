"""Request parameters shared by feeds, pages and the API, validated into clear 404/422 answers."""

from __future__ import annotations

import enum
from typing import Annotated

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
)
from storage.read_model import ReadModel

NAME_PATTERN = rf"^{REPO_NAME_PATTERN}$"
REPO_ID_PATTERN = rf"^{kinds.REPO_ID_PATTERN}$"
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


def repo_id_of(org: str, name: str) -> str:
    repo_id = f"{org}/{name}"
    if ".." in repo_id:
        raise HTTPException(404, f"{repo_id} is not a Hub repo id")
    return repo_id


class RepoRenamed(HTTPException):
    """The repo's history moved to its new name after a rename on the Hub: answered as a permanent redirect to the
    same URL under the new name (app.py's handler writes `Location`), so feed readers and API clients follow it."""

    def __init__(self, old: str, new: str) -> None:
        super().__init__(301, f"{old} was renamed to {new} on the Hub: its history is under {new}")
        self.old, self.new = old, new

    def location(self, request: Request) -> str:
        """The request's path and query with the old repo id replaced by the new one."""
        path = request.url.path.replace(f"/{self.old}", f"/{self.new}", 1)
        return f"{path}?{request.url.query}" if request.url.query else path


def known_repo(queries: ReadModel, org: str, name: str) -> str:
    """The repo id, or a 404 naming it when it is neither watched nor has history; RepoRenamed when its history
    moved to another name (a rename on the Hub) and nothing is stored under this one again."""
    repo_id = repo_id_of(org, name)
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
