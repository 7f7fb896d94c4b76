"""The JSON API's request and response bodies: what each /api/v1 route accepts and answers, as the
OpenAPI document shows them. Conversions from stored rows live with the routes (feeds.http.api).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from feeds.http.params import REPO_ID_PATTERN, Branch, Kind, Severity
from storage.kinds import WEBHOOK_FORMATS


class ErrorOut(BaseModel):
    detail: str | list[dict[str, Any]] = Field(description="What was wrong: a sentence, or the invalid parameters")


class WatchOut(BaseModel):
    repo_id: str = Field(description="The repo's key: `org/name` for a model, `datasets/org/name` for a dataset")
    repo_type: Literal["model", "dataset"] = Field(default="model", description="What kind of Hub repo it is")
    branch: str
    interval_s: int
    source: str
    last_sha: str | None
    last_polled_at: datetime | None
    last_ok_at: datetime | None
    last_error: str | None
    error_count: int
    next_retry_at: datetime | None
    repo_state: str = Field(default="active", description="What the Hub did to the repo itself: active, gone (deleted or "
                            "private, alike without a token with access), gated, disabled, branch_missing")
    state_since: datetime | None = Field(default=None, description="When the repo state last changed")
    state_detail: dict[str, Any] | None = Field(default=None, description="The state's detail: the Hub's words "
                                                "(reason), a gated mode, whether a token was sent")


class WatchIn(BaseModel):
    repo_id: str = Field(pattern=REPO_ID_PATTERN, examples=["meta-llama/Llama-3.1-8B-Instruct"])
    repo_type: Literal["model", "dataset"] = Field(default="model", description=(
        "What kind of Hub repo `repo_id` is: a dataset is watched under the key `datasets/org/name` (its routes here "
        "are under /repos/datasets/{org}/{name}); a model and a dataset of the same name are two watches"))
    branch: Branch = Field(default="main", examples=["main", "refs/pr/1"])
    interval_s: int | None = Field(default=None, ge=60, le=30 * 86400, description="Default: [poll] default_interval")


class ChangeBrief(BaseModel):
    kind: str
    path: str
    summary: str
    severity: str
    security: bool


class ChangeOut(ChangeBrief):
    structural: bool
    detail: dict[str, Any]


class RevisionOut(BaseModel):
    repo_id: str
    sha: str
    parent_sha: str | None
    branch: str
    committed_at: datetime
    ingested_at: datetime
    title: str
    message: str
    authors: list[str]
    baseline: bool
    file_count: int
    changes: list[ChangeBrief]
    purl: str | None = Field(description="The revision's package URL: pkg:huggingface/<org>/<name>@<sha>; null for a "
                             "dataset, which no purl type names (the huggingface type is for models)")


class FileOut(BaseModel):
    path: str
    kind: str
    oid: str
    size: int
    lfs_sha256: str | None
    held: bool
    note: str | None


class EstimateOut(BaseModel):
    sha: str
    committed_at: datetime
    created_at: datetime
    parameters_total: int | None
    result: dict[str, Any] | None
    error: str | None


class LintOut(BaseModel):
    """One structure verifier finding (docs/concepts/verifier.md lists every lint id)."""

    id: str
    severity: str
    message: str
    evidence: dict[str, Any]
    fix: str


class RevisionDetail(RevisionOut):
    changes: list[ChangeOut]  # type: ignore[assignment]
    files: list[FileOut]
    estimate: EstimateOut | None
    lints: list[LintOut] | None = Field(default=None, description="The structure verifier's findings on this revision "
                                        "(most severe first); null for a revision without config.json or a server "
                                        "without the verifier")


class RevisionPage(BaseModel):
    items: list[RevisionOut]
    total: int
    limit: int
    offset: int
    next_offset: int | None


class EstimatePage(BaseModel):
    items: list[EstimateOut]
    total: int
    limit: int
    offset: int
    next_offset: int | None


class DerivativeOut(BaseModel):
    repo_id: str
    relation: str
    publisher: str
    downloads: int
    head_sha: str | None
    problem: str | None = Field(description="What could not be checked (gone, gated, a malformed card, a cycle)")
    checked_at: datetime | None
    parts: dict[str, dict[str, Any]] = Field(
        description="Per behaviour part: status (carries, behind, diverged, absent, not_in_format: the copy's format "
                    "has no place for the part, as a GGUF for generation defaults), matched_sha (the base revision it "
                    "matches), exact, behind (how many base changes it lacks), missing (those base revisions) and, for "
                    "special tokens matched on the names both sides give, compared (those names)")


class DerivativeTreeOut(BaseModel):
    base_repo_id: str
    relations: list[str]
    limit: int
    last_pass_at: datetime | None
    last_error: str | None
    report: dict[str, Any] = Field(description="The last pass: listed, followed, checked, requests, problems, events")
    derivatives: list[DerivativeOut]


class DiffOut(BaseModel):
    repo_id: str
    from_sha: str
    to_sha: str
    changes: list[ChangeOut]
    dataset: dict[str, Any] | None = Field(default=None, description=(
        "A dataset's table of `to` against `from` (null for a model, or where it cannot be made): per config and "
        "split the rows before and after with the delta (`splits`), the schema diff (`schema`), the licence, gate and "
        "loading-script `notes` and the one-line summary (`line`), the same object as the generic webhook's "
        "`data.dataset`"))


class EventOut(BaseModel):
    seq: int
    event_id: str
    kind: str
    repo_id: str
    sha: str | None
    title: str
    severity: str
    security: bool
    created_at: datetime
    payload: dict[str, Any]


class EventPage(BaseModel):
    items: list[EventOut]
    order: Literal["asc", "desc"]
    next_cursor: int | None = Field(description="Pass as `after` (asc) or `before` (desc) for the next page; null at the end")


class RepoOut(BaseModel):
    repo_id: str
    revisions: int
    last_committed_at: datetime | None
    watched: bool


class SubscriptionIn(BaseModel):
    url: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9+.-]*://\S+$", max_length=2000,
                     description="http(s) for generic, slack and discord; an Apprise URL (ntfys://, mailto://, json://...) for apprise")
    format: Literal[WEBHOOK_FORMATS] = "generic"  # type: ignore[valid-type]
    secret: str | None = Field(default=None, max_length=500, description="generic: Standard Webhooks secret (whsec_...)")
    repos: list[str] = Field(default_factory=lambda: ["*"], max_length=500)
    kinds: list[Kind] = Field(default_factory=list, max_length=50)
    min_severity: Severity = Severity.notice


class SubscriptionOut(BaseModel):
    id: int
    url: str
    format: str
    repos: list[str]
    kinds: list[str]
    min_severity: str
    source: str
    enabled: bool
    disabled_reason: str | None
    secret: str | None = Field(default=None, description="Only in the answer that created it, when hubwatch generated the secret")


class RenovateRelease(BaseModel):
    """One release as Renovate's custom datasource reads it (its zod schema keeps `digest` and gives it to
    updates as `newDigest`; `newDigest` is sent too, for readers of the issue's wording and older tools)."""

    version: str = Field(description="The branch name: what a pin's currentValue is (versioning `exact`)")
    digest: str = Field(description="The branch head's commit sha: what a digest pin moves to")
    newDigest: str = Field(description="The same sha")  # noqa: N815 -- Renovate's own key
    releaseTimestamp: datetime | None = Field(description="When the head was committed")  # noqa: N815 -- Renovate's key
    changelogUrl: str = Field(description="hubwatch's page of the head revision: what changed")  # noqa: N815 -- Renovate's key
    sourceUrl: str = Field(description="The repo on the Hub")  # noqa: N815 -- Renovate's key


class RenovateReleases(BaseModel):
    """Renovate's customDatasources JSON: the releases and the repo's hubwatch timeline as homepage. The repo's
    state on the Hub rides beside them (Renovate keeps only its own keys: a renamed repo's new id reaches it as
    `homepage` and `sourceUrl`)."""

    releases: list[RenovateRelease]
    homepage: str
    sourceUrl: str  # noqa: N815 -- Renovate's own key
    repoState: str = Field("active", description="The repo's state on the Hub as hubwatch last saw it (active, gated, "  # noqa: N815
                           "moved...; gone, disabled and branch_missing answer 410)")
    movedTo: str | None = Field(None, description="A repo renamed on the Hub: its new id, to put in the pin")  # noqa: N815
    movedFrom: str | None = Field(None, description="A repo renamed on the Hub: the id it had")  # noqa: N815


class RenovateGone(BaseModel):
    """The 410 of a repo hubwatch watches whose pinned revisions the Hub no longer serves (gone, disabled, or the
    branch deleted): Renovate fails the lookup and warns on the dependency; `detail` says why."""

    detail: str
    repoState: str  # noqa: N815 -- beside Renovate's keys, in their style
    stateSince: datetime | None  # noqa: N815
