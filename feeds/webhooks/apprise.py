"""The apprise format: one notification through Apprise (the `apprise` library) to the service its URL
names: `mailto://`, `tgram://`, `msteams://`, `ntfys://`, `matrix://`, `json://` and the rest of Apprise's
list. The message is the event's title and a short plain-text body ending with the link.

- Addresses: Apprise itself reads the URL when the subscription is made and before every attempt; a
  scheme it does not know, or a URL it cannot read, is refused. The servers the service will connect to
  are read from Apprise's parsed plugin object, never from the URL text (feeds.webhooks.apprise_targets):
  each one a user named (json://host, ntfys://host/topic, zulip://bot@org.example.com/..., acs://.../
  endpoint, the SMTP server of mailto://, ...) goes through the webhook address policy
  (feeds.webhooks.safety.vet); services at their vendor's fixed hosts (tgram://, slack://, ntfy://topic)
  have none. A service whose server hubwatch cannot tell is refused unless the operator allows it by
  name ([delivery] apprise_allow_plugins), and a URL that turns certificate checks off (`verify=no`)
  unless [delivery] apprise_allow_insecure_tls.
- Connections: Apprise resolves names again when it connects, so the address policy is enforced again
  at that moment (feeds.webhooks.socket_guard, around notify()): a connection to a refused address is
  not made, whatever the URL said or DNS answered when the URL was checked (DNS rebinding), and the
  delivery fails and disables the subscription, as a refused webhook address does.
- Sending: Apprise's notify() blocks, so it runs in a thread of its own, bounded by the delivery
  time-out (Apprise's own call deadline, and a join that gives up waiting). It follows no redirect,
  stores nothing on disk and loads no plugin from the user's directories. Success, failure and time-out
  come back as `Sent`; `deliver` maps them into the same retry schedule and delivery log as an HTTP
  failure (a failure is retried as an endpoint that is down).
- Secrets: Apprise URLs carry passwords and tokens. Errors are scrubbed of every part of the URL that
  can be one before they reach the delivery log, and Apprise's own log records are kept out of ours.

Not covered, unlike webhooks: Apprise does not show the HTTP status, so a 410 or a Retry-After is not
seen: every failure is retried on the schedule. A plugin that connects from a thread it starts itself
(not from Apprise's workers) is outside the connect-time guard; its server is still checked before.
"""

from __future__ import annotations

import contextlib
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

from feeds.webhooks import socket_guard
from feeds.webhooks.apprise_targets import servers
from feeds.webhooks.chat_text import visible
from feeds.webhooks.formats import Attempt, Links, WebhookFormat
from feeds.webhooks.safety import Resolver, TargetPolicy, UnresolvableTarget, system_resolve
from feeds.webhooks.safety import vet as vet_http
from storage.errors import InvalidSubscription
from storage.models import Event
from storage.subscriptions import redact_url, validate_url

CONTENT_TYPE = "application/json"  # what `render` gives: the title and body Apprise sends
DEFAULT_POLICY = TargetPolicy()  # public addresses only, no undetermined services, certificate checks on
MAX_TITLE = 250
MAX_LINE = 300
MAX_SUMMARIES = 5
MAX_ERROR = 500
JOIN_GRACE_S = 1.0  # how long past its own deadline an Apprise call is waited for before it is given up
_NOTIFY_TYPES = {"info": "info", "notice": "info", "warning": "warning", "critical": "failure"}
_MIN_SECRET = 3  # URL parts shorter than this are not scrubbed from errors (they would eat ordinary words)

# The preview's fields (`render`), for the documentation: JSON path -> (JSON type, meaning). Apprise gets the same three.
FIELDS: dict[str, tuple[str, str]] = {
    "title": ("string", f"The event's title, on one line, at most {MAX_TITLE} characters."),
    "body": ("string", f"Repo, severity and commit; the commit title; the first {MAX_SUMMARIES} change summaries; the link."),
    "type": ("string", "Apprise's notify type: info (info, notice), warning (warning) or failure (critical)."),
}


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
    refused: bool = False  # a connection went to an address the policy refuses (and was not made)


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


def schemes_of(plugin: Any) -> tuple[str, ...]:
    """The schemes Apprise reads for this plugin's service (json and jsons, ...), lower case, first the URL's own."""
    found: list[str] = []
    for attr in ("protocol", "secure_protocol"):
        value = getattr(type(plugin), attr, None) or ()
        found += [value] if isinstance(value, str) else list(value)
    return tuple(dict.fromkeys(s.lower() for s in found))


def _policy_refusal(plugin: Any, scheme: str, policy: TargetPolicy) -> str | None:
    """Why the operator's policy refuses this service whatever its address, or None."""
    if getattr(plugin, "verify_certificate", True) is False and not policy.apprise_insecure_tls:
        return (f"{scheme}:// with verify=no turns certificate checks off: refused "
                "(the operator can allow it with [delivery] apprise_allow_insecure_tls)")
    if servers(plugin) is None and not policy.apprise_plugins.intersection(schemes_of(plugin)):
        return (f"hubwatch cannot tell which server Apprise's {scheme}:// service connects to: refused "
                f'(the operator can allow it with [delivery] apprise_allow_plugins = ["{scheme}"])')
    return None


def _netloc(name: str, port: int) -> str:
    return f"[{name}]:{port}" if ":" in name else f"{name}:{port}"


def vet(url: str, policy: TargetPolicy, resolve: Resolver = system_resolve) -> None:
    """Before an attempt: Apprise reads the URL; the service is one whose servers hubwatch can tell (or the
    operator allowed by name) and keeps certificate checks on (unless allowed); every server Apprise's
    parsed plugin names passes the address policy. Raises InvalidSubscription (unreadable, refused service),
    safety.UnsafeTarget (refused address) or UnresolvableTarget. Connections are checked again as they are
    made (`send`)."""
    plugin = parse(url)
    scheme = url.partition("://")[0].lower()
    why = _policy_refusal(plugin, scheme, policy)
    if why is not None:
        raise InvalidSubscription(why)
    for name, port in servers(plugin) or ():
        vet_http(f"http://{_netloc(name, port)}/", policy.allow_private, resolve)


def check_url(url: str, policy: TargetPolicy, resolve: Resolver = system_resolve) -> None:
    """For subscription time: an unreadable URL, a refused service, an unresolvable host or a refused
    address is an error."""
    try:
        vet(url, policy, resolve)
    except UnresolvableTarget as err:
        raise InvalidSubscription(str(err)) from err


def _no_dns(host: str, port: int) -> list[str]:
    """Config entries are checked without DNS: their names are resolved at each delivery."""
    raise UnresolvableTarget(host)


def check_config_entries(entries: Iterable[ConfigEntry], policy: TargetPolicy = DEFAULT_POLICY) -> None:
    """The config file's apprise [[webhooks]] are URLs Apprise can read, for services the policy takes, and
    name no server that is a refused address by itself (an IP literal in any spelling, `localhost`); host
    names are resolved and checked at each delivery, as for every config webhook. InvalidSubscription
    names the entry."""
    for number, entry in enumerate(entries, start=1):
        if entry.format != "apprise":
            continue
        try:
            vet(entry.url, policy, _no_dns)
        except UnresolvableTarget:
            continue
        except InvalidSubscription as err:
            raise InvalidSubscription(f"entry {number} (apprise {redact_url(entry.url)}): {err}") from err


# -- sending --------------------------------------------------------------------------------------


def deliver(url: str, event: Event, links: Links, timeout_s: float, connect_timeout_s: float,
            policy: TargetPolicy = DEFAULT_POLICY, resolve: Resolver = system_resolve) -> Attempt:
    """The event as one Apprise notification: delivered; failed for good (the subscription disabled) when
    a connection went to a refused address; else retried like an endpoint that did not answer, with
    Apprise's reason (scrubbed) for the delivery log."""
    sent = send(url, message(event, links), timeout_s, connect_timeout_s, policy, resolve)
    if sent.ok:
        return Attempt("delivered")
    error = sent.error or "Apprise failed"
    if sent.refused:
        return Attempt("failed", error=error, disable_reason=f"refused address: {error}")
    return Attempt("retry", error=error, endpoint_down=True)


def send(url: str, msg: Message, timeout_s: float, connect_timeout_s: float,
         policy: TargetPolicy = DEFAULT_POLICY, resolve: Resolver = system_resolve) -> Sent:
    """One notification, in a thread of its own, waited for at most `timeout_s` (plus a grace). Apprise is
    loaded and the URL read before the clock starts. Unless the policy allows private targets, every
    connection the plugin makes is checked as it is made (feeds.webhooks.socket_guard, names resolved by
    `resolve`): one to a refused address is not made, and the notification fails saying so."""
    try:
        plugin = parse(url)
    except InvalidSubscription as err:
        return Sent(False, str(err))
    box: list[Sent] = []

    def call() -> None:
        guard = socket_guard.guarded(resolve) if not policy.allow_private else contextlib.nullcontext(None)
        with guard as held:
            try:
                sent = _notify(plugin, url, msg, timeout_s, connect_timeout_s)
            except Exception as err:  # a plugin's bug must not kill the dispatcher's worker  # noqa: BLE001
                sent = Sent(False, scrub(f"Apprise failed: {type(err).__name__}: {err}", url)[:MAX_ERROR])
            if held is not None and held.refused:
                sent = Sent(False, scrub(f"Apprise {plugin.service_name}: {held.refused[0]}", url)[:MAX_ERROR], refused=True)
            box.append(sent)

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


# Apprise reads and sends (vet checks the servers it names and returns no address); the preview is `render`.
FORMAT = WebhookFormat("apprise", render=render, check_url=check_url, vet=vet, send=deliver, content_type=CONTENT_TYPE)
