"""setup.py - build hook of the fp8kit package: puts libfp8kit.so next to the
Python files so an installed package finds it (discovery step 2).

Where the library comes from, in order:
  1. $FP8KIT_LIBRARY (a file),
  2. the newest libfp8kit.so under ../build*/ of this repository (sanitizer
     builds skipped),
  3. a fresh CMake build into ../build-python (library only; CUDA if nvcc is
     found, FP8KIT_CUDA=OFF to skip) - set FP8KIT_NO_BUILD=1 to skip this.
When none works the package installs without it and finds the library at run
time (FP8KIT_LIBRARY, the repository's build*/ folders, system paths).

The version (pyproject.toml's dynamic "version") is the one definition in
../include/fp8kit.h (FP8KIT_VERSION_MAJOR / _MINOR / _PATCH), or an sdist's
PKG-INFO where there is no header; the build step writes it into the built
package as fp8kit/_version.py (only there, never into the source tree).
Everything else is in pyproject.toml.
"""
import glob
import os
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def _say(msg):
    print("fp8kit setup: " + msg, file=sys.stderr)


def _load_module(name):
    """fp8kit/<name>.py loaded on its own, without importing the package
    (which needs numpy)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("_fp8kit_" + name, os.path.join(HERE, "fp8kit", name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _loadable_build(build_dir):
    """fp8kit/_builds.py's rule (sanitizer builds are skipped)."""
    return _load_module("_builds").loadable_build(build_dir)


def _version():
    """The package version: include/fp8kit.h's, else (an unpacked sdist) PKG-INFO's."""
    header = os.path.join(REPO, "include", "fp8kit.h")
    if os.path.isfile(header):
        return _load_module("_header").header_version(header)
    try:
        with open(os.path.join(HERE, "PKG-INFO"), encoding="utf-8") as f:
            for line in f:
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    raise RuntimeError("fp8kit setup: no %s (the one definition of the version) and no PKG-INFO" % header)


VERSION = _version()


def _existing_build():
    libs = []
    for p in glob.glob(os.path.join(REPO, "build*", "libfp8kit.so*")):
        if os.path.isfile(p) and _loadable_build(os.path.dirname(p)):
            libs.append((os.path.getmtime(os.path.realpath(p)), p))
    return max(libs)[1] if libs else None


def _cmake_build():
    if os.environ.get("FP8KIT_NO_BUILD") == "1" or not os.path.isfile(os.path.join(REPO, "CMakeLists.txt")):
        return None
    if not shutil.which("cmake"):
        _say("cmake not found: not building libfp8kit")
        return None
    bdir = os.path.join(REPO, "build-python")
    cfg = ["cmake", "-S", REPO, "-B", bdir, "-DCMAKE_BUILD_TYPE=Release", "-DFP8KIT_TESTS=OFF",
           "-DFP8KIT_BENCH=OFF", "-DFP8KIT_CUDA=" + os.environ.get("FP8KIT_CUDA", "AUTO")]
    try:
        subprocess.run(cfg, check=True)
        subprocess.run(["cmake", "--build", bdir, "--target", "fp8kit", "-j", os.environ.get("JOBS", "2")],
                       check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        _say("building libfp8kit failed (%s); the package will look for it at run time" % e)
        return None
    lib = os.path.join(bdir, "libfp8kit.so")
    return lib if os.path.exists(lib) else None


class BuildPyWithLibrary(build_py):
    def run(self):
        super().run()
        if not self.dry_run:
            with open(os.path.join(self.build_lib, "fp8kit", "_version.py"), "w") as f:
                f.write('"""_version.py - written by setup.py\'s build step from include/fp8kit.h."""\n'
                        "__version__ = %r\n" % VERSION)
        lib = os.environ.get("FP8KIT_LIBRARY")
        if lib and not os.path.isfile(lib):
            lib = None
        lib = lib or _existing_build() or _cmake_build()
        if not lib:
            _say("no libfp8kit.so bundled")
            return
        dest = os.path.join(self.build_lib, "fp8kit", "libfp8kit.so")
        shutil.copyfile(os.path.realpath(lib), dest)
        _say("bundled %s" % os.path.realpath(lib))


class BinaryDistribution(Distribution):
    """The wheel carries a native library: tag it for this platform."""

    def has_ext_modules(self):
        return True


setup(version=VERSION, cmdclass={"build_py": BuildPyWithLibrary}, distclass=BinaryDistribution)
