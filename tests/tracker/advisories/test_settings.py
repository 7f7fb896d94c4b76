"""The [osv] settings: validated with the key named, and turned into the service's OSV client."""

from __future__ import annotations

import pytest

from tracker.advisories.service import AdvisoryService
from tracker.config import settings_from_mapping
from tracker.errors import ConfigError

from .kit import snapshot


@pytest.mark.parametrize(
    ("osv", "message"),
    [
        ({"max_pages": 0}, r"\[osv\] max_attempts and max_pages must be at least 1"),
        ({"max_attempts": 0}, r"\[osv\] max_attempts and max_pages must be at least 1"),
        ({"timeout_s": 0}, r"\[osv\] timeout_s must be positive"),
        ({"recheck_interval": "daily"}, r"\[osv\] recheck_interval"),
        ({"retry_pending_interval": "0s"}, r"\[osv\] retry_pending_interval"),
        ({"api_url": "api.osv.dev"}, r"\[osv\] api_url must be an http\(s\) URL"),
        ({"enabled": "perhaps"}, r"\[osv\] enabled"),
    ],
)
def test_bad_osv_settings_name_the_key(osv, message):
    """Every invalid [osv] setting fails with a ConfigError naming it."""
    with pytest.raises(ConfigError, match=message):
        settings_from_mapping({"osv": osv}, env={})


def test_environment_sets_osv_settings():
    """HUBWATCH_OSV_<KEY> overrides, like every other section."""
    settings = settings_from_mapping({}, env={"HUBWATCH_OSV_MAX_PAGES": "7", "HUBWATCH_OSV_ENABLED": "false"})
    assert (settings.osv.max_pages, settings.osv.enabled) == (7, False)


def test_service_from_settings_uses_them(store, fake):
    """The client gets the configured URL, attempts and paging bound; the Hub URL names own records."""
    settings = settings_from_mapping({"osv": {"api_url": fake.endpoint, "max_attempts": 2, "max_pages": 9},
                                      "hub": {"endpoint": "http://hub.internal"}}, env={})
    service = AdvisoryService.from_settings(settings, store)
    assert (service.client.api_url, service.client.max_attempts, service.client.max_pages) == (fake.endpoint, 2, 9)
    assert service.hub_url == "http://hub.internal"
    service.close()


def test_osv_off_still_gives_facts_and_is_not_pending(store):
    """With [osv] enabled = false nothing is asked, nothing is marked pending, and advice says why."""
    service = AdvisoryService.from_settings(settings_from_mapping({"osv": {"enabled": False}}, env={}), store)
    check = service.check_revision("org/model", "1" * 40, snapshot({"config.json": {"transformers_version": "4.42.3"}}))
    assert service.client is None and check.pending is None
    assert check.facts.versions() == [("transformers", "4.42.3")]
    assert check.advice.notes == ("from cached advisories only: OSV look-ups are off ([osv] enabled = false)",)
