"""[delivery] and [[webhooks]] settings: defaults, clear errors, secrets read from the environment only."""

from __future__ import annotations

import pytest

from tests.support.webhooks import OLD_SECRET, SECRET
from tracker.config import settings_from_mapping
from tracker.errors import ConfigError

HOOK = {"url": "https://ci.example.com/hook", "format": "generic", "secret_env": "CI_SECRET"}


def test_delivery_defaults() -> None:
    """Private targets refused, 15 s time-out with 5 s to connect, the Standard Webhooks schedule (10 tries
    over 75.6 h), Retry-After capped at 1 h, claims taken over after 6 s."""
    d = settings_from_mapping({}, env={}).delivery
    assert (d.allow_private_targets, d.timeout_s, d.connect_timeout_s, d.max_attempts) == (False, 15.0, 5.0, 0)
    assert d.retry_delays_s == (5, 300, 1800, 7200, 18000, 36000, 50400, 72000, 86400)
    assert d.retry_after_max_s == 3600.0 and d.concurrency == 4 and d.lease_s == 6.0


def test_allow_private_targets_from_the_environment() -> None:
    """HUBWATCH_DELIVERY_ALLOW_PRIVATE_TARGETS=true lets the operator allow private targets."""
    env = {"HUBWATCH_DELIVERY_ALLOW_PRIVATE_TARGETS": "true"}
    assert settings_from_mapping({}, env=env).delivery.allow_private_targets is True


def test_apprise_allowances_default_off_and_come_from_file_or_environment() -> None:
    """No Apprise service of undetermined server and no verify=no by default; both from the file or the
    environment (schemes comma-separated, compared in lower case)."""
    d = settings_from_mapping({}, env={}).delivery
    assert (d.apprise_allow_plugins, d.apprise_allow_insecure_tls) == ((), False)
    raw = {"delivery": {"apprise_allow_plugins": ["Zulip", "acs"], "apprise_allow_insecure_tls": True}}
    d = settings_from_mapping(raw, env={}).delivery
    assert (d.apprise_allow_plugins, d.apprise_allow_insecure_tls) == (("zulip", "acs"), True)
    env = {"HUBWATCH_DELIVERY_APPRISE_ALLOW_PLUGINS": "dbus, syslog", "HUBWATCH_DELIVERY_APPRISE_ALLOW_INSECURE_TLS": "yes"}
    d = settings_from_mapping({}, env=env).delivery
    assert (d.apprise_allow_plugins, d.apprise_allow_insecure_tls) == (("dbus", "syslog"), True)


def test_signing_secrets_come_from_the_named_variables_and_are_not_shown() -> None:
    """A [[webhooks]] secret_env is read once, may hold rotating secrets, and never appears in the repr."""
    settings = settings_from_mapping({"webhooks": [HOOK]}, env={"CI_SECRET": f"{SECRET} {OLD_SECRET}"})
    assert settings.webhook_secrets == {"CI_SECRET": f"{SECRET} {OLD_SECRET}"}
    assert SECRET not in repr(settings)


@pytest.mark.parametrize(
    ("raw", "env", "message"),
    [
        ({"webhooks": [{"url": "https://ci.example.com/hook"}]}, {}, "secret_env"),
        ({"webhooks": [HOOK]}, {"CI_SECRET": "hunter2"}, r"\$CI_SECRET.*whsec_"),
        ({"webhooks": [HOOK, HOOK]}, {}, "listed twice"),
        ({"delivery": {"timeout_s": 0}}, {}, "timeout_s"),
        ({"delivery": {"connect_timeout_s": 30}}, {}, "connect_timeout_s"),
        ({"delivery": {"max_attempts": -1}}, {}, "max_attempts"),
        ({"delivery": {"concurrency": 0}}, {}, "concurrency"),
        ({"delivery": {"allow_private_targets": "maybe"}}, {}, "allow_private_targets"),
        ({"delivery": {"retry_after_s": 5}}, {}, "unknown setting"),
        ({"delivery": {"apprise_allow_plugins": ["zulip://"]}}, {}, "apprise_allow_plugins must be a list of Apprise schemes"),
        ({"delivery": {"apprise_allow_plugins": [3]}}, {}, "apprise_allow_plugins"),
        ({"delivery": {"apprise_allow_insecure_tls": "perhaps"}}, {}, "apprise_allow_insecure_tls"),
    ],
)
def test_bad_webhook_settings_name_the_key(raw: dict, env: dict, message: str) -> None:
    """Each invalid [delivery] or [[webhooks]] setting is a ConfigError naming it (never echoing a secret)."""
    with pytest.raises(ConfigError, match=message) as err:
        settings_from_mapping(raw, env=env)
    assert "hunter2" not in str(err.value)
