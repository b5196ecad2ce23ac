"""check_installed.py - run by tests/test_wheel.sh in a fresh venv where only the
fp8kit wheel (and numpy) is installed: the package loads the library bundled in
its own folder, has the header's version, and scaled_mm on the CPU backend
equals numpy's product of the dequantized operands.
Usage: python check_installed.py VERSION"""
import os
import sys

import numpy as np

import fp8kit

want = sys.argv[1]
pkg = os.path.dirname(os.path.abspath(fp8kit.__file__))
lib = fp8kit.library_path()
assert os.path.dirname(os.path.abspath(lib)) == pkg, "library %s is not the package's own (%s)" % (lib, pkg)
assert os.path.basename(os.path.dirname(pkg)) == "site-packages", pkg
assert fp8kit.__version__ == want and fp8kit.version() == want, (fp8kit.__version__, fp8kit.version(), want)
assert fp8kit.backend_available("cpu")

rng = np.random.default_rng(7)
a = rng.standard_normal((64, 256)).astype(np.float32)
w = rng.standard_normal((48, 256)).astype(np.float32)
qa, sa = fp8kit.quantize(a, scheme="row")  # e4m3 codes, (64, 1) float32 scales
qw, sw = fp8kit.quantize(w, scheme="row")  # (48, 1)
d = np.asarray(fp8kit.scaled_mm(qa, qw.T, sa, sw.T))  # float32 (64, 48)
ref = (fp8kit.to_float32(qa).astype(np.float64) * sa) @ (fp8kit.to_float32(qw).astype(np.float64) * sw).T
assert d.shape == (64, 48) and d.dtype == np.float32, (d.shape, d.dtype)
err = np.abs(d - ref).max() / np.abs(ref).max()
assert err < 1e-5, "scaled_mm differs from numpy's product of the dequantized operands by %g" % err
exact = a.astype(np.float64) @ w.astype(np.float64).T
rel = np.linalg.norm(d - exact) / np.linalg.norm(exact)
assert rel < 0.1, rel  # fp8 inputs: a few percent
print("ok: fp8kit %s from %s; scaled_mm vs numpy: max error %.2g of max |D|; vs fp32 inputs %.3f" % (
    fp8kit.__version__, lib, err, rel))
