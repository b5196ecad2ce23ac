"""conftest.py - pytest setup for the fp8kit binding tests: imports the package
from this source tree (python/), loads libfp8kit (FP8KIT_LIBRARY or the
discovery order of fp8kit._lib; a missing library is a failure, not a skip),
and gives each test a seeded numpy RNG (FP8KIT_TEST_SEED to replay)."""
import os
import sys
import time

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import fp8kit  # noqa: E402

SEED = int(os.environ.get("FP8KIT_TEST_SEED", str(int(time.time()) & 0xFFFFFFFF)))


def pytest_report_header(config):
    try:
        lib = fp8kit.library_path()
    except fp8kit.LibraryNotFoundError as e:
        lib = "NOT FOUND (%s)" % e
    return ["fp8kit library: %s" % lib, "fp8kit test seed: %d (FP8KIT_TEST_SEED to replay)" % SEED]


@pytest.fixture
def rng(request):
    # one stream per test, derived from the session seed and the test's name
    h = sum(ord(c) * (i + 1) for i, c in enumerate(request.node.nodeid)) & 0xFFFFFFFF
    return np.random.default_rng([SEED, h])


def heavy(rng, shape):
    """Student-t with 2 degrees of freedom (heavy-tailed), float32."""
    return rng.standard_t(2, size=shape).astype(np.float32)
