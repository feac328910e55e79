"""Only code under the project folder is traced: the folder rule and its exclusions."""

from __future__ import annotations

import os
import sys

from lineprofiler import LineProfiler
from lineprofiler.line import ProjectScope, find_project_folder

from ._support import load_module, make_project

CALLEE = """
def helper(n):
    total = 0
    for i in range(n):
        total += i
    return total
"""


def _files(profiler):
    return {fs.filename for fs in profiler.get_stats().values()}


def test_folder_autodetect_walks_up_to_git(tmp_path, monkeypatch):
    root = make_project(tmp_path)
    sub = root / "a" / "b"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    assert find_project_folder() == root.resolve()
    assert LineProfiler().project_folder == root.resolve()
    (root / "a" / ".git").write_text("gitdir: elsewhere\n")  # a worktree/submodule's .git file
    assert find_project_folder() == (root / "a").resolve()


def test_folder_without_git_is_the_working_directory(tmp_path, monkeypatch):
    plain = tmp_path / "plain"
    plain.mkdir()
    monkeypatch.chdir(plain)
    if not any((p / ".git").exists() for p in plain.resolve().parents):
        assert find_project_folder() == plain.resolve()


def test_out_of_folder_code_never_appears(tmp_path):
    root = make_project(tmp_path)
    outside = load_module(tmp_path / "elsewhere" / "lib.py", CALLEE)
    inside = load_module(
        root / "app.py",
        """
        def main(lib):
            return lib.helper(100) + sum(sorted([3, 1, 2]))
        """,
    )
    profiler = LineProfiler(root)
    with profiler:
        inside.main(outside)
    files = _files(profiler)
    assert files == {inside.__file__}
    assert all(f.startswith(str(root)) for f in files)


def test_venv_and_site_packages_inside_project_are_excluded(tmp_path):
    root = make_project(tmp_path)
    (root / ".venv").mkdir()
    (root / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    in_venv = load_module(root / ".venv" / "lib" / "pkg.py", CALLEE)
    in_site = load_module(root / "vendor" / "site-packages" / "pkg2.py", CALLEE)
    app = load_module(
        root / "app.py",
        """
        def main(a, b):
            return a.helper(10) + b.helper(10)
        """,
    )
    profiler = LineProfiler(root)
    with profiler:
        app.main(in_venv, in_site)
    assert _files(profiler) == {app.__file__}


def test_exec_code_is_skipped_unless_it_maps_to_a_project_file(tmp_path):
    root = make_project(tmp_path)
    real = root / "real.py"
    real.write_text(CALLEE)
    ns_string: dict = {}
    ns_file: dict = {}
    exec(compile(CALLEE, "<string>", "exec"), ns_string)
    exec(compile(CALLEE, str(real), "exec"), ns_file)
    exec(compile(CALLEE, str(root / "missing.py"), "exec"), ns_missing := {})
    profiler = LineProfiler(root)
    with profiler:
        ns_string["helper"](5)
        ns_file["helper"](5)
        ns_missing["helper"](5)
    assert _files(profiler) == {str(real)}


def test_symlinks_are_resolved(tmp_path):
    root = make_project(tmp_path)
    mod_path = root / "target.py"
    link_dir = tmp_path / "link"
    os.symlink(root, link_dir)
    mod = load_module(link_dir / "target.py", CALLEE)
    assert mod.__file__.startswith(str(link_dir))
    profiler = LineProfiler(link_dir)  # the folder through the link too
    with profiler:
        mod.helper(7)
    (fs,) = profiler.get_stats().values()
    assert fs.lines[fs.first_lineno + 3].hits == 7
    assert os.path.realpath(fs.filename) == str(mod_path.resolve())


def test_scope_rules_directly(tmp_path):
    root = make_project(tmp_path)
    scope = ProjectScope(root)
    (root / "x.py").write_text("")
    assert scope(str(root / "x.py"))
    assert not scope("<string>")
    assert not scope("<frozen importlib._bootstrap>")
    assert not scope(str(root / "nope.py"))
    assert not scope(os.__file__)  # the standard library
    assert not scope(sys.modules["lineprofiler"].__file__)
