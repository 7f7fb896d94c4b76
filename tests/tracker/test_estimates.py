"""The estimator inside the pipeline and behind `hubwatch estimate`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from storage.history import NewEstimate
from tests.support.cli import run_cli, write_config
from tests.support.served import serve
from tracker.cli.app import App
from tracker.pipeline.estimate_change import estimate_change
from tracker.revision.changes import Severity

EVERY_KIND = "hubwatch-tests/every-kind"
BUNDLED = Path(__file__).resolve().parents[2] / "tracker" / "standins" / "replay" / "histories"


def _result(total: int, full_b1: int, batches: dict[str, dict[str, int]]) -> dict:
    return {
        "parameters": {"total": total, "used": "derived"},
        "memory": {"full_finetune": {"batch_1_bytes": full_b1}, "lora": {"batch_1_bytes": 1}},
        "cards": {card: {"max_batch": mb} for card, mb in batches.items()},
    }


@pytest.mark.parametrize(
    ("before", "after", "severity", "words"),
    [
        (_result(10, 2**30, {"L4 24GB": {"full_finetune": 9}}), _result(12, 2**31, {"L4 24GB": {"full_finetune": 7}}),
         Severity.WARNING, "full fine-tune at batch 9 no longer fits L4 24GB (largest batch now 7)"),
        (_result(10, 2**31, {"L4 24GB": {"full_finetune": 0}}), _result(10, 2**30, {"L4 24GB": {"full_finetune": 1}}),
         Severity.NOTICE, "full fine-tune now fits L4 24GB at batch 1"),
        (_result(10, 2**30, {"T4 16GB": {"lora": 3}}), _result(11, 2**30, {"T4 16GB": {"lora": 3}}),
         Severity.NOTICE, "parameters 10 -> 11"),
    ],
)
def test_estimate_change_names_card_crossings(before: dict, after: dict, severity: Severity, words: str) -> None:
    """An estimate change says what crossed a card boundary, and warns when something stops fitting."""
    change = estimate_change(NewEstimate(1, before), NewEstimate(1, after))
    assert change is not None and change.severity == severity
    assert words in change.summary


def test_unchanged_estimate_is_not_a_change() -> None:
    """The same figures twice make no change."""
    same = _result(10, 2**30, {"L4 24GB": {"full_finetune": 9}})
    assert estimate_change(NewEstimate(10, same), NewEstimate(10, same)) is None


def _ingest_all(app: App, replay, repo_id: str) -> None:
    replay.set_head(repo_id, 1)
    app.store.watches.add_watch(repo_id, "main", 900)
    app.poller.poll()
    replay.set_head(repo_id, len(replay.commits(repo_id)))
    app.poller.poll()


def test_structural_change_reruns_the_estimate(app: App, replay) -> None:
    """Raising max_position_embeddings reruns the estimate; its change and event are stored."""
    _ingest_all(app, replay, EVERY_KIND)
    sha = next(c.sha for c in replay.commits(EVERY_KIND) if c.dirname == "0002-longer-context")
    revision = app.store.history.find_revision(EVERY_KIND, sha)
    changes = app.store.history.changes_by_revision([revision.id])[revision.id]
    [change] = [c for c in changes if c.kind == "estimate" and c.summary.startswith("estimate:")]
    assert "full fine-tune batch 1" in change.summary
    assert app.store.history.estimate_for(revision.id).result["input"]["sequence_length"] == 1024
    events = [e for e in app.store.history.list_events(EVERY_KIND) if e.kind == "estimate.changed"]
    assert [e.sha for e in events] == [sha]
    unchanged = next(c.sha for c in replay.commits(EVERY_KIND) if c.dirname == "0004-chat-template")
    assert app.store.history.estimate_for(app.store.history.find_revision(EVERY_KIND, unchanged).id) is None


def test_a_costlier_structure_is_a_cost_event_with_before_and_after(app: App, replay) -> None:
    """Twice the context costs more than 10% more on every card: one estimate.cost_changed event (a warning) whose
    detail holds every card's figures before and after; the stored estimate carries the cost section."""
    _ingest_all(app, replay, EVERY_KIND)
    sha = next(c.sha for c in replay.commits(EVERY_KIND) if c.dirname == "0002-longer-context")
    revision = app.store.history.find_revision(EVERY_KIND, sha)
    [change] = [c for c in app.store.history.changes_by_revision([revision.id])[revision.id] if c.summary.startswith("cost:")]
    assert change.kind == "estimate" and change.severity == "warning" and "training run on" in change.summary
    [event] = [e for e in app.store.history.list_events(EVERY_KIND) if e.kind == "estimate.cost_changed"]
    assert event.sha == sha and event.severity == "warning"
    detail = event.payload["detail"]
    assert detail["threshold"] == 0.1 and detail["moved"]
    a10g_before, a10g_after = (detail[side]["train"]["A10G 24GB"]["usd"] for side in ("before", "after"))
    assert a10g_after > 1.1 * a10g_before > 0
    stored = app.store.history.estimate_for(revision.id).result["cost"]
    assert stored["train"]["cards"][0]["card"] == "T4 16GB" and stored["estimate"] is True
    with serve(app.store) as server, server.client() as client:
        page = client.get(f"/repos/{EVERY_KIND}/revisions/{sha}").text
        api = client.get(f"/api/v1/repos/{EVERY_KIND}/revisions/{sha}").json()
    assert "What it costs to run" in page and "$ per million tokens" in page
    assert api["estimate"]["result"]["cost"]["train"]["flops_per_sample"] == stored["train"]["flops_per_sample"]


@pytest.mark.parametrize(
    ("repo_id", "published"),
    [("jinaai/jina-clip-v2", 865_278_476), ("laion/CLIP-ViT-B-32-laion2B-s34B-b79K", 151_277_439)],
)
def test_custom_code_and_two_tower_repos_match_their_checkpoint(app: App, replay, repo_id: str, published: int) -> None:
    """A custom-code repo and a two-tower CLIP come out within 0.1% of their published checkpoint size."""
    _ingest_all(app, replay, repo_id)
    revision = app.store.history.list_revisions(repo_id, limit=1)[0]
    total = app.store.history.latest_estimate(repo_id)[1].parameters_total
    assert abs(total - published) / published < 0.001, total
    assert revision.sha == replay.head_sha(repo_id)


def test_custom_code_repo_gets_memory_figures_read_from_its_weights(app: App, replay) -> None:
    """jina-clip-v2 (custom code) ingested: its stored estimate sizes every mode from the weight headers."""
    _ingest_all(app, replay, "jinaai/jina-clip-v2")
    result = app.store.history.latest_estimate("jinaai/jina-clip-v2")[1].result
    assert result["input"]["structure_source"] == "weights" and result["parameters"]["used"] == "checkpoint"
    for mode in ("inference", "full_finetune", "lora", "qlora"):
        assert isinstance(result["memory"][mode]["batch_1_bytes"], int), mode
    assert any(n.startswith("structure derived from the weight manifest") for n in result["notes"])
    assert not any(n.startswith("activations unknown") for n in result["notes"])


def test_estimate_cli_on_a_config_file_and_a_revision(replay, tmp_path: Path, database_url: str) -> None:
    """`hubwatch estimate --config-file` and `hubwatch estimate REPO` print tables and JSON with integers."""
    config_file = next(BUNDLED.glob("meta-llama/Llama-3.1-8B-Instruct/commits/*/files/config.json"))
    result = run_cli("estimate", "--config-file", str(config_file), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["parameters"]["total"] == 8_030_261_248 and data["parameters"]["checkpoint"] is None
    assert isinstance(data["memory"]["full_finetune"]["batch_1_bytes"], int)
    config = write_config(tmp_path / "h.toml", replay.endpoint, database_url)
    replay.set_head(EVERY_KIND, 1)
    assert run_cli("watch", "add", EVERY_KIND, config=config).returncode == 0
    assert run_cli("poll", config=config).returncode == 0
    table = run_cli("estimate", EVERY_KIND, config=config)
    assert table.returncode == 0, table.stderr
    assert "Largest batch per card" in table.stdout and "config.json and weight headers" in table.stdout


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["estimate"], 2, "either REPO or --config-file"),
        (["estimate", "hubwatch-tests/never-polled"], 3, "no stored revision"),
    ],
)
def test_estimate_cli_errors(tmp_path: Path, replay, args: list[str], code: int, message: str) -> None:
    """Missing input and unknown repos fail with a clear message and exit code (a repo neither stored nor on the Hub
    says both)."""
    config = write_config(tmp_path / "h.toml", replay.endpoint, tmp_path / "h.db")
    result = run_cli(*args, config=config)
    assert result.returncode == code and message in result.stderr, result.stderr


def test_estimate_cli_names_the_bad_key(tmp_path: Path) -> None:
    """A config with a nonsensical value is refused with the key named, exit code 1."""
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({"model_type": "llama", "hidden_size": -5, "num_hidden_layers": 2,
                               "num_attention_heads": 4, "intermediate_size": 8, "vocab_size": 10}))
    result = run_cli("estimate", "--config-file", str(bad))
    assert result.returncode == 1 and "hidden_size" in result.stderr


def test_estimate_cli_takes_lora_rank_and_targets(tmp_path: Path) -> None:
    """--lora-rank and --lora-targets reach the estimate; a target the model lacks is refused by name."""
    config_file = next(BUNDLED.glob("meta-llama/Llama-3.1-8B-Instruct/commits/*/files/config.json"))
    data = json.loads(run_cli("estimate", "--config-file", str(config_file), "--lora-rank", "8",
                              "--lora-targets", "q_proj,v_proj", "--json").stdout)
    assert data["memory"]["assumptions"]["lora_rank"] == 8
    assert data["memory"]["lora"]["parts"]["lora_targets"] == ["q_proj", "v_proj"]
    bad = run_cli("estimate", "--config-file", str(config_file), "--lora-targets", "c_attn")
    assert bad.returncode == 1 and "lora_targets" in bad.stderr
    assert run_cli("estimate", "--config-file", str(config_file), "--lora-rank", "0").returncode == 2


LLAMA_31 = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "estimator" / "configs" / "llama"
                       / "Llama-3.1-8B.json").read_text(encoding="utf-8"))


def _estimated(config: dict) -> NewEstimate:
    from estimator import estimate

    result = estimate(config)
    return NewEstimate(result.total, result.to_dict(), None)


MISTRAL = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "estimator" / "configs" / "mistral"
                      / "Mistral-7B-v0.1.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(("before", "after", "lost", "words"), [
    # Mistral 7B v0.3 dropped v0.1's 4k sliding window: the whole context is cached again
    (MISTRAL, {**MISTRAL, "sliding_window": None}, True,
     "on L4 24GB: {a} sequences at 8k before, {b} now: the KV cache of one 8k sequence went from {kb} to {ka} MiB"),
    (LLAMA_31, {**LLAMA_31, "quantization_config": {"quant_method": "fp8"}}, False,
     "on T4 16GB: {a} sequences at 8k before, {b} now: the weights went from 15.0 to 8.5 GiB"),
])
def test_serving_changes_say_what_moved_and_why(before: dict, after: dict, lost: bool, words: str) -> None:
    """A sliding window dropped or an fp8 checkpoint moves the serving figures across cards: the change names the
    card, the figure and the cause (the cache of a sequence, the weights); fewer sequences is a warning."""
    old, new = _estimated(before), _estimated(after)
    card = "L4 24GB" if lost else "T4 16GB"
    kv = [(e.result["serving"]["kv_cache"]["vllm"]["at_context"]["8192"]) // 2**20 for e in (old, new)]  # type: ignore[index]
    words = words.format(a=old.result["serving"]["cards"][card]["concurrency"]["8192"],  # type: ignore[index]
                         b=new.result["serving"]["cards"][card]["concurrency"]["8192"], kb=kv[0], ka=f"{kv[1]:,}")  # type: ignore[index]
    change = estimate_change(old, new)
    assert change is not None and words in " ".join(change.detail["no_longer_fits" if lost else "now_fits"])
    assert change.severity is (Severity.WARNING if lost else Severity.NOTICE)


@pytest.mark.parametrize(("path", "structural", "rerun"), [
    ("model-Q4_K_M.gguf", False, True), ("model.safetensors", False, False), ("README.md", False, False),
    ("model.safetensors", True, True),
])
def test_a_gguf_change_reruns_the_estimate(path: str, structural: bool, rerun: bool) -> None:
    """A GGUF file added, removed or changed reruns the estimate (a GGUF-only repo's reads them); other files do
    only when structural."""
    from tracker.pipeline.estimate_change import should_estimate
    from tracker.revision.changes import Change, ChangeKind

    change = Change(ChangeKind.WEIGHTS, path, f"{path} changed", Severity.NOTICE, {}, structural)
    assert should_estimate(False, [change], {"parameters": {}}) is rerun


def test_a_configured_price_reprices_stored_cost_and_moves_no_event_by_itself(app: App, replay, database_url: str) -> None:
    """The first revision estimated at the table's prices; then the daemon restarts with [cost] cards setting the
    A10G at $5 an hour. The cost event of the longer context compares both sides at $5 (the parent's dollars are its
    stored hours x 5, not the old price's), and the page and API show the parent's stored hours at $5, saying so."""
    from estimator.cost import reprice
    from tests.support.settings import settings_for

    replay.set_head(EVERY_KIND, 1)
    app.store.watches.add_watch(EVERY_KIND, "main", 900)
    app.poller.poll()
    first = app.store.history.list_revisions(EVERY_KIND, limit=1)[0]
    stored = app.store.history.estimate_for(first.id).result["cost"]
    hours = next(r for r in stored["train"]["cards"] if r["card"] == "A10G 24GB")["hours"]
    assert hours and stored["cards"]["A10G 24GB"]["usd_per_hour"] != 5
    dearer = App(settings_for(replay.endpoint, database_url, cost={"cards": ["A10G 24GB:usd_per_hour=5"]}))  # type: ignore[arg-type]
    try:
        replay.set_head(EVERY_KIND, len(replay.commits(EVERY_KIND)))
        dearer.poller.poll()
        [event] = [e for e in dearer.store.history.list_events(EVERY_KIND) if e.kind == "estimate.cost_changed"]
        before = event.payload["detail"]["before"]["train"]["A10G 24GB"]
        assert before["hours"] == hours and before["usd"] == pytest.approx(hours * 5)
        table = dearer.settings.cost.card_table()
        with serve(dearer.store, reprice=lambda cost: reprice(cost, table, on="2026-12-05")) as server, \
                server.client() as client:
            page = client.get(f"/repos/{EVERY_KIND}/revisions/{first.sha}").text
            api = client.get(f"/api/v1/repos/{EVERY_KIND}/revisions/{first.sha}").json()
    finally:
        dearer.store.engine.dispose()
    shown = api["estimate"]["result"]["cost"]
    row = next(r for r in shown["train"]["cards"] if r["card"] == "A10G 24GB")
    assert row["hours"] == hours and row["usd"] == pytest.approx(hours * 5)
    assert shown["cards"]["A10G 24GB"]["usd_per_hour"] == 5 and shown["priced"]["on"] == "2026-12-05"
    assert f"${hours * 5:,.2f}" in page and "card prices configured now (applied 2026-12-05)" in page
    assert "A10G 24GB: $5 an hour (configuration ([cost] cards))" in page
