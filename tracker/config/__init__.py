"""Settings: loaded once from TOML, environment overrides applied, validated into frozen pydantic models.

`sections` holds one model per [table], `entries` the [[watch]] and [[webhooks]] tables, `settings` the
whole, `loading` the file and the environment (the only module that reads it), `durations` the
`15m`-style durations, `problems` how a bad setting becomes a ConfigError naming it.
"""

from __future__ import annotations

from tracker.config.durations import parse_interval
from tracker.config.entries import WatchSpec, WebhookSpec, validate_branch, validate_repo, validate_repo_id
from tracker.config.loading import config_path, load_settings, settings_from_mapping
from tracker.config.sections import (
    PUBLIC_HUB,
    SECTIONS,
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
from tracker.config.settings import Settings

__all__ = [
    "PUBLIC_HUB",
    "SECTIONS",
    "CostSettings",
    "DeliverySettings",
    "EstimateSettings",
    "HubSettings",
    "LogSettings",
    "OsvSettings",
    "PollSettings",
    "ScanSettings",
    "ServerSettings",
    "Settings",
    "StorageSettings",
    "WatchSpec",
    "WebhookSpec",
    "config_path",
    "load_settings",
    "parse_interval",
    "settings_from_mapping",
    "validate_branch",
    "validate_repo",
    "validate_repo_id",
]
