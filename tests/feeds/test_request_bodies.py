"""Request bodies from strangers: the size limit holds for chunked bodies too (the server stops reading and
its memory stays flat), and hostile JSON is refused with 400, never a 500, on every route that takes a body."""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from feeds.http.body_limit import MAX_BODY_BYTES
from feeds.http.strict_json import HostileJSON, strict_loads
from storage.db import create_db_engine, migrate
from storage.front import Storage
from tests.support.cli import write_config
from tests.support.served import API_TOKEN, HOOK_SECRET, Served, serve
from tests.support.waiting import read_log_until

HEADERS = {"Content-Type": "application/json", "Authorization": f"Bearer {API_TOKEN}", "X-Webhook-Secret": HOOK_SECRET}
BODY_ROUTES = ["/hooks/hub", "/api/v1/watches", "/api/v1/subscriptions"]
DEEP = b"[" * 100_000 + b"]" * 100_000  # 200 KB: under the size limit, far over any stack


@pytest.fixture
def server(database_url: str) -> Iterator[Served]:
    """The whole app over an empty database, API writes and Hub webhooks enabled."""
    engine = create_db_engine(database_url)
    migrate(engine)
    with serve(Storage(engine), api_token=API_TOKEN, hub_webhook_secret=HOOK_SECRET, trigger=lambda *_: True) as served:
        yield served


def send_chunked(url: str, path: str, total: int, headers: dict[str, str] = HEADERS, chunk: int = 64 * 1024) -> tuple[bytes, int]:
    """POST `total` bytes as `Transfer-Encoding: chunked` over a plain socket, checking before every chunk
    whether the server has answered; stops sending then. The answer and the bytes sent."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}", "Transfer-Encoding: chunked", *(f"{k}: {v}" for k, v in headers.items())]
    piece = f"{chunk:x}\r\n".encode() + b" " * chunk + b"\r\n"
    sent, answer = 0, b""
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        try:
            while sent < total and not select.select([sock], [], [], 0)[0]:
                sock.sendall(piece)
                sent += chunk
            if sent >= total:
                sock.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server closed with our bytes unread; its answer came before
        try:
            while data := sock.recv(65536):
                answer += data
        except ConnectionResetError:
            pass
    return answer, sent


@pytest.mark.parametrize("path", BODY_ROUTES)
def test_chunked_body_over_the_limit_is_cut_off_with_413(server: Served, path: str) -> None:
    """A 64 MB chunked body gets 413 long before it is all sent, and the connection is closed."""
    total = 64 * 1024 * 1024
    answer, sent = send_chunked(server.url, path, total)
    head = answer.split(b"\r\n\r\n", 1)[0].lower()
    assert head.startswith(b"http/1.1 413"), answer[:200]
    assert b"connection: close" in head
    assert sent < total // 8, f"the server read {sent} bytes of a body over its {MAX_BODY_BYTES}-byte limit"


@pytest.mark.parametrize("path", BODY_ROUTES)
def test_declared_length_over_the_limit_is_refused_unread(server: Served, path: str) -> None:
    """A Content-Length over the limit answers 413 with the reason."""
    with server.client() as c:
        response = c.post(path, content=b" " * (MAX_BODY_BYTES + 1), headers=HEADERS)
    assert response.status_code == 413
    assert f"over {MAX_BODY_BYTES} bytes" in response.json()["detail"]


def test_bad_secret_is_answered_before_the_size(server: Served) -> None:
    """The Hub webhook checks its secret before reading: a forged oversized body still gets 401."""
    answer, _ = send_chunked(server.url, "/hooks/hub", 8 * 1024 * 1024, headers={**HEADERS, "X-Webhook-Secret": "forged"})
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]


def test_body_under_the_limit_in_chunks_is_read_whole(server: Served) -> None:
    """A chunked body under the limit is read whole: the API creates the watch."""
    def chunks() -> Iterator[bytes]:
        yield b'{"repo_id": "org/'
        yield b'model", "branch": "refs/pr/1"}'

    with server.client() as c:
        response = c.post("/api/v1/watches", content=chunks(), headers=HEADERS)
    assert response.status_code == 201, response.text
    assert response.json()["branch"] == "refs/pr/1"


HOSTILE = {
    "nested 100,000 deep": DEEP,
    "nested objects": b'{"a":' * 20_000 + b"1" + b"}" * 20_000,
    "a number of 100,000 digits": b'{"repo_id": "org/model", "interval_s": ' + b"9" * 100_000 + b"}",
    "an infinite number": b'{"repo_id": "org/model", "interval_s": 1e999}',
    "NaN": b'{"repo_id": "org/model", "interval_s": NaN}',
    "invalid UTF-8": b'{"repo_id": "org/mod\xffel"}',
    "a lone surrogate": b'{"repo_id": "org/model", "url": "http://x/\\ud800", "repo": {"name": "\\udfff"}}',
    "a duplicate key": b'{"repo_id": "org/model", "repo_id": "org/other"}',
}


@pytest.mark.parametrize("path", BODY_ROUTES)
@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_json_is_refused_with_400(server: Served, path: str, case: str) -> None:
    """Deep nesting, huge or non-finite numbers, bad UTF-8, surrogates and repeated keys answer 400 with a reason."""
    with server.client() as c:
        response = c.post(path, content=HOSTILE[case], headers=HEADERS)
    assert response.status_code == 400, response.text
    assert response.json()["detail"].startswith("malformed: the body")


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b'{"a": [1, 2.5, "x", null, true]}', None),
        (b"[" * 500 + b"]" * 500, None),
        (b"9" * 4000, None),
        (DEEP, "nested too deeply"),
        (b"9" * 5000, "5000 digits"),
        (b"-1e400", "out of range"),
        (b"Infinity", "Infinity"),
        (b'"\xc3\x28"', "not UTF-8"),
        (b'"\\udc00"', "lone surrogate"),
        (b'{"a": {"b": 1, "b": 2}}', "repeats a key"),
        (b"{'a': 1}", "not JSON"),
    ],
)
def test_strict_loads(raw: bytes, reason: str | None) -> None:
    """Good JSON parses as `json.loads` would; each hostile kind is refused with its own reason."""
    if reason is None:
        assert strict_loads(raw) is not None
    else:
        with pytest.raises(HostileJSON, match=reason):
            strict_loads(raw)


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the server's RSS from /proc")
def test_chunked_flood_does_not_grow_the_daemon(tmp_path: Path) -> None:
    """`hubwatch serve` fed a 64 MB chunked Hub webhook answers 413 and its memory grows by far less than the body."""
    config = write_config(tmp_path / "hubwatch.toml", "http://127.0.0.1:9", tmp_path / "hubwatch.db", extra="\n[server]\nport = 0\n")
    env = {**os.environ, "HUBWATCH_HUB_WEBHOOK_SECRET": HOOK_SECRET}
    proc = subprocess.Popen([sys.executable, "-m", "tracker", "--config", str(config), "serve"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        url = read_log_until(proc, "http_server_started")[-1]["url"]
        assert httpx.post(f"{url}/hooks/hub", content=b"{}", headers=HEADERS).status_code == 400  # warm: first request paid
        before = _rss_kb(proc.pid)
        answer, _ = send_chunked(url, "/hooks/hub", 64 * 1024 * 1024)
        grown_kb = _rss_kb(proc.pid) - before
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert grown_kb < 16 * 1024, f"the server grew by {grown_kb} KB on a refused body"
