"""osv.dev's query language, as hubwatch answers it: a query names a model revision by package URL
(`pkg:huggingface/ORG/NAME@SHA`, or without `@SHA` and the commit in `version`), by `commit` (any watched repo
holding it), or by `name` + `ecosystem` (`GIT` and the repo's Hub URL, as the records' `affected.package` has
them). A purl of another type or another ecosystem is a package hubwatch carries nothing for: an empty answer,
as osv.dev gives for a package it does not know. What osv.dev refuses is refused here with its reason: a purl
that does not parse, a version beside a purl that has one, `commit` beside `version`, no package and no commit.

Page tokens are opaque to clients: the offset of the next page and a digest of the query they belong to, so a
token sent with another query is refused rather than silently skipping records.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from storage.kinds import is_repo_id

SHA_RE = re.compile(r"^[0-9a-fA-F]{40}$")
# The common form, read without packageurl (a quarter of a thousand-purl batch's time): no percent-escapes,
# qualifiers or subpath; anything else goes through packageurl. packageurl lowercases the version.
PLAIN_PURL = re.compile(r"^pkg:huggingface/(?P<org>[A-Za-z0-9._-]+)/(?P<name>[A-Za-z0-9._-]+)(?:@(?P<sha>[0-9a-fA-F]{40}))?$")
MAX_FIELD = 2048  # characters of any one string of a query: a purl or a URL of a Hub repo fits many times over


class InvalidQuery(ValueError):
    """A query osv.dev would refuse (400, gRPC code 3); the message says why."""


class PackageIn(BaseModel):
    """A package, by package URL or by name and ecosystem (not both)."""

    model_config = ConfigDict(extra="forbid")
    name: str | None = Field(default=None, max_length=MAX_FIELD, description="With `ecosystem`: for `GIT`, the repo's Hub URL")
    ecosystem: str | None = Field(default=None, max_length=100, description="With `name`: `GIT` is the ecosystem of hubwatch's records")
    purl: str | None = Field(default=None, max_length=MAX_FIELD, examples=["pkg:huggingface/meta-llama/Llama-3.1-8B-Instruct"],
                             description="pkg:huggingface/ORG/NAME, with @SHA or with the commit in `version`")


class QueryIn(BaseModel):
    """One query, as osv.dev's POST /v1/query takes it."""

    model_config = ConfigDict(extra="forbid")
    commit: str | None = Field(default=None, max_length=100, description="A full commit sha; `version` must not be set")
    version: str | None = Field(default=None, max_length=100, description="A full commit sha of the package's repo")
    package: PackageIn | None = None
    page_token: str | None = Field(default=None, max_length=200, description="`next_page_token` of the previous answer")


class BatchIn(BaseModel):
    """Many queries, as osv.dev's POST /v1/querybatch takes them."""

    model_config = ConfigDict(extra="forbid")
    queries: list[QueryIn] = Field(default_factory=list, description="At most 1,000 queries")


@dataclass(frozen=True)
class ModelQuery:
    """A parsed query: the repo (None: any repo holding `sha`), the commit (None: every revision), where the
    page starts. `known` False: a package hubwatch carries nothing for, answered empty."""

    repo_id: str | None
    sha: str | None
    offset: int = 0
    known: bool = True

    @property
    def key(self) -> str:
        return f"{self.repo_id or '*'}@{self.sha or '*'}"


def validation_message(err: ValidationError, where: str = "") -> str:
    """The first problem pydantic found, as `where.field: message`."""
    first = err.errors()[0]
    path = ".".join(str(p) for p in (where, *first["loc"]) if p != "")
    return f"{path}: {first['msg']}" if path else str(first["msg"])


def parse_query(query: QueryIn, hub_url: str) -> ModelQuery:
    """The query as hubwatch answers it, or InvalidQuery with osv.dev's reason."""
    if query.commit is not None and query.version is not None:
        raise InvalidQuery("Invalid query: commit and version are both set; set one of them")
    commit = _sha(query.commit, "commit") if query.commit is not None else None
    package = query.package
    if package is None:
        if commit is None:
            raise InvalidQuery("Invalid query: name a package (purl, or name and ecosystem) or a commit")
        if query.version is not None:
            raise InvalidQuery("Invalid query: a version needs a package")
        found = ModelQuery(None, commit)
    else:
        repo_id, version, known = _package(package, hub_url)
        if not known:  # another ecosystem's versions are its own business: nothing here to place them in
            return ModelQuery(None, None, 0, known=False)
        if version is not None and query.version is not None:
            raise InvalidQuery("Invalid query: the version is given twice, in the purl and in `version`")
        version = version if version is not None else query.version
        sha = commit if commit is not None else (_sha(version, "version") if version is not None else None)
        found = ModelQuery(repo_id, sha, known=known)
    offset = decode_token(query.page_token, found.key) if query.page_token else 0
    return ModelQuery(found.repo_id, found.sha, offset, found.known)


def _sha(value: str, what: str) -> str:
    if not SHA_RE.match(value):
        raise InvalidQuery(f"Invalid {what}: {value[:60]!r} is not a full commit sha (40 hex digits); hubwatch "
                           "places only full shas in a repo's history")
    return value.lower()


def _package(package: PackageIn, hub_url: str) -> tuple[str | None, str | None, bool]:
    """(repo id, the purl's version, whether hubwatch can carry records for it)."""
    if package.purl is not None:
        if package.name is not None or package.ecosystem is not None:
            raise InvalidQuery("Invalid query: a package is named by purl, or by name and ecosystem, not both")
        return _purl(package.purl)
    if package.name is None or package.ecosystem is None:
        raise InvalidQuery("Invalid query: a package named by name needs its ecosystem (and the other way round)")
    if package.ecosystem != "GIT":
        return None, None, False
    prefix = hub_url.rstrip("/") + "/"
    name = package.name.rstrip("/")
    if not name.startswith(prefix) or not is_repo_id(name[len(prefix):]):
        return None, None, False  # another git host, or not a repo of this hubwatch's Hub
    return name[len(prefix):], None, True


def _purl(text: str) -> tuple[str | None, str | None, bool]:
    plain = PLAIN_PURL.match(text)
    if plain and is_repo_id(f"{plain['org']}/{plain['name']}"):  # nothing to decode: what packageurl would answer
        sha = plain["sha"]
        return f"{plain['org']}/{plain['name']}", sha.lower() if sha else None, True
    from packageurl import PackageURL

    try:
        purl = PackageURL.from_string(text)
    except ValueError as err:
        raise InvalidQuery(f"Invalid PURL: {err}") from err
    if purl.type != "huggingface":
        return None, None, False
    if not purl.namespace:
        raise InvalidQuery(f"Invalid PURL: {text[:120]!r} has no namespace: a Hugging Face purl is "
                           "pkg:huggingface/ORG/NAME[@SHA]")
    repo_id = f"{purl.namespace}/{purl.name}"
    if not is_repo_id(repo_id):
        raise InvalidQuery(f"Invalid PURL: {repo_id[:120]!r} is not a Hub repo id (ORG/NAME)")
    return repo_id, purl.version, True


def encode_token(offset: int, key: str) -> str:
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return base64.urlsafe_b64encode(f"{offset}:{digest}".encode()).decode().rstrip("=")


def decode_token(token: str, key: str) -> int:
    """The offset a page token carries, if it was given for this query."""
    try:
        text = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode("ascii")
        offset_text, digest = text.split(":", 1)
        offset = int(offset_text)
    except (ValueError, binascii.Error, UnicodeDecodeError) as err:
        raise InvalidQuery("Invalid page token: it is not one this server gave") from err
    if offset < 0 or digest != hashlib.sha256(key.encode()).hexdigest()[:16]:
        raise InvalidQuery("Invalid page token: it was given for another query")
    return offset


def parse_json_query(document: Any, hub_url: str, where: str = "") -> ModelQuery:
    """A query from decoded JSON: InvalidQuery for a shape osv.dev would refuse."""
    try:
        query = QueryIn.model_validate(document)
    except ValidationError as err:
        raise InvalidQuery(validation_message(err, where)) from err
    try:
        return parse_query(query, hub_url)
    except InvalidQuery as err:
        raise InvalidQuery(f"{where}: {err}" if where else str(err)) from err
