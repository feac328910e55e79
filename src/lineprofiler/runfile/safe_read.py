"""Reading a file of a run directory that someone else may have planted.

A run directory can be shared with other local users, and reading it must not hang, follow a link
out of it, or allocate what the file merely claims: ``read_regular`` opens without following a
link and without blocking (a FIFO), accepts only a regular file, and reads at most its real size,
refused above a limit.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


class UnsafeFile(Exception):
    """A file that is not a plain regular file of acceptable size; the message says why."""


def read_regular(path: Path, limit: int) -> bytes:
    """The bytes of ``path``: a regular file of at most ``limit`` bytes, not a symbolic link.
    Raises UnsafeFile otherwise (including when it cannot be opened or read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if os.path.islink(path):
            raise UnsafeFile("a symbolic link: refused (it could point anywhere)") from None
        raise UnsafeFile(exc.strerror or str(exc)) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFile("not a regular file")
        if st.st_size > limit:
            raise UnsafeFile(f"{st.st_size:,} bytes, more than the {limit:,} it may be")
        chunks = []
        left = st.st_size
        while left > 0:  # never past the size fstat gave: a file still growing is cut there
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise UnsafeFile(exc.strerror or str(exc)) from None
    finally:
        os.close(fd)
