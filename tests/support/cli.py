"""The `hubwatch` command as a test runs it, and the config file it reads.

`run_cli` runs the command in this process by default: the real root group and `tracker.cli.main`, with
the same argv, stdout and stderr captured apart and the exit code `main` sets, as a `CompletedProcess`. A
subprocess costs 1.5-3 s of imports per call; in-process the stack is imported once per worker.
`run_cli(..., process=True)` runs `python -m tracker` in a subprocess instead: use it where the process is
what the test is about (daemons, signals, crashes, start-up imports) or where the test sets a variable a
library reads when it is imported (`HF_HUB_CACHE`, `HF_HOME`, `HF_ENDPOINT`: in-process, huggingface_hub
was imported long before). `run_cli` refuses an in-process `env` that changes any `HF_*` or `HUGGINGFACE_*`
variable rather than silently ignore it; `--cache-dir` names a cache without one. Other variables (the
HUBWATCH_* settings, webhook secrets) are read when the config loads, and are set for the call only.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click.testing
import structlog

from tests.support.databases import database_url_for, premigrated

# Read by a library when it is imported: an in-process call cannot honour a change to them.
_IMPORT_TIME_PREFIXES = ("HF_", "HUGGINGFACE_")


def write_config(path: Path, endpoint: str, db_path: Path | str, extra: str = "") -> Path:
    """A config file naming the Hub endpoint and the database, without jitter; `extra` is appended. A new SQLite
    file starts as an empty database at the newest schema (`premigrated`)."""
    path.write_text(
        f'[hub]\nendpoint = "{endpoint}"\n\n[storage]\nurl = "{premigrated(database_url_for(db_path))}"\n\n[poll]\njitter = "0"\n{extra}',
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


def run_cli(
    *args: str, config: Path | None = None, env: dict[str, str] | None = None, timeout: float = 120, process: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run `hubwatch ARGS`: in this process, or with `process=True` in a subprocess as a user or a script would."""
    argv = [*(["--config", str(config)] if config is not None else []), *args]
    if process:
        full_env = {**os.environ, **(env or {})}
        return subprocess.run([sys.executable, "-m", "tracker", *argv], capture_output=True, text=True, env=full_env, timeout=timeout)
    changed = {key: value for key, value in (env or {}).items() if os.environ.get(key) != value}
    if late := sorted(key for key in changed if key.startswith(_IMPORT_TIME_PREFIXES)):
        raise AssertionError(f"{late} are read at import time: run_cli(..., process=True), or pass --cache-dir")
    return _run_in_process(argv, changed, timeout)


def _run_in_process(argv: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """`tracker.cli.main(argv)` with stdout and stderr captured apart, `env` set and logging restored after;
    an exception no handler took is a traceback on stderr and exit code 1, as `python -m tracker` shows it.
    It runs on a thread so that a call still running after `timeout` fails the test as a subprocess would."""
    from tracker.cli import main

    codes: list[int] = []

    def call() -> None:
        try:
            main(argv)
            codes.append(0)
        except SystemExit as exc:
            if isinstance(exc.code, str):
                sys.stderr.write(exc.code + "\n")
            codes.append(exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1))
        except Exception:  # noqa: BLE001 -- a subprocess would print the traceback and exit 1: so does this
            traceback.print_exc(file=sys.stderr)
            codes.append(1)

    with _logging_restored(), click.testing.CliRunner().isolation(env=env) as (out, err, _):
        worker = threading.Thread(target=call, name="hubwatch-in-process", daemon=True)
        worker.start()
        worker.join(timeout)
        if worker.is_alive():
            raise subprocess.TimeoutExpired(["hubwatch", *argv], timeout)
        sys.stdout.flush()
        sys.stderr.flush()
        stdout, stderr = out.getvalue().decode(), err.getvalue().decode()
    return subprocess.CompletedProcess(["hubwatch", *argv], codes[0], stdout, stderr)


@contextmanager
def _logging_restored() -> Iterator[None]:
    """The CLI configures structlog and the root logger for its process: put back what was there before."""
    structlog_config = structlog.get_config()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    own = {name: logging.getLogger(name).level for name in ("tracker", "feeds", "storage", "estimator")}
    try:
        yield
    finally:
        structlog.configure(**structlog_config)
        root.handlers[:] = handlers
        root.setLevel(level)
        for name, own_level in own.items():
            logging.getLogger(name).setLevel(own_level)


def cli_json(*args: str, config: Path, env: dict[str, str] | None = None, process: bool = False):
    """`hubwatch ARGS --json`, which must succeed, parsed."""
    result = run_cli(*args, "--json", config=config, env=env, process=process)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@contextmanager
def app_on(endpoint: str, database_url: str) -> Iterator[object]:
    """An App on a Hub endpoint and a database, its engine disposed of after the test (where it opened one)."""
    from tests.support.settings import settings_for
    from tracker.cli.app import App

    app = App(settings_for(endpoint, database_url))  # type: ignore[arg-type]
    try:
        yield app
    finally:
        if "store" in app.__dict__:
            app.store.engine.dispose()


def invoke_with(app: object, *args: str) -> click.testing.Result:
    """The root group invoked with `app` as every command's App (click's runner), the pipeline's log lines kept out
    of the command's stdout."""
    from tracker.cli import cli

    with structlog.testing.capture_logs():
        return click.testing.CliRunner().invoke(cli, list(args), obj={"app_factory": lambda logs=True: app})
