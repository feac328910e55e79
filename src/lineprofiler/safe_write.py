"""Writing a file where another local user may have planted something: the one writer of every
output file (``report --html``, ``export --perfetto``, ``reduce``'s summaries, ``run --json``).

A run directory, and the directory a report is written to, may be shared with other local users
(``/tmp``, a team scratch folder), and the command may run as root. ``output_file`` therefore:

- opens the target's directory once (following links: the directory is the user's choice, like
  the run directory) and does everything else relative to that descriptor;
- writes a new file under an unpredictable temporary name created with
  ``O_CREAT|O_EXCL|O_NOFOLLOW``, fsyncs it and renames it over the target, so a planted link at
  the target or at a temporary name is replaced or never opened, and a reader never sees half a
  file. The file's mode is ``mode`` less the umask (0666: as ``open(FILE, "w")`` would give);
- refuses a target that is a symbolic link of another user (one of this user's own links is
  followed, like the shell's ``>``), and a directory;
- writes straight into a target that is a device or FIFO (``/dev/null``, ``/dev/stdout``, a named
  pipe with a reader) instead of replacing it, and never blocks on a FIFO without a reader.

``open_own_dir`` opens (creating it) a directory the profiler owns inside a run directory
(``summaries/``, ``backend/``): never through a link, never another user's, never group- or
world-writable; ``written_by_a_library`` lends a path inside it to a library that writes only by
path (torch, VizTracer).
"""

from __future__ import annotations

import errno
import fcntl
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

# Modes of the directories the profiler creates: the run directory and its missing parents, and
# the directories inside it (workers/, workers/<host>/, summaries/). The umask may only narrow
# them, so none is ever group- or world-writable (the C++ recorder's are the same).
RUN_DIR_MODE = 0o755
OWN_DIR_MODE = 0o750
_NOT_FOR_OTHERS = 0o022


class RefusedOutput(OSError):
    """A target the writer will not write (a link of another user, a directory, another user's
    directory); ``strerror`` says why in one line."""


def make_dirs(path: str | os.PathLike[str]) -> None:
    """``mkdir -p`` for a run directory and its missing parents: each one it creates is 0755 at
    most whatever the umask (a stricter umask wins); an existing one is left as it is."""
    path = Path(path)
    missing = []
    while not path.is_dir() and path.parent != path:
        missing.append(path)
        path = path.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, RUN_DIR_MODE)
        except FileExistsError:
            if not d.is_dir():
                raise


def open_own_dir(parent: Path, name: str, mode: int = OWN_DIR_MODE) -> int:
    """The directory ``parent/name`` opened O_DIRECTORY|O_NOFOLLOW (an fd the caller closes),
    created ``mode`` (less the umask, never group/world-writable) when missing. Raises
    RefusedOutput when it is a symbolic link, not a directory, or belongs to another user."""
    shown = f"{parent}/{name}"
    pfd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            os.mkdir(name, mode & ~_NOT_FOR_OTHERS, dir_fd=pfd)
        except FileExistsError:
            pass
        try:
            fd = os.open(
                name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=pfd
            )
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise RefusedOutput(
                    exc.errno,
                    f"{shown} is a symbolic link or not a directory: refused (another user "
                    "could redirect the writes through it)",
                ) from None
            raise
    finally:
        os.close(pfd)
    st = os.fstat(fd)
    if st.st_uid != os.geteuid():
        os.close(fd)
        raise RefusedOutput(
            errno.EPERM,
            f"{shown} belongs to uid {st.st_uid}, not to this user (uid {os.geteuid()}): refused",
        )
    return fd


@contextmanager
def output_file(
    path: str | os.PathLike[str],
    *,
    binary: bool = False,
    mode: int = 0o666,
    dir_fd: int | None = None,
    follow_links: bool = True,
) -> Iterator[IO[Any]]:
    """A file object to write ``path`` through (text, UTF-8, unless ``binary``). The target is
    replaced when the block ends without an exception; on an exception nothing is left behind and
    the target is untouched. ``dir_fd``: ``path`` is one name inside that open directory.
    ``follow_links=False`` (a run's own files, such as the ``.lines`` sidecar): whatever is at the
    target (a link of anyone's, a FIFO) is replaced by the new file, never opened."""
    path = os.fspath(path)
    if dir_fd is None:
        parent, name = os.path.split(path)
        dfd = os.open(parent or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    else:
        name, dfd = path, dir_fd
    try:
        if name in ("", ".", "..") or "/" in name:
            raise RefusedOutput(errno.EISDIR, f"{path}: not a file name")
        direct = _open_existing(path, name, dfd) if follow_links else None
        if isinstance(direct, str):  # one of this user's links to a regular file: its target
            with output_file(direct, binary=binary, mode=mode) as f:
                yield f
        elif direct is not None:  # a device or FIFO: written in place
            with _fdopen(direct, binary) as f:
                yield f
        else:
            with _replacing(name, dfd, binary, mode) as f:
                yield f
    finally:
        if dir_fd is None:
            os.close(dfd)


@contextmanager
def written_by_a_library(dir_fd: int, name: str) -> Iterator[str]:
    """A path for a library that writes a file only by path (torch's ``export_chrome_trace``,
    ``VizTracer.save``): a fresh hidden name inside the open directory ``dir_fd``, reached through
    ``/proc/self/fd`` so that swapping the directory for a link cannot redirect it, and renamed to
    ``name`` when the block ends without an exception. It ends with ``name`` (libraries choose the
    format by the suffix). ``dir_fd`` should be one of ``open_own_dir``: no one else can plant a
    link inside it."""
    if not name or "/" in name or name in (".", ".."):
        raise RefusedOutput(errno.EINVAL, f"{name}: not a file name")
    tmp = f".lp-out-{secrets.token_hex(8)}-{name}"
    try:
        yield f"/proc/self/fd/{dir_fd}/{tmp}"
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise


def write_output(path: str | os.PathLike[str], data: str | bytes, **kwargs: Any) -> None:
    """``output_file`` for data already in memory."""
    with output_file(path, binary=isinstance(data, bytes), **kwargs) as f:
        f.write(data)


def _open_existing(shown: str, name: str, dfd: int) -> int | str | None:
    """What is at ``name`` now: None (absent or a regular file: replace it), an fd open for writing
    (a device or FIFO), or a path (this user's own link to a regular file: write its target)."""
    try:
        st = os.lstat(name, dir_fd=dfd)
    except FileNotFoundError:
        return None
    if stat.S_ISREG(st.st_mode):
        return None
    if stat.S_ISDIR(st.st_mode):
        raise RefusedOutput(errno.EISDIR, f"{shown} is a directory")
    follow = stat.S_ISLNK(st.st_mode)
    if follow and st.st_uid != os.geteuid():
        raise RefusedOutput(
            errno.ELOOP,
            f"{shown} is a symbolic link of uid {st.st_uid}, not this user's: refused (it could "
            "point anywhere; remove it or write elsewhere)",
        )
    flags = os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(name, flags, dir_fd=dfd)
    except FileNotFoundError:
        if follow:
            raise RefusedOutput(errno.ENOENT, f"{shown}: a symbolic link to nothing") from None
        return None  # removed meanwhile: a new file
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise RefusedOutput(errno.ENXIO, f"{shown}: a named pipe nobody reads") from None
        raise
    if stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        if not follow:
            return None  # replaced by a regular file meanwhile
        return os.path.realpath(os.path.join(f"/proc/self/fd/{dfd}", name))
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    return fd


def _fdopen(fd: int, binary: bool) -> IO[Any]:
    if binary:
        return os.fdopen(fd, "wb")
    return os.fdopen(fd, "w", encoding="utf-8")


@contextmanager
def _replacing(name: str, dfd: int, binary: bool, mode: int) -> Iterator[IO[Any]]:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(8):
        # A leading dot and a .tmp ending: no reader takes it for a worker file or a summary.
        tmp = f".lp-out-{secrets.token_hex(8)}.tmp"
        try:
            fd = os.open(tmp, flags, mode, dir_fd=dfd)
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError(errno.EEXIST, "no free temporary name")
    try:
        with _fdopen(fd, binary) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dfd)
        except OSError:
            pass
        raise
    try:
        os.fsync(dfd)  # the rename itself is durable too
    except OSError:
        pass
