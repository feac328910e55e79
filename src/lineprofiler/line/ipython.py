"""The IPython/Jupyter extension: ``%load_ext lineprofiler``, then

    %%lineprofile [--top N] [--by time|self|hits|line] [--unit ns|us|ms|s] [--per-function]
                  [--path DIR]... [--project-folder DIR] [--raw]
    <cell>

    %lineprofile [options] statement

trace the code defined in notebook cells (any cell of this session) plus the project folder
while the cell or statement runs, and print the statistics in the cell's output.
"""

from __future__ import annotations

import argparse
import shlex
from typing import Any, NoReturn

from IPython.core.magic import Magics, line_cell_magic, magics_class

from lineprofiler.line import LineProfiler

_WITH_VALUE = {"--top", "--min-time-us", "--by", "--sort", "--unit", "--path", "--project-folder"}


def _split_line(line: str) -> tuple[list[str], str]:
    """(the leading --options, the statement after them, verbatim) of a line magic."""
    rest = line.strip()
    options: list[str] = []
    while rest.startswith("--"):
        token, _, rest = rest.partition(" ")
        options.append(token)
        rest = rest.lstrip()
        if token in _WITH_VALUE:
            value, _, rest = rest.partition(" ")
            options.append(value)
            rest = rest.lstrip()
    return options, rest


class _UsageError(Exception):
    """A bad option: the message to print under the usage (once)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse would print usage, then exit
        raise _UsageError(message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="%lineprofile", add_help=False)
    p.add_argument("--top", type=int, default=20)
    p.add_argument("--min-time-us", type=float, default=0.0)
    p.add_argument("--by", "--sort", dest="sort", default="time",
                   choices=("time", "self", "hits", "line"))  # fmt: skip
    p.add_argument("--unit", default="us", choices=("ns", "us", "ms", "s"))
    p.add_argument("--per-function", action="store_true")
    p.add_argument("--path", dest="paths", action="append", default=[])
    p.add_argument("--project-folder", default=None)
    p.add_argument("--raw", action="store_true")
    return p


@magics_class
class LineProfileMagics(Magics):
    """``%lineprofile`` / ``%%lineprofile``."""

    def _is_cell(self, filename: str) -> bool:
        compiler = getattr(self.shell, "compile", None)
        return filename in getattr(compiler, "_filename_map", {}) or filename.startswith(
            "<ipython-input-"
        )

    @line_cell_magic
    def lineprofile(self, line: str, cell: str | None = None) -> None:
        """Line-profiles a cell (``%%lineprofile [options]``) or a statement
        (``%lineprofile [options] statement``); see ``lineprofiler.line.ipython``."""
        if cell is None:
            options, source = _split_line(line)
        else:
            options, source = shlex.split(line, posix=True), cell
        parser = _parser()
        try:
            args = parser.parse_args(options)
        except _UsageError as exc:
            print(f"{parser.format_usage()}%lineprofile: error: {exc}")
            return
        if not source.strip():
            print("%lineprofile: nothing to run")
            return
        self._run(source, args)

    def _run(self, source: str, args: argparse.Namespace) -> None:
        shell: Any = self.shell
        profiler = LineProfiler(
            args.project_folder,
            paths=args.paths,
            subtract_overhead=not args.raw,
            _also_trace=self._is_cell,
        )
        transformed = shell.transform_cell(source)
        name = shell.compile.cache(transformed, shell.execution_count, raw_code=source)
        code = shell.compile(transformed, name, "exec")
        try:
            with profiler:
                exec(code, shell.user_ns)
        finally:
            profiler.print_global_top_stats(
                top_n=args.top, min_time_us=args.min_time_us, sort_by=args.sort, unit=args.unit
            )
            if args.per_function:  # in source order, whole bodies: only the top list is ranked
                profiler.print_stats(min_time_us=args.min_time_us, sort_by="line", unit=args.unit)


def load_ipython_extension(ipython: Any) -> None:
    ipython.register_magics(LineProfileMagics)
