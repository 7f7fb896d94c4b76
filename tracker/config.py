"""Settings: loaded once from TOML, environment overrides applied, validated into frozen dataclasses.

This is the only module that reads the environment. Precedence for each setting, highest first:
`HUBWATCH_<SECTION>_<KEY>`, the config file, a library variable where one applies (`HF_ENDPOINT`),
the built-in default.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from storage import kinds
from storage.errors import InvalidSubscription
from storage.kinds import BRANCH_RULES, SEVERITIES, WEBHOOK_FORMATS, is_branch_name, is_repo_id
from storage.subscriptions import secret_keys
from tracker.errors import ConfigError

PUBLIC_HUB = "https://huggingface.co"
_INTERVAL_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_interval(value: object, key: str = "interval") -> int:
    """Seconds in `15m`, `1h`, `30s`, `1d` or a bare number of seconds; at least 1."""
    if isinstance(value, bool):
        raise ConfigError(f"{key}: expected a duration like '15m', got {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        match = _INTERVAL_RE.match(str(value))
        if not match:
            raise ConfigError(f"{key}: expected a duration like '30s', '15m', '1h' or '1d', got {value!r}")
        seconds = float(match.group(1)) * _UNIT_S[match.group(2)]
    if seconds < 1:
        raise ConfigError(f"{key}: must be at least 1 second, got {value!r}")
    return int(seconds)


def validate_repo_id(repo_id: str) -> str:
    if not is_repo_id(repo_id):
        raise ConfigError(f"{repo_id!r} is not a Hub repo id (expected 'org/name')")
    return repo_id


def validate_branch(branch: object) -> str:
    """`branch` if git and the Hub accept it as a branch name (or it is a Hub PR ref, `refs/pr/1`)."""
    if not is_branch_name(branch):
        raise ConfigError(f"{branch!r} is not a branch name ({BRANCH_RULES})")
    return str(branch)


@dataclass(frozen=True)
class HubSettings:
    endpoint: str = PUBLIC_HUB
    token_env: str = "HF_TOKEN"
    timeout_s: float = 30.0
    # The request budget of one process, per 5-minute window (the free-account figures; 0: no budget).
    # RateLimit headers the Hub sends take precedence.
    api_requests_per_5min: int = 1000
    resolve_requests_per_5min: int = 5000


@dataclass(frozen=True)
class StorageSettings:
    url: str = ""  # empty: a SQLite file under data_dir
    data_dir: str = "~/.local/share/hubwatch"


@dataclass(frozen=True)
class OsvSettings:
    api_url: str = "https://api.osv.dev"
    enabled: bool = True  # false: never ask OSV (facts, own advisories and cached advice still work)
    timeout_s: float = 30.0
    max_attempts: int = 4  # tries per request on time-outs, 429 and 5xx
    backoff_s: float = 2.0  # first wait between tries, doubling
    max_backoff_s: float = 60.0
    max_pages: int = 20  # querybatch pages followed per query before the rest is cut
    recheck_interval: str = "1d"  # every watched head re-checked for new or modified advisories
    retry_pending_interval: str = "15m"  # revisions ingested while OSV was down, asked again


@dataclass(frozen=True)
class ServerSettings:
    host: str = "127.0.0.1"
    port: int = 8600  # 0: any free port (logged at start)
    public_url: str = ""  # empty: links use the URL each request came in on
    api_token_env: str = "HUBWATCH_API_TOKEN"  # writes need this bearer token; unset variable: writes refused
    read_token_env: str = ""  # set: reads need this token (or the API token) too
    hub_webhook_secret_env: str = "HUBWATCH_HUB_WEBHOOK_SECRET"  # unset variable: /hooks/hub refused


@dataclass(frozen=True)
class DeliverySettings:
    """How `hubwatch run` delivers outbound webhooks."""

    allow_private_targets: bool = False
    timeout_s: float = 15.0
    connect_timeout_s: float = 5.0
    retry_schedule: tuple[str, ...] = ("5s", "5m", "30m", "2h", "5h", "10h", "14h", "20h", "24h")
    max_attempts: int = 0  # deprecated (0: unset): cuts the schedule to max_attempts - 1 retries
    retry_after_max_s: float = 3600.0
    concurrency: int = 4
    poll_interval_s: float = 1.0
    lease_s: float = 6.0  # a killed worker's deliveries are taken over after at most this long

    @property
    def retry_delays_s(self) -> tuple[int, ...]:
        """The schedule in seconds. A (deprecated) max_attempts keeps its old meaning: max_attempts - 1
        retries, the schedule cut short or its last delay repeated."""
        delays = tuple(parse_interval(d, f"[delivery] retry_schedule[{i}]") for i, d in enumerate(self.retry_schedule))
        if not self.max_attempts:
            return delays
        retries = self.max_attempts - 1
        return (delays + delays[-1:] * retries)[:retries] if delays else ()


@dataclass(frozen=True)
class PollSettings:
    default_interval: str = "15m"
    jitter: str = "30s"
    max_file_mb: int = 64
    chat_template_timeout_s: float = 2.0
    retry_min: str = "1m"
    retry_max: str = "6h"
    # Change detection by listing: auto (when at least listing_min_watches are watched, or an ORG/* is
    # followed) | on | off. A listing pass every listing_interval; each watch polled on its own only every
    # reconcile_interval (and at once when the listing or a Hub webhook says it moved).
    listing: str = "auto"
    listing_min_watches: int = 20
    listing_interval: str = "1m"
    # auto: a day, longer from 1,440 covered watches on, so that reconciling costs a request a minute at most
    reconcile_interval: str = "auto"
    # Several `hubwatch run` on one database: auto (shared on PostgreSQL, local on SQLite) | local (this
    # process times every watch: one worker) | shared (due watches leased from the database, see
    # tracker/workers.py). A killed worker's watches are taken over after `lease`.
    coordination: str = "auto"
    lease: str = "15s"


@dataclass(frozen=True)
class EstimateSettings:
    seq_len_cap: int = 2048
    lora_rank: int = 16
    # "all-linear" (every linear layer but the head), or module names as PEFT's target_modules
    lora_targets: tuple[str, ...] = ("all-linear",)

    @property
    def targets(self) -> str | tuple[str, ...]:
        """The LoRA targets as the estimator takes them: "all-linear" or the module names."""
        return "all-linear" if self.lora_targets == ("all-linear",) else self.lora_targets


@dataclass(frozen=True)
class LogSettings:
    level: str = "info"
    format: str = "auto"  # auto | json | console


@dataclass(frozen=True)
class WatchSpec:
    repo: str
    branch: str = "main"
    interval: str = ""  # empty: [poll] default_interval


@dataclass(frozen=True)
class WebhookSpec:
    url: str
    format: str = "generic"
    secret_env: str = ""
    repos: tuple[str, ...] = ("*",)
    kinds: tuple[str, ...] = ()
    min_severity: str = "notice"


@dataclass(frozen=True)
class Settings:
    hub: HubSettings = field(default_factory=HubSettings)
    storage: StorageSettings = field(default_factory=StorageSettings)
    osv: OsvSettings = field(default_factory=OsvSettings)
    server: ServerSettings = field(default_factory=ServerSettings)
    poll: PollSettings = field(default_factory=PollSettings)
    log: LogSettings = field(default_factory=LogSettings)
    estimate: EstimateSettings = field(default_factory=EstimateSettings)
    delivery: DeliverySettings = field(default_factory=DeliverySettings)
    watch: tuple[WatchSpec, ...] = ()
    webhooks: tuple[WebhookSpec, ...] = ()
    hub_token: str | None = field(default=None, repr=False)
    # [[webhooks]] signing secrets read from their secret_env variables: name -> value.
    webhook_secrets: Mapping[str, str] = field(default_factory=dict, repr=False)
    # [server] secrets read from the variables its *_env settings name.
    api_token: str | None = field(default=None, repr=False)
    read_token: str | None = field(default=None, repr=False)
    hub_webhook_secret: str | None = field(default=None, repr=False)
    source: str = "built-in defaults"

    @property
    def database_url(self) -> str:
        if self.storage.url:
            return self.storage.url
        return f"sqlite:///{Path(self.storage.data_dir).expanduser() / 'hubwatch.db'}"

    @property
    def default_interval_s(self) -> int:
        return parse_interval(self.poll.default_interval, "[poll] default_interval")

    def interval_s(self, spec: WatchSpec) -> int:
        return parse_interval(spec.interval or self.poll.default_interval, f"[[watch]] {spec.repo} interval")


_SECTIONS: dict[str, type] = {
    "hub": HubSettings,
    "storage": StorageSettings,
    "osv": OsvSettings,
    "server": ServerSettings,
    "poll": PollSettings,
    "log": LogSettings,
    "estimate": EstimateSettings,
    "delivery": DeliverySettings,
}


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
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError as err:
            raise ConfigError(f"config file {path} does not exist") from err
        except tomllib.TOMLDecodeError as err:
            raise ConfigError(f"config file {path} is not valid TOML: {err}") from err
        except (OSError, UnicodeDecodeError) as err:
            raise ConfigError(f"cannot read config file {path}: {err}") from err
        source = str(path)
    return settings_from_mapping(raw, env, source)


def settings_from_mapping(raw: Mapping[str, Any], env: Mapping[str, str], source: str = "<mapping>") -> Settings:
    unknown = set(raw) - set(_SECTIONS) - {"watch", "webhooks"}
    if unknown:
        raise ConfigError(f"{source}: unknown section(s) {', '.join(sorted(unknown))}")
    sections: dict[str, Any] = {}
    for name, cls in _SECTIONS.items():
        values = raw.get(name, {})
        if not isinstance(values, dict):
            raise ConfigError(f"{source}: [{name}] must be a table")
        sections[name] = _build_section(name, cls, values, env, source)
    hub = sections["hub"]
    if "endpoint" not in raw.get("hub", {}) and not env.get("HUBWATCH_HUB_ENDPOINT") and env.get("HF_ENDPOINT"):
        hub = replace(hub, endpoint=env["HF_ENDPOINT"])
    hub = replace(hub, endpoint=hub.endpoint.rstrip("/"))
    if not re.match(r"^https?://", hub.endpoint):
        raise ConfigError(f"{source}: [hub] endpoint must be an http(s) URL, got {hub.endpoint!r}")
    sections["hub"] = hub
    settings = Settings(
        **sections,
        watch=tuple(_watch_spec(item, source) for item in _array(raw, "watch", source)),
        webhooks=tuple(_webhook_spec(item, source) for item in _array(raw, "webhooks", source)),
        hub_token=env.get(hub.token_env) or None,
        api_token=_from_env(env, sections["server"].api_token_env),
        read_token=_from_env(env, sections["server"].read_token_env),
        hub_webhook_secret=_from_env(env, sections["server"].hub_webhook_secret_env),
        source=source,
    )
    settings = replace(settings, webhook_secrets=_webhook_secrets(settings.webhooks, env, source))
    _validate(settings, source)
    return settings


def _from_env(env: Mapping[str, str], name: str) -> str | None:
    """The value of the variable a `*_env` setting names (None when unnamed, unset or empty)."""
    return (env.get(name) or None) if name else None


def _build_section(name: str, cls: type, values: dict[str, Any], env: Mapping[str, str], source: str) -> Any:
    known = {f.name: f for f in fields(cls)}
    unknown = set(values) - set(known)
    if unknown:
        raise ConfigError(f"{source}: unknown setting(s) in [{name}]: {', '.join(sorted(unknown))}")
    merged = dict(values)
    for key in known:
        env_key = f"HUBWATCH_{name.upper()}_{key.upper()}"
        if env_key in env:
            merged[key] = env[env_key]
    kwargs = {}
    for key, value in merged.items():
        kwargs[key] = _coerce(value, type(getattr(cls(), key)), f"[{name}] {key}")
    return cls(**kwargs)


def _coerce(value: Any, target: type, key: str) -> Any:
    try:
        if target is bool:
            if isinstance(value, str):
                if value.lower() in {"1", "true", "yes", "on"}:
                    return True
                if value.lower() in {"0", "false", "no", "off"}:
                    return False
                raise ValueError(value)
            return bool(value)
        if target is int and isinstance(value, bool | float):
            raise ValueError(value)
        if target is tuple:  # a TOML array, or a comma-separated string from the environment
            if isinstance(value, str):
                return tuple(item.strip() for item in value.split(",") if item.strip())
            if not isinstance(value, list | tuple):
                raise ConfigError(f"{key}: expected a list, got {value!r}")
        return target(value)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{key}: expected {target.__name__}, got {value!r}") from err


def _array(raw: Mapping[str, Any], key: str, source: str) -> list[dict[str, Any]]:
    items = raw.get(key, [])
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise ConfigError(f"{source}: [[{key}]] must be an array of tables")
    return items


def _watch_branch(value: object, source: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{source}: [[watch]] branch must be a string, got {value!r}")
    try:
        return validate_branch(value)
    except ConfigError as err:
        raise ConfigError(f"{source}: [[watch]] branch: {err}") from err


def _watch_spec(item: dict[str, Any], source: str) -> WatchSpec:
    allowed = {f.name for f in fields(WatchSpec)}
    if set(item) - allowed:
        raise ConfigError(f"{source}: unknown setting(s) in [[watch]]: {', '.join(sorted(set(item) - allowed))}")
    if "repo" not in item:
        raise ConfigError(f"{source}: a [[watch]] entry has no repo")
    spec = WatchSpec(
        repo=validate_repo_id(str(item["repo"])),
        branch=_watch_branch(item.get("branch", "main"), source),
        interval=str(item.get("interval", "")),
    )
    if spec.interval:
        parse_interval(spec.interval, f"[[watch]] {spec.repo} interval")
    return spec


def _webhook_spec(item: dict[str, Any], source: str) -> WebhookSpec:
    allowed = {f.name for f in fields(WebhookSpec)}
    if set(item) - allowed:
        raise ConfigError(
            f"{source}: unknown setting(s) in [[webhooks]]: {', '.join(sorted(set(item) - allowed))}"
        )
    if "url" not in item:
        raise ConfigError(f"{source}: a [[webhooks]] entry has no url")
    spec = WebhookSpec(
        url=str(item["url"]),
        format=str(item.get("format", "generic")),
        secret_env=str(item.get("secret_env", "")),
        repos=tuple(str(r) for r in item.get("repos", ["*"])),
        kinds=tuple(str(k) for k in item.get("kinds", [])),
        min_severity=str(item.get("min_severity", "notice")),
    )
    if spec.format not in WEBHOOK_FORMATS:
        raise ConfigError(f"{source}: [[webhooks]] format must be one of {', '.join(WEBHOOK_FORMATS)}")
    if spec.min_severity not in SEVERITIES:
        raise ConfigError(f"{source}: [[webhooks]] min_severity must be one of {', '.join(SEVERITIES)}")
    if spec.format in kinds.HTTP_WEBHOOK_FORMATS and not re.match(r"^https?://", spec.url):  # apprise: checked with its subscription
        raise ConfigError(f"{source}: [[webhooks]] url must be an http(s) URL, got {spec.url!r}")
    if spec.format in kinds.SIGNED_WEBHOOK_FORMATS and not spec.secret_env:
        raise ConfigError(f"{source}: [[webhooks]] {spec.format} webhooks are signed: set secret_env (a variable holding whsec_...)")
    return spec


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


def _validate(settings: Settings, source: str) -> None:
    poll = settings.poll
    for key in ("default_interval", "jitter", "retry_min", "retry_max", "listing_interval", "reconcile_interval", "lease"):
        value = getattr(poll, key)
        if key == "jitter" and str(value).strip() in {"0", "0s"} or key == "reconcile_interval" and value == "auto":
            continue
        parse_interval(value, f"[poll] {key}")
    if poll.coordination not in {"auto", "local", "shared"}:
        raise ConfigError(f"{source}: [poll] coordination must be auto, local or shared, got {poll.coordination!r}")
    if not 3 <= parse_interval(poll.lease, "[poll] lease") <= 600:
        raise ConfigError(f"{source}: [poll] lease must be 3s-10m, got {poll.lease!r}")
    if poll.listing not in {"auto", "on", "off"}:
        raise ConfigError(f"{source}: [poll] listing must be auto, on or off, got {poll.listing!r}")
    if poll.listing_min_watches < 0:
        raise ConfigError(f"{source}: [poll] listing_min_watches must not be negative")
    hub = settings.hub
    if hub.api_requests_per_5min < 0 or hub.resolve_requests_per_5min < 0:
        raise ConfigError(f"{source}: [hub] api_requests_per_5min and resolve_requests_per_5min must not be negative (0: no budget)")
    if poll.max_file_mb < 1:
        raise ConfigError(f"{source}: [poll] max_file_mb must be at least 1")
    if poll.chat_template_timeout_s <= 0:
        raise ConfigError(f"{source}: [poll] chat_template_timeout_s must be positive")
    if not 0 <= settings.server.port < 65536:
        raise ConfigError(f"{source}: [server] port must be 0-65535 (0: any free port)")
    if settings.server.public_url and not re.match(r"^https?://[^\s/]+", settings.server.public_url):
        raise ConfigError(f"{source}: [server] public_url must be an http(s) URL, got {settings.server.public_url!r}")
    if not 1 <= settings.estimate.seq_len_cap <= 1_048_576:
        raise ConfigError(f"{source}: [estimate] seq_len_cap must be between 1 and 1048576")
    if not 1 <= settings.estimate.lora_rank <= 4096:
        raise ConfigError(f"{source}: [estimate] lora_rank must be between 1 and 4096")
    targets = settings.estimate.lora_targets
    if (not targets or not all(isinstance(t, str) and t.strip() for t in targets)
            or "all-linear" in targets and len(targets) > 1):
        raise ConfigError(f'{source}: [estimate] lora_targets must be "all-linear" or a list of module names, '
                          f"got {list(targets)!r}")
    if settings.log.format not in {"auto", "json", "console"}:
        raise ConfigError(f"{source}: [log] format must be auto, json or console")
    if settings.log.level.lower() not in {"debug", "info", "warning", "error"}:
        raise ConfigError(f"{source}: [log] level must be debug, info, warning or error")
    seen = set()
    for spec in settings.watch:
        if (spec.repo, spec.branch) in seen:
            raise ConfigError(f"{source}: {spec.repo}@{spec.branch} is watched twice")
        seen.add((spec.repo, spec.branch))
    _validate_delivery(settings, source)
    _validate_osv(settings, source)


def _validate_delivery(settings: Settings, source: str) -> None:
    delivery = settings.delivery
    if not 0 < delivery.timeout_s <= 300:
        raise ConfigError(f"{source}: [delivery] timeout_s must be between 0 and 300 seconds")
    if not 0 < delivery.connect_timeout_s <= delivery.timeout_s:
        raise ConfigError(f"{source}: [delivery] connect_timeout_s must be positive and at most timeout_s")
    if not 0 <= delivery.max_attempts <= 50:
        raise ConfigError(f"{source}: [delivery] max_attempts must be 1-50 (deprecated: use retry_schedule)")
    if len(delivery.retry_schedule) > 50:
        raise ConfigError(f"{source}: [delivery] retry_schedule has more than 50 delays")
    try:
        delays = delivery.retry_delays_s
    except ConfigError as err:
        raise ConfigError(f"{source}: {err} (retry_schedule is a list of durations like [\"5s\", \"5m\", \"2h\"])") from err
    if sum(delays) > 30 * 86400:
        raise ConfigError(f"{source}: [delivery] retry_schedule adds up to more than 30 days")
    if not 1 <= delivery.lease_s <= 600:
        raise ConfigError(f"{source}: [delivery] lease_s must be 1-600 seconds")
    if delivery.retry_after_max_s < 1:
        raise ConfigError(f"{source}: [delivery] retry_after_max_s must be at least 1")
    if not 1 <= delivery.concurrency <= 64:
        raise ConfigError(f"{source}: [delivery] concurrency must be 1-64")
    if not 0 < delivery.poll_interval_s <= 3600:
        raise ConfigError(f"{source}: [delivery] poll_interval_s must be positive")
    hooks = set()
    for spec in settings.webhooks:
        if (spec.url, spec.format) in hooks:
            raise ConfigError(f"{source}: [[webhooks]] {spec.format} webhook to the same url is listed twice")
        hooks.add((spec.url, spec.format))


def _validate_osv(settings: Settings, source: str) -> None:
    osv = settings.osv
    for key in ("recheck_interval", "retry_pending_interval"):
        parse_interval(getattr(osv, key), f"[osv] {key}")
    if osv.timeout_s <= 0 or osv.backoff_s < 0 or osv.max_backoff_s < 0:
        raise ConfigError(f"{source}: [osv] timeout_s must be positive, backoff_s and max_backoff_s not negative")
    if osv.max_attempts < 1 or osv.max_pages < 1:
        raise ConfigError(f"{source}: [osv] max_attempts and max_pages must be at least 1")
    if not re.match(r"^https?://", osv.api_url):
        raise ConfigError(f"{source}: [osv] api_url must be an http(s) URL, got {osv.api_url!r}")
