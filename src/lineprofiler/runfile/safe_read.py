"""Reading a file of a run directory that someone else may have planted: the one way every command
reads worker files, sidecars and summaries.

A run directory can be shared with other local users, and reading it must not hang, follow a link
out of it, or allocate what the file merely claims. ``open_regular`` opens without following a
link (O_NOFOLLOW), without blocking (O_NONBLOCK: a FIFO), without leaking the fd into a child
(O_CLOEXEC), and accepts only a regular file with no holes, refused above a limit: every byte it
hands out is one the file really holds on disk, so what a reader allocates is bounded by what the
writer paid for, and by the limit. ``read_regular`` reads such a file whole, ``read_head`` its
first bytes, ``read_range`` a slice of it.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_OPEN_FLAGS = (
    os.O_RDONLY
    | os.O_NONBLOCK
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_NOCTTY", 0)
)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIR_FLAGS = getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_CHUNK = 1 << 20


class UnsafeFile(Exception):
    """A file that is not a plain regular file of acceptable size; the message says why."""


class open_regular:
    """``(fd, size)`` of ``path`` opened read-only: a regular file of at most ``limit`` bytes, not
    a symbolic link, with no hole (a sparse file: no writer of a run leaves one). ``within`` (the
    run directory): ``path`` must lie below it, and no directory between the two may be a link
    either (``workers/<host>`` swapped for a link to another user's directory). Raises
    UnsafeFile otherwise (including when it cannot be opened); an OSError in the block becomes
    UnsafeFile too; the fd is closed on exit. Read it with ``read_range`` (positional reads: the
    check for holes leaves the file offset anywhere). A class, not a generator: ``top`` opens a
    thousand sidecars a refresh. The file is opened when called: use it in a ``with`` at once."""

    __slots__ = ("_fd", "_size")

    def __init__(
        self,
        path: str | os.PathLike[str],
        limit: int,
        within: str | os.PathLike[str] | None = None,
    ) -> None:
        self._fd, st = _open_checked(path, limit, within)
        self._size = st.st_size

    def __enter__(self) -> tuple[int, int]:
        return self._fd, self._size

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        os.close(self._fd)
        if isinstance(exc, OSError):
            raise UnsafeFile(exc.strerror or str(exc)) from None


def _open_checked(
    path: str | os.PathLike[str], limit: int, within: str | os.PathLike[str] | None
) -> tuple[int, os.stat_result]:
    """The fd and fstat of ``path`` when ``open_regular`` accepts it; else UnsafeFile, fd closed."""
    fd = _open(path, within)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFile("not a regular file")
        if st.st_size > limit:
            raise UnsafeFile(f"{st.st_size:,} bytes, more than the {limit:,} it may be")
        _refuse_holes(fd, st.st_size)
    except OSError as exc:
        os.close(fd)
        raise UnsafeFile(exc.strerror or str(exc)) from None
    except BaseException:
        os.close(fd)
        raise
    return fd, st


# While ``reuse_dirs()`` is active in a thread: the directories below run directories it opened,
# kept open (``fds``: ``(within, names) -> fd``) instead of opened again for each file; and
# ``by_dir``: ``(within, the directory as spelled in a plain path) -> that fd``, so that the next
# plain path in that directory skips splitting and checking its parts (``_open``'s first lines).
_reused = threading.local()
_MAX_REUSED = 256  # directories kept open at most (beyond: opened per file, as outside the block)


@contextmanager
def reuse_dirs() -> Iterator[None]:
    """Within this block (in this thread), each directory on the way from a run directory down to
    a file is opened once, with the same checks (no link, a directory), and its fd kept for the
    next file below it: ``top`` reads 2,048 files of a few directories per refresh. What the
    block reads comes from the directories as they were when it first opened them (a directory
    swapped for a link meanwhile is not followed: the fd is the directory that was checked).
    Closed at the end of the block; nested blocks share the outer one's."""
    if getattr(_reused, "fds", None) is not None:
        yield
        return
    _reused.fds = fds = {}
    _reused.by_dir = {}
    try:
        yield
    finally:
        _reused.fds = _reused.by_dir = None
        for fd in fds.values():
            os.close(fd)


def _open(path: str | os.PathLike[str], within: str | os.PathLike[str] | None) -> int:
    by_dir = getattr(_reused, "by_dir", None)
    if by_dir and type(path) is str and type(within) is str and path[:1] == os.sep:
        head, _, name = path.rpartition(os.sep)
        dir_fd = by_dir.get((within, head))  # a directory a plain path below within reached
        if dir_fd is not None and name not in ("", ".", ".."):
            return _open_at(name, dir_fd)
    if within is None or os.fspath(within) == "":  # "": no run directory known
        return _open_at(os.fspath(path), None)
    parts = _parts_below(os.fspath(path), os.fspath(within))
    plain = parts is not None
    if parts is None:  # not the plain "<within>/a/b" the run's readers pass: normalise both
        rel = os.path.relpath(os.path.abspath(path), os.path.abspath(within))
        parts = rel.split(os.sep)
    else:
        rel = os.sep.join(parts)
    if rel in (".", "") or parts[0] == ".." or os.path.isabs(rel):
        raise UnsafeFile("not a file of the run directory")
    fds: dict[tuple[str, tuple[str, ...]], int] | None = getattr(_reused, "fds", None)
    if fds is not None:
        key = (os.fspath(within), tuple(parts[:-1]))
        dir_fd = fds.get(key)
        if dir_fd is None and len(fds) < _MAX_REUSED:
            dir_fd = fds[key] = _open_dirs(os.fspath(within), parts[:-1])
        if dir_fd is not None:
            if plain and type(path) is str and type(within) is str:
                _reused.by_dir[(within, path.rpartition(os.sep)[0])] = dir_fd
            return _open_at(parts[-1], dir_fd)
    dir_fd = _open_dirs(os.fspath(within), parts[:-1])
    try:
        return _open_at(parts[-1], dir_fd)
    finally:
        os.close(dir_fd)


def _open_dirs(within: str, names: list[str]) -> int:
    """An fd of the directory ``within``/names..., each name opened below the previous one,
    never through a link. Raises UnsafeFile."""
    try:
        dir_fd = os.open(within, os.O_RDONLY | _DIR_FLAGS)
    except OSError as exc:
        raise UnsafeFile(exc.strerror or str(exc)) from None
    for name in names:  # each directory below the run directory, never through a link
        try:
            below = os.open(name, os.O_RDONLY | _DIR_FLAGS | _NOFOLLOW, dir_fd=dir_fd)
        except OSError as exc:
            os.close(dir_fd)
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise UnsafeFile(
                    f"{name}/ is a symbolic link or not a directory: refused"
                ) from None
            raise UnsafeFile(exc.strerror or str(exc)) from None
        os.close(dir_fd)
        dir_fd = below
    return dir_fd


def _parts_below(path: str, within: str) -> list[str] | None:
    """The names from ``within`` down to ``path`` when ``path`` is literally ``within`` + "/" +
    plain names (no "", "." or ".."), both absolute: what relpath(abspath) would give, without its
    cost (a report opens three files per worker). None otherwise."""
    sep = os.sep
    if not (path.startswith(sep) and within.startswith(sep)):
        return None
    prefix = within if within.endswith(sep) else within + sep
    if not path.startswith(prefix):
        return None
    parts = path[len(prefix) :].split(sep)
    if any(p in ("", ".", "..") for p in parts):
        return None
    return parts


def _open_at(name: str, dir_fd: int | None) -> int:
    try:
        return os.open(name, _OPEN_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP or (dir_fd is None and os.path.islink(name)):
            raise UnsafeFile("a symbolic link: refused (it could point anywhere)") from None
        raise UnsafeFile(exc.strerror or str(exc)) from None


def _refuse_holes(fd: int, size: int) -> None:
    """UnsafeFile when the file has a hole before its end (SEEK_HOLE; a filesystem that cannot
    tell reports none). Its bytes would read as zeros the disk does not hold: a 1 GiB file of 4 KB."""
    seek_hole = getattr(os, "SEEK_HOLE", None)
    if seek_hole is None or size == 0:
        return
    try:
        hole = os.lseek(fd, 0, seek_hole)  # (the offset is left there: every read is a pread)
    except OSError:
        return  # not supported here: no holes reported
    if hole < size:
        raise UnsafeFile(
            f"a sparse file (a hole at byte {hole:,} of {size:,}): not one a run wrote"
        )


def read_range(fd: int, offset: int, length: int) -> bytes:
    """At most ``length`` bytes from ``offset`` (fewer at the end of the file)."""
    chunks = []
    while length > 0:
        chunk = os.pread(fd, min(length, _CHUNK), offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
        length -= len(chunk)
    return b"".join(chunks)


def read_regular(
    path: str | os.PathLike[str], limit: int, within: str | os.PathLike[str] | None = None
) -> bytes:
    """The bytes of ``path`` (see ``open_regular``), never past the size fstat gave: a file still
    growing is cut there. Raises UnsafeFile."""
    return read_regular_stat(path, limit, within)[0]


def read_regular_stat(
    path: str | os.PathLike[str], limit: int, within: str | os.PathLike[str] | None = None
) -> tuple[bytes, os.stat_result]:
    """``read_regular``, with the fstat of the file those bytes came from (its mtime: no second
    stat by name, which could find another file)."""
    fd, st = _open_checked(path, limit, within)
    try:
        return read_range(fd, 0, st.st_size), st
    except OSError as exc:
        raise UnsafeFile(exc.strerror or str(exc)) from None
    finally:
        os.close(fd)


def read_head(
    path: str | os.PathLike[str],
    length: int,
    limit: int,
    within: str | os.PathLike[str] | None = None,
) -> bytes:
    """The first ``length`` bytes of ``path`` (fewer if it is shorter; see ``open_regular``)."""
    with open_regular(path, limit, within) as (fd, _size):
        try:
            return read_range(fd, 0, length)
        except OSError as exc:
            raise UnsafeFile(exc.strerror or str(exc)) from None


def is_regular_file(path: Path) -> bool:
    """Whether ``path`` is a regular file itself (a symbolic link is not, whatever it points to)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def read_kernel_text(path: str, limit: int = 4096) -> str:
    """At most ``limit`` bytes of a kernel file (``/proc/<pid>/stat``, the boot id), as text:
    fstat gives such files size 0, so they are read up to the limit rather than to their size.
    Raises OSError."""
    fd = os.open(path, _OPEN_FLAGS)
    try:
        return os.read(fd, limit).decode("ascii", "replace")
    finally:
        os.close(fd)
