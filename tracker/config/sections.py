"""The [tables] of the config file, one frozen model each, validated once at load. Durations keep the
text they were written in and carry their seconds, parsed then, as `<key>_s`."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

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
    endpoint: str = Field(PUBLIC_HUB, description=(
        "The Hub to talk to. When neither this nor HUBWATCH_HUB_ENDPOINT is set, HF_ENDPOINT is honoured."))
    token_env: str = Field("HF_TOKEN", description=(
        "The name of the environment variable holding the Hub token; the token is never stored in the config file."))
    timeout_s: float = Field(30.0, description="Seconds to wait for one Hub request.")
    api_requests_per_5min: int = Field(1000, description=(
        "The API calls one process may make per 5-minute window, shared by every job (polls, listing, reconcile); a free "
        "account's quota by default. RateLimit headers the Hub sends take precedence; 0 turns the budget off. When the "
        "watch list needs more, every interval is stretched alike."))
    resolve_requests_per_5min: int = Field(5000, description=(
        "The file resolves (downloads) one process may make per 5-minute window, as for api_requests_per_5min; 0 turns the "
        "budget off."))

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
    url: str = Field("", description=(
        "Database URL (sqlite:///hubwatch.db, postgresql+psycopg://user@host/db). Empty: a SQLite file (WAL mode) named "
        "hubwatch.db under data_dir."))
    data_dir: str = Field("~/.local/share/hubwatch", description="Where hubwatch keeps its files (the default SQLite database among them).")


class OsvSettings(Section):
    table: ClassVar[str] = "osv"
    api_url: str = Field("https://api.osv.dev", description="The OSV API used for advisories.")
    enabled: bool = Field(True, description=(
        "false: never ask OSV (facts, hubwatch's own advisories and advice from cached records still work)."))
    timeout_s: float = Field(30.0, description="Seconds to wait for one OSV answer.")
    max_attempts: int = Field(4, description="Tries per request when OSV times out or answers 429 or 5xx.")
    backoff_s: float = Field(2.0, description="Seconds to wait before the second try, doubling for each try after it.")
    max_backoff_s: float = Field(60.0, description="The longest wait between tries (a 429's Retry-After is honoured up to this).")
    max_pages: int = Field(20, description="querybatch pages followed per query before the rest is cut (and the cut recorded).")
    recheck_interval: str = Field("1d", description=(
        "How often every watched repo's head is re-checked for new or modified advisories (a duration)."))
    retry_pending_interval: str = Field("15m", description=(
        "How often revisions ingested while OSV was unavailable are asked about again (a duration)."))

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
    host: str = Field("127.0.0.1", description=(
        "The address `hubwatch run` and `hubwatch serve` listen on: feeds, pages, the JSON API, Hub webhooks, health and "
        "metrics."))
    port: int = Field(8600, description="The port they listen on; 0 takes any free port (logged at start).")
    public_url: str = Field("", description=(
        "The URL readers reach this server at (behind a reverse proxy: its public URL), used for feed links and webhook "
        "links. Empty: the URL each request came in on."))
    api_token_env: str = Field("HUBWATCH_API_TOKEN", description=(
        "The name of the environment variable holding the bearer token API writes need (watches, subscriptions); while that "
        "variable is unset or empty, writes are refused."))
    read_token_env: str = Field("", description=(
        "Empty: feeds, pages and API reads are open. Else the name of a variable holding a read token that reads then need "
        "(as a bearer token or ?token=; the API token is accepted too); health stays open."))
    hub_webhook_secret_env: str = Field("HUBWATCH_HUB_WEBHOOK_SECRET", description=(
        "The name of the variable holding the secret configured on the Hub webhook (sent in X-Webhook-Secret); while it is "
        "unset or empty, POST /hooks/hub is refused."))

    @model_validator(mode="after")
    def _rules(self) -> Self:
        if not 0 <= self.port < 65536:
            raise problem("[server] port must be 0-65535 (0: any free port)")
        if self.public_url and not re.match(r"^https?://[^\s/]+", self.public_url):
            raise problem(f"[server] public_url must be an http(s) URL, got {self.public_url!r}")
        return self


class PollSettings(Section):
    table: ClassVar[str] = "poll"
    default_interval: str = Field("15m", description=(
        "How often a watch that sets no interval of its own is polled (a duration: 30s, 15m, 1h, 1d or seconds)."))
    jitter: str = Field("30s", description=(
        "The most random delay added to each scheduled poll, so many watches do not fire at once (\"0\" for none)."))
    max_file_mb: int = Field(64, description=(
        "Tracked files larger than this many MB are not downloaded; they are compared by content id only."))
    chat_template_timeout_s: float = Field(2.0, description=(
        "Wall-time limit in seconds for one render of a chat template in the sandbox (each sample, each engine): a "
        "render past it is stopped and noted on the change."))
    retry_min: str = Field("1m", description=(
        "After a failed poll the daemon waits this long, doubling per consecutive failure (a 429 waits what the Hub asked "
        "instead); `hubwatch poll` always tries at once."))
    retry_max: str = Field("6h", description="The longest wait between retries of a failing watch.")
    park_after: int = Field(3, description=(
        "A watch whose repo is gone (deleted or private) or disabled is no longer polled on its own after this many polls "
        "in a row found it so (0: never parked): the listing or a Hub webhook showing the repo again wakes it, and it is "
        "still checked every parked_recheck."))
    parked_recheck: str = Field("7d", description="How often a parked watch (see park_after) is still polled on its own.")
    on_move: str = Field("follow", description=(
        "A watched repo renamed on the Hub: follow (the watch and its whole history move to the new name, and the old "
        "name's feeds, pages and API redirect there) or stop (the watch fails in state moved, saying the new name, until "
        "you watch it)."))
    listing: str = Field("auto", description=(
        "Change detection by listing the Hub's models sorted by last modification, polling only the watched repos that "
        "moved: auto (from listing_min_watches watches, or when an ORG/* is followed), on or off."))
    listing_min_watches: int = Field(20, description="With listing = auto, the number of watches from which the listing is used.")
    listing_interval: str = Field("1m", description="How often the listing pass runs (a duration).")
    reconcile_interval: str = Field("auto", description=(
        "In listing mode, how often each watch is still polled on its own, to catch what a listing cannot see (private or "
        "gated repos, renames). auto: a day, longer from 1,440 covered watches on, so that reconciling costs a request a "
        "minute at most."))
    # shared coordination: tracker/polling/shared.py
    coordination: str = Field("auto", description=(
        "Several `hubwatch run` workers on one database: auto (shared on PostgreSQL, local on SQLite), local (this process "
        "times every watch) or shared (due watches are leased from the database)."))
    lease: str = Field("15s", description=(
        "With shared coordination, how long before a killed worker's watches are taken over (3s to 10m; renewed every third "
        "of it while a poll runs)."))

    @model_validator(mode="after")
    def _rules(self) -> Self:
        for key in ("default_interval", "jitter", "retry_min", "retry_max", "listing_interval", "reconcile_interval", "lease",
                    "parked_recheck"):
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
        if self.on_move not in {"follow", "stop"}:
            raise problem(f"[poll] on_move must be follow or stop, got {self.on_move!r}")
        if self.park_after < 0:
            raise problem("[poll] park_after must not be negative")
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
    def parked_recheck_s(self) -> int:
        return self._seconds["parked_recheck"]

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
    seq_len_cap: int = Field(2048, description="Sequence length for memory estimates: the model's max_position_embeddings, capped at this.")
    lora_rank: int = Field(16, description="The rank of the LoRA and QLoRA adapters the fine-tuning figures assume.")
    lora_targets: tuple[str, ...] = Field(("all-linear",), description=(
        "The linear layers LoRA adapts: \"all-linear\" (every one but the head) or module names as PEFT's target_modules, "
        "e.g. [\"q_proj\", \"v_proj\"]."))
    serve_contexts: tuple[int, ...] = Field((), description=(
        "Serving figures: context lengths (tokens) priced beside 8k, 32k and the model's full context."))
    kv_dtype: str = Field("auto", description="The KV cache's dtype in serving figures: auto (the model's own), bf16, fp16 or fp8.")
    gpu_memory_utilization: float = Field(0.9, description=(
        "The share of each card the serving runtime may use (vLLM's gpu_memory_utilization)."))

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


class CostSettings(Section):
    """The run `hubwatch estimate --cost`, the revision page and cost events price (estimator/cost.py), and the
    card table's overrides (estimator/cards.py)."""

    table: ClassVar[str] = "cost"
    epochs: int = Field(10, description="Training cost: epochs per run (the seed pages' 10).")
    batch: int = Field(32, description="Training cost: samples per optimizer step; where a card holds fewer, "
                                       "micro-batches accumulate to it.")
    samples: int = Field(50_000, description="Training cost: samples in the dataset, each at the estimate's input shape.")
    serve_prompt_tokens: int = Field(1024, description="Serving cost: prompt tokens per request (prefilled).")
    serve_output_tokens: int = Field(256, description="Serving cost: tokens generated per request (decoded).")
    cards: tuple[str, ...] = Field((), description=(
        "Overrides of the card table, each \"CARD:field=value\" with field usd_per_hour (\"none\" removes the price), "
        "bandwidth_gb_s or bf16_tflops/fp16_tflops/fp32_tflops/fp8_tflops/int8_tflops, "
        "e.g. [\"A10G 24GB:usd_per_hour=1.21\"]. Stored estimates are shown at these prices (their hours and tokens/s "
        "kept, the dollars recomputed); a changed price raises no estimate.cost_changed event."))
    change_threshold: float = Field(0.10, description=(
        "The relative change in any card's training or serving cost, between a revision's estimate and its "
        "parent's, that raises an estimate.cost_changed event (0.10: 10%)."))

    @model_validator(mode="after")
    def _rules(self) -> Self:
        # Only what the configuration sets is checked against the estimator: the defaults are valid, and a command
        # that only reads the database must not load the estimator to read its configuration.
        if self.model_fields_set - {"change_threshold"}:
            from estimator import EstimateError
            from estimator.cards import with_overrides
            try:
                self.workload()
                with_overrides(self.cards)
            except EstimateError as err:
                raise problem(f"[cost] {err}") from None
        if not 0 < self.change_threshold <= 100:
            raise problem("[cost] change_threshold must be above 0 (a fraction: 0.10 is 10%)")
        return self

    def workload(self) -> Any:
        """The run priced, as the estimator takes it (estimator.cost.Workload)."""
        from estimator.cost import Workload
        return Workload(epochs=self.epochs, batch=self.batch, samples=self.samples,
                        prompt_tokens=self.serve_prompt_tokens, output_tokens=self.serve_output_tokens)

    def card_table(self) -> Any:
        """The card table with this configuration's overrides applied (estimator.cards)."""
        from estimator.cards import with_overrides
        return with_overrides(self.cards)


class LogSettings(Section):
    table: ClassVar[str] = "log"
    level: str = Field("info", description="The lowest level logged: debug, info, warning or error.")
    format: str = Field("auto", description="auto (console on a terminal, JSON lines otherwise), json or console.")

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
    allow_private_targets: bool = Field(False, description=(
        "true: webhook URLs may resolve to loopback, private, link-local or other non-public addresses. Set only when every "
        "webhook target is trusted (a CI on your own network)."))
    apprise_allow_plugins: tuple[str, ...] = Field((), description=(
        "Apprise services (by scheme, e.g. [\"syslog\"]) allowed although hubwatch cannot tell which server they connect to; "
        "their connections are still checked as they are made."))
    apprise_allow_insecure_tls: bool = Field(False, description="true: Apprise URLs may turn TLS certificate checks off (verify=no).")
    timeout_s: float = Field(15.0, description="Seconds one delivery may take in all. Redirects are never followed.")
    connect_timeout_s: float = Field(5.0, description="Seconds one delivery may take to connect (at most timeout_s).")
    # durations as written: text like "5m", or a number of seconds
    retry_schedule: tuple[str | int | float, ...] = Field(("5s", "5m", "30m", "2h", "5h", "10h", "14h", "20h", "24h"), description=(
        "The waits between tries of a failed delivery (the first try is at once): durations, at most 50, adding up to at "
        "most 30 days; the Standard Webhooks schedule by default. An empty list: one try only."))
    max_attempts: int = Field(0, description="Deprecated, use retry_schedule. 0 leaves the schedule alone; N means N tries in all.")
    retry_after_max_s: float = Field(3600.0, description=(
        "A receiver's Retry-After (429 or 5xx) is honoured up to this many seconds; such a wait does not use up a step of "
        "the schedule."))
    concurrency: int = Field(4, description=(
        "Endpoints delivered to in parallel; each endpoint gets its deliveries one at a time, oldest first."))
    poll_interval_s: float = Field(1.0, description=(
        "Seconds between the dispatcher's safety looks for due deliveries (deliveries normally start the moment their event "
        "commits)."))
    lease_s: float = Field(6.0, description=(
        "Seconds a dispatcher's claim on an endpoint lasts without a heartbeat: a killed worker's deliveries are taken over "
        "after at most this long."))
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
    pickle_rules: str = Field("", description=(
        "A TOML file of extra `dangerous` and `safe` callables for the pickle scan, read at start and again whenever it is "
        "saved; empty: the built-in rules only."))
    rejudge_interval: str = Field("10m", description=(
        "How often `hubwatch run` judges stored pickle verdicts again when the rules changed (a duration)."))
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
                DeliverySettings, ScanSettings, CostSettings)
}
