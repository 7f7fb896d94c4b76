"""Branch names are checked once (storage.kinds: git's ref-name rules as the Hub applies them, plus the
Hub's pull-request refs `refs/pr/N`) and refused alike by the CLI (exit 2), the config file (exit 4),
the API (422) and the Hub webhook receiver (ignored)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from storage import kinds
from storage.db import create_db_engine, migrate
from storage.front import Storage
from tests.support.cli import run_cli, write_config
from tests.support.served import API_TOKEN, HOOK_SECRET, Served, serve
from tests.support.settings import settings_for
from tests.support.waiting import wait_until
from tracker.cli import cli
from tracker.cli.app import App
from tracker.config import settings_from_mapping, validate_branch
from tracker.errors import ConfigError

pytestmark = pytest.mark.postgres  # its database tests run on PostgreSQL too (.ci/run)

VALID = [
    "main",
    "v1.0",
    "feature/x",
    "release-2024.06",
    "refs/pr/1",  # a Hub pull request: readable as a revision, so watchable by that name
    "refs/pr/1234",
    "a@b",
    "fix+1",
    "#12-fix",
    "x" * kinds.BRANCH_MAX_CHARS,
]
INVALID = [
    "",
    "a..b",
    "a\nb",
    "a\tb",
    "a b",
    "a\x7fb",
    "-x",  # git refuses a branch starting with '-', and it reads as an option
    "x.lock",
    "x.lock/y",
    "@{u}",
    "a@{1}",
    "@",
    ".hidden",
    "a/.b",
    "a/",
    "/a",
    "a//b",
    "a.",
    "a~1",
    "a^",
    "a:b",
    "a?",
    "a*",
    "a[1]",
    "a\\b",
    "é",
    "x" * (kinds.BRANCH_MAX_CHARS + 1),
    "refs/heads/main",  # would be refs/heads/refs/heads/main
    "refs/pr/x",
    "refs/tags/v1",
]


@pytest.mark.parametrize(("name", "ok"), [(n, True) for n in VALID] + [(n, False) for n in INVALID])
def test_branch_name_rules(name: str, ok: bool) -> None:
    """Real branch names and Hub PR refs pass; control characters, git's forbidden forms and other refs/ fail."""
    assert kinds.is_branch_name(name) is ok
    if ok:
        assert validate_branch(name) == name
    else:
        with pytest.raises(ConfigError, match="is not a branch name"):
            validate_branch(name)


def test_non_strings_are_not_branch_names() -> None:
    """Only text can be a branch name."""
    assert not kinds.is_branch_name(None)
    assert not kinds.is_branch_name(1)


@pytest.mark.parametrize("name", ["a..b", "a\nb", "@{u}", "x.lock", 7])
def test_config_file_refuses_a_bad_branch(name: object) -> None:
    """A [[watch]] with a bad branch is a ConfigError naming the section."""
    with pytest.raises(ConfigError, match=r"\[\[watch\]\] branch"):
        settings_from_mapping({"watch": [{"repo": "org/model", "branch": name}]}, env={})


def test_config_file_accepts_a_pr_ref() -> None:
    """A [[watch]] may follow a Hub pull request."""
    settings = settings_from_mapping({"watch": [{"repo": "org/model", "branch": "refs/pr/3"}]}, env={})
    assert settings.watch[0].branch == "refs/pr/3"  # type: ignore[attr-defined]


def test_config_file_with_a_bad_branch_exits_4(tmp_path: Path) -> None:
    """The CLI reports the config file's bad branch as `error: ...` with exit 4."""
    config = write_config(tmp_path / "hubwatch.toml", "http://127.0.0.1:9", tmp_path / "h.db",
                          extra='\n[[watch]]\nrepo = "org/model"\nbranch = "a..b"\n')
    result = run_cli("watch", "list", config=config, timeout=60)
    assert result.returncode == 4, result.stderr
    assert "error:" in result.stderr and "[[watch]] branch" in result.stderr and "Traceback" not in result.stderr


def _no_app(logs: bool = True) -> App:
    raise AssertionError("a usage error is reported before the app is built")


@pytest.mark.parametrize("command", ["add", "remove"])
@pytest.mark.parametrize("name", ["a..b", "a\nb", "-x", "x.lock", "@{u}", "refs/heads/main"])
def test_cli_refuses_a_bad_branch_as_usage(command: str, name: str) -> None:
    """`watch add|remove --branch` with a bad name is a usage error (exit 2) naming --branch."""
    result = CliRunner().invoke(cli, ["watch", command, "org/model", f"--branch={name}"], obj={"app_factory": _no_app})
    assert result.exit_code == 2, result.output
    assert "--branch" in result.output and "is not a branch name" in result.output


def test_cli_watches_a_pr_ref(database_url: str) -> None:
    """`watch add --branch refs/pr/1` stores the watch under that name, and `watch remove` finds it."""
    app = App(settings_for("http://127.0.0.1:9", database_url))  # type: ignore[arg-type]
    obj = {"app_factory": lambda logs=True: app}
    added = CliRunner().invoke(cli, ["watch", "add", "org/model", "--branch", "refs/pr/1", "--no-check"], obj=obj)
    assert added.exit_code == 0, added.output
    assert [(w.repo_id, w.branch) for w in app.store.watches.list_watches()] == [("org/model", "refs/pr/1")]
    removed = CliRunner().invoke(cli, ["watch", "remove", "org/model", "--branch", "refs/pr/1"], obj=obj)
    assert removed.exit_code == 0, removed.output
    assert app.store.watches.list_watches() == []
    app.store.engine.dispose()


class Triggers(list):
    def __call__(self, repo_id: str, branch: str | None, head_sha: str | None = None) -> bool:
        self.append((repo_id, branch))
        return True


@pytest.fixture
def server(database_url: str) -> Iterator[tuple[Served, Triggers]]:
    """The app over a database watching org/model on main and on the Hub pull request refs/pr/1."""
    engine = create_db_engine(database_url)
    migrate(engine)
    store = Storage(engine)
    store.watches.add_watch("org/model", "main", 3600)
    store.watches.add_watch("org/model", "refs/pr/1", 3600)
    triggers = Triggers()
    with serve(store, api_token=API_TOKEN, hub_webhook_secret=HOOK_SECRET, trigger=triggers) as served:
        yield served, triggers


AUTH = {"Authorization": f"Bearer {API_TOKEN}"}


@pytest.mark.parametrize(("name", "ok"), [("v1.0", True), ("refs/pr/2", True), ("feature/x", True),
                                          ("a..b", False), ("a\nb", False), ("@{u}", False), ("x.lock", False),
                                          ("-x", False), ("refs/heads/main", False)])
def test_api_checks_branches_in_bodies_and_parameters(server: tuple[Served, Triggers], name: str, ok: bool) -> None:
    """POST /api/v1/watches and DELETE ?branch= take good names and answer 422 for bad ones."""
    served, _ = server
    with served.client(headers=AUTH) as c:
        added = c.post("/api/v1/watches", json={"repo_id": "org/other", "branch": name})
        removed = c.delete("/api/v1/watches/org/other", params={"branch": name})
    assert added.status_code == (201 if ok else 422), added.text
    assert removed.status_code == (204 if ok else 422), removed.text
    if not ok:
        assert "not a branch name" in added.text and "not a branch name" in removed.text


def test_openapi_states_the_branch_rule(server: tuple[Served, Triggers]) -> None:
    """The OpenAPI document carries the same pattern the server checks."""
    served, _ = server
    document = httpx.get(f"{served.url}/api/v1/openapi.json").json()
    assert document["components"]["schemas"]["WatchIn"]["properties"]["branch"]["pattern"] == f"^{kinds.BRANCH_PATTERN}$"


def _hook(ref: str) -> dict:
    return {"event": {"action": "update", "scope": "repo.content"},
            "repo": {"type": "model", "name": "org/model", "headSha": "1" * 40},
            "updatedRefs": [{"ref": ref, "oldSha": "0" * 40, "newSha": "1" * 40}]}


@pytest.mark.parametrize(
    ("ref", "status", "branches"),
    [
        ("refs/heads/main", 202, [("org/model", "main")]),
        ("refs/pr/1", 202, [("org/model", "refs/pr/1")]),
        ("refs/pr/2", 200, []),
        ("refs/heads/a\nb", 200, []),
        ("refs/heads/../main", 200, []),
        ("main", 200, []),
    ],
)
def test_hub_webhook_reads_branches_and_pr_refs(server: tuple[Served, Triggers], ref: str, status: int, branches: list) -> None:
    """updatedRefs moves watched branches and watched PR refs; names git refuses are never echoed or triggered."""
    served, triggers = server
    with served.client() as c:
        response = c.post("/hooks/hub", json=_hook(ref), headers={"X-Webhook-Secret": HOOK_SECRET})
    assert response.status_code == status, response.text
    if status == 202:  # an accepted hook's ingest is triggered once the answer is sent
        assert wait_until(lambda: triggers == branches, timeout_s=5), triggers
    assert triggers == branches
    assert "\n" not in response.json()["detail"] and ".." not in response.json()["detail"]
