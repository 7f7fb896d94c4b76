"""The chat template matrix: time for a ~10 KB real template over every sample and engine (target under
1 s), with workers started for it (as before the warm pool) and kept warm (render.WorkerPool); over the
real templates of tests/fixtures/chat_templates (24, SOURCES.md) taken as successive versions of their
families, how many engine behaviour changes, reference prompt changes and code findings appear, and that a
revision with unchanged template bytes gets none; and the same over the bundled replay histories, polled in
full through the CLI. Never part of the test pass/fail.
Run: python -m benchmarks run template_matrix
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.declare import Benchmark, Figure, detail, run_alone
from tracker.differs import render, template_engines
from tracker.differs.template_code import added_findings
from tracker.revision.snapshot import FileEntry, Snapshot

TEMPLATES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "chat_templates"
TARGET_S = 1.0
# Families whose templates stand for successive versions of one repo, oldest first (SOURCES.md).
CHAINS = [
    ["meta-llama-Meta-Llama-3-8B-Instruct/2024-04-initial.jinja", "meta-llama-Meta-Llama-3-8B-Instruct/2024-05-add-generation-prompt.jinja",
     "meta-llama-Llama-3.3-70B-Instruct/chat_template.jinja", "meta-llama-Llama-3.2-3B-Instruct/chat_template.jinja"],
    ["Qwen-Qwen2-7B-Instruct/chat_template.jinja", "Qwen-Qwen2.5-7B-Instruct/chat_template.jinja"],
    ["microsoft-Phi-3-mini-4k-instruct/chat_template.jinja", "microsoft-Phi-3-small-8k-instruct/chat_template.jinja",
     "microsoft-Phi-3-medium-4k-instruct/chat_template.jinja", "microsoft-Phi-3.5-mini-instruct/chat_template.jinja"],
    ["NousResearch-Hermes-2-Pro-Llama-3-8B/default.jinja", "NousResearch-Hermes-3-Llama-3.1-70B/default.jinja"],
    ["deepseek-ai-deepseek-coder-33b-instruct/chat_template.jinja", "deepseek-ai-DeepSeek-Coder-V2-Instruct/chat_template.jinja",
     "deepseek-ai-DeepSeek-V2.5/chat_template.jinja"],
    ["mistralai-Mistral-7B-Instruct-v0.2/chat_template.jinja", "mistralai-Mistral-Nemo-Instruct-2407/chat_template.jinja"],
    ["CohereForAI-c4ai-command-r-plus/default.jinja", "CohereForAI-c4ai-command-r-plus/tool_use.jinja",
     "CohereForAI-c4ai-command-r-plus/rag.jinja"],
    ["openchat-openchat-3.5-0106/chat_template.jinja", "google-gemma-2-2b-it/chat_template.jinja",
     "NousResearch-Hermes-2-Pro-Llama-3-8B/tool_use.jinja", "zai-org-GLM-4.5-Air/chat_template.jinja"],
]
TEMPLATE_FILES = ("tokenizer_config.json", "chat_template.jinja", "chat_template.json")
BENCHMARK = Benchmark(
    name="template_matrix",
    about="The chat template matrix: a ~10 KB template over every sample and engine; changes over real template versions",
    tags=("slow", "differs"),
    timeout_s=1200,
    figures=(
        Figure("matrix for a 10 KB template, workers kept warm", "s", goal=TARGET_S, margin=0.5),
        Figure("matrix for a 10 KB template, workers started for it", "s", note="as before the warm pool"),
        Figure("real template versions: engine behaviour changes", "changes"),
        Figure("real template versions: reference renders that started or stopped working", "samples"),
        Figure("real template versions: code findings", "findings"),
        Figure("unchanged template bytes: changes or findings", "findings", goal=0),
        Figure("bundled histories: template behaviour changes", "changes"),
        Figure("bundled histories: changes on revisions whose template files did not change", "changes", goal=0),
    ),
)


def snapshot(text: str, sha: str) -> Snapshot:
    config = json.dumps({"chat_template": text, "bos_token": "<s>", "eos_token": "</s>"}).encode()
    snap = Snapshot(repo_id="bench/model", sha=sha)
    oid = hashlib.sha1(b"blob %d\0" % len(config) + config).hexdigest()
    snap.files["tokenizer_config.json"] = FileEntry(path="tokenizer_config.json", oid=oid, size=len(config))
    snap.contents["tokenizer_config.json"] = config
    return snap


def timed_matrix(text: str, keep: int) -> tuple[float, dict]:
    render.POOL.close()
    render.POOL.keep = keep
    template_engines.matrix(snapshot(text, "0" * 40))  # warm the interpreter caches (and, with keep, the workers)
    started = time.perf_counter()
    matrix = template_engines.matrix(snapshot(text, "1" * 40))
    return time.perf_counter() - started, matrix


def reference_prompts(matrix: dict) -> dict[str, bool]:
    engine = next(e for e in matrix["template_engines"] if e["engine"] == template_engines.REFERENCE)
    return {s["id"].split("/", 1)[1]: s["renders"] for s in engine["samples"]}


def version_figures() -> tuple[int, int, int, int, int, int]:
    """(templates, version steps, engine changes, code findings, samples whose reference rendering changed,
    findings on revisions with unchanged template bytes)."""
    seen, steps, changes, findings, moved, unchanged_hits = set(), 0, 0, 0, 0, 0
    for chain in CHAINS:
        previous = None
        for i, name in enumerate(chain):
            seen.add(name)
            text = (TEMPLATES / name).read_text(encoding="utf-8")
            current = template_engines.matrix(snapshot(text, f"{i:040x}"))
            again = template_engines.matrix(snapshot(text, f"{i + 1000:040x}"))  # same bytes, another commit
            unchanged_hits += len(template_engines.compare(current, again)) + len(added_findings(text, text))
            if previous is not None:
                steps += 1
                changes += len(template_engines.compare(previous[0], current))
                findings += len(added_findings(previous[1], text))
                before, after = reference_prompts(previous[0]), reference_prompts(current)
                moved += sum(before.get(k) != v for k, v in after.items())
            previous = (current, text)
    missing = {str(p.relative_to(TEMPLATES)) for p in TEMPLATES.glob("*/*.jinja")} - seen
    assert not missing, f"templates in no chain: {sorted(missing)}"
    return len(seen), steps, changes, findings, moved, unchanged_hits


def _cli(config: Path, *args: str) -> str:
    return subprocess.run([sys.executable, "-m", "tracker", "--config", str(config), *args], capture_output=True, text=True,
                          check=True, timeout=600).stdout


def replay_figures() -> tuple[int, int, int, int]:
    """(revisions, revisions whose template files changed, template behaviour changes, changes on revisions whose
    template files did not change) over every bundled history, polled in full through the CLI."""
    from tracker.standins.replay.control import BUNDLED_ROOT, ReplayServer

    revisions = touched = found = wrong = 0
    with tempfile.TemporaryDirectory() as tmp, ReplayServer(roots=[BUNDLED_ROOT]) as server:
        config = Path(tmp) / "hubwatch.toml"
        config.write_text(f'[hub]\nendpoint = "{server.endpoint}"\n[storage]\nurl = "sqlite:///{tmp}/db.sqlite"\n'
                          f'[osv]\napi_url = "http://127.0.0.1:9"\n', encoding="utf-8")
        for repo in server.repo_ids():
            _cli(config, "watch", "add", repo, "--backfill", "1000")
        subprocess.run([sys.executable, "-m", "tracker", "--config", str(config), "poll"], capture_output=True, check=False)
        for repo in server.repo_ids():
            history = json.loads(_cli(config, "history", repo, "--json"))
            oids = {r["sha"]: {f["path"]: f["oid"] for f in json.loads(_cli(config, "show", repo, r["sha"], "--json"))["files"]
                               if f["path"] in TEMPLATE_FILES} for r in history}
            for r in history:
                revisions += 1
                changed = r["parent_sha"] is not None and oids.get(r["parent_sha"]) != oids[r["sha"]]
                touched += changed
                behaviour = [c for c in r["changes"] if c["kind"] == "chat_template" and not r["baseline"]
                             and ((c["detail"] or {}).get("change", "").startswith("engine_") or (c["detail"] or {}).get("findings"))]
                found += len(behaviour)
                wrong += 0 if changed else len(behaviour)
    return revisions, touched, found, wrong


def measure(size: int | None = None) -> dict[str, float]:
    big = (TEMPLATES / "CohereForAI-c4ai-command-r-plus" / "tool_use.jinja").read_text()
    big = big + "\n" + "{# padding #}" * max(0, (10_240 - len(big)) // 13)
    cold, _ = timed_matrix(big, keep=0)
    warm, matrix = timed_matrix(big, keep=2)
    engines = [e["engine"] + ("" if e["checked"] else " (not checked)") for e in matrix["template_engines"]]
    detail(f"matrix for a {len(big.encode()) / 1024:.1f} KB template, {len(matrix['template_samples'])} samples x "
           f"{len(engines)} engines ({', '.join(engines)})")
    templates, steps, changes, findings, moved, unchanged_hits = version_figures()
    detail(f"{templates} real templates in {len(CHAINS)} version chains ({steps} version steps)")
    revisions, touched, found, wrong = replay_figures()
    detail(f"bundled replay histories: {revisions} revisions, {touched} with template files changed")
    render.POOL.close()
    return {"matrix for a 10 KB template, workers kept warm": warm, "matrix for a 10 KB template, workers started for it": cold,
            "real template versions: engine behaviour changes": changes,
            "real template versions: reference renders that started or stopped working": moved,
            "real template versions: code findings": findings, "unchanged template bytes: changes or findings": unchanged_hits,
            "bundled histories: template behaviour changes": found,
            "bundled histories: changes on revisions whose template files did not change": wrong}


if __name__ == "__main__":
    run_alone(BENCHMARK, measure)
