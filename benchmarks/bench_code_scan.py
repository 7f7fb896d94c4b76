"""`hubwatch outdated --scan`'s walk over a 100,000-file tree (10% Python, vendored folders pruned): seconds to
scan, against the floor of listing the same tree with os.walk (the ratio is what reading and parsing add).

    .venv/bin/python benchmarks/bench_code_scan.py [--files 100000]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from tracker.pins.code_scan import scan_tree

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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        build(root, args.files)
        started = time.perf_counter()
        listed = sum(len(files) for _, _, files in os.walk(root))
        walk_s = time.perf_counter() - started
        started = time.perf_counter()
        scan = scan_tree(root)
        scan_s = time.perf_counter() - started
    print(f"tree: {listed:,} files, {scan.files_read:,} source files read, {len(scan.pins):,} pins found")
    print(f"os.walk listing (baseline): {walk_s:.2f} s")
    print(f"scan_tree: {scan_s:.2f} s ({listed / scan_s:,.0f} files/s)")
    print(f"ratio scan / listing: {scan_s / walk_s:.1f}x")


if __name__ == "__main__":
    main()
