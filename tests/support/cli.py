"""The `hubwatch` command in a subprocess, as a user or a script runs it, and the config file it reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.databases import database_url_for


def write_config(path: Path, endpoint: str, db_path: Path | str, extra: str = "") -> Path:
    """A config file naming the Hub endpoint and the database, without jitter; `extra` is appended."""
    path.write_text(
        f'[hub]\nendpoint = "{endpoint}"\n\n[storage]\nurl = "{database_url_for(db_path)}"\n\n[poll]\njitter = "0"\n{extra}',
        encoding="utf-8",
    )
    return path


def signed_webhook_section(url: str, kinds: tuple[str, ...] = (), secret_env: str = "TEST_HOOK_SECRET") -> str:
    """Config text: deliveries to loopback allowed, and one signed generic [[webhooks]] entry to `url` taking
    every severity (of `kinds` only, when named)."""
    kinds_line = f"kinds = {json.dumps(list(kinds))}\n" if kinds else ""
    return (
        f'\n[delivery]\nallow_private_targets = true\ntimeout_s = 5.0\n\n[[webhooks]]\nurl = "{url}"\n'
        f'format = "generic"\nsecret_env = "{secret_env}"\n{kinds_line}min_severity = "info"\n'
    )


def run_cli(*args: str, config: Path | None = None, env: dict[str, str] | None = None, timeout: float = 120):
    """Run `hubwatch ARGS` in a subprocess, as a user or a script would."""
    full_env = {**os.environ, **(env or {})}
    cmd = [sys.executable, "-m", "tracker"]
    if config is not None:
        cmd += ["--config", str(config)]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, env=full_env, timeout=timeout)


def cli_json(*args: str, config: Path, env: dict[str, str] | None = None):
    """`hubwatch ARGS --json`, which must succeed, parsed."""
    result = run_cli(*args, "--json", config=config, env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)
