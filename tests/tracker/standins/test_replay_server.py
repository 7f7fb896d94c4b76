"""The Hub replay server, exercised through the unmodified huggingface_hub client."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tracemalloc
import urllib.error
import urllib.request
from pathlib import Path

import httpx2
import pytest
from huggingface_hub import HfApi, get_hf_file_metadata, hf_hub_download, hf_hub_url
from huggingface_hub.errors import (
    BadRequestError,
    GatedRepoError,
    HfHubHTTPError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
    SafetensorsParsingError,
)
from huggingface_hub.hf_api import RepoFile, RepoFolder

from tracker.standins.replay.control import ReplayServer
from tracker.standins.replay.history import CHUNK_SIZE, HistoryError, LfsBlob, PatternBlob, load_repo

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "replay_small"
TINY = "acme/tiny-model"
TINY_FILES = FIXTURES / TINY / "commits"
HEADER = json.loads((TINY_FILES / "0002-upload-weights" / "commit.json").read_text())["lfs"]["model.safetensors"][
    "safetensors"
]


def git_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def write_history(root: Path, repo_id: str, commits: list[dict]) -> None:
    """A history in FORMAT.md layout; each commit dict may carry `files` {path: text}."""
    folder = root / repo_id
    names = [f"{i + 1:04d}-{c.get('title', 'commit').lower().replace(' ', '-')}" for i, c in enumerate(commits)]
    folder.mkdir(parents=True)
    (folder / "repo.json").write_text(json.dumps({"id": repo_id, "commits": names}))
    for name, spec in zip(names, commits, strict=True):
        spec = {"title": "commit", "authors": ["tester"], "date": "2024-01-01T00:00:00Z", **spec}
        for path, text in spec.pop("files", {}).items():
            (folder / "commits" / name / "files" / path).parent.mkdir(parents=True, exist_ok=True)
            (folder / "commits" / name / "files" / path).write_text(text)
        (folder / "commits" / name).mkdir(parents=True, exist_ok=True)
        (folder / "commits" / name / "commit.json").write_text(json.dumps(spec))


def http(url: str, method: str = "GET", headers: dict | None = None) -> tuple[int, dict, bytes]:
    request = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


@pytest.fixture(autouse=True)
def no_token(monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)


@pytest.fixture
def server():
    with ReplayServer(roots=FIXTURES, token="secret") as replay:
        yield replay


@pytest.fixture
def api(server):
    return HfApi(endpoint=server.endpoint, token=False)


def test_model_info_expand_sha_is_one_request(server, api):
    """model_info with expand=["sha"] at a branch answers the head in exactly one counted request."""
    info = api.model_info(TINY, expand=["sha"])
    assert info.sha == server.head_sha(TINY)
    assert info.siblings is None and info.last_modified is None
    assert server.count_requests() == 1


def test_model_info_fields(server, api):
    """model_info carries the card (from README front matter), tags, safetensors totals and LFS siblings."""
    info = api.model_info(TINY, files_metadata=True)
    assert (info.private, info.gated, info.disabled) == (False, False, False)
    assert info.card_data["license"] == "apache-2.0"
    assert info.tags == ["text-generation", "transformers", "safetensors", "license:apache-2.0"]
    assert (info.library_name, info.safetensors.total, info.safetensors.parameters) == (
        "transformers",
        16,
        {"F32": 8, "BF16": 8},
    )
    siblings = {s.rfilename: s for s in info.siblings}
    assert siblings["model.safetensors"].lfs.size == siblings["model.safetensors"].size
    assert siblings["config.json"].lfs is None
    assert info.last_modified.isoformat() == "2024-01-03T12:30:00+00:00"


def test_model_info_at_revision(server, api):
    """model_info at an older sha describes that commit's tree."""
    first, second, _ = server.commits(TINY)
    info = api.model_info(TINY, revision=second.sha)
    assert info.sha == second.sha
    assert "pytorch_model.bin" in {s.rfilename for s in info.siblings}
    assert api.model_info(TINY, revision=first.sha[:7], expand=["sha"]).sha == first.sha


def test_model_info_rejects_unknown_expand(api):
    """An expand key the Hub does not know is a 400, raised as BadRequestError."""
    with pytest.raises(BadRequestError):
        api.model_info(TINY, expand=["nonsense"])


def test_list_repo_refs(server, api):
    """refs list the default branch at the head, and no tags or converts."""
    refs = api.list_repo_refs(TINY)
    branches = [(b.name, b.ref, b.target_commit) for b in refs.branches]
    assert branches == [("main", "refs/heads/main", server.head_sha(TINY))]
    assert refs.tags == [] and refs.converts == []


def test_list_repo_commits_pages(tmp_path):
    """55 commits come back newest first over two pages of 50, following the Link header."""
    write_history(tmp_path, "acme/long", [{"title": f"Commit {i}", "files": {"n.txt": str(i)}} for i in range(55)])
    with ReplayServer(roots=[FIXTURES, tmp_path]) as replay:
        commits = HfApi(endpoint=replay.endpoint, token=False).list_repo_commits("acme/long")
        assert [c.commit_id for c in commits] == [c.sha for c in reversed(replay.commits("acme/long"))]
        assert [(r.path, r.query) for r in replay.requests] == [
            ("/api/models/acme/long/commits/main", ""),
            ("/api/models/acme/long/commits/main", "p=1"),
        ]
        assert TINY in replay.repo_ids()


@pytest.mark.parametrize(("expand", "queries"), [
    (True, ["recursive=false&expand=true", "recursive=false&expand=true&cursor=50"]),
    (False, ["recursive=false&expand=false"]),
])
def test_list_repo_tree_pages(tmp_path, expand, queries):
    """A tree of 60 files is one page, or two pages of 50 when expanded, as on the Hub."""
    write_history(tmp_path, "acme/wide", [{"files": {f"f{i:02d}.txt": str(i) for i in range(60)}}])
    with ReplayServer(roots=tmp_path) as replay:
        entries = list(HfApi(endpoint=replay.endpoint, token=False).list_repo_tree("acme/wide", expand=expand))
        assert [e.path for e in entries] == [f"f{i:02d}.txt" for i in range(60)]
        assert [r.query for r in replay.requests] == queries


@pytest.mark.parametrize(("query", "count", "total", "next_query"), [
    ("limit=1", 1, "3", "limit=1&p=1"),
    ("limit=2&p=1", 1, "3", None),
    ("", 3, "3", None),
])
def test_commits_paging_parameters(server, query, count, total, next_query):
    """limit and p slice the commit list; X-Total-Count counts the whole chain."""
    status, headers, body = http(f"{server.endpoint}/api/models/{TINY}/commits/main?{query}")
    assert (status, len(json.loads(body)), headers["X-Total-Count"]) == (200, count, total)
    link = headers.get("Link")
    assert (link and link.split("?")[1].split(">")[0]) == (next_query or None)


def test_head_moves(server, api):
    """set_head hides later commits (not resolvable by sha either); advance reveals them one at a time."""
    commits = server.commits(TINY)
    server.set_head(TINY, 1)
    assert api.model_info(TINY, expand=["sha"]).sha == commits[0].sha
    with pytest.raises(RevisionNotFoundError):
        api.model_info(TINY, revision=commits[2].sha)
    assert [server.advance(TINY) for _ in range(3)] == [True, True, False]
    assert [c.commit_id for c in api.list_repo_commits(TINY)] == [c.sha for c in reversed(commits)]
    server.set_head(TINY, 0)
    with pytest.raises(RepositoryNotFoundError):
        api.model_info(TINY)


def test_force_push_rewrites_chain(server, api):
    """A commit whose parent names an earlier commit drops the ones between from the branch, not from the repo."""
    commits = {c.dirname: c for c in server.commits("acme/rewritten")}
    titles = [c.title for c in api.list_repo_commits("acme/rewritten")]
    assert titles == ["Redo config", "Add config", "initial commit"]
    dropped = commits["0003-bad-upload"].sha
    assert [c.title for c in api.list_repo_commits("acme/rewritten", revision=dropped)][0] == "Bad upload"
    assert "oops.txt" not in api.list_repo_files("acme/rewritten")
    assert "oops.txt" in api.list_repo_files("acme/rewritten", revision=dropped)


def test_list_repo_tree_recursive(server, api, tmp_path):
    """The recursive tree lists folders and files; oids are git blob sha1s of the bytes served, LFS carries sha256."""
    sha = server.head_sha(TINY)
    entries = {e.path: e for e in api.list_repo_tree(TINY, recursive=True, revision=sha)}
    assert {p for p, e in entries.items() if isinstance(e, RepoFolder)} == {"docs", "docs/usage"}
    for path in (".gitattributes", "README.md", "config.json", "docs/usage/notes.md"):
        local = hf_hub_download(TINY, path, revision=sha, endpoint=server.endpoint, cache_dir=tmp_path, token=False)
        data = Path(local).read_bytes()
        assert (entries[path].blob_id, entries[path].size, entries[path].lfs) == (git_sha1(data), len(data), None)
    weights = entries["model.safetensors"]
    pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{weights.lfs.sha256}\nsize {weights.size}\n"
    assert weights.blob_id == git_sha1(pointer.encode())
    assert (weights.lfs.pointer_size, weights.lfs.size) == (len(pointer), weights.size)


def test_list_repo_tree_folders(server, api):
    """A plain listing shows direct children only; a folder path lists inside it; expand adds the last commit."""
    top = {e.path: type(e) for e in api.list_repo_tree(TINY)}
    assert top["docs"] is RepoFolder and "docs/usage/notes.md" not in top
    inner = list(api.list_repo_tree(TINY, path_in_repo="docs/usage", expand=True))
    assert [(e.path, e.last_commit.title) for e in inner] == [("docs/usage/notes.md", "Upload weights")]
    with pytest.raises(RemoteEntryNotFoundError):
        list(api.list_repo_tree(TINY, path_in_repo="nowhere"))


def test_get_paths_info(server, api):
    """paths-info answers known files and folders, skips unknown paths, and expands the last commit."""
    infos = api.get_paths_info(TINY, ["config.json", "docs", "absent.txt"], expand=True)
    assert [(type(i), i.path, i.last_commit.title) for i in infos] == [
        (RepoFile, "config.json", "Update config"),
        (RepoFolder, "docs", "Upload weights"),
    ]


@pytest.mark.parametrize(("commit", "path"), [
    ("0002-upload-weights", "config.json"),
    ("0003-update-config", "config.json"),
    ("0002-upload-weights", "docs/usage/notes.md"),
])
def test_hf_hub_download_exact_bytes(server, tmp_path, commit, path):
    """hf_hub_download by sha returns the recorded bytes of that commit."""
    sha = next(c.sha for c in server.commits(TINY) if c.dirname == commit)
    local = hf_hub_download(TINY, path, revision=sha, endpoint=server.endpoint, cache_dir=tmp_path, token=False)
    assert Path(local).read_bytes() == (TINY_FILES / commit / "files" / path).read_bytes()


@pytest.mark.parametrize(("path", "lfs"), [("config.json", False), ("model.safetensors", True)])
def test_get_hf_file_metadata(server, api, path, lfs):
    """HEAD /resolve gives the commit, the etag (blob sha1, or sha256 for LFS) and the real size."""
    (info,) = api.get_paths_info(TINY, [path])
    url = hf_hub_url(TINY, path, endpoint=server.endpoint)
    meta = get_hf_file_metadata(url, token=False)
    assert (meta.commit_hash, meta.size) == (server.head_sha(TINY), info.size)
    assert meta.etag == (info.lfs.sha256 if lfs else info.blob_id)


def test_safetensors_headers(server, api):
    """The client reads the real headers by Range: a single file and a sharded model via its index."""
    single = api.parse_safetensors_file_metadata(TINY, "model.safetensors")
    assert {name: t.shape for name, t in single.tensors.items()} == {
        name: t["shape"] for name, t in HEADER.items() if name != "__metadata__"
    }
    assert single.metadata == {"format": "pt"}
    assert [r.range for r in server.requests] == ["bytes=0-100000"]
    sharded = api.get_safetensors_metadata("acme/sharded-model")
    assert sharded.sharded and sharded.parameter_count == {"F16": 72, "F32": 3}
    assert sharded.weight_map["b.bias"] == "model-00002-of-00002.safetensors"


@pytest.mark.parametrize("filename", ["model.safetensors", "short-length.safetensors", "truncated.safetensors"])
def test_safetensors_faults(api, filename):
    """A header length claiming too much or too little, or a cut file, makes the client's parser fail."""
    with pytest.raises(SafetensorsParsingError):
        api.parse_safetensors_file_metadata("acme/faulty-weights", filename)


def test_huge_synthetic_file(server, api):
    """A 300 MB synthetic file is listed with its size and oid and read by Range without being held in memory."""
    tracemalloc.start()
    try:
        (entry,) = api.list_repo_tree("acme/huge-tokenizer")
        status, headers, body = http(
            hf_hub_url("acme/huge-tokenizer", "tokenizer.json", endpoint=server.endpoint), headers={"Range": "bytes=-5"}
        )
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (entry.path, entry.size) == ("tokenizer.json", 314_572_800)
    expected = hashlib.sha1(b"blob 314572800\0")
    for _ in range(300):
        expected.update(b"a" * (1 << 20))
    assert entry.blob_id == expected.hexdigest()
    assert (status, headers["Content-Range"], body) == (206, "bytes 314572795-314572799/314572800", b"aaaaa")
    assert peak < 20_000_000


@pytest.mark.parametrize(("range_header", "status", "content_range", "body"), [
    ("bytes=0-3", 206, "bytes 0-3/12", b"Some"),
    ("bytes=5-", 206, "bytes 5-11/12", b"notes.\n"),
    ("bytes=-3", 206, "bytes 9-11/12", b"s.\n"),
    ("bytes=5-1000", 206, "bytes 5-11/12", b"notes.\n"),
    ("bytes=12-", 416, "bytes */12", None),
    (None, 200, None, b"Some notes.\n"),
])
def test_resolve_ranges(server, range_header, status, content_range, body):
    """Range requests get 206 with Content-Range, clamped at the end; past the end is 416."""
    url = hf_hub_url(TINY, "docs/usage/notes.md", endpoint=server.endpoint)
    got_status, headers, got_body = http(url, headers={"Range": range_header} if range_header else {})
    assert (got_status, headers.get("Content-Range")) == (status, content_range)
    assert got_status == 416 or got_body == body
    assert headers["X-Repo-Commit"] == server.head_sha(TINY)


def test_missing_file(server, api, tmp_path):
    """A `missing` file is listed in the tree, but downloading it raises the entry-not-found error."""
    assert "config.json" in api.list_repo_files("acme/faulty-weights")
    assert not api.file_exists("acme/faulty-weights", "config.json")
    with pytest.raises(RemoteEntryNotFoundError) as err:
        hf_hub_download("acme/faulty-weights", "config.json", endpoint=server.endpoint, cache_dir=tmp_path, token=False)
    assert err.value.response.headers["X-Repo-Commit"] == server.head_sha("acme/faulty-weights")


@pytest.mark.parametrize(("call", "token", "error", "status"), [
    (lambda api, ep, tmp: api.model_info("acme/unknown"), False, RepositoryNotFoundError, 401),
    (lambda api, ep, tmp: api.model_info("acme/unknown"), "secret", RepositoryNotFoundError, 404),
    (lambda api, ep, tmp: api.model_info("acme/private-model"), False, RepositoryNotFoundError, 401),
    (lambda api, ep, tmp: api.model_info(TINY, revision="no-such-branch"), False, RevisionNotFoundError, 404),
    (lambda api, ep, tmp: api.list_repo_commits(TINY, revision="f" * 40), False, RevisionNotFoundError, 404),
    (lambda api, ep, tmp: hf_hub_download(TINY, "nope.txt", endpoint=ep, cache_dir=tmp, token=False), False,
     RemoteEntryNotFoundError, 404),
    (lambda api, ep, tmp: hf_hub_download("acme/gated-model", "config.json", endpoint=ep, cache_dir=tmp, token=False),
     False, GatedRepoError, 401),
    (lambda api, ep, tmp: api.auth_check("acme/gated-model"), False, GatedRepoError, 401),
    (lambda api, ep, tmp: api.model_info(TINY), "wrong-token", HfHubHTTPError, 401),
])
def test_typed_errors(server, tmp_path, call, token, error, status):
    """Hub error codes become the client's typed errors, with the Hub's status."""
    api = HfApi(endpoint=server.endpoint, token=token)
    with pytest.raises(HfHubHTTPError) as err:
        call(api, server.endpoint, tmp_path)
    assert (type(err.value), err.value.response.status_code) == (error, status)
    assert err.value.response.headers["X-Error-Message"]


def test_access_with_token(server, tmp_path):
    """With the server's token, private repos are visible and gated files download."""
    api = HfApi(endpoint=server.endpoint, token="secret")
    assert api.model_info("acme/private-model").private is True
    path = hf_hub_download(
        "acme/gated-model", "config.json", endpoint=server.endpoint, cache_dir=tmp_path, token="secret"
    )
    assert Path(path).read_text() == '{"model_type": "tiny"}\n'
    assert HfApi(endpoint=server.endpoint, token=False).model_info("acme/gated-model").gated == "manual"


@pytest.mark.parametrize("status", [429, 500, 503])
def test_injected_faults(server, api, status):
    """An injected status hits the next matching request only; model_info does not retry and raises it."""
    server.inject(status, path=r"^/api/models/acme/tiny-model$", method="GET")
    with pytest.raises(HfHubHTTPError) as err:
        api.model_info(TINY)
    assert err.value.response.status_code == status
    assert ("RateLimit" in err.value.response.headers) == (status == 429)
    assert api.model_info(TINY).sha == server.head_sha(TINY)
    assert [r.status for r in server.requests] == [status, 200]


def test_rate_limit_headers(server, api):
    """A 429 carries the Hub's RateLimit headers, which the client parses; given headers override them."""
    server.inject(429, path="/refs", times=2, headers={"RateLimit": '"api";r=0;t=42'})
    for _ in range(2):
        with pytest.raises(HfHubHTTPError) as err:
            api.list_repo_refs(TINY)
        assert "Retry after 42 seconds" in str(err.value)
        assert err.value.response.headers["RateLimit-Policy"] == '"fixed window";"api";q=500;w=300'
    server.clear_faults()
    assert api.list_repo_refs(TINY).branches


def test_agent_harnesses_not_counted(server):
    """The client's background agent-harness look-up is a 404 that is never recorded."""
    assert http(f"{server.endpoint}/api/agent-harnesses")[0] == 404
    assert server.count_requests() == 0


def test_stop_closes_keep_alive_connections(server, api):
    """After stop, a pooled keep-alive connection no longer gets answers."""
    api.model_info(TINY, expand=["sha"])
    server.stop()
    with pytest.raises(httpx2.TransportError):
        api.model_info(TINY, expand=["sha"])


def test_standalone_admin_routes():
    """`python -m tracker.standins.replay` prints its endpoint and obeys the admin routes."""
    command = [sys.executable, "-m", "tracker.standins.replay", "--port", "0", "--no-bundled", "--root", str(FIXTURES)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) as proc:
        try:
            endpoint = proc.stdout.readline().strip()
            head = json.loads(http(f"{endpoint}/_replay/head/{TINY}?n=1", "POST")[2])
            api = HfApi(endpoint=endpoint, token=False)
            assert api.model_info(TINY, expand=["sha"]).sha == head["head"]
            advanced = json.loads(http(f"{endpoint}/_replay/advance/{TINY}", "POST")[2])
            assert (advanced["advanced"], advanced["n"]) == (True, 2)
            assert [r["status"] for r in json.loads(http(f"{endpoint}/_replay/requests")[2])] == [200]
            http(f"{endpoint}/_replay/reset-requests", "POST")
            assert json.loads(http(f"{endpoint}/_replay/requests")[2]) == []
        finally:
            proc.terminate()


@pytest.mark.parametrize(("commits", "message"), [
    ([{"parent": "9999-later"}], "not an earlier commit"),
    ([{"delete": ["ghost.txt"]}], "parent tree lacks"),
    ([{"missing": ["ghost.txt"]}], "not in the tree"),
    ([{"date": "yesterday"}], "bad date"),
    ([{"files": {"a.txt": "x"}, "synthetic": {"a.txt": {"size": 3}}}], "synthetic paths also given"),
    ([{"synthetic": {"a.txt": {"byte": "a"}}}], "malformed commit.json"),
    ([{"lfs": {"w.safetensors": {"safetensors": {"t": {"dtype": "F32"}}}}}], "malformed commit.json"),
])
def test_history_errors(tmp_path, commits, message):
    """A history that breaks FORMAT.md fails to load with a message naming the problem."""
    write_history(tmp_path, "acme/bad", commits)
    with pytest.raises(HistoryError, match=message):
        load_repo(tmp_path / "acme" / "bad")


@pytest.mark.parametrize(("blob", "start", "stop", "expected"), [
    (PatternBlob(b"abc", 10), 4, 9, b"bcabc"),
    (PatternBlob(b"abc", 3 * CHUNK_SIZE), CHUNK_SIZE - 1, CHUNK_SIZE + 3, b"abca"),
    (LfsBlob(12, b"head"), 2, 7, b"ad\0\0\0"),
    (LfsBlob(3, b"header"), 0, None, b"hea"),
    (LfsBlob(12, b"head", suffix=b"tail"), 2, None, b"ad\0\0\0\0tail"),
    (LfsBlob(12, b"head", suffix=b"tail"), 9, 11, b"ai"),
    (LfsBlob(6, b"head", suffix=b"tail"), 0, None, b"headil"),
])
def test_blob_reads(blob, start, stop, expected):
    """Generated blobs serve any byte range without building the whole file."""
    assert blob.read(start, stop) == expected


def test_history_head_and_tail(tmp_path):
    """`head`/`tail` files serve a real header and a real end around zeros; Range reads return them."""
    write_history(tmp_path, "acme/zip", [{"lfs": {"model.bin": {"size": 10_000_000_000, "head": "h.bin", "tail": "t.bin"}}}])
    commit = tmp_path / "acme" / "zip" / "commits" / "0001-commit"
    (commit / "h.bin").write_bytes(b"PK\x03\x04head")
    (commit / "t.bin").write_bytes(b"PK\x05\x06tail")
    with ReplayServer(roots=tmp_path) as replay:
        url = f"{replay.endpoint}/acme/zip/resolve/main/model.bin"
        assert http(url, headers={"Range": "bytes=0-7"})[2] == b"PK\x03\x04head"
        status, headers, body = http(url, headers={"Range": "bytes=-10"})
        assert (status, body) == (206, b"\0\0PK\x05\x06tail")
        assert headers["Content-Range"] == "bytes 9999999990-9999999999/10000000000"
    write_history(tmp_path, "acme/escape", [{"lfs": {"m.bin": {"head": "../../repo.json"}}}])
    with pytest.raises(HistoryError, match="head/tail"):
        load_repo(tmp_path / "acme" / "escape")


def test_history_extensions(tmp_path):
    """`parent: null` starts a new root; lfs plus files/ serves real bytes as LFS; missing lasts until rewritten."""
    write_history(tmp_path, "acme/ext", [
        {"files": {"a.txt": "one", "tok.json": "{}"}, "lfs": {"tok.json": {}}, "missing": ["a.txt"]},
        {"files": {"b.txt": "two"}},
        {"files": {"a.txt": "three"}},
        {"parent": None, "files": {"c.txt": "root"}},
    ])
    with ReplayServer(roots=tmp_path) as replay:
        api = HfApi(endpoint=replay.endpoint, token=False)
        shas = [c.sha for c in replay.commits("acme/ext")]
        assert [api.file_exists("acme/ext", "a.txt", revision=sha) for sha in shas[:3]] == [False, False, True]
        (tok,) = api.get_paths_info("acme/ext", ["tok.json"], revision=shas[0])
        assert (tok.lfs.sha256, tok.size) == (hashlib.sha256(b"{}").hexdigest(), 2)
        assert api.list_repo_files("acme/ext") == ["c.txt"]
        assert len(api.list_repo_commits("acme/ext")) == 1


def test_byte_code_left_by_an_installer_is_not_part_of_a_history(tmp_path: Path) -> None:
    """pip byte-compiles the .py files of bundled histories; __pycache__ must not appear as repo files."""
    write_history(tmp_path, "acme/code", [{"files": {"modeling.py": "x = 1\n"}}])
    files_dir = next((tmp_path / "acme" / "code" / "commits").iterdir()) / "files"
    (files_dir / "__pycache__").mkdir()
    (files_dir / "__pycache__" / "modeling.cpython-311.pyc").write_bytes(b"\x00bytecode")
    with ReplayServer(roots=[tmp_path]) as server:
        paths = [f.path for f in HfApi(endpoint=server.endpoint).list_repo_tree("acme/code", recursive=True)]
    assert paths == ["modeling.py"]


# -- /api/models: the listing the real client's list_models reads ------------------------------------


@pytest.fixture
def listing():
    """Seven in-memory repos of two authors (one private), pages of 3."""
    from tracker.standins.replay.history import synthetic_history

    with ReplayServer(roots=[]) as replay:
        for i in range(6):
            replay.add_repo(synthetic_history(f"{'ab'[i % 2]}org/m{i}", commits=2))
        replay.add_repo(synthetic_history("aorg/secret", commits=1, private=True))
        replay.list_page = 3
        yield replay


def test_list_models_sorted_by_last_modification(listing):
    """list_models(sort="last_modified", expand=[sha, lastModified]) pages through every public repo, newest first."""
    api = HfApi(endpoint=listing.endpoint, token=False)
    models = list(api.list_models(sort="last_modified", expand=["sha", "lastModified"]))
    assert [m.id for m in models] == [f"{'ab'[i % 2]}org/m{i}" for i in reversed(range(6))]
    assert all(m.sha == listing.head_sha(m.id) and m.last_modified == listing.last_modified(m.id) for m in models)
    pages = [r for r in listing.requests if r.path == "/api/models"]
    assert len(pages) == 2 and "sort=lastModified" in pages[0].query and "expand=sha" in pages[0].query
    assert "cursor=" in pages[1].query


def test_list_models_author_limit_and_private(listing):
    """`author` narrows to one org; a private repo is listed only for a token; `limit` caps the page."""
    anonymous = HfApi(endpoint=listing.endpoint, token=False)
    assert [m.id for m in anonymous.list_models(author="aorg", sort="last_modified")] == ["aorg/m4", "aorg/m2", "aorg/m0"]
    user = HfApi(endpoint=listing.endpoint, token="hf_any")
    assert [m.id for m in user.list_models(author="aorg", sort="last_modified")][0] == "aorg/secret"
    assert len(list(anonymous.list_models(limit=2))) == 2


def test_list_models_link_header_and_direction(listing):
    """The next page is a `Link: <...>; rel="next"` header; direction=1 sorts oldest first; no sort: by id."""
    status, headers, body = http(f"{listing.endpoint}/api/models?sort=lastModified&direction=-1&limit=2&expand[]=sha")
    assert status == 200 and headers["Link"].endswith('>; rel="next"')
    first = json.loads(body)
    assert [set(e) for e in first] == [{"_id", "id", "sha"}] * 2
    _, _, body = http(headers["Link"][1 : headers["Link"].index(">")])
    assert [e["id"] for e in json.loads(body)] == ["borg/m3", "aorg/m2"]
    _, _, body = http(f"{listing.endpoint}/api/models?sort=lastModified&direction=1&limit=1")
    assert json.loads(body)[0]["id"] == "aorg/m0"
    _, _, body = http(f"{listing.endpoint}/api/models?limit=3")
    assert [e["id"] for e in json.loads(body)] == ["aorg/m0", "aorg/m2", "aorg/m4"]


@pytest.mark.parametrize(
    ("query", "message"),
    [("sort=downloads_monthly", "Invalid sort"), ("direction=up&sort=id", "Invalid direction"),
     ("expand=nope", "expand"), ("cursor=%%%", "Invalid cursor")],
)
def test_list_models_bad_query_is_400(listing, query, message):
    """A sort, direction, expand key or cursor the replay does not know is a 400 naming it."""
    status, headers, _ = http(f"{listing.endpoint}/api/models?{query}")
    assert status == 400 and message in headers["X-Error-Message"]


def test_a_moved_head_is_listed_first(listing):
    """advance() makes the repo the newest in the listing, with its new sha, in model_info too."""
    listing.set_head("borg/m1", 1)
    api = HfApi(endpoint=listing.endpoint, token=False)
    newest = next(iter(api.list_models(sort="last_modified", expand=["sha", "lastModified"])))
    assert (newest.id, newest.sha) == ("borg/m1", listing.commits("borg/m1")[0].sha)
    assert api.model_info("borg/m1").last_modified == newest.last_modified


@pytest.mark.parametrize(("fault", "check"), [
    ("repeat", lambda ids: len(ids) == 8 and len(set(ids)) == 6),
    ("skip", lambda ids: len(ids) == 5 and len(set(ids)) == 5),
])
def test_listing_faults_repeat_or_skip(listing, fault, check):
    """fault_listing("repeat"/"skip") makes later pages start early (entries twice) or late (entries missing)."""
    listing.fault_listing(fault, 1)
    ids = [m.id for m in HfApi(endpoint=listing.endpoint, token=False).list_models(sort="last_modified")]
    assert check(ids), ids


def test_listing_fault_loop_and_listed_sha(listing):
    """"loop" points every next link back to the first page; list_with_sha shows a sha model info does not confirm."""
    listing.fault_listing("loop")
    models = HfApi(endpoint=listing.endpoint, token=False).list_models(sort="last_modified")
    ids = [m.id for _, m in zip(range(9), models, strict=False)]
    assert ids[:3] == ids[3:6] == ids[6:9]
    with pytest.raises(ValueError, match="listing fault"):
        listing.fault_listing("sideways")
    listing.fault_listing(None)
    listing.list_with_sha("aorg/m0", "f" * 40)
    api = HfApi(endpoint=listing.endpoint, token=False)
    listed = {m.id: m.sha for m in api.list_models(expand=["sha"])}
    assert listed["aorg/m0"] == "f" * 40 and api.model_info("aorg/m0").sha == listing.head_sha("aorg/m0")
