"""The HTML report's timelines (report.timeline.build_timeline) against the rows written."""

from __future__ import annotations

from lineprofiler import _core
from lineprofiler.report.merge import merge_run
from lineprofiler.report.timeline import build_timeline
from tests.report.synth import MS, T0, Ph, S, worker_doc, write_samples, write_worker

FLAGS = _core.SAMPLE_FLAGS


def _run(tmp_path, lose_io_row: bool = False):
    """Two processes, 20 one-second rows each ending at T0+1..T0+20: process i reads
    (i + 1) MB per row, RSS (i + 1) GB, GPU 0 busy 40% (rows 0-9) then 80%, its pid 10% / 30%;
    rows 0-9 in ``load``, 10-19 in ``train``."""
    run_dir = tmp_path / "run"
    for i in range(2):
        doc = worker_doc(
            role="w", pid=10 + i, rank=i, written_at=T0 + 20.0,
            threads=[Ph(("load",), dist=[(5 * MS, 10)]), Ph(("train",), dist=[(5 * MS, 10)])],
        )  # fmt: skip
        path = write_worker(run_dir, doc)
        rows = []
        for t in range(20):
            flags = FLAGS["io"] | FLAGS["rss"] | FLAGS["gpu"]
            if lose_io_row and t == 3:
                flags &= ~FLAGS["io"]
            rows.append(
                {"time_unix_ns": int((T0 + 1 + t) * S), "dt_ns": S, "tag": 1 if t < 10 else 2,
                 "flags": flags, "read_bytes": (i + 1) * 1_000_000,
                 "rss_bytes": (i + 1) * 1_000_000_000,
                 "gpu0_busy": 40 if t < 10 else 80, "gpu0_mine": (10, 30)[i]}
            )  # fmt: skip
        doc["samples"] = write_samples(
            path, 10 + i, rows, tags={1: ["load"], 2: ["train"]}, n_gpu=1
        )
        write_worker(run_dir, doc)
    return merge_run(run_dir)


def test_bins_sum_the_rows(tmp_path):
    run = _run(tmp_path)
    tl = build_timeline(run, bins=4)  # 5 s bins: 5 rows per process each
    assert tl is not None and tl.bins == 4 and tl.workers == 2
    assert sum(tl.read) == 20 * (1 + 2) * 1_000_000  # every byte written lands in one bin
    assert tl.read == [15_000_000] * 4
    assert tl.rss == [3e9] * 4  # the processes' means, summed
    busy, mine = tl.gpu_busy[("node01", 0)], tl.gpu_mine[("node01", 0)]
    assert busy == [40.0, 40.0, 80.0, 80.0]
    assert mine == [40.0] * 4  # 10% + 30%, however many rows a bin holds
    assert tl.phase == [("load",), ("load",), ("train",), ("train",)]


def test_a_row_without_io_counts_no_bytes(tmp_path):
    tl = build_timeline(_run(tmp_path, lose_io_row=True), bins=4)
    assert tl.read[0] == 15_000_000 - 3_000_000 and tl.read[1:] == [15_000_000] * 3


def test_bins_never_thinner_than_the_interval(tmp_path):
    tl = build_timeline(_run(tmp_path), bins=240)
    assert tl.bins == 20  # 20 s of 1 s rows
    assert tl.rss == [3e9] * 20


def _cpu_run(tmp_path):
    """Two processes without a GPU, 12 one-second rows each ending at T0+1..T0+12, with rows the
    flags do not vouch for: process i reads (t + 1) * (i + 1) kB in row t (no I/O in row 4),
    RSS (t + 1) * (i + 1) MB (none in row 7, -1 in row 8); rows tagged load, train, no phase
    (0) and a tag missing from the .tags file (9) in turn. Returns (run, rows of each process)."""
    run_dir = tmp_path / "run"
    written = []
    for i in range(2):
        doc = worker_doc(
            role="w", pid=20 + i, rank=i, written_at=T0 + 12.0,
            threads=[Ph(("load",), dist=[(5 * MS, 10)])],
        )  # fmt: skip
        path = write_worker(run_dir, doc)
        rows = []
        for t in range(12):
            flags = FLAGS["io"] | FLAGS["rss"]
            if t == 4:
                flags &= ~FLAGS["io"]
            if t == 7:
                flags &= ~FLAGS["rss"]
            rows.append(
                {"time_unix_ns": int((T0 + 1 + t) * S), "dt_ns": S, "tag": (1, 2, 0, 9)[t % 4],
                 "flags": flags, "read_bytes": (t + 1) * (i + 1) * 1000,
                 "write_bytes": (i + 1) * 10,
                 "rss_bytes": -1 if t == 8 else (t + 1) * (i + 1) * 1_000_000}
            )  # fmt: skip
        doc["samples"] = write_samples(path, 20 + i, rows, tags={1: ["load"], 2: ["train"]})
        write_worker(run_dir, doc)
        written.append(rows)
    return merge_run(run_dir), written


def test_bins_of_one_row_and_of_many_give_the_rows_sums(tmp_path):
    # A bin per row, and 3 or 12 rows per bin: each against the sums of the rows this test
    # wrote, row i in bin i * bins // 12.
    run, written = _cpu_run(tmp_path)
    for bins in (12, 4, 1):
        tl = build_timeline(run, bins=bins)
        assert tl is not None and tl.bins == bins and tl.workers == 2
        read, write, rss = [0] * bins, [0] * bins, [0.0] * bins
        phase_ns: list[dict] = [{} for _ in range(bins)]
        for rows in written:
            per_bin: dict[int, list[int]] = {}
            for t, r in enumerate(rows):
                b = t * bins // 12
                if r["flags"] & FLAGS["io"]:
                    read[b] += r["read_bytes"]
                    write[b] += r["write_bytes"]
                if r["flags"] & FLAGS["rss"] and r["rss_bytes"] >= 0:
                    per_bin.setdefault(b, []).append(r["rss_bytes"])
                name = {1: ("load",), 2: ("train",), 9: ("(unknown phase)",)}.get(r["tag"])
                if name:
                    phase_ns[b][name] = phase_ns[b].get(name, 0) + S
            for b, vals in per_bin.items():
                rss[b] += sum(vals) / len(vals)
        assert tl.read == read and tl.write == write, bins
        assert tl.rss == rss, bins
        assert tl.has_rss and tl.has_io
        assert tl.phase == [max(a, key=lambda p: (a[p], p)) if a else None for a in phase_ns]
    one_row = build_timeline(run, bins=12)
    assert one_row.read[4] == 0 and one_row.rss[7] == 0.0 and one_row.rss[8] == 0.0
    assert one_row.phase[2] is None and one_row.phase[3] == ("(unknown phase)",)
