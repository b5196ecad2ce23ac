"""test_version.py - one version number: include/fp8kit.h's FP8KIT_VERSION_*
lines. fp8kit.__version__ and the library's fp8kit_version_string() equal
it, pyproject.toml and the package hard-code none (the wheel build reads the
header through pyproject.toml's regex and writes fp8kit/_version.py into the
built package only), and loading a library of another version raises
LibraryVersionError naming both versions and the library's path. Also the
license metadata (an SPDX expression, MIT). tests/test_wheel.sh builds and
installs the wheel itself."""
import os
import re
import sys
import types

import pytest

import fp8kit
from fp8kit import _lib

PKG = os.path.dirname(os.path.abspath(fp8kit.__file__))
PYDIR = os.path.dirname(PKG)
REPO = os.path.dirname(PYDIR)
HEADER = os.path.join(REPO, "include", "fp8kit.h")
PYPROJECT = os.path.join(REPO, "pyproject.toml")
in_source_tree = pytest.mark.skipif(not os.path.isfile(HEADER) or not os.path.isfile(PYPROJECT),
                                    reason="not running from the source tree")


def header_version_by_hand():
    text = open(HEADER).read()
    parts = [re.search(r"#define FP8KIT_VERSION_%s (\d+)" % k, text).group(1) for k in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


@in_source_tree
def test_versions_agree_with_the_header():
    want = header_version_by_hand()
    assert fp8kit.__version__ == want
    assert fp8kit.version() == want  # the loaded library passed the check


@in_source_tree
def test_no_hard_coded_version():
    pyproject = open(PYPROJECT).read()
    project = pyproject.split("[project]", 1)[1].split("\n[", 1)[0]
    assert not re.search(r"^\s*version\s*=", project, re.M)
    assert re.search(r'^dynamic\s*=\s*\[[^\]]*"version"', project, re.M)
    for name in os.listdir(PKG):
        if name.endswith(".py"):
            src = open(os.path.join(PKG, name)).read()
            assert not re.search(r"""(?:__version__|version)\s*=\s*["']\d+\.\d+""", src), name
    assert not os.path.exists(os.path.join(PKG, "_version.py")), "the build step must not write into the source tree"


def test_header_version_parser(tmp_path):
    from fp8kit._header import header_version
    h = tmp_path / "fp8kit.h"
    h.write_text("#define FP8KIT_API\n#define FP8KIT_VERSION_MAJOR 1\n# define FP8KIT_VERSION_MINOR  22\n"
                 "#define FP8KIT_VERSION_PATCH 3 /* patch */\n#define FP8KIT_VERSION_PATCHES 9\n")
    assert header_version(str(h)) == "1.22.3"
    h.write_text("#define FP8KIT_VERSION_MAJOR 1\n#define FP8KIT_VERSION_MINOR 2\n")
    with pytest.raises(ValueError, match="FP8KIT_VERSION_PATCH"):
        header_version(str(h))


def test_version_py_comes_first(monkeypatch):
    monkeypatch.setattr(_lib, "_package_version", None)
    fake = types.ModuleType("fp8kit._version")
    fake.__version__ = "7.8.9"
    monkeypatch.setitem(sys.modules, "fp8kit._version", fake)
    assert _lib.package_version() == "7.8.9"


def test_library_of_another_version_is_refused(monkeypatch):
    path = fp8kit.library_path()
    real = fp8kit.version()
    monkeypatch.setattr(_lib, "_package_version", "9.9.9")  # the version the package expects
    monkeypatch.setattr(_lib, "_lib", None)
    monkeypatch.setattr(_lib, "_lib_path", None)
    for call in (lambda: _lib.load(), lambda: _lib.load(path)):
        with pytest.raises(fp8kit.LibraryVersionError) as ei:
            call()
        msg = str(ei.value)
        assert "9.9.9" in msg and real in msg and path in msg
        assert isinstance(ei.value, RuntimeError) and isinstance(ei.value, fp8kit.LibraryNotFoundError)
    assert _lib._lib is None  # nothing was kept


def _pyproject():
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    with open(PYPROJECT, "rb") as f:
        return tomllib.load(f)


@in_source_tree
def test_wheel_version_comes_from_the_header(tmp_path):
    """pyproject.toml's version regex (scikit-build-core's regex provider:
    re.search with re.MULTILINE, then `result` formatted with the groups) reads
    the header's three lines, and nothing else."""
    cfg = _pyproject()["tool"]["scikit-build"]["metadata"]["version"]
    assert cfg["provider"] == "scikit_build_core.metadata.regex" and cfg["input"] == "include/fp8kit.h"

    def version_of(text):
        m = re.search(cfg["regex"], text, re.MULTILINE)
        return cfg["result"].format(*m.groups(), **m.groupdict()) if m else None

    assert version_of(open(HEADER).read()) == header_version_by_hand()
    text = re.sub(r"FP8KIT_VERSION_MINOR \d+", "FP8KIT_VERSION_MINOR 42", open(HEADER).read())
    assert version_of(text) == re.sub(r"^(\d+)\.\d+\.", r"\g<1>.42.", header_version_by_hand())
    assert version_of("#define FP8KIT_VERSION_MAJOR 1\n#define FP8KIT_VERSION_MINOR 2\n") is None
    gen = [g for g in _pyproject()["tool"]["scikit-build"]["generate"] if g["path"] == "fp8kit/_version.py"]
    assert len(gen) == 1 and gen[0].get("location", "install") == "install"  # into the wheel, never the source tree
    assert re.search(r'^__version__ = "\$\{version\}"$', gen[0]["template"], re.M)


@in_source_tree
def test_license_metadata():
    project = _pyproject()["project"]
    assert project["license"] == "MIT"  # an SPDX expression (no license table, no License classifier)
    assert project["license-files"] == ["LICENSE"]
    assert not any(c.startswith("License ::") for c in project.get("classifiers", []))
    assert "MIT License" in open(os.path.join(REPO, "LICENSE")).read()
