"""Reading local files that may be hostile: a checked-out tree or a Hugging Face cache someone else laid out.

Only regular files are read (a FIFO, a device such as /dev/zero, a socket or a directory is refused
before a byte is read, and a FIFO is opened without blocking), never more than a limit, and a file that
must stay inside a tree (a cache's refs) is refused when its symlinks lead out of it. Every refusal is a
`RefusedFile` whose message is one line naming the path and why (a file that cannot be opened at all,
missing or forbidden, is a plain `BadInput`); what an error quotes of a file's content is clipped.

A file is written whole through a temporary file created exclusively beside it (never one left there,
never through a symlink someone planted) and renamed over it.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path

from tracker.errors import BadInput, RefusedFile

SHOWN_CHARS = 200  # how much of a value read from a local file an error line quotes (a line may be megabytes)
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def file_kind(mode: int) -> str:
    """What a file that is not regular is, in words ("a named pipe (FIFO)"), from its `st_mode`."""
    return next((name for test, name in _KINDS if test(mode)), "a special file")


def read_regular_file(path: str | Path, limit_bytes: int, within: str | Path | None = None, what: str = "file") -> bytes:
    """The bytes of `path`, a regular file of at most `limit_bytes`. With `within`, `path` must resolve
    (symlinks followed) to a place inside that directory. Raises RefusedFile otherwise, or when the file
    cannot be opened; `what` names the file in the message ("the lock file")."""
    target = str(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if within is not None:
        target = os.path.realpath(path)
        if not is_inside(target, within):
            raise RefusedFile(str(path), f"a symlink out of {within}", what)
        flags |= getattr(os, "O_NOFOLLOW", 0)  # resolved already: a symlink now is one swapped in since
    try:
        fd = os.open(target, flags)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENXIO):
            raise RefusedFile(str(path), _why_not_opened(err), what) from err
        raise BadInput(f"cannot read {what} {path}: {err.strerror or err}") from err
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise RefusedFile(str(path), f"{file_kind(mode)}, not a regular file", what)
        data = _read_at_most(fd, limit_bytes + 1)
    except OSError as err:
        raise RefusedFile(str(path), err.strerror or str(err), what) from err
    finally:
        os.close(fd)
    if len(data) > limit_bytes:
        raise RefusedFile(str(path), f"larger than {limit_bytes:,} bytes", what)
    return data


def read_text_file(path: str | Path, limit_bytes: int, within: str | Path | None = None, what: str = "file") -> str:
    """`read_regular_file`, decoded as UTF-8; text that is not UTF-8 is refused naming the byte."""
    return decode_utf8(read_regular_file(path, limit_bytes, within, what), path, what)


def decode_utf8(data: bytes, path: str | Path, what: str = "file") -> str:
    """`data` as UTF-8 text, or RefusedFile naming the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise RefusedFile(str(path), f"not UTF-8 text ({err.reason} at byte {err.start})", what) from err


def replace_file(path: str | Path, data: bytes, what: str = "file", mode: int | None = None) -> None:
    """Write `data` as the whole of `path`: into a new file beside it (O_CREAT|O_EXCL, so nothing that
    already exists there, a symlink included, is written through), then renamed over `path` (a symlink at
    `path` is replaced, not followed). `mode`: the new file's permission bits (an edited script keeps its
    execute bit); default, what the umask gives. Raises RefusedFile naming the path when it cannot be written."""
    path = Path(path)
    if path.is_dir():
        raise RefusedFile(str(path), "a directory, not a file", what)
    fd, tmp = _exclusive_temporary(path, what)
    try:
        if mode is not None:
            os.fchmod(fd, stat.S_IMODE(mode))
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except OSError as err:
        _remove_quietly(tmp)
        raise RefusedFile(str(path), f"cannot be written: {err.strerror or err}", what) from err
    except BaseException:
        _remove_quietly(tmp)
        raise


def clipped(text: str, limit: int = SHOWN_CHARS) -> str:
    """`text` from a local file as an error line shows it: at most `limit` characters, then its length."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def quoted(value: object, limit: int = SHOWN_CHARS) -> str:
    """A value read from a local file as an error line quotes it: its repr, clipped like `clipped`."""
    shown = repr(value)
    if len(shown) <= limit:
        return shown
    size = len(value) if isinstance(value, str) else len(shown)
    return f"{shown[:limit]}... ({size:,} characters)"


def is_inside(path: str | Path, directory: str | Path) -> bool:
    """Whether `path`, symlinks resolved, is `directory` (resolved too) or lies under it."""
    real, root = os.path.realpath(path), os.path.realpath(directory)
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def _exclusive_temporary(path: Path, what: str) -> tuple[int, str]:
    """A new file beside `path`, opened for writing, that did not exist before (permissions as the umask
    gives a new file, like the file the user would write)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(10):
        tmp = str(path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp"))
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
        except NotADirectoryError as err:
            raise RefusedFile(str(path), f"{path.parent} is not a directory", what) from err
        except OSError as err:
            raise RefusedFile(str(path), f"cannot be written: {err.strerror or err}", what) from err
    raise RefusedFile(str(path), f"cannot create a temporary file in {path.parent}", what)


def _remove_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _read_at_most(fd: int, size: int) -> bytes:
    chunks, left = [], size
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _why_not_opened(err: OSError) -> str:
    if err.errno == errno.ELOOP:
        return "a symlink loop, or a symlink swapped in while it was read"
    return "a socket, not a regular file"  # ENXIO: what open() says of a socket
