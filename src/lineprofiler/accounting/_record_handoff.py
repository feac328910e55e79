"""Tells ``lineprofiler record`` which run directory this process writes (its hand-off file)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from lineprofiler.runfile.layout import ENV_RECORD_DIRS


def announce_run_dir(run_dir: Path) -> None:
    """Appends ``run_dir`` to the file named by ``$LINEPROFILER_RECORD_DIRS``, when record set it.

    Only a file that already exists is written (record made it; nothing is created, no link is
    followed), in one O_APPEND write so processes of one run never interleave. Never raises: a
    file that cannot be written (or is no regular file) leaves record reporting its --run-dir."""
    target = os.environ.get(ENV_RECORD_DIRS)
    if not target:
        return
    try:
        # O_NONBLOCK: a FIFO planted there fails at once instead of blocking the user's program
        fd = os.open(
            target, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        )
    except OSError:
        return
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            os.write(fd, os.fsencode(str(run_dir)) + b"\0")
    except OSError:
        pass
    finally:
        os.close(fd)
