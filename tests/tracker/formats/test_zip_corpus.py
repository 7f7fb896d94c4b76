"""Pickles wherever a zip holds them: the zip corpus judged, layouts that hide a pickle never quiet, members
that cannot be read never making the readable ones unreadable."""

from __future__ import annotations

import struct
import zipfile

import pytest

from tests.support.pickle_bytes import Member, zip_bytes
from tests.support.pickle_corpus import Sample
from tests.support.pickle_repos import state_dict_pickle
from tests.support.zip_corpus import EVIL, _hidden_entry, benign, malicious, picklescan_payload, written
from tracker.formats import zip_members
from tracker.formats.pickle_files import scan_file
from tracker.formats.ranged import BytesSource

MALICIOUS, BENIGN = malicious(), benign()
SAFE_PKL = b"\x80\x02}q\x00."


def _judged(sample: Sample) -> dict:
    return scan_file(sample.path, BytesSource(sample.data))[0]


@pytest.mark.parametrize("sample", MALICIOUS, ids=[f"{i:02d}-{s.technique[:40]}" for i, s in enumerate(MALICIOUS)])
def test_every_malicious_zip_is_flagged_with_its_culprit(sample: Sample) -> None:
    """Dangerous or unknown, and the callable that runs code named among the imports."""
    result = _judged(sample)
    assert result["verdict"] in ("dangerous", "unknown")
    if sample.culprit is not None:
        assert sample.culprit in {f"{i['module']}.{i['name']}" for i in result["imports"]}


def test_at_least_95_percent_of_the_malicious_zips_are_dangerous() -> None:
    """Only what cannot be read at all (a truly encrypted member) is left at unknown."""
    dangerous = [s for s in MALICIOUS if _judged(s)["verdict"] == "dangerous"]
    assert len(dangerous) >= 0.95 * len(MALICIOUS)
    assert {s.technique for s in MALICIOUS} - {s.technique for s in dangerous} == {
        "a pickle truly encrypted (unknown: cannot be read)"}


@pytest.mark.parametrize("sample", BENIGN, ids=[s.technique[:40] for s in BENIGN])
def test_no_benign_zip_is_dangerous(sample: Sample) -> None:
    """Benign zips are safe, or unknown where their layout leaves something unread; never dangerous."""
    assert _judged(sample)["verdict"] in ("safe", "unknown")


def _patched(data: bytes, signature: bytes, at: int, fmt: str, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, data.index(signature) + at, value)
    return bytes(out)


@pytest.mark.parametrize(
    ("data", "note"),
    [
        (zip_bytes([Member("model/config.pkl", SAFE_PKL, flags=1)]), "claims encryption"),
        (written({"data.pkl": SAFE_PKL}).replace(b"data.pkl", b"datap.kl", 1), "names 'datap.kl'"),
        (_patched(written({"data.pkl": SAFE_PKL}), b"PK\x01\x02", 16, "<I", 0xDEADBEEF), "is not the directory's"),
        (_patched(zip_bytes([Member("w.pkl", SAFE_PKL)]), b"PK\x03\x04", 8, "<H", 8), "compression method 8"),
        (_hidden_entry().replace(EVIL, b"\x80\x02N.".ljust(len(EVIL), b".")), "does not list"),
        (SAFE_PKL + written({"a.txt": b"x"}), "starts 6 bytes into the file"),
        (zip_bytes([Member("a.pkl", SAFE_PKL), Member("a.pkl", SAFE_PKL)]), "names an entry twice"),
    ],
    ids=["encryption-flag", "renamed-local", "crc", "method", "unlisted-entry", "bytes-before", "twice"],
)  # fmt: skip
def test_a_layout_that_may_hide_a_pickle_is_never_quiet(data: bytes, note: str) -> None:
    """With only benign pickles inside, a layout that could hide one makes the file unknown and says why."""
    result, _, got = scan_file("model.npz", BytesSource(data))
    assert result["verdict"] == "unknown" and note in got


def test_members_that_cannot_be_read_leave_the_readable_ones_judged() -> None:
    """A member whose local header is gone is a note; the pickle beside it is still judged (dangerous)."""
    data = _patched(written({"broken.pkl": SAFE_PKL, "evil.pkl": EVIL}), b"PK\x03\x04", 0, "<I", 0)
    result, kept, note = scan_file("arrays.npz", BytesSource(data))  # no longer starting as a zip: by its name
    assert result["verdict"] == "dangerous" and "broken.pkl: no local header" in note
    assert kept == EVIL


def test_nothing_readable_is_unreadable() -> None:
    """When no member can be read at all, nothing was judged: unreadable, with the reason."""
    data = _patched(written({"broken.pkl": SAFE_PKL}), b"PK\x03\x04", 0, "<I", 0)
    result, _, note = scan_file("arrays.npz", BytesSource(data))
    assert result["verdict"] == "unreadable" and "no local header" in note


def test_each_pickle_is_named_by_its_member_path() -> None:
    """Occurrences name the member, nested zips joined by '/', and each pickle is judged on its own."""
    inner = written({"archive/data.pkl": EVIL})
    data = written({"outer.pkl": picklescan_payload(), "nested/inner.zip": inner})
    result = scan_file("model.pt", BytesSource(data))[0]
    members = {(o["callable"], o["member"]) for o in result["occurrences"]}
    assert members == {("builtins.eval", "outer.pkl"), ("os.system", "nested/inner.zip/archive/data.pkl")}


def test_a_torch_archive_keeps_its_manifest_and_data_pkl() -> None:
    """The generic walk still gives a torch checkpoint's tensors and keeps data.pkl; storages are not read."""
    pkl = state_dict_pickle([("a", "FloatStorage", (4,)), ("b", "FloatStorage", (4,))])
    data = zip_bytes([Member("archive/data.pkl", pkl), Member("archive/data/0", EVIL + bytes(100_000)),
                      Member("archive/data/1", bytes(64)), Member("archive/version", b"3\n")])  # fmt: skip
    source = BytesSource(data)
    result, kept, note = scan_file("pytorch_model.bin", source)
    assert (result["verdict"], kept, note) == ("safe", pkl, None)
    assert [t["name"] for t in result["tensors"]] == ["a", "b"]
    assert source.bytes_read < 20_000 < len(data)  # the storage under data/ was never read


def test_too_many_members_or_too_deep_a_nesting_is_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the member cap or the nesting depth the rest is not looked at, and the verdict says so."""
    monkeypatch.setattr(zip_members, "MAX_MEMBERS", 3)
    result, _, note = scan_file("a.pt", BytesSource(written({f"{i}.txt": b"text" for i in range(5)})))
    assert result["verdict"] == "unknown" and "5 members: the first 3" in note
    monkeypatch.setattr(zip_members, "MAX_DEPTH", 1)
    deep = written({"a.zip": written({"b.zip": written({"c.pkl": SAFE_PKL})})})
    result, _, note = scan_file("a.pt", BytesSource(deep))
    assert result["verdict"] == "unknown" and "a.zip/b.zip: a zip nested more than 1 deep" in note


def test_a_member_deflated_is_sniffed_from_its_first_kilobytes() -> None:
    """Telling what a large deflated member is reads a few KiB of it, not all of it."""
    noise = bytes(range(256)) * 40_000  # 10 MB of text-like bytes that deflate poorly enough
    data = written({"weights.raw": noise, "model.pkl": SAFE_PKL}, zipfile.ZIP_DEFLATED)
    source = BytesSource(data)
    assert scan_file("m.pt", source)[0]["verdict"] == "safe"
    assert source.bytes_read < 100_000


def test_an_npz_of_numbers_reads_headers_not_arrays() -> None:
    """An array of numbers is no pickle: its header says so, and its bytes are never read."""
    from tests.support.pickle_bytes import npy_bytes

    data = written({"big.npy": npy_bytes("<f4", (250_000,), bytes(1_000_000)), "obj.npy": npy_bytes("|O", (1,), EVIL)})
    source = BytesSource(data)
    result = scan_file("arrays.npz", source)[0]
    assert result["verdict"] == "dangerous" and {o["member"] for o in result["occurrences"]} == {"obj.npy"}
    assert source.bytes_read < 30_000


def test_a_member_past_the_scan_budget_leaves_the_others_judged() -> None:
    """Over the scan's byte budget, one member is a note; the pickle read before it still makes the verdict."""
    data = written({"evil.pkl": EVIL, "huge.pkl": b"\x80\x02X" + struct.pack("<I", 200_000) + b"a" * 200_000 + b"."})
    result, _, note = scan_file("model.pt", BytesSource(data, budget=60_000))
    assert result["verdict"] == "dangerous" and "huge.pkl: needs" in note and "cap" in note


@pytest.mark.parametrize(
    ("head", "size", "kind"),
    [
        (b"\x80\x02}q\x00.", 6, "pickle"),
        (b"cos\nsystem\n(S'id'\ntR.", 20, "pickle"),
        (b"N.", 2, "pickle"),
        (b"S'" + b"a" * 62, 10_000, "more"),
        (b"S'" + b"a" * 62, 64, None),
        (b"S'" + b"a" * 65_534, 100_000, "pickle"),
        (b"class Net(Module):\n  __parameters__ = []\n  def forward(self, x):\n", 10_000, None),
        (b"little", 6, None),
        (b'{"a": 1}', 8, None),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", 10_000, None),
        (bytes(64), 10_000, None),
    ],
    ids=["proto", "protocol-0-call", "tiny", "long-string", "long-string-whole", "long-string-at-cap", "python-source",
         "byteorder", "json", "png", "zeros"],
)  # fmt: skip
def test_members_are_told_by_a_walk_as_a_loader_would_do_it(head: bytes, size: int, kind: str | None) -> None:
    """A resolvable import or a finished pickle is one; bytes that stop being opcodes are not; a walk still
    going reads on, and is a pickle at the 64 KiB cap."""
    assert zip_members.pickle_sniff(head, size) == kind


def test_a_zip_of_many_odd_members_keeps_a_short_note() -> None:
    """Thirty members claiming encryption: the first notes and a count of the rest, the verdict unknown."""
    data = zip_bytes([Member(f"m{i}.txt", b"text", flags=1) for i in range(30)])
    result, _, note = scan_file("model.pt", BytesSource(data))
    assert result["verdict"] == "unknown" and note.count("claims encryption") == 12 and "and 19 more notes" in note
