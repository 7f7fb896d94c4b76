"""Write the JSONata queries of renovate/jsonata/*.jsonata into the preset renovate/hubwatch.json (one line
each), or with --check exit 1 when the preset is stale. Run from anywhere: `python renovate/sync.py`."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PRESET = HERE / "hubwatch.json"
QUERIES = ("yaml-argv.jsonata", "yaml-env.jsonata", "yaml-keys.jsonata", "yaml-datasets.jsonata")


def one_line(source: str) -> str:
    """A query as the preset holds it: its leading comment dropped, each line break and indent one space."""
    source = re.sub(r"\A\s*/\*.*?\*/", "", source, flags=re.S)
    return re.sub(r"\s*\n\s*", " ", source.strip())


def synced() -> str:
    preset = json.loads(PRESET.read_text(encoding="utf-8"))
    [manager] = [m for m in preset["customManagers"] if m["customType"] == "jsonata"]
    manager["matchStrings"] = [one_line((HERE / "jsonata" / name).read_text(encoding="utf-8")) for name in QUERIES]
    return json.dumps(preset, indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    text = synced()
    if "--check" in sys.argv[1:]:
        if text != PRESET.read_text(encoding="utf-8"):
            sys.exit("renovate/hubwatch.json is stale: run python renovate/sync.py")
    else:
        PRESET.write_text(text, encoding="utf-8")
