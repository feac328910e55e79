"""``report`` and ``compare`` on hostile run directories: every bad worker file or sidecar gives
exit 0 with the file named under CAVEATS, or exit 2 with one line; never a traceback, a hang or
unbounded memory; and names reach the terminal escaped."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from lineprofiler.report.units import terminal_safe
from tests.helpers import run_python, worker_files

CLI = "from lineprofiler.cli import main; raise SystemExit(main())"

# A real run: two threads (one named), phases, counters and the sampler's sidecars.
REAL_RUN = """
    import threading
    from lineprofiler.accounting import Profiler

    p = Profiler(run_dir="run", role="learner", enabled=True, snapshot_interval_s=None,
                 sample_interval_s=1000.0, thread_names=True)
    def work():
        with p.phase("load"):
            p.count("items", 3)
    t = threading.Thread(target=work, name="loader")
    t.start()
    t.join()
    for _ in range(3):
        with p.phase("step"):
            p.count("steps")
            p._rec.sample_now()
    p.close()
"""


@pytest.fixture(scope="module")
def real_run(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("real")
    run_python(REAL_RUN, cwd=d)
    return d / "run"


def copy_run(real_run: Path, to: Path) -> tuple[Path, Path]:
    """A copy of the real run and its one worker file."""
    shutil.copytree(real_run, to)
    (f,) = worker_files(to)
    return to, f


def cli(tmp_path: Path, *args: str, memory_mb: int = 1024):
    """The CLI in a child with an address-space ceiling (RLIMIT_AS) of memory_mb."""
    code = (
        "import resource\n"
        f"resource.setrlimit(resource.RLIMIT_AS, ({memory_mb << 20}, {memory_mb << 20}))\n" + CLI
    )
    proc = run_python(code, cwd=tmp_path, args=[str(a) for a in args], check=False, timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode in (0, 2), proc.stderr
    if proc.returncode == 2:
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    return proc


def one_line(text: str) -> str:
    return " ".join(text.split())


def test_a_samples_file_holding_only_its_header_or_a_partial_row(tmp_path, real_run):
    run, f = copy_run(real_run, tmp_path / "run")
    samples = f.with_suffix(".samples")
    data = samples.read_bytes()
    for keep in (64, 64 + 40):  # what SIGKILL leaves: the header, or a row cut short
        samples.write_bytes(data[:keep])
        proc = cli(tmp_path, "report", run)
        assert proc.returncode == 0


@pytest.mark.parametrize("bomb", ["gpus", "dev_zero", "fifo", "outside", "deep_tags", "dir"])
def test_sidecar_bombs_cost_that_worker_its_samples_only(tmp_path, real_run, bomb):
    run, f = copy_run(real_run, tmp_path / "run")
    samples, tags = f.with_suffix(".samples"), f.with_suffix(".tags")
    if bomb == "gpus":  # 64 bytes declaring 5e7 GPUs
        header = bytearray(samples.read_bytes()[:64])
        header[16:24] = (12 + 2 * 50_000_000).to_bytes(4, "little") + (50_000_000).to_bytes(
            4, "little"
        )
        samples.write_bytes(bytes(header))
    elif bomb == "dev_zero":
        samples.unlink()
        samples.symlink_to("/dev/zero")
    elif bomb == "fifo":
        samples.unlink()
        os.mkfifo(samples)
        tags.unlink()
        os.mkfifo(tags)
    elif bomb == "outside":
        secret = tmp_path / "secret.bin"
        shutil.copy(samples, secret)
        samples.unlink()
        samples.symlink_to(secret)
    elif bomb == "deep_tags":
        tags.write_text("[1," + "[" * 100_000 + "]" * 100_000 + "]\n")
    elif bomb == "dir":
        samples.unlink()
        samples.mkdir()
    proc = cli(tmp_path, "report", run, memory_mb=768)
    assert proc.returncode == 0
    assert "Runtime" in proc.stdout  # the phases are all there
    if bomb != "deep_tags":
        assert samples.name in one_line(proc.stdout)  # named under CAVEATS
        assert "resource samples of learner" in one_line(proc.stdout)


def _edit(f: Path, change) -> None:
    doc = json.loads(f.read_text())
    change(doc)
    f.write_text(json.dumps(doc, allow_nan=True))


@pytest.mark.parametrize(
    "case",
    ["huge_int", "nan_rows", "inf_rows", "str_rows", "empty_file", "nul_file", "empty_tags"],
)
def test_hostile_worker_json_costs_that_worker_at_most(tmp_path, real_run, case):
    run, f = copy_run(real_run, tmp_path / "run")
    if case == "huge_int":
        text = re.sub(r'"snapshot_seq":\d+', '"snapshot_seq":' + "9" * 5000, f.read_text())
        f.write_text(text)
    elif case in ("nan_rows", "inf_rows", "str_rows"):
        value = {"nan_rows": float("nan"), "inf_rows": float("inf"), "str_rows": "many"}[case]

        def change(doc):
            for key in ("rows", "rss_failed", "gpu_devices", "dropped"):
                doc["samples"][key] = value

        _edit(f, change)
    elif case == "empty_file":
        _edit(f, lambda doc: doc["samples"].update(file=""))
    elif case == "nul_file":
        _edit(f, lambda doc: doc["samples"].update(file="w\0.samples"))
    elif case == "empty_tags":
        _edit(f, lambda doc: doc["samples"].update(tags_file="\0"))
    proc = cli(tmp_path, "report", run)
    if case in ("huge_int", "nan_rows", "inf_rows"):  # not JSON the writer could have written
        assert proc.returncode == 2  # the only worker is unreadable: one line naming it
        assert f.name in proc.stderr
    else:
        assert proc.returncode == 0  # the worker's samples are skipped, its phases reported


def test_a_worker_file_too_big_to_be_one_is_refused_without_reading_it(tmp_path, real_run):
    from lineprofiler.runfile import worker_doc

    run, f = copy_run(real_run, tmp_path / "run")
    big = f.with_name(f.name[: -len(".json")] + "0.json")  # the same attempt
    with open(big, "wb") as out:  # sparse: the size, not the bytes
        out.truncate(worker_doc.MAX_WORKER_BYTES + 1)
    proc = cli(tmp_path, "report", run, memory_mb=512)
    assert proc.returncode == 0
    assert "more than the" in one_line(proc.stdout)


HOSTILE_NAMES = """
    from lineprofiler.accounting import Profiler

    role = "x\\n\\nCAVEATS\\n  none: every worker file was read, and none is stale\\n"
    p = Profiler(run_dir="run", role=role, enabled=True, snapshot_interval_s=None,
                 sample_interval_s=None)
    with p.phase("\\x1b[2J\\x1b]0;pwned\\x07clear"):
        p.count("rtl\\u202egnp.exe", 1)
    with p.phase("tab\\there"):
        pass
    p.close()
"""


def test_names_reach_the_terminal_escaped(tmp_path):
    run_python(HOSTILE_NAMES, cwd=tmp_path)
    for args in (("report", "run"), ("compare", "run", "run")):
        proc = cli(tmp_path, *args)
        assert proc.returncode == 0
        out = proc.stdout
        assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out and "\t" not in out
        assert "\\x1b[2J" in out and "\\u202e" in out
        # the forged block is one escaped line, not a CAVEATS block of its own
        assert out.count("CAVEATS\n") <= 1
        assert "\\n\\nCAVEATS\\n" in out  # the role, escaped on its own line


def test_terminal_safe_leaves_ordinary_names_alone_and_escapes_the_rest():
    assert terminal_safe("iteration/mcts ünïcode 数据") == "iteration/mcts ünïcode 数据"
    assert terminal_safe("a\nb\x1b[31m\u202e\u2066\\") == "a\\nb\\x1b[31m\\u202e\\u2066\\\\"
    assert terminal_safe("nbsp\u00a0ok") == "nbsp\u00a0ok"


LOOKALIKES = """
    from lineprofiler.accounting import Profiler

    p = Profiler(run_dir="run", enabled=True, snapshot_interval_s=None, sample_interval_s=None)
    for name in ("(folded)", "(no phase open)", "a/b"):
        with p.phase(name):
            p.count("n", 1)
    with p.phase("a"):
        with p.phase("b"):
            p.count("n", 2)
    p.close()
"""


def test_user_names_never_pass_for_synthetic_nodes_or_nesting(tmp_path):
    run_python(LOOKALIKES, cwd=tmp_path)
    out = cli(tmp_path, "report", "run", "--top", "20").stdout
    names = {line.split("  ")[0] for line in out.splitlines()}
    assert '"(folded)"' in names and '"(no phase open)"' in names
    assert '"a/b"' in names and "a/b" in names  # the name with a slash, and the nesting
    assert "(folded)" not in names and "(no phase open)" not in names


def test_a_written_at_far_in_the_future_does_not_stretch_runtime(tmp_path, real_run):
    import time

    run, f = copy_run(real_run, tmp_path / "run")
    doc = json.loads(f.read_text())
    doc["written_at"] = time.time() + 20 * 3600  # within a day: the clock-skew allowance
    f.write_text(json.dumps(doc))
    out = cli(tmp_path, "report", run).stdout
    runtime = out.split()[1]
    assert "h" not in runtime and "m " not in runtime, out.splitlines()[0]
