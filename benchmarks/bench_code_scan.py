"""`hubwatch outdated --scan`'s walk over a 100,000-file tree (10% Python, vendored folders pruned): seconds to
scan, against the floor of listing the same tree with os.walk (the ratio is what reading and parsing add).

    python -m benchmarks run code_scan   (size: files in the tree, default 100,000)
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.declare import Benchmark, Figure, detail, run_alone
from tracker.pins.code_scan import scan_tree

BENCHMARK = Benchmark(
    name="code_scan",
    about="`hubwatch outdated --scan`'s walk over a 100,000-file tree against the floor of os.walk listing it",
    tags=("slow", "pins"),
    size="files in the tree (default 100,000)",
    small=10_000,
    figures=(
        Figure("scan_tree", "s"),
        Figure("os.walk listing (the floor)", "s"),
        Figure("scan / listing", "ratio", note="what reading and parsing add"),
        Figure("files scanned per second", "files/s", direction="higher"),
    ),
)

SHA = "0123456789abcdef0123456789abcdef01234567"


def build(root: Path, files: int) -> None:
    per_folder = 1000
    for index in range(files):
        folder = root / f"pkg{index // per_folder}"
        if index % per_folder == 0:
            folder.mkdir(parents=True)
        if index % 10 == 0:
            text = f'from transformers import AutoModel\nm = AutoModel.from_pretrained("org/m{index}", revision="{SHA}")\n'
            (folder / f"m{index}.py").write_text(text)
        else:
            (folder / f"data{index}.txt").write_text("x\n")


def measure(size: int | None = None) -> dict[str, float]:
    files = size or 100_000
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        build(root, files)
        started = time.perf_counter()
        listed = sum(len(names) for _, _, names in os.walk(root))
        walk_s = time.perf_counter() - started
        started = time.perf_counter()
        scan = scan_tree(root)
        scan_s = time.perf_counter() - started
    detail(f"tree: {listed:,} files, {scan.files_read:,} source files read, {len(scan.pins):,} pins found")
    return {"scan_tree": scan_s, "os.walk listing (the floor)": walk_s, "scan / listing": scan_s / walk_s,
            "files scanned per second": listed / scan_s}


if __name__ == "__main__":
    run_alone(BENCHMARK, measure)
