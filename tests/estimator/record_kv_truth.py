"""Record the KV bytes transformers' own cache holds after a prefill, for tests/estimator/test_serving_kv.py.

Needs the `groundtruth` extra (torch, transformers):

    .venv/bin/python tests/estimator/record_kv_truth.py   # rewrites tests/fixtures/estimator/recorded_kv_truth.json
    .venv/bin/python tests/estimator/record_kv_truth.py serving/bamba  # only the cases whose key holds a word given,
                                                          # the other recorded figures kept

The live test (`pytest -m groundtruth tests/estimator/test_serving_kv.py`) recomputes the same figures; review
the fixture's diff like code.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1])]

from kv_truth import measure_kv  # noqa: E402 - after the path set-up above
from serving_cases import KV_CASES, RECORDED_KV, RECORDED_ONLY_CASES, case_key, serving_config  # noqa: E402


def main(only: list[str]) -> None:
    out = json.loads(RECORDED_KV.read_text())["bytes"] if only else {}
    for path, tokens in [*KV_CASES, *RECORDED_ONLY_CASES]:
        if only and not any(word in case_key(path, tokens) for word in only):
            continue
        out[case_key(path, tokens)] = measure_kv(serving_config(path), tokens)
        print(path, tokens, out[case_key(path, tokens)], flush=True)
    import transformers

    RECORDED_KV.write_text(json.dumps({"transformers": transformers.__version__, "bytes": out}, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
