"""A pickle read opcode by opcode, never loaded: what it imports and calls, and the tensors it rebuilds.

The standard library's `pickletools.genops` decodes the opcodes (it only parses; it never imports or
calls anything). Over them runs a symbolic stack machine: strings, numbers, tuples, lists and dicts
are kept as values, an imported callable as a `Global`, the result of a call as a `Call` that remembers
what was called with what, a persistent id as a `Persistent`. The memo (PUT/GET/MEMOIZE) holds
references to those values, so STACK_GLOBAL's module and name are resolved however they were built.
Work is bounded: opcodes, stack depth and memo entries have caps; a pickle that reaches one is
reported as incomplete with a note, judged on what was read.
"""

from __future__ import annotations

import io
import pickletools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

MAX_OPCODES = 5_000_000
MAX_STACK = 1_000_000
MAX_MARKS = 10_000
MAX_MEMO = 1_000_000
MAX_PICKLES = 16
MAX_NESTING = 64


@dataclass(frozen=True)
class Limits:
    """The caps one scan runs under."""

    opcodes: int = MAX_OPCODES
    stack: int = MAX_STACK
    marks: int = MAX_MARKS
    memo: int = MAX_MEMO
    pickles: int = MAX_PICKLES


@dataclass
class Global:
    """A callable the pickle imports (GLOBAL, STACK_GLOBAL, INST, EXT*), where and how it is used."""

    module: str
    name: str
    offset: int
    opcode: str
    uses: set[str] = field(default_factory=set)

    @property
    def dotted(self) -> str:
        return f"{self.module}.{self.name}"


@dataclass(eq=False)
class Call:
    """The object a call built: `func(*args)`, then whatever SETITEM(S)/APPEND(S)/BUILD did to it."""

    func: Any
    args: Any
    offset: int
    items: list[tuple[Any, Any]] = field(default_factory=list)
    appended: list[Any] = field(default_factory=list)
    state: Any = None


@dataclass(eq=False)
class Persistent:
    """A persistent id (PERSID/BINPERSID): in torch files, a storage `('storage', type, key, location, numel)`."""

    pid: Any
    offset: int


@dataclass(eq=False)
class PickledDict:
    items: list[tuple[Any, Any]] = field(default_factory=list)


@dataclass(eq=False)
class PickledList:
    items: list[Any] = field(default_factory=list)


class Unknown:
    """A value the walk does not model (a buffer, a missing memo entry)."""


UNKNOWN = Unknown()


class _Stop(Exception):
    """A cap reached or the bytes stop being a pickle: the walk ends with a note."""


@dataclass
class PickleScan:
    """What a walk over one stream of concatenated pickles found."""

    imports: list[Global] = field(default_factory=list)
    dynamic_calls: list[tuple[int, str]] = field(default_factory=list)  # (offset, what was called)
    persistent_ids: list[Persistent] = field(default_factory=list)
    results: list[Any] = field(default_factory=list)  # each pickle's top-level value
    opcodes: int = 0
    end: int = 0  # where the walk stopped: after the last STOP, or where it failed
    complete: bool = True
    notes: list[str] = field(default_factory=list)
    exhausted: bool = False  # the walk used up the bytes it was given: more of the file could say more


def scan_pickle(data: bytes, limits: Limits = Limits(), max_pickles: int | None = None) -> PickleScan:
    """Walk `data` (one or more pickles back to back) without executing any of it."""
    scan = PickleScan()
    stream = io.BytesIO(data)
    count = 0
    while stream.tell() < len(data):
        if count >= (max_pickles or limits.pickles):
            if max_pickles is None:
                scan.complete = False
                scan.notes.append(f"stopped after {count} pickles; {len(data) - stream.tell():,} bytes not read")
            break
        machine = _Machine(scan, limits)
        start = stream.tell()
        try:
            machine.run(pickletools.genops(stream), start)
        except _Stop as stop:
            scan.complete = False
            scan.notes.append(str(stop))
            scan.end = machine.position
            return scan
        except Exception as err:  # noqa: BLE001 - genops raises ValueError, struct.error, UnicodeDecodeError...: all "not a pickle here"
            scan.complete = False
            scan.exhausted = stream.tell() >= len(data)  # cut short by the end of the bytes, not by a bad opcode
            scan.notes.append(f"not a pickle from byte {machine.position:,}: {err}")
            scan.end = machine.position
            return scan
        count += 1
        scan.end = stream.tell()
    else:
        scan.exhausted = True  # every byte walked: a longer read could hold another pickle
    return scan


class _Machine:
    """The symbolic stack machine over one pickle."""

    def __init__(self, scan: PickleScan, limits: Limits) -> None:
        self.scan, self.limits = scan, limits
        self.stack: list[Any] = []
        self.marks: list[list[Any]] = []
        self.memo: dict[int, Any] = {}
        self.position = 0

    def run(self, opcodes: Iterator[tuple[Any, Any, int | None]], start: int) -> None:
        """Every opcode of one pickle through its handler (the hot loop: kept flat on purpose)."""
        scan, limits, handlers = self.scan, self.limits, _HANDLERS
        for opcode, arg, pos in opcodes:
            self.position = pos = start if pos is None else pos
            scan.opcodes += 1
            if scan.opcodes > limits.opcodes:
                raise _Stop(f"stopped at byte {pos:,}: over the {limits.opcodes:,}-opcode cap")
            handler = handlers.get(opcode.name)
            if handler is None:
                raise _Stop(f"stopped at byte {pos:,}: opcode {opcode.name} is not modelled")
            handler(self, arg, pos)
            if len(self.stack) > limits.stack:
                raise _Stop(f"stopped at byte {pos:,}: over the {limits.stack:,}-item stack cap")

    # stack primitives
    def push(self, value: Any) -> None:
        self.stack.append(value)

    def pop(self) -> Any:
        if not self.stack:
            raise _Stop(f"stopped at byte {self.position:,}: pops an empty stack")
        return self.stack.pop()

    def top(self) -> Any:
        if not self.stack:
            raise _Stop(f"stopped at byte {self.position:,}: reads an empty stack")
        return self.stack[-1]

    def pop_mark(self) -> list[Any]:
        if not self.marks:
            raise _Stop(f"stopped at byte {self.position:,}: no MARK to pop to")
        items, self.stack = self.stack, self.marks.pop()
        return items

    def imported(self, module: Any, name: Any, pos: int, opcode: str) -> Global:
        if not isinstance(module, str) or not isinstance(name, str):
            what = f"{describe(module)} . {describe(name)}"
            module, name = "<unresolved>", what[:200]
        found = Global(module, name, pos, opcode, {"imported"})
        self.scan.imports.append(found)
        return found

    def call(self, func: Any, args: Any, pos: int, use: str = "called") -> Call:
        if isinstance(func, Global):
            func.uses.add(use)
        else:
            self.scan.dynamic_calls.append((pos, describe(func)[:200]))
        return Call(func, args, pos)


def describe(value: Any, depth: int = 0) -> str:
    """A short, bounded text for a symbolic value (for notes and dynamic calls)."""
    if depth > 3:
        return "..."
    if isinstance(value, Global):
        return value.dotted
    if isinstance(value, Call):
        return f"result of {describe(value.func, depth + 1)}"
    if isinstance(value, str | bytes | int | float | bool) or value is None:
        return repr(value)[:60]
    return type(value).__name__


def _op_mark(m: _Machine, arg: Any, pos: int) -> None:
    if len(m.marks) >= m.limits.marks:
        raise _Stop(f"stopped at byte {pos:,}: over the {m.limits.marks:,}-deep MARK cap")
    m.marks.append(m.stack)
    m.stack = []


def _op_stop(m: _Machine, arg: Any, pos: int) -> None:
    m.scan.results.append(m.pop())


def _op_pop(m: _Machine, arg: Any, pos: int) -> None:
    if m.stack:
        m.stack.pop()
    else:
        m.pop_mark()


def _op_put(m: _Machine, arg: Any, pos: int) -> None:
    key = len(m.memo) if arg is None else arg
    if key not in m.memo and len(m.memo) >= m.limits.memo:
        raise _Stop(f"stopped at byte {pos:,}: over the {m.limits.memo:,}-entry memo cap")
    m.memo[key] = m.top()


def _op_get(m: _Machine, arg: Any, pos: int) -> None:
    if arg not in m.memo:
        m.scan.notes.append(f"byte {pos:,}: memo entry {arg} read before it is written")
    m.push(m.memo.get(arg, UNKNOWN))


def _op_global(m: _Machine, arg: Any, pos: int) -> None:
    module, _, name = str(arg).partition(" ")
    m.push(m.imported(module, name, pos, "GLOBAL"))


def _op_stack_global(m: _Machine, arg: Any, pos: int) -> None:
    name = m.pop()
    module = m.pop()
    m.push(m.imported(module, name, pos, "STACK_GLOBAL"))


def _op_ext(m: _Machine, arg: Any, pos: int) -> None:
    m.push(m.imported("<extension registry>", str(arg), pos, "EXT"))


def _op_inst(m: _Machine, arg: Any, pos: int) -> None:
    module, _, name = str(arg).partition(" ")
    args = tuple(m.pop_mark())
    m.push(m.call(m.imported(module, name, pos, "INST"), args, pos))


def _op_obj(m: _Machine, arg: Any, pos: int) -> None:
    items = m.pop_mark()
    if not items:
        raise _Stop(f"stopped at byte {pos:,}: OBJ without a class")
    m.push(m.call(items[0], tuple(items[1:]), pos))


def _op_reduce(m: _Machine, arg: Any, pos: int) -> None:
    args = m.pop()
    m.push(m.call(m.pop(), args, pos))


def _op_newobj(m: _Machine, arg: Any, pos: int) -> None:
    args = m.pop()
    m.push(m.call(m.pop(), args, pos, use="new"))  # cls.__new__(cls, *args): __init__ does not run


def _op_newobj_ex(m: _Machine, arg: Any, pos: int) -> None:
    kwargs, args = m.pop(), m.pop()
    m.push(m.call(m.pop(), (args, kwargs), pos, use="new"))


def _op_build(m: _Machine, arg: Any, pos: int) -> None:
    state = m.pop()
    target = m.top()
    if isinstance(target, Call):
        if isinstance(target.func, Global):
            target.func.uses.add("__setstate__")
        target.state = state
    elif isinstance(target, Global):
        target.uses.add("__setstate__")


def _op_persid(m: _Machine, arg: Any, pos: int) -> None:
    found = Persistent(arg, pos)
    m.scan.persistent_ids.append(found)
    m.push(found)


def _op_binpersid(m: _Machine, arg: Any, pos: int) -> None:
    found = Persistent(m.pop(), pos)
    m.scan.persistent_ids.append(found)
    m.push(found)


def _setitems(m: _Machine, target: Any, pairs: list[tuple[Any, Any]]) -> None:
    if isinstance(target, PickledDict):
        target.items.extend(pairs)
    elif isinstance(target, Call):
        if isinstance(target.func, Global):
            target.func.uses.add("__setitem__")
        target.items.extend(pairs)


def _appends(m: _Machine, target: Any, values: list[Any]) -> None:
    if isinstance(target, PickledList):
        target.items.extend(values)
    elif isinstance(target, Call):
        if isinstance(target.func, Global):
            target.func.uses.add("append")
        target.appended.extend(values)


def _op_setitem(m: _Machine, arg: Any, pos: int) -> None:
    value, key = m.pop(), m.pop()
    _setitems(m, m.top(), [(key, value)])


def _op_setitems(m: _Machine, arg: Any, pos: int) -> None:
    items = m.pop_mark()
    _setitems(m, m.top(), list(zip(items[::2], items[1::2], strict=False)))


def _op_dict(m: _Machine, arg: Any, pos: int) -> None:
    items = m.pop_mark()
    m.push(PickledDict(list(zip(items[::2], items[1::2], strict=False))))


def _op_append(m: _Machine, arg: Any, pos: int) -> None:
    value = m.pop()
    _appends(m, m.top(), [value])


def _op_appends(m: _Machine, arg: Any, pos: int) -> None:
    items = m.pop_mark()
    _appends(m, m.top(), items)


def _tuple_of(n: int) -> Callable[[_Machine, Any, int], None]:
    def handler(m: _Machine, arg: Any, pos: int) -> None:
        items = [m.pop() for _ in range(n)][::-1]
        m.push(tuple(items))

    return handler


_CONSTANTS = {
    "INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4", "STRING", "BINSTRING", "SHORT_BINSTRING",
    "BINBYTES", "SHORT_BINBYTES", "BINBYTES8", "BYTEARRAY8", "UNICODE", "SHORT_BINUNICODE", "BINUNICODE",
    "BINUNICODE8", "FLOAT", "BINFLOAT",
}  # fmt: skip

def _op_constant(m: _Machine, arg: Any, pos: int) -> None:
    m.stack.append(arg)


def _op_nothing(m: _Machine, arg: Any, pos: int) -> None:
    """PROTO, FRAME, READONLY_BUFFER: nothing to model."""


_HANDLERS = {
    **dict.fromkeys(_CONSTANTS, _op_constant),
    **dict.fromkeys(("PROTO", "FRAME", "READONLY_BUFFER"), _op_nothing),
    "MARK": _op_mark,
    "STOP": _op_stop,
    "POP": _op_pop,
    "POP_MARK": lambda m, arg, pos: m.pop_mark(),
    "DUP": lambda m, arg, pos: m.push(m.top()),
    "NONE": lambda m, arg, pos: m.push(None),
    "NEWTRUE": lambda m, arg, pos: m.push(True),
    "NEWFALSE": lambda m, arg, pos: m.push(False),
    "NEXT_BUFFER": lambda m, arg, pos: m.push(UNKNOWN),
    "EMPTY_LIST": lambda m, arg, pos: m.push(PickledList()),
    "EMPTY_SET": lambda m, arg, pos: m.push(PickledList()),
    "EMPTY_DICT": lambda m, arg, pos: m.push(PickledDict()),
    "EMPTY_TUPLE": lambda m, arg, pos: m.push(()),
    "LIST": lambda m, arg, pos: m.push(PickledList(m.pop_mark())),
    "FROZENSET": lambda m, arg, pos: m.push(PickledList(m.pop_mark())),
    "TUPLE": lambda m, arg, pos: m.push(tuple(m.pop_mark())),
    "TUPLE1": _tuple_of(1),
    "TUPLE2": _tuple_of(2),
    "TUPLE3": _tuple_of(3),
    "DICT": _op_dict,
    "SETITEM": _op_setitem,
    "SETITEMS": _op_setitems,
    "APPEND": _op_append,
    "APPENDS": _op_appends,
    "ADDITEMS": _op_appends,
    "MEMOIZE": _op_put,
    "PUT": _op_put,
    "BINPUT": _op_put,
    "LONG_BINPUT": _op_put,
    "GET": _op_get,
    "BINGET": _op_get,
    "LONG_BINGET": _op_get,
    "GLOBAL": _op_global,
    "STACK_GLOBAL": _op_stack_global,
    "EXT1": _op_ext,
    "EXT2": _op_ext,
    "EXT4": _op_ext,
    "INST": _op_inst,
    "OBJ": _op_obj,
    "REDUCE": _op_reduce,
    "NEWOBJ": _op_newobj,
    "NEWOBJ_EX": _op_newobj_ex,
    "BUILD": _op_build,
    "PERSID": _op_persid,
    "BINPERSID": _op_binpersid,
}
