"""The chat template matrix: time for a ~10 KB real template over every sample and engine (target under
1 s), and, over the real templates of tests/fixtures/chat_templates taken as successive versions, how many
engine behaviour changes and code findings appear, and that a revision with unchanged template bytes gets
none. Prints the figures; never part of the test pass/fail."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from tracker.differs import template_engines
from tracker.differs.template_code import added_findings
from tracker.snapshot import FileEntry, Snapshot

TEMPLATES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "chat_templates"
TARGET_S = 1.0


def snapshot(text: str, sha: str) -> Snapshot:
    config = json.dumps({"chat_template": text, "bos_token": "<s>", "eos_token": "</s>"}).encode()
    snap = Snapshot(repo_id="bench/model", sha=sha)
    oid = hashlib.sha1(b"blob %d\0" % len(config) + config).hexdigest()
    snap.files["tokenizer_config.json"] = FileEntry(path="tokenizer_config.json", oid=oid, size=len(config))
    snap.contents["tokenizer_config.json"] = config
    return snap


def main() -> None:
    big = (TEMPLATES / "CohereForAI-c4ai-command-r-plus" / "tool_use.jinja").read_text()
    big = big + "\n" + "{# padding #}" * max(0, (10_240 - len(big)) // 13)
    template_engines.matrix(snapshot(big, "0" * 40))  # warm the interpreter caches
    started = time.perf_counter()
    matrix = template_engines.matrix(snapshot(big, "1" * 40))
    elapsed = time.perf_counter() - started
    assert matrix is not None
    samples = len(matrix["template_samples"])
    engines = [e["engine"] + ("" if e["checked"] else " (not checked)") for e in matrix["template_engines"]]
    print(f"matrix for a {len(big.encode()) / 1024:.1f} KB template, {samples} samples x {len(engines)} engines "
          f"({', '.join(engines)}): {elapsed:.2f} s (target {TARGET_S:g} s, ratio {elapsed / TARGET_S:.2f})")

    versions = sorted(TEMPLATES.glob("*/*.jinja"))
    previous, changes, findings, unchanged_hits = None, 0, 0, 0
    for i, path in enumerate(versions):
        text = path.read_text()
        current = template_engines.matrix(snapshot(text, f"{i:040x}"))
        again = template_engines.matrix(snapshot(text, f"{i + 1000:040x}"))  # same bytes, another commit
        unchanged_hits += len(template_engines.compare(current, again)) + len(added_findings(text, text))
        if previous is not None:
            changes += len(template_engines.compare(previous[0], current))
            findings += len(added_findings(previous[1], text))
        previous = (current, text)
    print(f"{len(versions)} real templates as successive versions: {changes} engine behaviour changes, "
          f"{findings} code findings; revisions with unchanged template bytes: {unchanged_hits} findings (must be 0)")


if __name__ == "__main__":
    main()
