"""The environment of a child interpreter that must import this lineprofiler (a test's or a
benchmark's child process)."""

from __future__ import annotations

import os

import lineprofiler

# The folder this lineprofiler is imported from: a child process imports the same one.
LINEPROFILER_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(lineprofiler.__file__)))


def child_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a child interpreter: this one's without LINEPROFILER_*, with
    faulthandler on, unbuffered, and this lineprofiler (even uninstalled) first on PYTHONPATH;
    then ``env`` on top."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("LINEPROFILER_")}
    full_env.update(PYTHONFAULTHANDLER="1", PYTHONUNBUFFERED="1")
    # A relative PYTHONPATH entry would break under the child's cwd.
    entries = [LINEPROFILER_ROOT]
    entries += [os.path.abspath(p) for p in full_env.get("PYTHONPATH", "").split(os.pathsep) if p]
    full_env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(entries))
    # Under scripts/mutation a child runs its parent's mutant (mutmut's MUTANT_UNDER_TEST); only
    # mutmut's coverage pass ("stats"), which records calls in-process, runs the original code.
    if full_env.get("MUTANT_UNDER_TEST") == "stats":
        full_env["MUTANT_UNDER_TEST"] = ""
    if env:
        full_env.update(env)
    return full_env
