"""Run the Hub replay server standalone: `python -m tracker.standins.replay --port 8700 [--root DIR ...]`.

The first line on stdout is the endpoint (useful with `--port 0`). Control it from another process with
the admin routes: `POST /_replay/advance/{org}/{name}`, `POST /_replay/head/{org}/{name}?n=N`,
`GET /_replay/requests`, `POST /_replay/reset-requests`, `GET /_replay/repos`. `--synthetic N` adds N
small in-memory repos (benchmarks/bench_listing.py serves 10,000 this way); `--synthetic-move config|template`
makes them copies of a real repo (`realistic.py`, benchmarks/bench_ingest_cpu.py).
"""

from __future__ import annotations

import argparse
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tracker.standins.replay.control import BUNDLED_ROOT, ReplayServer
from tracker.standins.replay.history import synthetic_history
from tracker.standins.replay.realistic import MOVES, realistic_history

SYNTHETIC_START = datetime(2024, 1, 1, tzinfo=UTC)  # repo i was last modified i minutes after this


def synthetic_ids(n: int, orgs: int = 100) -> list[str]:
    """The repo ids `--synthetic N` serves (`--synthetic-orgs`: spread over that many orgs)."""
    return [f"synth-{i % orgs}/model-{i}" for i in range(n)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tracker.standins.replay", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8700, help="0 picks a free port")
    parser.add_argument("--root", type=Path, action="append", default=[], help="more history roots (repeatable)")
    parser.add_argument("--no-bundled", action="store_true", help="serve only the --root folders")
    parser.add_argument("--token", default=None, help="the only bearer token accepted (default: any)")
    parser.add_argument("--synthetic", type=int, default=0, metavar="N",
                        help="also serve N small in-memory repos, synth-ORG/model-I with 100 orgs (benchmarks)")
    parser.add_argument("--synthetic-orgs", type=int, default=100, metavar="K", help="the synthetic repos' orgs (default 100)")
    parser.add_argument("--synthetic-move", choices=("plain", *MOVES), default="plain",
                        help="plain: a one-line config.json each (default); config or template: copies of a real"
                             " repo whose second commit rewrites config.json, or the chat template and tokenizer.json")
    args = parser.parse_args(argv)

    roots = ([] if args.no_bundled else [BUNDLED_ROOT]) + args.root
    server = ReplayServer(roots=roots, host=args.host, port=args.port, token=args.token)
    for i, repo_id in enumerate(synthetic_ids(args.synthetic, args.synthetic_orgs)):
        start = SYNTHETIC_START + timedelta(minutes=i)
        server.add_repo(synthetic_history(repo_id, commits=2, start=start) if args.synthetic_move == "plain"
                        else realistic_history(repo_id, args.synthetic_move, start))
        server.set_head(repo_id, 1)  # the second commit is there for `POST /_replay/advance/...`
    server.start()
    print(server.endpoint, flush=True)
    names = server.repo_ids()
    print(f"serving {len(names)} repos: {', '.join(names[:20])}{' ...' if len(names) > 20 else ''}", file=sys.stderr, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
