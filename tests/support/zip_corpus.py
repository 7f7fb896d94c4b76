"""Zips that hold pickles where a naive scanner does not look, as bytes: never loaded, only scanned.

Modelled on the zip samples of picklescan's tests (tests/init_data_files.py and the committed
`malicious1_0x*.zip`: a `model/config.pkl` under flags claiming encryption, a local header renamed
`datap.kl`, a CRC broken after writing, a pickle named `data.txt`, a password-protected zip) and of
fickling's (test_scan_api.py and test_polyglot.py: a `model.pkl` in a zip, every pickle extension in one
zip, an object `.npy` in a zip of any name, good and corrupt members side by side, a zip with bytes before
it), and on the ways the issue names (a zip in a zip, wrong extensions, a directory whose local headers
disagree, an entry the directory does not list). Each generator writes its own bytes here, with zipfile
where a real writer would be used and by hand (pickle_bytes.zip_bytes) where no writer would do it.

Each is named as a model repo would carry it (a `.pt`/`.bin` that is a zip, an `.npz`); the technique names
the sample it is modelled on. `malicious()` must each be judged dangerous or unknown (at least 95%
dangerous); `benign()` never dangerous.
"""

from __future__ import annotations

import io
import random
import struct
import zipfile
import zlib

from tests.support.pickle_bytes import Member, Ops, calling, npy_bytes, zip_bytes
from tests.support.pickle_corpus import Sample
from tests.support.pickle_repos import calling_fragment, tensor_pickle
from tests.support.zip_layouts import torch_archive


def picklescan_payload() -> bytes:
    """picklescan's Malicious1 as protocol 4 writes it: builtins.eval("print('456')") by STACK_GLOBAL."""
    body = (Ops(None).short_string("builtins").memoize.short_string("eval").memoize.stack_global.memoize
            .short_string("print('456')").memoize.tuple1.memoize.reduce.memoize.stop.bytes())  # fmt: skip
    return b"\x80\x04\x95" + struct.pack("<Q", len(body)) + body


EVIL = calling("os", "system", "id")


def written(members: dict[str, bytes], compression: int = zipfile.ZIP_STORED) -> bytes:
    """A zip as zipfile writes one."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return out.getvalue()


def _flagged(flags: int) -> bytes:
    """picklescan's malicious1_0x{flags}.zip: model/config.pkl stored under general-purpose flags `flags`."""
    return zip_bytes([Member("model/config.pkl", picklescan_payload(), flags=flags)])


def _renamed_local() -> bytes:
    """picklescan's malicious1_central_directory.zip: the first "data.pkl" (the local header's) renamed."""
    return written({"data.pkl": picklescan_payload()}).replace(b"data.pkl", b"datap.kl", 1)


def _bad_crc() -> bytes:
    """picklescan's malicious1_crc.zip: the payload changed after writing, so its CRC no longer matches."""
    return written({"data.pkl": picklescan_payload()}).replace(b"print('456')", b"print('123')", 1)


def _hidden_entry() -> bytes:
    """A benign zip with one more local entry between its members that the central directory does not list."""
    first, second = b"\x80\x02}q\x00.", b'{"a": 1}'
    listed = zip_bytes([Member("a.pkl", first), Member("b.json", second)])
    hidden = struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 20, 0, 0, 0, 0, zlib.crc32(EVIL), len(EVIL), len(EVIL), 8,
                         0) + b"evil.pkl" + EVIL  # fmt: skip
    cut = 30 + len("a.pkl") + len(first)
    out = bytearray(listed[:cut] + hidden + listed[cut:])
    shift = len(hidden)
    at = out.index(b"PK\x01\x02")  # b.json's record: its offset moves with the inserted bytes
    at = out.index(b"PK\x01\x02", at + 4)
    struct.pack_into("<I", out, at + 42, struct.unpack_from("<I", out, at + 42)[0] + shift)
    end = out.rindex(b"PK\x05\x06")
    struct.pack_into("<I", out, end + 16, struct.unpack_from("<I", out, end + 16)[0] + shift)
    return bytes(out)


def _method_mismatch() -> bytes:
    """The central directory says stored, the local header deflated (stream readers go by the local one)."""
    data = bytearray(zip_bytes([Member("weights.pkl", EVIL)]))
    struct.pack_into("<H", data, 8, 8)
    return bytes(data)


def _object_npy(payload: bytes) -> bytes:
    return npy_bytes("|O", (1,), payload)


def zip_crypto(name: str, data: bytes, password: bytes = b"secret") -> bytes:
    """A zip whose one member is encrypted with PKWARE's traditional cipher (as `zip -e` writes it)."""
    keys = [0x12345678, 0x23456789, 0x34567890]

    def update(byte: int) -> None:
        keys[0] = zlib.crc32(bytes([byte]), keys[0] ^ 0xFFFFFFFF) ^ 0xFFFFFFFF
        keys[1] = ((keys[1] + (keys[0] & 0xFF)) * 134775813 + 1) & 0xFFFFFFFF
        keys[2] = zlib.crc32(bytes([keys[1] >> 24]), keys[2] ^ 0xFFFFFFFF) ^ 0xFFFFFFFF

    for byte in password:
        update(byte)
    crc = zlib.crc32(data)
    plain = bytes(random.Random(7).randrange(256) for _ in range(11)) + bytes([crc >> 24]) + data
    cipher = bytearray()
    for byte in plain:
        temp = (keys[2] | 2) & 0xFFFF
        cipher.append(byte ^ (((temp * (temp ^ 1)) >> 8) & 0xFF))
        update(byte)
    out = bytearray(zip_bytes([Member(name, bytes(cipher), flags=1)]))
    for sig, at in ((b"PK\x03\x04", 14), (b"PK\x01\x02", 16)):  # the CRC and sizes are the plain text's
        pos = out.index(sig)
        struct.pack_into("<I", out, pos + at, crc)
        struct.pack_into("<I", out, pos + at + 8, len(data))
    return bytes(out)


def _polyglot() -> bytes:
    """fickling's polyglots: a pickle, then a zip appended (zipfile finds the zip, pickle.load the pickle)."""
    return EVIL + written({"notes.txt": b"nothing to see"})


def _torch_with(extra: dict[str, bytes]) -> bytes:
    pkl = tensor_pickle(tensors=1)
    return zip_bytes([Member("archive/data.pkl", pkl), Member("archive/byteorder", b"little"),
                      Member("archive/data/0", b"\0" * 64)] + [Member(n, d) for n, d in extra.items()]
                     + [Member("archive/version", b"3\n")])  # fmt: skip


def _evil_torch_last(size: int) -> bytes:
    """A whole (small) torch archive whose data.pkl, written last, calls os.system after the state dict."""
    pkl = tensor_pickle(calling_fragment("os", "system", "id"), tensors=1)
    sparse, _ = torch_archive(size, "data.pkl last", tensors=4, pkl=pkl)
    return sparse.read(0, sparse.size)


def malicious() -> list[Sample]:
    """Every zip sample that holds a pickle which runs code."""
    payload, culprit = picklescan_payload(), "builtins.eval"
    inner = written({"archive/data.pkl": EVIL})
    return [
        Sample("malicious1.pt", written({"data.pkl": payload}), "picklescan malicious1.zip: data.pkl in a zip", culprit),
        Sample("malicious1_0x1.pt", _flagged(0x1), "picklescan 0x1: model/config.pkl, flags claim encryption", culprit),
        Sample("malicious1_0x20.pt", _flagged(0x20), "picklescan 0x20: flags claim patched data", culprit),
        Sample("malicious1_0x40.pt", _flagged(0x40), "picklescan 0x40: flags claim strong encryption", culprit),
        Sample("malicious1_central_directory.pt", _renamed_local(),
               "picklescan central_directory: the local header renamed datap.kl", culprit),
        Sample("malicious1_crc.pt", _bad_crc(), "picklescan crc: the payload edited after the CRC was written",
               culprit),
        Sample("malicious1_wrong_ext.pt", written({"data.txt": payload}), "picklescan wrong_ext: a pickle named data.txt",
               culprit),
        Sample("pytorch_model.bin", written({"data.pkl": payload}), "a plain zip (no torch prefix) named .bin", culprit),
        Sample("model.pt", written({"model.pkl": EVIL}), "fickling: model.pkl in a zip", "os.system"),
        Sample("model.pt", written({"model.pkl": b"\x80\x04K*.", "model.pickle": b"\x80\x04K*.", "model.bin": EVIL}),
               "fickling: every pickle extension in one zip, the payload in model.bin", "os.system"),
        Sample("testzip.pt", written({"pickle.npy": _object_npy(EVIL)}), "fickling: an object .npy in a zip",
               "os.system"),
        Sample("object_arrays.npz", written({"a.npy": npy_bytes("<i8", (1,), b"\0" * 8), "b.npy": _object_npy(EVIL)},
                                            zipfile.ZIP_DEFLATED),
               "picklescan object_arrays_compressed.npz: a deflated object array", "os.system"),
        Sample("model.pt", written({"good.pkl": b"\x80\x04K*.", "bad.pkl": b"\x00\x01corrupt", "evil.pkl": EVIL}),
               "fickling: good, corrupt and evil members side by side", "os.system"),
        Sample("model.npz", _polyglot(), "fickling polyglot: a pickle with a zip appended (np.load unpickles it)", "os.system"),
        Sample("model.pt", written({"inner.zip": inner}), "a zip stored in a zip", "os.system"),
        Sample("model.pt", written({"inner.zip": inner}, zipfile.ZIP_DEFLATED), "a zip deflated in a zip", "os.system"),
        Sample("model.pt", written({"a/b.zip": written({"c.zip": inner})}), "a zip in a zip in a zip", "os.system"),
        Sample("pytorch_model.bin", written({"archive/data.pkl": b"\x80\x02}q\x00.", "archive/extra.zip": inner}),
               "a torch archive carrying a zip member", "os.system"),
        Sample("model.pt", _hidden_entry(), "a local entry the central directory does not list", "os.system"),
        Sample("model.pt", _method_mismatch(), "local header and directory disagree on the method", "os.system"),
        Sample("model.pkl", written({"archive/data.pkl": EVIL}), "a zip named .pkl", "os.system"),
        Sample("arrays.npy", written({"x.npy": _object_npy(EVIL)}), "a zip named .npy (np.load opens it as npz)",
               "os.system"),
        Sample("pytorch_model.bin", _torch_with({"archive/extra/config.pkl": EVIL}),
               "a torch archive with model/config.pkl beside data.pkl", "os.system"),
        Sample("pytorch_model.bin", _torch_with({"archive/hooks": EVIL}), "a pickle under a name with no extension",
               "os.system"),
        Sample("pytorch_model.bin", _torch_with({"archive/cache.joblib": zlib.compress(EVIL)}),
               "a zlib-compressed joblib member", "os.system"),
        Sample("pytorch_model.bin", _torch_with({"archive/state.pkl": _gzip(EVIL)}), "a gzip-compressed member",
               "os.system"),
        Sample("model.pt", zip_bytes([Member("payload.dat", EVIL), Member("x.txt", b"x")], zip64=True),
               "ZIP64 end records on a plain zip", "os.system"),
        Sample("model.pt", written({"data.pkl": EVIL}, zipfile.ZIP_DEFLATED), "a deflated pickle member", "os.system"),
        Sample("pytorch_model.bin", _evil_torch_last(2**20), "data.pkl last in a torch archive", "os.system"),
        Sample("model.pt", written({"notes.txt": _after_a_long_string(70_000)}),
               "a protocol 0 pickle whose first string runs past 64 KiB, named .txt", "os.system"),
        Sample("model.pt", written({"notes.txt": _after_a_long_string(1_000)}, zipfile.ZIP_DEFLATED),
               "a deflated pickle whose first string runs past the first bytes", "os.system"),
        Sample("model.pt", zip_crypto("model.pkl", EVIL), "a pickle truly encrypted (unknown: cannot be read)", None),
    ]  # fmt: skip


def _after_a_long_string(length: int) -> bytes:
    """A protocol 0 pickle that pushes a `length`-character string and drops it before calling os.system."""
    return b"S'" + b"a" * length + b"'\np0\n0" + b"cos\nsystem\n(S'id'\ntR."


def _torchscript() -> bytes:
    """What torch.jit.save writes beside data.pkl: constants.pkl, TorchScript source and its .debug_pkl pickles
    (which name torch.jit._pickle helpers: read by torch.jit's unpickler alone, never by Python's)."""
    code = b"class Net(Module):\n  __parameters__ = []\n  def forward(self: __torch__.Net, x: Tensor) -> Tensor:\n"
    # torch.jit writes its debug pickles with its own helpers, which only its own unpickler resolves
    debug = Ops().glob("torch.jit._pickle", "build_intlist").mark.int1(0).int1(1).raw(b"l").tuple1.reduce.stop.bytes()
    return written({"archive/data.pkl": tensor_pickle(tensors=1), "archive/constants.pkl": b"\x80\x02).",
                    "archive/code/__torch__/model.py": code, "archive/code/__torch__/model.py.debug_pkl": debug,
                    "archive/data/0": bytes(128), "archive/version": b"1"})  # fmt: skip


def _gzip(data: bytes) -> bytes:
    import gzip

    return gzip.compress(data, mtime=0)


def benign() -> list[Sample]:
    """Zips that hold no pickle that runs code: none may be judged dangerous."""
    rng = random.Random(42)
    random_zip = written({"x.tmp": bytes(rng.randrange(256) for _ in range(1024))})
    prefix = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(20)).encode()
    layouts = [torch_archive(2**20, layout, tensors=4)[0] for layout in ("usual", "data.pkl last", "comments")]
    return [
        Sample("docs.pt", written({"README.md": b"# model\n", "config.json": b'{"a": 1}', "logo.png": b"\x89PNG\r\n"}),
               "a zip of text and images"),
        Sample("int_arrays.npz", written({"a.npy": npy_bytes("<i8", (2,), b"\0" * 16)}), "picklescan int_arrays.npz"),
        Sample("int_arrays_compressed.npz", written({"a.npy": npy_bytes("<i8", (2,), b"\0" * 16)}, zipfile.ZIP_DEFLATED),
               "picklescan int_arrays_compressed.npz"),
        Sample("benign_password_protected.pt", zip_crypto("test.txt", b"just some text"),
               "picklescan benign_password_protected.zip"),
        Sample("test_random.npz", prefix + random_zip, "fickling: a random zip with a string before it"),
        Sample("model.pt", written({"model.pkl": b"\x80\x04K*.", "model.pickle": b"\x80\x04K*.", "model.bin": b"\x80\x04K*."}),
               "fickling: safe pickles under every extension"),
        Sample("model.pt", written({"good.pkl": b"\x80\x04]q\x00.", "bad.pkl": b"\x00\x01corrupt_pickle"}),
               "fickling: a good and a corrupt member"),
        Sample("empty.pt", written({}), "an empty zip"),
        Sample("model.pt", _torchscript(), "a TorchScript archive: source code, constants.pkl, debug pickles"),
        Sample("nested.pt", written({"inner.zip": written({"data.pkl": b"\x80\x02}q\x00."})}), "a benign zip in a zip"),
        *[Sample("pytorch_model.bin", s.read(0, s.size), f"a benign torch archive, {layout}")
          for s, layout in zip(layouts, ("usual", "data.pkl last", "comments"), strict=True)],
    ]  # fmt: skip
