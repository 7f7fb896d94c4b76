"""Child side of `tracker.differs.render`: renders chat templates in Jinja's sandbox, under limits.

Started as `python -I render_worker.py` (isolated: no PYTHON* variables, no script directory or
current directory on sys.path), so it imports only the standard library and jinja2 and starts the
same way however hubwatch is installed. Protocol, all JSON:

  stdin   requests, one a line: {"templates": [str], "jobs": [{"template": int, "context": {...} | null,
          "engine": str}], "now": ISO datetime, "time_s": float, "memory_bytes": int, "output_chars": int,
          "cpu_s": int}; the worker serves them in turn until stdin closes (the parent keeps it warm)
  stdout  per request: {"ready": true} once the limits are set and jinja2 is imported, then one line per
          job, in order: {"job": i, "prompt": str} or {"job": i, "error": str} (a job whose context is
          null only compiles its template: its prompt is ""), then {"done": true}

The address space is capped at the first request (a worker serves one set of limits); each request
gets `cpu_s` seconds of CPU on top of what the worker used before it.

Engines: "jinja2" (the default) and "minijinja" (the Rust engine text-generation-inference renders
with, through the `minijinja` package, configured as TGI's router/src/infer/chat_template.rs does:
`Environment::new()` defaults, no trim_blocks or lstrip_blocks, pycompat's Python string and dict
methods, `raise_exception` and `strftime_now`; its fuel bounds the work a render may do, since the alarm
cannot interrupt Rust code).

The Jinja environment mirrors transformers 5.x `_compile_jinja_template` (checked against transformers
5.24's `utils/chat_template_utils.py`): ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks,
loopcontrols and the `{% generation %}` tag; its own `tojson` (no HTML escaping; ensure_ascii, indent,
separators, sort_keys), `raise_exception`, `strftime_now` (here a fixed clock, from the request), a `dict`
global with only call and `fromkeys`, and a `namespace` that refuses underscore-prefixed names. Two
deliberate differences: an access the sandbox refuses (`''.__class__`) raises instead of rendering as
empty text (the chat template differ reports it), and the clock is fixed.
"""

from __future__ import annotations

import json
import math
import re
import resource
import signal
import sys
from datetime import datetime
from functools import partial
from typing import Any


class RenderTimeout(BaseException):
    """Raised by the alarm handler; a BaseException so no `except Exception` in Jinja swallows it."""


class OutputTooLarge(Exception):
    pass


_armed = False
_fired = False  # the alarm went off during the last `_timed` call (Rust code that called back into Python turns
# the RenderTimeout raised there into a PanicException: the job is still past its time limit)


def _on_alarm(signum: int, frame: Any) -> None:
    global _fired
    if _armed:
        _fired = True
        raise RenderTimeout


def _set_limits(memory_bytes: int, cpu_s: int | None) -> None:
    """Cap the address space (huge strings fail with MemoryError) and, as a backstop, CPU time."""
    for which, value in ((resource.RLIMIT_AS, memory_bytes), (resource.RLIMIT_CPU, cpu_s)):
        if value is None:
            continue
        try:
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):  # not lowerable on this platform: the parent's deadline still holds
            pass


def _environment(now: datetime) -> tuple[Any, type[Exception]]:
    """The sandboxed environment, and the exception type its `raise_exception` raises."""
    import jinja2
    from jinja2 import nodes
    from jinja2.ext import Extension
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class TemplateRaised(jinja2.exceptions.TemplateError):
        pass

    class GenerationTag(Extension):
        """`{% generation %}...{% endgeneration %}` as transformers accepts it; renders its body."""

        tags = {"generation"}

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller: Any) -> str:
            return caller()

    class StrictSandbox(ImmutableSandboxedEnvironment):
        """Refused accesses raise at once instead of becoming an undefined value that prints as ''."""

        def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
            raise jinja2.exceptions.SecurityError(
                f"access to attribute {attribute!r} of {type(obj).__name__!r} object is unsafe"
            )

    def raise_exception(message: str) -> None:
        raise TemplateRaised(message)

    def tojson(
        x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None, sort_keys: bool = False
    ) -> str:
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format: str) -> str:  # noqa: A002 - transformers' name; a template may pass `format=` by keyword
        return now.strftime(format)

    class TemplateDict:
        """transformers' `dict` global: callable and `fromkeys`, nothing else of the type (no `dict.copy`)."""

        def __call__(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
            return dict(*args, **kwargs)

        def fromkeys(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
            return dict.fromkeys(*args, **kwargs)

    class TemplateNamespace(jinja2.utils.Namespace):
        """transformers' `namespace` global: underscore-prefixed attributes refused, at creation and on `set`."""

        def __init__(*args: Any, **kwargs: Any) -> None:  # jinja2's Namespace signature: namespace(self=...) works
            self, args = args[0], args[1:]
            attrs = dict(*args, **kwargs)
            for name in attrs:
                TemplateNamespace._check_name(name)
            jinja2.utils.Namespace.__init__(self, attrs)

        def __setitem__(self, name: str, value: Any) -> None:
            TemplateNamespace._check_name(name)
            jinja2.utils.Namespace.__setitem__(self, name, value)

        @staticmethod
        def _check_name(name: Any) -> None:
            if isinstance(name, str) and name.startswith("_"):
                raise jinja2.exceptions.SecurityError(
                    f"Chat templates cannot store underscore-prefixed attributes on a namespace, but got {name!r}. "
                    "Please rename the attribute."
                )

    env = StrictSandbox(trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, "jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    env.globals["dict"] = TemplateDict()
    env.globals["namespace"] = TemplateNamespace
    return env, TemplateRaised


MINIJINJA_FUEL = 5_000_000  # instructions per render: far above what a real chat template needs


def _minijinja_environment(now: datetime) -> Any:
    """minijinja as TGI configures it; its errors carry the line they happened on."""
    import minijinja

    def raise_exception(message: str) -> None:
        raise MiniJinjaRaised(message)

    def strftime_now(format: str) -> str:  # noqa: A002 - the template's name for it
        return now.strftime(format)

    env = minijinja.Environment(pycompat=True, fuel=MINIJINJA_FUEL)
    env.add_function("raise_exception", raise_exception)
    env.add_function("strftime_now", strftime_now)
    return env


class MiniJinjaRaised(Exception):
    pass


def _describe_minijinja(err: BaseException) -> str:
    """minijinja's error: its kind and message on the line it names (not the multi-line source excerpt)."""
    if isinstance(err, MiniJinjaRaised):
        return f"the template raised an error: {err}"
    message = getattr(err, "message", None)
    if message is None:  # not minijinja's own error: a Python function it called raised
        return f"{type(err).__name__}: {err}"[:500]
    message = re.sub(r" \(in t\d+:\d+\)$", "", str(message))
    line = getattr(err, "line", None)
    if message.startswith("syntax error: "):
        return f"template syntax error on line {line}: {message.removeprefix('syntax error: ')}"[:500]
    return f"{message} (line {line})"[:500] if line else message[:500]


def _describe(err: BaseException, request: dict[str, Any], raised: type[Exception]) -> str:
    """A one-line reason a person can read."""
    import jinja2

    if isinstance(err, RenderTimeout):
        return f"exceeded the time limit ({request['time_s']:g} s)"
    if isinstance(err, MemoryError):
        return f"exceeded the memory limit ({request['memory_bytes'] // 2**20} MB)"
    if isinstance(err, OutputTooLarge):
        return f"output exceeded the limit of {request['output_chars']} characters"
    if isinstance(err, RecursionError):
        return "exceeded the recursion limit"
    if isinstance(err, jinja2.exceptions.SecurityError):
        return f"blocked by the sandbox: {err}"
    if isinstance(err, raised):
        return f"the template raised an error: {err}"
    if isinstance(err, jinja2.exceptions.TemplateSyntaxError):
        return f"template syntax error on line {err.lineno}: {err.message}"
    if isinstance(err, jinja2.exceptions.UndefinedError):
        return f"undefined value: {err}"
    if isinstance(err, jinja2.exceptions.TemplateError):
        return f"template error: {err}"
    return f"{type(err).__name__}: {err}"[:500]


def _timed(fn: Any, time_s: float) -> Any:
    """Run fn() with a wall-clock alarm; RenderTimeout if it runs past time_s."""
    global _armed, _fired
    _fired = False
    signal.setitimer(signal.ITIMER_REAL, time_s)
    _armed = True
    try:
        return fn()
    finally:
        _armed = False
        signal.setitimer(signal.ITIMER_REAL, 0)


def _render(template: Any, context: dict[str, Any], output_chars: int) -> str:
    chunks: list[str] = []
    size = 0
    for chunk in template.generate(**context):
        size += len(chunk)
        if size > output_chars:
            raise OutputTooLarge
        chunks.append(chunk)
    return "".join(chunks)


def _emit(line: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def main() -> None:
    """Serve requests, one JSON line each, until stdin closes: the parent keeps a worker warm between batches."""
    signal.signal(signal.SIGALRM, _on_alarm)
    limited = False
    for raw in sys.stdin:
        if not raw.strip():
            continue
        request = json.loads(raw)
        if not limited:  # the address space once: a worker serves one set of limits (the parent's pool key)
            _set_limits(request["memory_bytes"], None)
            limited = True
        _set_cpu_budget(request["cpu_s"])
        serve(request)
        _emit({"done": True})


def _set_cpu_budget(cpu_s: int) -> None:
    """This request's CPU time on top of what the worker has used (SIGXCPU kills it past that)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = math.ceil(usage.ru_utime + usage.ru_stime)
    try:
        _, hard = resource.getrlimit(resource.RLIMIT_CPU)
        soft = used + cpu_s if hard == resource.RLIM_INFINITY else min(used + cpu_s, hard)
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    except (ValueError, OSError):  # not settable here: the parent's deadline still holds
        pass


def serve(request: dict[str, Any]) -> None:
    """One request: its environments (fresh: the clock is the request's), then one line per job."""
    now = datetime.fromisoformat(request["now"])
    env, raised = _environment(now)
    _mini_compiled.clear()
    _emit({"ready": True})
    compiled: dict[int, Any] = {}
    mini: Any = None
    for index, job in enumerate(request["jobs"]):
        if job.get("engine", "jinja2") == "minijinja":
            if mini is None:
                try:
                    mini = _minijinja_environment(now)
                except ImportError as err:
                    mini = err
            _emit({"job": index, **_run_minijinja(mini, job, request)})
            continue
        try:
            key = job["template"]
            if key not in compiled:
                source = request["templates"][key]
                try:
                    compiled[key] = _timed(partial(env.from_string, source), request["time_s"])
                except BaseException as err:  # noqa: BLE001 - sandbox: whatever compiling raised is the template's error
                    compiled[key] = err  # a template that does not compile fails every job using it
            template = compiled[key]
            if isinstance(template, BaseException):
                raise template
            if job["context"] is None:
                _emit({"job": index, "prompt": ""})
                continue
            render = partial(_render, template, job["context"], request["output_chars"])
            prompt = _timed(render, request["time_s"])
            _emit({"job": index, "prompt": prompt})
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as err:  # noqa: BLE001 - sandbox: any failure of one job is reported, the worker goes on
            _emit({"job": index, "error": _describe(err, request, raised)})


def _run_minijinja(env: Any, job: dict[str, Any], request: dict[str, Any]) -> dict[str, str]:
    """One minijinja job: compile (once per template) and render, as {"prompt"} or {"error"}."""
    if isinstance(env, ImportError):
        return {"error": "minijinja is not installed"}
    name = f"t{job['template']}"
    try:
        if name not in _mini_compiled:
            try:
                _timed(partial(env.add_template, name, request["templates"][job["template"]]), request["time_s"])
                _mini_compiled[name] = None
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as err:  # noqa: BLE001 - sandbox: the template's own error
                _mini_compiled[name] = err
        failed = _mini_compiled[name]
        if failed is not None:
            raise failed
        if job["context"] is None:
            return {"prompt": ""}
        prompt = _timed(partial(env.render_template, name, **job["context"]), request["time_s"])
        if len(prompt) > request["output_chars"]:
            return {"error": f"output exceeded the limit of {request['output_chars']} characters"}
        return {"prompt": prompt}
    except (KeyboardInterrupt, SystemExit):
        raise
    except MemoryError:
        return {"error": f"exceeded the memory limit ({request['memory_bytes'] // 2**20} MB)"}
    except BaseException as err:  # noqa: BLE001 - sandbox: any failure of one job is reported, the worker goes on
        if isinstance(err, RenderTimeout) or _fired:
            return {"error": f"exceeded the time limit ({request['time_s']:g} s)"}
        return {"error": _describe_minijinja(err)}


_mini_compiled: dict[str, BaseException | None] = {}


if __name__ == "__main__":
    main()
