"""_checkpoint.py - safetensors checkpoints from Python: quantize_checkpoint
and dequantize_checkpoint run the C converter behind `fp8kit quantize` /
`fp8kit dequantize` (fp8kit_checkpoint_quantize / fp8kit_checkpoint_dequantize,
docs/spec.md section 5), so no CLI is needed. The call releases the GIL while
it converts; the weights kept in high precision and the warnings come back in
the CheckpointReport.
"""
import ctypes
import os
from dataclasses import dataclass, field
from typing import Iterable, List, Optional, Tuple, Union

from . import _lib
from ._context import DeviceLike, get_context
from ._cstr import c_path, c_text
from ._typing import DTypeLike
from ._lib import CkptFormat, CkptKeptFn, CkptOpts, CkptReport, CkptWarnFn, Rounding, Scheme
from ._names import CKPT_SCHEME_NAMES as SCHEME_NAMES, CKPT_SCHEMES as SCHEMES, ROUNDINGS, dtype_of_name
from .errors import InvalidArgumentError, UnsupportedError

# what the functions take as a path and as globs
PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
Globs = Union[str, Iterable[str]]

FORMATS = {
    "fp8": CkptFormat.FP8, "finegrained-fp8": CkptFormat.FP8, "deepseek": CkptFormat.FP8,
    "compressed-tensors": CkptFormat.COMPRESSED_TENSORS, "compressed_tensors": CkptFormat.COMPRESSED_TENSORS,
    "ct": CkptFormat.COMPRESSED_TENSORS,
}
FORMAT_NAMES = {CkptFormat.FP8: "fp8", CkptFormat.COMPRESSED_TENSORS: "compressed-tensors"}


@dataclass
class CheckpointReport:
    """What quantize_checkpoint / dequantize_checkpoint did (fp8kit_ckpt_report).

    tensors: input tensors; quantized: weights written as fp8 + scale;
    dequantized: fp8 tensors written in high precision (their scale tensors
    dropped); copied: tensors copied unchanged (kept weights included);
    other_files: other files of a model directory copied (config.json
    included, directories not counted); in_bytes / out_bytes: input tensor
    bytes, bytes written;
    seconds: wall time; convention: the convention dequantize recognised
    ("fp8", "compressed-tensors", "mixed (fp8 and compressed-tensors)", or
    "" when none and for quantize); kept: (tensor, reason) of each weight
    kept in high precision (its length is the C report's kept count);
    warnings: problems that did not stop the conversion (weights kept for
    their shape, leftovers of an earlier killed run removed); scheme /
    format: the CLI names of the scheme and output format quantize used
    (None for dequantize); dtype: dequantize's output dtype name (None for
    quantize)."""

    tensors: int
    quantized: int
    dequantized: int
    copied: int
    other_files: int
    in_bytes: int
    out_bytes: int
    seconds: float
    convention: str
    kept: List[Tuple[str, str]] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)
    scheme: Optional[str] = None
    format: Optional[str] = None
    dtype: Optional[str] = None


def _name(table, value, what, enum_type):
    if isinstance(value, enum_type):
        return enum_type(value)
    if isinstance(value, str) and value.strip().lower() in table:
        return table[value.strip().lower()]
    raise InvalidArgumentError("%s %r is not one of %s" % (what, value, ", ".join(sorted(table))))


def _path(p, what):
    return c_path(p, what)


def _globs(globs, what):
    """(char ** for C, count, the array it points into) of a glob or an
    iterable of globs."""
    if globs is None:
        globs = ()
    elif isinstance(globs, str):
        globs = (globs,)
    try:
        items = list(globs)
    except TypeError:
        raise InvalidArgumentError("%s must be a glob or an iterable of globs, not %s"
                                   % (what, type(globs).__name__)) from None
    for g in items:
        if not isinstance(g, str):
            raise InvalidArgumentError("%s: %r is not a str" % (what, g))
    if not items:
        return None, 0, None
    arr = (ctypes.c_char_p * len(items))(*[c_text(g, what + " glob") for g in items])
    return ctypes.cast(arr, ctypes.POINTER(ctypes.c_char_p)), len(items), arr


def _entry(lib, name):
    fn = getattr(lib, name, None)
    if fn is None:
        raise UnsupportedError("this libfp8kit (%s) has no %s: rebuild it from this source" % (_lib.library_path(), name))
    return fn


def _run(name, src, dst, opts, device, report_extra):
    lib = _lib.load()
    fn = _entry(lib, name)
    ctx = get_context(device)
    kept: List[Tuple[str, str]] = []
    warnings: List[str] = []

    def on_kept(user, tensor, reason):
        kept.append((_lib.decode(tensor), _lib.decode(reason)))

    def on_warning(user, message):
        warnings.append(_lib.decode(message))

    kept_fn, warn_fn = CkptKeptFn(on_kept), CkptWarnFn(on_warning)  # alive until the call returns
    opts.on_kept, opts.on_warning = kept_fn, warn_fn
    rep = CkptReport()
    ctx.check(fn(ctx.handle, src, dst, ctypes.byref(opts), ctypes.byref(rep)))
    return CheckpointReport(tensors=rep.tensors, quantized=rep.quantized, dequantized=rep.dequantized,
                            copied=rep.copied, other_files=rep.other_files, in_bytes=rep.in_bytes,
                            out_bytes=rep.out_bytes, seconds=rep.seconds, convention=_lib.decode(rep.convention),
                            kept=kept, warnings=warnings, **report_extra)


def quantize_checkpoint(src: PathLike, dst: PathLike, scheme: Union[str, Scheme] = "block",
                        format: Optional[Union[str, CkptFormat]] = None, *, exclude: Globs = (),
                        include: Globs = (), quantize_all: bool = False, pow2: bool = False,
                        rounding: Optional[Union[str, Rounding]] = None, force: bool = False,
                        device: DeviceLike = "cpu") -> CheckpointReport:
    """Quantizes a safetensors checkpoint to fp8 (the C converter behind
    `fp8kit quantize`; docs/spec.md section 5) and returns a CheckpointReport.

    src: a .safetensors file (dst is then one file), or a model directory
    holding model.safetensors or a sharded model.safetensors.index.json (dst
    is then a complete model directory: every other file copied byte for
    byte, config.json given the format's quantization_config). Every 2-D
    F32/F16/BF16 tensor named "*.weight" becomes F8_E4M3 plus a scale tensor;
    everything else is copied. dst is written under a temporary name next to
    it and renamed into place when complete: on any error nothing is created
    or changed. Paths are str, bytes or os.PathLike.
    scheme: "tensor", "row", "block" (128x128; also "block128x128") or "mx",
    or the CLI's "fp8-tensor", "fp8-row", "fp8-block", "mxfp8" (or a Scheme).
    format: "fp8" (transformers FineGrainedFP8 / DeepSeek-V3:
    X.weight_scale_inv; vLLM reads it for fp8-block, not for fp8-tensor) or
    "compressed-tensors" ("ct", "compressed_tensors": X.weight_scale, the
    format vLLM loads for every scheme); None is the scheme's default (fp8 for block,
    compressed-tensors for the others). "fp8" has no row layout.
    exclude: a glob or globs (fnmatch; the tensor or module name) of weights
    kept in high precision; a glob matching nothing is an error.
    include: globs of weights quantized even where a default keeps them
    (embeddings, MoE router gates).
    quantize_all: quantize lm_head too.
    pow2: fp32-scale schemes: round each scale up to a power of two.
    rounding: the mx scale rule (mx only): "rceil" (what transformers' and
    compressed-tensors' own MX quantizers do; None, the default, means rceil
    for mx) or "floor" (OCP; fp8kit.quantize's default).
    force: replace an existing dst (a directory is exchanged in one step);
    without it an existing dst raises IOFailedError and is left alone.
    device: the backend that quantizes: "cpu" (default), "cuda", "cuda:N",
    "auto" or a torch.device; CUDA stages each slab through device memory.
    Errors raise FP8KitError subclasses with the library's message, e.g.
    InvalidArgumentError (names, options a scheme does not take, an already
    quantized input), UnsupportedError (fp8 format with row, a library built
    without safetensors support), IOFailedError, CorruptFileError."""
    sch = _name(SCHEMES, scheme, "scheme", Scheme)
    fmt = CkptFormat.DEFAULT if format is None else _name(FORMATS, format, "format", CkptFormat)
    rnd = (Rounding.RCEIL if sch == Scheme.MX else Rounding.FLOOR) if rounding is None else \
        _name(ROUNDINGS, rounding, "rounding", Rounding)
    src_b, dst_b = _path(src, "src"), _path(dst, "dst")
    ex, inc = _globs(exclude, "exclude"), _globs(include, "include")
    opts = CkptOpts()
    opts.scheme, opts.format, opts.rounding = int(sch), int(fmt), int(rnd)
    opts.pow2, opts.quantize_all, opts.force = int(bool(pow2)), int(bool(quantize_all)), int(bool(force))
    opts.exclude, opts.nexclude = ex[0], ex[1]
    opts.include, opts.ninclude = inc[0], inc[1]
    used = fmt if fmt != CkptFormat.DEFAULT else \
        (CkptFormat.FP8 if sch == Scheme.BLOCK128X128 else CkptFormat.COMPRESSED_TENSORS)
    return _run("fp8kit_checkpoint_quantize", src_b, dst_b, opts, device,
                {"scheme": SCHEME_NAMES.get(sch), "format": FORMAT_NAMES[used]})


def dequantize_checkpoint(src: PathLike, dst: PathLike, dtype: DTypeLike = "bf16", *, exclude: Globs = (),
                          force: bool = False, device: DeviceLike = "cpu") -> CheckpointReport:
    """Dequantizes an fp8 safetensors checkpoint (the C converter behind
    `fp8kit dequantize`; docs/spec.md section 5) and returns a
    CheckpointReport whose convention names what was recognised.

    src: a .safetensors file or a model directory, as for
    quantize_checkpoint; dst: the file or directory written (all or nothing,
    under a temporary name renamed into place). Every F8_E4M3 / F8_E5M2
    tensor X with a scale tensor X_scale (compressed-tensors) or X_scale_inv
    (fp8) becomes decode(q) * S in dtype (bit for bit as fp8kit.dequantize);
    the scale tensors are dropped, everything else is copied, config.json
    loses its quantization_config. Paths are str, bytes or os.PathLike.
    dtype: the output dtype, "bf16" (default), "f16" or "f32" (numpy dtypes
    and the other spellings of docs/spec.md accepted).
    exclude: a glob or globs of fp8 tensors left as they are.
    force: replace an existing dst; without it an existing dst raises
    IOFailedError and is left alone.
    device: "cpu" (default), "cuda", "cuda:N", "auto" or a torch.device.
    Errors raise FP8KitError subclasses with the library's message
    (UnsupportedError for an fp8 dtype, CorruptFileError for a scale tensor
    that fits no scheme, IOFailedError, ...)."""
    dt = dtype_of_name(dtype, "dtype")
    src_b, dst_b = _path(src, "src"), _path(dst, "dst")
    ex = _globs(exclude, "exclude")
    opts = CkptOpts()
    opts.out_dtype, opts.force = int(dt), int(bool(force))
    opts.exclude, opts.nexclude = ex[0], ex[1]
    return _run("fp8kit_checkpoint_dequantize", src_b, dst_b, opts, device, {"dtype": dt.name.lower()})
