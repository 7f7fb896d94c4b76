"""A PostgreSQL server of one's own on loopback, that a test (or a benchmark) can stop and start again:
Debian's server binaries (PG_BIN), initdb as the `postgres` user when run as root (it refuses root)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PG_BIN = Path(os.environ.get("HUBWATCH_PG_BIN", "/usr/lib/postgresql/15/bin"))


def available() -> bool:
    """Whether the server binaries are installed (CI's machines have them)."""
    return (PG_BIN / "initdb").exists() and (PG_BIN / "pg_ctl").exists()


class PostgresServer:
    """A throwaway cluster in a temporary folder: `start()`, `stop()` (immediate: as a crash or a lost host
    would), `start()` again on the same port and data; `url` is its admin URL. `synchronous_commit=False`
    is faster, but an immediate stop then loses the last commits: keep it for servers that are never stopped."""

    def __init__(self, max_connections: int = 100, synchronous_commit: bool = True) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="hubwatch-pg."))
        self._as_pg = ["runuser", "-u", "postgres", "--"] if os.getuid() == 0 else []
        if os.getuid() == 0:
            shutil.chown(self.root, "postgres")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.data = self.root / "data"
        self.max_connections, self.synchronous_commit = max_connections, synchronous_commit
        self._run("initdb", "-D", str(self.data), "-U", "hubwatch", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync")

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://hubwatch@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        options = (f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
                   f"-c synchronous_commit={'on' if self.synchronous_commit else 'off'} -c max_connections={self.max_connections}")
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"), "-w", "-t", "60", "start", "-o", options)

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", check=False)

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def _run(self, program: str, *args: str, check: bool = True) -> None:
        subprocess.run([*self._as_pg, str(PG_BIN / program), *args], check=check, capture_output=True)


@contextmanager
def throwaway_postgres(max_connections: int = 100, synchronous_commit: bool = True) -> Iterator[PostgresServer]:
    """A started server, removed on exit."""
    server = PostgresServer(max_connections, synchronous_commit)
    try:
        server.start()
        yield server
    finally:
        server.remove()
