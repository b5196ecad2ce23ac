"""_lib.py - ctypes mirror of include/fp8kit.h and discovery of libfp8kit.so.

Every enum of the C header is an IntEnum here, every struct a
ctypes.Structure with the same fields in the same order (python/tests/test_abi.py
compares sizes, offsets and enum values with the C compiler's). The library is
found, in this order, at:
  1. $FP8KIT_LIBRARY (a file, or a directory holding libfp8kit.so*; when set,
     nothing else is tried),
  2. the package directory (where the wheel built by `pip install .` puts it),
  3. in a source checkout: build/, then the other build*/ folders (newest
     first; _builds.py),
  4. ctypes.util.find_library("fp8kit") (system paths, LD_LIBRARY_PATH).
A candidate whose fp8kit_version_string() is not this package's version
(package_version()) is passed over like one that fails to load; when no
candidate is left, load() raises LibraryVersionError naming both versions and
each library's path.
"""
import ctypes
import ctypes.util
import enum
import os
import sys
import threading

from ._builds import libs_in, package_and_build_libs
from ._header import header_version

# ------------------------------------------------------------------ enums


class Status(enum.IntEnum):
    OK = 0
    ERR_NULL_POINTER = 1
    ERR_INVALID_ARGUMENT = 2
    ERR_INVALID_SHAPE = 3
    ERR_SIZE_OVERFLOW = 4
    ERR_INVALID_STRIDE = 5
    ERR_MISALIGNED = 6
    ERR_UNSUPPORTED = 7
    ERR_BACKEND_UNAVAILABLE = 8
    ERR_ARCH_MISMATCH = 9
    ERR_DEVICE = 10
    ERR_OUT_OF_MEMORY = 11
    ERR_WORKSPACE_TOO_SMALL = 12
    ERR_IO = 13
    ERR_CORRUPT_FILE = 14
    ERR_INTERNAL = 15


class DType(enum.IntEnum):
    F32 = 0
    F16 = 1
    BF16 = 2
    E4M3 = 3
    E5M2 = 4
    E8M0 = 5


DTYPE_COUNT = 6


class Backend(enum.IntEnum):
    AUTO = 0
    CPU = 1
    CUDA = 2


class Scheme(enum.IntEnum):
    TENSOR = 0
    ROW = 1
    BLOCK1X128 = 2
    BLOCK128X128 = 3
    MX = 4


class Rounding(enum.IntEnum):
    FLOOR = 0
    RCEIL = 1


class ScaleLayout(enum.IntEnum):
    PLAIN = 0
    BLOCKED = 1
    MN_MAJOR = 2


class ScaleMode(enum.IntEnum):
    NONE = 0
    TENSOR = 1
    ROW = 2
    BLOCK = 3
    MX = 4


class Activation(enum.IntEnum):
    """fp8kit_activation's values; the names are the C library's (_names.ACTIVATIONS)."""
    NONE = 0
    RELU = 1
    GELU_TANH = 2
    GELU_ERF = 3
    SILU = 4
    SWIGLU = 5  # gated: D is (M, N/2) = silu(y[:, :N/2]) * y[:, N/2:]


class BiasMode(enum.IntEnum):
    NONE = 0
    COL = 1
    ROW = 2


class OutQuant(enum.IntEnum):
    NONE = 0
    SCALED = 1
    MX = 2
    BLOCK1X128 = 3


class GroupedLayout(enum.IntEnum):
    CONTIGUOUS = 0
    MASKED = 1


class CkptFormat(enum.IntEnum):
    DEFAULT = 0
    FP8 = 1
    COMPRESSED_TENSORS = 2


MAX_DIMS = 4

# the enums the library names (fp8kit_<enum>_name / _parse / _alias; python/fp8kit/_names.py)
NAMED_ENUMS = ("dtype", "backend", "scheme", "ckpt_scheme", "rounding", "scale_layout", "scale_mode", "activation",
               "out_quant", "grouped_layout")

# ---------------------------------------------------------------- structs
# C enums are `int` on every ABI fp8kit targets (x86-64 / aarch64 Linux).
_enum_t = ctypes.c_int


class Tensor(ctypes.Structure):
    """fp8kit_tensor: a strided view (strides in elements; all 0 = contiguous)."""
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", _enum_t),
        ("ndim", ctypes.c_int32),
        ("shape", ctypes.c_int64 * MAX_DIMS),
        ("strides", ctypes.c_int64 * MAX_DIMS),
    ]


class QuantDesc(ctypes.Structure):
    """fp8kit_quant_desc."""
    _fields_ = [
        ("scheme", _enum_t),
        ("elem", _enum_t),
        ("axis", ctypes.c_int32),
        ("rounding", _enum_t),
        ("pow2", ctypes.c_int32),
        ("scale_layout", _enum_t),
    ]


class GemmDesc(ctypes.Structure):
    """fp8kit_gemm_desc ({0} is valid)."""
    _fields_ = [
        ("scale_a", _enum_t),
        ("scale_b", _enum_t),
        ("scale_layout", _enum_t),
        ("bias", _enum_t),
        ("act", _enum_t),
        ("out_quant", _enum_t),
        ("out_hp", _enum_t),
        ("out_rounding", _enum_t),
        ("out_pow2", ctypes.c_int32),
        ("fast_accum", ctypes.c_int32),
    ]


class GemmArgs(ctypes.Structure):
    """fp8kit_gemm_args."""
    _fields_ = [
        ("a", Tensor),
        ("b", Tensor),
        ("scale_a", Tensor),
        ("scale_b", Tensor),
        ("alpha", ctypes.c_float),
        ("beta", ctypes.c_float),
        ("c", Tensor),
        ("bias", Tensor),
        ("d", Tensor),
        ("scale_d", Tensor),
        ("amax_d", ctypes.POINTER(ctypes.c_float)),
        ("workspace", ctypes.c_void_p),
        ("workspace_bytes", ctypes.c_size_t),
    ]


class GemmCall(ctypes.Structure):
    """fp8kit_gemm_call (fp8kit_gemm_call_run's one argument)."""
    _fields_ = [
        ("ctx", ctypes.c_void_p),
        ("desc", ctypes.c_void_p),
        ("args", ctypes.c_void_p),
        ("stream", ctypes.c_void_p),
    ]


# fp8kit_ckpt_opts' callbacks: on_kept(user, tensor, reason), on_warning(user, message),
# on_progress(user, const fp8kit_ckpt_progress *) (not used from Python: left NULL)
CkptKeptFn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p)
CkptWarnFn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p)
CkptProgressFn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)


class CkptOpts(ctypes.Structure):
    """fp8kit_ckpt_opts (the checkpoint converter's options)."""
    _fields_ = [
        ("scheme", _enum_t),
        ("format", _enum_t),
        ("rounding", _enum_t),
        ("pow2", ctypes.c_int32),
        ("quantize_all", ctypes.c_int32),
        ("include", ctypes.POINTER(ctypes.c_char_p)),
        ("ninclude", ctypes.c_int32),
        ("exclude", ctypes.POINTER(ctypes.c_char_p)),
        ("nexclude", ctypes.c_int32),
        ("out_dtype", _enum_t),
        ("force", ctypes.c_int32),
        ("no_fsync", ctypes.c_int32),
        ("on_kept", CkptKeptFn),
        ("on_warning", CkptWarnFn),
        ("user", ctypes.c_void_p),
        ("on_progress", CkptProgressFn),
    ]


class CkptReport(ctypes.Structure):
    """fp8kit_ckpt_report (what a checkpoint conversion did)."""
    _fields_ = [
        ("tensors", ctypes.c_int64),
        ("quantized", ctypes.c_int64),
        ("dequantized", ctypes.c_int64),
        ("copied", ctypes.c_int64),
        ("kept", ctypes.c_int64),
        ("other_files", ctypes.c_int64),
        ("in_bytes", ctypes.c_uint64),
        ("out_bytes", ctypes.c_uint64),
        ("seconds", ctypes.c_double),
        ("convention", ctypes.c_char * 40),
    ]


# --------------------------------------------------------------- discovery
def candidate_paths():
    """The library paths discovery would try, in order (for messages and tests).
    $FP8KIT_LIBRARY, when set, is the only candidate: an explicit choice that
    fails to load is an error, not a reason to pick another library."""
    env = os.environ.get("FP8KIT_LIBRARY")
    if env:
        return libs_in(env) if os.path.isdir(env) else [env]
    out = package_and_build_libs(os.path.dirname(os.path.abspath(__file__)))
    found = ctypes.util.find_library("fp8kit")
    if found:
        out.append(found)
    seen, unique = set(), []
    for p in out:  # libfp8kit.so, .so.0 and .so.0.1.0 are usually one file
        real = os.path.realpath(p) if os.path.exists(p) else p
        if real not in seen:
            seen.add(real)
            unique.append(p)
    return unique


class LibraryNotFoundError(OSError):
    """libfp8kit could not be found or loaded."""


class LibraryVersionError(LibraryNotFoundError, RuntimeError):
    """The libfp8kit found is another version than this package's."""


_package_version = None


def package_version():
    """This package's version (fp8kit.__version__): the _version.py that
    the wheel build writes into the built package, else (running from
    the source tree) the FP8KIT_VERSION_* lines of the repository's
    include/fp8kit.h, the one definition of the version."""
    global _package_version
    if _package_version is None:
        try:
            from ._version import __version__ as v
        except ImportError:
            repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
            header = os.path.join(repo, "include", "fp8kit.h")
            try:
                v = header_version(header)
            except (OSError, ValueError) as e:
                raise ImportError("fp8kit: cannot tell the package's version: no fp8kit/_version.py (written when "
                                  "the package is built: pip install .) and %s" % e) from None
        _package_version = v
    return _package_version


_lib = None
_lib_path = None
_lib_lock = threading.Lock()


def _declare(lib):
    c = ctypes
    T, QD, GD, GA = c.POINTER(Tensor), c.POINTER(QuantDesc), c.POINTER(GemmDesc), c.POINTER(GemmArgs)
    vp = c.c_void_p
    sigs = {
        "fp8kit_status_string": (c.c_char_p, [_enum_t]),
        "fp8kit_version_string": (c.c_char_p, []),
        "fp8kit_version": (c.c_int, []),
        "fp8kit_dtype_size": (c.c_size_t, [_enum_t]),
        "fp8kit_dtype_name": (c.c_char_p, [_enum_t]),
        "fp8kit_backend_name": (c.c_char_p, [_enum_t]),
        "fp8kit_backend_available": (c.c_int, [_enum_t]),
        "fp8kit_ctx_create": (_enum_t, [_enum_t, c.c_int, c.POINTER(vp)]),
        "fp8kit_ctx_destroy": (_enum_t, [vp]),
        "fp8kit_ctx_backend": (_enum_t, [vp]),
        "fp8kit_ctx_set_threads": (_enum_t, [vp, c.c_int]),
        "fp8kit_ctx_set_autotune": (_enum_t, [vp, c.c_int, c.c_char_p]),
        "fp8kit_ctx_set_tuning": (_enum_t, [vp, c.c_char_p]),
        "fp8kit_ctx_get_tuning": (_enum_t, [vp, c.c_char_p, c.c_size_t]),
        "fp8kit_last_error": (c.c_char_p, [vp]),
        "fp8kit_ctx_describe": (c.c_char_p, [vp]),
        "fp8kit_tensor_make": (Tensor, [vp, _enum_t, c.c_int32, c.POINTER(c.c_int64)]),
        "fp8kit_tensor_2d": (Tensor, [vp, _enum_t, c.c_int64, c.c_int64, c.c_int64]),
        "fp8kit_tensor_numel": (c.c_int64, [T]),
        "fp8kit_quant_desc_default": (QuantDesc, [_enum_t]),
        "fp8kit_quant_shapes": (_enum_t, [QD, T, T, T]),
        "fp8kit_quantize": (_enum_t, [vp, QD, T, T, T, vp]),
        "fp8kit_quantize_mx_both": (_enum_t, [vp, QD, T, T, T, T, T, vp]),
        "fp8kit_dequantize": (_enum_t, [vp, QD, T, T, T, vp]),
        "fp8kit_cast": (_enum_t, [vp, T, T, vp]),
        "fp8kit_quantize_supported": (_enum_t, [vp, QD, T, T, T]),
        "fp8kit_dequantize_supported": (_enum_t, [vp, QD, T, T, T]),
        "fp8kit_cast_supported": (_enum_t, [vp, T, T]),
        "fp8kit_gemm_workspace_size": (_enum_t, [vp, GD, GA, c.POINTER(c.c_size_t)]),
        "fp8kit_gemm": (_enum_t, [vp, GD, GA, vp]),
        "fp8kit_gemm_supported": (_enum_t, [vp, GD, GA]),
        "fp8kit_gemm_describe": (_enum_t, [vp, GD, GA, c.c_char_p, c.c_size_t]),
        "fp8kit_gemm_scale_shape": (_enum_t, [GD, c.c_int, c.c_int64, c.c_int64, c.POINTER(_enum_t),
                                              c.POINTER(c.c_int64)]),
        "fp8kit_gemm_call_run": (_enum_t, [vp]),
        "fp8kit_gemm_call_ptrs": (_enum_t, [vp, vp]),
        "fp8kit_plan_cache_size": (c.c_int64, [vp]),
        "fp8kit_grouped_gemm": (_enum_t, [vp, GD, vp, vp]),
        "fp8kit_grouped_gemm_workspace_size": (_enum_t, [vp, GD, vp, c.POINTER(c.c_size_t)]),
        "fp8kit_grouped_gemm_describe": (_enum_t, [vp, GD, vp, c.c_char_p, c.c_size_t]),
        "fp8kit_k_grouped_gemm": (_enum_t, [vp, GD, vp, vp]),
        "fp8kit_ckpt_opts_default": (CkptOpts, [_enum_t]),
        "fp8kit_checkpoint_quantize": (_enum_t, [vp, c.c_char_p, c.c_char_p, c.POINTER(CkptOpts),
                                                 c.POINTER(CkptReport)]),
        "fp8kit_checkpoint_dequantize": (_enum_t, [vp, c.c_char_p, c.c_char_p, c.POINTER(CkptOpts),
                                                   c.POINTER(CkptReport)]),
    }
    # the names of the enums (src/core/names.c): fp8kit_<enum>_name / _parse / _alias
    for e in NAMED_ENUMS:
        if e not in ("dtype", "backend"):  # their _name functions are declared above
            sigs["fp8kit_%s_name" % e] = (c.c_char_p, [_enum_t])
        sigs["fp8kit_%s_parse" % e] = (_enum_t, [c.c_char_p, c.POINTER(_enum_t)])
        sigs["fp8kit_%s_alias" % e] = (c.c_char_p, [_enum_t, c.c_int])
    optional = ("fp8kit_quantize_mx_both", "fp8kit_ctx_set_autotune", "fp8kit_ctx_set_tuning",
                "fp8kit_ctx_get_tuning", "fp8kit_gemm_supported", "fp8kit_gemm_describe", "fp8kit_gemm_scale_shape",
                "fp8kit_gemm_call_run",
                "fp8kit_gemm_call_ptrs", "fp8kit_grouped_gemm", "fp8kit_grouped_gemm_workspace_size",
                "fp8kit_grouped_gemm_describe",
                "fp8kit_ckpt_opts_default", "fp8kit_k_grouped_gemm",
                "fp8kit_checkpoint_quantize",
                "fp8kit_checkpoint_dequantize", "fp8kit_quantize_supported", "fp8kit_dequantize_supported",
                "fp8kit_cast_supported")  # newer than the first binding: an older library lacks it
    for name, (res, args) in sigs.items():
        if name in optional and not hasattr(lib, name):
            continue
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args


def unchecked(lib, name, restype=_enum_t):
    """Another function object for lib's `name` with no argtypes: ctypes then
    converts nothing, so every argument must already be a ctypes object of the
    right C type (a c_void_p, byref(struct), None for NULL). For hot paths
    that build their arguments once; ~0.4 us less per call than the declared
    function on our H100 host."""
    fn = lib._FuncPtr((name, lib))
    fn.restype = restype
    return fn


def load(path=None):
    """Loads (once) and returns the ctypes library. `path` forces a file."""
    global _lib, _lib_path
    if _lib is not None and path is None:
        return _lib
    with _lib_lock:
        if _lib is not None and path is None:
            return _lib
        tried = [path] if path else candidate_paths()
        errors, mismatched = [], []
        want = package_version()
        for p in tried:
            try:
                lib = ctypes.CDLL(p)
                _declare(lib)
            except (OSError, AttributeError) as e:
                errors.append("%s: %s" % (p, e))
                continue
            got = decode(lib.fp8kit_version_string())
            if got != want:
                mismatched.append("%s is libfp8kit %s" % (p, got))
                continue
            _lib, _lib_path = lib, p
            return lib
        if mismatched:
            raise LibraryVersionError(
                "fp8kit: the Python package is version %s but %s; rebuild the library from the same source "
                "(cmake --build build), reinstall the package, or set FP8KIT_LIBRARY to a libfp8kit %s%s"
                % (want, "; ".join(mismatched), want, (". Not loadable: " + "; ".join(errors)) if errors else ""))
        msg = "fp8kit: libfp8kit could not be loaded. Build it (cmake -S . -B build && " \
              "cmake --build build) or set FP8KIT_LIBRARY to its path."
        if errors:
            msg += " Tried: " + "; ".join(errors)
        else:
            msg += " No candidate found."
        raise LibraryNotFoundError(msg)


def library_path() -> str:
    """Path of the loaded library (loads it if needed)."""
    load()
    return str(_lib_path)


def decode(b):
    return b.decode("utf-8", "replace") if b is not None else ""


if sys.byteorder != "little":  # pragma: no cover
    raise ImportError("fp8kit: big-endian hosts are not supported")
