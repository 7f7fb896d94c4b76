"""Child side of `tracker.differs.tokenizer_behaviour`: tokenizes the corpus with one tokenizer, under limits.

Started as `python -I tokenize_worker.py` (isolated: only the standard library, `tokenizers` and
`sentencepiece` are imported, never transformers), with an address-space and CPU limit set before the
tokenizer file is read; the parent also kills it past a wall-clock deadline. Protocol, all JSON:

  stdin   {"file": path, "format": "tokenizer.json" | "tokenizer.model", "special": {"bos_token": str, ...},
           "samples": [{"id", "category", "text"} | {"id", "category", "turns": [[role, text], ...]}],
           "memory_bytes": int, "cpu_s": int}
  stdout  one line: {"backend", "version", "special": {"bos": {"token", "id"}, ...}, "added_ids": [...],
           "chat_format": str, "samples": {id: {"ids": [...], "roundtrip": bool, "text"?: str}}}
          or {"error": str}

Sample ids are the text's own tokens (no special tokens added); what the post-processor adds around a
text is reported once, as `added_ids`. Chat samples are written in the tokenizer's own turn markers (the
first format below whose tokens it knows), so `text` is given back for them.
"""

from __future__ import annotations

import json
import resource
import sys
from typing import Any

# name, turn start (with {role}), turn end, the tokens that must exist for the format to be used
CHAT_FORMATS = (
    ("llama3", "<|start_header_id|>{role}<|end_header_id|>\n\n", "<|eot_id|>", ("<|start_header_id|>", "<|eot_id|>")),
    ("chatml", "<|im_start|>{role}\n", "<|im_end|>\n", ("<|im_start|>", "<|im_end|>")),
    ("gemma", "<start_of_turn>{role}\n", "<end_of_turn>\n", ("<start_of_turn>", "<end_of_turn>")),
    ("phi3", "<|{role}|>\n", "<|end|>\n", ("<|user|>", "<|assistant|>", "<|end|>")),
    ("mistral", "[INST] ", " [/INST]", ("[INST]", "[/INST]")),
)
SPECIAL_NAMES = ("bos", "eos", "pad", "unk")


def _set_limits(memory_bytes: int, cpu_s: int) -> None:
    for which, value in ((resource.RLIMIT_AS, memory_bytes), (resource.RLIMIT_CPU, cpu_s)):
        try:
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):  # not lowerable here: the parent's deadline still holds
            pass


class _HfTokenizer:
    backend = "tokenizers"

    def __init__(self, path: str) -> None:
        import tokenizers

        self.version = tokenizers.__version__
        self.tok = tokenizers.Tokenizer.from_file(path)
        self.tok.no_padding()  # padding and truncation are settings, not tokenization: the differ reports them
        self.tok.no_truncation()

    def encode(self, text: str) -> list[int]:
        return self.tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int]) -> str:
        return self.tok.decode(ids, skip_special_tokens=False)

    def token_id(self, token: str) -> int | None:
        return self.tok.token_to_id(token)

    def added_ids(self) -> list[int]:
        return self.tok.encode("", add_special_tokens=True).ids

    def default_special(self) -> dict[str, str | None]:
        return {}


class _SentencePiece:
    backend = "sentencepiece"

    def __init__(self, path: str) -> None:
        import sentencepiece

        self.version = sentencepiece.__version__
        self.sp = sentencepiece.SentencePieceProcessor(model_file=path)

    def encode(self, text: str) -> list[int]:
        return list(self.sp.encode(text))

    def decode(self, ids: list[int]) -> str:
        return self.sp.decode(ids)

    def token_id(self, token: str) -> int | None:
        i = self.sp.piece_to_id(token)
        return None if i == self.sp.unk_id() and token != self.sp.id_to_piece(i) else int(i)

    def added_ids(self) -> list[int]:
        return []

    def default_special(self) -> dict[str, str | None]:
        ids = {"bos": self.sp.bos_id(), "eos": self.sp.eos_id(), "pad": self.sp.pad_id(), "unk": self.sp.unk_id()}
        return {k: (self.sp.id_to_piece(i) if i >= 0 else None) for k, i in ids.items()}


def _special(tok: Any, names: dict[str, str]) -> dict[str, dict[str, Any]]:
    defaults = tok.default_special()
    out = {}
    for name in SPECIAL_NAMES:
        token = names.get(f"{name}_token") or defaults.get(name)
        out[name] = {"token": token, "id": tok.token_id(token) if token else None}
    return out


def _chat_format(tok: Any, special: dict[str, dict[str, Any]]) -> tuple[str, str, str]:
    for name, start, end, required in CHAT_FORMATS:
        if all(tok.token_id(t) is not None for t in required):
            return name, start, end
    eos = special["eos"]["token"] or ""
    return "plain", "{role}: ", eos + "\n"


def _chat_text(turns: list[list[str]], start: str, end: str, bos: str) -> str:
    return bos + "".join(start.format(role=role) + text + end for role, text in turns)


def run(request: dict[str, Any]) -> dict[str, Any]:
    tok = _HfTokenizer(request["file"]) if request["format"] == "tokenizer.json" else _SentencePiece(request["file"])
    special = _special(tok, request.get("special") or {})
    chat_format, start, end = _chat_format(tok, special)
    bos = special["bos"]["token"] or ""
    samples = {}
    for sample in request["samples"]:
        text = sample.get("text")
        entry: dict[str, Any] = {}
        if text is None:
            text = entry["text"] = _chat_text(sample["turns"], start, end, bos)
        ids = tok.encode(text)
        entry["ids"] = ids
        entry["roundtrip"] = tok.decode(ids) == text
        samples[sample["id"]] = entry
    return {"backend": tok.backend, "version": tok.version, "special": special, "added_ids": tok.added_ids(),
            "chat_format": chat_format, "samples": samples}


def main() -> None:
    request = json.load(sys.stdin)
    _set_limits(request["memory_bytes"], request["cpu_s"])
    try:
        result = run(request)
    except MemoryError:
        result = {"error": f"exceeded the memory limit ({request['memory_bytes'] // 2**20} MB)"}
    except BaseException as err:  # noqa: BLE001 - sandbox: whatever loading or encoding raised is the tokenizer's error
        result = {"error": f"{type(err).__name__}: {err}"[:500]}
    sys.stdout.write(json.dumps(result, ensure_ascii=False) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
