"""Figures: a multi-GB torch checkpoint scanned by HTTP Range; a 7B data.pkl judged; detection on the corpus.

1. Bytes fetched against the file's size: Llama-2-7B's `pytorch_model.bin` layout (291 tensors, fp16,
   13.5 GB) served by the Hub replay server as an LFS file whose head is data.pkl's local header and
   bytes and whose tail is the ZIP64 central directory (tracker/standins/replay/FORMAT.md, head/tail),
   read through a RangeSource over HTTP Range. Goal: under 1% of the file (the end, the central
   directory and data.pkl only).
2. Scan time of that data.pkl: the opcode walk, the tensor manifest and the judgement, median of N runs.
   Goal: under 50 ms.
3. Detection: every sample of tests/support/pickle_corpus (published bypass techniques, as bytes) flagged;
   none of the benign files (torch.save's fixtures, the 7B checkpoint, plain data pickles) flagged.

The data.pkl is written by torch.save itself (zero-stride expanded tensors: real names and shapes, one
element of storage each); the zip around it is written here with the storages' real sizes. torch comes
with `.[groundtruth]`. The range source here is the benchmark's own (httpx); the pipeline's is tracker/hub/client.py's.
Run: python -m benchmarks run formats_pickle   (size: scan-time runs, default 50)
"""

from __future__ import annotations

import io
import math
import pickle
import statistics
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from benchmarks.declare import Benchmark, Figure, detail, run_alone
from tests.support.pickle_bytes import sparse_torch_zip
from tests.support.pickle_corpus import corpus
from tests.support.synthetic_repos import write_repo
from tests.support.torch_fixtures import FILES, FIXTURES
from tracker.formats.pickle_files import scan_file
from tracker.formats.pickle_rules import BUILTIN, scan_result
from tracker.formats.pickle_scan import scan_pickle
from tracker.formats.ranged import DEFAULT_BUDGET, BytesSource, RangeError, charge
from tracker.formats.torch_manifest import tensors_of, to_weight_manifest
from tracker.standins.replay.control import ReplayServer

REPO = "bench/llama-2-7b-pickle"
GOAL_MS = 50.0
HIDDEN, INTERMEDIATE, LAYERS, VOCAB = 4096, 11008, 32, 32000
AT = "results/bench_formats_pickle.txt, commit d0d0965"
BENCHMARK = Benchmark(
    name="formats_pickle",
    about="A 13.5 GB torch checkpoint scanned by HTTP Range; a 7B data.pkl judged; detection on the pickle corpus",
    tags=("quick", "formats"),
    size="scan-time runs (default 50)",
    small=5,
    requires=("torch",),
    figures=(
        Figure("torch zip over HTTP Range: bytes fetched / size", "%", goal=1.0, baseline=0.00075, baseline_at=AT),
        Figure("torch zip over HTTP Range: requests", "requests", baseline=6, baseline_at=AT),
        Figure("torch zip over HTTP Range: end to end", "ms", baseline=43, baseline_at=AT),
        Figure("scan of a 7B data.pkl, median", "ms", goal=GOAL_MS, margin=0.5, baseline=34.07, baseline_at=AT),
        Figure("malicious samples not flagged", "samples", goal=0, note="every sample of tests/support/pickle_corpus"),
        Figure("benign files flagged", "files", goal=0),
    ),
)


def llama2_7b_shapes() -> dict[str, tuple[int, ...]]:
    """Llama-2-7B's 291 tensors, named as its pytorch_model.bin names them."""
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (VOCAB, HIDDEN)}
    for i in range(LAYERS):
        p = f"model.layers.{i}"
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            shapes[f"{p}.self_attn.{proj}.weight"] = (HIDDEN, HIDDEN)
        shapes[f"{p}.mlp.gate_proj.weight"] = (INTERMEDIATE, HIDDEN)
        shapes[f"{p}.mlp.up_proj.weight"] = (INTERMEDIATE, HIDDEN)
        shapes[f"{p}.mlp.down_proj.weight"] = (HIDDEN, INTERMEDIATE)
        shapes[f"{p}.input_layernorm.weight"] = (HIDDEN,)
        shapes[f"{p}.post_attention_layernorm.weight"] = (HIDDEN,)
    shapes["model.norm.weight"] = (HIDDEN,)
    shapes["lm_head.weight"] = (VOCAB, HIDDEN)
    return shapes


def data_pkl(shapes: dict[str, tuple[int, ...]]) -> bytes:
    """torch.save's data.pkl for fp16 tensors of these shapes (each a zero-stride view of one element)."""
    try:
        import torch
    except ImportError:
        sys.exit("bench_formats_pickle needs torch: pip install -e '.[groundtruth]'")
    state = {name: torch.zeros((), dtype=torch.float16).expand(shape) for name, shape in shapes.items()}
    out = io.BytesIO()
    torch.save(state, out)
    with zipfile.ZipFile(out) as archive:
        return archive.read(next(n for n in archive.namelist() if n.endswith("/data.pkl")))


class HttpRangeSource:
    """A RangeSource over HTTP Range requests (this benchmark's; the pipeline's lives in tracker/hub/client.py).
    A server that ignores Range is read only as far as asked, then the connection is closed."""

    def __init__(self, client: httpx.Client, url: str, budget: int = DEFAULT_BUDGET) -> None:
        self.client, self.url, self.budget = client, url, budget
        self.bytes_read = self.requests = 0
        self.size = self._probe()

    def _probe(self) -> int:
        answer = self.client.get(self.url, headers={"Range": "bytes=0-0"})
        self.requests += 1
        self.bytes_read += len(answer.content)
        if answer.status_code != 206 or "/" not in answer.headers.get("Content-Range", ""):
            raise RangeError(f"{self.url}: no ranged answer ({answer.status_code})")
        return int(answer.headers["Content-Range"].rsplit("/", 1)[1])

    def read(self, offset: int, length: int) -> bytes:
        stop = min(offset + length, self.size)
        if offset < 0 or length < 0 or offset > self.size:
            raise RangeError(f"bytes {offset:,}+{length:,} are outside the file's {self.size:,} bytes")
        if stop == offset:
            return b""
        charge(self, stop - offset)
        with self.client.stream("GET", self.url, headers={"Range": f"bytes={offset}-{stop - 1}"}) as answer:
            self.requests += 1
            skip = 0 if answer.status_code == 206 else offset  # a 200 sends the whole file: skip, then cut
            chunks, got = [], 0
            for chunk in answer.iter_bytes():
                got += len(chunk)
                chunks.append(chunk)
                if got >= skip + (stop - offset):
                    break
        self.bytes_read += got
        return b"".join(chunks)[skip : skip + stop - offset]


def served_checkpoint(root: Path, head: bytes, tail: bytes, size: int) -> None:
    """The repo the replay server serves: one commit with pytorch_model.bin as head + zeros + tail."""
    folder = root / REPO / "commits" / "0001-commit"
    folder.mkdir(parents=True)
    (folder / "head.bin").write_bytes(head)
    (folder / "tail.bin").write_bytes(tail)
    write_repo(root, REPO, [{"title": "upload weights", "files": {"config.json": {"model_type": "llama"}},
                             "lfs": {"pytorch_model.bin": {"size": size, "head": "head.bin", "tail": "tail.bin"}}}])


def figure_bytes(pkl: bytes, shapes: dict[str, tuple[int, ...]]) -> dict[str, float]:
    storages = {str(i): math.prod(shape) * 2 for i, shape in enumerate(shapes.values())}
    head, tail, size = sparse_torch_zip(pkl, storages)
    with tempfile.TemporaryDirectory() as tmp:
        served_checkpoint(Path(tmp), head, tail, size)
        with ReplayServer(roots=[Path(tmp)]) as server:
            sha = server.head_sha(REPO)
            source, result, kept, note, elapsed_ms = _scan_served(f"{server.endpoint}/{REPO}/resolve/{sha}/pytorch_model.bin")
    manifest = to_weight_manifest(result["tensors"])
    detail(f"torch zip over HTTP Range: {size / 1e9:.2f} GB file, {source.bytes_read:,} bytes fetched in "
          f"{source.requests} requests ({source.bytes_read / size:.5%} of the file; goal < 1%, "
          f"ratio to goal {source.bytes_read / size / 0.01:.4f}); data.pkl {len(kept):,} bytes; "
          f"{elapsed_ms:.0f} ms end to end on loopback")  # fmt: skip
    detail(f"  verdict {result['verdict']}, {len(manifest.tensors)} tensors, {manifest.parameters / 1e9:.3f} B parameters, "
          f"dtypes {manifest.parameters_by_dtype()}, note {note}")  # fmt: skip
    assert [(t.name, t.shape) for t in manifest.tensors] == list(shapes.items()), "manifest differs from the shapes saved"
    return {"torch zip over HTTP Range: bytes fetched / size": 100 * source.bytes_read / size,
            "torch zip over HTTP Range: requests": source.requests, "torch zip over HTTP Range: end to end": elapsed_ms}


def _scan_served(url: str) -> tuple[HttpRangeSource, dict, bytes, str | None, float]:
    with httpx.Client(timeout=30) as client:
        source = HttpRangeSource(client, url)
        started = time.perf_counter()
        result, kept, note = scan_file("pytorch_model.bin", source, BUILTIN)
        return source, result, kept, note, (time.perf_counter() - started) * 1000


def figure_scan_time(pkl: bytes, runs: int) -> dict[str, float]:
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        scan = scan_pickle(pkl, max_pickles=1)
        tensors = tensors_of(scan)
        scan_result([(g.module, g.name) for g in scan.imports], BUILTIN, len(pkl), None, tensors=tensors)
        timings.append((time.perf_counter() - started) * 1000)
    median = statistics.median(timings)
    detail(f"scan of a 7B data.pkl ({len(pkl):,} bytes, {scan.opcodes:,} opcodes, {len(tensors)} tensors): median "
          f"{median:.2f} ms of {runs} runs (goal < {GOAL_MS:.0f} ms; ratio to goal {median / GOAL_MS:.3f})")  # fmt: skip
    return {"scan of a 7B data.pkl, median": median}


def figure_detection(pkl: bytes) -> dict[str, float]:
    samples = corpus()
    flagged = [s for s in samples if scan_file(s.path, _source(s.data))[0]["verdict"] in ("dangerous", "unknown")]
    dangerous = [s for s in samples if scan_file(s.path, _source(s.data))[0]["verdict"] == "dangerous"]
    benign = {name: (FIXTURES / name).read_bytes() for name in FILES}
    benign["data.pkl-of-7b.pkl"] = pkl
    benign["plain.pkl"] = pickle.dumps({"lr": 1e-3, "layers": [1, 2, 3], "name": "run"}, protocol=4)
    benign["plain-p0.pickle"] = pickle.dumps([1, 2.0, "three", (4,)], protocol=0)
    wrongly = [name for name, data in benign.items() if scan_file(name, _source(data))[0]["verdict"] != "safe"]
    detail(f"detection: {len(flagged)}/{len(samples)} malicious samples flagged ({len(dangerous)} dangerous, "
          f"{len(flagged) - len(dangerous)} unknown: extension codes, unresolved and unlisted names); "
          f"{len(wrongly)}/{len(benign)} benign files flagged {wrongly or ''}")  # fmt: skip
    missed = [s.technique for s in samples if s not in flagged]
    if missed:
        detail(f"  MISSED: {missed}")
    return {"malicious samples not flagged": len(missed), "benign files flagged": len(wrongly)}


def _source(data: bytes) -> BytesSource:
    return BytesSource(data)


def measure(size: int | None = None) -> dict[str, float]:
    shapes = llama2_7b_shapes()
    pkl = data_pkl(shapes)
    return figure_bytes(pkl, shapes) | figure_scan_time(pkl, size or 50) | figure_detection(pkl)


if __name__ == "__main__":
    run_alone(BENCHMARK, measure)
