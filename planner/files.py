"""Files the planner writes (CSV, sweep journal, PNG, docs pages): created safely, whatever is at the path.

The rules (docs/reliability.md, "Threat model"): never replace or write through a path that is not a regular file (a
device such as /dev/null, a FIFO, a directory, a symlink); write a whole file to a temporary file created
exclusively (O_EXCL, no symlink followed) in the target's directory and rename it over the target, so that a reader
never sees half a file and a link planted at a guessable side name is never followed; append to a journal opened
without following links; one writer per sweep journal (an advisory lock). Every failure is an InvalidInput naming the
flag and the path.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from planner.errors import InvalidInput


def _kind(mode: int) -> str:
    for test, word in ((stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return word
    return "not a regular file"


def check_output(path: str | Path, flag: str) -> Path:
    """`path` as an output: its directory exists and is writable, and nothing but a regular file (or nothing) is at
    the path itself (a symlink is refused, not followed). Called before any work starts."""
    p = Path(path)
    if not str(path) or str(path).endswith(os.sep):
        raise InvalidInput(f"{flag} {str(path)!r}: give a file name")
    if any(ord(c) < 32 or ord(c) == 127 for c in str(path)):
        raise InvalidInput(f"{flag} {str(path)!r}: the name has a control character")
    parent = p.parent
    try:
        pst = os.stat(parent)
    except OSError:
        raise InvalidInput(f"{flag} {path}: directory {parent} does not exist") from None
    if not stat.S_ISDIR(pst.st_mode):
        raise InvalidInput(f"{flag} {path}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InvalidInput(f"{flag} {path}: directory {parent} is not writable")
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return p
    except OSError as exc:
        raise InvalidInput(f"{flag} {path}: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise InvalidInput(f"{flag} {path} is {_kind(st.st_mode)}; the planner only creates or replaces regular files")
    if not os.access(p, os.W_OK):
        raise InvalidInput(f"{flag} {path}: not writable")
    return p


def write_atomic(path: str | Path, write: Callable[[Any], object], flag: str, binary: bool = False) -> Path:
    """Write a whole file: `write(fh)` fills a temporary file created exclusively beside `path` (mkstemp: O_EXCL,
    a random name, mode 0600 until renamed), which then replaces `path` in one rename. The path is checked again just
    before the rename, so a device, FIFO or link placed there meanwhile is refused, not replaced."""
    p = check_output(path, flag)
    try:
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    except OSError as exc:
        raise InvalidInput(f"cannot write {flag} {path}: {exc.strerror}") from None
    try:
        fh: IO[Any] = os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", newline="", encoding="utf-8")
        with fh:
            write(fh)
            fh.flush()
            os.fchmod(fh.fileno(), 0o644 & ~_umask())
        check_output(p, flag)
        os.replace(tmp, p)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise InvalidInput(f"cannot write {flag} {path}: {exc.strerror}") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return p


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text(path: str | Path, text: str, flag: str) -> Path:
    return write_atomic(path, lambda fh: fh.write(text), flag)


class Journal:
    """A sweep's journal FILE.plans.jsonl, opened for appending without following a link, refused unless it is a
    regular file, and locked (flock, exclusive, non-blocking) so that a second sweep on the same CSV is a one-line
    error instead of interleaved lines. Opening never truncates: `start_fresh()` empties it, called only once the
    sweep has validated its arguments and when the user did not ask to --resume."""

    def __init__(self, path: Path, flag: str = "--csv", what: str = "sweep"):
        import fcntl

        self.path = path
        check_output(path, f"{flag} journal")
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(path, flags | os.O_NONBLOCK, 0o644)
        except OSError as exc:
            raise InvalidInput(f"cannot open the {what} journal {path}: {exc.strerror}") from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise InvalidInput(f"the {what} journal {path} is {_kind(st.st_mode)}; remove it or give another {flag}")
        os.set_blocking(fd, True)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise InvalidInput(f"another {what} is writing {path} (the journal of this {flag}); wait for it or "
                               f"give another {flag}") from None
        self._fh: IO[str] = os.fdopen(fd, "a", encoding="utf-8")

    def start_fresh(self) -> None:
        self._fh.flush()
        os.ftruncate(self._fh.fileno(), 0)

    def write(self, line: str) -> None:
        self._fh.write(line)
        self._fh.flush()

    def sync(self) -> None:
        """What was written is on the disk (fsync), not only in the kernel's cache: it survives a power loss."""
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        self._fh.close()  # closing releases the lock


@contextlib.contextmanager
def journal(path: Path | None) -> Iterator[Journal | None]:
    j = Journal(path) if path is not None else None
    try:
        yield j
    finally:
        if j is not None:
            j.close()


def safe_file_part(name: str) -> str:
    """A user's name (a hardware name) as one path component: letters, digits, '.', '_', '-'; anything else '_'
    (no '/', no leading '.', no control character)."""
    out = "".join(c if (c.isascii() and c.isalnum()) or c in "._-" else "_" for c in name).lstrip(".")
    return out or "_"


def safe_file_parts(names: Sequence[str]) -> list[str]:
    """safe_file_part of each name, made distinct: a name whose safe form an earlier one already took (`a/b` and
    `a_b` both give `a_b`) gets the first free `-2`, `-3`, ... suffix, so that no figure replaces another."""
    taken: set[str] = set()
    out = []
    for name in names:
        base = part = safe_file_part(name)
        k = 1
        while part in taken:
            k += 1
            part = f"{base}-{k}"
        taken.add(part)
        out.append(part)
    return out


def installed_package() -> bool:
    """True when planner runs from an installed package (site-packages), not from a source checkout: the
    repository's docs/ is then not beside it, and `--write` needs an explicit --out directory."""
    root = Path(__file__).resolve().parent.parent
    return not ((root / "pyproject.toml").is_file() and (root / "docs").is_dir())
