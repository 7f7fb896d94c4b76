"""The entries of the config file's arrays: [[watch]] (a repo to follow) and [[webhooks]] (where events go)."""

from __future__ import annotations

import re
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from storage.kinds import (
    BRANCH_RULES,
    DERIVATIVE_RELATIONS,
    HTTP_WEBHOOK_FORMATS,
    REPO_TYPES,
    SEVERITIES,
    SIGNED_WEBHOOK_FORMATS,
    WEBHOOK_FORMATS,
    is_branch_name,
    is_repo_key,
    repo_key,
    short_dataset_name,
    split_repo_key,
)
from tracker.config.problems import problem, seconds
from tracker.errors import ConfigError


def validate_repo_id(repo_id: str) -> str:
    """A model's id (`org/name`) or a dataset's key (`datasets/org/name`, the Hub's URL path for it)."""
    if not is_repo_key(repo_id):
        raise ConfigError(f"{repo_id!r} is not a Hub repo id (expected 'org/name', or 'datasets/org/name' for a dataset)")
    return repo_id


def validate_repo(repo: str, repo_type: str) -> str:
    """The stored key of `repo` as a repo of `repo_type` (model, dataset): a dataset's `org/name` becomes
    `datasets/org/name`; a key (`datasets/org/name`) stays what it names whatever the type. A type other than
    REPO_TYPES is refused."""
    if repo_type not in REPO_TYPES:
        raise ConfigError(f"{repo_type!r} is not a repo type (one of {', '.join(REPO_TYPES)})")
    shaped = (repo_type == "dataset" and "/" not in repo) or (repo.startswith("datasets/") and repo.count("/") == 1)
    if shaped and short_dataset_name(repo) is not None:
        raise ConfigError(f"{repo!r} is not a Hub repo id (expected 'org/name'): a dataset's canonical short "
                          "name, without an org; hubwatch stores datasets as datasets/ORG/NAME: write the org name "
                          f"the Hub redirects it to (`hubwatch watch add {short_dataset_name(repo)} --type dataset` "
                          "asks the Hub and says it, e.g. wikitext is Salesforce/wikitext)")
    validate_repo_id(repo)
    return repo_key(repo, repo_type) if repo_type == "dataset" else repo


def validate_branch(branch: object) -> str:
    """`branch` if git and the Hub accept it as a branch name (or it is a Hub PR ref, `refs/pr/1`)."""
    if not is_branch_name(branch):
        raise ConfigError(f"{branch!r} is not a branch name ({BRANCH_RULES})")
    return str(branch)


def parse_relations(value: object, where: str) -> tuple[str, ...]:
    """A list of derivative relations (or one comma-separated string), each one of DERIVATIVE_RELATIONS."""
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not all(isinstance(i, str) for i in items):
        raise problem(f"{where} must be a list of {', '.join(DERIVATIVE_RELATIONS)}, got {value!r}")
    names = tuple(dict.fromkeys(i.strip() for i in items if i.strip()))
    unknown = [n for n in names if n not in DERIVATIVE_RELATIONS]
    if unknown:
        raise problem(f"{where}: {', '.join(map(repr, unknown))} is not a relation (one of {', '.join(DERIVATIVE_RELATIONS)})")
    return names


class Entry(BaseModel):
    """One table of an array of tables: `required` must be there, the other keys have defaults."""

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)
    array: ClassVar[str]
    required: ClassVar[str]

    @model_validator(mode="before")
    @classmethod
    def _keys(cls, item: Any) -> Any:
        if not isinstance(item, dict):
            return item
        unknown = set(item) - set(cls.model_fields)
        if unknown:
            raise problem(f"unknown setting(s) in [[{cls.array}]]: {', '.join(sorted(unknown))}")
        if cls.required not in item:
            raise problem(f"a [[{cls.array}]] entry has no {cls.required}")
        return item


class WatchSpec(Entry):
    array: ClassVar[str] = "watch"
    required: ClassVar[str] = "repo"
    repo: str = Field(description="The repo to watch (org/name). Required.")
    type: str = Field("model", description=(
        "What kind of Hub repo `repo` is: model (the default) or dataset (https://huggingface.co/datasets/org/name; "
        "`repo = \"datasets/org/name\"` says the same). A model and a dataset of the same name are two watches."))
    branch: str = Field("main", description="The branch followed.")
    interval: str = Field("", description="How often it is polled (a duration); empty: [poll] default_interval.")
    derivatives: tuple[str, ...] = Field((), description=(
        "Relations of the repo's derivatives to follow too (quantized, finetune, adapter, merge); empty: none."))
    derivatives_limit: int = Field(100, description="The most downloaded this many derivatives are followed.")
    licence_requires_latest: bool = Field(False, description=(
        "A dataset whose licence requires using its latest version (The Stack's terms, opt-out removals): rows "
        "removed from it are announced as their own critical event, dataset.rows_removed_latest_required."))
    _interval_s: int | None = PrivateAttr(default=None)

    @field_validator("derivatives", mode="before")
    @classmethod
    def _relations(cls, value: object) -> tuple[str, ...]:
        return parse_relations(value, "[[watch]] derivatives")

    @field_validator("derivatives_limit", mode="before")
    @classmethod
    def _limit(cls, value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10_000:
            raise problem(f"[[watch]] derivatives_limit must be a whole number from 1 to 10000, got {value!r}")
        return value

    @field_validator("repo", mode="before")
    @classmethod
    def _repo_id(cls, repo: object) -> str:
        if isinstance(repo, str) and repo.count("/") <= 1 and short_dataset_name(repo) is not None:
            return repo  # maybe a dataset's short name: the entry's check, which knows its type, says what to write
        try:
            return validate_repo_id(str(repo))
        except ConfigError as err:
            raise problem(str(err), sourced=False) from None

    @field_validator("branch", mode="before")
    @classmethod
    def _branch(cls, branch: object) -> str:
        if not isinstance(branch, str):
            raise problem(f"[[watch]] branch must be a string, got {branch!r}")
        try:
            return validate_branch(branch)
        except ConfigError as err:
            raise problem(f"[[watch]] branch: {err}") from None

    @field_validator("interval", mode="before")
    @classmethod
    def _text(cls, interval: object) -> str:
        return str(interval)

    @field_validator("type", mode="before")
    @classmethod
    def _type(cls, value: object) -> str:
        if value not in REPO_TYPES:
            raise problem(f"[[watch]] type must be one of {', '.join(REPO_TYPES)}, got {value!r}")
        return str(value)

    @model_validator(mode="after")
    def _interval_seconds(self) -> Self:
        if self.interval:
            self._interval_s = seconds(self.interval, f"[[watch]] {self.repo} interval")
        try:
            validate_repo(self.repo, self.type)
        except ConfigError as err:
            raise problem(f"[[watch]] {err}", sourced=False) from None
        if self.derivatives and split_repo_key(self.key)[0] == "dataset":
            raise problem(f"[[watch]] {self.repo}: derivatives are followed for models, not datasets")
        return self

    @property
    def key(self) -> str:
        """The repo's stored key: `org/name` for a model, `datasets/org/name` for a dataset (storage.kinds.repo_key)."""
        return validate_repo(self.repo, self.type)

    @property
    def interval_s(self) -> int | None:
        """The interval in seconds; None: [poll] default_interval."""
        return self._interval_s


class WebhookSpec(Entry):
    array: ClassVar[str] = "webhooks"
    required: ClassVar[str] = "url"
    url: str = Field(description=(
        "Where events are sent: an http(s) URL, or for format = \"apprise\" an Apprise URL (mailto://, tgram://, ...). "
        "Required."))
    format: str = Field("generic", description=(
        "How the message is written: generic (a signed Standard Webhook), slack, discord or apprise."))
    secret_env: str = Field("", description=(
        "The name of the environment variable holding the signing secret (whsec_..., several space-separated while "
        "rotating); required for generic."))
    repos: tuple[str, ...] = Field(("*",), description="The repos whose events are sent: repo ids or patterns such as \"meta-llama/*\".")
    kinds: tuple[str, ...] = Field((), description=(
        "The change kinds (chat_template, weights, ...) or event kinds (revision.ingested, ...) sent; empty: every event."))
    min_severity: str = Field("notice", description="The lowest severity sent: info, notice, warning or critical.")

    @field_validator("url", "format", "secret_env", "min_severity", mode="before")
    @classmethod
    def _text(cls, value: object) -> str:
        return str(value)

    @field_validator("repos", "kinds", mode="before")
    @classmethod
    def _texts(cls, values: Any) -> tuple[str, ...]:
        return tuple(str(v) for v in values)

    @model_validator(mode="after")
    def _rules(self) -> Self:
        if self.format not in WEBHOOK_FORMATS:
            raise problem(f"[[webhooks]] format must be one of {', '.join(WEBHOOK_FORMATS)}")
        if self.min_severity not in SEVERITIES:
            raise problem(f"[[webhooks]] min_severity must be one of {', '.join(SEVERITIES)}")
        if self.format in HTTP_WEBHOOK_FORMATS and not re.match(r"^https?://", self.url):  # apprise: checked with its subscription
            raise problem(f"[[webhooks]] url must be an http(s) URL, got {self.url!r}")
        if self.format in SIGNED_WEBHOOK_FORMATS and not self.secret_env:
            raise problem(f"[[webhooks]] {self.format} webhooks are signed: set secret_env (a variable holding whsec_...)")
        return self
