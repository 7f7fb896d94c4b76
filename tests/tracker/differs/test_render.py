"""The sandboxed render worker: transformers' Jinja environment, and limits no template gets past."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tracker.differs import render
from tracker.differs.chat_samples import SAMPLE_CONVERSATIONS
from tracker.differs.render import POOL, Rendered, RenderLimits, RenderRequest, WorkerPool, render_all, template_tokens

from .chat_fixtures import LLAMA3_TOKENS, LLAMA32, LLAMA33, QWEN25, template

NOW = datetime(2025, 1, 15, 9, 30, tzinfo=UTC)
# Small limits keep the tests quick; the worker applies whatever it is given.
FAST = RenderLimits(time_s=0.3)
BENIGN = RenderRequest("still {{ 'fine' }}", {})

# (id, template, variables, expected prompt): behaviours of transformers' environment that change prompts.
PARITY = [
    ("trim_blocks and lstrip_blocks", "  {% if true %}\nyes\n  {% endif %}\nend", {}, "yes\nend"),
    ("tojson keeps <, > and non-ASCII", "{{ x|tojson }}", {"x": {"a": "<b>é"}}, '{"a": "<b>é"}'),
    ("tojson takes indent", "{{ x|tojson(indent=2) }}", {"x": [1]}, "[\n  1\n]"),
    ("loopcontrols",
     "{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}{% endif %}{{ i }}{% endfor %}",
     {}, "02"),
    ("strftime_now reads the given clock", "{{ strftime_now('%d %b %Y') }}", {}, "15 Jan 2025"),
    ("the generation tag renders its body", "a{% generation %}b{% endgeneration %}c", {}, "abc"),
    ("undefined values print as nothing", "[{{ missing }}]", {}, "[]"),
    # transformers' own globals: `dict` is only a call and `fromkeys`, `namespace` keeps `self=` working
    ("dict is only a call and fromkeys", "{{ dict.copy is defined }}|{{ dict(a=1)|tojson }}|{{ dict.fromkeys(['a'], 0)|tojson }}",
     {}, 'False|{"a": 1}|{"a": 0}'),
    ("namespace takes self=", "{% set ns = namespace(self=1) %}{{ ns.self }}", {}, "1"),
    ("tojson's sort_keys and separators", "{{ {'b': 1, 'a': [1, 2]}|tojson(sort_keys=true, separators=(',', ':')) }}",
     {}, '{"a":[1,2],"b":1}'),
]
# Cases transformers renders differently on purpose: its strftime_now reads the real clock.
LIVE_CLOCK = {"strftime_now reads the given clock"}

# (id, template, words the error must contain): each rendered in a batch before a benign template.
HOSTILE = [
    ("nested range loops", "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", ["time limit", "0.3 s"]),
    ("a huge integer power", "{{ 9 ** (9 ** 9) }}", ["time limit"]),
    ("''.__class__", "{{ ''.__class__ }}", ["blocked by the sandbox", "__class__"]),
    ("cycler.__init__.__globals__", "{{ cycler.__init__.__globals__.os.popen('id').read() }}", ["blocked by the sandbox", "__init__"]),
    ("lipsum.__globals__", "{{ lipsum.__globals__['os'] }}", ["blocked by the sandbox", "__globals__"]),
    ("self's private context", "{{ self._TemplateReference__context }}", ["blocked by the sandbox"]),
    ("the attr filter", "{{ ''|attr('__class__') }}", ["blocked by the sandbox", "__class__"]),
    ("mutating a message list", "{{ messages.pop() }}", ["blocked by the sandbox", "pop"]),
    ("a huge string", "{% set n = 10 ** 9 %}{{ 'x' * n }}", ["memory limit", "512 MB"]),
    ("huge output", "{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", ["output exceeded", "65536"]),
    ("a range past the sandbox's maximum", "{{ range(10 ** 6)|length }}", ["Range too big"]),
    ("endless recursion", "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", ["recursion limit"]),
    ("raise_exception", "{{ raise_exception('Conversation roles must alternate') }}", ["the template raised an error: Conversation roles"]),
    ("a syntax error", "{% if %}", ["template syntax error on line 1"]),
    ("an underscore name set on a namespace", "{% set ns = namespace(a=1) %}{% set ns._b = 2 %}{{ ns.a }}",
     ["blocked by the sandbox", "underscore-prefixed"]),
    ("an underscore name given to namespace()", "{% set ns = namespace(_x=1) %}{{ ns }}",
     ["blocked by the sandbox", "underscore-prefixed"]),
]


@pytest.fixture(scope="module")
def parity() -> dict[str, Rendered]:
    """Every parity case, rendered in one batch."""
    results = render_all([RenderRequest(t, v) for _, t, v, _ in PARITY], now=NOW, limits=FAST)
    return {case[0]: result for case, result in zip(PARITY, results, strict=True)}


@pytest.mark.parametrize(("case", "expected"), [(c[0], c[3]) for c in PARITY], ids=[c[0] for c in PARITY])
def test_environment_renders_like_transformers(parity: dict[str, Rendered], case: str, expected: str) -> None:
    """The worker's Jinja environment has the options and helpers transformers' has."""
    assert parity[case] == Rendered(prompt=expected)


@pytest.mark.groundtruth
@pytest.mark.parametrize(("case", "source", "variables", "expected"), [c for c in PARITY if c[0] not in LIVE_CLOCK],
                         ids=[c[0] for c in PARITY if c[0] not in LIVE_CLOCK])
def test_transformers_renders_the_parity_cases_alike(case: str, source: str, variables: dict, expected: str) -> None:
    """Live: transformers' own compiled template (utils/chat_template_utils.py) renders each case as the worker does."""
    from transformers.utils.chat_template_utils import _compile_jinja_template

    assert _compile_jinja_template(source).render(**variables) == expected


@pytest.mark.groundtruth
def test_transformers_refuses_underscore_namespace_names_as_the_worker_does() -> None:
    """Live: the namespace cases of HOSTILE fail in transformers with the same SecurityError."""
    import jinja2
    from transformers.utils.chat_template_utils import _compile_jinja_template

    for case in (c for c in HOSTILE if "namespace" in c[0]):
        with pytest.raises(jinja2.exceptions.SecurityError, match="underscore-prefixed"):
            _compile_jinja_template(case[1]).render()


@pytest.mark.parametrize(("source", "words"), [c[1:] for c in HOSTILE], ids=[c[0] for c in HOSTILE])
def test_hostile_template_gives_a_readable_error_and_the_batch_goes_on(source: str, words: list[str]) -> None:
    """A hostile template fails with a readable reason and the next render in the batch still works."""
    context = {"messages": [{"role": "user", "content": "hi"}]}
    hostile, benign = render_all([RenderRequest(source, context), BENIGN], now=NOW, limits=FAST)
    assert hostile.prompt is None and hostile.error is not None
    assert all(word in hostile.error for word in words), hostile.error
    assert benign == Rendered(prompt="still fine")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (QWEN25, "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
                 "<|im_start|>user\nWrite a haiku about autumn leaves.<|im_end|>\n<|im_start|>assistant\n"),
        (LLAMA33, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
                  "Today Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
                  "Write a haiku about autumn leaves.<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"),
        (LLAMA32, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
                  "Today Date: 15 Jan 2025\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
                  "Write a haiku about autumn leaves.<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"),
    ],
    ids=["qwen2.5", "llama-3.3", "llama-3.2"],
)
def test_real_template_renders_the_documented_prompt(name: str, expected: str) -> None:
    """Real templates render a single user turn to the prompt their model cards document."""
    single = SAMPLE_CONVERSATIONS[1]
    variables = {**LLAMA3_TOKENS, "messages": list(single.messages), "tools": None, "documents": None, "add_generation_prompt": True}
    assert render_all([RenderRequest(template(name), variables)], now=NOW) == [Rendered(prompt=expected)]


def test_worker_that_does_not_start_in_time_fails_every_render() -> None:
    """A worker that misses its start-up deadline is killed and every render says so; nothing hangs."""
    results = render_all([BENIGN, BENIGN], now=NOW, limits=RenderLimits(startup_s=0.001))
    assert [r.prompt for r in results] == [None, None]
    assert all("did not start within 0.001 s" in (r.error or "") for r in results)


def test_worker_that_dies_at_start_up_fails_every_render_once() -> None:
    """A worker that cannot even import jinja2 under its memory limit reports why, for every render."""
    results = render_all([BENIGN, BENIGN], now=NOW, limits=RenderLimits(memory_bytes=8 * 2**20))
    assert [r.prompt for r in results] == [None, None] and results[0] == results[1]
    assert (results[0].error or "").startswith("the render worker exited with code")


def test_no_requests_start_no_worker() -> None:
    """An empty batch renders nothing."""
    assert render_all([], now=NOW, limits=RenderLimits(startup_s=0.001)) == []


def test_template_tokens_keep_code_and_drop_text() -> None:
    """Lexing keeps names, statements, filters and string values, and drops literal text and comments."""
    tokens = template_tokens("Hello self {# __class__ #}{% include 'x.jinja' %}{{ a|attr('__b__') }}")
    assert tokens is not None
    assert [(t.value, sorted(t.kinds)) for t in tokens] == [
        ("include", ["name", "statement"]),
        ("x.jinja", ["string"]),
        ("a", ["name"]),
        ("attr", ["filter", "name"]),
        ("__b__", ["string"]),
    ]
    assert template_tokens("{{ 'unterminated }}") is None


def test_consecutive_batches_reuse_one_warm_worker() -> None:
    """Batches one after another (a revision's render, engine matrix and end-of-turn check; the revisions of
    a poll) are served by one started worker, each with its own clock."""
    POOL.close()
    started = POOL.started
    first = render_all([RenderRequest("{{ strftime_now('%Y') }}", {})], now=NOW, limits=FAST)
    second = render_all([RenderRequest("{{ strftime_now('%Y') }}", {}), BENIGN], now=datetime(2031, 1, 1, tzinfo=UTC), limits=FAST)
    assert first == [Rendered(prompt="2025")] and second == [Rendered(prompt="2031"), Rendered(prompt="still fine")]
    assert POOL.started - started == 1


def test_a_worker_that_hit_a_limit_is_not_reused() -> None:
    """A worker that ran past a limit (killed, or interrupted near it) is closed: the next batch starts afresh."""
    POOL.close()
    started = POOL.started
    hostile = RenderRequest("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", {})
    assert "time limit" in (render_all([hostile, BENIGN], now=NOW, limits=FAST)[0].error or "")
    assert render_all([BENIGN], now=NOW, limits=FAST) == [Rendered(prompt="still fine")]
    assert POOL.started - started == 2


def test_without_warm_workers_each_batch_starts_its_own() -> None:
    """`keep` 0 (the benchmark's baseline) starts a worker per batch and leaves none running."""
    pool = WorkerPool(keep=0)
    POOL.close()
    original = render.POOL
    render.POOL = pool
    try:
        for _ in range(2):
            assert render_all([BENIGN], now=NOW, limits=FAST) == [Rendered(prompt="still fine")]
    finally:
        render.POOL = original
    assert pool.started == 2 and not any(pool._idle.values())


def test_a_warm_worker_killed_while_idle_is_replaced_without_losing_the_batch() -> None:
    """A kept worker that died between batches (killed from outside) costs nothing: the batch is served by a new one."""
    POOL.close()
    assert render_all([BENIGN], now=NOW, limits=FAST) == [Rendered(prompt="still fine")]
    [idle] = [w for workers in POOL._idle.values() for w in workers]
    idle.proc.kill()
    idle.proc.wait()
    started = POOL.started
    assert render_all([BENIGN], now=NOW, limits=FAST) == [Rendered(prompt="still fine")]
    assert POOL.started - started == 1
