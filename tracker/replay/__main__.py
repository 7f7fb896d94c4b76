"""Run the Hub replay server standalone: `python -m tracker.replay --port 8700 [--root DIR ...]`.

The first line on stdout is the endpoint (useful with `--port 0`). Control it from another process with
the admin routes: `POST /_replay/advance/{org}/{name}`, `POST /_replay/head/{org}/{name}?n=N`,
`GET /_replay/requests`, `POST /_replay/reset-requests`, `GET /_replay/repos`.
"""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path

from tracker.replay.server import BUNDLED_ROOT, ReplayServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tracker.replay", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8700, help="0 picks a free port")
    parser.add_argument("--root", type=Path, action="append", default=[], help="more history roots (repeatable)")
    parser.add_argument("--no-bundled", action="store_true", help="serve only the --root folders")
    parser.add_argument("--token", default=None, help="the only bearer token accepted (default: any)")
    args = parser.parse_args(argv)

    roots = ([] if args.no_bundled else [BUNDLED_ROOT]) + args.root
    server = ReplayServer(roots=roots, host=args.host, port=args.port, token=args.token).start()
    print(server.endpoint, flush=True)
    print(f"serving {len(server.repo_ids())} repos: {', '.join(server.repo_ids())}", file=sys.stderr, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
