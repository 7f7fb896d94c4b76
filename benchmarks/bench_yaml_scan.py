"""`hubwatch outdated --scan` over YAML deployment files read as YAML: seconds to scan ~1 MiB of manifests
(the fixture manifests of tests/fixtures/deploy_pins, each model renamed per copy, 16 multi-document files of
64 KiB), pins found per second, and how fast a billion-laughs file (10**9 nodes in 300 bytes) and a file of
merges into a huge structure are refused. Beside them, the regex line scan that read YAML before, on the same bytes.

    python -m benchmarks run yaml_scan   (size: KiB of manifests, default 1,024)
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.declare import Benchmark, Figure, detail, run_alone
from tracker.pins.code_scan import CodeScan, _scan_text, scan_tree

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "deploy_pins"
FILES = 16
BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(8))
MERGED = "m0: &m0 {k: [x, x, x, x, x, x, x, x, x, x]}\n" + "".join(
    f"m{i}: &m{i}\n  <<: *m{i - 1}\n  l: [{', '.join([f'*m{i - 1}'] * 12)}]\n" for i in range(1, 8))

BENCHMARK = Benchmark(
    name="yaml_scan",
    about="`outdated --scan` on ~1 MiB of Kubernetes, compose, Helm and SageMaker manifests read as YAML, and YAML bombs refused",
    tags=("slow", "pins"),
    size="KiB of manifests (default 1,024)",
    small=128,
    figures=(
        Figure("scan of the manifests", "s", goal=10.0, margin=0.5, baseline_at="issue 36: <= 10 s for 1 MiB on 2 cores"),
        Figure("pins found per second", "pins/s", direction="higher"),
        Figure("manifests scanned per second", "MiB/s", direction="higher"),
        Figure("billion-laughs file refused", "s", goal=0.5, margin=1.0, note="10**9 nodes in 300 bytes"),
        Figure("merge bomb refused", "s", goal=0.5, margin=1.0, note="7 levels of 12 aliases and a merge each"),
        Figure("regex line scan of the same bytes (before)", "s", note="found pins by line, not by container"),
    ),
)


def manifests(kib: int) -> list[str]:
    """FILES multi-document texts of about kib/FILES KiB each: the fixture manifests, each copy's models renamed."""
    sources = [p.read_text(encoding="utf-8") for p in sorted(FIXTURES.glob("*.yaml"))]
    per_file = kib * 1024 // FILES
    texts = []
    copy = 0
    for _ in range(FILES):
        parts: list[str] = []
        size = 0
        while size < per_file:
            source = _renamed(sources[copy % len(sources)], copy)
            parts.append(source)
            size += len(source)
            copy += 1
        texts.append("\n---\n".join(parts))
    return texts


def _renamed(text: str, copy: int) -> str:
    """The manifest with each model id's name made unique to this copy (org/name -> org/name-cN)."""
    for repo in ("Llama-3.1-8B-Instruct", "Qwen2.5-0.5B-Instruct", "Qwen2.5-72B-Instruct", "Mistral-7B-Instruct-v0.3",
                 "gemma-2-9b-it", "Phi-3.5-mini-instruct", "Llama-3.2-3B-Instruct", "Meta-Llama-3-8B-Instruct"):
        text = text.replace(f"/{repo}", f"/{repo}-c{copy}")
    return text


def measure(size: int | None = None) -> dict[str, float]:
    kib = size or 1024
    texts = manifests(kib)
    total = sum(len(t.encode()) for t in texts)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for n, text in enumerate(texts):
            (root / f"deploy-{n}.yaml").write_text(text, encoding="utf-8")
        started = time.perf_counter()
        scan = scan_tree(root)
        scan_s = time.perf_counter() - started
        assert not scan.skipped, scan.skipped
        (root / "bomb.yaml").write_text(BOMB, encoding="utf-8")
        bomb_s = _refused(root / "bomb.yaml")
        (root / "bomb.yaml").write_text(MERGED, encoding="utf-8")
        merged_s = _refused(root / "bomb.yaml")
    started = time.perf_counter()
    before = CodeScan(Path("."))
    for n, text in enumerate(texts):
        _scan_text(before, text, f"deploy-{n}.yaml")
    regex_s = time.perf_counter() - started
    pins = len(scan.pins) + len(scan.branch_pins)
    detail(f"{len(texts)} files, {total / 2**20:.2f} MiB: {len(scan.pins):,} sha pins, {len(scan.branch_pins):,} branch pins, "
           f"{len(scan.unpinned):,} unpinned; the regex line scan found {len(before.pins):,} sha pins")
    return {"scan of the manifests": scan_s, "pins found per second": pins / scan_s,
            "manifests scanned per second": total / 2**20 / scan_s, "billion-laughs file refused": bomb_s,
            "merge bomb refused": merged_s, "regex line scan of the same bytes (before)": regex_s}


def _refused(path: Path) -> float:
    started = time.perf_counter()
    scan = scan_tree(path)
    elapsed = time.perf_counter() - started
    assert scan.pins == [] and "YAML bomb" in scan.skipped[0][1], scan.skipped
    return elapsed


if __name__ == "__main__":
    run_alone(BENCHMARK, measure)
