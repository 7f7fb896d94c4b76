"""A CDN stand-in beside the Hub replay: the second origin the Hub's `/resolve/` sends LFS and Xet files to.

The Hub answers a `/resolve/` of a file it stores on its CDN (every Xet-backed file, and LFS files on S3/CloudFront)
with a 302 to a signed URL on another host, keeping its own metadata headers on the 302 (`X-Repo-Commit`, `ETag`,
`X-Linked-Etag`, `X-Linked-Size`). The CDN serves the bytes at that URL, honouring Range, to anyone holding the
signature: it needs no token, and a client must never send it the Hub's (huggingface_hub and httpx drop the
`Authorization` header on a redirect to another origin). This server records every request with the Authorization
header it came with, so that tests can check that none does.

Its URLs name `localhost` (the replay's own are `127.0.0.1`): another host, as the real CDN's is, so that what counts
the Hub's requests by host (the request budget) does not count these.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from dataclasses import dataclass
from urllib.parse import parse_qs

from tracker.standins.loopback import KeepAliveHandler, LoopbackServer
from tracker.standins.replay.history import Blob
from tracker.standins.replay.protocol import byte_range

SIGNED_FOR_S = 3600  # how long a signed URL stays valid, as the Hub's (an hour)


@dataclass(frozen=True)
class CdnRequest:
    """One request the CDN answered: its path, Range, status, and the Authorization header it carried (None: none)."""

    method: str
    path: str
    range: str | None
    status: int
    authorization: str | None


class CdnServer:
    """Serves blobs by signed URL (`sign`), on its own loopback port."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._secret = secrets.token_bytes(16)
        self._blobs: dict[str, Blob] = {}
        self._lock = threading.Lock()
        self._requests: list[CdnRequest] = []
        self._http = LoopbackServer(_CdnHandler, self, "hub-replay-cdn", host, port)

    def start(self) -> CdnServer:
        self._http.start()
        return self

    def stop(self) -> None:
        self._http.stop()

    @property
    def running(self) -> bool:
        return self._http.running

    @property
    def origin(self) -> str:
        return f"http://localhost:{self._http.port}"

    def sign(self, key: str, blob: Blob, filename: str) -> str:
        """A signed URL serving `blob` (named by `key`, its content hash) for an hour."""
        with self._lock:
            self._blobs[key] = blob
        expires = int(time.time()) + SIGNED_FOR_S
        return f"{self.origin}/xet/{key}?filename={filename}&expires={expires}&sig={self._signature(key, expires)}"

    def _signature(self, key: str, expires: int) -> str:
        return hmac.new(self._secret, f"{key}\n{expires}".encode(), hashlib.sha256).hexdigest()

    @property
    def requests(self) -> list[CdnRequest]:
        with self._lock:
            return list(self._requests)

    def reset_requests(self) -> None:
        with self._lock:
            self._requests.clear()

    def _answer(self, path: str, query: str, range_header: str | None) -> tuple[int, dict[str, str], Blob | None, int, int]:
        params = parse_qs(query)
        key = path.removeprefix("/xet/")
        with self._lock:
            blob = self._blobs.get(key) if path.startswith("/xet/") else None
        try:
            expires = int(params.get("expires", ["0"])[-1])
        except ValueError:
            expires = 0
        signed = hmac.compare_digest(params.get("sig", [""])[-1], self._signature(key, expires))
        if blob is None:
            return 404, {}, None, 0, 0
        if not signed or expires < time.time():
            return 403, {}, None, 0, 0
        headers = {"Accept-Ranges": "bytes", "Content-Type": "application/octet-stream", "ETag": f'"{key}"'}
        asked = byte_range(range_header, blob.size)
        if asked is None:
            return 200, headers, blob, 0, blob.size
        start, stop = asked
        if start >= stop:
            return 416, {"Content-Range": f"bytes */{blob.size}"}, None, 0, 0
        headers["Content-Range"] = f"bytes {start}-{stop - 1}/{blob.size}"
        return 206, headers, blob, start, stop


class _CdnHandler(KeepAliveHandler):
    def _handle(self, method: str) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        cdn: CdnServer = self.owner
        path, _, query = self.path.partition("?")
        if method not in ("GET", "HEAD"):
            status, headers, blob, start, stop = 405, {}, None, 0, 0
        else:
            status, headers, blob, start, stop = cdn._answer(path, query, self.headers.get("Range"))
        with cdn._lock:
            cdn._requests.append(CdnRequest(method, path, self.headers.get("Range"), status,
                                            self.headers.get("Authorization")))
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(stop - start))
        self.end_headers()
        if method == "HEAD" or blob is None:
            return
        try:
            for chunk in blob.chunks(start, stop):
                self.wfile.write(chunk)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
