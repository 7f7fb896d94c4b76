"""Settings: file, environment and defaults, and clear errors for bad configuration."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tracker.config import PUBLIC_HUB, load_settings, parse_interval, settings_from_mapping
from tracker.errors import ConfigError
from tracker.formats.pickle_rules import RULES_VERSION

EXAMPLE = Path(__file__).resolve().parents[2] / "config.example.toml"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("15m", 900), ("1h", 3600), ("1d", 86400), ("90", 90), ("1.5h", 5400), (120, 120)],
)
def test_parse_interval_accepts_units(text: object, seconds: int) -> None:
    """Durations take s, m, h, d suffixes or plain seconds."""
    assert parse_interval(text) == seconds


@pytest.mark.parametrize("text", ["", "fast", "15 minutes", "-5m", "0s", True])
def test_parse_interval_rejects_nonsense(text: object) -> None:
    """Anything else is a ConfigError naming the setting."""
    with pytest.raises(ConfigError, match="interval"):
        parse_interval(text)


def test_defaults_without_file() -> None:
    """With no file and no environment, the public Hub and a SQLite file under the data dir are used."""
    settings = settings_from_mapping({}, env={})
    assert settings.hub.endpoint == PUBLIC_HUB
    assert settings.database_url.startswith("sqlite:///") and settings.database_url.endswith("hubwatch.db")
    assert settings.server.port == 8600


def test_environment_overrides_file_and_hf_endpoint_is_honoured() -> None:
    """HUBWATCH_<SECTION>_<KEY> beats the file; HF_ENDPOINT applies only when nothing else sets it."""
    raw = {"server": {"port": 8000}}
    env = {"HUBWATCH_SERVER_PORT": "9000", "HF_ENDPOINT": "http://127.0.0.1:1/"}
    settings = settings_from_mapping(raw, env=env)
    assert settings.server.port == 9000
    assert settings.hub.endpoint == "http://127.0.0.1:1"
    pinned = settings_from_mapping({"hub": {"endpoint": "http://hub.internal"}}, env=env)
    assert pinned.hub.endpoint == "http://hub.internal"


def test_token_comes_from_the_named_variable_and_is_not_shown() -> None:
    """The token is read from [hub] token_env and never appears in the settings' repr."""
    settings = settings_from_mapping({"hub": {"token_env": "MY_TOKEN"}}, env={"MY_TOKEN": "hf_secret"})
    assert settings.hub_token == "hf_secret"
    assert "hf_secret" not in repr(settings)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"hub": {"endpiont": "x"}}, "unknown setting"),
        ({"hubb": {}}, "unknown section"),
        ({"server": {"port": "eighty"}}, r"\[server\] port"),
        ({"server": {"port": 70000}}, "port"),
        ({"watch": [{"repo": "not-a-repo"}]}, "not a Hub repo id"),
        ({"watch": [{"branch": "main"}]}, "no repo"),
        ({"watch": [{"repo": "a/b", "interval": "soon"}]}, "interval"),
        ({"watch": [{"repo": "a/b"}, {"repo": "a/b"}]}, "watched twice"),
        ({"webhooks": [{"url": "ftp://x", "format": "generic"}]}, "http"),
        ({"webhooks": [{"url": "https://x", "format": "teams"}]}, "format"),
        ({"webhooks": [{"url": "https://x", "min_severity": "loud"}]}, "min_severity"),
        ({"poll": {"max_file_mb": 0}}, "max_file_mb"),
        ({"hub": {"endpoint": "huggingface.co"}}, "endpoint"),
    ],
)
def test_bad_settings_name_the_key(raw: dict, message: str) -> None:
    """Every invalid setting fails with a ConfigError that names it."""
    with pytest.raises(ConfigError, match=message):
        settings_from_mapping(raw, env={})


def test_bad_toml_file_is_a_config_error(tmp_path: Path) -> None:
    """A file that is not TOML fails with its path in the message."""
    path = tmp_path / "hubwatch.toml"
    path.write_text("[hub\nendpoint = 1", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(str(path), env={})


def test_missing_explicit_file_is_a_config_error(tmp_path: Path) -> None:
    """--config naming a file that does not exist is an error, not silent defaults."""
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(str(tmp_path / "nope.toml"), env={})


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda p: p.write_text("x = " + "[" * 100_000 + "]" * 100_000, encoding="utf-8"), "its TOML is nested too deep"),
        (lambda p: p.symlink_to("/dev/zero"), "a character device, not a regular file"),
        (lambda p: p.write_bytes(b"# \xff\n"), "not UTF-8 text"),
    ],
    ids=["nested-100000", "dev-zero", "not-utf8"],
)
def test_hostile_config_file_is_a_config_error_in_one_line(tmp_path: Path, make, reason: str) -> None:
    """A config file nested 100,000 deep, /dev/zero or not UTF-8 (./hubwatch.toml comes with a checked-out
    tree) is a ConfigError naming the file, not a RecursionError or an endless read."""
    path = tmp_path / "hubwatch.toml"
    make(path)
    with pytest.raises(ConfigError, match=reason) as info:
        load_settings(str(path), env={})
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_config_file_that_is_a_fifo_exits_4_without_blocking(tmp_path: Path) -> None:
    """`--config FIFO` exits 4 with one line, in a call that would time out if the read blocked."""
    fifo = tmp_path / "hubwatch.toml"
    os.mkfifo(fifo)
    result = run_cli("watch", "list", config=fifo, timeout=60)
    assert result.returncode == 4
    assert result.stderr == f"error: refused config file {fifo}: a named pipe (FIFO), not a regular file\n"


def test_hubwatch_config_variable_is_used(tmp_path: Path) -> None:
    """$HUBWATCH_CONFIG names the file when --config is not given."""
    path = tmp_path / "c.toml"
    path.write_text('[server]\nport = 8123\n', encoding="utf-8")
    assert load_settings(None, env={"HUBWATCH_CONFIG": str(path)}).server.port == 8123


def test_example_config_documents_every_setting() -> None:
    """config.example.toml parses and mentions every key of every section, with its default."""
    settings = load_settings(str(EXAMPLE), env={})
    text = EXAMPLE.read_text(encoding="utf-8")
    from tracker.config import SECTIONS

    for section in SECTIONS:
        assert f"[{section}]" in text
        for name in type(getattr(settings, section)).model_fields:
            assert f"{name} =" in text, f"[{section}] {name} is not documented"
    assert settings.watch and settings.webhooks


def test_estimate_lora_settings_default_parse_and_refuse_nonsense() -> None:
    """[estimate] lora_rank and lora_targets: 16 on all-linear by default, a list or comma string of module
    names, and a clear error naming the key otherwise."""
    assert settings_from_mapping({}, env={}).estimate.targets == "all-linear"
    chosen = settings_from_mapping({"estimate": {"lora_rank": 64, "lora_targets": ["q_proj", "v_proj"]}}, env={})
    assert (chosen.estimate.lora_rank, chosen.estimate.targets) == (64, ("q_proj", "v_proj"))
    env = settings_from_mapping({}, env={"HUBWATCH_ESTIMATE_LORA_TARGETS": "query, value"})
    assert env.estimate.targets == ("query", "value")
    for bad, key in (({"lora_rank": 0}, "lora_rank"), ({"lora_rank": "x"}, "lora_rank"),
                     ({"lora_targets": []}, "lora_targets"), ({"lora_targets": ["all-linear", "q_proj"]}, "lora_targets"),
                     ({"lora_targets": [3]}, "lora_targets")):
        with pytest.raises(ConfigError, match=key):
            settings_from_mapping({"estimate": bad}, env={})


@pytest.mark.parametrize(
    "content, reason",
    [(None, "cannot be read"), (b"dangerous = [", "not TOML"), (b'unsafe = ["x"]', "unknown keys"),
     (b"dangerous = [3]", "must be a list")],
    ids=["missing", "not-toml", "unknown-key", "not-strings"],
)
def test_a_bad_pickle_rules_file_is_a_config_error_naming_it(tmp_path, content, reason):
    """[scan] pickle_rules that cannot be used fails the config load, naming the setting and the file."""
    rules = tmp_path / "rules.toml"
    if content is not None:
        rules.write_bytes(content)
    with pytest.raises(ConfigError, match=reason) as info:
        settings_from_mapping({"scan": {"pickle_rules": str(rules)}}, {})
    assert "[scan] pickle_rules" in str(info.value) and str(rules) in str(info.value)


def test_the_pickle_rules_file_is_read_once_into_the_settings(tmp_path):
    """A good rules file's lists join the built-in ones; its version names the file's digest."""
    rules = tmp_path / "rules.toml"
    rules.write_text('dangerous = ["somepkg.thing"]\nsafe = ["mymodels.Net"]\n')
    settings = settings_from_mapping({}, {"HUBWATCH_SCAN_PICKLE_RULES": str(rules)})
    assert "somepkg.thing" in settings.scan.rules.dangerous and "mymodels.Net" in settings.scan.rules.safe
    assert settings.scan.rules.version.startswith(f"{RULES_VERSION}+")
    assert settings_from_mapping({}, {}).scan.rules.version == str(RULES_VERSION)
