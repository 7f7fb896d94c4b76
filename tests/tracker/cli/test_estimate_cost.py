"""`hubwatch estimate --cost`: training and serving cost per card on the table and in --json, priced from [cost]."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import run_cli, write_config
from tracker.config import load_settings
from tracker.errors import ConfigError

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "estimator"
LLAMA = str(FIXTURES / "configs" / "llama" / "Llama-3.1-8B.json")
CLIP = str(FIXTURES / "configs" / "clip" / "CLIP-ViT-B-32-laion2B-s34B-b79K.json")


def test_cost_json_has_the_documented_keys() -> None:
    """--cost --json: cost.train.flops_per_sample, cost.train.cards[].{card, hours, usd} and
    cost.serve.cards[].{card, tokens_per_s, usd_per_mtok}, one row per card, marked as an estimate."""
    out = run_cli("estimate", "--config-file", LLAMA, "--cost", "--json")
    assert out.returncode == 0, out.stderr
    cost = json.loads(out.stdout)["cost"]
    assert isinstance(cost["train"]["flops_per_sample"], int) and cost["estimate"] is True
    assert cost["assumptions"]["measured"] is False
    assert [r["card"] for r in cost["train"]["cards"]] == [r["card"] for r in cost["serve"]["cards"]]
    assert len(cost["train"]["cards"]) == 7
    assert all({"card", "hours", "usd"} <= r.keys() for r in cost["train"]["cards"])
    assert all({"card", "tokens_per_s", "usd_per_mtok"} <= r.keys() for r in cost["serve"]["cards"])


def test_without_cost_the_output_is_unchanged() -> None:
    """Without --cost, --json has no cost key and the table no cost section."""
    assert "cost" not in json.loads(run_cli("estimate", "--config-file", LLAMA, "--json").stdout)
    assert "Cost per run" not in run_cli("estimate", "--config-file", LLAMA).stdout


def test_cost_table_prices_the_seed_run_and_says_it_is_an_estimate() -> None:
    """CLIP's table: hours and $ a run per card, the seed's workload named, no serving for an encoder, the
    declared utilisation and the card without a price said."""
    out = run_cli("estimate", "--config-file", CLIP, "--cost")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "Cost per run (an estimate: 10 epochs x 50,000 samples at batch 32, 15,630 optimizer steps)" in text
    section = text[text.index("Cost per run"):].splitlines()
    a10g = next(line for line in section if line.strip().startswith("A10G 24GB"))
    assert "$0.28" in a10g and "compute" in a10g  # 40% of 70 TFLOPS, AdamW at 65% of 600 GB/s
    h200 = next(line for line in section if line.strip().startswith("H200 141GB"))
    assert h200.count("no price") >= 2 and "min" in h200  # priced nowhere, timed all the same
    assert "generates no tokens" in text and "40% of the dense bf16 peak" in text and "no price for H200 141GB" in text


def test_config_prices_and_workload_reach_the_figures(tmp_path: Path, replay, database_url: str) -> None:
    """[cost] in the config file: a price override and a smaller run change a stored revision's figures."""
    config = write_config(tmp_path / "h.toml", replay.endpoint, database_url)
    Path(config).write_text(Path(config).read_text() + '\n[cost]\nepochs = 1\ncards = ["A10G 24GB:usd_per_hour=2.012"]\n')
    replay.set_head("hubwatch-tests/every-kind", 1)
    assert run_cli("watch", "add", "hubwatch-tests/every-kind", config=config).returncode == 0
    assert run_cli("poll", config=config).returncode == 0
    out = run_cli("estimate", "hubwatch-tests/every-kind", "--cost", "--json", config=config)
    assert out.returncode == 0, out.stderr
    cost = json.loads(out.stdout)["cost"]
    assert cost["workload"]["epochs"] == 1 and cost["cards"]["A10G 24GB"]["usd_per_hour"] == 2.012
    a10g = next(r for r in cost["train"]["cards"] if r["card"] == "A10G 24GB")
    assert a10g["usd"] is not None and abs(a10g["usd"] - 2.012 * a10g["hours"]) < 1e-9


@pytest.mark.parametrize("table, message", [
    ('cards = ["Z100 1GB:usd_per_hour=1"]', "unknown card"),
    ("batch = 0", "cost.batch"),
    ("change_threshold = 0", "change_threshold"),
])
def test_bad_cost_settings_are_config_errors(tmp_path: Path, table: str, message: str) -> None:
    """A bad [cost] entry is refused at load with a message naming it."""
    path = tmp_path / "h.toml"
    path.write_text(f"[cost]\n{table}\n")
    with pytest.raises(ConfigError, match=message):
        load_settings(str(path), env={})
