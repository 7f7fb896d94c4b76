"""Apprise URLs for every service Apprise ships, built from each plugin's own URL templates (its
`templates` and `template_tokens`), for tests that try them all."""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from feeds.webhooks.apprise import _asset, _library

# Values tried for a template token, the first its pattern accepts (tokens without one take the first).
_CANDIDATES = (
    "user", "abcdefghij0123456789ABCDEFGHIJKL", "12345678901", "A" * 32, "a1b2c3d4", "abc", "T1JJ3T3L2",
    "user@example.com", "+15551234567", "15551234567", "ab-cd", "1", "A1B2C3D4E5F6A7B8C9D0E1F2A3B4C5D6E7F8A9B0",
    "a" * 64, "0" * 64,
)
# Services whose templates the filler cannot satisfy: a URL written by hand ({host}: the server).
HAND_WRITTEN = {
    "NotifyAMQP": "amqp://user:pass@{host}/exchange",
    "NotifyTrigv": "trigv://trgv_abcd1234_" + "a" * 32 + "@{host}",
    "NotifyEvolution": "evolution://apikey@{host}/instance/15551234567",
    "NotifyHumHub": "humhub://user:pass@{host}/1",
    "NotifyWeChat": "wechat://ww12345:secretsecret@1234567/@all",  # its {host} is a corporate id: no server
}
# Services Apprise cannot load here although it lists them as enabled (their adapter's package is missing).
NEEDS_PACKAGES = frozenset({"NotifyAMQP"})  # pika or python-qpid-proton


@cache
def plugin_classes() -> dict[str, type]:
    """Every service class Apprise ships, by class name."""
    manager = _library().NotificationManager()
    return {manager[scheme].__name__: manager[scheme] for scheme in manager.schemas()}


def _scheme(cls: type) -> str:
    for attr in ("secure_protocol", "protocol"):
        value = getattr(cls, attr, None)
        if value:
            return value if isinstance(value, str) else value[0]
    raise AssertionError(f"{cls.__name__} has no scheme")


def _fill(name: str, spec: dict[str, Any]) -> str:
    if name == "port":
        return "8080"
    if str(spec.get("type", "")).startswith("int"):
        return "1"
    candidates = [str(v) for v in spec.get("values") or ()] + list(_CANDIDATES)
    pattern = spec.get("regex")
    if pattern:
        flags = re.IGNORECASE if len(pattern) > 1 and "i" in (pattern[1] or "") else 0
        return next((c for c in candidates if re.match(pattern[0], c, flags)), candidates[0])
    return candidates[0]


def _from_template(cls: type, template: str, host: str) -> str:
    out = template.replace("{schema}", _scheme(cls)).replace("{host}", host)
    for name in re.findall(r"\{(\w+)\}", out):
        out = out.replace("{" + name + "}", _fill(name, cls.template_tokens.get(name, {})), 1)
    return out


def readable(url: str) -> Any:
    """Apprise's plugin for `url`, or None when Apprise cannot read it."""
    return _library().Apprise.instantiate(url, asset=_asset(), suppress_exceptions=True)


@cache
def _template_for(name: str, with_host: bool) -> str | None:
    """The first of the service's templates (naming a `{host}`, or any) that Apprise reads when filled in."""
    cls = plugin_classes()[name]
    if name in HAND_WRITTEN:
        return HAND_WRITTEN[name]
    candidates = [t for t in cls.templates if "{host}" in t or not with_host]
    for template in candidates:
        url = _from_template(cls, template, "example.com")
        if not url.endswith("://") and readable(url) is not None:
            return template
    return None


def url_with_host(name: str, host: str) -> str:
    """A URL of the service with `host` as its `{host}`: from its first template Apprise reads, else (a
    service Apprise cannot load here) from its first template naming a host."""
    cls = plugin_classes()[name]
    template = _template_for(name, with_host=True) or next(t for t in cls.templates if "{host}" in t)
    return template.replace("{host}", host) if name in HAND_WRITTEN else _from_template(cls, template, host)


def any_url(name: str) -> str | None:
    """A URL Apprise reads for the service (its host, where it names one, example.com)."""
    template = _template_for(name, with_host=False)
    if template is None:
        return None
    if name in HAND_WRITTEN:
        return template.replace("{host}", "example.com")
    return _from_template(plugin_classes()[name], template, "example.com")
