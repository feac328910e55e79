"""The spec's example snippets run as written (undefined names such as `steps` and `save` supplied)."""

from __future__ import annotations

import json
import re

from tests.helpers import run_python


def test_actor_and_learner_snippet_and_the_tests_section(tmp_path):
    code = """
        import pickle
        from lineprofiler.accounting import Profiler, merge_run

        steps = 5
        model = {"w": list(range(1000))}

        def save(m):
            with open("model.pkl", "wb") as f:
                pickle.dump(m, f)

        # in each actor process
        profiler = Profiler(run_dir="profile", role="actor", enabled=True)
        with profiler:
            for _ in range(steps):
                with profiler.phase("iteration"), profiler.phase("self_play"):
                    with profiler.phase("mcts"):
                        profiler.count("mcts_simulations", 64)

        # in the learner process
        profiler = Profiler(run_dir="profile", role="learner", enabled=True)
        with profiler.phase("checkpoint", io=True):            # exact byte attribution
            save(model)
        profiler.close()

        run = merge_run("profile", with_samples=False)   # phases only: fast, and megabytes smaller
        assert "actor" in run.roles                       # the process actually started
        assert run.tree[("iteration", "self_play", "mcts")].calls == steps
        assert run.tree[("iteration", "self_play", "mcts")].counters["mcts_simulations"] == 64 * steps
        assert run.unreadable == []                       # no worker died before its first flush
        latest = max(w.written_at for w in run.workers)
        assert all(latest - w.written_at < 300 for w in run.workers), "a worker stopped writing"
        print("ok")
    """
    proc = run_python(code, cwd=tmp_path)
    assert proc.stdout.strip().endswith("ok")


def test_install_snippet(tmp_path):
    code = """
        from lineprofiler import accounting
        from lineprofiler.accounting import Profiler

        # once, wherever you set the run up
        profiler = Profiler(run_dir="profile", role="actor", install=True, enabled=True)

        # anywhere at all, with no argument threaded to it
        def uct_search(root):
            with accounting.phase("mcts"):
                accounting.count("simulations", 64)
                return accounting.current()

        assert uct_search(None) == "mcts"
        assert accounting.installed_profiler() is profiler
        profiler.close()
        assert accounting.installed_profiler() is None
        print("ok")
    """
    proc = run_python(code, cwd=tmp_path)
    assert proc.stdout.strip().endswith("ok")


def test_report_cli_on_the_snippet_run(tmp_path):
    code = """
        from lineprofiler.accounting import Profiler
        with Profiler(run_dir="profile", role="actor", enabled=True) as p:
            for _ in range(3):
                with p.phase("iteration"):
                    p.count("n", 2)
    """
    run_python(code, cwd=tmp_path)
    cli = "import sys; from lineprofiler.cli import main; sys.exit(main())"
    proc = run_python(cli, cwd=tmp_path, args=["report", "profile"])
    assert "ACTOR" in proc.stdout and "iteration" in proc.stdout
    # The snippet's own numbers: 3 entries into iteration, count("n", 2) in each.
    doc = json.loads(run_python(cli, cwd=tmp_path, args=["report", "profile", "--json"]).stdout)
    (role,) = doc["roles"]
    (phase,) = [p for p in role["phases"] if p["path"] == ["iteration"]]
    assert role["role"] == "actor" and phase["calls"] == 3
    assert [(c["name"], c["count"]) for c in phase["counters"]] == [("n", 6)]
    assert re.search(r"^ +\+ n +6 ", proc.stdout, re.M)  # the text report's counter row
