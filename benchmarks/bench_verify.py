"""The structure verifier's time per revision: `estimator.lints.lint` on real revisions' inputs, and the adapter that
reads them off a snapshot.

Run: python -m benchmarks run verify   (size: repeats per case, default 200; the median is kept)

Cases, each a revision as the pipeline hands the verifier one:
- Llama-3.1-8B-Instruct (the replay's real commit): config, its 291-tensor safetensors manifest (4 shards and the
  index), generation config, a 128,256-id tokenizer's facts and the file list;
- every real config of tests/fixtures/estimator/configs (44, no manifest): the median and the slowest;
- a Qwen3-235B-A22B-shaped checkpoint with every expert apart (36,945 tensors): the manifest's size bound;
- the whole adapter on MiniLM's replay commit (`verify_snapshot` on a fresh snapshot): with a tokenizer the process
  has not seen (tokenizer.json parsed, 30,522 ids; the pipeline shares that parse with the tokenizer differ through
  the snapshot's JSON cache), and with one it has (its facts kept by the files' blobs).
The goal (issue 39): lints per revision under 5 ms.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.declare import Benchmark, Figure, detail, run_alone
from estimator.lints import LintInputs, TokenizerFacts, lint

GOAL_MS = 5.0
MARGIN = 0.5  # medians of repeats on a shared 2-core machine
FIXTURES = ROOT / "tests" / "fixtures" / "estimator" / "configs"
BENCHMARK = Benchmark(
    name="verify",
    about="The structure verifier per revision: lints on real inputs, and reading them off a snapshot",
    tags=("quick", "estimator"),
    size="repeats per case (default 200; the median is kept)",
    small=20,
    timeout_s=300,
    figures=(
        Figure("lints, Llama-3.1-8B-Instruct revision (291 tensors, tokenizer, index)", "ms", goal=GOAL_MS, margin=MARGIN),
        Figure("lints, real configs without weights, median of 44", "ms", goal=GOAL_MS, margin=MARGIN),
        Figure("lints, real configs without weights, slowest", "ms"),
        Figure("lints, Qwen3-235B-A22B-shaped (36,945 tensors)", "ms",
               note="every expert a tensor of its own: the size bound, above the 5 ms of a usual revision (no goal; "
                    "the estimator takes ~110 ms on it)"),
        Figure("verify_snapshot on MiniLM's revision, tokenizer.json parse included", "ms",
               note="a tokenizer not seen before by the process; the parse is shared with the tokenizer differ"),
        Figure("verify_snapshot on MiniLM's revision, tokenizer seen before", "ms", goal=GOAL_MS, margin=MARGIN,
               note="its facts kept by the tokenizer files' blobs (a revision read back from the database)"),
    ),
)


def median_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def llama_inputs() -> LintInputs:
    from tests.support.replay_snapshots import replay_snapshots
    from tracker.pipeline.verify import lint_inputs

    *_, (_, snapshot) = replay_snapshots("meta-llama/Llama-3.1-8B-Instruct")
    inputs = lint_inputs(snapshot)
    facts = TokenizerFacts(size=128_256, largest=("<|reserved_special_token_247|>", 128_255),
                           special={"bos_token": ("<|begin_of_text|>", 128000), "eos_token": ("<|eot_id|>", 128009)},
                           model_max_length=131_072)
    return LintInputs(inputs.config, inputs.manifest, facts, inputs.generation_config, None, inputs.files,
                      inputs.indexes, inputs.weights_complete)


def qwen3_moe_inputs() -> LintInputs:
    """A Qwen3-235B-A22B-shaped config and manifest: 94 layers of 128 experts, each expert's three projections apart."""
    h, inter, experts, layers, heads, kv, d, vocab = 4096, 1536, 128, 94, 64, 4, 128, 151_936
    config = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": h,
              "num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": d,
              "vocab_size": vocab, "moe_intermediate_size": inter, "num_experts": experts, "torch_dtype": "bfloat16",
              "max_position_embeddings": 40960, "tie_word_embeddings": False, "transformers_version": "4.51.0"}
    manifest = {"model.embed_tokens.weight": ("BF16", (vocab, h)), "lm_head.weight": ("BF16", (vocab, h)),
                "model.norm.weight": ("BF16", (h,))}
    for i in range(layers):
        p = f"model.layers.{i}."
        manifest |= {p + "self_attn.q_proj.weight": ("BF16", (heads * d, h)),
                     p + "self_attn.k_proj.weight": ("BF16", (kv * d, h)),
                     p + "self_attn.v_proj.weight": ("BF16", (kv * d, h)),
                     p + "self_attn.o_proj.weight": ("BF16", (h, heads * d)),
                     p + "self_attn.q_norm.weight": ("BF16", (d,)), p + "self_attn.k_norm.weight": ("BF16", (d,)),
                     p + "input_layernorm.weight": ("BF16", (h,)), p + "post_attention_layernorm.weight": ("BF16", (h,)),
                     p + "mlp.gate.weight": ("BF16", (experts, h))}
        for e in range(experts):
            q = f"{p}mlp.experts.{e}."
            manifest |= {q + "gate_proj.weight": ("BF16", (inter, h)), q + "up_proj.weight": ("BF16", (inter, h)),
                         q + "down_proj.weight": ("BF16", (h, inter))}
    return LintInputs(config, manifest, files=("config.json", "model.safetensors"))


def measure(size: int | None = None) -> dict[str, float]:
    from tests.support.replay_snapshots import replay_history, snapshot_of
    from tracker.pipeline.verify import _facts as kept_facts
    from tracker.pipeline.verify import verify_snapshot

    repeats = size or 200
    llama = llama_inputs()
    assert [f.id for f in lint(llama)] == ["rope-scaling-version"]
    configs = [LintInputs(json.loads(p.read_text()), files=("config.json", "model.safetensors"))
               for p in sorted(FIXTURES.rglob("*.json"))]
    per_config = [median_ms(lambda c=c: lint(c), max(repeats // 10, 5)) for c in configs]
    moe = qwen3_moe_inputs()
    assert lint(moe) == []
    history = replay_history("sentence-transformers/all-MiniLM-L6-v2")
    sha = next(c.sha for c in history.commits if c.dirname == "0005-add-query-and-doc-special-tokens")
    assert [f.id for f in verify_snapshot(snapshot_of(history, sha))] == ["vocab-size-tokenizer"]
    def cold() -> None:
        kept_facts.clear()
        verify_snapshot(snapshot_of(history, sha))

    adapter = median_ms(cold, max(repeats // 10, 5))
    warm = median_ms(lambda: verify_snapshot(snapshot_of(history, sha)), max(repeats // 10, 5))
    building = median_ms(lambda: snapshot_of(history, sha), max(repeats // 10, 5))
    detail(f"{len(configs)} configs; Llama manifest {len(llama.manifest or {})} tensors; MoE {len(moe.manifest or {}):,} "
           f"tensors; MiniLM snapshot built in {building:.2f} ms (not counted)")
    return {
        BENCHMARK.figures[0].name: median_ms(lambda: lint(llama), repeats),
        BENCHMARK.figures[1].name: statistics.median(per_config),
        BENCHMARK.figures[2].name: max(per_config),
        BENCHMARK.figures[3].name: median_ms(lambda: lint(moe), max(repeats // 20, 3)),
        BENCHMARK.figures[4].name: adapter - building,
        BENCHMARK.figures[5].name: warm - building,
    }


if __name__ == "__main__":
    run_alone(BENCHMARK, measure)
