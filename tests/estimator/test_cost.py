"""Cost per run: FLOPs per sample against counts written from the papers' formulas and the configs alone, the
roofline per card, the card table and its overrides, and bad input."""

from __future__ import annotations

import math

import pytest

from estimator import EstimateError, estimate
from estimator import cost as costing
from estimator.cards import PRICED_CARDS, parse_override, with_overrides
from estimator.memory import CARDS
from tests.estimator.estimator_configs import load_config

LLAMA = "llama/Llama-3.1-8B.json"
CLIP = "clip/CLIP-ViT-B-32-laion2B-s34B-b79K.json"
MIXTRAL = "mixtral/Mixtral-8x7B-v0.1.json"


def _cost(path_or_config, **kw):
    config = load_config(path_or_config) if isinstance(path_or_config, str) else path_or_config
    return estimate(config, cost=costing.Workload(**kw)).cost


def _card(rows: list[dict], name: str) -> dict:
    return next(r for r in rows if r["card"] == name)


def _decoder_count(c: dict, seq: int, expert_mlp: int | None = None) -> int:
    """Training FLOPs per sample of a Llama-shaped decoder by PaLM's count: 6 x N x tokens over the weights a
    token multiplies (embeddings excluded, the LM head included) + 12 x layers x tokens^2 x query width."""
    h, layers, heads = c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"]
    d = c.get("head_dim") or h // heads
    kv = c.get("num_key_value_heads", heads)
    mlp = expert_mlp if expert_mlp is not None else 3 * h * c["intermediate_size"]
    per_layer = h * heads * d + 2 * h * kv * d + heads * d * h + mlp
    n = layers * per_layer + c["vocab_size"] * h
    return 6 * n * seq + 12 * layers * seq * seq * heads * d


def test_llama_flops_match_palm_count_and_6n_tokens() -> None:
    """Llama-3.1-8B at 2048 tokens: FLOPs per sample equal PaLM's 6N + attention count, and 6 x all parameters
    x tokens (embeddings included, attention left out) lands within 1%."""
    config = load_config(LLAMA)
    result = estimate(config, cost=costing.Workload())
    got = result.cost["train"]["flops_per_sample"]
    assert got == pytest.approx(_decoder_count(config, 2048), rel=1e-6)
    assert got == pytest.approx(6 * result.total * 2048, rel=0.01)


def test_mixtral_counts_only_the_routed_experts() -> None:
    """Mixtral-8x7B: two of eight experts a token, plus the router: far below 6 x its 46.7B parameters x tokens."""
    config = load_config(MIXTRAL)
    h, inter = config["hidden_size"], config["intermediate_size"]
    active = config["num_experts_per_tok"] * 3 * h * inter + h * config["num_local_experts"]
    result = estimate(config, cost=costing.Workload())
    got = result.cost["train"]["flops_per_sample"]
    assert got == pytest.approx(_decoder_count(config, 2048, expert_mlp=active), rel=1e-6)
    assert got < 0.35 * 6 * result.total * 2048


def test_clip_counts_both_towers_and_the_patch_convolution() -> None:
    """CLIP ViT-B/32: the vision tower over 50 tokens, the text tower over 77, the patch convolution over 49
    patches and the two projections on the pooled token, each written out from the config."""
    config = load_config(CLIP)
    v, t = config["vision_config"], config["text_config"]
    hv, ht = v["hidden_size"], t["hidden_size"]
    patches = (v["image_size"] // v["patch_size"]) ** 2

    def tower(h: int, inter: int, layers: int, tokens: int) -> int:
        return layers * (2 * (4 * h * h + 2 * h * inter) * tokens + 4 * tokens * tokens * h)

    forward = (tower(hv, v["intermediate_size"], v["num_hidden_layers"], patches + 1)
               + tower(ht, t["intermediate_size"], t["num_hidden_layers"], t["max_position_embeddings"])
               + 2 * 3 * v["patch_size"] ** 2 * hv * patches + 2 * (hv + ht) * config["projection_dim"])
    flops = _cost(CLIP)["train"]
    assert flops["forward_flops_per_sample"] == pytest.approx(forward, rel=1e-6)
    assert flops["flops_per_sample"] == 3 * flops["forward_flops_per_sample"]
    text_only = tower(ht, t["intermediate_size"], t["num_hidden_layers"], t["max_position_embeddings"])
    assert text_only > 0.35 * forward  # the seed page's count would have left this tower out


def test_whisper_counts_the_encoder_the_convolutions_and_cross_attention_over_the_audio() -> None:
    """whisper-tiny: the encoder over 1,500 frames behind its two convolutions, the decoder over 448 tokens whose
    cross-attention keys and values (and scores) read the 1,500 encoder frames, and the tied head."""
    c = load_config("whisper/whisper-tiny.json")
    d, ffn, mels, vocab = c["d_model"], c["encoder_ffn_dim"], c["num_mel_bins"], c["vocab_size"]
    frames, tokens = c["max_source_positions"], c["max_target_positions"]
    encoder = c["encoder_layers"] * (2 * (4 * d * d + 2 * d * ffn) * frames + 4 * frames * frames * d)
    convs = 2 * mels * d * 3 * 2 * frames + 2 * d * d * 3 * frames
    decoder = c["decoder_layers"] * (2 * (6 * d * d + 2 * d * c["decoder_ffn_dim"]) * tokens + 2 * 2 * d * d * frames
                                     + 4 * tokens * tokens * d + 4 * tokens * frames * d)
    forward = encoder + convs + decoder + 2 * vocab * d * tokens
    assert _cost("whisper/whisper-tiny.json")["train"]["forward_flops_per_sample"] == pytest.approx(forward, rel=1e-6)


def test_lora_backward_is_smaller() -> None:
    """LoRA: the frozen base's backward computes activation gradients only: about 2/3 of a full fine-tune."""
    train = _cost(LLAMA)["train"]
    assert 0.66 < train["lora_flops_per_sample"] / train["flops_per_sample"] < 0.68


def test_seed_clip_workload_on_a10g() -> None:
    """The seed's run (10 epochs, batch 32, 50,000 samples) on an A10G: compute-bound, 15,630 optimizer steps,
    each 32 samples at 40% of the A10G's 70 dense bf16 TFLOPS plus AdamW's traffic at 65% of 600 GB/s: about $0.28
    against the page's $0.21 (its utilisation, peak and FLOP count are not published)."""
    result = estimate(load_config(CLIP), cost=costing.Workload())
    a10g = _card(result.cost["train"]["cards"], "A10G 24GB")
    assert result.cost["workload"]["optimizer_steps"] == 10 * math.ceil(50_000 / 32) == 15_630
    step = (32 * result.cost["train"]["flops_per_sample"] / (70e12 * costing.TRAIN_UTILISATION)
            + costing.FULL_STEP_BYTES * result.total / (600e9 * costing.BANDWIDTH_UTILISATION))
    assert a10g["bound"] == "compute" and a10g["micro_batch"] == 32 and a10g["mode"] == "full_finetune"
    assert a10g["hours"] == pytest.approx(15_630 * step / 3600, rel=1e-9)
    assert a10g["usd"] == pytest.approx(a10g["hours"] * 1.006) and 0.25 < a10g["usd"] < 0.29


def test_the_batch_accumulates_where_it_does_not_fit_and_nothing_where_batch_1_does_not() -> None:
    """Llama-3.1-8B: a full fine-tune fits no card at batch 1 (no hours, said why); LoRA fits an H100 in
    micro-batches and takes longer than on no card at all."""
    rows = _cost(LLAMA)["train"]["cards"]
    h100 = _card(rows, "H100 80GB")
    assert h100["hours"] is None and h100["usd"] is None and "does not fit at batch 1" in h100["note"]
    lora = h100["lora"]
    assert lora["hours"] > 0 and lora["micro_batch"] < 32 and lora["usd"] == pytest.approx(lora["hours"] * 6.88)


def test_serving_tokens_per_second_and_price_per_million() -> None:
    """Llama-3.1-8B serving: none on a T4 (weights do not fit), decode bandwidth-bound elsewhere, faster on an
    H100 than an A10G, and USD per million output tokens is the hourly price over the tokens an hour."""
    serve = _cost(LLAMA)["serve"]
    t4, a10g, h100 = (_card(serve["cards"], n) for n in ("T4 16GB", "A10G 24GB", "H100 80GB"))
    assert t4["tokens_per_s"] is None and t4["note"] == "the weights do not fit"
    assert h100["tokens_per_s"] > 5 * a10g["tokens_per_s"] > 0
    assert a10g["decode_bound"] == "memory" and 1 <= a10g["concurrency"] <= 256
    assert a10g["usd_per_mtok"] == pytest.approx(1.006 / 3600 / a10g["tokens_per_s"] * 1e6)


def test_an_encoder_is_not_served() -> None:
    """CLIP generates no tokens: its serving rows say so instead of a throughput."""
    serve = _cost(CLIP)["serve"]
    assert "generates no tokens" in serve["unknown"]
    assert all(r["tokens_per_s"] is None for r in serve["cards"])


def test_card_table_matches_memory_cards_and_names_its_sources() -> None:
    """Every memory card is priced on the same memory, and every figure names a source and a date."""
    assert list(PRICED_CARDS) == list(CARDS)
    for name, card in PRICED_CARDS.items():
        assert card.memory_bytes == CARDS[name]
        assert {"memory_bytes", "peak_tflops", "bandwidth_gb_s", "usd_per_hour"} <= set(card.sources)
        assert all("20" in card.sources[k] for k in ("memory_bytes", "peak_tflops", "bandwidth_gb_s")) and card.bandwidth_gb_s > 0
        assert card.usd_per_hour is None or "20" in card.sources["usd_per_hour"]
    assert PRICED_CARDS["T4 16GB"].peak_flops("bf16") == (65e12, "fp16")  # no bf16 on a T4: autocast runs fp16


def test_a_card_without_a_price_keeps_its_other_figures() -> None:
    """A card whose price is removed: hours and tokens/s stay, USD is None with "no price" said."""
    table = with_overrides(["A10G 24GB:usd_per_hour=none"])
    result = estimate(load_config(LLAMA), cost=costing.Workload(), cards=table)
    train = _card(result.cost["train"]["cards"], "A10G 24GB")
    serve = _card(result.cost["serve"]["cards"], "A10G 24GB")
    assert train["lora"]["hours"] > 0 and train["lora"]["usd"] is None
    assert serve["tokens_per_s"] > 0 and serve["usd_per_mtok"] is None and serve["note"] == "no price"
    assert any("no price for" in n and "A10G 24GB" in n for n in result.cost["notes"])


def test_overrides_replace_a_figure_and_its_source() -> None:
    """A configured price and peak replace the table's, and the source says the configuration."""
    table = with_overrides(["H200 141GB:usd_per_hour=3.5", "L4 24GB:bf16_tflops=100"])
    assert table["H200 141GB"].usd_per_hour == 3.5 and "configuration" in table["H200 141GB"].sources["usd_per_hour"]
    assert table["L4 24GB"].tflops["bf16"] == 100 and PRICED_CARDS["L4 24GB"].tflops["bf16"] == 121


@pytest.mark.parametrize("entry, message", [
    ("A10G 24GB usd_per_hour=1", "is not CARD:field=value"),
    ("B200 192GB:usd_per_hour=5", "unknown card"),
    ("A10G 24GB:price=1", "unknown field"),
    ("A10G 24GB:usd_per_hour=cheap", "is not a number"),
    ("A10G 24GB:usd_per_hour=-1", "must be above 0"),
    ("A10G 24GB:bf16_tflops=1e9", "must be above 0"),
])
def test_bad_overrides_say_what_is_wrong(entry: str, message: str) -> None:
    """A malformed card override names itself and what is wrong with it."""
    with pytest.raises(EstimateError, match=message):
        parse_override(entry)


def _llama(**changes) -> dict:
    return {**load_config(LLAMA), **changes}


def test_a_trillion_parameters_get_a_message_not_a_time() -> None:
    """10^12 parameters: no card holds batch 1, so every training row says so; FLOPs are still counted."""
    result = estimate(_llama(hidden_size=65536, intermediate_size=262144, num_hidden_layers=17,
                             num_attention_heads=512, num_key_value_heads=64), cost=costing.Workload())
    assert result.total > 10**12
    train = result.cost["train"]
    assert train["flops_per_sample"] > 6 * 10**12 * 2048
    assert all(r["hours"] is None and "does not fit" in r["note"] for r in train["cards"])
    assert all(r["tokens_per_s"] is None for r in result.cost["serve"]["cards"])


@pytest.mark.parametrize("changes, key", [
    ({"num_attention_heads": 0}, "num_attention_heads"),
    ({"hidden_size": -4096}, "hidden_size"),
    ({"num_hidden_layers": -1}, "num_hidden_layers"),
])
def test_absurd_dimensions_are_refused_by_name(changes: dict, key: str) -> None:
    """Zero heads or negative dimensions: the estimate (cost included) is refused, naming the key."""
    with pytest.raises(EstimateError, match=key):
        estimate(_llama(**changes), cost=costing.Workload())


@pytest.mark.parametrize("field", ["epochs", "batch", "samples", "prompt_tokens", "output_tokens"])
@pytest.mark.parametrize("value", [0, -3, True, 1.5, 10**13])
def test_a_bad_workload_is_refused(field: str, value: object) -> None:
    """Each workload figure must be a positive integer of sane size."""
    with pytest.raises(EstimateError, match=f"cost.{field}"):
        costing.Workload(**{field: value})


def test_cost_is_only_there_when_asked() -> None:
    """Without a workload the estimate's JSON has no cost section (stored estimates keep their shape)."""
    assert "cost" not in estimate(load_config(CLIP)).to_dict()
    assert estimate(load_config(CLIP), cost=costing.Workload()).to_dict()["cost"]["estimate"] is True


def test_an_fp8_checkpoint_is_served_on_fp8_matmuls_where_the_card_has_them() -> None:
    """An fp8-quantized Llama: fp8 peak on an H100 and an L4, bf16 on an A100 (no fp8 there), and its smaller
    weights serve more tokens a second than the bf16 checkpoint's on the same card."""
    fp8 = _cost(_llama(quantization_config={"quant_method": "fp8"}))["serve"]["cards"]
    bf16 = _cost(LLAMA)["serve"]["cards"]
    assert [_card(fp8, c)["dtype"] for c in ("H100 80GB", "L4 24GB", "A100 80GB")] == ["fp8", "fp8", "bf16"]
    assert _card(bf16, "H100 80GB")["dtype"] == "bf16"
    assert _card(fp8, "A100 80GB")["tokens_per_s"] > _card(bf16, "A100 80GB")["tokens_per_s"]


def _strip_priced(cost: dict) -> dict:
    return {k: v for k, v in cost.items() if k != "priced"}


def test_repricing_at_the_stored_prices_changes_nothing() -> None:
    """Repriced with the table it was computed on, a cost section is what the estimator gave (the money is a pure
    function of the stored hours and tokens/s and the price): Llama (every card, one without a price) and CLIP."""
    table = with_overrides(["H200 141GB:usd_per_hour=none"])
    for path in (LLAMA, CLIP):
        stored = estimate(load_config(path), cost=costing.Workload(), cards=table).cost
        again = costing.reprice(stored, table, on="2026-12-05")
        assert _strip_priced(again) == stored
        assert again["priced"]["changed"] == [] and again["priced"]["on"] == "2026-12-05"


def test_a_configured_price_reprices_stored_dollars_and_says_so() -> None:
    """A stored Qwen2.5-0.5B estimate at the table's prices, shown after [cost] cards sets the A10G at $2 and removes the
    H100's price: A10G dollars are hours x 2 (LoRA too) and $2 / tokens/s; the H100 keeps its hours and says no
    price; the other cards are untouched; the prices used and the cards that changed are named."""
    stored = _cost("qwen2/Qwen2.5-0.5B.json")
    table = with_overrides(["A10G 24GB:usd_per_hour=2", "H100 80GB:usd_per_hour=none"])
    shown = costing.reprice(stored, table, on="2026-12-05")
    a10g, was = _card(shown["train"]["cards"], "A10G 24GB"), _card(stored["train"]["cards"], "A10G 24GB")
    assert a10g["hours"] == was["hours"] and a10g["usd"] == pytest.approx(was["hours"] * 2)
    assert a10g["lora"]["usd"] == pytest.approx(was["lora"]["hours"] * 2)
    serve = _card(shown["serve"]["cards"], "A10G 24GB")
    assert serve["usd_per_mtok"] == pytest.approx(2 / 3600 / serve["tokens_per_s"] * 1e6)
    h100 = _card(shown["train"]["cards"], "H100 80GB")
    assert h100["usd"] is None and h100["hours"] == _card(stored["train"]["cards"], "H100 80GB")["hours"]
    assert "no price" in h100["note"] and _card(shown["serve"]["cards"], "H100 80GB")["usd_per_mtok"] is None
    assert _card(shown["train"]["cards"], "L4 24GB") == _card(stored["train"]["cards"], "L4 24GB")
    assert shown["cards"]["A10G 24GB"]["usd_per_hour"] == 2
    assert "configuration" in shown["cards"]["A10G 24GB"]["sources"]["usd_per_hour"]
    assert {c["card"] for c in shown["priced"]["changed"]} == {"A10G 24GB", "H100 80GB"}
    assert shown["priced"]["prices"]["L4 24GB"]["usd_per_hour"] == PRICED_CARDS["L4 24GB"].usd_per_hour
    assert any("today's card prices" in n and "A10G 24GB" in n for n in shown["notes"])
    assert any(n.startswith("no price for H100 80GB") for n in shown["notes"])
    assert stored["cards"]["A10G 24GB"]["usd_per_hour"] == PRICED_CARDS["A10G 24GB"].usd_per_hour  # not mutated


@pytest.mark.parametrize("stored", [None, {}, [], "cost", {"cards": "x", "train": {"cards": [None, {"card": 3}]}},
                                    {"cards": {"A10G 24GB": {}}, "train": {"cards": [{"card": "A10G 24GB",
                                                                                       "hours": "soon"}]}}])
def test_repricing_a_stored_section_of_any_shape_never_raises(stored) -> None:
    """Stored JSON of an odd shape (older rows, hand-edited ones): what cannot be read is left as it is."""
    shown = costing.reprice(stored)
    assert shown is None or isinstance(shown, dict)
