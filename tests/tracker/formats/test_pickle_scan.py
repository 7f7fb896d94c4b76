"""The opcode walk: every import found with where and how it is used, the memo followed, the caps kept."""

from __future__ import annotations

import collections
import pickle

import pytest

from tests.support.pickle_bytes import Ops, calling
from tracker.formats.pickle_scan import Limits, Persistent, scan_pickle


def _found(data: bytes) -> list[tuple[str, str]]:
    return [(g.module, g.name) for g in scan_pickle(data).imports]


@pytest.mark.parametrize("protocol", range(6))
def test_every_protocol_names_the_class_it_rebuilds(protocol: int) -> None:
    """pickle's own output at protocols 0-5 (written, never read back) names OrderedDict as called."""
    data = pickle.dumps(collections.OrderedDict(a=[1, 2.5, "x", b"y", None, True]), protocol=protocol)
    scan = scan_pickle(data)
    called = {g.dotted for g in scan.imports if "called" in g.uses}
    assert "collections.OrderedDict" in called
    assert scan.complete and scan.notes == []


def test_stack_global_is_resolved_through_the_memo() -> None:
    """STACK_GLOBAL's strings are followed through MEMOIZE/BINGET, and an overwritten memo slot is read as written last."""
    data = (Ops(4).short_string("torch").put(0).pop.short_string("os").put(0).pop.get(0)
            .short_string("system").stack_global.empty_tuple.reduce.stop.bytes())  # fmt: skip
    scan = scan_pickle(data)
    assert [(g.module, g.name, g.opcode) for g in scan.imports] == [("os", "system", "STACK_GLOBAL")]
    assert scan.imports[0].uses == {"imported", "called"}


def test_offsets_and_uses_are_recorded() -> None:
    """Each import carries its byte offset; an import only stored is not 'called'; BUILD marks __setstate__."""
    data = (Ops().glob("mod", "kept").pop.glob("pkg", "Klass").empty_tuple.reduce.empty_dict.build.stop.bytes())
    first, second = scan_pickle(data).imports
    assert (first.offset, first.uses) == (2, {"imported"})
    assert second.offset == data.index(b"cpkg")
    assert second.uses == {"imported", "called", "__setstate__"}


def test_a_call_of_a_call_result_is_a_dynamic_call() -> None:
    """REDUCE on something that is not an import (getattr's result) is listed as a dynamic call."""
    data = (Ops().glob("builtins", "getattr").mark.glob("mod", "obj").string("run").tuple_.reduce
            .empty_tuple.reduce.stop.bytes())  # fmt: skip
    assert scan_pickle(data).dynamic_calls == [(data.rindex(b"R"), "result of builtins.getattr")]


def test_persistent_ids_are_recorded() -> None:
    """BINPERSID's tuple (torch's storage reference) is kept as a value."""
    data = Ops().mark.string("storage").string("0").tuple_.binpersid.stop.bytes()
    (found,) = scan_pickle(data).persistent_ids
    assert isinstance(found, Persistent) and found.pid == ("storage", "0")


def test_concatenated_pickles_are_all_walked() -> None:
    """A payload after the first STOP is found; max_pickles=1 reads only what a loader reading one would."""
    data = Ops().empty_dict.stop.bytes() + calling("os", "system", "id")
    assert _found(data) == [("os", "system")]
    assert _found(data[:4]) == []
    assert scan_pickle(data, max_pickles=1).imports == []


@pytest.mark.parametrize(
    ("data", "limits", "note"),
    [
        (Ops().raw(b"N0" * 200).raw(calling("os", "system")[2:]).bytes(), Limits(opcodes=100), "100-opcode cap"),
        (Ops().raw(b"(" * 50).stop.bytes(), Limits(marks=20), "20-deep MARK cap"),
        (Ops().raw(b"N" * 50).stop.bytes(), Limits(stack=20), "20-item stack cap"),
        (Ops().none.raw(b"".join(b"r" + i.to_bytes(4, "little") for i in range(50))).stop.bytes(), Limits(memo=10),
         "10-entry memo cap"),
        (calling("os", "system", "id")[:-3], Limits(), "not a pickle from byte"),
        (b"\xffjunk", Limits(), "not a pickle from byte 0"),
        (Ops().raw(b"R").stop.bytes(), Limits(), "pops an empty stack"),
        (Ops().raw(b"t").stop.bytes(), Limits(), "no MARK to pop to"),
    ],
    ids=["opcodes", "marks", "stack", "memo", "truncated", "garbage", "underflow", "no-mark"],
)  # fmt: skip
def test_caps_and_bad_bytes_end_the_walk_with_a_note(data: bytes, limits: Limits, note: str) -> None:
    """A cap reached or bytes that stop being a pickle: incomplete, with a note saying which."""
    scan = scan_pickle(data, limits)
    assert not scan.complete
    assert note in scan.notes[-1]


def test_what_was_read_before_a_cap_is_kept() -> None:
    """Imports found before the cap stay in the scan."""
    data = calling("os", "system", "id")[:-1] + b"N0" * 100 + b"."
    scan = scan_pickle(data, Limits(opcodes=20))
    assert [g.dotted for g in scan.imports] == ["os.system"] and not scan.complete


def test_a_list_containing_itself_does_not_hang_the_walk() -> None:
    """Self-reference through the memo is a reference, not a copy."""
    data = Ops().empty_list.put(0).get(0).append.stop.bytes()
    scan = scan_pickle(data)
    assert scan.complete and scan.results[0].items[0] is scan.results[0]


def test_a_memo_read_before_it_is_written_is_noted() -> None:
    """GET of a missing slot pushes an unknown value and notes it."""
    scan = scan_pickle(Ops().get(5).stop.bytes())
    assert "memo entry 5 read before it is written" in scan.notes[0]
