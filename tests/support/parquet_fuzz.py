"""Parquet footers mutated at random (a fixed seed): bytes flipped, and Thrift fields set to edge values through
the test codec. Run as a child process (`python -m tests.support.parquet_fuzz SEED COUNT`) so that a reader that
aborts the process (a C++ exception through pyarrow) fails its caller instead of killing the test run; prints
{"verdicts": {...}, "escaped": [...]}: what `parquet.scan` said, and any exception that escaped it."""

from __future__ import annotations

import json
import random
import sys
from typing import Any

from tests.support.parquet_files import (
    GLUE_FEATURES,
    I16,
    I32,
    I64,
    LIST,
    STRUCT,
    footer_fields,
    glue_table,
    parquet_bytes,
    with_footer,
    write_struct,
)
from tracker.formats import parquet
from tracker.formats.ranged import BytesSource

EDGES = (0, -1, 1, 2, 7, 2**31 - 1, -(2**31), 2**40)


def _numbers(fields: list[list[Any]], out: list[list[Any]]) -> list[list[Any]]:
    for entry in fields:
        kind, value = entry[1], entry[2]
        if kind in (I16, I32, I64):
            out.append(entry)
        elif kind == STRUCT:
            _numbers(value, out)
        elif kind == LIST and value[0] == STRUCT:
            for item in value[1]:
                _numbers(item, out)
    return out


def mutants(seed: int, count: int) -> list[bytes]:
    """`count` files: every other one with bytes of its footer flipped, the others with numbers of its Thrift
    set to edge values."""
    rnd = random.Random(seed)
    seed_file = parquet_bytes(glue_table("mrpc", 30), GLUE_FEATURES["mrpc"], row_group_size=7)
    length = int.from_bytes(seed_file[-8:-4], "little")
    out = []
    for i in range(count):
        if i % 2:
            data = bytearray(seed_file)
            for _ in range(rnd.randint(1, 8)):
                data[rnd.randrange(len(seed_file) - 8 - length, len(seed_file) - 8)] = rnd.randrange(256)
            out.append(bytes(data))
            continue
        body, fields = footer_fields(seed_file)
        numbers = _numbers(fields, [])
        for _ in range(rnd.randint(1, 3)):
            entry = rnd.choice(numbers)
            entry[2] = max(-(2**31), min(2**31 - 1, rnd.choice(EDGES))) if entry[1] != I64 else rnd.choice(EDGES)
        out.append(with_footer(body, write_struct(fields)))
    return out


def main(seed: int, count: int) -> dict[str, Any]:
    verdicts: dict[str, int] = {}
    escaped = []
    for data in mutants(seed, count):
        try:
            facts, _, _ = parquet.scan(BytesSource(data))
        except Exception as err:  # noqa: BLE001 - what escapes is the finding
            escaped.append(f"{type(err).__name__}: {err}"[:200])
            continue
        verdicts[str(facts.get("verdict"))] = verdicts.get(str(facts.get("verdict")), 0) + 1
    return {"verdicts": verdicts, "escaped": escaped}


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]), int(sys.argv[2]))))
