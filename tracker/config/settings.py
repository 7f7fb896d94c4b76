"""Settings: every [table] of the config file, its [[watch]] and [[webhooks]] entries, and the secrets
the `*_env` settings name (read from the environment by loading, never from the file)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from tracker.config.entries import WatchSpec, WebhookSpec
from tracker.config.problems import problem
from tracker.config.sections import (
    CostSettings,
    DeliverySettings,
    EstimateSettings,
    HubSettings,
    LogSettings,
    OsvSettings,
    PollSettings,
    ScanSettings,
    ServerSettings,
    StorageSettings,
)


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)
    hub: HubSettings = Field(default_factory=HubSettings)
    storage: StorageSettings = Field(default_factory=StorageSettings)
    osv: OsvSettings = Field(default_factory=OsvSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    poll: PollSettings = Field(default_factory=PollSettings)
    log: LogSettings = Field(default_factory=LogSettings)
    estimate: EstimateSettings = Field(default_factory=EstimateSettings)
    delivery: DeliverySettings = Field(default_factory=DeliverySettings)
    scan: ScanSettings = Field(default_factory=ScanSettings)
    cost: CostSettings = Field(default_factory=CostSettings)
    watch: tuple[WatchSpec, ...] = ()
    webhooks: tuple[WebhookSpec, ...] = ()
    hub_token: str | None = Field(default=None, repr=False)
    # [[webhooks]] signing secrets read from their secret_env variables: name -> value.
    webhook_secrets: Mapping[str, str] = Field(default_factory=dict, repr=False)
    # [server] secrets read from the variables its *_env settings name.
    api_token: str | None = Field(default=None, repr=False)
    read_token: str | None = Field(default=None, repr=False)
    hub_webhook_secret: str | None = Field(default=None, repr=False)
    source: str = "built-in defaults"

    @field_validator("watch", "webhooks", mode="before")
    @classmethod
    def _array_of_tables(cls, items: Any, info: ValidationInfo) -> Any:
        if not isinstance(items, list | tuple) or not all(isinstance(i, dict | BaseModel) for i in items):
            raise problem(f"[[{info.field_name}]] must be an array of tables")
        return items

    @model_validator(mode="after")
    def _each_once(self) -> Self:
        watched = set()
        for spec in self.watch:
            if (spec.key, spec.branch) in watched:
                raise problem(f"{spec.key}@{spec.branch} is watched twice")
            watched.add((spec.key, spec.branch))
        hooks = set()
        for hook in self.webhooks:
            if (hook.url, hook.format) in hooks:
                raise problem(f"[[webhooks]] {hook.format} webhook to the same url is listed twice")
            hooks.add((hook.url, hook.format))
        return self

    @property
    def database_url(self) -> str:
        if self.storage.url:
            return self.storage.url
        return f"sqlite:///{Path(self.storage.data_dir).expanduser() / 'hubwatch.db'}"

    @property
    def default_interval_s(self) -> int:
        return self.poll.default_interval_s

    def interval_s(self, spec: WatchSpec) -> int:
        return spec.interval_s or self.poll.default_interval_s
