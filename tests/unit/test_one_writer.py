"""Every file the package writes goes through the one writer, ``lineprofiler.safe_write``.

An AST check over every module: a call that creates, replaces or writes a file by path (``open``
for writing, ``os.open`` with O_CREAT/O_WRONLY/O_RDWR, ``write_text``, ``mkstemp``,
``os.replace``, ``mkdir`` ...) fails the test unless the module is ``safe_write`` itself or the
call is one of the few listed below with the reason it is not an output file. A new command that
writes its output with ``open(FILE, "w")`` (how ``report --html`` wrote through a planted link)
fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "lineprofiler"

# (module, call, the first argument as written): not an output file, and why.
ALLOWED = {
    (
        "accounting/backends.py",
        "os.open",
        "run_dir / '.metadata.lock'",
    ): "the metadata lock: O_NOFOLLOW, never written, only locked",
    ("accounting/backends.py", "open", "lock_fd"): "the lock's own descriptor, opened just above",
    ("line/_follow.py", "tempfile.mkdtemp", ""): "the follower's private 0700 directory",
    ("line/_follow.py", "write_text", ""): "files inside that private directory",
    ("line/cli_run.py", "open", "saved_fd"): "a duplicate of stdout, not a path",
    (
        "accounting/_record_handoff.py",
        "os.open",
        "target",
    ): "appends to the hand-off file record made: no O_CREAT, O_NOFOLLOW, regular files only",
    ("report/cli_record.py", "touch", ""): "the hand-off file, in record's private 0700 tempdir",
}

_PATH_CALLS = {
    "write_text",
    "write_bytes",
    "mkstemp",
    "mkdtemp",
    "NamedTemporaryFile",
    "TemporaryFile",
    "SpooledTemporaryFile",
    "replace",
    "rename",
    "renames",
    "link",
    "symlink",
    "symlink_to",
    "hardlink_to",
    "mkdir",
    "makedirs",
    "mknod",
    "mkfifo",
    "touch",
    "truncate",
    "copy",
    "copy2",
    "copyfile",
    "copytree",
    "move",
}
_WRITE_FLAGS = ("O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND")


def _dotted(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        inner = _dotted(func.value)
        return f"{inner}.{func.attr}" if inner else func.attr
    return ""


def _is_method_open(call: ast.Call) -> bool:
    """``Path(...).open(mode)``: the mode is the first argument."""
    func = call.func
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "open"
        and _dotted(func.value) not in ("os", "io")
    )


def _mode(call: ast.Call) -> str | None:
    """The mode string of an open()-like call, when it is a literal."""
    for kw in call.keywords:
        if kw.arg == "mode" and isinstance(kw.value, ast.Constant):
            return str(kw.value.value)
    index = 0 if _is_method_open(call) else 1
    if len(call.args) > index and isinstance(call.args[index], ast.Constant):
        return str(call.args[index].value)
    return None


def _writes(call: ast.Call) -> str | None:
    """The call's name when it writes a file by path, else None."""
    dotted = _dotted(call.func)
    last = dotted.rsplit(".", 1)[-1]
    first = ast.unparse(call.args[0]) if call.args else ""
    if first == "os.devnull":
        return None
    if dotted == "os.open":
        flags = ast.unparse(call.args[1]) if len(call.args) > 1 else ""
        return dotted if any(f in flags for f in _WRITE_FLAGS) else None
    if last in ("open", "fdopen"):
        mode = _mode(call)
        if mode is not None and any(c in mode for c in "wax+"):
            return ".open" if _is_method_open(call) else dotted
        return None
    if last in _PATH_CALLS and not dotted.startswith(("str.", "re.")) and dotted != "replace":
        if last in ("replace", "copy", "move", "link", "truncate") and not dotted.startswith(
            ("os.", "shutil.")
        ):
            return None  # str.replace, dict.copy, ...
        return dotted if dotted.startswith(("os.", "shutil.", "tempfile.")) else last
    return None


def _offences() -> dict[tuple[str, str, str], int]:
    found: dict[tuple[str, str, str], int] = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel == "safe_write.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                name = _writes(node)
                if name is not None:
                    first = ast.unparse(node.args[0]) if node.args else ""
                    if name in ("write_text", "tempfile.mkdtemp"):
                        first = ""
                    key = (rel, name, first)
                    found[key] = node.lineno
    return found


def test_output_files_are_written_only_through_safe_write():
    found = _offences()
    bad = sorted(
        f"{m}:{line}: {n}({a})" for (m, n, a), line in found.items() if (m, n, a) not in ALLOWED
    )
    assert bad == [], "write through lineprofiler.safe_write (output_file, write_output)"


def test_the_allowed_exceptions_are_still_there():
    # an entry that no longer matches a call is stale: remove it rather than let it excuse a new one
    assert set(ALLOWED) <= set(_offences())


def test_the_check_catches_the_old_html_writer_and_its_kin():
    old = """
import os, tempfile
from pathlib import Path
with open(args.html, "w", encoding="utf-8") as f: f.write(page)
fd, tmp = tempfile.mkstemp(dir=".")
os.replace(tmp, target)
Path(x).write_text("y")
fd = os.open(p, os.O_WRONLY | os.O_CREAT, 0o644)
Path(p).open("a")
parent.mkdir(parents=True)
"""
    calls = [n for n in ast.walk(ast.parse(old)) if isinstance(n, ast.Call)]
    caught = sorted({name for c in calls if (name := _writes(c))})
    assert caught == [
        ".open",
        "mkdir",
        "open",
        "os.open",
        "os.replace",
        "tempfile.mkstemp",
        "write_text",
    ]
    innocent = 'open(p, "rb")\nos.open(p, os.O_RDONLY)\ns.replace("a", "b")\nd.copy()'
    calls = [n for n in ast.walk(ast.parse(innocent)) if isinstance(n, ast.Call)]
    assert [c for c in calls if _writes(c)] == []


def test_the_writer_imports_nothing_of_the_package():
    # recording, reading and the line profiler all use it: it must sit upstream of each of them
    tree = ast.parse((SRC / "safe_write.py").read_text())
    imported = [
        n.module if isinstance(n, ast.ImportFrom) else a.name
        for n in ast.walk(tree)
        if isinstance(n, (ast.Import, ast.ImportFrom))
        for a in n.names
    ]
    assert not [m for m in imported if m and m.startswith("lineprofiler")]
