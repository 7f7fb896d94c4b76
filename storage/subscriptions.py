"""Webhook subscriptions: the rules their URLs, secrets and filters follow.

Secrets: a subscription from the config file stores only the NAME of the environment variable that
holds its signing secret (`secret_env`); one created through the API stores the secret itself
(`secret`), in clear, because the dispatcher signs with it. Neither is ever logged, put in a repr or
shown in a listing.

Apprise subscriptions (`format = "apprise"`) hold an Apprise URL (`mailto://`, `tgram://`, `ntfys://`,
`json://`, ...) whose credentials and tokens are part of the URL: no signing secret, and the URL is only
ever shown redacted (`redact_url`). Here their syntax is checked; whether Apprise can read them, and the
address policy for the host they name, is feeds.webhooks.apprise's.
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
import re
import secrets as secrets_module
import urllib.parse
from typing import TYPE_CHECKING

from storage.errors import InvalidSubscription
from storage.kinds import HTTP_WEBHOOK_FORMATS, SEVERITY_RANK, WEBHOOK_FORMATS
from storage.models.base import MAX_URL_LENGTH

if TYPE_CHECKING:
    from storage.models import Event, Subscription

SOURCES = ("config", "api")

_KIND_RE = re.compile(r"^[a-z0-9_.*-]{1,40}$")
_SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]{0,31}$")
# Apprise schemes whose URL host is a server the operator named (not a token): listings show that host.
_HOST_SCHEMES = frozenset({
    "json", "jsons", "xml", "xmls", "form", "forms", "ntfy", "ntfys", "matrix", "matrixs", "gotify", "gotifys",
    "apprise", "apprises", "mailto", "mailtos", "mmost", "mmosts", "rocket", "rockets", "nctalk", "nctalks",
})
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,199}$")


def validate_url(url: object, format: str = "generic") -> str:  # noqa: A002 - the subscription setting's name
    """For webhooks: an absolute http(s) URL with a host, no credentials, no whitespace. For apprise: a
    `scheme://...` URL naming a service other than plain http(s). Raises InvalidSubscription."""
    if not isinstance(url, str) or not url:
        raise InvalidSubscription("the URL is empty")
    if len(url) > MAX_URL_LENGTH:
        raise InvalidSubscription(f"the URL is longer than {MAX_URL_LENGTH} characters")
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in url):
        raise InvalidSubscription("the URL contains whitespace or control characters")
    if format not in HTTP_WEBHOOK_FORMATS:  # apprise: the URL names a service
        return _validate_apprise_url(url)
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as err:
        raise InvalidSubscription(f"the URL is malformed: {err}") from err
    if parts.scheme not in ("http", "https"):
        raise InvalidSubscription(f"the URL must start with http:// or https://, got {parts.scheme or 'no'} scheme")
    if not parts.hostname:
        raise InvalidSubscription("the URL has no host")
    if parts.username is not None or parts.password is not None:
        raise InvalidSubscription("the URL carries credentials; use a signing secret instead")
    if port == 0:
        raise InvalidSubscription("the URL's port must be 1-65535")
    try:
        parts.hostname.encode("idna")
    except UnicodeError as err:
        raise InvalidSubscription(f"the URL's host is not a valid host name: {err}") from err
    return url


def _validate_apprise_url(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    if not sep or not _SCHEME_RE.match(scheme):
        raise InvalidSubscription("an Apprise URL starts with the service's scheme, like ntfys://, mailto:// or json://")
    if scheme.lower() in ("http", "https"):
        raise InvalidSubscription(
            "an Apprise URL names a service (json://, ntfys://, mailto://, ...); for a plain http(s) endpoint "
            "use the generic format, or json:// / jsons:// with the apprise format"
        )
    if not rest.strip("/"):
        raise InvalidSubscription(f"the Apprise URL names no target after {scheme}://")
    return url


def redact_url(url: str) -> str:
    """scheme://host[:port]/… : enough to tell endpoints apart without showing a path that is a token.
    Apprise URLs keep their scheme, and their host only where it is a server's name (json://, ntfys://,
    mailto://, ...) rather than a token (tgram://, discord://, ntfy://topic): `scheme://…` otherwise."""
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    if scheme and scheme not in ("http", "https"):
        return _redact_apprise_url(scheme, url)
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or "?"
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "<malformed URL>"
    host = f"[{host}]" if ":" in host else host
    tail = "/…" if parts.path not in ("", "/") or parts.query else ""
    return f"{parts.scheme}://{host}{port}{tail}"


def _redact_apprise_url(scheme: str, url: str) -> str:
    shown = scheme if _SCHEME_RE.match(scheme) else "?"
    if scheme not in _HOST_SCHEMES:
        return f"{shown}://…"
    try:
        parts = urllib.parse.urlsplit(url)
        host, port = parts.hostname or "", parts.port
    except ValueError:
        return f"{shown}://…"
    if "." not in host and ":" not in host:  # a bare word is a topic or a token (ntfy://mytopic), not a host name
        return f"{shown}://…"
    host = f"[{host}]" if ":" in host else host
    return f"{shown}://{host}{f':{port}' if port else ''}/…"


def new_secret() -> str:
    """A fresh Standard Webhooks signing secret (24 random bytes, `whsec_` + base64)."""
    return "whsec_" + base64.b64encode(secrets_module.token_bytes(24)).decode("ascii")


def secret_keys(secret: str) -> list[bytes]:
    """The HMAC keys in a secret value: one or more space-separated `whsec_<base64>` (key rotation)."""
    keys = []
    for part in secret.split():
        if not part.startswith("whsec_"):
            raise InvalidSubscription("a signing secret must look like whsec_<base64>")
        try:
            key = base64.b64decode(part[len("whsec_"):], validate=True)
        except (binascii.Error, ValueError) as err:
            raise InvalidSubscription("a signing secret's part after whsec_ is not base64") from err
        if not 24 <= len(key) <= 64:
            raise InvalidSubscription("a signing secret must hold 24 to 64 bytes")
        keys.append(key)
    if not keys:
        raise InvalidSubscription("the signing secret is empty")
    return keys


def validated(sub: Subscription) -> Subscription:
    """The subscription, its repos defaulted to every repo; raises InvalidSubscription saying what is wrong."""
    if sub.format not in WEBHOOK_FORMATS:
        raise InvalidSubscription(f"format must be one of {', '.join(WEBHOOK_FORMATS)}, got {sub.format!r}")
    validate_url(sub.url, sub.format)
    if sub.format not in HTTP_WEBHOOK_FORMATS and (sub.secret or sub.secret_env):
        raise InvalidSubscription(f"{sub.format} notifications are not signed: their credentials go in the Apprise URL, not a secret")
    if sub.min_severity not in SEVERITY_RANK:
        raise InvalidSubscription(f"min_severity must be one of {', '.join(SEVERITY_RANK)}, got {sub.min_severity!r}")
    if sub.source not in SOURCES:
        raise InvalidSubscription(f"source must be config or api, got {sub.source!r}")
    if not sub.repos:
        sub.repos = ["*"]
    if not all(isinstance(r, str) and 0 < len(r) <= 200 for r in sub.repos):
        raise InvalidSubscription("repos must be globs like 'org/*' (1-200 characters each)")
    if not all(isinstance(k, str) and _KIND_RE.match(k) for k in sub.kinds):
        raise InvalidSubscription("kinds must be change kinds (chat_template) or event kinds (advisory.published)")
    if sub.secret and sub.secret_env:
        raise InvalidSubscription("give a secret or the name of the variable holding it, not both")
    if sub.secret_env and not _ENV_NAME_RE.match(sub.secret_env):
        raise InvalidSubscription("secret_env must be an environment variable name")
    if sub.secret:
        secret_keys(sub.secret)
    return sub


def matches(subscription: Subscription, event: Event) -> bool:
    """Does the event pass the subscription's repo globs, kinds and minimum severity?"""
    if not subscription.enabled:
        return False
    repo = event.repo_id.lower()
    if not any(fnmatch.fnmatchcase(repo, glob.lower()) for glob in subscription.repos or ["*"]):
        return False
    if SEVERITY_RANK.get(event.severity, 0) < SEVERITY_RANK.get(subscription.min_severity, 0):
        return False
    if subscription.kinds:
        offered = {event.kind, *((event.payload or {}).get("kinds") or [])}
        if not any(fnmatch.fnmatchcase(k, want) for want in subscription.kinds for k in offered):
            return False
    return True
