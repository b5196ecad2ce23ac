"""_builds.py - which CMake build folders may provide libfp8kit.so to a plain
Python process (no imports: setup.py loads this file on its own)."""
import os


def loadable_build(build_dir):
    """False for a sanitizer build (FP8KIT_SANITIZE=ON in its CMakeCache.txt):
    loading its ASan-linked library aborts a Python process that was not
    started with the ASan runtime, so discovery and setup.py skip it."""
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
            return not any(line.startswith("FP8KIT_SANITIZE:") and line.strip().endswith("=ON") for line in f)
    except OSError:
        return True
