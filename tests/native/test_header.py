"""The public headers: they compile warning-free on GCC and Clang (every API level, with and
without Python), and the table contract holds against a fake provider that counts every call
(tests/native/fake_provider.cpp)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

import lineprofiler
from tests.native.build import compiler, python_includes

HERE = Path(__file__).resolve().parent
STRICT = ["-std=c++17", "-Wall", "-Wextra", "-Werror", "-Wpedantic", "-Wshadow", "-Wconversion"]
COMPILERS = ["g++", "clang++"]

USES_EVERYTHING = """
#include <lineprofiler/accounting.hpp>
{python}
static const lineprofiler::Name kName("named");
int main() {{
  LP_PHASE("a");
  {{ lineprofiler::Phase p(kName); }}
  {{ lineprofiler::Phase p(std::string_view("view")); }}
  {{ lineprofiler::Phase p("literal"); }}
  {{ std::string text = "runtime"; lineprofiler::Phase p(text); }}
  LP_COUNT("n", 3);
  lineprofiler::count(kName, 1);
  lineprofiler::count(std::string_view("v"), 2);
  lineprofiler::count("literal", 4);
  {{ lineprofiler::Context ctx = lineprofiler::capture(); lineprofiler::Attach at(ctx); }}
  {import_call}
  return int(lineprofiler::current().size()) + int(lineprofiler::enabled());
}}
"""


def _compile(cxx: str, source: Path, out: Path, extra: list[str]) -> None:
    cmd = [cxx, *STRICT, f"-I{lineprofiler.get_include()}", *extra, str(source), "-o", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stderr}"


@pytest.mark.parametrize("cxx", COMPILERS)
@pytest.mark.parametrize("level", [1, 2, 3, 4])
@pytest.mark.parametrize("with_python", [False, True])
def test_headers_compile_warning_free(tmp_path, cxx, level, with_python):
    exe = compiler(cxx)
    if exe is None:
        pytest.skip(f"{cxx} is not installed (scripts/setup-env installs it)")
    source = tmp_path / "uses.cpp"
    source.write_text(
        USES_EVERYTHING.format(
            python="#include <lineprofiler/python.hpp>" if with_python else "",
            import_call="if (lineprofiler::import_api() < 0) return 1;" if with_python else "",
        )
    )
    flags = [f"-DLINEPROFILER_API_LEVEL={level}", "-fsyntax-only"]
    cmd = [exe, *STRICT, f"-I{lineprofiler.get_include()}", *python_includes(), *flags]
    proc = subprocess.run([*cmd, str(source)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stderr}"


@pytest.mark.parametrize("cxx", COMPILERS)
def test_table_contract_against_a_fake_provider(tmp_path, cxx):
    exe = compiler(cxx)
    if exe is None:
        pytest.skip(f"{cxx} is not installed (scripts/setup-env installs it)")
    out = tmp_path / "fake_provider"
    _compile(exe, HERE / "fake_provider.cpp", out, ["-O2"])
    proc = subprocess.run([str(out)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


def test_headers_ship_inside_the_package():
    include = Path(lineprofiler.get_include())
    assert (include / "lineprofiler" / "accounting.hpp").is_file()
    assert (include / "lineprofiler" / "python.hpp").is_file()
