"""HubClient.open_range against the replay server: Range reads coalesced, counted and capped, a server that
ignores Range streamed and cut, Hub errors translated."""

from __future__ import annotations

import pytest

from tests.support.gguf_files import GgufFile, write_gguf_repo
from tracker.errors import HubUnavailable, RateLimited
from tracker.formats.ranged import OverBudget, RangeError
from tracker.hub.client import HubClient
from tracker.standins.replay.control import ReplayServer

HEAD = bytes(range(256)) * 4096  # 1 MiB of known bytes, then zeros
SIZE = 300 * 2**20
REPO = "hubwatch-tests/ranged"


@pytest.fixture
def served(tmp_path):
    write_gguf_repo(tmp_path, REPO, [{"gguf": {"big.gguf": GgufFile(HEAD, SIZE)}}])
    with ReplayServer(roots=[tmp_path]) as server:
        hub = HubClient(server.endpoint)
        sha = server.head_sha(REPO)
        yield server, hub, sha


def _resolves(server: ReplayServer) -> list:
    return [r for r in server.requests if "/resolve/" in r.path]


def test_reads_are_exact_and_coalesced(served):
    """Small sequential reads cost one request for the first MiB; every byte is the file's."""
    server, hub, sha = served
    source = hub.open_range(REPO, sha, "big.gguf", SIZE)
    got = b"".join(source.read(i * 1000, 1000) for i in range(1000))
    assert got == HEAD[:1_000_000]
    assert len(_resolves(server)) == 1 and _resolves(server)[0].range == f"bytes=0-{2**20 - 1}"
    assert source.bytes_read == 2**20
    assert source.read(2**20 - 10, 20) == HEAD[-10:] + bytes(10)  # across a block boundary: one more request
    assert len(_resolves(server)) == 2 and source.bytes_read == 3 * 2**20


def test_small_blocks_read_ahead_no_more_than_asked(served):
    """With a 16 KiB read-ahead (a zip reader's), each uncovered read fetches 16 KiB or what it asks, never
    more, and never again bytes already held."""
    server, hub, sha = served
    source = hub.open_range(REPO, sha, "big.gguf", SIZE, first_block=16_384, max_block=16_384)
    assert source.read(0, 4) == HEAD[:4]
    assert source.read(100, 1000) == HEAD[100:1100]  # held: no request
    assert source.read(200_000, 50_000) == HEAD[200_000:250_000]
    assert source.read(190_000, 20_000) == HEAD[190_000:210_000]  # only the gap before the held bytes
    assert [r.range for r in _resolves(server)] == ["bytes=0-16383", "bytes=200000-249999", "bytes=190000-199999"]
    assert source.bytes_read == 16_384 + 50_000 + 10_000


def test_reads_past_the_budget_are_refused(served):
    """A read that would fetch past the budget raises OverBudget before any request."""
    server, hub, sha = served
    source = hub.open_range(REPO, sha, "big.gguf", SIZE, budget=2**20)
    assert source.read(0, 100) == HEAD[:100]
    with pytest.raises(OverBudget):
        source.read(2**20, 10)
    assert len(_resolves(server)) == 1 and source.bytes_read == 2**20


def test_a_server_ignoring_range_is_streamed_and_cut(served):
    """A 200 with the whole 300 MiB body is read only as far as asked: the bytes before the offset count too."""
    server, hub, sha = served
    server.ignore_range()
    source = hub.open_range(REPO, sha, "big.gguf", SIZE)
    assert source.read(4096, 100) == HEAD[4096:4196]
    assert _resolves(server)[0].status == 200
    assert source.bytes_read == 4096 + 2**20  # the skipped head plus one block read ahead


def test_a_server_ignoring_range_stops_at_the_cap(served):
    """Streaming a whole body stops at the budget with OverBudget, not at the end of the file."""
    server, hub, sha = served
    server.ignore_range()
    source = hub.open_range(REPO, sha, "big.gguf", SIZE, budget=3 * 2**20)
    with pytest.raises(OverBudget):
        source.read(5 * 2**20, 10)
    assert 3 * 2**20 < source.bytes_read <= 3 * 2**20 + 256 * 1024  # the chunk that crossed it, not 300 MiB


@pytest.mark.parametrize(("status", "error"), [(429, RateLimited), (500, HubUnavailable), (503, HubUnavailable)])
def test_hub_errors_are_translated(served, status, error):
    """429 and 5xx answers to a range read are the Hub's errors: they abort the revision, to be retried."""
    server, hub, sha = served
    server.inject(status, path="/resolve/", times=10)
    source = hub.open_range(REPO, sha, "big.gguf", SIZE)
    with pytest.raises(error):
        source.read(0, 10)


def test_a_file_the_hub_does_not_serve_is_a_range_error(served):
    """A path the commit does not hold (404) is the file's problem: RangeError, which a scanner notes."""
    _, hub, sha = served
    source = hub.open_range(REPO, sha, "absent.gguf", 100)
    with pytest.raises(RangeError):
        source.read(0, 10)
