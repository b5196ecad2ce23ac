"""test_abi.py - the ctypes mirror of include/fp8kit.h matches the C compiler:
struct sizes and field offsets, and every enum constant's value (a small C
program is generated from the ctypes definitions, compiled and run), plus every
declared function exists in the loaded library."""
import ctypes
import os

import fp8kit
from abi_check import c_values, check_layout
from fp8kit import _grouped, _k_grouped, _lib

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STRUCTS = {"fp8kit_tensor": _lib.Tensor, "fp8kit_quant_desc": _lib.QuantDesc,
           "fp8kit_gemm_desc": _lib.GemmDesc, "fp8kit_gemm_args": _lib.GemmArgs, "fp8kit_gemm_call": _lib.GemmCall,
           "fp8kit_grouped_gemm_args": _grouped.GroupedGemmArgs,
           "fp8kit_k_grouped_gemm_args": _k_grouped.KGroupedGemmArgs}
ENUMS = {  # IntEnum -> C prefix of its constants
    _lib.Status: "FP8KIT_", _lib.DType: "FP8KIT_", _lib.Backend: "FP8KIT_BACKEND_",
    _lib.Scheme: "FP8KIT_SCHEME_", _lib.Rounding: "FP8KIT_ROUND_", _lib.ScaleLayout: "FP8KIT_LAYOUT_",
    _lib.ScaleMode: "FP8KIT_SCALE_", _lib.Activation: "FP8KIT_ACT_", _lib.BiasMode: "FP8KIT_BIAS_",
    _lib.OutQuant: "FP8KIT_OUTQ_", _lib.GroupedLayout: "FP8KIT_GROUPED_",
}


def _extra_lines():
    lines = []
    for en, prefix in ENUMS.items():
        for m in en:
            lines.append('printf("enum %s %%d\\n", (int)%s);' % (prefix + m.name, prefix + m.name))
    lines.append('printf("const FP8KIT_MAX_DIMS %d\\n", FP8KIT_MAX_DIMS);')
    lines.append('printf("const FP8KIT_DTYPE_COUNT %d\\n", (int)FP8KIT_DTYPE_COUNT);')
    return lines


def test_structs_and_enums_match_the_header(tmp_path):
    out = c_values(tmp_path, "fp8kit.h", STRUCTS, _extra_lines())
    seen = 0
    for kind, name, value in out:
        if kind == "enum":
            found = [m for en, p in ENUMS.items() for m in en if p + m.name == name]
            assert found and all(int(m) == value for m in found), name
        elif kind == "const":
            assert {"FP8KIT_MAX_DIMS": _lib.MAX_DIMS, "FP8KIT_DTYPE_COUNT": _lib.DTYPE_COUNT}[name] == value
        else:
            assert check_layout(STRUCTS, kind, name, value), (kind, name)
        seen += 1
    assert seen == len(out) > 60


def test_every_header_function_is_bound():
    header = open(os.path.join(REPO, "include", "fp8kit.h")).read()
    import re
    names = set(re.findall(r"FP8KIT_API[^;]*?\b(fp8kit_\w+)\s*\(", header))
    assert len(names) >= 20
    lib = _lib.load()
    for n in sorted(names):
        fn = getattr(lib, n)
        assert fn.argtypes is not None, "%s has no declared argtypes" % n


def test_version_and_names():
    import re
    header = open(os.path.join(REPO, "include", "fp8kit.h")).read()
    v = [int(re.search(r"#define FP8KIT_VERSION_%s (\d+)" % p, header).group(1)) for p in ("MAJOR", "MINOR", "PATCH")]
    assert fp8kit.version() == "%d.%d.%d" % tuple(v)
    lib = _lib.load()
    assert lib.fp8kit_version() == v[0] * 10000 + v[1] * 100 + v[2]
    assert [_lib.decode(lib.fp8kit_dtype_name(int(d))) for d in fp8kit.DType] == \
        ["f32", "f16", "bf16", "e4m3", "e5m2", "e8m0"]
    assert [lib.fp8kit_dtype_size(int(d)) for d in fp8kit.DType] == [4, 2, 2, 1, 1, 1]
    assert _lib.decode(lib.fp8kit_status_string(3)).startswith("FP8KIT_ERR_INVALID_SHAPE")
    assert fp8kit.backend_available("cpu")


def test_tensor_helpers_match_c():
    lib = _lib.load()
    shape = (ctypes.c_int64 * 3)(2, 3, 5)
    t = lib.fp8kit_tensor_make(None, int(fp8kit.DType.F32), 3, shape)
    assert (t.ndim, list(t.shape)[:3], list(t.strides)[:3]) == (3, [2, 3, 5], [15, 5, 1])
    assert lib.fp8kit_tensor_numel(ctypes.byref(t)) == 30
    t2 = lib.fp8kit_tensor_2d(None, int(fp8kit.DType.E4M3), 4, 6, 8)
    assert (t2.ndim, t2.shape[0], t2.shape[1], t2.strides[0], t2.strides[1]) == (2, 4, 6, 8, 1)
    d = lib.fp8kit_quant_desc_default(int(fp8kit.Scheme.MX))
    assert (d.scheme, d.elem, d.axis, d.rounding, d.pow2, d.scale_layout) == (4, 3, -1, 0, 0, 0)


def test_context_cache_and_describe():
    c1 = fp8kit.get_context("cpu" and fp8kit.Backend.CPU, 0)
    assert c1 is fp8kit.get_context(fp8kit.Backend.CPU, 0)
    assert c1.backend == fp8kit.Backend.CPU
    assert c1.describe().startswith("cpu")
    own = fp8kit.Context(fp8kit.Backend.CPU)
    own.set_threads(1)
    assert "1" in own.describe()
    own.close()
    own.close()  # idempotent
    auto = fp8kit.Context(fp8kit.Backend.AUTO)
    assert auto.backend in (fp8kit.Backend.CPU, fp8kit.Backend.CUDA)
