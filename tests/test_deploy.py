"""The deployment files agree with the code: the compose file's workers share one PostgreSQL database."""

from __future__ import annotations

from pathlib import Path

import yaml

from tracker.config import settings_from_mapping

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"


def test_compose_runs_a_serving_daemon_and_scalable_workers_on_one_database() -> None:
    services = yaml.safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))["services"]
    main, worker = services["hubwatch"], services["worker"]
    assert main["environment"]["HUBWATCH_STORAGE_URL"] == worker["environment"]["HUBWATCH_STORAGE_URL"]
    assert worker["environment"]["HUBWATCH_STORAGE_URL"].startswith("postgresql+psycopg://")
    assert "ports" not in worker and main["ports"]  # Hub webhooks and feeds reach the serving one
    assert worker["deploy"]["replicas"] == "${HUBWATCH_WORKERS:-2}"
    # on PostgreSQL the default coordination shares the watches (tracker/cli/builder.py build_scheduler)
    assert settings_from_mapping({}, env={}).poll.coordination == "auto"
