"""action.yml, the composite GitHub Action: its `run:` steps executed in order as the runner would (bash -eo pipefail),
inputs substituted, against the replay. Its `uses:` steps (actions/setup-python, actions/cache) need GitHub's
runner and are skipped, each named in the test's output."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
EVERY = "hubwatch-tests/every-kind"
EXPRESSION = re.compile(r"\$\{\{\s*([\w.-]+)\s*\}\}")


def run_action(inputs: dict[str, str], workdir: Path, env: dict[str, str]) -> tuple[int, list[str]]:
    """Run the action's steps: each `run:` with its `env:`, `${{ inputs.* }}` and `${{ runner.temp }}` substituted;
    returns the exit code of the first failing step (0 if none) and the names of the `uses:` steps skipped."""
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    values = {name: str(spec.get("default", "")) for name, spec in action["inputs"].items()} | inputs
    context = {f"inputs.{k}": v for k, v in values.items()} | {"runner.temp": str(workdir), "github.action_path": str(ROOT)}

    def substitute(text: str) -> str:
        return EXPRESSION.sub(lambda m: context[m.group(1)], text)

    skipped = []
    for step in action["runs"]["steps"]:
        if "uses" in step:
            skipped.append(step["uses"])
            print(f"skipped `uses: {step['uses']}`: it needs GitHub's runner")
            continue
        assert step["shell"] == "bash"
        step_env = {**env, **{k: substitute(str(v)) for k, v in (step.get("env") or {}).items()}}
        result = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", substitute(step["run"])],
                                cwd=workdir, env=step_env, capture_output=True, text=True, timeout=300)
        print(step.get("name"), result.returncode, result.stdout[-2000:], result.stderr[-2000:])
        if result.returncode != 0:
            return result.returncode, skipped
    return 0, skipped


def runner_env(replay, tmp_path: Path) -> dict[str, str]:
    """What the runner gives each step: a job summary and outputs file, this Python's hubwatch first on PATH, and
    the replay as the Hub (through hubwatch's HUBWATCH_<SECTION>_<KEY> settings)."""
    (tmp_path / "summary.md").write_text("")
    (tmp_path / "outputs").write_text("")
    return {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(tmp_path / "home"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "GITHUB_OUTPUT": str(tmp_path / "outputs"),
        "HUBWATCH_HUB_ENDPOINT": replay.endpoint,
        "HUBWATCH_POLL_JITTER": "0",
        "HUBWATCH_OSV_API_URL": os.environ["HUBWATCH_OSV_API_URL"],
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }


def test_action_fails_on_a_lock_file_behind_and_writes_the_summary(replay, tmp_path: Path) -> None:
    """A lock file pinning a revision upstream has since changed (custom code: critical): the job fails, the markdown
    report is the job summary, the exit code an output, and the history lands in the cached data directory."""
    replay.set_head(EVERY, 7)
    (tmp_path / "hubwatch.lock").write_text(f'version = 1\n[[model]]\nrepo = "{EVERY}"\nrevision = "{replay.commits(EVERY)[0].sha}"\n')
    env = runner_env(replay, tmp_path)
    code, skipped = run_action({"install-spec": "", "data-dir": str(tmp_path / "data")}, tmp_path, env)
    assert skipped == ["actions/setup-python@v5", "actions/cache@v4"]  # the failing step ends the run here
    assert code == 1
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("## hubwatch: upstream changes to pinned models") and f"`{EVERY}@main`: 6 commit(s) behind" in summary
    assert "exit-code=1" in (tmp_path / "outputs").read_text()
    assert (tmp_path / "data" / "hubwatch.db").is_file()  # what actions/cache keeps between runs


def test_action_scan_passes_when_no_change_reaches_fail_on(replay, tmp_path: Path) -> None:
    """`scan` checks the pins in code; pins at the head pass with `fail-on: info` and still write a summary."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "model.py").write_text(f'AutoModel.from_pretrained("{EVERY}", revision="{replay.head_sha(EVERY)}")\n')
    env = runner_env(replay, tmp_path)
    code, _ = run_action({"install-spec": "", "scan": str(src), "fail-on": "info", "data-dir": str(tmp_path / "data")}, tmp_path, env)
    assert code == 0
    assert f"`{EVERY}@main`: up to date" in (tmp_path / "summary.md").read_text()
    assert "exit-code=0" in (tmp_path / "outputs").read_text()


def test_action_writes_sarif_for_code_scanning(replay, tmp_path: Path) -> None:
    """With `sarif`, the action also writes the findings as SARIF (uploaded by codeql-action's upload-sarif, a
    `uses:` step run only on GitHub): a pin behind is an HW001 result on its line; the exit code is the markdown
    run's."""
    import json

    replay.set_head(EVERY, 4)
    src = tmp_path / "src"
    src.mkdir()
    (src / "model.py").write_text(f'AutoModel.from_pretrained("{EVERY}", revision="{replay.commits(EVERY)[0].sha}")\n')
    env = runner_env(replay, tmp_path)
    sarif = tmp_path / "hubwatch.sarif"
    code, skipped = run_action({"install-spec": "", "scan": str(src), "fail-on": "", "sarif": str(sarif),
                                "data-dir": str(tmp_path / "data")}, tmp_path, env)
    assert code == 0 and skipped[-1] == "github/codeql-action/upload-sarif@v3"
    results = json.loads(sarif.read_text())["runs"][0]["results"]
    assert [(r["ruleId"], r["locations"][0]["physicalLocation"]["region"]["startLine"]) for r in results
            if r["ruleId"] == "HW001"] == [("HW001", 1)]
    assert f"sarif={sarif}" in (tmp_path / "outputs").read_text()
