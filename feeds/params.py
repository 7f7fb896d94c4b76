"""Request parameters shared by feeds, pages and the API, validated into clear 404/422 answers."""

from __future__ import annotations

import enum
import re
from typing import Annotated

from fastapi import HTTPException, Path, Request
from pydantic import StringConstraints

from storage.event_queries import EventQueries

# The Hub's repo id rules (the same as tracker.config.REPO_ID_RE, which feeds may not import).
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$"
REPO_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$"
SHA_PATTERN = r"^[0-9a-fA-F]{4,40}$"
BRANCH_PATTERN = r"^[A-Za-z0-9._/-]{1,200}$"
CHANGE_KINDS = ("config", "tokenizer", "chat_template", "weights", "custom_code", "files", "repo", "estimate", "advisory")
_EVENT_KIND = re.compile(r"^[a-z][a-z_]*\.[a-z][a-z_]*$")
# One `kind` filter value: a change kind, or a dotted event kind. Declared in the OpenAPI document.
KIND_PATTERN = rf"^({'|'.join(CHANGE_KINDS)}|[a-z][a-z_]*\.[a-z][a-z_]*)$"
Kind = Annotated[str, StringConstraints(pattern=KIND_PATTERN, max_length=80)]


class Severity(str, enum.Enum):
    info = "info"
    notice = "notice"
    warning = "warning"
    critical = "critical"


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
    return [k for k in kinds if not (k in CHANGE_KINDS or _EVENT_KIND.match(k))]


def base_url(request: Request) -> str:
    """The public URL the operator configured, else the one the request came in on."""
    configured = request.app.state.services.options.public_url
    if configured:
        return configured.rstrip("/")
    return str(request.base_url).rstrip("/")
