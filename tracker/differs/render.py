"""Everything that touches Jinja: render chat templates in a sandboxed, killable worker; lex them here.

Rendering untrusted templates happens in a child process (`render_worker.py`, started with `subprocess`,
never `fork` in this multi-threaded daemon, and kept warm between batches by `WorkerPool`): Jinja's ImmutableSandboxedEnvironment inside,
an address-space limit, a wall-clock limit per render, and an output cap. Whatever a template does
(loop forever, allocate gigabytes, reach for `__globals__`), each render comes back as a prompt or a
readable error, and the caller never hangs: a render stuck in C code is killed from here and the rest
of the batch continues in a fresh worker.

Lexing (for the security rules of the chat template differ) runs in-process: it tokenises text and
executes nothing.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import selectors
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

WORKER = Path(__file__).with_name("render_worker.py")
# @huggingface/jinja through Node: the script, and the folder `npm ci --prefix` installs the pinned package in
JS_DIR = Path(__file__).with_name("jinja_js")
JS_WORKER = JS_DIR / "render.mjs"
JS_ENGINE = "huggingface-jinja"
PYTHON_ENGINES = ("jinja2", "minijinja")


@dataclass(frozen=True)
class RenderLimits:
    """Limits for one batch. `time_s` and `output_chars` apply per render, `memory_bytes` per worker."""

    time_s: float = 2.0
    memory_bytes: int = 512 * 2**20
    output_chars: int = 64 * 1024
    startup_s: float = 10.0  # interpreter start and `import jinja2`, on a busy machine
    kill_grace_s: float = 0.5  # beyond time_s, before a render stuck in C code is killed


DEFAULT_LIMITS = RenderLimits()


@dataclass(frozen=True)
class RenderRequest:
    """One template rendered with one set of variables (messages, tools, bos_token, ...) by one engine
    ("jinja2", "minijinja" or "huggingface-jinja"); `variables` None only compiles the template."""

    template: str
    variables: Mapping[str, Any] | None
    engine: str = "jinja2"


@dataclass(frozen=True)
class Rendered:
    """The prompt a render produced, or why it failed."""

    prompt: str | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, str]:
        return {"prompt": self.prompt} if self.error is None else {"error": self.error}


def render_all(requests: Sequence[RenderRequest], *, now: datetime, limits: RenderLimits = DEFAULT_LIMITS) -> list[Rendered]:
    """Render every request, in order, in one worker process (more only if one has to be killed).

    `now` is what the templates' `strftime_now` sees. Requests for @huggingface/jinja go to a Node worker
    of their own (see `js_engine_missing`), under the same deadlines.
    """
    results: list[Rendered | None] = [None] * len(requests)
    for command in (_python_command(), _js_command(limits)):
        picked = [i for i, r in enumerate(requests) if (r.engine == JS_ENGINE) == (command[0] != sys.executable)]
        if not picked:
            continue
        missing = js_engine_missing() if command[0] != sys.executable else None
        rendered = [Rendered(error=missing)] * len(picked) if missing else _render_batch(
            [requests[i] for i in picked], now, limits, command)
        for i, result in zip(picked, rendered, strict=True):
            results[i] = result
    return [r if r is not None else Rendered(error="not rendered") for r in results]


def js_engine_missing() -> str | None:
    """Why @huggingface/jinja cannot be run here (None when it can): Node or the pinned package is missing."""
    if shutil.which("node") is None:
        return "not checked: Node.js is not installed"
    if not (JS_DIR / "node_modules" / "@huggingface" / "jinja").is_dir():
        return f"not checked: @huggingface/jinja is not installed (npm ci --prefix {JS_DIR})"
    return None


def _python_command() -> list[str]:
    return [sys.executable, "-I", str(WORKER)]


def _js_command(limits: RenderLimits) -> list[str]:
    return ["node", f"--max-old-space-size={max(limits.memory_bytes // 2**21, 64)}", str(JS_WORKER)]


def _render_batch(requests: Sequence[RenderRequest], now: datetime, limits: RenderLimits, command: list[str]) -> list[Rendered]:
    templates: dict[str, int] = {}
    jobs = [
        {
            "template": templates.setdefault(r.template, len(templates)),
            "context": None if r.variables is None else dict(r.variables),
            "engine": r.engine,
        }
        for r in requests
    ]
    base = {
        "templates": list(templates),
        "now": now.isoformat(),
        "time_s": limits.time_s,
        "memory_bytes": limits.memory_bytes,
        "output_chars": limits.output_chars,
    }
    results: list[Rendered | None] = [None] * len(jobs)
    start = 0
    while start < len(jobs):
        batch = list(range(start, len(jobs)))
        cpu_s = math.ceil(limits.startup_s + len(batch) * (limits.time_s + limits.kill_grace_s))
        payload = json.dumps({**base, "jobs": [jobs[i] for i in batch], "cpu_s": cpu_s}).encode()
        lines, failure = _run_worker(payload, limits, command)
        finished = [line for line in lines if "job" in line]
        for line in finished:
            i = batch[line["job"]]
            results[i] = Rendered(error=line["error"]) if "error" in line else Rendered(prompt=line["prompt"])
        if failure is None or not any("ready" in line for line in lines):
            for i in batch[len(finished):]:  # a worker that never started would fail the same way again
                results[i] = Rendered(error=failure or "the render worker stopped before this render")
            break
        stuck = start + len(finished)  # the render the worker was busy with when it was stopped
        results[stuck] = Rendered(error=failure)
        start = stuck + 1
    return [r if r is not None else Rendered(error="the render worker stopped before this render") for r in results]


class _Worker:
    """A started worker process, kept warm between batches by `WorkerPool`."""

    def __init__(self, command: list[str]) -> None:
        self.proc = subprocess.Popen(
            command,
            env={**os.environ, "TZ": "UTC"} if command[0] != sys.executable else None,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            close_fds=True,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None and self.proc.stderr is not None
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            os.set_blocking(pipe.fileno(), False)
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.requests = 0
        self.idle_since = time.monotonic()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()


class WorkerPool:
    """Idle workers by (command, limits): one batch after another reuses a started worker instead of paying
    an interpreter start and `import jinja2` (or Node's start) each time; a revision's render, engine matrix
    and end-of-turn check, and the revisions of a poll, share them. A worker is handed back only after a
    batch it finished cleanly without hitting a limit; one that was killed, exceeded a limit, served
    `max_requests` batches or sat idle `idle_s` is closed. `keep` 0 starts a fresh worker per batch."""

    def __init__(self, keep: int = 2, idle_s: float = 60.0, max_requests: int = 200) -> None:
        self.keep, self.idle_s, self.max_requests = keep, idle_s, max_requests
        self._idle: dict[tuple[Any, ...], list[_Worker]] = {}
        self._lock = threading.Lock()
        self.started = 0  # workers started (the benchmarks and tests count them)

    def acquire(self, key: tuple[Any, ...], command: list[str]) -> _Worker:
        stale: list[_Worker] = []
        found = None
        with self._lock:
            idle = self._idle.get(key, [])
            while idle and found is None:
                worker = idle.pop()
                fresh = time.monotonic() - worker.idle_since < self.idle_s and worker.proc.poll() is None
                found, stale = (worker, stale) if fresh else (None, [*stale, worker])
            if found is None:
                self.started += 1
        for worker in stale:
            worker.close()
        return found or _Worker(command)

    def release(self, key: tuple[Any, ...], worker: _Worker, reusable: bool) -> None:
        worker.requests += 1
        worker.idle_since = time.monotonic()
        if reusable and worker.requests < self.max_requests and worker.proc.poll() is None:
            with self._lock:
                idle = self._idle.setdefault(key, [])
                if len(idle) < self.keep:
                    idle.append(worker)
                    return
        worker.close()

    def close(self) -> None:
        """Stop every idle worker (at exit, or when a caller wants none left running)."""
        with self._lock:
            workers = [w for idle in self._idle.values() for w in idle]
            self._idle.clear()
        for worker in workers:
            worker.close()


POOL = WorkerPool()
atexit.register(POOL.close)


def _run_worker(payload: bytes, limits: RenderLimits, command: list[str]) -> tuple[list[dict[str, Any]], str | None]:
    """Feed one request to a worker (warm from the pool, or started now); the lines it wrote, and why it
    stopped early (None if it didn't).

    The worker gets `startup_s` to report ready, then `time_s + kill_grace_s` per result line. Past that
    deadline it is killed: a render the alarm could not interrupt (a C-level computation).
    """
    key = (tuple(command), limits)
    while True:
        worker = POOL.acquire(key, command)
        reused = worker.requests > 0
        lines, failure, done = _serve(worker, payload, limits)
        hit_limit = any("exceeded" in line.get("error", "") for line in lines)  # a worker near a limit is not reused
        POOL.release(key, worker, reusable=done and failure is None and not hit_limit)
        if not (reused and failure is not None and not lines):
            return lines, failure
        # a warm worker that died while idle (killed from outside) answered nothing: the batch goes to another


def _serve(worker: _Worker, payload: bytes, limits: RenderLimits) -> tuple[list[dict[str, Any]], str | None, bool]:
    """One request to one worker: its lines, why it stopped early, and whether it finished the request."""
    lines: list[dict[str, Any]] = []
    failure: str | None = None
    done = False
    try:
        for line in _read_lines(worker, payload + b"\n", limits):
            if "done" in line:
                done = True
                break
            lines.append(line)
    except TimeoutError:
        if lines:
            failure = f"exceeded the time limit ({limits.time_s:g} s) in code that could not be interrupted; the worker was stopped"
        else:
            failure = f"the render worker did not start within {limits.startup_s:g} s and was stopped"
    if failure is None and not done:
        worker.close()
        tail = worker.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
        failure = f"the render worker exited with code {worker.proc.returncode} {tail[0]}".strip()
    return lines, failure, done


def _read_lines(worker: _Worker, payload: bytes, limits: RenderLimits) -> Iterator[dict[str, Any]]:
    """Write `payload` to the worker while reading its JSON lines, enforcing the progress deadline; ends
    when the worker closes its output (the caller stops reading at the request's "done" line)."""
    proc = worker.proc
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    to_send = memoryview(payload)
    deadline = time.monotonic() + limits.startup_s
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        selector.register(proc.stderr, selectors.EVENT_READ)
        selector.register(proc.stdin, selectors.EVENT_WRITE)
        while proc.stdout in (k.fileobj for k in selector.get_map().values()):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            for key, _ in selector.select(remaining):
                if key.fileobj is proc.stdin:
                    try:
                        sent = os.write(proc.stdin.fileno(), to_send[:65536])
                    except BlockingIOError:
                        sent = 0
                    except BrokenPipeError:  # it died before reading: its exit code and stderr say why
                        sent, to_send = 0, to_send[:0]
                    to_send = to_send[sent:]
                    if not to_send:
                        selector.unregister(proc.stdin)
                    continue
                try:
                    chunk = os.read(key.fd, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    selector.unregister(key.fileobj)
                elif key.fileobj is proc.stderr:
                    worker.stderr.extend(chunk)
                    del worker.stderr[:-8192]  # the tail holds the last line of a traceback
                else:
                    worker.stdout.extend(chunk)
                    *complete, rest = worker.stdout.split(b"\n")
                    worker.stdout = bytearray(rest)
                    for raw in complete:
                        deadline = time.monotonic() + limits.time_s + limits.kill_grace_s
                        yield json.loads(raw)


@dataclass(frozen=True)
class TemplateToken:
    """One token of a template's code, with the roles it plays (see `template_tokens`)."""

    line: int
    value: str
    kinds: frozenset[str]


def template_tokens(text: str) -> list[TemplateToken] | None:
    """The code tokens of a template (literal text and comments left out), or None if it does not lex.

    Kinds: "name" for every identifier, plus "statement" for the first name after `{%` and "filter" for
    a name after `|`; "string" for string literals, with their value unquoted.
    """
    from jinja2 import Environment
    from jinja2.exceptions import TemplateSyntaxError

    tokens: list[TemplateToken] = []
    previous = ""
    try:
        for token in Environment().lexer.tokenize(text):
            if token.type == "name":
                kinds = {"name"}
                if previous in ("block_begin", "pipe"):
                    kinds.add("statement" if previous == "block_begin" else "filter")
                tokens.append(TemplateToken(token.lineno, token.value, frozenset(kinds)))
            elif token.type == "string":
                tokens.append(TemplateToken(token.lineno, token.value, frozenset({"string"})))
            previous = token.type
    except TemplateSyntaxError:
        return None
    return tokens
