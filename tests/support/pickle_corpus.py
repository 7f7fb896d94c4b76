"""The malicious corpus: pickles and archives built as bytes with the techniques scanners' advisories
describe (picklescan's GHSA advisories and issues, fickling's and modelscan's bypass reports, JFrog's
zip findings). Nothing here is ever loaded: each sample is (file name, bytes, what it demonstrates), and
the detection tests and benchmarks/bench_formats_pickle.py require every one to be flagged.
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from dataclasses import dataclass

from tests.support.pickle_bytes import Member, Ops, calling, zip_bytes


@dataclass(frozen=True)
class Sample:
    """One malicious file: its name (the suffix picks the reader), its bytes, and the technique."""

    path: str
    data: bytes
    technique: str
    culprit: str | None = None  # the callable the verdict must name, when one is named at all


def _classic(module: str, name: str, *args: str) -> Sample:
    return Sample("model.pkl", calling(module, name, *args), f"{module}.{name} called by GLOBAL+REDUCE",
                  f"{module}.{name}")  # fmt: skip


def _stack_global(module: str, name: str, *args: str) -> bytes:
    ops = Ops(4).short_string(module).memoize.short_string(name).memoize.stack_global.memoize.mark
    for arg in args:
        ops.short_string(arg)
    return ops.tuple_.reduce.stop.bytes()


def direct_calls() -> list[Sample]:
    """The callables deny lists name, each called the plain way."""
    targets = [
        ("os", "system"), ("posix", "system"), ("nt", "system"), ("subprocess", "Popen"),
        ("subprocess", "check_output"), ("builtins", "eval"), ("builtins", "exec"), ("builtins", "compile"),
        ("builtins", "__import__"), ("builtins", "open"), ("builtins", "breakpoint"), ("__builtin__", "eval"),
        ("runpy", "_run_code"), ("socket", "create_connection"), ("importlib", "import_module"),
        ("marshal", "loads"), ("types", "FunctionType"), ("types", "CodeType"), ("ctypes", "CDLL"),
        ("shutil", "rmtree"), ("sys", "exit"), ("pty", "spawn"), ("webbrowser", "open"),
        ("code", "InteractiveInterpreter"), ("pdb", "run"), ("bdb", "Bdb"), ("timeit", "timeit"),
        ("cProfile", "run"), ("profile", "run"), ("asyncio.unix_events", "_UnixSubprocessTransport"),
        ("asyncio", "create_subprocess_shell"), ("pip", "main"), ("pip._internal", "main"),
        ("torch.hub", "load"), ("torch", "load"), ("torch.serialization", "load"),
        ("numpy.testing._private.utils", "runstring"), ("pydoc", "locate"), ("pkgutil", "resolve_name"),
        ("ensurepip", "_run_pip"), ("operator", "attrgetter"), ("operator", "methodcaller"),
        ("_operator", "attrgetter"), ("pickle", "loads"), ("_pickle", "loads"), ("idlelib.pyshell", "ModifiedInterpreter"),
        ("torch._dynamo.guards", "GuardBuilder.get"), ("torch.fx.experimental.symbolic_shapes", "ShapeEnv.evaluate_guards_expression"),
        ("torch.utils.bottleneck.__main__", "run_cprofile"), ("uuid", "_get_command_stdout"),
    ]  # fmt: skip
    return [_classic(module, name, "id") for module, name in targets]


def indirect_forms() -> list[Sample]:
    """The same calls written so that a scanner reading opcodes naively misses them."""
    samples = [
        Sample("model.pkl", _stack_global("os", "system", "id"), "STACK_GLOBAL with memoised strings", "os.system"),
        Sample("model.pkl", Ops(4).short_string("os").memoize.short_string("junk").pop.short_string("system")
               .stack_global.mark.short_string("id").tuple_.reduce.stop.bytes(),
               "STACK_GLOBAL after a string pushed and popped (picklescan's look-back)", "os.system"),
        Sample("model.pkl", Ops(4).short_string("torch").put(0).pop.short_string("os").put(0).pop.get(0)
               .short_string("system").stack_global.mark.short_string("id").tuple_.reduce.stop.bytes(),
               "memo slot written twice: the second string is the module", "os.system"),
        Sample("model.pkl", Ops(4).short_string("torch").short_string("_utils.os.system").stack_global.mark
               .short_string("id").tuple_.reduce.stop.bytes(),
               "a dotted name reaching os through a safe module's attributes", "torch._utils.os.system"),
        Sample("model.pkl", Ops(4).short_string("collections").short_string("__builtins__.eval").stack_global.mark
               .short_string("1").tuple_.reduce.stop.bytes(), "a dunder attribute path to eval",
               "collections.__builtins__.eval"),
        Sample("model.pkl", Ops(4).short_string("torch").short_string("hub.load").stack_global.mark
               .short_string("x").tuple_.reduce.stop.bytes(), "torch.hub reached as torch + hub.load", "torch.hub.load"),
        Sample("model.pkl", Ops(None).mark.text_string("id").inst("os", "system").stop.bytes(),
               "protocol 0 INST", "os.system"),
        Sample("model.pkl", b"cos\nsystem\n(S'id'\ntR.", "protocol 0 text GLOBAL + REDUCE", "os.system"),
        Sample("model.pkl", Ops().mark.glob("os", "system").string("id").obj.stop.bytes(), "OBJ", "os.system"),
        Sample("model.pkl", Ops().glob("subprocess", "Popen").mark.string("id").tuple_.newobj.stop.bytes(),
               "NEWOBJ", "subprocess.Popen"),
        Sample("model.pkl", Ops(4).glob("subprocess", "Popen").mark.string("id").tuple_.empty_dict.newobj_ex.stop.bytes(),
               "NEWOBJ_EX", "subprocess.Popen"),
        Sample("model.pkl", Ops().glob("builtins", "getattr").mark.glob("importlib", "import_module").mark
               .string("os").tuple_.reduce.string("system").tuple_.reduce.mark.string("id").tuple_.reduce.stop.bytes(),
               "getattr(import_module('os'), 'system')('id')", "builtins.getattr"),
        Sample("model.pkl", Ops().glob("functools", "partial").mark.glob("os", "system").string("id").tuple_.reduce
               .empty_tuple.reduce.stop.bytes(), "functools.partial of os.system", "os.system"),
        Sample("model.pkl", Ops().glob("pickle", "loads").mark.binbytes(calling("os", "system", "id")).tuple_.reduce
               .stop.bytes(), "a nested pickle through pickle.loads", "pickle.loads"),
        Sample("model.pkl", Ops().glob("types", "SimpleNamespace").empty_tuple.reduce.none.empty_dict
               .string("__setstate__").glob("builtins", "exec").setitem.tuple2.build.string("print(1)").build.stop.bytes(),
               "BUILD setting __setstate__ to exec, then BUILD calling it", "builtins.exec"),
        Sample("model.pkl", Ops().ext1(1).mark.string("id").tuple_.reduce.stop.bytes(), "EXT1 registry code", None),
        Sample("model.pkl", Ops().ext2(0x1234).empty_tuple.reduce.stop.bytes(), "EXT2 registry code", None),
        Sample("model.pkl", Ops().ext4(-7).empty_tuple.reduce.stop.bytes(), "EXT4 registry code", None),
        Sample("model.pkl", Ops(4).glob("builtins", "str").empty_tuple.reduce.short_string("system").stack_global
               .empty_tuple.reduce.stop.bytes(), "STACK_GLOBAL whose module is a call's result", None),
        Sample("model.pkl", Ops().glob("__main__", "Payload").empty_tuple.reduce.stop.bytes(),
               "a class of the saving script (unknown: no rule can know it)", "__main__.Payload"),
        Sample("model.pkl", Ops().empty_dict.stop.bytes() + calling("os", "system", "id"),
               "a second pickle after the first STOP", "os.system"),
    ]  # fmt: skip
    return samples


def _torch_pickle(payload: bytes) -> bytes:
    """A data.pkl that rebuilds one tensor and also runs `payload` (a pickle fragment without PROTO/STOP)."""
    return (Ops().empty_dict.string("w").glob("torch._utils", "_rebuild_tensor_v2").mark.mark.string("storage")
            .glob("torch", "FloatStorage").string("0").string("cpu").int1(4).tuple_.binpersid.int1(0)
            .int1(4).tuple1.int1(1).tuple1.raw(b"\x89").glob("collections", "OrderedDict").empty_tuple.reduce
            .tuple_.reduce.setitem.string("x").raw(payload).setitem.stop.bytes())  # fmt: skip


BENIGN_PKL = _torch_pickle(Ops(None).none.bytes())
EVIL_PKL = _torch_pickle(Ops(None).call("os", "system", "id").bytes())


def zip_tricks() -> list[Sample]:
    """Torch zips laid out to hide the payload from a scanner that reads them naively."""
    storage = Member("archive/data/0", b"\0" * 16)
    samples = [
        Sample("pytorch_model.bin", zip_bytes([Member("archive/data.pkl", EVIL_PKL), storage]),
               "payload inside a torch checkpoint's data.pkl", "os.system"),
        Sample("pytorch_model.bin", zip_bytes([Member("archive/data.pkl", EVIL_PKL, deflate=True), storage]),
               "deflated data.pkl", "os.system"),
        Sample("pytorch_model.bin", zip_bytes([Member("archive/data.pkl", BENIGN_PKL), storage,
                                               Member("archive/data.pkl", EVIL_PKL)]),
               "the entry named twice: the second data.pkl is the payload", "os.system"),
        Sample("pytorch_model.bin", zip_bytes([Member("evil/data.pkl", EVIL_PKL), Member("archive/data.pkl", BENIGN_PKL),
                                               storage]),
               "two prefixes: torch opens the first entry's, a naive scanner the usual 'archive'", "os.system"),
        Sample("pytorch_model.bin", zip_bytes([Member("archive/data.pkl", BENIGN_PKL), storage,
                                               Member("archive/constants.pkl", calling("os", "system", "id"))]),
               "payload in another .pkl entry", "os.system"),
        Sample("pytorch_model.bin", zip_bytes([Member("archive/data.pkl", EVIL_PKL, local_name="archive/readme.txt"),
                                               storage]),
               "local header naming another file than the central directory", "os.system"),
        Sample("pytorch_model.bin", _bad_crc(zip_bytes([Member("archive/data.pkl", EVIL_PKL), storage])),
               "a wrong CRC (zipfile refuses the entry, torch reads it)", "os.system"),
        Sample("pytorch_model.bin", zip_bytes([Member("archive/data.pkl", EVIL_PKL), storage], zip64=True),
               "ZIP64 end records", "os.system"),
        Sample("pytorch_model.bin", calling("os", "system", "id") + zip_bytes([Member("archive/data.pkl", BENIGN_PKL)]),
               "a pickle before a benign zip: torch loads it as a legacy file", "os.system"),
        Sample("consolidated.00.pth", _legacy(Ops(None).call("os", "system", "id").bytes()),
               "legacy torch format with the payload in the data pickle", "os.system"),
    ]  # fmt: skip
    return samples


def _bad_crc(data: bytes) -> bytes:
    """The same zip with the first entry's CRC wrong in both headers."""
    out = bytearray(data)
    out[14:18] = b"\xde\xad\xbe\xef"
    at = data.index(b"PK\x01\x02")
    out[at + 16 : at + 20] = b"\xde\xad\xbe\xef"
    return bytes(out)


def _legacy(payload: bytes) -> bytes:
    """torch's pre-1.6 layout: magic number, protocol version and sys info pickles, then the data."""
    magic = Ops().raw(b"\x8a\x0a" + (0x1950A86A20F9469CFC6C).to_bytes(10, "little")).stop.bytes()
    version = Ops().raw(b"M" + struct.pack("<H", 1001)).stop.bytes()
    sys_info = Ops().empty_dict.string("little_endian").raw(b"\x88").setitem.stop.bytes()
    data = Ops().empty_dict.string("w").raw(payload).setitem.stop.bytes()
    return magic + version + sys_info + data + Ops().empty_list.stop.bytes()


def other_formats() -> list[Sample]:
    """Payloads in joblib, numpy and Keras files."""
    evil = calling("os", "system", "id")
    header = b"{'descr': '|O', 'fortran_order': False, 'shape': (1,), }"
    header += b" " * (63 - (10 + len(header)) % 64) + b"\n"
    npy = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + evil
    keras = io.BytesIO()
    with zipfile.ZipFile(keras, "w") as archive:
        archive.writestr("config.json", b'{"class_name": "Sequential", "config": {"layers": [{"class_name": "Lambda",'
                         b' "config": {"name": "lambda", "function": {"class_name": "__lambda__", "config":'
                         b' {"code": "4wEAAAAAAAAA"}}}}]}}')  # fmt: skip
        archive.writestr("metadata.json", b"{}")
    return [
        Sample("model.joblib", evil, "joblib file", "os.system"),
        Sample("model.joblib", zlib.compress(evil), "zlib-compressed joblib file", "os.system"),
        Sample("array.npy", npy, "object .npy: a pickle after the header", "os.system"),
        Sample("arrays.npz", zip_bytes([Member("a.npy", npy)]), "object array inside .npz", "os.system"),
        Sample("model.keras", keras.getvalue(), "Keras Lambda layer", "keras.layers.Lambda"),
    ]


def corpus() -> list[Sample]:
    """Every malicious sample."""
    return direct_calls() + indirect_forms() + zip_tricks() + other_formats()
