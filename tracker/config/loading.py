"""Loading: the config file (TOML) and the environment into validated Settings, once.

The only place that reads the environment. Precedence for each setting, highest first:
`HUBWATCH_<SECTION>_<KEY>`, the config file, a library variable where one applies (`HF_ENDPOINT`),
the built-in default.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from storage.errors import InvalidSubscription
from storage.subscriptions import secret_keys
from tracker.config.entries import WebhookSpec
from tracker.config.problems import config_error
from tracker.config.sections import SECTIONS, Section
from tracker.config.settings import Settings
from tracker.errors import BadInput, ConfigError
from tracker.formats.local_files import read_text_file

MAX_CONFIG_BYTES = 4 * 1024 * 1024  # far beyond any config: thousands of [[watch]] entries fit in 1 MB


def config_path(explicit: str | None, env: Mapping[str, str]) -> Path | None:
    """`--config`, then `$HUBWATCH_CONFIG`, then `./hubwatch.toml` if it exists, else None."""
    if explicit:
        return Path(explicit)
    if env.get("HUBWATCH_CONFIG"):
        return Path(env["HUBWATCH_CONFIG"])
    local = Path("hubwatch.toml")
    return local if local.exists() else None


def load_settings(explicit: str | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Read the config file (if any) and the environment into validated Settings."""
    env = os.environ if env is None else env
    path = config_path(explicit, env)
    raw: dict[str, Any] = {}
    source = "built-in defaults"
    if path is not None:
        raw = _read_config_file(path)
        source = str(path)
    return settings_from_mapping(raw, env, source)


def _read_config_file(path: Path) -> dict[str, Any]:
    """The parsed config file: a regular file of UTF-8 TOML, at most MAX_CONFIG_BYTES (`./hubwatch.toml`
    may come with a checked-out tree), else a ConfigError in one line."""
    if not os.path.lexists(path):
        raise ConfigError(f"config file {path} does not exist")
    try:
        return tomllib.loads(read_text_file(path, MAX_CONFIG_BYTES, what="config file"))
    except BadInput as err:  # not a regular file, too large, not UTF-8, cannot be opened
        raise ConfigError(str(err)) from err
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"config file {path} is not valid TOML: {err}") from err
    except RecursionError as err:  # tomllib parses nested arrays and inline tables recursively
        raise ConfigError(f"config file {path} is not a config file: its TOML is nested too deep") from err


def settings_from_mapping(raw: Mapping[str, Any], env: Mapping[str, str], source: str = "<mapping>") -> Settings:
    """`raw` (a parsed config file) with the environment's overrides, validated; `source` names it in errors."""
    unknown = set(raw) - set(SECTIONS) - {"watch", "webhooks"}
    if unknown:
        raise ConfigError(f"{source}: unknown section(s) {', '.join(sorted(unknown))}")
    data: dict[str, Any] = {name: _overridden(name, cls, raw.get(name, {}), env) for name, cls in SECTIONS.items()}
    hub = data["hub"]
    if isinstance(hub, dict) and "endpoint" not in raw.get("hub", {}) and not env.get("HUBWATCH_HUB_ENDPOINT") and env.get("HF_ENDPOINT"):
        hub["endpoint"] = env["HF_ENDPOINT"]
    try:
        settings = Settings.model_validate({**data, "watch": raw.get("watch", []), "webhooks": raw.get("webhooks", []),
                                            "source": source})
    except ValidationError as err:
        raise config_error(err, source) from None  # the values stay out of tracebacks: URLs can hold credentials
    return settings.model_copy(update={
        "webhook_secrets": _webhook_secrets(settings.webhooks, env, source),
        "hub_token": env.get(settings.hub.token_env) or None,
        "api_token": _from_env(env, settings.server.api_token_env),
        "read_token": _from_env(env, settings.server.read_token_env),
        "hub_webhook_secret": _from_env(env, settings.server.hub_webhook_secret_env),
    })


def _overridden(name: str, cls: type[Section], values: Any, env: Mapping[str, str]) -> Any:
    """A [table]'s values with its `HUBWATCH_<SECTION>_<KEY>` variables over them."""
    if not isinstance(values, dict):
        return values  # refused by the section: not a table
    merged = dict(values)
    for key in cls.model_fields:
        env_key = f"HUBWATCH_{name.upper()}_{key.upper()}"
        if env_key in env:
            merged[key] = env[env_key]
    return merged


def _from_env(env: Mapping[str, str], name: str) -> str | None:
    """The value of the variable a `*_env` setting names (None when unnamed, unset or empty)."""
    return (env.get(name) or None) if name else None


def _webhook_secrets(specs: tuple[WebhookSpec, ...], env: Mapping[str, str], source: str) -> dict[str, str]:
    """The signing secrets the [[webhooks]] name. A malformed one is an error now; a missing one is
    reported by the dispatcher, which retries those deliveries until it is set."""
    out = {}
    for spec in specs:
        value = env.get(spec.secret_env) if spec.secret_env else None
        if not value:
            continue
        try:
            secret_keys(value)
        except InvalidSubscription as err:
            raise ConfigError(f"{source}: ${spec.secret_env} ([[webhooks]] secret_env): {err}") from err
        out[spec.secret_env] = value
    return out
