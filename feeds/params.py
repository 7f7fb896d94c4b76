"""Request parameters shared by feeds, pages and the API, validated into clear 404/422 answers."""

from __future__ import annotations

import enum
from typing import Annotated

from fastapi import HTTPException, Path, Request
from pydantic import StringConstraints

from storage import kinds
from storage.event_queries import EventQueries
from storage.kinds import EVENT_KIND_PATTERN, FILTER_WORDS, REPO_NAME_PATTERN, SEVERITIES, is_filter_kind

NAME_PATTERN = rf"^{REPO_NAME_PATTERN}$"
REPO_ID_PATTERN = rf"^{kinds.REPO_ID_PATTERN}$"
SHA_PATTERN = r"^[0-9a-fA-F]{4,40}$"
BRANCH_PATTERN = r"^[A-Za-z0-9._/-]{1,200}$"
# One `kind` filter value: a change kind, `advisory`, or a dotted event kind. Declared in the OpenAPI document.
KIND_PATTERN = rf"^({'|'.join(FILTER_WORDS)}|{EVENT_KIND_PATTERN})$"
Kind = Annotated[str, StringConstraints(pattern=KIND_PATTERN, max_length=80)]

Severity = enum.Enum("Severity", {name: name for name in SEVERITIES}, type=str)  # type: ignore[misc]


OrgPath = Path(pattern=NAME_PATTERN, max_length=96, description="The org or user (first half of the repo id)")
NamePath = Path(pattern=NAME_PATTERN, max_length=96, description="The repo name (second half of the repo id)")


def repo_id_of(org: str, name: str) -> str:
    repo_id = f"{org}/{name}"
    if ".." in repo_id:
        raise HTTPException(404, f"{repo_id} is not a Hub repo id")
    return repo_id


def known_repo(queries: EventQueries, org: str, name: str) -> str:
    """The repo id, or a 404 naming it when it is neither watched nor has history."""
    repo_id = repo_id_of(org, name)
    if not queries.repo_known(repo_id):
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
