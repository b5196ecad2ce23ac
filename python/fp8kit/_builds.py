"""_builds.py - where libfp8kit.so is looked for, in order (_lib.candidate_paths
adds $FP8KIT_LIBRARY before and the system's paths after): the package folder
(an installed wheel carries its library there), then, in a source checkout, the
CMake build folders of the repository."""
import glob
import os

_LIB_GLOBS = ("libfp8kit.so", "libfp8kit.so.*", "libfp8kit.dylib", "fp8kit.dll")


def libs_in(directory):
    """The libfp8kit files in `directory`, the unversioned name first, then the
    shortest (libfp8kit.so.0 before .so.0.1.0)."""
    found = []
    for pat in _LIB_GLOBS:
        found.extend(glob.glob(os.path.join(directory, pat)))
    return sorted(set(found), key=lambda p: (len(os.path.basename(p)), p))


def loadable_build(build_dir):
    """False for a sanitizer build (FP8KIT_SANITIZE=ON in its CMakeCache.txt):
    loading its ASan-linked library aborts a Python process that was not
    started with the ASan runtime, so discovery skips it."""
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
            return not any(line.startswith("FP8KIT_SANITIZE:") and line.strip().endswith("=ON") for line in f)
    except OSError:
        return True


def package_and_build_libs(pkg_dir):
    """The libraries to try for the package at `pkg_dir`: those in the package
    folder, then, when the package sits in a source checkout (python/fp8kit
    below a folder holding include/fp8kit.h), its build folders: build/ first
    (the README's build folder; run_tests.sh builds the CUDA backend there when
    nvcc is found), then every other build*/ folder, newest library first.
    Sanitizer builds are skipped."""
    out = list(libs_in(pkg_dir))
    repo = os.path.dirname(os.path.dirname(os.path.abspath(pkg_dir)))
    if not os.path.isfile(os.path.join(repo, "include", "fp8kit.h")):
        return out
    main = os.path.join(repo, "build")
    if loadable_build(main):
        out.extend(libs_in(main))
    others = []
    for d in glob.glob(os.path.join(repo, "build*")):
        if os.path.abspath(d) == os.path.abspath(main) or not loadable_build(d):
            continue
        for lib in libs_in(d):
            try:
                others.append((os.path.getmtime(lib), lib))
            except OSError:
                pass
    out.extend(lib for _, lib in sorted(others, reverse=True))
    return out
