"""Which code the line profiler traces: the project folder and what inside it is excluded.

The rule (documented in docs/guide/line-profiler.md, "What is traced"):

* ``project_folder=None``: start at the working directory and walk up to the nearest directory
  that holds a ``.git`` entry (a directory, or the file of a worktree/submodule); with no
  repository above, the working directory itself is the project folder.
* A code object is traced when its ``co_filename`` names an existing file whose real path
  (symlinks resolved) lies under the project folder, except files under the interpreter's own
  library directories (stdlib, site-packages, user site), inside any virtual environment (a
  directory holding ``pyvenv.cfg``), under a ``site-packages``/``dist-packages`` directory, or
  in the lineprofiler package itself.
* Folders given as ``paths=`` (``--path``) are traced whole, even inside site-packages or a
  virtual environment; functions given to ``add_function`` are traced wherever they live.
* Code from ``exec``/``eval``/``<string>``, frozen modules and notebook cells is skipped unless its
  file name maps to such a file.
"""

from __future__ import annotations

import os
import site
import sys
import sysconfig

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from pathlib import Path

_PACKAGE_DIRS = ("site-packages", "dist-packages", "__pypackages__")
_PACKAGE = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # lineprofiler/


def find_project_folder(start: str | os.PathLike[str] | None = None) -> Path:
    """The nearest ancestor of ``start`` (default: the working directory) holding ``.git``."""
    from pathlib import Path

    here = Path(os.path.realpath(start if start is not None else os.getcwd()))
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return folder
    return here


def _interpreter_dirs() -> set[str]:
    dirs: set[str] = set()
    for vars_ in (
        None,
        {"base": sys.base_prefix, "platbase": sys.base_exec_prefix},
    ):
        try:
            paths = sysconfig.get_paths(vars=vars_) if vars_ else sysconfig.get_paths()
        except (KeyError, ValueError):  # pragma: no cover - exotic schemes
            continue
        for key in ("stdlib", "platstdlib", "purelib", "platlib"):
            if paths.get(key):
                dirs.add(paths[key])
    try:
        dirs.update(site.getsitepackages())
    except AttributeError:  # pragma: no cover - old virtualenv's site.py
        pass
    user_site = getattr(site, "getusersitepackages", lambda: None)()
    if user_site:
        dirs.add(user_site)
    for prefix in (sys.prefix, sys.exec_prefix):
        dirs.add(prefix)  # a virtual environment (only excluded when it does not hold the project)
    dirs.add(_PACKAGE)  # the lineprofiler package
    return {os.path.realpath(d) for d in dirs}


def _is_under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


class ProjectScope:
    """``scope(filename) -> bool``: whether code from ``filename`` is traced (see module doc)."""

    def __init__(
        self,
        project_folder: str | os.PathLike[str],
        extra: Iterable[str | os.PathLike[str]] = (),
        also: Callable[[str], bool] | None = None,
    ) -> None:
        self.also = also  # accepts more file names (the IPython extension: notebook cells)
        self.folder = os.path.realpath(os.fspath(project_folder))
        # Folders named explicitly (paths=, --path) are traced whole, site-packages included;
        # only the lineprofiler package itself stays out.
        self.extra = sorted({os.path.realpath(os.fspath(p)) for p in extra})
        self._package = _PACKAGE
        # Exclusions that contain the project folder itself are dropped: a project that lives in
        # an excluded place was asked for explicitly.
        self.excluded = sorted(
            d for d in _interpreter_dirs() if not _is_under(self.folder, d) and d != os.sep
        )
        self._venv_dirs: dict[str, bool] = {}
        self.key = (
            "project:" + self.folder + "|" + "|".join(self.excluded) + "|+" + "|+".join(self.extra)
        )
        if also is not None:
            self.key += f"|also:{id(also):x}"

    def _in_venv_or_packages(self, path: str) -> bool:
        rel = os.path.relpath(os.path.dirname(path), self.folder)
        if rel == os.curdir:
            return False
        current = self.folder
        for part in rel.split(os.sep):
            if part in _PACKAGE_DIRS:
                return True
            current = os.path.join(current, part)
            is_venv = self._venv_dirs.get(current)
            if is_venv is None:
                is_venv = os.path.isfile(os.path.join(current, "pyvenv.cfg"))
                self._venv_dirs[current] = is_venv
            if is_venv:
                return True
        return False

    def __call__(self, filename: str) -> bool:
        if self.also is not None and filename and self.also(filename):
            return True
        if not filename or filename.startswith("<"):
            return False
        path = os.path.realpath(os.path.abspath(filename))
        if any(_is_under(path, d) and path != d for d in self.extra):
            return not _is_under(path, self._package) and os.path.isfile(path)
        if not _is_under(path, self.folder) or path == self.folder:
            return False
        if any(_is_under(path, d) for d in self.excluded):
            return False
        if self._in_venv_or_packages(path):
            return False
        return os.path.isfile(path)
