"""The rule that masks secrets in argv before a worker file (lp_core/argv_mask.h, the one
implementation for the Python and the standalone C++ profiler): each case is the command line a
user types and what a worker file may show of it."""

from __future__ import annotations

import pytest

from lineprofiler import _core
from lineprofiler.accounting import _identity
from tests.helpers import read_worker, run_python, worker_files

M = _identity.MASK

MASKED = [
    (["--api-key", "s3"], ["--api-key", M]),
    (["--token=abc"], [f"--token={M}"]),
    (
        ["TOKEN=abc", "HF_TOKEN=x", "AWS_SECRET_ACCESS_KEY=y"],
        [f"TOKEN={M}", f"HF_TOKEN={M}", f"AWS_SECRET_ACCESS_KEY={M}"],
    ),
    (["-p", "hunter2"], ["-p", M]),
    (["-phunter2"], [f"-p{M}"]),  # mysql's glued form
    (
        ["--pass", "p1", "--passphrase", "p2", "--passwd=p3"],
        ["--pass", M, "--passphrase", M, f"--passwd={M}"],
    ),
    (["--auth", "user:pw"], ["--auth", M]),
    (["--authorization=Bearer x"], [f"--authorization={M}"]),
    (["--credentials", "c.json", "--creds", "d"], ["--credentials", M, "--creds", M]),
    (["--client-secret", "s"], ["--client-secret", M]),
    (
        ["--apiKey", "k", "--wandbKey=k2", "--hftoken", "t"],
        ["--apiKey", M, f"--wandbKey={M}", "--hftoken", M],
    ),
    (["postgres://u:pw@h/db"], [f"postgres://u:{M}@h/db"]),
    (["--db=mysql://root:rootpw@localhost:3306/x"], [f"--db=mysql://root:{M}@localhost:3306/x"]),
    (["--url", "https://a:b@c/d?x=e@f"], ["--url", f"https://a:{M}@c/d?x=e@f"]),
    (["--pad-token-id", "0"], ["--pad-token-id", M]),  # a false positive, documented
]

KEPT = [
    ["--max-tokens", "100", "--max_new_tokens", "20", "--num-tokens=5"],
    ["--tokenizer", "gpt2", "--tokenizer-name=t5"],
    ["--keyframes", "3", "--keyword", "x", "--keypoints", "17", "--keys", "a,b"],
    ["--num-passes", "2", "--bypass-cache", "1", "--compass", "n"],
    ["--author", "me", "--authors", "us"],
    ["--lr", "3", "lr=3", "--batch-size=8", "train.py"],
    ["https://user@host/x", "ssh://host:22/p", "--out", "a:b"],
    ["--no-password", "train.py"],  # a negation takes no value
    ["--api-key", "--verbose"],  # the next argument is an option, not the value
]


@pytest.mark.parametrize("argv, want", MASKED)
def test_secrets_are_masked(argv, want):
    assert _identity.masked_argv(["prog", *argv]) == ["prog", *want]


@pytest.mark.parametrize("argv", KEPT)
def test_innocent_arguments_are_kept(argv):
    assert _identity.masked_argv(["prog", *argv]) == ["prog", *argv]


def test_the_rule_is_lp_cores_and_names_a_secret_by_its_words():
    assert _identity.MASK == _core.MASKED == "<masked>"
    for key in ("--hf-token", "TOKEN", "apiKey", "--SECRET", "--auth", "credential_file"):
        assert _core.names_a_secret(key), key
    for key in ("--max-tokens", "--tokenizer", "--keyframes", "--author", "--passes", "--lr"):
        assert not _core.names_a_secret(key), key


def test_an_argument_that_is_not_utf8_is_escaped_not_refused():
    bad = b"--token=\xff".decode("utf-8", "surrogateescape")
    assert _identity.masked_argv(["prog", bad, "caf\udce9"]) == [
        "prog",
        f"--token={M}",
        "caf\\udce9",
    ]


CHILD = """
    import sys
    from lineprofiler.accounting import Profiler

    p = Profiler(run_dir="run", enabled=True, snapshot_interval_s=None, sample_interval_s=None)
    with p.phase("x"):
        pass
    p.close()
"""


def test_a_worker_file_carries_no_secret_of_its_command_line(tmp_path):
    args = ["TOKEN=S-ONE", "-p", "S-TWO", "postgres://u:S-THREE@h/db", "--max-tokens", "9"]
    run_python(CHILD, cwd=tmp_path, args=args)
    (f,) = worker_files(tmp_path / "run")
    text = f.read_text()
    assert "S-ONE" not in text and "S-TWO" not in text and "S-THREE" not in text
    argv = read_worker(f)["meta"]["argv"]
    assert argv[1:] == [f"TOKEN={M}", "-p", M, f"postgres://u:{M}@h/db", "--max-tokens", "9"]
