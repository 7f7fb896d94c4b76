"""Hub requests per derivative when a base's family is followed (issue 24's cost figures).

The base is the bundled Llama 3.1 8B Instruct history at its second commit (before the template fix); 100
derivatives are listed as quantized or finetune: 40 GGUF repos (each its own header, with the base's real
template, a real 30,522-token vocabulary and merges: one ranged read each), 40 transformers copies of the
base's tokenizer and generation files (blobs the store holds: no download), 20 fine-tunes with their own
tokenizer_config.json and generation_config.json (two small reads). Figures, beside the goals:

1. first pass: requests per derivative (goal: at most 4) and the listing requests; each derivative's baseline
   revision is stored from what its check read, at no extra request;
2. a later pass where no derivative moved (goal: 1 per derivative: its head);
3. a later pass after the base's template fix (no derivative moved: still 1 each), and the reach it reports;
4. a pass where 20 derivatives moved (10 GGUF repos re-uploaded with the fixed template, 10 fine-tunes with a new
   template of their own): each moved one's commits ingested by the watch's pipeline, as its own revisions;
   requests per moved derivative (no goal in the issue; a watch's ingest of the same commit is the reference),
   and per unmoved one (goal: still 1);
5. the OSV records of the derivatives still behind the base (issue 38), and the time a pass spends refreshing
   them when nothing is new (no goal: a part of the pass's time, reported).

    python -m benchmarks run derivatives
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.declare import Benchmark, Figure, detail, run_alone
from tests.support.derivative_repos import BASE, base_file, base_template, card
from tests.support.gguf_files import GgufFile, GgufSpec, gguf_header, write_gguf_repo
from tests.support.settings import settings_for
from tests.support.synthetic_repos import write_repo
from tracker.cli.app import App
from tracker.cli.logs import configure_logging
from tracker.config.sections import LogSettings
from tracker.standins.replay.control import BUNDLED_ROOT, ReplayServer

FIRST_GOAL, LATER_GOAL = 4.0, 1.0
OLD = "0002-upload-folder-using-huggingface-hub"
FIXED = "0003-update-tokenizer-config-json"
MOVING = 10  # GGUF repos and fine-tunes each that publish a second commit in the last pass
BENCHMARK = Benchmark(
    name="derivatives",
    about="Hub requests per derivative when a base's family of 100 derivatives is followed",
    tags=("slow", "family"),
    figures=(
        Figure("first pass, requests per derivative", "requests", goal=FIRST_GOAL),
        Figure("later pass, nothing moved, requests per derivative", "requests", goal=LATER_GOAL),
        Figure("after the base's template fix, requests per derivative", "requests", goal=LATER_GOAL),
        Figure("pass where 20 moved, requests per moved derivative", "requests",
               note="no goal in the issue; a watch's ingest of the same commit is the reference"),
        Figure("pass where 20 moved, requests per unmoved derivative", "requests", goal=LATER_GOAL),
        Figure("baselines stored from the check's reads", "derivatives", goal=100, direction="higher",
               note="of 100: each stored at no extra request"),
        Figure("derivative OSV records written", "records", note="one per derivative, part and base change missed (issue 38)"),
        Figure("OSV record refresh with nothing new, per pass", "s",
               note="every derivative's stored history walked against the base's again; rewrites nothing"),
    ),
)


def _family(root: Path) -> tuple[list[str], list[str]]:
    """The 100 derivatives, and the 20 of them with a second commit (hidden until the last pass)."""
    names, moving = [], []
    template, fixed = base_template(OLD), base_template(FIXED)
    for i in range(40):
        repo = f"quant{i:02d}/Llama-3.1-8B-Instruct-GGUF"
        spec = GgufSpec(name=f"Llama {i}", templates={"default": template}, context_length=8192 + i)
        commits: list[dict[str, object]] = [{"files": {"README.md": card(BASE, "quantized")},
                                             "gguf": {"model-Q4_K_M.gguf": GgufFile(gguf_header(spec))}}]
        if i < MOVING:
            again = GgufSpec(name=f"Llama {i}", templates={"default": fixed}, context_length=8192 + i)
            commits.append({"title": "Re-upload with the fixed template", "gguf": {"model-Q4_K_M.gguf": GgufFile(gguf_header(again))}})
            moving.append(repo)
        write_gguf_repo(root, repo, commits)
        names.append(repo)
    copied = {p: base_file(OLD, p) for p in ("tokenizer_config.json", "generation_config.json", "special_tokens_map.json")}
    for i in range(40):
        repo = f"awq{i:02d}/Llama-3.1-8B-Instruct-AWQ"
        write_repo(root, repo, [{"files": {**copied, "config.json": {"quantization_config": {"bits": 4}},
                                           "README.md": card(BASE, "quantized")}}])
        names.append(repo)
    for i in range(20):
        repo = f"tune{i:02d}/Llama-3.1-8B-Instruct-tuned"
        own = json.loads(copied["tokenizer_config.json"])
        own["chat_template"] = template + f"\n{{# tune {i} #}}"
        tune_commits: list[dict[str, object]] = [{"files": {
            "tokenizer_config.json": own, "generation_config.json": {"temperature": i / 20}, "README.md": card(BASE, "finetune")}}]
        if i < MOVING:
            tune_commits.append({"title": "New template", "files": {
                "tokenizer_config.json": {**own, "chat_template": fixed + f"\n{{# tune {i}, again #}}"}}})
            moving.append(repo)
        write_repo(root, repo, tune_commits)
        names.append(repo)
    for n, repo in enumerate(names):
        path = root / repo / "repo.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "downloads": 10_000 - n}))
    return names, moving


def _pass(app: App, server: ReplayServer, moving: list[str] = ()) -> tuple[int, int, float, int]:
    """Requests of the family (the base's own left out), listing requests, seconds, and the requests that name a
    repo of `moving`."""
    server.reset_requests()
    started = time.perf_counter()
    [outcome] = app.poller.poll()
    assert not outcome.failed, outcome.error
    elapsed = time.perf_counter() - started
    requests = [r for r in server.requests if not r.path.startswith(f"/api/models/{BASE}") and f"/{BASE}/" not in r.path]
    listing = sum(r.path == "/api/models" for r in requests)
    moved = sum(any(f"/{repo}/" in r.path or r.path.endswith(f"/{repo}") for repo in moving) for r in requests)
    return len(requests) - listing, listing, elapsed, moved


def measure(size: int | None = None) -> dict[str, float]:
    figures: dict[str, float] = {}
    configure_logging(LogSettings(level="warning"))
    with tempfile.TemporaryDirectory() as tmp:
        names, moving = _family(Path(tmp) / "family")
        server = ReplayServer(roots=[BUNDLED_ROOT, Path(tmp) / "family"])
        server.set_head(BASE, 2)
        for repo in moving:
            server.set_head(repo, 1)
        with server:
            app = App(settings_for(server.endpoint, Path(tmp) / "h.db"))  # type: ignore[arg-type]
            app.store.watches.add_watch(BASE, "main", 900)
            app.store.derivatives.follow(BASE, ("quantized", "finetune"), 100)
            n = len(names)
            first, listing, elapsed, _ = _pass(app, server)
            figures["first pass, requests per derivative"] = first / n
            detail(f"first pass: {first} requests for {n} derivatives = {first / n:.2f} per derivative "
                  f"(goal <= {FIRST_GOAL:.0f}; ratio {first / n / FIRST_GOAL:.2f}), plus {listing} listing requests; {elapsed:.1f} s")
            stored = sum(bool(app.store.history.list_revisions(repo, limit=1)) for repo in names)
            figures["baselines stored from the check's reads"] = stored
            detail(f"  baselines stored from the check's reads: {stored} of {n} derivatives")
            later, listing, elapsed, _ = _pass(app, server)
            figures["later pass, nothing moved, requests per derivative"] = later / n
            detail(f"later pass, nothing moved: {later / n:.2f} requests per derivative (goal {LATER_GOAL:.0f}; "
                  f"ratio {later / n / LATER_GOAL:.2f}), plus {listing} listing requests; {elapsed:.1f} s")
            server.set_head(BASE, 3)
            fixed, listing, elapsed, _ = _pass(app, server)
            report = app.store.derivatives.get_follow(BASE).last_report or {}
            figures["after the base's template fix, requests per derivative"] = fixed / n
            detail(f"after the base's template fix: {fixed / n:.2f} requests per derivative (goal {LATER_GOAL:.0f}), "
                  f"plus {listing} listing requests; {elapsed:.1f} s")
            for line in report.get("events", []):
                detail(f"  event: {line}")
            for repo in moving:
                server.advance(repo)
            total, listing, elapsed, moved = _pass(app, server, moving)
            m, still = len(moving), n - len(moving)
            revisions = sum(len(app.store.history.list_revisions(repo)) for repo in moving)
            figures["pass where 20 moved, requests per moved derivative"] = moved / m
            figures["pass where 20 moved, requests per unmoved derivative"] = (total - moved) / still
            detail(f"pass where {m} derivatives moved: {moved} requests for the {m} moved = {moved / m:.2f} per moved "
                  f"derivative ({revisions} revisions stored for them, each its own); the {still} unmoved "
                  f"{(total - moved) / still:.2f} each (goal {LATER_GOAL:.0f}; ratio {(total - moved) / still / LATER_GOAL:.2f}); "
                  f"plus {listing} listing requests; {elapsed:.1f} s")
            detail(f"  the pass's report counts {(app.store.derivatives.get_follow(BASE).last_report or {}).get('requests')} "
                  f"requests; the replay counted {total + listing}")
            figures.update(_records(app))
            app.store.engine.dispose()
    return figures


def _records(app: App) -> dict[str, float]:
    """The OSV records of derivatives behind the base (tracker/family/derivative_records.py), and what each pass
    spends keeping them: a refresh with nothing new walks every derivative's stored history again, timed here."""
    from tracker.family import derivative_records
    from tracker.family.lineage import parts_of
    from tracker.revision.stored import load_snapshot

    records = [o for o in app.store.advisories.own() if o.class_id == derivative_records.CLASS_ID]
    revisions = list(reversed(app.store.history.list_revisions(BASE)))
    history = [(r.sha, parts_of(load_snapshot(app.store, r))) for r in revisions]
    started = time.perf_counter()
    written = derivative_records.refresh(app.store, BASE, revisions, history, app.settings.hub.endpoint, app.store.clock())
    elapsed = time.perf_counter() - started
    walked = sum(len(app.store.history.list_revisions(d.repo_id)) for d in app.store.derivatives.derivatives(BASE))
    detail(f"derivative OSV records: {len(records)} ({sum(o.fixed_sha is not None for o in records)} fixed); a refresh "
           f"with nothing new walked {walked} derivative revisions in {elapsed:.2f} s and rewrote {len(written)}")
    return {"derivative OSV records written": len(records), "OSV record refresh with nothing new, per pass": elapsed}


if __name__ == "__main__":
    run_alone(BENCHMARK, measure)
