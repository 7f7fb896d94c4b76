"""The [tables] of the config file, one frozen model each, validated once at load. Durations keep the
text they were written in and carry their seconds, parsed then, as `<key>_s`."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, PrivateAttr, field_validator, model_validator

from tracker.config.durations import parse_interval
from tracker.config.problems import problem, seconds, wrong_type
from tracker.errors import ConfigError
from tracker.formats.pickle_rules import BUILTIN, Rules, RulesFile, RulesFileError

PUBLIC_HUB = "https://huggingface.co"
_HTTP = re.compile(r"^https?://")


class Section(BaseModel):
    """One [table]: every key has a default. Values are read as the type of their default: text from the
    environment too (`"true"`, `"8600"`, a comma-separated list)."""

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)
    table: ClassVar[str]
    # the seconds of the duration keys, parsed once by the section's rules
    _seconds: dict[str, int] = PrivateAttr(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _read(cls, values: Any) -> Any:
        if isinstance(values, Section):
            return values
        if not isinstance(values, dict):
            raise problem(f"[{cls.table}] must be a table")
        unknown = set(values) - set(cls.model_fields)
        if unknown:
            raise problem(f"unknown setting(s) in [{cls.table}]: {', '.join(sorted(unknown))}")
        return {key: _as(type(cls.model_fields[key].default), value, f"[{cls.table}] {key}") for key, value in values.items()}


def _as(target: type, value: Any, key: str) -> Any:
    """`value` read as `target` (the type of the key's default)."""
    if target is tuple:  # a TOML array, or a comma-separated string from the environment
        if isinstance(value, str):
            return tuple(item.strip() for item in value.split(",") if item.strip())
        if not isinstance(value, list | tuple):
            raise wrong_type(key, value, "a list")
        return tuple(value)
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
        return target(value)
    except (TypeError, ValueError):
        raise wrong_type(key, value, target.__name__) from None


class HubSettings(Section):
    table: ClassVar[str] = "hub"
    endpoint: str = PUBLIC_HUB
    token_env: str = "HF_TOKEN"
    timeout_s: float = 30.0
    # The request budget of one process, per 5-minute window (the free-account figures; 0: no budget).
    # RateLimit headers the Hub sends take precedence.
    api_requests_per_5min: int = 1000
    resolve_requests_per_5min: int = 5000

    @field_validator("endpoint")
    @classmethod
    def _http_url(cls, endpoint: str) -> str:
        endpoint = endpoint.rstrip("/")
        if not _HTTP.match(endpoint):
            raise problem(f"[hub] endpoint must be an http(s) URL, got {endpoint!r}")
        return endpoint

    @model_validator(mode="after")
    def _rules(self) -> Self:
        if self.api_requests_per_5min < 0 or self.resolve_requests_per_5min < 0:
            raise problem("[hub] api_requests_per_5min and resolve_requests_per_5min must not be negative (0: no budget)")
        return self


class StorageSettings(Section):
    table: ClassVar[str] = "storage"
    url: str = ""  # empty: a SQLite file under data_dir
    data_dir: str = "~/.local/share/hubwatch"


class OsvSettings(Section):
    table: ClassVar[str] = "osv"
    api_url: str = "https://api.osv.dev"
    enabled: bool = True  # false: never ask OSV (facts, own advisories and cached advice still work)
    timeout_s: float = 30.0
    max_attempts: int = 4  # tries per request on time-outs, 429 and 5xx
    backoff_s: float = 2.0  # first wait between tries, doubling
    max_backoff_s: float = 60.0
    max_pages: int = 20  # querybatch pages followed per query before the rest is cut
    recheck_interval: str = "1d"  # every watched head re-checked for new or modified advisories
    retry_pending_interval: str = "15m"  # revisions ingested while OSV was down, asked again

    @model_validator(mode="after")
    def _rules(self) -> Self:
        for key in ("recheck_interval", "retry_pending_interval"):
            self._seconds[key] = seconds(getattr(self, key), f"[osv] {key}")
        if self.timeout_s <= 0 or self.backoff_s < 0 or self.max_backoff_s < 0:
            raise problem("[osv] timeout_s must be positive, backoff_s and max_backoff_s not negative")
        if self.max_attempts < 1 or self.max_pages < 1:
            raise problem("[osv] max_attempts and max_pages must be at least 1")
        if not _HTTP.match(self.api_url):
            raise problem(f"[osv] api_url must be an http(s) URL, got {self.api_url!r}")
        return self

    @property
    def recheck_interval_s(self) -> int:
        return self._seconds["recheck_interval"]

    @property
    def retry_pending_interval_s(self) -> int:
        return self._seconds["retry_pending_interval"]


class ServerSettings(Section):
    table: ClassVar[str] = "server"
    host: str = "127.0.0.1"
    port: int = 8600  # 0: any free port (logged at start)
    public_url: str = ""  # empty: links use the URL each request came in on
    api_token_env: str = "HUBWATCH_API_TOKEN"  # writes need this bearer token; unset variable: writes refused
    read_token_env: str = ""  # set: reads need this token (or the API token) too
    hub_webhook_secret_env: str = "HUBWATCH_HUB_WEBHOOK_SECRET"  # unset variable: /hooks/hub refused

    @model_validator(mode="after")
    def _rules(self) -> Self:
        if not 0 <= self.port < 65536:
            raise problem("[server] port must be 0-65535 (0: any free port)")
        if self.public_url and not re.match(r"^https?://[^\s/]+", self.public_url):
            raise problem(f"[server] public_url must be an http(s) URL, got {self.public_url!r}")
        return self


class PollSettings(Section):
    table: ClassVar[str] = "poll"
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
    # tracker/polling/shared.py). A killed worker's watches are taken over after `lease`.
    coordination: str = "auto"
    lease: str = "15s"

    @model_validator(mode="after")
    def _rules(self) -> Self:
        for key in ("default_interval", "jitter", "retry_min", "retry_max", "listing_interval", "reconcile_interval", "lease"):
            value = getattr(self, key)
            if key == "jitter" and value.strip() in {"0", "0s"}:
                self._seconds[key] = 0
            elif key != "reconcile_interval" or value != "auto":
                self._seconds[key] = seconds(value, f"[poll] {key}")
        if self.coordination not in {"auto", "local", "shared"}:
            raise problem(f"[poll] coordination must be auto, local or shared, got {self.coordination!r}")
        if not 3 <= self.lease_s <= 600:
            raise problem(f"[poll] lease must be 3s-10m, got {self.lease!r}")
        if self.listing not in {"auto", "on", "off"}:
            raise problem(f"[poll] listing must be auto, on or off, got {self.listing!r}")
        if self.listing_min_watches < 0:
            raise problem("[poll] listing_min_watches must not be negative")
        if self.max_file_mb < 1:
            raise problem("[poll] max_file_mb must be at least 1")
        if self.chat_template_timeout_s <= 0:
            raise problem("[poll] chat_template_timeout_s must be positive")
        return self

    @property
    def default_interval_s(self) -> int:
        return self._seconds["default_interval"]

    @property
    def jitter_s(self) -> int:
        """0: no jitter ("0" or "0s")."""
        return self._seconds["jitter"]

    @property
    def retry_min_s(self) -> int:
        return self._seconds["retry_min"]

    @property
    def retry_max_s(self) -> int:
        return self._seconds["retry_max"]

    @property
    def listing_interval_s(self) -> int:
        return self._seconds["listing_interval"]

    @property
    def reconcile_interval_s(self) -> int | None:
        """None: auto, from the number of watches the listing covers."""
        return self._seconds.get("reconcile_interval")

    @property
    def lease_s(self) -> int:
        return self._seconds["lease"]


KV_DTYPE_NAMES = ("auto", "bf16", "fp16", "fp8")


class EstimateSettings(Section):
    table: ClassVar[str] = "estimate"
    seq_len_cap: int = 2048
    lora_rank: int = 16
    # "all-linear" (every linear layer but the head), or module names as PEFT's target_modules
    lora_targets: tuple[str, ...] = ("all-linear",)
    # serving figures: contexts priced beside 8k, 32k and the model's full context; the KV cache's dtype
    # ("auto": the model's; bf16, fp16 or fp8); the share of each card the runtime may use (vLLM's 0.9)
    serve_contexts: tuple[int, ...] = ()
    kv_dtype: str = "auto"
    gpu_memory_utilization: float = 0.9

    @field_validator("lora_targets", mode="before")
    @classmethod
    def _module_names(cls, targets: tuple[Any, ...]) -> tuple[Any, ...]:
        if (not targets or not all(isinstance(t, str) and t.strip() for t in targets)
                or "all-linear" in targets and len(targets) > 1):
            raise problem(f'[estimate] lora_targets must be "all-linear" or a list of module names, got {list(targets)!r}')
        return targets

    @model_validator(mode="after")
    def _rules(self) -> Self:
        if not 1 <= self.seq_len_cap <= 1_048_576:
            raise problem("[estimate] seq_len_cap must be between 1 and 1048576")
        if not 1 <= self.lora_rank <= 4096:
            raise problem("[estimate] lora_rank must be between 1 and 4096")
        if any(not 1 <= n <= 10_000_000 for n in self.serve_contexts):
            raise problem("[estimate] serve_contexts must be token counts between 1 and 10000000")
        if self.kv_dtype not in KV_DTYPE_NAMES:
            raise problem(f"[estimate] kv_dtype must be one of {', '.join(KV_DTYPE_NAMES)}, got {self.kv_dtype!r}")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise problem("[estimate] gpu_memory_utilization must be above 0 and at most 1")
        return self

    @property
    def targets(self) -> str | tuple[str, ...]:
        """The LoRA targets as the estimator takes them: "all-linear" or the module names."""
        return "all-linear" if self.lora_targets == ("all-linear",) else self.lora_targets


class LogSettings(Section):
    table: ClassVar[str] = "log"
    level: str = "info"
    format: str = "auto"  # auto | json | console

    @model_validator(mode="after")
    def _rules(self) -> Self:
        if self.format not in {"auto", "json", "console"}:
            raise problem("[log] format must be auto, json or console")
        if self.level.lower() not in {"debug", "info", "warning", "error"}:
            raise problem("[log] level must be debug, info, warning or error")
        return self


class DeliverySettings(Section):
    """How `hubwatch run` delivers outbound webhooks."""

    table: ClassVar[str] = "delivery"
    allow_private_targets: bool = False
    # Apprise services (by scheme) allowed although hubwatch cannot tell which server they connect to
    apprise_allow_plugins: tuple[str, ...] = ()
    apprise_allow_insecure_tls: bool = False  # Apprise URLs may turn certificate checks off (verify=no)
    timeout_s: float = 15.0
    connect_timeout_s: float = 5.0
    # durations as written: text like "5m", or a number of seconds
    retry_schedule: tuple[str | int | float, ...] = ("5s", "5m", "30m", "2h", "5h", "10h", "14h", "20h", "24h")
    max_attempts: int = 0  # deprecated (0: unset): cuts the schedule to max_attempts - 1 retries
    retry_after_max_s: float = 3600.0
    concurrency: int = 4
    poll_interval_s: float = 1.0
    lease_s: float = 6.0  # a killed worker's deliveries are taken over after at most this long
    _retry_delays_s: tuple[int, ...] = PrivateAttr(default=())

    @field_validator("apprise_allow_plugins", mode="before")
    @classmethod
    def _schemes(cls, schemes: tuple[Any, ...]) -> tuple[str, ...]:
        """Apprise schemes as written in URLs (`zulip`, `acs`), compared in lower case."""
        if not all(isinstance(s, str) and re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]{0,31}", s.strip()) for s in schemes):
            raise problem(f'[delivery] apprise_allow_plugins must be a list of Apprise schemes like ["zulip"], got {list(schemes)!r}')
        return tuple(s.strip().lower() for s in schemes)

    @field_validator("retry_schedule", mode="before")
    @classmethod
    def _durations_only(cls, delays: tuple[Any, ...]) -> tuple[Any, ...]:
        """Anything but text and numbers (True would pass as 1) is refused as a duration."""
        for i, delay in enumerate(delays):
            if isinstance(delay, bool) or not isinstance(delay, str | int | float):
                _retry_delay_s(i, delay)
        return delays

    @model_validator(mode="after")
    def _rules(self) -> Self:
        if not 0 < self.timeout_s <= 300:
            raise problem("[delivery] timeout_s must be between 0 and 300 seconds")
        if not 0 < self.connect_timeout_s <= self.timeout_s:
            raise problem("[delivery] connect_timeout_s must be positive and at most timeout_s")
        if not 0 <= self.max_attempts <= 50:
            raise problem("[delivery] max_attempts must be 1-50 (deprecated: use retry_schedule)")
        if len(self.retry_schedule) > 50:
            raise problem("[delivery] retry_schedule has more than 50 delays")
        delays = tuple(_retry_delay_s(i, delay) for i, delay in enumerate(self.retry_schedule))
        if self.max_attempts:  # the deprecated setting keeps its meaning: max_attempts - 1 retries
            retries = self.max_attempts - 1
            delays = (delays + delays[-1:] * retries)[:retries] if delays else ()
        self._retry_delays_s = delays
        if sum(delays) > 30 * 86400:
            raise problem("[delivery] retry_schedule adds up to more than 30 days")
        if not 1 <= self.lease_s <= 600:
            raise problem("[delivery] lease_s must be 1-600 seconds")
        if self.retry_after_max_s < 1:
            raise problem("[delivery] retry_after_max_s must be at least 1")
        if not 1 <= self.concurrency <= 64:
            raise problem("[delivery] concurrency must be 1-64")
        if not 0 < self.poll_interval_s <= 3600:
            raise problem("[delivery] poll_interval_s must be positive")
        return self

    @property
    def retry_delays_s(self) -> tuple[int, ...]:
        """The schedule in seconds. A (deprecated) max_attempts keeps its old meaning: max_attempts - 1
        retries, the schedule cut short or its last delay repeated."""
        return self._retry_delays_s


def _retry_delay_s(i: int, delay: object) -> int:
    """One delay of [delivery] retry_schedule in seconds; a bad one is named by its place in the list."""
    try:
        return parse_interval(delay, f"[delivery] retry_schedule[{i}]")
    except ConfigError as err:
        raise problem(f'{err} (retry_schedule is a list of durations like ["5s", "5m", "2h"])') from None


class ScanSettings(Section):
    """How weight files are scanned: the operator's pickle rules file, read at load and again whenever it changes
    (tracker/formats/pickle_rules.RulesFile), and how often stored verdicts are judged again by `run`."""

    table: ClassVar[str] = "scan"
    # a TOML file of extra `dangerous` and `safe` callables for the pickle scan; "" for the built-in rules only
    pickle_rules: str = ""
    rejudge_interval: str = "10m"  # `run`: stored pickle verdicts judged again when the rules changed
    _file: RulesFile | None = PrivateAttr(default=None)
    _rejudge_s: int = PrivateAttr(default=600)

    @model_validator(mode="after")
    def _load_rules(self) -> Self:
        self._rejudge_s = seconds(self.rejudge_interval, "[scan] rejudge_interval")
        if self.pickle_rules:
            try:
                self._file = RulesFile(Path(self.pickle_rules).expanduser())
            except RulesFileError as err:
                raise problem(f"[scan] pickle_rules: {err}") from None
        return self

    @property
    def rules(self) -> Rules:
        """The pickle rules every scan and re-judgement uses: built-in, merged with the operator's file as last
        saved (a file that became unusable keeps the last good rules: `rules_problem`)."""
        return BUILTIN if self._file is None else self._file.current()

    @property
    def rules_problem(self) -> str | None:
        """Why the operator's rules file, changed since it was last read, could not be used; None when it could."""
        return None if self._file is None else self._file.problem

    @property
    def rejudge_interval_s(self) -> int:
        return self._rejudge_s


SECTIONS: dict[str, type[Section]] = {
    cls.table: cls
    for cls in (HubSettings, StorageSettings, OsvSettings, ServerSettings, PollSettings, LogSettings, EstimateSettings,
                DeliverySettings, ScanSettings)
}
