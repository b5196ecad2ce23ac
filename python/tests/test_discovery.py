"""test_discovery.py - where the binding looks for libfp8kit.so without
$FP8KIT_LIBRARY: the package folder first (an installed wheel's library),
then, in a source checkout, build/ before the other build*/ folders (newest
first), sanitizer builds skipped; outside a checkout, the package folder only.
Checked on a fake checkout of empty files (nothing is loaded)."""
import os

from fp8kit._builds import package_and_build_libs


def _touch(path, mtime):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "w").close()
    os.utime(path, (mtime, mtime))
    return path


def test_package_folder_then_build_then_newest_other(tmp_path):
    repo = str(tmp_path / "repo")
    pkg = os.path.join(repo, "python", "fp8kit")
    _touch(os.path.join(repo, "include", "fp8kit.h"), 1)
    bundled = _touch(os.path.join(pkg, "libfp8kit.so"), 100)
    main = _touch(os.path.join(repo, "build", "libfp8kit.so"), 200)  # the oldest build
    newer = _touch(os.path.join(repo, "build-nocuda", "libfp8kit.so"), 400)  # run_tests.sh's second build
    older = _touch(os.path.join(repo, "build-debug", "libfp8kit.so"), 300)
    asan = _touch(os.path.join(repo, "build-asan", "libfp8kit.so"), 500)
    with open(os.path.join(repo, "build-asan", "CMakeCache.txt"), "w") as f:
        f.write("FP8KIT_SANITIZE:BOOL=ON\n")
    got = package_and_build_libs(pkg)
    assert got == [bundled, main, newer, older]
    assert asan not in got


def test_build_folder_comes_first_when_newer_ones_exist(tmp_path):
    repo = str(tmp_path / "repo")
    pkg = os.path.join(repo, "python", "fp8kit")
    os.makedirs(pkg)
    _touch(os.path.join(repo, "include", "fp8kit.h"), 1)
    main = _touch(os.path.join(repo, "build", "libfp8kit.so"), 10)
    newer = _touch(os.path.join(repo, "build-nocuda", "libfp8kit.so"), 20)
    assert package_and_build_libs(pkg) == [main, newer]


def test_installed_package_uses_its_own_folder_only(tmp_path):
    site = tmp_path / "venv" / "lib" / "site-packages"
    pkg = str(site / "fp8kit")
    bundled = _touch(os.path.join(pkg, "libfp8kit.so"), 1)
    _touch(str(tmp_path / "venv" / "build" / "libfp8kit.so"), 2)  # no include/fp8kit.h: not a checkout
    assert package_and_build_libs(pkg) == [bundled]
