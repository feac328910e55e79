"""Issue 33's leftovers: Perfetto and Prometheus carry the ``[threads]`` flag (work handed to other
threads), ``thread_names=True`` nests attached work under the thread that handed it out (or, when
the file cannot tell which, under its own)."""

from __future__ import annotations

import io
import json

import pytest

from lineprofiler.report.merge import merge_run
from lineprofiler.report.perfetto import export_perfetto
from lineprofiler.runfile.samples import (
    F_RSS,
    W_DT,
    W_FLAGS,
    W_RB,
    W_RSS,
    W_T,
    W_TAG,
    W_WB,
)
from tests.report.synth import MS, T0, Ph, worker_doc, write_worker
from tests.resources.synth_samples import S, attach_samples

MARK = "[threads]"


def test_perfetto_slices_of_attached_work_say_so_in_their_args(tmp_path):
    doc = worker_doc(role="w", pid=3, threads=[Ph(("step",), [S])])
    path = write_worker(tmp_path, doc)
    cols = {
        W_T: [int(T0 * 1e9) + e * S for e in (1, 2, 3)],
        W_DT: [S] * 3,
        W_TAG: [1, 2, 1],
        W_FLAGS: [F_RSS] * 3,
        W_RB: [0] * 3,
        W_WB: [0] * 3,
        W_RSS: [10**8] * 3,
    }
    attach_samples(doc, path, cols, 3, tags={1: ["step"], 2: ["step", MARK, "work"]})
    write_worker(tmp_path, doc)
    out = io.StringIO()
    export_perfetto(tmp_path, out)
    begins = [e for e in json.loads(out.getvalue())["traceEvents"] if e["ph"] == "B"]
    assert [(e["name"], e.get("args")) for e in begins] == [
        ("step", None),
        (f"step/{MARK}/work", {"on_threads": True}),
        ("step", None),
    ]


def test_prometheus_labels_work_on_other_threads(tmp_path):
    pytest.importorskip("prometheus_client")
    from lineprofiler.report.prometheus import families

    main = ("MainThread", [Ph(("step",), [10 * MS] * 4)])
    pool = [(f"pool-{k}", [Ph(("step", MARK, "work"), [2 * MS] * 3)]) for k in range(3)]
    write_worker(tmp_path, worker_doc(role="r", pid=1, threads=[main, *pool]))
    fams = {f.name: f for f in families(merge_run(tmp_path))}
    calls = {
        (s.labels["phase"], s.labels["on_threads"]): s.value
        for s in fams["lineprofiler_phase_calls"].samples
    }
    assert calls == {("step", "false"): 4, (f"step/{MARK}/work", "true"): 9}
    (threads,) = fams["lineprofiler_phase_threads"].samples
    assert threads.labels["phase"] == f"step/{MARK}/work" and threads.value == 3
    for name in ("lineprofiler_phase_seconds", "lineprofiler_phase_duration_seconds"):
        assert all("on_threads" in s.labels for s in fams[name].samples)


def test_thread_names_nest_attached_work_under_the_one_handing_thread(tmp_path):
    main = ("driver", [Ph(("step",), [10 * MS] * 4)])
    pool = [(f"pool-{k}", [Ph(("step", MARK, "work"), [2 * MS] * 3)]) for k in range(2)]
    write_worker(tmp_path, worker_doc(role="r", pid=1, thread_names=True, threads=[main, *pool]))
    tree = merge_run(tmp_path).tree
    work = tree[("driver", "step", MARK, "work")]
    assert work.calls == 6 and work.threads == 2
    assert sorted(p for p in tree if len(p) == 1) == [("driver",)]


def test_thread_names_ambiguous_handing_thread_keeps_the_running_threads_name(tmp_path):
    """Two threads each hold a ``step``: which one handed the work out is not in the file, so it
    stays under the pool thread's own name (as before), never summed under a guessed one."""
    a = ("a", [Ph(("step",), [10 * MS])])
    b = ("b", [Ph(("step",), [10 * MS])])
    pool = ("pool-0", [Ph(("step", MARK, "work"), [2 * MS])])
    write_worker(tmp_path, worker_doc(role="r", pid=1, thread_names=True, threads=[a, b, pool]))
    tree = merge_run(tmp_path).tree
    assert tree[("pool-0", "step", MARK, "work")].calls == 1
    assert ("a", "step", MARK, "work") not in tree and ("b", "step", MARK, "work") not in tree
