"""The judgement on what a pickle imports: safe, unknown or dangerous, under a versioned set of rules.

Built-in lists (bump RULES_VERSION whenever they change) merged with an operator's TOML rules file:

    dangerous = ["mypackage.loader", "somemodule.*"]
    safe = ["mymodels.Net"]

A dangerous entry matches its module or callable and everything under it (`os` matches `os.system` and
`os.path.join`); a safe entry matches exactly that callable; `*` is a wildcard (`torch._utils._rebuild_*`).
Dangerous always wins: a safe entry only lifts an import out of `unknown`. A dotted name reaching
through attributes (`torch` + `_utils.os.system`, `x` + `__builtins__.eval`) is judged on every tail of
its path, so a safe module cannot be used to reach a dangerous one. A file's verdict is the worst of
its imports; `unreadable` when nothing could be judged.
"""

from __future__ import annotations

import hashlib
import tomllib
from _compat_pickle import IMPORT_MAPPING, NAME_MAPPING  # the stdlib's own table: what pickle maps Python 2 names to
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

RULES_VERSION = 2  # 2: training arguments (TRAINING_DATACLASSES, TRAINING_ENUMS) as a named class
SAFE, UNKNOWN, DANGEROUS, UNREADABLE = "safe", "unknown", "dangerous", "unreadable"
ORDER = {UNREADABLE: -1, SAFE: 0, UNKNOWN: 1, DANGEROUS: 2}
MAX_RULES_FILE = 1 << 20

_TORCH_STORAGES = (
    "Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte", "Bool", "ComplexFloat",
    "ComplexDouble", "QInt8", "QUInt8", "QInt32", "QUInt4x2", "QUInt2x4", "Untyped",
)  # fmt: skip
_TORCH_DTYPES = (
    "float32", "float", "float64", "double", "float16", "half", "bfloat16", "int64", "long", "int32", "int",
    "int16", "short", "int8", "uint8", "uint16", "uint32", "uint64", "bool", "float8_e4m3fn", "float8_e5m2",
    "float8_e4m3fnuz", "float8_e5m2fnuz", "complex64", "complex128", "qint8", "quint8", "qint32", "quint4x2",
)  # fmt: skip

BUILTIN_SAFE: tuple[str, ...] = (
    "torch._utils._rebuild_tensor", "torch._utils._rebuild_tensor_v2", "torch._utils._rebuild_tensor_v3",
    "torch._utils._rebuild_parameter", "torch._utils._rebuild_parameter_with_state",
    "torch._utils._rebuild_qtensor", "torch._utils._rebuild_sparse_tensor", "torch._utils._rebuild_nested_tensor",
    "torch._utils._rebuild_meta_tensor_no_storage", "torch._utils._rebuild_wrapper_subclass",
    "torch._utils._rebuild_device_tensor_from_numpy", "torch._tensor._rebuild_from_type_v2",
    "torch._utils._rebuild_from_type_v2", "torch.Size", "torch.device", "torch.storage.UntypedStorage",
    "torch.storage._load_from_bytes", "torch.nn.parameter.Parameter", "torch.Tensor",
    "torch.per_tensor_affine", "torch.per_channel_affine", "torch.contiguous_format", "torch.channels_last",
    "torch.preserve_format", "collections.OrderedDict", "collections.defaultdict", "builtins.set",
    "builtins.frozenset", "builtins.slice", "builtins.complex", "builtins.bytearray", "builtins.range",
    "__builtin__.set", "_codecs.encode", "numpy.core.multiarray._reconstruct", "numpy._core.multiarray._reconstruct",
    "numpy.core.multiarray.scalar", "numpy._core.multiarray.scalar", "numpy.ndarray", "numpy.dtype",
    "argparse.Namespace",
    *(f"torch.{kind}Storage" for kind in _TORCH_STORAGES),
    *(f"torch.{dtype}" for dtype in _TORCH_DTYPES),
)  # fmt: skip

BUILTIN_DANGEROUS: tuple[str, ...] = (
    "os", "posix", "nt", "subprocess", "runpy", "socket", "importlib", "pickle", "_pickle", "cPickle", "dill",
    "marshal", "ctypes", "_ctypes", "shutil", "sys", "pty", "webbrowser", "code", "codeop", "pdb", "bdb",
    "timeit", "cProfile", "profile", "trace", "pip", "_posixsubprocess", "multiprocessing", "signal",
    "tempfile", "io", "_io", "ssl", "http", "urllib", "ftplib", "smtplib", "telnetlib",
    "requests", "httpx", "aiohttp", "venv", "ensurepip", "distutils", "setuptools", "pkg_resources",
    "site", "zipimport", "imp", "linecache", "pydoc", "inspect", "gc", "atexit", "threading", "_thread",
    "asyncio", "pkgutil", "idlelib", "commands", "doctest", "lib2to3", "_osx_support", "_aix_support",
    "uuid._get_command_stdout", "platform._syscmd_file", "platform.popen", "test.support", "types.CodeType", "types.FunctionType",
    "types.MethodType", "types.LambdaType", "types.ModuleType", "builtins.eval", "builtins.exec",
    "builtins.compile", "builtins.getattr", "builtins.setattr", "builtins.delattr", "builtins.__import__",
    "builtins.open", "builtins.breakpoint", "builtins.input", "builtins.globals", "builtins.locals",
    "builtins.vars", "builtins.apply", "builtins.memoryview", "builtins.help", "builtins.exit",
    "builtins.quit", "__builtin__.eval", "__builtin__.exec", "__builtin__.execfile", "__builtin__.compile",
    "__builtin__.getattr", "__builtin__.setattr", "__builtin__.__import__", "__builtin__.open",
    "__builtin__.file", "operator.attrgetter", "operator.methodcaller", "_operator.attrgetter",
    "_operator.methodcaller",
    "numpy.testing._private.utils.runstring", "numpy.testing", "numpy.load", "numpy.lib.npyio",
    "numpy.f2py", "numpy.distutils", "torch.hub", "torch.load", "torch.serialization", "torch.jit",
    "torch._dynamo", "torch._inductor", "torch.utils.cpp_extension", "torch.package", "torch._C._jit",
    "torch.ops", "torch.compile", "torch.fx", "torch.utils.bottleneck", "torch.utils.collect_env",
    "torch.classes", "torch._ops", "torch.testing._internal", "joblib.load",
    "keras.models.load_model", "keras.layers.Lambda", "tensorflow.io", "tensorflow.keras.models.load_model", "yaml.load",
    "yaml.unsafe_load", "jinja2", "mako", "IPython", "__main__.__builtins__", "__builtins__",
)  # fmt: skip


# Training arguments as torch.save writes them (`training_args.bin`, saved by transformers' Trainer and trl's
# trainers, with accelerate's state inside): a named class, not a verdict of its own. Unpickling builds these
# dataclasses and state objects with `cls.__new__` (NEWOBJ; none defines `__new__`, so object's) and fills
# their `__dict__` (BUILD; none defines `__setstate__`, PartialState's `__getattr__` only raises), so neither
# `__init__` nor `__post_init__` runs; the enums are looked up by value (`Enum(value)`; ExplicitEnum's
# `_missing_` only raises). Checked on transformers 5.24, accelerate 1.15 and trl 1.16. Called any other way
# (REDUCE, INST, OBJ on a dataclass), `__init__` and `__post_init__` would run: they read the JSON files the
# arguments name (deepspeed, fsdp_config, accelerator_config), set environment variables and set up devices
# (torch.distributed through accelerate): such a use is not this class, and stays unknown.
TRAINING_ARGUMENTS = "training arguments (runs no code beyond constructing transformers classes)"
TRAINING_DATACLASSES: frozenset[str] = frozenset({
    "transformers.training_args.TrainingArguments", "transformers.training_args_seq2seq.Seq2SeqTrainingArguments",
    "transformers.trainer_pt_utils.AcceleratorConfig", "accelerate.state.PartialState",
    "accelerate.state.AcceleratorState", "trl.trainer.base_config._BaseConfig", "trl.trainer.sft_config.SFTConfig",
    "trl.trainer.dpo_config.DPOConfig", "trl.trainer.grpo_config.GRPOConfig", "trl.trainer.kto_config.KTOConfig",
    "trl.trainer.reward_config.RewardConfig", "trl.trainer.rloo_config.RLOOConfig",
    "trl.trainer.distillation_config.DistillationConfig",
})  # fmt: skip
TRAINING_ENUMS: frozenset[str] = frozenset({
    *(f"transformers.trainer_utils.{e}" for e in ("IntervalStrategy", "SaveStrategy", "HubStrategy", "SchedulerType",
                                                 "FSDPOption", "HPSearchBackend", "EvaluationStrategy")),
    "transformers.training_args.OptimizerNames", "transformers.training_args.ParallelMode",
    "transformers.debug_utils.DebugOption", "accelerate.utils.dataclasses.DistributedType",
})  # fmt: skip
_BUILT_USES = frozenset({"imported", "new", "__setstate__"})  # NEWOBJ + BUILD: no __init__
_LOOKUP_USES = frozenset({"imported", "called"})  # Enum(value)


def named_class(module: str, name: str, uses: set[str] | frozenset[str] | None) -> str | None:
    """TRAINING_ARGUMENTS for a training-argument class used only as torch.save writes it; None otherwise."""
    dotted = f"{module}.{name}"
    if uses is None:
        return None
    if dotted in TRAINING_DATACLASSES and set(uses) <= _BUILT_USES:
        return TRAINING_ARGUMENTS
    if dotted in TRAINING_ENUMS and set(uses) <= _LOOKUP_USES:
        return TRAINING_ARGUMENTS
    return None


def uses_by_callable(occurrences: list[dict[str, Any]] | None) -> dict[str, set[str]]:
    """{module.name: every use of it} from a scan's occurrences."""
    out: dict[str, set[str]] = {}
    for o in occurrences or ():
        out.setdefault(str(o.get("callable")), set()).update(o.get("uses") or ())
    return out


def _judged(module: str, name: str, rules: Rules, uses: dict[str, set[str]]) -> dict[str, Any]:
    """One import's entry: {module, name, verdict}, plus `class` when a named class made an unknown one safe."""
    verdict = judge_import(module, name, rules)
    if verdict == UNKNOWN:
        named = named_class(module, name, uses.get(f"{module}.{name}"))
        if named:
            return {"module": module, "name": name, "verdict": SAFE, "class": named}
    return {"module": module, "name": name, "verdict": verdict}


@dataclass(frozen=True)
class Rules:
    """The lists one judgement uses, and the version stored with every verdict they give."""

    dangerous: tuple[str, ...]
    safe: tuple[str, ...]
    version: str


BUILTIN = Rules(BUILTIN_DANGEROUS, BUILTIN_SAFE, str(RULES_VERSION))


class RulesFileError(ValueError):
    """The operator's rules file cannot be used: the message names the file and the problem."""


def load_rules(path: Path | None) -> Rules:
    """The built-in rules, merged with an operator's TOML file when one is given."""
    if path is None:
        return BUILTIN
    try:
        raw = path.read_bytes()[: MAX_RULES_FILE + 1]
    except OSError as err:
        raise RulesFileError(f"{path}: cannot be read ({err.strerror})") from err
    if len(raw) > MAX_RULES_FILE:
        raise RulesFileError(f"{path}: over {MAX_RULES_FILE:,} bytes")
    return rules_from_toml(raw, str(path))


class RulesFile:
    """The operator's rules file as it is now: read again when its modification time or size moves (and its
    rules replaced when its digest, so its version, changed), so a running daemon judges by the file the operator
    last saved. A file that can no longer be used (removed, not TOML) keeps the last good rules; `problem` says why."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.problem: str | None = None
        self._stamp = self._stat()
        self._rules = load_rules(path)  # a bad file at start is the caller's config error

    def _stat(self) -> tuple[int, int] | None:
        try:
            info = self.path.stat()
        except OSError:
            return None
        return info.st_mtime_ns, info.st_size

    def current(self) -> Rules:
        """The rules of the file as last saved (one stat per call; the file is read only when it moved)."""
        stamp = self._stat()
        if stamp == self._stamp:
            return self._rules
        self._stamp = stamp
        try:
            self._rules, self.problem = load_rules(self.path), None
        except RulesFileError as err:
            self.problem = f"{err}; judging by the rules of version {self._rules.version} until it is fixed"
        return self._rules


def rules_from_toml(raw: bytes, label: str = "rules file") -> Rules:
    """Rules from the TOML text of an operator's file: version `<built-in>+<sha256 prefix of the file>`."""
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise RulesFileError(f"{label}: not TOML ({err})") from err
    unknown_keys = set(data) - {"dangerous", "safe"}
    if unknown_keys:
        raise RulesFileError(f"{label}: unknown keys {sorted(unknown_keys)}; expected 'dangerous' and 'safe'")
    lists = {}
    for key in ("dangerous", "safe"):
        entries = data.get(key, [])
        if not isinstance(entries, list) or not all(isinstance(e, str) and _valid_entry(e) for e in entries):
            raise RulesFileError(f"{label}: '{key}' must be a list of 'module', 'module.name' or 'module.*' strings")
        lists[key] = tuple(entries)
    digest = hashlib.sha256(raw).hexdigest()[:12]
    return Rules(BUILTIN_DANGEROUS + lists["dangerous"], BUILTIN_SAFE + lists["safe"], f"{RULES_VERSION}+{digest}")


def _valid_entry(entry: str) -> bool:
    parts = entry.split(".")
    return bool(entry) and all(p and (p == "*" or p.replace("*", "").replace("_", "a").isalnum()) for p in parts)


def judge_import(module: str, name: str, rules: Rules = BUILTIN) -> str:
    """safe, unknown or dangerous for one imported callable `module.name`, also under the Python 2 name
    mapping pickle applies below protocol 3 (`__builtin__.raw_input` is `builtins.input`)."""
    mapped = NAME_MAPPING.get((module, name)) or (IMPORT_MAPPING.get(module, module), name)
    if mapped == (module, name):
        return _judge_name(module, name, rules)
    verdicts = [_judge_name(*mapped, rules), _judge_name(module, name, rules)]
    return worst([v for v in verdicts if v != UNKNOWN] or [UNKNOWN])


def _judge_name(module: str, name: str, rules: Rules) -> str:
    if module.startswith("<"):
        return UNKNOWN  # an unresolved STACK_GLOBAL or an extension code: no rule can know
    path = f"{module}.{name}" if name else module
    parts = path.split(".")
    attribute_parts = name.split(".")
    if any(p.startswith("__") and p.endswith("__") and len(p) > 4 for p in attribute_parts[:-1]):
        return DANGEROUS  # reaching through __builtins__, __globals__, __class__ ...
    tails = [".".join(parts[i:]) for i in range(len(parts))] if "." in name else [path]
    if any(_matches_dangerous(tail, rules.dangerous) for tail in tails):
        return DANGEROUS
    if any(_matches_safe(path, entry) for entry in rules.safe):
        return SAFE
    return UNKNOWN


def _matches_dangerous(path: str, entries: tuple[str, ...]) -> bool:
    for entry in entries:
        if "*" in entry:
            if fnmatchcase(path, entry):
                return True
        elif path == entry or path.startswith(entry + "."):
            return True
    return False


def _matches_safe(path: str, entry: str) -> bool:
    return fnmatchcase(path, entry) if "*" in entry else path == entry


def worst(verdicts: list[str]) -> str:
    """The worst verdict of several (safe < unknown < dangerous); `unreadable` for none."""
    return max(verdicts, key=ORDER.__getitem__, default=UNREADABLE)


def judge(imports: list[dict[str, Any]] | list[tuple[str, str]], rules: Rules = BUILTIN) -> str:
    """A file's verdict from its imports ({module, name} dicts or (module, name) pairs)."""
    pairs = [(i["module"], i["name"]) if isinstance(i, dict) else i for i in imports]
    return worst([judge_import(module, name, rules) for module, name in pairs])


def scan_result(
    imports: list[tuple[str, str]],
    rules: Rules,
    bytes_read: int,
    note: str | None,
    *,
    certain: bool = True,
    readable: bool = True,
    occurrences: list[dict[str, Any]] | None = None,
    tensors: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The stored shape of one file's scan: `{verdict, imports: [{module, name, verdict}], rules_version,
    bytes_read, note}`, plus `occurrences` (where each callable is and how it is used), `certain` (False
    when the imports may not be all there is: a cap reached, bytes that are not a pickle, a zip laid out
    as torch never writes one; the verdict is then at least unknown) and `tensors` for torch checkpoints.
    `readable=False` with no imports is `unreadable`: nothing could be judged."""
    unique = list(dict.fromkeys(imports))
    uses = uses_by_callable(occurrences)
    judged = [_judged(m, n, rules, uses) for m, n in unique]
    result: dict[str, Any] = {
        "verdict": _file_verdict(judged, certain and readable, readable or bool(judged)),
        "imports": judged,
        "rules_version": rules.version,
        "bytes_read": bytes_read,
        "note": note,
        "certain": certain and readable,
        "occurrences": occurrences or [],
    }
    if tensors is not None:
        result["tensors"] = tensors
    return result


def _file_verdict(judged: list[dict[str, Any]], certain: bool, readable: bool) -> str:
    if not readable:
        return UNREADABLE
    verdict = worst([j["verdict"] for j in judged]) if judged else SAFE
    return verdict if certain else worst([verdict, UNKNOWN])  # what was not read may hold anything


def rejudge(result: dict[str, Any], rules: Rules) -> dict[str, Any]:
    """The same scan under other rules, from its stored import list alone (no bytes needed)."""
    uses = uses_by_callable(result.get("occurrences"))
    judged = [{k: v for k, v in i.items() if k not in ("verdict", "class")} | _judged(i["module"], i["name"], rules, uses)
              for i in result["imports"]]
    readable = result.get("verdict") != UNREADABLE or bool(judged)
    verdict = _file_verdict(judged, result.get("certain", True), readable)
    return {**result, "imports": judged, "rules_version": rules.version, "verdict": verdict}
