"""test_group_status.py - the status= word of grouped_mm and k_grouped_mm on
the CPU backend without torch: a writable int32 numpy array of one element
receives 0 after a call with valid offsets and FP8KIT_ERR_INVALID_ARGUMENT (2)
with invalid ones (the call then raising InvalidArgumentError), and anything
else (another dtype or size, a read-only array, a list) raises the package's
InvalidArgumentError - never ModuleNotFoundError for the missing torch. The
calls run in a subprocess in which `import torch` fails, whether or not torch
is installed."""
import os
import subprocess
import sys
import textwrap

PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = textwrap.dedent(r"""
    import sys
    sys.modules["torch"] = None  # import torch raises ModuleNotFoundError, as without torch
    sys.path.insert(0, sys.argv[1])
    import numpy as np
    import fp8kit

    rng = np.random.default_rng(5)
    T, K, N, G = 24, 64, 16, 3
    qa, sa = fp8kit.quantize(rng.standard_normal((T, K)).astype(np.float32), "row")
    qw, sw = fp8kit.quantize(rng.standard_normal((G * N, K)).astype(np.float32), "row")
    qw = qw.reshape(G, N, K).transpose(0, 2, 1)
    sw = np.asarray(sw, dtype=np.float32).reshape(G, N)
    offs = np.array([8, 8, 20], dtype=np.int32)

    def status(v=7):
        return np.full(1, v, dtype=np.int32)

    def refused(call, what):
        try:
            call()
        except fp8kit.InvalidArgumentError as e:
            return str(e)
        except BaseException as e:
            raise AssertionError("%s: %s: %s, not InvalidArgumentError" % (what, type(e).__name__, e))
        raise AssertionError("%s: no error" % what)

    # grouped_mm: valid offsets -> 0 and the same D as without status; invalid -> 2 and an error
    want = np.asarray(fp8kit.grouped_mm(qa, qw, offs, sa, sw))
    st = status()
    got = np.asarray(fp8kit.grouped_mm(qa, qw, offs, sa, sw, status=st))
    assert st[0] == 0, st
    assert np.array_equal(got[:20], want[:20])
    st = status()
    refused(lambda: fp8kit.grouped_mm(qa, qw, np.array([8, 4, 20], dtype=np.int32), sa, sw, status=st), "bad offs")
    assert st[0] == 2, st
    st = status().reshape(())  # a 0-d array is one element too
    fp8kit.grouped_mm(qa, qw, offs, sa, sw, status=st)
    assert st == 0, st

    # k_grouped_mm
    ka, kb = fp8kit.cast(rng.standard_normal((8, 256)).astype(np.float32), "e4m3"), \
        fp8kit.cast(rng.standard_normal((12, 256)).astype(np.float32), "e4m3")
    st = status()
    fp8kit.k_grouped_mm(ka, kb, [128, 256], status=st)
    assert st[0] == 0, st
    st = status()
    refused(lambda: fp8kit.k_grouped_mm(ka, kb, [256, 128], status=st), "bad offsets")
    assert st[0] == 2, st

    # what is not a status word
    ro = status()
    ro.flags.writeable = False
    bad = {"float32": np.zeros(1, np.float32), "int64": np.zeros(1, np.int64), "two": np.zeros(2, np.int32),
           "read-only": ro, "list": [0], "empty": np.zeros(0, np.int32)}
    for what, s in bad.items():
        m = refused(lambda: fp8kit.grouped_mm(qa, qw, offs, sa, sw, status=s), "grouped_mm status " + what)
        assert "status" in m, m
        m = refused(lambda: fp8kit.k_grouped_mm(ka, kb, [128, 256], status=s), "k_grouped_mm status " + what)
        assert "status" in m, m
    assert ro[0] == 7
    assert "torch" not in sys.modules or sys.modules["torch"] is None
    print("ok")
""")


def test_numpy_status_without_torch(tmp_path):
    script = tmp_path / "status.py"
    script.write_text(SCRIPT)
    r = subprocess.run([sys.executable, str(script), PKG], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr
