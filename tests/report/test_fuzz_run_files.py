"""A bounded-time fuzzer of worker files and sidecars: mutations of a real run (truncation, byte
flips, type swaps, huge and hostile values, sums beyond int64, deep nesting, non-regular and sparse
files) fed to every command that reads a run (``tests/report/every_command.py``: ``report``, its
``--json`` and ``--html``, ``top -n 1``, ``attempts``, ``reduce``, ``compare``, ``export`` and one
``serve`` scrape), one command per input, in turn. Every input must give exit 0 or 2, no traceback,
no internal error and no raw control character on a terminal, within a per-input time limit
(SIGALRM) and under an address-space ceiling (RLIMIT_AS, so no input can take more memory).

The fuzzing loop runs in one child process (RLIMIT_AS set there) so that hundreds of inputs fit in
the time budget: ``LINEPROFILER_FUZZ_SECONDS`` (default 15) and ``LINEPROFILER_FUZZ_SEED``.
"""

from __future__ import annotations

import json
import os
import textwrap

from tests.helpers import run_python
from tests.report.every_command import COMMANDS, EVERY_COMMAND
from tests.report.test_hostile_inputs import REAL_RUN

PER_INPUT_S = 20

FUZZ_CHILD = (
    """
import json, os, random, resource, shutil, sys, time
from pathlib import Path

seconds, seed, memory_mb = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
per_input_s = float(sys.argv[4])
resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
"""
    + EVERY_COMMAND
    + textwrap.dedent(
        """
    real = Path("run")
    (worker,) = sorted(real.glob("workers/*/w_*.json"))
    rel = worker.relative_to(real)
    base_doc = json.loads(worker.read_text())
    rng = random.Random(seed)

    HOSTILE = [None, True, -1, 0, 2**63, 2**63 - 1, -2**63 - 1, 10**400, 1.5, float("nan"),
               float("inf"), "\\x9b31m", "\\u2028", "\\x85", "\\x1b]0;title\\x07",
               "", "\\x00", "x\\n\\nCAVEATS", "\\x1b[2J", "\\u202e", "a/b", "(folded)", [], {},
               [[1, 2]], {"a": 1}, "9" * 50, [None] * 3]

    def walk(node, path=()):
        yield path, node
        if isinstance(node, dict):
            for k, v in node.items():
                yield from walk(v, path + (k,))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                yield from walk(v, path + (i,))

    def put(doc, path, value):
        node = doc
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value

    def mutate_doc(doc):
        spots = [p for p, _ in walk(doc) if p]
        for _ in range(rng.randint(1, 4)):
            path = rng.choice(spots)
            kind = rng.random()
            try:
                if kind < 0.6:
                    put(doc, path, rng.choice(HOSTILE))
                elif kind < 0.7:
                    put(doc, path, "__DEEP__")  # nested 5,000 deep in the text (below)
                elif kind < 0.8:
                    node = doc
                    for k in path[:-1]:
                        node = node[k]
                    del node[path[-1]]
                else:
                    put(doc, path, -1 if rng.random() < 0.5 else 10**rng.randint(10, 30))
            except (KeyError, IndexError, TypeError):
                pass
            spots = [p for p, _ in walk(doc) if p]
        return json.dumps(doc, allow_nan=True).replace('"__DEEP__"', "[" * 5000 + "1" + "]" * 5000)

    def mutate_bytes(data):
        data = bytearray(data)
        kind = rng.random()
        if kind < 0.4 and data:
            return bytes(data[: rng.randrange(len(data))])  # truncated
        for _ in range(rng.randint(1, 8)):
            if data:
                data[rng.randrange(len(data))] = rng.randrange(256)
        if kind > 0.9:
            data += bytes(rng.randrange(256) for _ in range(rng.randint(1, 300)))
        return bytes(data)

    def mutate_samples(path):
        kind = rng.random()
        if kind < 0.15:
            path.unlink()
            path.symlink_to(rng.choice(["/dev/zero", "/etc/hostname", "missing"]))
        elif kind < 0.25:
            path.unlink()
            os.mkfifo(path)
        elif kind < 0.45:
            data = bytearray(path.read_bytes())
            off = rng.choice([8, 12, 16, 20, 24, 32, 40])
            data[off : off + 4] = rng.choice([0, 1, 2**31, 2**32 - 1, 50_000_000]).to_bytes(4, "little")
            path.write_bytes(bytes(data))
        else:
            path.write_bytes(mutate_bytes(path.read_bytes()))

    def mutate_tags(path):
        kind = rng.random()
        if kind < 0.2:
            path.write_text("[1," + "[" * 100000 + "]" * 100000 + "]\\n")
        elif kind < 0.3:
            path.unlink()
            os.mkfifo(path)
        else:
            path.write_bytes(mutate_bytes(path.read_bytes()))

    def overflow(doc):  # values each within the schema whose sum is not
        recs = [r for t in doc.get("threads", []) for r in t.get("phases", [])]
        if not recs:
            return
        rec = rng.choice(recs)
        kind = rng.choice(["every", "async", "tasks"])
        if kind == "every":
            rec.update(sample_every=2, wall_ns=2**63 - 1, open_ns=1)
        elif kind == "async":
            rec.update(wall_ns=2**63 - 1, async_wall_ns=2**63 - 1, async_calls=1, open_ns=1)
        else:
            doc["threads"][0]["tasks"] = 1
            rec.update(open_ns=2**63 - 1, open=1)

    # A valid ``.lines`` sidecar for the worker (issue 32), on the real run's deepest path, that
    # the "lines" kind mutates like a worker document, or swaps for a FIFO, a link or bytes.
    from lineprofiler.report.merge import merge_run as _merge_run
    from lineprofiler.runfile.layout import pid_from_name as _pid_from_name

    _deepest = max((p for r in _merge_run(str(real)).roles.values() for p in r.tree), key=len)
    base_lines = {
        "format": "lineprofiler-lines", "version": 1, "pid": _pid_from_name(worker.name),
        "python": "3.11.9", "mechanism": "settrace", "project_folder": "/p", "paths": [],
        "overhead_ns_per_event": {"line": 40.0, "call": 80.0},
        "phases": [{
            "path": "/".join(_deepest), "requested": _deepest[-1], "entries": 3,
            "traced_entries": 1, "traced_wall_ns": 5000, "untraced_wall_ns": 7000,
            "functions": [{
                "file": "/p/t.py", "function": "f", "first_line": 1, "last_line": 3,
                "lines": [{"line": 2, "end_line": 3, "hits": 4, "time_ns": 900,
                           "raw_time_ns": 1000, "self_time_ns": 800, "source": "  x = (1,"}],
                "body": ["def f():", "  x = (1,", "       2)"],
            }],
        }],
    }

    def mutate_lines(path):
        kind = rng.random()
        if kind < 0.1:
            os.mkfifo(path)
        elif kind < 0.2:
            path.symlink_to(rng.choice(["/dev/zero", "/etc/hostname", "missing"]))
        elif kind < 0.35:
            path.write_bytes(mutate_bytes(json.dumps(base_lines).encode()))
        else:
            path.write_text(mutate_doc(json.loads(json.dumps(base_lines))))

    def sparse(path):
        head = path.read_bytes()[:64]
        path.unlink()
        with open(path, "wb") as f:
            f.write(head)
            f.truncate(1 << 30)

    deadline = time.monotonic() + seconds
    tried, failures, kinds, commands = 0, [], {}, {}
    while time.monotonic() < deadline:
        case = Path(f"case{tried % 2}")
        if case.exists():
            shutil.rmtree(case)
        shutil.copytree(real, case, symlinks=True)
        w = case / rel
        what = rng.choice(
            ["doc", "doc", "bytes", "samples", "tags", "both", "overflow", "sparse", "lines"]
        )
        kinds[what] = kinds.get(what, 0) + 1
        if what in ("doc", "both"):
            w.write_text(mutate_doc(json.loads(json.dumps(base_doc))))
        if what == "bytes":
            w.write_bytes(mutate_bytes(w.read_bytes()))
        if what in ("samples", "both"):
            mutate_samples(w.with_suffix(".samples"))
        if what in ("tags", "both"):
            mutate_tags(w.with_suffix(".tags"))
        if what == "overflow":
            doc = json.loads(json.dumps(base_doc))
            overflow(doc)
            w.write_text(json.dumps(doc))
        if what == "lines":
            mutate_lines(w.with_suffix(".lines"))
        if what == "sparse":
            sparse(w.with_suffix(rng.choice([".samples", ".tags", ".json"])))
        command = COMMANDS[tried % len(COMMANDS)]  # every command in turn
        commands[command] = commands.get(command, 0) + 1
        out_dir = Path("out")
        out_dir.mkdir(exist_ok=True)
        rc, _out, err, problem = run_command(command, case, real, out_dir, per_input_s)
        if problem is not None:
            keep = Path(f"failure{len(failures)}")
            try:
                shutil.copytree(case, keep, symlinks=True)
            except shutil.Error:  # a FIFO is not copied: the rest is kept
                pass
            failures.append(
                {"command": command, "rc": rc, "problem": problem, "stderr": err[-600:],
                 "kept": str(keep)}
            )
        tried += 1
    print(json.dumps({"tried": tried, "kinds": kinds, "commands": commands,
                      "failures": failures[:5], "failed": len(failures)}))
"""
    )
)


def test_fuzzed_worker_files_and_sidecars_never_crash_hang_or_blow_up(tmp_path):
    seconds = float(os.environ.get("LINEPROFILER_FUZZ_SECONDS", "15"))
    seed = int(os.environ.get("LINEPROFILER_FUZZ_SEED", "1616"))
    run_python(REAL_RUN, cwd=tmp_path)
    proc = run_python(
        FUZZ_CHILD,
        cwd=tmp_path,
        args=[str(seconds), str(seed), "1536", str(PER_INPUT_S)],
        timeout=seconds + 120,
    )
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"fuzzer: {got['tried']} inputs in {seconds:.0f} s (seed {seed}): {got['kinds']}")
    print(f"fuzzer: per command: {got['commands']}")
    assert got["tried"] >= 20
    assert set(got["commands"]) == set(COMMANDS)  # every command got inputs
    assert got["failed"] == 0, json.dumps(got["failures"], indent=1)
