"""A bounded-time fuzzer of worker files and sidecars: mutations of a real run (truncation, byte
flips, type swaps, huge and hostile values, deep nesting, non-regular files) fed to ``report``
(text and JSON) and ``compare``. Every input must give exit 0 or 2, no traceback and no internal
error, within a per-input time limit and under an address-space ceiling.

The fuzzing loop runs in one child process (RLIMIT_AS set there) so that hundreds of inputs fit in
the time budget: ``LINEPROFILER_FUZZ_SECONDS`` (default 15) and ``LINEPROFILER_FUZZ_SEED``.
"""

from __future__ import annotations

import json
import os

from tests.helpers import run_python
from tests.report.test_hostile_inputs import REAL_RUN

FUZZ_CHILD = """
    import contextlib, io, json, os, random, resource, shutil, signal, sys, time
    from pathlib import Path

    seconds, seed, memory_mb = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
    from lineprofiler.cli import main

    real = Path("run")
    (worker,) = sorted(real.glob("workers/*/w_*.json"))
    rel = worker.relative_to(real)
    base_doc = json.loads(worker.read_text())
    rng = random.Random(seed)

    HOSTILE = [None, True, -1, 0, 2**63, -2**63 - 1, 10**400, 1.5, float("nan"), float("inf"),
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

    class Hang(Exception):
        pass

    def on_alarm(signum, frame):
        raise Hang()

    signal.signal(signal.SIGALRM, on_alarm)
    deadline = time.monotonic() + seconds
    tried, failures, kinds = 0, [], {}
    while time.monotonic() < deadline:
        case = Path(f"case{tried % 2}")
        if case.exists():
            shutil.rmtree(case)
        shutil.copytree(real, case, symlinks=True)
        w = case / rel
        what = rng.choice(["doc", "doc", "bytes", "samples", "tags", "both"])
        kinds[what] = kinds.get(what, 0) + 1
        if what in ("doc", "both"):
            w.write_text(mutate_doc(json.loads(json.dumps(base_doc))))
        if what == "bytes":
            w.write_bytes(mutate_bytes(w.read_bytes()))
        if what in ("samples", "both"):
            mutate_samples(w.with_suffix(".samples"))
        if what in ("tags", "both"):
            mutate_tags(w.with_suffix(".tags"))
        argv = rng.choice([["report", str(case)], ["report", "--json", str(case)],
                           ["compare", str(real), str(case)]])
        out, err = io.StringIO(), io.StringIO()
        signal.alarm(20)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                rc = main(argv)
        except Hang:
            rc = "hang"
        except BaseException as exc:  # anything escaping main() is a failure
            rc = f"raised {type(exc).__name__}: {str(exc)[:200]}"
        finally:
            signal.alarm(0)
        text = err.getvalue()
        bad = rc not in (0, 2) or "Traceback" in text or "internal error" in text
        if rc == 2 and len(text.strip().splitlines()) != 1:
            bad = True
        if bad:
            keep = Path(f"failure{len(failures)}")
            shutil.copytree(case, keep, symlinks=True)
            failures.append({"argv": argv, "rc": rc, "stderr": text[-600:], "kept": str(keep)})
        tried += 1
    print(json.dumps({"tried": tried, "kinds": kinds, "failures": failures[:5],
                      "failed": len(failures)}))
"""


def test_fuzzed_worker_files_and_sidecars_never_crash_hang_or_blow_up(tmp_path):
    seconds = float(os.environ.get("LINEPROFILER_FUZZ_SECONDS", "15"))
    seed = int(os.environ.get("LINEPROFILER_FUZZ_SEED", "1616"))
    run_python(REAL_RUN, cwd=tmp_path)
    proc = run_python(
        FUZZ_CHILD,
        cwd=tmp_path,
        args=[str(seconds), str(seed), "1536"],
        timeout=seconds + 120,
    )
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"fuzzer: {got['tried']} inputs in {seconds:.0f} s (seed {seed}): {got['kinds']}")
    assert got["tried"] >= 20
    assert got["failed"] == 0, json.dumps(got["failures"], indent=1)
