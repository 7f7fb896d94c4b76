"""Figure: a revision that changes only config.json grows the database by less than 10 KB.

A Llama-like repo (config, generation config, tokenizer files with a chat template, 4 safetensors
shards with their index, README, licence) receives 40 commits that each change only config.json.
The SQLite file (WAL checkpointed) is measured after the baseline and after the last commit; the
growth per revision is the difference divided by 40. Baseline to compare with: the 10 KB goal.
Run: python -m benchmarks run db_growth   (size: config-only commits, default 40; `--tables` as a script lists table sizes)
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._histories import replayed_app
from benchmarks.declare import Benchmark, Figure, detail, run_alone
from tests.support.synthetic_repos import CONFIG, write_repo
from tracker.cli.app import App

COMMITS = 40
GOAL_BYTES = 10 * 1024
BENCHMARK = Benchmark(
    name="db_growth",
    about="Database growth per revision that changes only config.json, on a Llama-like repo",
    tags=("quick", "storage"),
    size="config-only commits (default 40)",
    small=10,
    figures=(Figure("growth per config-only revision", "bytes", goal=GOAL_BYTES, margin=0.05),
             Figure("database after the baseline", "bytes")),
)
TEMPLATE = (
    "{{- bos_token }}{%- for message in messages %}{{- '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"
)


def _shard(i: int) -> dict[str, object]:
    tensor = {"dtype": "BF16", "shape": [1024, 4096], "data_offsets": [0, 1024 * 4096 * 2]}
    return {"safetensors": {"__metadata__": {"format": "pt"}, f"model.layers.{i}.mlp.up_proj.weight": tensor}}


def _files() -> dict[str, object]:
    return {
        "config.json": CONFIG,
        "generation_config.json": {"bos_token_id": 128000, "eos_token_id": [128001, 128009], "do_sample": True},
        "tokenizer_config.json": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "chat_template": TEMPLATE},
        "special_tokens_map.json": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
        "model.safetensors.index.json": {
            "metadata": {"total_size": 16060522496},
            "weight_map": {f"model.layers.{i}.mlp.up_proj.weight": f"model-0000{i + 1}-of-00004.safetensors" for i in range(4)},
        },
        "README.md": "---\nlicense: llama3.1\n---\n# Llama-like\n" + "Model card text. " * 400,
        "LICENSE": "LLAMA 3.1 COMMUNITY LICENSE AGREEMENT\n" + "terms " * 2000,
        ".gitattributes": "*.safetensors filter=lfs diff=lfs merge=lfs -text\n",
    }


def _db_bytes(app: App) -> int:
    with app.store.engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = conn.exec_driver_sql("PRAGMA page_count").scalar()
        free = conn.exec_driver_sql("PRAGMA freelist_count").scalar()
        size = conn.exec_driver_sql("PRAGMA page_size").scalar()
    return int((pages - free) * size)


def measure(size: int | None = None) -> dict[str, float]:
    moves = size or COMMITS
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "histories"
        commits = [{"files": _files(), "lfs": {f"model-0000{i + 1}-of-00004.safetensors": _shard(i) for i in range(4)}}]
        for i in range(moves):
            commits.append({"title": f"Update config.json ({i})",
                            "files": {"config.json": {**CONFIG, "rope_theta": 500000.0 + i + 1}}})
        write_repo(root, "bench/llama-like", commits)
        with replayed_app(root, Path(tmp) / "h.db") as (app, server):
            app.store.watches.add_watch("bench/llama-like", "main", 900)
            server.set_head("bench/llama-like", 1)
            app.poller.poll()
            before = _db_bytes(app)
            server.set_head("bench/llama-like", moves + 1)
            [outcome] = app.poller.poll()
            assert outcome.status == "ingested" and len(outcome.revisions) == moves, outcome.error
            after = _db_bytes(app)
            if "--tables" in sys.argv:
                with app.store.engine.connect() as conn:
                    for name, size in conn.exec_driver_sql("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC LIMIT 40"):
                        detail(f"  {name:40} {size:>10,}")
            with app.store.engine.connect() as conn:
                rows = {t: conn.execute(sa.text(f"SELECT COUNT(*) FROM {t}")).scalar()
                        for t in ("revision", "revision_file", "blob", "change", "event")}
    detail(f"database after {moves} revisions: {after:,} bytes; rows: {rows}")
    return {"growth per config-only revision": (after - before) / moves, "database after the baseline": before}


if __name__ == "__main__":
    run_alone(BENCHMARK, measure, [a for a in sys.argv[1:] if a != "--tables"])
