"""The judgement: built-in lists, the operator's rules file, a file's verdict and re-judging stored scans."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracker.formats.pickle_rules import (
    BUILTIN,
    RULES_VERSION,
    RulesFileError,
    judge,
    judge_import,
    load_rules,
    rejudge,
    rules_from_toml,
    scan_result,
)


@pytest.mark.parametrize(
    ("module", "name", "verdict"),
    [
        ("torch._utils", "_rebuild_tensor_v2", "safe"),
        ("torch", "BFloat16Storage", "safe"),
        ("torch.storage", "UntypedStorage", "safe"),
        ("torch", "float8_e4m3fn", "safe"),
        ("collections", "OrderedDict", "safe"),
        ("numpy.core.multiarray", "_reconstruct", "safe"),
        ("os", "system", "dangerous"),
        ("os.path", "join", "dangerous"),
        ("posix", "system", "dangerous"),
        ("builtins", "getattr", "dangerous"),
        ("builtins", "print", "unknown"),
        ("torch", "hub.load", "dangerous"),
        ("torch", "_utils.os.system", "dangerous"),
        ("collections", "__builtins__.eval", "dangerous"),
        ("torch", "_utils._rebuild_tensor_v2", "safe"),
        ("torch.nn.modules.linear", "Linear", "unknown"),
        ("__main__", "Net", "unknown"),
        ("<extension registry>", "7", "unknown"),
        ("<unresolved>", "result of x", "unknown"),
        ("osmosis", "run", "unknown"),
        ("numpy.testing._private.utils", "runstring", "dangerous"),
        ("operator", "attrgetter", "dangerous"),
        ("operator", "itemgetter", "unknown"),
        ("asyncio.unix_events", "_UnixSubprocessTransport", "dangerous"),
        ("SimpleHTTPServer", "test", "dangerous"),
        ("commands", "getoutput", "dangerous"),
        ("__builtin__", "set", "safe"),
        ("copy_reg", "_reconstructor", "unknown"),
    ],
)
def test_builtin_rules(module: str, name: str, verdict: str) -> None:
    """Each import's verdict under the built-in lists (prefix matches on whole dotted parts only)."""
    assert judge_import(module, name) == verdict


def test_a_file_is_as_bad_as_its_worst_import() -> None:
    """safe < unknown < dangerous; no imports at all is unreadable for judge()."""
    assert judge([("torch", "Size"), ("__main__", "Net")]) == "unknown"
    assert judge([{"module": "torch", "name": "Size"}, {"module": "os", "name": "system"}]) == "dangerous"
    assert judge([("torch", "Size")]) == "safe"
    assert judge([]) == "unreadable"


def test_the_operator_file_adds_to_both_lists_and_versions_them(tmp_path: Path) -> None:
    """Entries are merged over the built-ins; the version is the built-in one plus the file's digest."""
    path = tmp_path / "rules.toml"
    path.write_text('dangerous = ["mylib.loader", "evilpkg.*"]\nsafe = ["mymodels.Net", "trusted.*"]\n')
    rules = load_rules(path)
    assert rules.version.startswith(f"{RULES_VERSION}+") and rules.version != BUILTIN.version
    assert judge_import("mylib.loader", "run", rules) == "dangerous"
    assert judge_import("evilpkg", "x", rules) == "dangerous"
    assert judge_import("mymodels", "Net", rules) == "safe"
    assert judge_import("trusted.sub", "Thing", rules) == "safe"
    assert judge_import("mymodels", "Other", rules) == "unknown"


def test_dangerous_wins_over_an_operator_safe_entry() -> None:
    """A safe entry cannot lift a dangerous callable."""
    rules = rules_from_toml(b'safe = ["os.system", "builtins.*"]')
    assert judge_import("os", "system", rules) == "dangerous"
    assert judge_import("builtins", "eval", rules) == "dangerous"
    assert judge_import("builtins", "print", rules) == "safe"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b"dangerous = 'os'", "must be a list"),
        (b"dangerous = ['os system']", "must be a list"),
        (b"allow = []", "unknown keys"),
        (b"not toml [", "not TOML"),
        (b"\xff\xfe", "not TOML"),
    ],
)
def test_a_bad_rules_file_is_refused_with_a_reason(text: bytes, message: str) -> None:
    """A rules file that cannot be used raises RulesFileError naming the problem."""
    with pytest.raises(RulesFileError, match=message):
        rules_from_toml(text)


def test_a_missing_rules_file_is_a_clear_error(tmp_path: Path) -> None:
    """An unreadable path raises RulesFileError naming it."""
    with pytest.raises(RulesFileError, match="cannot be read"):
        load_rules(tmp_path / "absent.toml")


def test_the_result_has_the_issue_shape() -> None:
    """verdict, imports [{module, name, verdict}], rules_version, bytes_read, note; duplicates listed once."""
    result = scan_result([("torch", "Size"), ("torch", "Size"), ("os", "system")], BUILTIN, 123, None)
    assert {"verdict", "imports", "rules_version", "bytes_read", "note"} <= set(result)
    assert result["verdict"] == "dangerous" and result["bytes_read"] == 123 and result["rules_version"] == str(RULES_VERSION)
    assert result["imports"] == [{"module": "torch", "name": "Size", "verdict": "safe"},
                                 {"module": "os", "name": "system", "verdict": "dangerous"}]  # fmt: skip


def test_an_uncertain_scan_is_at_least_unknown_and_nothing_read_is_unreadable() -> None:
    """Imports that may not be all there is never make a safe verdict; no imports and nothing readable is unreadable."""
    assert scan_result([("torch", "Size")], BUILTIN, 1, "cap", certain=False)["verdict"] == "unknown"
    assert scan_result([], BUILTIN, 1, "not a zip", readable=False)["verdict"] == "unreadable"
    assert scan_result([], BUILTIN, 1, None)["verdict"] == "safe"


def test_rejudging_uses_the_stored_imports_alone() -> None:
    """A stored result re-judged under new rules changes verdict and version; the bytes are not needed."""
    stored = scan_result([("torch", "Size"), ("newly.bad", "thing")], BUILTIN, 10, None)
    assert stored["verdict"] == "unknown"
    stricter = rules_from_toml(b'dangerous = ["newly.bad"]')
    again = rejudge(stored, stricter)
    assert again["verdict"] == "dangerous" and again["rules_version"] == stricter.version
    assert again["imports"][1] == {"module": "newly.bad", "name": "thing", "verdict": "dangerous"}
    assert rejudge(again, BUILTIN) == stored


def test_rejudging_keeps_unreadable_and_uncertain() -> None:
    """Unreadable stays unreadable; an uncertain scan stays at least unknown under any rules."""
    unreadable = scan_result([], BUILTIN, 0, "truncated", readable=False)
    assert rejudge(unreadable, BUILTIN)["verdict"] == "unreadable"
    uncertain = scan_result([("mymodels", "Net")], BUILTIN, 0, "cap", certain=False)
    assert rejudge(uncertain, rules_from_toml(b'safe = ["mymodels.Net"]'))["verdict"] == "unknown"


def test_the_rules_file_is_read_again_when_it_changes_and_a_bad_save_keeps_the_last_good_rules(tmp_path) -> None:
    """A saved change moves the version; a save that is not TOML keeps the rules and says why; a fix is read."""
    import os

    from tracker.formats.pickle_rules import RulesFile

    path = tmp_path / "rules.toml"
    path.write_text('dangerous = ["somepkg"]\n')
    watched = RulesFile(path)
    first = watched.current()
    assert watched.current() is first and judge_import("somepkg", "x", first) == "dangerous"
    path.write_text('safe = ["somepkg.x"]\n')
    os.utime(path, ns=(1, 1))  # a different modification time, whatever the clock's resolution
    second = watched.current()
    assert second.version != first.version and judge_import("somepkg", "x", second) == "safe"
    path.write_text("dangerous = [\n")
    os.utime(path, ns=(2, 2))
    assert watched.current() is second and "not TOML" in watched.problem and second.version in watched.problem
    path.write_text('dangerous = ["otherpkg"]\n')
    os.utime(path, ns=(3, 3))
    assert watched.current().version not in (first.version, second.version) and watched.problem is None


def _training_args_scan(rules=BUILTIN):
    from tests.support.torch_fixtures import FIXTURES, TRAINING_ARGS
    from tracker.formats.pickle_files import scan_file
    from tracker.formats.ranged import BytesSource

    return scan_file(TRAINING_ARGS, BytesSource((FIXTURES / TRAINING_ARGS).read_bytes()), rules)[0]


def test_transformers_training_args_bin_is_safe_as_training_arguments() -> None:
    """Trainer's training_args.bin (torch.save of TrainingArguments): every transformers/accelerate import is the
    named class, built by NEWOBJ+BUILD or looked up by value, so the file is safe; torch.device stays plainly safe."""
    from tracker.formats.pickle_rules import TRAINING_ARGUMENTS

    result = _training_args_scan()
    assert result["verdict"] == "safe" and result["rules_version"] == str(RULES_VERSION)
    named = {f"{i['module']}.{i['name']}" for i in result["imports"] if i.get("class") == TRAINING_ARGUMENTS}
    assert {"transformers.training_args.TrainingArguments", "accelerate.state.PartialState",
            "transformers.trainer_utils.IntervalStrategy"} <= named  # fmt: skip
    assert {f"{i['module']}.{i['name']}" for i in result["imports"]} - named == {"torch.device"}


def test_training_arguments_called_as_a_function_stay_unknown() -> None:
    """TrainingArguments(...) by REDUCE (or INST) runs __init__/__post_init__: not the named class, unknown."""
    from tests.support.pickle_bytes import Ops
    from tracker.formats.pickle_scan import scan_pickle

    for data in (Ops().glob("transformers.training_args", "TrainingArguments").mark.string("ds.json").tuple_
                 .reduce.stop.bytes(),
                 Ops().mark.string("x").inst("accelerate.state", "PartialState").stop.bytes()):  # fmt: skip
        scan = scan_pickle(data)
        occurrences = [{"callable": g.dotted, "uses": sorted(g.uses)} for g in scan.imports]
        result = scan_result([(g.module, g.name) for g in scan.imports], BUILTIN, len(data), None,
                             occurrences=occurrences)  # fmt: skip
        assert result["verdict"] == "unknown" and "class" not in result["imports"][0]


def test_an_operator_dangerous_entry_beats_the_training_arguments_class() -> None:
    """Dangerous always wins: an operator listing accelerate makes the same file dangerous."""
    assert _training_args_scan(rules_from_toml(b'dangerous = ["accelerate"]'))["verdict"] == "dangerous"


def test_a_training_args_scan_judged_by_rules_1_is_safe_when_judged_again() -> None:
    """A scan stored as unknown under rules 1 (no named class then) is safe under today's, from its stored uses."""
    stored = _training_args_scan()
    stored = {**stored, "verdict": "unknown", "rules_version": "1",
              "imports": [{k: v for k, v in i.items() if k != "class"} | ({"verdict": "unknown"} if "class" in i else {})
                          for i in stored["imports"]]}  # fmt: skip
    again = rejudge(stored, BUILTIN)
    assert again["verdict"] == "safe" and all(i["verdict"] == "safe" for i in again["imports"])
    assert sum("class" in i for i in again["imports"]) == len(again["imports"]) - 1
