"""test_version.py - one version number: include/fp8kit.h's FP8KIT_VERSION_*
lines. fp8kit.__version__ and the library's fp8kit_version_string() equal
it, pyproject.toml and the package hard-code none (setup.py reads the header
and its build step writes fp8kit/_version.py into the built package only),
and loading a library of another version raises LibraryVersionError naming
both versions and the library's path. Also the license metadata setup.py
writes (MIT, with its classifier)."""
import os
import re
import shutil
import subprocess
import sys
import types

import pytest

import fp8kit
from fp8kit import _lib

PKG = os.path.dirname(os.path.abspath(fp8kit.__file__))
PYDIR = os.path.dirname(PKG)
REPO = os.path.dirname(PYDIR)
HEADER = os.path.join(REPO, "include", "fp8kit.h")
in_source_tree = pytest.mark.skipif(not os.path.isfile(HEADER) or not os.path.isfile(os.path.join(PYDIR, "setup.py")),
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
    pyproject = open(os.path.join(PYDIR, "pyproject.toml")).read()
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


def _scratch_copy(tmp_path):
    """python/ (without tests) and include/fp8kit.h copied into tmp_path, so setup.py writes nothing here."""
    shutil.copytree(PYDIR, tmp_path / "python", ignore=shutil.ignore_patterns("tests", "__pycache__", "build",
                                                                              "*.egg-info", "libfp8kit*"))
    (tmp_path / "include").mkdir()
    shutil.copy(HEADER, tmp_path / "include" / "fp8kit.h")
    return tmp_path / "python"


def _setup(cwd, *args):
    env = dict(os.environ, FP8KIT_NO_BUILD="1", FP8KIT_LIBRARY=str(cwd / "no-library-here"))
    r = subprocess.run([sys.executable, "setup.py", "-q"] + list(args), cwd=str(cwd), env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


@in_source_tree
def test_setup_reads_the_header_and_writes_version_py_into_the_build(tmp_path):
    pytest.importorskip("setuptools")
    py = _scratch_copy(tmp_path)
    hdr = tmp_path / "include" / "fp8kit.h"
    hdr.write_text(re.sub(r"FP8KIT_VERSION_MINOR \d+", "FP8KIT_VERSION_MINOR 42", hdr.read_text()))
    want = re.sub(r"^(\d+)\.\d+\.", r"\g<1>.42.", header_version_by_hand())
    assert _setup(py, "--version").strip().splitlines()[-1] == want
    _setup(py, "egg_info", "--egg-base", str(tmp_path), "build_py", "--build-lib", str(tmp_path / "lib"))
    text = (tmp_path / "lib" / "fp8kit" / "_version.py").read_text()
    assert re.search(r"""^__version__ = ["']%s["']$""" % re.escape(want), text, re.M)
    assert (tmp_path / "lib" / "fp8kit" / "py.typed").exists()
    assert not (py / "fp8kit" / "_version.py").exists()
    info = (tmp_path / "fp8kit.egg-info" / "PKG-INFO").read_text()
    assert re.search(r"^Version: %s$" % re.escape(want), info, re.M)


@in_source_tree
def test_license_metadata(tmp_path):
    pytest.importorskip("setuptools")
    py = _scratch_copy(tmp_path)
    _setup(py, "egg_info", "--egg-base", str(tmp_path))
    info = (tmp_path / "fp8kit.egg-info" / "PKG-INFO").read_text()
    assert re.search(r"^License(-Expression)?: MIT$", info, re.M), info[:2000]
    assert re.search(r"^Classifier: License :: OSI Approved :: MIT License$", info, re.M)
