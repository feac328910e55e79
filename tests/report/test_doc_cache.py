"""``report.fold.DocCache`` (``top``, ``serve``): a file is parsed again whenever one byte of it
changed, even rewritten in place with its size and mtime kept; unchanged files are reused; what
comes out is what a merge without the cache gives."""

from __future__ import annotations

import json
import os

from lineprofiler.report.fold import DocCache
from lineprofiler.report.merge import merge_run
from tests.report.synth import MS, T0, Ph, worker_doc, write_worker


def _run(tmp_path, n=3):
    run = tmp_path / "run"
    paths = [
        write_worker(run, worker_doc(role="actor", pid=10 + i, threads=[Ph(("step",), [5 * MS])]))
        for i in range(n)
    ]
    return run, paths


def _figures(run):
    return {
        (r, p): (s.calls, s.wall_ns, s.processes)
        for r, role in run.roles.items()
        for p, s in role.tree.items()
    }


def test_unchanged_files_are_reused_and_changed_ones_parsed_again(tmp_path):
    run, paths = _run(tmp_path)
    cache = DocCache()
    first = merge_run(run, with_samples=False, cache=cache)
    assert (cache.hits, cache.misses) == (0, 3)
    again = merge_run(run, with_samples=False, cache=cache)
    assert (cache.hits, cache.misses) == (3, 0)
    assert _figures(again) == _figures(first) == _figures(merge_run(run, with_samples=False))
    # the merge annotates its workers: a reused one is a copy, never the cached object
    assert all(a is not b for a, b in zip(first.workers, again.workers, strict=True))

    # one file rewritten in place: same inode, same size, same mtime, one digit changed
    st = os.stat(paths[1])
    text = paths[1].read_text()
    changed = text.replace('"calls": 1,', '"calls": 7,', 1)
    assert changed != text and len(changed) == len(text)
    with open(paths[1], "r+") as f:
        f.write(changed)
    os.utime(paths[1], ns=(st.st_atime_ns, st.st_mtime_ns))
    st2 = os.stat(paths[1])
    assert (st2.st_ino, st2.st_size, st2.st_mtime_ns) == (st.st_ino, st.st_size, st.st_mtime_ns)
    third = merge_run(run, with_samples=False, cache=cache)
    assert (cache.hits, cache.misses) == (2, 1)
    assert third.roles["actor"].tree[("step",)].calls == 1 + 7 + 1
    assert _figures(third) == _figures(merge_run(run, with_samples=False))


def test_a_file_turned_bad_is_refused_and_never_served_from_the_cache(tmp_path):
    run, paths = _run(tmp_path)
    cache = DocCache()
    merge_run(run, with_samples=False, cache=cache)
    doc = json.loads(paths[0].read_text())
    doc["threads"][0]["phases"][0]["calls"] = -1  # invalid: counts are >= 0
    paths[0].write_text(json.dumps(doc))
    for _ in range(2):  # refused each time: unusable files are not kept
        got = merge_run(run, with_samples=False, cache=cache)
        assert [u.path for u in got.unreadable] == [paths[0].relative_to(run).as_posix()]
        assert got.roles["actor"].tree[("step",)].calls == 2
    assert cache.misses == 1 and cache.hits == 2
    # a file replaced by a link is refused as the merge refuses it, whatever was cached
    target = tmp_path / "elsewhere.json"
    target.write_text(paths[1].read_text())
    paths[1].unlink()
    paths[1].symlink_to(target)
    got = merge_run(run, with_samples=False, cache=cache)
    assert len(got.unreadable) == 2 and got.roles["actor"].tree[("step",)].calls == 1


def test_memory_is_bounded_and_gone_files_are_dropped(tmp_path, monkeypatch):
    run, paths = _run(tmp_path, n=4)
    cache = DocCache()
    monkeypatch.setattr(DocCache, "MAX_RECORDS", 2)  # one record per file: two files kept
    merge_run(run, with_samples=False, cache=cache)
    assert len(cache._entries) == 2 and cache._records == 2
    merge_run(run, with_samples=False, cache=cache)
    assert (cache.hits, cache.misses) == (2, 2)
    kept = next(iter(cache._entries))
    os.unlink(kept)
    got = merge_run(run, with_samples=False, cache=cache)
    assert kept not in cache._entries and cache._records == len(cache._entries) <= 2
    assert got.roles["actor"].tree[("step",)].calls == 3


def test_written_at_is_still_clamped_to_a_changed_mtime(tmp_path):
    """The check clamps written_at to the file's mtime (+ slack): the same bytes with an older
    mtime are checked again, not served with the clamp of the newer one."""
    run = tmp_path / "run"
    path = write_worker(
        run, worker_doc(role="a", pid=1, written_at=T0 + 5000, threads=[Ph(("x",), [MS])])
    )
    cache = DocCache()
    os.utime(path, (T0 + 5000, T0 + 5000))
    assert merge_run(run, with_samples=False, cache=cache).workers[0].written_at == T0 + 5000
    os.utime(path, (T0 + 1000, T0 + 1000))
    w = merge_run(run, with_samples=False, cache=cache).workers[0]
    assert cache.misses == 1 and w.written_at == T0 + 1000 + 600


def test_reused_chunks_sum_to_what_a_fresh_merge_gives(tmp_path, monkeypatch):
    """Chunks of unchanged files are not folded again: over merges that change one file each
    time (two hosts, chunks of 2, a process that wrote two files), every figure stays that of a
    merge without the cache, so nothing the merge adds into a reused fold leaks into the cache."""
    monkeypatch.setattr(DocCache, "CHUNK", 2)
    run = tmp_path / "run"
    paths = []
    for i in range(7):
        doc = worker_doc(
            role="actor" if i % 3 else "learner",
            pid=100 + i % 6,  # pids 100 and 106: one host, one pid, two files
            host=f"node{i % 2}",
            uuid=f"{i:08x}",
            threads=[Ph(("step",), [(i + 1) * MS] * (i + 1)), Ph(("step", "x"), [MS])],
        )
        paths.append(write_worker(run, doc))
    cache = DocCache()

    def figures(r):
        return {
            (name, p): (
                s.calls,
                s.wall_ns,
                s.processes,
                dict(s.hist.buckets),
                sorted(s.sample_rates),
            )
            for name, role in r.roles.items()
            for p, s in role.tree.items()
        }

    for k in range(5):
        got = merge_run(run, with_samples=False, cache=cache)
        want = merge_run(run, with_samples=False)
        assert figures(got) == figures(want), k
        assert [w.path for w in got.workers] == [w.path for w in want.workers]
        if k:
            assert cache.misses == 1 and cache.chunks_reused >= 2, (
                cache.misses,
                cache.chunks_reused,
            )
        f = paths[(3 * k) % len(paths)]
        f.write_text(f.read_text().replace('"snapshot_seq": 3', f'"snapshot_seq": {10 + k}', 1))
