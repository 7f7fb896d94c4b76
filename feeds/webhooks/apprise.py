"""The apprise format: one notification through Apprise (the `apprise` library) to the service its URL
names: `mailto://`, `tgram://`, `msteams://`, `ntfys://`, `matrix://`, `json://` and the rest of Apprise's
list. The message is the event's title and a short plain-text body ending with the link.

- Addresses: Apprise itself reads the URL when the subscription is made and before every attempt; a
  scheme it does not know, or a URL it cannot read, is refused. Where the URL names the server Apprise
  connects to (every service whose Apprise URL template has a `{host}`: json://, xml://, form://,
  ntfy(s)://host/topic, matrix(s)://, gotify://, apprise://, mailto:// with its SMTP server, ...), that
  host goes through the webhook address policy (feeds.webhooks.safety.vet); services at fixed cloud
  endpoints (tgram://, msteams://, ntfy://topic on ntfy.sh) have no host of the user's to check.
- Sending: Apprise's notify() blocks, so it runs in a thread of its own, bounded by the delivery
  time-out (Apprise's own call deadline, and a join that gives up waiting). It follows no redirect,
  stores nothing on disk and loads no plugin from the user's directories. Success, failure and time-out
  come back as `Sent`; `deliver` maps them into the same retry schedule and delivery log as an HTTP
  failure (a failure is retried as an endpoint that is down).
- Secrets: Apprise URLs carry passwords and tokens. Errors are scrubbed of every part of the URL that
  can be one before they reach the delivery log, and Apprise's own log records are kept out of ours.

Not covered, unlike webhooks: Apprise resolves the host again when it connects, so an apprise delivery
is not pinned to the address that was checked; and Apprise does not show the HTTP status, so a 410 or a
Retry-After is not seen: every failure is retried on the schedule.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import Any, Protocol

from feeds.webhooks.chat_text import visible
from feeds.webhooks.formats import Attempt, Links, WebhookFormat
from feeds.webhooks.safety import Resolver, UnresolvableTarget, system_resolve
from feeds.webhooks.safety import vet as vet_http
from storage.errors import InvalidSubscription
from storage.models import Event
from storage.subscriptions import redact_url, validate_url

CONTENT_TYPE = "application/json"  # what `render` gives: the title and body Apprise sends
MAX_TITLE = 250
MAX_LINE = 300
MAX_SUMMARIES = 5
MAX_ERROR = 500
JOIN_GRACE_S = 1.0  # how long past its own deadline an Apprise call is waited for before it is given up
_NOTIFY_TYPES = {"info": "info", "notice": "info", "warning": "warning", "critical": "failure"}
_NO_HOST_MODES = frozenset({"cloud", "t2bot"})  # ntfy://topic (ntfy.sh), matrix://token?mode=t2bot
_MIN_SECRET = 3  # URL parts shorter than this are not scrubbed from errors (they would eat ordinary words)


@dataclass(frozen=True)
class Message:
    title: str
    body: str
    notify_type: str = "info"


@dataclass(frozen=True)
class Sent:
    """What one Apprise call came to. `error` is already scrubbed of the URL's secrets."""

    ok: bool
    error: str | None = None
    timed_out: bool = False


class ConfigEntry(Protocol):
    """A [[webhooks]] entry as tracker.config.WebhookSpec has it."""

    url: str
    format: str


# -- the message ----------------------------------------------------------------------------------


def _text(value: object, limit: int) -> str:
    """Repo text on one line, control characters visible, `@` unable to mention anyone, cut to `limit`."""
    text = visible(value, newlines=False).replace("@", "@\u200b")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def message(event: Event, links: Links) -> Message:
    """The event's title, then a short body: repo and severity, the commit title, a few change
    summaries, and the link (our revision page, else the commit on the Hub)."""
    extra = event.payload or {}
    meta = f"{_text(event.repo_id, 200)} · severity {_text(event.severity, 20)}"
    if event.sha:
        meta += f" · {event.sha[:12]}"
    if event.security:
        meta += " · security-relevant"
    lines = [meta]
    if extra.get("commit_title"):
        lines.append(f"Commit: {_text(extra['commit_title'], MAX_LINE)}")
    summaries = list(extra.get("summaries") or [])
    lines += [f"• {_text(s, MAX_LINE)}" for s in summaries[:MAX_SUMMARIES]]
    if len(summaries) > MAX_SUMMARIES:
        lines.append(f"… and {len(summaries) - MAX_SUMMARIES} more change(s)")
    lines.append(links.primary(event))
    return Message(_text(event.title, MAX_TITLE), "\n".join(lines), _NOTIFY_TYPES.get(event.severity, "info"))


def render(event: Event, links: Links) -> bytes:
    """The message as JSON (`title`, `body`, `type`): what a preview shows; Apprise gets the fields."""
    msg = message(event, links)
    return json.dumps({"title": msg.title, "body": msg.body, "type": msg.notify_type},
                      ensure_ascii=True, separators=(",", ":")).encode("ascii")


# -- the address ----------------------------------------------------------------------------------


_LOADING = threading.Lock()


@cache
def _library() -> ModuleType:
    """Apprise, imported on first use (0.4 s): only servers that send apprise notifications pay for it.
    Its log records can carry tokens (its debug lines print payloads and headers): they stay in its own
    logger, and reach ours only through the scrubbed errors of `send`."""
    with _LOADING:
        import apprise

        records = logging.getLogger("apprise")
        if records.propagate:
            records.propagate = False
            records.addHandler(logging.NullHandler())
        return apprise


def _asset() -> Any:
    """Nothing on disk (no persistent store, result logs kept in memory), no redirects, one service at a time."""
    lib = _library()
    return lib.AppriseAsset(storage_mode="memory", result_log_disk_size=0, async_mode=False, http_redirects=False,
                            plugin_paths=[])


def parse(url: str) -> Any:
    """Apprise's plugin for the URL; InvalidSubscription when the scheme is unknown or Apprise cannot read it."""
    validate_url(url, "apprise")
    lib = _library()
    scheme = url.partition("://")[0].lower()
    if scheme not in _schemes():
        hint = " (Teams: workflows://, Microsoft retired the connectors msteams:// used)" if scheme == "msteams" else ""
        raise InvalidSubscription(f"Apprise knows no {scheme}:// service{hint}")
    plugin = lib.Apprise.instantiate(url, asset=_asset(), suppress_exceptions=True)
    if plugin is None:
        raise InvalidSubscription(
            f"Apprise cannot read this {scheme}:// URL (the service's URL forms: https://github.com/caronc/apprise/wiki)"
        )
    plugin.redirects = False  # a redirect could lead past the address policy
    return plugin


@cache
def _schemes() -> frozenset[str]:
    lib = _library()
    manager = lib.NotificationManager()
    return frozenset(s.lower() for s in manager.schemas())


def target(plugin: Any) -> tuple[str, int] | None:
    """The host and port Apprise will connect to when the URL names one (its template has a `{host}`),
    else None (a cloud service at a fixed address)."""
    templates = getattr(type(plugin), "templates", ()) or ()
    if not any("{host}" in t for t in templates):
        return None
    if getattr(plugin, "mode", None) in _NO_HOST_MODES:
        return None
    host = str(getattr(plugin, "smtp_host", None) or plugin.host or "").strip("[]")
    if not host:
        return None
    port = plugin.port if isinstance(plugin.port, int) and plugin.port else (443 if plugin.secure else 80)
    return host, port


def vet(url: str, allow_private: bool, resolve: Resolver = system_resolve) -> None:
    """Before an attempt: Apprise reads the URL, and the host it names passes the address policy. Raises
    InvalidSubscription (unreadable), safety.UnsafeTarget (refused address) or UnresolvableTarget."""
    host = target(parse(url))
    if host is None:
        return
    name, port = host
    netloc = f"[{name}]" if ":" in name else name
    vet_http(f"http://{netloc}:{port}/", allow_private, resolve)


def check_url(url: str, allow_private: bool, resolve: Resolver = system_resolve) -> None:
    """For subscription time: an unreadable URL, an unresolvable host or a refused address is an error."""
    try:
        vet(url, allow_private, resolve)
    except UnresolvableTarget as err:
        raise InvalidSubscription(str(err)) from err


def check_config_entries(entries: Iterable[ConfigEntry]) -> None:
    """The config file's apprise [[webhooks]] are URLs Apprise can read (their addresses are checked at
    each delivery, as for every config webhook); InvalidSubscription names the entry."""
    for number, entry in enumerate(entries, start=1):
        if entry.format != "apprise":
            continue
        try:
            parse(entry.url)
        except InvalidSubscription as err:
            raise InvalidSubscription(f"entry {number} (apprise {redact_url(entry.url)}): {err}") from err


# -- sending --------------------------------------------------------------------------------------


def deliver(url: str, event: Event, links: Links, timeout_s: float, connect_timeout_s: float) -> Attempt:
    """The event as one Apprise notification: delivered, or retried like an endpoint that did not answer,
    with Apprise's reason (scrubbed) for the delivery log."""
    sent = send(url, message(event, links), timeout_s, connect_timeout_s)
    return Attempt("delivered") if sent.ok else Attempt("retry", error=sent.error or "Apprise failed", endpoint_down=True)


def send(url: str, msg: Message, timeout_s: float, connect_timeout_s: float) -> Sent:
    """One notification, in a thread of its own, waited for at most `timeout_s` (plus a grace). Apprise is
    loaded and the URL read before the clock starts."""
    try:
        plugin = parse(url)
    except InvalidSubscription as err:
        return Sent(False, str(err))
    box: list[Sent] = []

    def call() -> None:
        try:
            box.append(_notify(plugin, url, msg, timeout_s, connect_timeout_s))
        except Exception as err:  # a plugin's bug must not kill the dispatcher's worker  # noqa: BLE001
            box.append(Sent(False, scrub(f"Apprise failed: {type(err).__name__}: {err}", url)[:MAX_ERROR]))

    thread = threading.Thread(target=call, name="apprise-notify", daemon=True)
    thread.start()
    thread.join(timeout_s + JOIN_GRACE_S)
    if not box:  # the thread goes on until the plugin's own socket time-outs end it; it writes nothing
        return Sent(False, f"no answer within {timeout_s:g} s (timed out)", timed_out=True)
    return box[0]


def _notify(plugin: Any, url: str, msg: Message, timeout_s: float, connect_timeout_s: float) -> Sent:
    lib = _library()
    plugin.socket_connect_timeout = connect_timeout_s
    plugin.socket_read_timeout = timeout_s
    notifier = lib.Apprise(asset=plugin.asset)
    notifier.add(plugin)
    with notifier.notify(body=msg.body, title=msg.title, notify_type=msg.notify_type,
                         body_format=lib.NotifyFormat.TEXT, timeout=timeout_s) as result:
        if result:
            return Sent(True)
        if result.status == lib.AppriseResultStatus.TIMEOUT:
            return Sent(False, f"no answer within {timeout_s:g} s (timed out)", timed_out=True)
        said = [entry.message for entry in result.logs() if str(entry.level).upper() in ("WARNING", "ERROR", "CRITICAL")]
        name = plugin.service_name or url.partition("://")[0]
        reason = " / ".join(dict.fromkeys(said)) or f"status {result.status.name}"
        return Sent(False, scrub(f"Apprise {name}: {reason}", url)[:MAX_ERROR])


def secrets_in(url: str) -> list[str]:
    """The parts of an Apprise URL that can be secrets: user, password, path segments, query values,
    and the host where it is a token (tgram://BOT_TOKEN/...), each as written and decoded."""
    rest = url.partition("://")[2]
    authority, _, tail = rest.partition("/")
    path, _, query = tail.partition("?")
    if "?" in authority:
        authority, _, query = authority.partition("?")
    userinfo, _, hostport = authority.rpartition("@")
    parts = re.split(r"[:@]", userinfo) if userinfo else []
    if redact_url(url).endswith("://…"):  # no host shown: the host part is a token (or a topic)
        parts.append(hostport)
        parts += hostport.split(":")
    parts += [p for p in path.split("/") if p]
    parts += [value for _, value in urllib.parse.parse_qsl(query.split("#")[0], keep_blank_values=False)]
    out = set()
    for part in parts:
        for form in (part, urllib.parse.unquote(part)):
            if len(form) >= _MIN_SECRET:
                out.add(form)
    return sorted(out, key=len, reverse=True)


def scrub(text: str, url: str) -> str:
    """`text` with every secret-looking part of `url` replaced by ****."""
    for secret in secrets_in(url):
        text = text.replace(secret, "****")
    return text


# Apprise reads and sends (vet checks the host it names and returns no address); the preview is `render`.
FORMAT = WebhookFormat("apprise", render=render, check_url=check_url, vet=vet, send=deliver, content_type=CONTENT_TYPE)
