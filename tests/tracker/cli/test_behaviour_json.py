"""`show`/`diff`/`history --json`, the feed and `outdated` carry the stop-token set and tokenizer behaviour."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import cli_json, run_cli, write_config

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


@pytest.fixture
def config(replay, tmp_path: Path, database_url: str) -> Path:
    return write_config(tmp_path / "hubwatch.toml", replay.endpoint, database_url)


def test_the_stop_set_change_of_a_real_history_reaches_every_output(replay, config: Path) -> None:
    """Llama 3.1's generation_config commit (128008 <|eom_id|> added) is a stop_tokens change in history, show,
    diff and the feed; revisions that did not touch it say null."""
    assert run_cli("watch", "add", LLAMA, "--backfill", "20", config=config).returncode == 0
    assert run_cli("poll", config=config).returncode == 0
    history = cli_json("history", LLAMA, config=config)
    assert all({"tokenizer_behaviour", "stop_tokens", "end_of_turn"} <= set(r) for r in history)
    assert [r["title"] for r in history if r["stop_tokens"] is not None] == [
        "Update generation_config.json", "Upload folder using huggingface_hub"]  # the set appearing is an addition too
    changed = history[[r["title"] for r in history].index("Update generation_config.json")]
    assert [t["id"] for t in changed["stop_tokens"]["added"]] == [128008]
    assert changed["stop_tokens"]["dropped"] == []
    [change] = [c for c in changed["changes"] if c["kind"] == "stop_tokens"]
    assert change["severity"] == "notice" and "added 128008" in change["summary"]
    assert all(r["tokenizer_behaviour"] is None for r in history)  # the history has no tokenizer.json

    shown = cli_json("show", LLAMA, changed["sha"], config=config)
    assert shown["stop_tokens"] == {**changed["stop_tokens"], "changed": True,
                                    "by_runtime": changed["stop_tokens"]["by_runtime"]}
    # Each runtime's set at this revision: transformers, vLLM and text-generation-inference read generation_config's
    # list (vLLM adds the tokenizer's eos, <|eot_id|>, already in it); llama.cpp stops on the tokenizer's eos and on
    # <|end_of_text|>, <|eom_id|> and <|eot_id|> by their text.
    assert shown["stop_tokens"]["by_runtime"] == {"transformers": [128001, 128008, 128009],
                                                  "vllm": [128001, 128008, 128009],
                                                  "tgi": [128001, 128008, 128009],
                                                  "llama.cpp": [128001, 128008, 128009]}
    assert changed["stop_tokens"]["by_runtime_before"]["transformers"] == [128001, 128009]
    assert changed["stop_tokens"]["by_runtime_before"]["llama.cpp"] == [128001, 128008, 128009]
    assert set(changed["stop_tokens"]["runtime_changes"]) == {"transformers", "vllm", "tgi"}
    # A later revision that did not change the set: `history` says null, `show` still gives each runtime's set.
    later = history[[r["title"] for r in history].index("Update generation_config.json") - 1]
    assert later["stop_tokens"] is None
    assert cli_json("show", LLAMA, later["sha"], config=config)["stop_tokens"] == {
        "changed": False, "by_runtime": changed["stop_tokens"]["by_runtime"]}
    diffed = cli_json("diff", LLAMA, changed["parent_sha"], changed["sha"], config=config)
    assert diffed["stop_tokens"]["added"] == changed["stop_tokens"]["added"]

    feed = run_cli("feed", LLAMA, config=config)
    assert feed.returncode == 0 and "stop tokens" in feed.stdout
