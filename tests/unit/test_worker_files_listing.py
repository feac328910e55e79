"""``layout.worker_files``: one listing per directory (no stat per file), and the same files in the
same order as the glob it replaced, ``sorted(p for p in glob("workers/*/w_*.json") if
p.is_file())``, on a directory holding everything a shared run directory may; and
``layout.workers_with_lines``, from the same listing (``list_workers``), the set its glob gave."""

from __future__ import annotations

import os
from pathlib import Path

from lineprofiler.runfile.layout import list_workers, worker_files, workers_with_lines


def by_glob(run: Path) -> list[Path]:
    return sorted(p for p in run.glob("workers/*/w_*.json") if p.is_file())


def test_the_same_files_in_the_same_order_as_the_glob(tmp_path: Path) -> None:
    run = tmp_path / "run"
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "w_x_1_a.json").write_text("{}")
    # host names whose order as strings differs from their order as paths ("-" < "/" < ".")
    for host in ("node1", "node1-b", "node1.c", "a", ".hidden", "Z"):
        d = run / "workers" / host
        d.mkdir(parents=True)
        for name in ("w_r_2_b.json", "w_r_10_a.json", "w_.json", ".w_r_1_x.json", "w_r_3.samples"):
            (d / name).write_text("{}")
    d = run / "workers" / "node1"
    (d / "w_dir_1_a.json").mkdir()  # a directory named like a worker file: not one
    (d / "w_link_1_a.json").symlink_to(outside / "w_x_1_a.json")  # a link: listed (read refuses)
    (d / "w_dangling_1_a.json").symlink_to(tmp_path / "nothing")  # a dangling link: not a file
    (d / "x_r_1_a.json").write_text("{}")
    os.mkfifo(d / "w_fifo_1_a.json")  # not a regular file
    (run / "workers" / "linked").symlink_to(outside)  # a host directory that is a link
    (run / "workers" / "w_r_1_a.json").write_text("{}")  # at the wrong depth
    got = worker_files(run)
    assert got == by_glob(run)
    assert run / "workers" / "node1" / "w_link_1_a.json" in got
    assert run / "workers" / "linked" / "w_x_1_a.json" in got
    assert len(got) == 6 * 3 + 2
    # line sidecars: files, a directory and a dangling link named like one, a name with two dots
    for host, name in (("node1", "w_r_2_b"), ("a", "w_r_10_a"), (".hidden", "w_"), ("Z", "w_a.b")):
        (run / "workers" / host / f"{name}.lines").write_text("")
    (run / "workers" / "node1" / "w_d_1.lines").mkdir()
    (run / "workers" / "Z" / "w_l_1.lines").symlink_to(tmp_path / "nothing")
    (run / "workers" / "Z" / "x_r_1.lines").write_text("")
    (run / "workers" / "w_top.lines").write_text("")  # at the wrong depth
    old = {
        p.relative_to(run).with_suffix(".json").as_posix() for p in run.glob("workers/*/w_*.lines")
    }
    assert len(old) == 6
    assert workers_with_lines(run) == old
    assert list_workers(run) == (got, old)


def test_no_workers_directory_or_an_unreadable_one_lists_nothing(tmp_path: Path) -> None:
    assert worker_files(tmp_path / "missing") == []
    (tmp_path / "run").mkdir()
    assert worker_files(tmp_path / "run") == []
    (tmp_path / "run" / "workers").write_text("not a directory")
    assert worker_files(tmp_path / "run") == []
