"""_context.py - fp8kit contexts: one per (backend, device), created lazily,
cached for the life of the process, and the status -> exception bridge that
reads fp8kit_last_error on the same thread as the failing call.

fp8kit keeps its last-error text per context and per OS thread, and a context
may be used from several threads at once, so one cached context per
(backend, device) is safe for every Python thread.
"""
import atexit
import ctypes
import os
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from . import _lib
from ._cstr import c_path, c_text
from ._lib import Backend
from ._names import BACKENDS
from .errors import InvalidArgumentError, UnsupportedError, raise_status

# what Context / get_context take as a device (Any: a torch.device, read by duck typing)
DeviceLike = Union[Backend, int, str, Any]
DEVICE_FORMS = ("a Backend (or its int)", "'cpu'", "'cuda'", "'cuda:N'", "'auto'", "a torch.device")


def parse_device(backend: DeviceLike, device: Optional[int] = None) -> Tuple[Backend, int]:
    """(Backend, device index) from the forms Context and get_context take.
    backend: a Backend or its int, the strings torch users write ('cpu',
    'cuda', 'cuda:N', also 'auto' and any case), or a torch.device (or
    anything with its .type / .index). device: the index (default 0; an index in the string
    or torch.device must agree with it). Anything else raises
    InvalidArgumentError (a ValueError) naming the accepted forms."""
    index: Optional[int] = None
    if isinstance(backend, str) or (isinstance(getattr(backend, "type", None), str) and hasattr(backend, "index")):
        if isinstance(backend, str):
            name, sep, idx = backend.strip().lower().partition(":")
            if sep:
                if not (idx.isascii() and idx.isdigit()):
                    name = ""  # 'cuda:', 'cuda:x', 'cuda:-1'
                else:
                    index = int(idx)
        else:  # torch.device
            name, index = getattr(backend, "type"), getattr(backend, "index")
        parsed = BACKENDS.get(name)
        if parsed is None or (index is not None and parsed == Backend.AUTO):
            raise InvalidArgumentError("device %r is not one of the accepted forms: %s"
                                       % (backend, ", ".join(DEVICE_FORMS)))
        backend = parsed
    else:
        try:
            backend = Backend(backend)
        except (ValueError, TypeError):
            raise InvalidArgumentError("backend %r is not one of the accepted forms: %s"
                                       % (backend, ", ".join(DEVICE_FORMS))) from None
    if device is None:
        device = 0 if index is None else index
    elif index is not None and int(device) != index:
        raise InvalidArgumentError("device %d disagrees with the index in %r" % (int(device), index))
    return backend, int(device)


class Context:
    """An owned fp8kit_ctx. Prefer get_context(); contexts are not cheap to make
    on CUDA. `handle` is the raw pointer (an int) passed to every C call.

    backend: a Backend, 'cpu', 'cuda', 'cuda:N', 'auto' or a torch.device
    (see parse_device); device: the CUDA device index (default 0, or the one
    the string names)."""

    def __init__(self, backend: DeviceLike = Backend.CPU, device: Optional[int] = None) -> None:
        backend, device = parse_device(backend, device)
        lib = _lib.load()
        self._lib = lib
        out = ctypes.c_void_p()
        st = lib.fp8kit_ctx_create(int(backend), int(device), ctypes.byref(out))
        if st != 0:
            raise_status(st, _lib.decode(lib.fp8kit_last_error(None)))
        self.handle = out.value
        # the handle as a ready ctypes argument (the scaled_mm plans pass it); close() makes it NULL
        self.handle_arg = ctypes.c_void_p(self.handle)
        # fp8kit_gemm without argtypes, for the scaled_mm hot path whose arguments are all
        # ctypes objects already (handle_arg, byref(desc), byref(args), c_void_p(stream))
        self.unchecked_gemm = _lib.unchecked(lib, "fp8kit_gemm")
        # fp8kit_gemm_call_ptrs (a prepared {ctx, desc, args, stream} and the 7 words of the data
        # pointers and stream) without argtypes, for the torch hot path; None with a library older
        # than it. _calls: every such struct made for this context (word 0 is the handle), cleared
        # by close() so none keeps a dangling handle.
        self.unchecked_gemm_ptrs = _lib.unchecked(lib, "fp8kit_gemm_call_ptrs") \
            if hasattr(lib, "fp8kit_gemm_call_ptrs") else None
        self._calls: List[Any] = []
        self.requested = Backend(backend)
        self.backend = Backend(lib.fp8kit_ctx_backend(self.handle))
        self.device = int(device)

    def check(self, st: int) -> None:
        """Raises the exception for a non-zero status st, with this thread's message."""
        if st:
            raise_status(st, _lib.decode(self._lib.fp8kit_last_error(self.handle)))

    def last_error(self) -> str:
        """This thread's last error message of this context."""
        return _lib.decode(self._lib.fp8kit_last_error(self.handle))

    def describe(self) -> str:
        """The backend's description of this context (device, threads)."""
        return _lib.decode(self._lib.fp8kit_ctx_describe(self.handle))

    def set_threads(self, n: int) -> None:
        """CPU backend: n OpenMP threads (0 = OpenMP's default)."""
        self.check(self._lib.fp8kit_ctx_set_threads(self.handle, int(n)))

    def set_tuning(self, spec: Optional[str] = None) -> None:
        """fp8kit_ctx_set_tuning: force planner choices for this context's
        later calls. spec: "key=value" items separated by commas (keys:
        docs/tuning.md), e.g. "gemm_bn=128,gemm_cluster=1"; None or ""
        restores every default. Raises InvalidArgumentError on an unknown
        key or a value out of range (nothing changes)."""
        fn = getattr(self._lib, "fp8kit_ctx_set_tuning", None)
        if fn is None:
            raise UnsupportedError("this libfp8kit has no fp8kit_ctx_set_tuning (rebuild it)")
        self.check(fn(self.handle, None if spec is None else c_text(str(spec), "tuning spec")))

    @property
    def tuning(self) -> str:
        """The context's tuning overrides as a spec set_tuning accepts ("" when none)."""
        fn = getattr(self._lib, "fp8kit_ctx_get_tuning", None)
        if fn is None:
            raise UnsupportedError("this libfp8kit has no fp8kit_ctx_get_tuning (rebuild it)")
        buf = ctypes.create_string_buffer(4096)
        self.check(fn(self.handle, buf, len(buf)))
        return buf.value.decode()

    def set_autotune(self, mode: int, cache_file: Optional[Union[str, "os.PathLike[str]"]] = None) -> None:
        """fp8kit_ctx_set_autotune: mode 1 times every candidate GEMM
        configuration on the first call of each new shape (CUDA; that call
        synchronizes, so not during graph capture) and keeps the fastest,
        persisted in cache_file when given; mode 0 turns it off."""
        fn = getattr(self._lib, "fp8kit_ctx_set_autotune", None)
        if fn is None:
            raise UnsupportedError("this libfp8kit has no fp8kit_ctx_set_autotune (rebuild it)")
        path = None if cache_file is None else c_path(cache_file, "cache_file")
        self.check(fn(self.handle, int(mode), path))

    def plan_cache_size(self) -> int:
        """Number of GEMM plans this context has cached."""
        return int(self._lib.fp8kit_plan_cache_size(self.handle))

    def close(self) -> None:
        """Destroys the fp8kit_ctx (idempotent); cached plans then pass NULL, which C refuses."""
        h, self.handle = getattr(self, "handle", None), None
        if getattr(self, "handle_arg", None) is not None:
            self.handle_arg.value = None
        for words in getattr(self, "_calls", ()):
            words[0] = 0
        if h:
            self._lib.fp8kit_ctx_destroy(h)

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass

    def __repr__(self):
        return "<fp8kit.Context %s device %d: %s>" % (self.backend.name.lower(), self.device,
                                                      self.describe() if self.handle else "closed")


_cache: Dict[Tuple[int, int], Context] = {}
_cache_lock = threading.Lock()
# functions clear_contexts calls before destroying the contexts: caches that hold contexts
# (the scaled_mm plans of _gemm.py) drop them, so later calls make new ones on new contexts
_on_clear: List[Callable[[], None]] = []


def on_clear(fn: Callable[[], None]) -> None:
    """Has clear_contexts() call fn (a cache holding contexts drops them)."""
    _on_clear.append(fn)


def get_context(backend: DeviceLike = Backend.CPU, device: Optional[int] = None) -> Context:
    """The process-wide context for (backend, device), created on first use.
    Takes the forms Context does ('cpu', 'cuda:0', a torch.device, ...)."""
    if type(backend) is not Backend or device is None:
        backend, device = parse_device(backend, device)
    key = (int(backend), int(device))
    ctx = _cache.get(key)
    if ctx is not None:
        return ctx
    with _cache_lock:
        ctx = _cache.get(key)
        if ctx is None:
            ctx = Context(backend, device)
            _cache[key] = ctx
        return ctx


def clear_contexts() -> None:
    """Destroys every cached context (tests; process exit) and drops the
    cached scaled_mm plans, which hold contexts: the next call of any shape
    makes a new context and plan."""
    with _cache_lock:
        ctxs = list(_cache.values())
        _cache.clear()
    for fn in _on_clear:
        fn()
    for c in ctxs:
        c.close()


atexit.register(clear_contexts)
