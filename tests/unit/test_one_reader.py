"""Every command reads a run directory's files through the one shared reader.

``runfile.safe_read`` opens without following a link, without blocking on a FIFO, accepts only a
regular file without holes and bounds what it reads (docs/guide/sharing-a-run-directory.md). This
check walks the syntax tree of every module under ``report/``, ``runfile/`` and ``cli.py`` and
fails on any other way to open a file for reading: builtin ``open()`` (read or update mode),
``os.open`` without O_WRONLY, ``os.fdopen``/``io.open`` for reading, ``Path.open``,
``read_text``/``read_bytes``, ``json.load``, ``mmap``, ``numpy.fromfile``; and, under
``report/``, on a call of the reader that does not name the run directory the file must lie in
(``within``: no directory between may be a link). Opening for writing (output files) is the
writer's business, not this check's. Printing: a value a command's own message formats
(``print``/``.write`` in ``report/cli_*.py`` and ``live.py``) goes through ``terminal_safe``
unless it is a number; the rendered reports are checked by running every command over hostile
names (``tests/report/test_every_command_reads_safely.py`` and the fuzzer).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "lineprofiler"
READER = SRC / "runfile" / "safe_read.py"


def _modules() -> list[Path]:
    mods = sorted((SRC / "report").rglob("*.py")) + sorted((SRC / "runfile").rglob("*.py"))
    return [p for p in mods + [SRC / "cli.py"] if p != READER]


def _mode(call: ast.Call, pos: int) -> str | None:
    """The mode argument of an open-like call when it is a literal; "" when absent (read)."""
    for kw in call.keywords:
        if kw.arg == "mode":
            return kw.value.value if isinstance(kw.value, ast.Constant) else None
    if len(call.args) > pos:
        arg = call.args[pos]
        return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None
    return ""


def _reads(mode: str | None) -> bool:
    """Whether an open mode reads (unknown: assume it does)."""
    return mode is None or mode == "" or "r" in mode or "+" in mode


def _dotted(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # pragma: no cover - every call node unparses
        return ""


def bypasses(source: str) -> list[tuple[int, str]]:
    """(line, what) for each way ``source`` opens a file for reading other than the reader."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = _dotted(func)
        what = None
        if isinstance(func, ast.Name) and func.id == "open":
            if _reads(_mode(node, 1)):
                what = "builtin open() for reading"
        elif name in ("io.open", "codecs.open"):
            if _reads(_mode(node, 1)):
                what = f"{name}() for reading"
        elif name == "os.fdopen":
            if _reads(_mode(node, 1)):
                what = "os.fdopen() for reading"
        elif name == "os.open":
            flags = _dotted(node.args[1]) if len(node.args) > 1 else ""
            if "O_WRONLY" not in flags:
                what = "os.open() for reading"
        elif name in ("json.load", "mmap.mmap", "np.fromfile", "numpy.fromfile", "pickle.load"):
            what = f"{name}()"
        elif isinstance(func, ast.Attribute) and func.attr in ("read_text", "read_bytes"):
            what = f".{func.attr}()"
        elif isinstance(func, ast.Attribute) and func.attr == "open" and name != "os.open":
            if _reads(_mode(node, 0)):
                what = f"{name}() for reading"
        if what:
            out.append((node.lineno, what))
    return out


def test_the_check_finds_each_way_to_read_around_the_reader():
    bad = """
open(p)
open(p, "rb")
open(p, mode="r+")
io.open(p)
os.open(p, os.O_RDONLY | os.O_NOFOLLOW)
os.fdopen(fd, "rb")
Path(p).open()
p.read_text()
p.read_bytes()
json.load(f)
"""
    assert [line for line, _ in bypasses(bad)] == list(range(2, 12))
    fine = """
open(p, "w")
os.open(os.devnull, os.O_WRONLY)
os.fdopen(fd, "wb")
read_regular(p, 10)
json.loads(text)
"""
    assert bypasses(fine) == []


def test_no_module_under_report_runfile_or_cli_reads_a_file_around_the_reader():
    found = [
        f"{p.relative_to(SRC)}:{line}: {what}"
        for p in _modules()
        for line, what in bypasses(p.read_text())
    ]
    assert not found, "read through lineprofiler.runfile.safe_read instead:\n" + "\n".join(found)


# The shared reader's entry points, and the position of their ``within`` (run directory) argument.
_WITHIN_AT = {
    "load_worker_doc": 1,
    "read_samples": 1,
    "read_tags": 1,
    "read_summary": 1,
    "read_sidecar": 2,
    "read_regular": 2,
    "read_regular_stat": 2,
    "load_worker_doc_mtime": 1,
    "open_regular": 2,
    "read_head": 3,
}


def without_run_dir(source: str) -> list[tuple[int, str]]:
    """(line, function) for each call of the reader that does not say which run directory the
    file must lie in (so a linked ``workers/<host>`` would be read through)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        at = _WITHIN_AT.get(name)
        if at is None:
            continue
        if len(node.args) <= at and not any(kw.arg == "within" for kw in node.keywords):
            out.append((node.lineno, name))
    return out


def test_every_command_reads_a_run_file_within_its_run_directory():
    assert without_run_dir("read_samples(p)\nread_samples(p, root)\nread_head(p, 8, n)") == [
        (1, "read_samples"),
        (3, "read_head"),
    ]
    found = [
        f"{p.relative_to(SRC)}:{line}: {name}"
        for p in sorted((SRC / "report").rglob("*.py"))
        for line, name in without_run_dir(p.read_text())
    ]
    assert not found, "pass the run directory (within=) to:\n" + "\n".join(found)


def test_the_reader_opens_without_following_links_or_blocking():
    text = READER.read_text()
    for flag in ("O_NOFOLLOW", "O_NONBLOCK", "O_CLOEXEC", "S_ISREG", "SEEK_HOLE"):
        assert flag in text, flag


# What a command's own messages may print as they are: numbers and the command's own words. Any
# other value in a print()/write() of a command module must go through terminal_safe (or its
# alias term); fail() escapes its message itself.
_ESCAPES = {"terminal_safe", "term"}
_PLAIN = {"n", "rc", "port", "prog", "ENV_DEBUG", "type(exc).__name__", "stamp"}
_PRINTERS = [*sorted((SRC / "report").glob("cli_*.py")), SRC / "report" / "live.py"]


def raw_prints(source: str) -> list[tuple[int, str]]:
    """(line, value) for each value a print()/.write() formats without the shared escape."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        if name != "print" and not name.endswith(".write"):
            continue
        for v in ast.walk(node):
            if not isinstance(v, ast.FormattedValue):
                continue
            text = _dotted(v.value)
            escaped = isinstance(v.value, ast.Call) and _dotted(v.value.func) in _ESCAPES
            numeric = v.format_spec is not None or text.startswith("len(")
            if not (escaped or numeric or text in _PLAIN):
                out.append((node.lineno, text))
    return out


def test_command_messages_print_names_through_the_shared_escape():
    assert raw_prints('print(f"{host}: {n} -> {terminal_safe(path)} {x:,}")') == [(1, "host")]
    found = [
        f"{p.relative_to(SRC)}:{line}: {value}"
        for p in _PRINTERS
        for line, value in raw_prints(p.read_text())
    ]
    assert not found, "print these through terminal_safe:\n" + "\n".join(found)
