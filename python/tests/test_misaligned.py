"""test_misaligned.py - issue 21 item 4 as the binding meets it: arrays at
addresses that are not a multiple of their item size (np.frombuffer(buf,
offset=1, dtype=np.float32), torch.frombuffer likewise) as scaled_mm scales,
bias and out (first call, keyed plan and torch hot path), quantize's scale
output and dequantize's scale input. The library either computes the right
result or refuses with FP8KIT_ERR_MISALIGNED, which the binding raises as
fp8kit.MisalignedError; it must never crash, so the calls run in a subprocess
and a dead process fails the test. Also: the status maps to MisalignedError."""
import os
import subprocess
import sys
import textwrap

import fp8kit

_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    import fp8kit

    F32 = np.float32
    M, N, K = 24, 16, 64
    rng = np.random.default_rng(0)

    def odd(a):
        # a copy of a at an address 1 byte past an aligned one (writable: a bytearray)
        raw = bytearray(a.nbytes + 1)
        v = np.frombuffer(raw, dtype=a.dtype, offset=1, count=a.size).reshape(a.shape)
        v[...] = a
        assert v.ctypes.data % a.dtype.itemsize
        return v

    def report(case, fn, want, same=np.array_equal):
        for rep in range(3):  # first call, then any cached plan
            try:
                got = fn()
            except fp8kit.MisalignedError as e:
                print("CASE", case, "MISALIGNED", e.status_name)
                continue
            print("CASE", case, "EQUAL" if same(got, want) else "DIFF")
            sys.stdout.flush()

    qa, sa = fp8kit.quantize(rng.standard_normal((M, K)).astype(F32), scheme="row")
    qw, sw = fp8kit.quantize(rng.standard_normal((N, K)).astype(F32), scheme="row")
    bias = rng.standard_normal(N).astype(F32)
    want = fp8kit.scaled_mm(qa, qw.T, sa, sw.T, bias, out_dtype="float32")
    ro = np.frombuffer(bytes(1) + np.asarray(sa).tobytes(), dtype=F32, offset=1).reshape(M, 1)  # the issue's form
    report("scale_a frombuffer", lambda: fp8kit.scaled_mm(qa, qw.T, ro, sw.T, bias, out_dtype="float32"), want)
    report("scale_a", lambda: fp8kit.scaled_mm(qa, qw.T, odd(sa), sw.T, bias, out_dtype="float32"), want)
    report("scale_b", lambda: fp8kit.scaled_mm(qa, qw.T, sa, odd(sw).T, bias, out_dtype="float32"), want)
    report("bias", lambda: fp8kit.scaled_mm(qa, qw.T, sa, sw.T, odd(bias), out_dtype="float32"), want)
    report("out", lambda: fp8kit.scaled_mm(qa, qw.T, sa, sw.T, bias, out_dtype="float32",
                                           out=odd(np.zeros((M, N), F32))), want)
    x = rng.standard_normal((M, K)).astype(F32)
    q0, s0 = fp8kit.quantize(x, scheme="row")
    report("quantize scale out", lambda: fp8kit.quantize(x, scheme="row", out=(
        fp8kit.TaggedArray(np.empty((M, K), np.uint8), "e4m3"), odd(np.zeros((M, 1), F32))))[1], s0)
    report("dequantize scale", lambda: fp8kit.dequantize(q0, odd(s0), scheme="row"),
           fp8kit.dequantize(q0, s0, scheme="row"))
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and hasattr(torch, "float8_e4m3fn"):
        ta, tw = (torch.from_numpy(np.asarray(v)).view(torch.float8_e4m3fn) for v in (qa, qw))
        tsa, tsw = torch.from_numpy(np.asarray(sa)), torch.from_numpy(np.asarray(sw))
        tb = torch.from_numpy(bias)
        tw_ = fp8kit.scaled_mm(ta, tw.t(), tsa, tsw.t(), tb, out_dtype=torch.float32)

        def todd(t):
            raw = bytearray(t.numel() * t.element_size() + 1)
            v = torch.frombuffer(raw, dtype=t.dtype, offset=1, count=t.numel()).view(t.shape)
            v.copy_(t)
            assert v.data_ptr() % t.element_size()
            return v
        osa = todd(tsa)
        report("torch scale_a", lambda: fp8kit.scaled_mm(ta, tw.t(), osa, tsw.t(), tb, out_dtype=torch.float32),
               tw_, torch.equal)
        report("torch out (hot path)", lambda: fp8kit.scaled_mm(ta, tw.t(), tsa, tsw.t(), tb, out_dtype=torch.float32,
                                                                out=todd(torch.zeros(M, N))), tw_, torch.equal)
    print("DONE")
    """)


def test_misaligned_pointers_raise_or_compute_never_crash(tmp_path):
    script = tmp_path / "misaligned.py"
    script.write_text(_SCRIPT)
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, "-W", "ignore", str(script), pkg], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True, timeout=300)
    assert r.returncode == 0, "the process died (rc %d):\n%s\n%s" % (r.returncode, r.stdout, r.stderr[-3000:])
    lines = [line.split(" ", 1)[1] for line in r.stdout.splitlines() if line.startswith("CASE ")]
    assert r.stdout.rstrip().endswith("DONE") and len(lines) >= 21, r.stdout
    bad = [line for line in lines
           if not (line.endswith(" EQUAL") or line.endswith(" MISALIGNED FP8KIT_ERR_MISALIGNED"))]
    assert not bad, r.stdout


def test_misaligned_status_maps_to_misaligned_error():
    assert fp8kit.errors.error_class(fp8kit.Status.ERR_MISALIGNED) is fp8kit.MisalignedError
    assert int(fp8kit.Status.ERR_MISALIGNED) == 6  # include/fp8kit.h's FP8KIT_ERR_MISALIGNED
    try:
        fp8kit.errors.raise_status(6, "fp8kit_gemm: scale_a is not 4-byte aligned")
    except fp8kit.MisalignedError as e:
        assert isinstance(e, ValueError) and e.status_name == "FP8KIT_ERR_MISALIGNED" and "aligned" in e.message
