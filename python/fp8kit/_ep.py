"""_ep.py - the binding of include/fp8kit_ep.h, libfp8kit's expert-parallel
(EP) layer (docs/ep.md): ctypes mirrors of fp8kit_ep_config and
fp8kit_ep_recv (same fields, same order; python/tests/test_distributed.py
compares them with the C compiler's), the configuration builder and
fp8kit_ep_buffer_size, and ExpertParallel, which owns one fp8kit_ep made on an
EPGroup's NCCL communicator: dispatch (torch bf16 / f16 / f32 tokens, int32
top-k ids and f32 weights on the GPU -> fp8 tokens in the masked grouped
layout) and combine (the experts' bf16 outputs -> the weighted sum per
token), on torch's current stream.

What a dispatch delivers (Received) are torch tensors that alias the layer's
own device buffers (no copy): each is made with torch.as_tensor of a small
object that has a __cuda_array_interface__ over the buffer's address, and
that object keeps the buffers alive (the fp8kit_ep is destroyed only when
neither the ExpertParallel nor any such tensor is left, or by an explicit
close()). Errors raise the package's FP8KitError subclasses with the
library's message (fp8kit_last_error of the context the layer was made
with). Nothing here imports torch at import time.
"""
import ctypes
import os
import operator
import threading
from typing import Any, Dict, Optional

from . import _lib
from ._arrays import as_view, is_torch_tensor, torch_module
from ._common import check_out
from ._context import Context
from ._lib import DType, Rounding, ScaleLayout, Status, Tensor
from ._names import ROUNDINGS, SCALE_LAYOUTS, dtype_of_name, enum_of
from ._nccl import EPGroup
from ._typing import Array, DTypeLike, Stream
from .errors import (FP8KitError, InternalError, InvalidArgumentError, InvalidShapeError, UnsupportedError,
                     raise_status)

MAX_TOP_K = 64  # FP8KIT_EP_MAX_TOP_K
FN = "fp8kit.distributed.ExpertParallel"
_ENUM = ctypes.c_int  # C enums are int on every ABI fp8kit targets
# fp8kit_ep_transport, by value: 'nccl' (fp8kit's exchange on NCCL point-to-point) or 'nccl_ep' (NCCL EP)
TRANSPORTS = ("nccl", "nccl_ep")
# fp8kit_ep_mode, by value: 'low_latency' (the masked layout) or 'high_throughput' (contiguous; transport nccl_ep)
MODES = ("low_latency", "high_throughput")


class EpConfig(ctypes.Structure):
    """fp8kit_ep_config: the layer's shape, the same on every rank (zero = the defaults of the optional
    fields)."""
    _fields_ = [
        ("num_experts", ctypes.c_int64),
        ("hidden", ctypes.c_int64),
        ("top_k", ctypes.c_int64),
        ("max_tokens", ctypes.c_int64),
        ("fp8", _ENUM),
        ("mx", ctypes.c_int32),
        ("rounding", _ENUM),
        ("pow2", ctypes.c_int32),
        ("scale_layout", _ENUM),
        ("transport", _ENUM),
        ("mode", _ENUM),
    ]

    def __repr__(self):
        return ("EpConfig(num_experts=%d, hidden=%d, top_k=%d, max_tokens=%d, fp8=%s, mx=%d, rounding=%s, pow2=%d, "
                "scale_layout=%s, transport=%s, mode=%s)" % (
                    self.num_experts, self.hidden, self.top_k, self.max_tokens, _name(DType, self.fp8), self.mx,
                    _name(Rounding, self.rounding), self.pow2, _name(ScaleLayout, self.scale_layout),
                    TRANSPORTS[self.transport] if 0 <= self.transport < len(TRANSPORTS) else self.transport,
                    MODES[self.mode] if 0 <= self.mode < len(MODES) else self.mode))


class EpRecv(ctypes.Structure):
    """fp8kit_ep_recv: the views a dispatch fills (device addresses)."""
    _fields_ = [
        ("x", Tensor),
        ("scale", Tensor),
        ("counts", ctypes.c_void_p),  # const int32_t *
        ("status", ctypes.c_void_p),  # int32_t *
        ("world", ctypes.c_int64),
        ("rank", ctypes.c_int64),
        ("local_experts", ctypes.c_int64),
        ("first_expert", ctypes.c_int64),
        ("max_rows", ctypes.c_int64),
        ("transport", _ENUM),
        ("layout", _ENUM),
        ("offsets", ctypes.c_void_p),  # const int32_t *
    ]


def _name(enum, v):
    try:
        return enum(v).name.lower()
    except ValueError:
        return str(v)


# ------------------------------------------------------------------ the C functions
class _Functions:
    """The fp8kit_ep_* functions of one loaded libfp8kit, declared (objects of their own: the library's
    shared function objects are left as _lib declares them)."""

    def __init__(self, lib):
        c = ctypes
        P, vp = c.POINTER, c.c_void_p
        sigs = {
            "buffer_size": ("fp8kit_ep_buffer_size", [P(EpConfig), c.c_int64, P(c.c_size_t)]),
            "create": ("fp8kit_ep_create", [vp, vp, P(EpConfig), P(vp)]),
            "destroy": ("fp8kit_ep_destroy", [vp]),
            "recv_view": ("fp8kit_ep_recv_view", [vp, P(EpRecv)]),
            "dispatch": ("fp8kit_ep_dispatch", [vp, P(Tensor), vp, vp, c.c_int64, P(EpRecv), vp]),
            "combine": ("fp8kit_ep_combine", [vp, P(Tensor), P(Tensor), vp]),
        }
        self.lib = lib
        for attr, (name, args) in sigs.items():
            if not hasattr(lib, name):
                raise UnsupportedError("fp8kit.distributed: this libfp8kit has no %s (older than the binding: "
                                       "rebuild it)" % name)
            fn = _lib.unchecked(lib, name, _ENUM)
            fn.argtypes = args
            setattr(self, attr, fn)

    def last_error(self):
        """The calling thread's message for a failure reported without a context (ctx or ep NULL)."""
        return _lib.decode(self.lib.fp8kit_last_error(None))


_fns: Optional[_Functions] = None
_fns_lock = threading.Lock()


def ep_functions() -> _Functions:
    """The declared fp8kit_ep_* functions of the loaded library (UnsupportedError when it lacks them)."""
    global _fns
    lib = _lib.load()
    f = _fns
    if f is None or f.lib is not lib:
        with _fns_lock:
            f = _fns = _Functions(lib)
    return f


# ---------------------------------------------------------------- configuration
def _int64(v, name):
    if isinstance(v, bool):
        raise InvalidArgumentError("%s: %s must be an int (got %r)" % (FN, name, v))
    try:
        i = operator.index(v)
    except TypeError:
        raise InvalidArgumentError("%s: %s must be an int (got %s)" % (FN, name, type(v).__name__)) from None
    if not -(1 << 63) <= i < (1 << 63):
        raise InvalidArgumentError("%s: %s = %d does not fit int64" % (FN, name, i))
    return i


def _flag(v, name):
    if v in (True, False) and not (isinstance(v, float)):
        return 1 if v else 0
    raise InvalidArgumentError("%s: %s must be True or False (got %r)" % (FN, name, v))


def ep_config(num_experts: int, hidden: int, top_k: int, max_tokens: int, *, dtype: DTypeLike = "e4m3",
              mx: bool = False, rounding: str = "floor", pow2: bool = False,
              scale_layout: str = "plain", transport: str = "nccl", mode: str = "low_latency") -> EpConfig:
    """An fp8kit_ep_config (EpConfig) with these fields. Only the Python types are checked here (names
    parsed, ints in int64); the library checks the values (ep_buffer_size, and ExpertParallel on every rank
    together).

    Arguments:
      num_experts: E, the experts of the whole layer (a multiple of the world size).
      hidden: H, a token's length (a positive multiple of 128).
      top_k: experts per token, 1 .. min(E, 64).
      max_tokens: tokens per rank per dispatch (sizes every buffer).
      dtype: the fp8 codes the tokens travel as, 'e4m3' or 'e5m2' (or a torch float8 dtype).
      mx: False: block1x128 (an f32 scale per 128 of a token); True: MX (an e8m0 byte per 32).
      rounding: MX's scale rule, 'floor' (the default) or 'rceil'; must be 'floor' without mx.
      pow2: block1x128 only: scales rounded up to powers of two (quantize's pow2).
      scale_layout: the received scales, 'plain' or 'mn_major' (block1x128 only: the grouped GEMM's fastest
        layout on Hopper).
      transport: 'nccl' (fp8kit's exchange on NCCL point-to-point: a fixed row order, combine bit-exact
        against the reference) or 'nccl_ep' (NCCL EP's low-latency kernels; needs libnccl_ep.so, NCCL 2.30 or
        newer and H a multiple of 512; docs/ep.md).
      mode: 'low_latency' (the masked layout, (E_local, M, H)) or 'high_throughput' (the contiguous layout,
        (R, H) with R = W * max_tokens * min(top_k, E_local); either transport)."""
    cfg = EpConfig()
    cfg.num_experts = _int64(num_experts, "num_experts")
    cfg.hidden = _int64(hidden, "hidden")
    cfg.top_k = _int64(top_k, "top_k")
    cfg.max_tokens = _int64(max_tokens, "max_tokens")
    cfg.fp8 = int(dtype_of_name(dtype, FN + ": dtype"))
    cfg.mx = _flag(mx, "mx")
    cfg.rounding = int(enum_of(ROUNDINGS, rounding, FN + ": rounding", Rounding))
    cfg.pow2 = _flag(pow2, "pow2")
    cfg.scale_layout = int(enum_of(SCALE_LAYOUTS, scale_layout, FN + ": scale_layout", ScaleLayout))
    if transport not in TRANSPORTS:
        raise InvalidArgumentError("%s: transport must be one of %s (got %r)" % (FN, ", ".join(TRANSPORTS),
                                                                               transport))
    cfg.transport = TRANSPORTS.index(transport)
    if mode not in MODES:
        raise InvalidArgumentError("%s: mode must be one of %s (got %r)" % (FN, ", ".join(MODES), mode))
    cfg.mode = MODES.index(mode)
    return cfg


def ep_buffer_size(config: EpConfig, world: int) -> int:
    """The device memory (bytes) an ExpertParallel of this configuration allocates on a world of `world`
    ranks (fp8kit_ep_buffer_size; the same on every rank). Checks the configuration as the layer's creation
    does and raises the library's error (InvalidArgumentError, InvalidShapeError, UnsupportedError,
    SizeOverflowError) with its message. Works in every build (no GPU, no NCCL needed).

    Arguments:
      config: an EpConfig (ep_config's).
      world: the number of ranks."""
    if not isinstance(config, EpConfig):
        raise InvalidArgumentError("ep_buffer_size: config must be an EpConfig (fp8kit.distributed.ep_config)")
    f = ep_functions()
    n = ctypes.c_size_t(0)
    st = f.buffer_size(ctypes.byref(config), _int64(world, "world"), ctypes.byref(n))
    if st:
        raise_status(st, f.last_error())
    return int(n.value)


# ------------------------------------------------------------------ the object
_contexts: Dict[int, Context] = {}
_contexts_lock = threading.Lock()


def ep_context(device: int) -> Context:
    """The CUDA context the expert-parallel layers of `device` are made with: one per device, kept by this
    module apart from get_context's cache (clear_contexts() must not destroy a context a live fp8kit_ep
    uses); every layer also holds a reference to its own."""
    ctx = _contexts.get(device)
    if ctx is None:
        with _contexts_lock:
            ctx = _contexts.get(device)
            if ctx is None:
                ctx = _contexts[device] = Context("cuda", device)
    return ctx


def create_handle(ctx: Context, comm: Optional[int], config: Optional[EpConfig]) -> int:
    """fp8kit_ep_create (collective: every rank of the communicator calls it): the fp8kit_ep's address.
    Raises the library's error with its message. The low-level call under ExpertParallel (tests use it with
    a CPU context, which the library refuses before touching the communicator)."""
    f = ep_functions()
    out = ctypes.c_void_p()
    st = f.create(ctx.handle, comm or None, ctypes.byref(config) if config is not None else None,
                  ctypes.byref(out))
    ctx.check(st)
    return int(out.value)


class _Handle:
    """Owns one fp8kit_ep: destroyed by close(), or when neither its ExpertParallel nor a tensor aliasing its
    buffers is left. Holds the context and the EPGroup (the communicator), so neither goes first."""

    def __init__(self, fns, handle, ctx, group):
        self.fns, self.handle, self.ctx, self.group = fns, handle, ctx, group

    def close(self):
        h, self.handle = self.handle, None
        if h:
            self.fns.destroy(h)  # waits for the device, then frees the buffers

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


_TYPESTR = {DType.F32: "<f4", DType.E4M3: "|u1", DType.E5M2: "|u1", DType.E8M0: "|u1"}


class _DeviceArray:
    """A __cuda_array_interface__ (version 2: no stream to wait for) over device memory that `owner` keeps
    alive; torch.as_tensor of it aliases the memory, and the tensor holds this object."""
    __slots__ = ("__cuda_array_interface__", "owner")

    def __init__(self, ptr, shape, typestr, owner):
        self.__cuda_array_interface__ = {"version": 2, "data": (int(ptr), False), "typestr": typestr,
                                         "shape": tuple(int(n) for n in shape), "strides": None}
        self.owner = owner


def alias_tensor(ptr: int, shape: Any, dtype: Any, device: int, owner: Any) -> Any:
    """A torch tensor over CUDA memory that something else owns, without a copy (torch.as_tensor of a
    __cuda_array_interface__), packed row-major.

    Arguments:
      ptr: the device address (an int).
      shape: the tensor's shape.
      dtype: an fp8kit DType (F32, or the 1-byte E4M3 / E5M2 / E8M0, viewed as torch's float8 dtypes;
        uint8 for e8m0 before torch 2.7) or 'int32'.
      device: the CUDA index the memory lives on.
      owner: any object; it stays alive as long as the tensor does (the memory must too)."""
    tm = torch_module()
    torch = tm.torch
    typestr = "<i4" if dtype == "int32" else _TYPESTR[dtype]
    t = torch.as_tensor(_DeviceArray(ptr, shape, typestr, owner), device=torch.device("cuda", device))
    if t.data_ptr() != ptr or t.device.index != device:
        raise InternalError("%s: torch copied the layer's buffer at 0x%x instead of aliasing it" % (FN, ptr))
    if dtype in (DType.E4M3, DType.E5M2, DType.E8M0):
        t = t.view(tm.torch_dtype(dtype))
    return t


class Received:
    """What a dispatch delivered to this rank (fp8kit_ep_recv): torch tensors aliasing the layer's device
    buffers (the same for its lifetime; contents valid after a dispatch, in stream order, until the next
    one), ready to be a masked fp8kit.grouped_mm's A:

        grouped_mm(recv.x, w.transpose(-2, -1), recv.offsets, recv.scale, w_scale, layout=recv.layout,
                   scale_layout=recv.scale_layout)

    Attributes:
      x: (E_local, M, H) fp8 codes (torch.float8_e4m3fn / e5m2); the rows of local expert e are
        x[e, :counts[e]], one per token that lists global expert first_expert + e, ordered by source rank,
        then by the token's index there; rows past a count hold stale data.
      scale: block1x128 plain (E_local, M, H/128) float32; mn_major (E_local, H/128, 4*ceil(M/4)) float32
        (padding 0); MX (E_local, M, H/32) e8m0 (torch.float8_e8m0fnu, uint8 before torch 2.7).
      counts: (E_local,) int32, the valid rows per local expert (the masked layout's offs).
      status: (1,) int32: 0, or 2 (FP8KIT_ERR_INVALID_ARGUMENT) when a top-k id of this rank's tokens was
        outside [-1, E) in the last dispatch (those entries were dropped). Reading it syncs the host.
      world, rank, local_experts, first_expert, max_rows: W, this rank, E_local = E / W, rank * E_local, and
        M = W * max_tokens.
      scale_layout: 'plain' or 'mn_major'; mx: whether the scales are MX; transport: 'nccl' or 'nccl_ep' (with
        'nccl_ep' the same rows per expert, in the order NCCL EP writes them).
      layout: 'masked' (low latency) or 'contiguous' (high throughput: x (R, H), scale (R, H/128) / (H/128,
        4*ceil(R/4)) / (R, H/32), expert e's rows x[offsets[e-1]:offsets[e]], max_rows = R); offsets: the
        grouped GEMM's offs for that layout (counts, or the (E_local,) int32 row ends)."""
    __slots__ = ("x", "scale", "counts", "status", "world", "rank", "local_experts", "first_expert", "max_rows",
                 "scale_layout", "mx", "transport", "layout", "offsets")

    def __repr__(self):
        return ("<fp8kit.distributed.Received rank %d of %d: experts %d..%d, x %s, scale %s>"
                % (self.rank, self.world, self.first_expert, self.first_expert + self.local_experts - 1,
                   tuple(self.x.shape), tuple(self.scale.shape)))


def _received(r, cfg, device, owner):
    """Received of an fp8kit_ep_recv (the views of the layer's buffers)."""
    out = Received()
    xs = tuple(r.x.shape[i] for i in range(r.x.ndim))
    ss = tuple(r.scale.shape[i] for i in range(r.scale.ndim))
    out.x = alias_tensor(r.x.data, xs, DType(r.x.dtype), device, owner)
    out.scale = alias_tensor(r.scale.data, ss, DType(r.scale.dtype), device, owner)
    out.counts = alias_tensor(r.counts, (r.local_experts,), "int32", device, owner)
    out.status = alias_tensor(r.status, (1,), "int32", device, owner)
    out.world, out.rank, out.local_experts = int(r.world), int(r.rank), int(r.local_experts)
    out.first_expert, out.max_rows = int(r.first_expert), int(r.max_rows)
    out.scale_layout = "mn_major" if cfg.scale_layout == ScaleLayout.MN_MAJOR else "plain"
    out.mx = bool(cfg.mx)
    out.transport = TRANSPORTS[cfg.transport]
    contiguous = MODES[cfg.mode] == "high_throughput"
    out.layout = "contiguous" if contiguous else "masked"
    out.offsets = alias_tensor(r.offsets, (r.local_experts,), "int32", device, owner) if contiguous \
        else out.counts
    return out


def preload_nccl_ep() -> Optional[str]:
    """Loads the libnccl_ep.so of the nccl-extensions wheel (package nccl.ep, the build for the CUDA major
    version torch uses) into the process under its soname, so that libfp8kit's dlopen("libnccl_ep.so.0")
    finds it, and points NCCL_EP_HOME (unless set) at the package, whose headers NCCL EP's run-time kernel
    compilation reads; returns the library's path, or None when the package has none (libfp8kit then searches
    the loader's path). NCCL EP itself needs NCCL 2.30 or newer in the process and nvcc at run time."""
    import importlib.util
    spec = importlib.util.find_spec("nccl")
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        major = str(torch_module().version.cuda or "13").split(".")[0]
    except Exception:  # noqa: BLE001 - no torch: the newest build
        major = "13"
    for d in spec.submodule_search_locations:
        for m in (major, "13", "12"):
            p = os.path.join(d, "ep", "lib", "cu" + m, "libnccl_ep.so")
            if os.path.isfile(p):
                # NCCL EP compiles its kernels at first use (nvcc) with the headers the wheel ships: it finds
                # them through NCCL_EP_HOME (as its own Python package sets it)
                if os.path.isdir(os.path.join(d, "ep", "include", "nccl_ep")):
                    os.environ.setdefault("NCCL_EP_HOME", os.path.join(d, "ep"))
                ctypes.CDLL(p, mode=ctypes.RTLD_GLOBAL)
                return p
    return None


def _cuda_tensor(t, name, device, fn):
    if not is_torch_tensor(t):
        raise InvalidArgumentError("%s: %s must be a torch tensor on cuda:%d (got %s)" % (fn, name, device,
                                                                                          type(t).__name__))
    if not t.is_cuda or t.device.index != device:
        raise UnsupportedError("%s: %s is on %s; the layer runs on cuda:%d" % (fn, name, t.device, device))


class ExpertParallel:
    """libfp8kit's expert-parallel layer (an fp8kit_ep, include/fp8kit_ep.h, docs/ep.md) on an EPGroup:
    dispatch quantizes each rank's tokens to fp8 (1x128 or MX, by fp8kit_quantize), sends each token to the
    ranks that own its top-k experts and leaves them in the masked grouped-GEMM layout (Received); combine
    sends the experts' bf16 output rows back and sums each token's top-k rows weighted by its router
    weights, in top-k order in fp32. Rank r owns the global experts r*E/W .. (r+1)*E/W - 1. NCCL
    point-to-point over fixed-size buffers on the given stream: no host synchronization, capturable in a
    CUDA graph (after the first call). Inference only: nothing is recorded for autograd.

    Collective: construction, dispatch and combine are called by every rank of the group in the same order
    (the number of tokens may differ between ranks, 0 included). Construction compares the ranks'
    configurations: when they differ, or one rank's is refused, every rank raises (InvalidArgumentError on
    the others). One thread at a time per object.

    Arguments:
      group: the EPGroup (its NCCL communicator and CUDA device).
      num_experts, hidden, top_k, max_tokens, dtype, mx, rounding, pow2, scale_layout, transport, mode: the
        configuration, as ep_config takes them (E a multiple of the world size, H a multiple of 128, top_k
        1 .. min(E, 64), max_tokens >= 1: every buffer is sized for it; ep_buffer_size gives the bytes).
        transport='nccl_ep' first loads the nccl-extensions wheel's libnccl_ep.so (preload_nccl_ep).

    Attributes: config (EpConfig), group, device (CUDA index), ctx (the fp8kit Context it was made with),
    recv (Received: the views every dispatch fills), buffer_bytes."""

    def __init__(self, group: EPGroup, num_experts: int, hidden: int, top_k: int, max_tokens: int, *,
                 dtype: DTypeLike = "e4m3", mx: bool = False, rounding: str = "floor", pow2: bool = False,
                 scale_layout: str = "plain", transport: str = "nccl", mode: str = "low_latency") -> None:
        self._h: Optional[_Handle] = None
        if not isinstance(group, EPGroup):
            raise InvalidArgumentError("%s: group must be an fp8kit.distributed.EPGroup (got %s)"
                                       % (FN, type(group).__name__))
        if group.closed:
            raise InvalidArgumentError("%s: the EPGroup is closed" % FN)
        fns = ep_functions()
        ctx = ep_context(group.device)
        err = None
        try:
            cfg = ep_config(num_experts, hidden, top_k, max_tokens, dtype=dtype, mx=mx, rounding=rounding,
                            pow2=pow2, scale_layout=scale_layout, transport=transport, mode=mode)
            if transport == "nccl_ep":
                preload_nccl_ep()
        except FP8KitError as e:
            # still take part in the ranks' agreement, with a configuration every library refuses, so that the
            # other ranks fail with this one instead of waiting for it
            err, cfg = e, EpConfig()
        out = ctypes.c_void_p()
        st = fns.create(ctx.handle, ctypes.c_void_p(group.comm), ctypes.byref(cfg), ctypes.byref(out))
        if err is not None:
            if st == 0 and out.value:
                fns.destroy(out.value)
            raise err
        ctx.check(st)
        self._h = _Handle(fns, int(out.value), ctx, group)
        group.register(self._h)
        self._fns, self.ctx, self.group, self.device, self.config = fns, ctx, group, group.device, cfg
        r = EpRecv()
        ctx.check(fns.recv_view(self._h.handle, ctypes.byref(r)))
        self.recv = _received(r, cfg, self.device, self._h)
        self.buffer_bytes = ep_buffer_size(cfg, group.world)
        self._last_t: Optional[int] = None

    def _live(self, what):
        h = self._h.handle if self._h is not None else None
        if not h:
            raise InvalidArgumentError("%s.%s: the layer is closed" % (FN, what))
        return h

    def _stream(self, stream):
        if stream is None:
            return torch_module().current_stream(self.device)
        return getattr(stream, "cuda_stream", stream)

    def _failed(self, st):
        if st in (Status.ERR_DEVICE, Status.ERR_OUT_OF_MEMORY):  # work may have been enqueued: routing forgotten
            self._last_t = None
        self.ctx.check(st)

    def dispatch(self, x: Array, topk_ids: Array, topk_weights: Array, *, stream: Optional[Stream] = None) -> Received:
        """Dispatch (collective): quantizes x and sends each token to its experts' ranks; returns recv (the
        same Received every time), valid in stream order after this call.

        Arguments:
          x: this rank's t tokens, a (t, H) float32 / float16 / bfloat16 CUDA tensor on the layer's device
            (rows may be strided, H contiguous); 0 <= t <= max_tokens (t may differ between ranks; with t = 0
            nothing is read).
          topk_ids: (t, top_k) int32, contiguous, on the device: global expert ids, -1 = none (ids outside
            [-1, E) are dropped on the device and reported in recv.status).
          topk_weights: (t, top_k) float32, contiguous, on the device: the router weights, kept for combine.
          stream: a cudaStream_t int or a torch stream (default: torch's current stream on the device)."""
        h = self._live("dispatch")
        fn = FN + ".dispatch"
        _cuda_tensor(x, "x", self.device, fn)
        if x.dim() != 2:
            raise InvalidShapeError("%s: x must be 2-D (t, H) (got shape %s)" % (fn, tuple(x.shape)))
        t, k = int(x.shape[0]), int(self.config.top_k)
        torch = torch_module().torch
        ptrs = []
        for v, name, dt in ((topk_ids, "topk_ids", torch.int32), (topk_weights, "topk_weights", torch.float32)):
            _cuda_tensor(v, name, self.device, fn)
            if v.dtype != dt:
                raise InvalidArgumentError("%s: %s must be %s (got %s)" % (fn, name, dt, v.dtype))
            if tuple(v.shape) != (t, k):
                raise InvalidShapeError("%s: %s must be (t, top_k) = (%d, %d) (got shape %s)"
                                        % (fn, name, t, k, tuple(v.shape)))
            if not v.is_contiguous():
                raise InvalidArgumentError("%s: %s must be contiguous" % (fn, name))
            ptrs.append(v.data_ptr() if t else None)
        xt = None
        if t:
            xt = Tensor()
            as_view(x, "x").fill(xt)
        st = self._fns.dispatch(h, ctypes.byref(xt) if xt is not None else None, ptrs[0], ptrs[1], t, None,
                                self._stream(stream))
        if st:
            self._failed(st)
        self._last_t = t
        return self.recv

    def combine(self, y: Array, *, out: Optional[Array] = None, stream: Optional[Stream] = None) -> Array:
        """Combine (collective), for the last dispatch: out[i] = bf16(sum over token i's valid top-k entries,
        in top-k order, of fl32(acc + fl32(w * y_row))), from +0, rounded once (docs/ep.md); a token without
        a valid expert gets +0. Returns out, (t, H) bfloat16 (t of the last dispatch).

        Arguments:
          y: the experts' outputs in the masked layout of the last dispatch, (E_local, M, H) bfloat16 on the
            device (rows past the counts are not read; rows and experts may be strided).
          out: optional (t, H) bfloat16 CUDA tensor to write (row stride >= H; sharing no byte with y); None:
            a new one.
          stream: a cudaStream_t int or a torch stream (default: torch's current stream on the device)."""
        h = self._live("combine")
        fn = FN + ".combine"
        _cuda_tensor(y, "y", self.device, fn)
        yt = Tensor()
        as_view(y, "y").fill(yt)
        t, H = self._last_t, int(self.config.hidden)
        ot, result = None, out
        if t is not None and t == 0 and out is None:
            torch = torch_module().torch
            result = torch.empty((0, H), dtype=torch.bfloat16, device=torch.device("cuda", self.device))
        elif t:
            if out is None:
                torch = torch_module().torch
                result = torch.empty((t, H), dtype=torch.bfloat16, device=torch.device("cuda", self.device))
                ov = as_view(result, "out")
            else:
                ov = check_out(out, "out", (t, H), DType.BF16, ("cuda", self.device), fn=fn)
            ot = Tensor()
            ov.fill(ot)
        st = self._fns.combine(h, ctypes.byref(yt), ctypes.byref(ot) if ot is not None else None,
                               self._stream(stream))
        if st:
            self._failed(st)
        return result

    @property
    def closed(self) -> bool:
        """True once close() ran (or the EPGroup was closed)."""
        return self._h is None or not self._h.handle

    def close(self) -> None:
        """Destroys the fp8kit_ep now (waits for the device, frees the buffers: tensors of recv must not be
        used afterwards). The EPGroup's communicator stays open. Idempotent."""
        if self._h is not None:
            self._h.close()

    def __enter__(self) -> "ExpertParallel":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self):
        c = self.config if self._h is not None else None
        if c is None:
            return "<fp8kit.distributed.ExpertParallel (not made)>"
        return "<fp8kit.distributed.ExpertParallel %r on rank %d of %d, cuda:%d%s>" % (
            c, self.group.rank, self.group.world, self.device, ", closed" if self.closed else "")
