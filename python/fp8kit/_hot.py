"""_hot.py - the hot path grouped_mm and k_grouped_mm share: a call with plain torch tensors whose
types, dtypes, devices, shapes and strides (one torch guard checks them all) and options match an earlier
fully checked call reuses that call's argument struct, with only this call's pointers, scalars and
stream written into a copy of it. What stays per call: out= is writable and shares no byte with an
input (a byte-range test; a range that meets one sends the call to the full checks, which decide), and
a new output or workspace when the call allocates them. Entries hold contexts: clear_contexts() drops
them (a closed context passes NULL, which the library refuses)."""
import ctypes
from typing import Any, Dict

from ._context import on_clear
from ._hooks import on_torch


class _NoTorch:  # no tensor is of this type: the hot path stays off until torch is seen
    pass


TT: Any = _NoTorch  # torch.Tensor once fp8kit._torch is imported
_tm: Any = None
_MAX = 256  # entries per table; a full table starts over


def _use_torch(tm):
    global TT, _tm
    _tm = tm
    TT = tm.torch.Tensor  # last: the hot path turns on once the module is bound


on_torch(_use_torch)


class Entry:
    """What a fully checked call leaves: the guard over its tensors, its argument struct (pointers
    rewritten per call), descriptor, C function and context, the device index (None: CPU), D's allocator
    (None with out=), the workspace bytes it allocates per call, the byte extents of the inputs in the
    order of the call's pointers, and D's extent."""
    __slots__ = ("guard", "args", "desc", "fn", "cx", "index", "alloc", "wbytes", "ext", "nd", "extra")


class Table:
    """Entries by a call's key (shapes and options); cleared with the contexts."""

    def __init__(self):
        self.entries: Dict[Any, Entry] = {}
        on_clear(self.entries.clear)

    def get(self, key, tensors):
        """The entry of key when the guard passes for tensors (the call's non-None tensors, in the order
        its entry was made with), else None. An unhashable key is TypeError."""
        h = self.entries.get(key)
        return h if h is not None and h.guard(*tensors) else None

    def put(self, key, tensors, args, desc, fn, cx, dev, out_shape, ddt, ext, nd, wbytes=0, extra=None):
        """Keeps an entry for a call that passed every check, when its tensors are all plain torch tensors
        and torch has a usable guard. out_shape: D's shape when the call allocates it, else None. extra:
        what the caller's hot call needs besides (see allocator)."""
        if any(type(t) is not TT for t in tensors) or _tm.make_guard is None:
            return
        guard = _tm.make_guard(tensors)
        if guard is None:
            return
        h = Entry()
        h.guard, h.args, h.desc, h.fn, h.cx = guard, type(args).from_buffer_copy(args), desc, fn, cx
        h.index = dev[1] if dev[0] == "cuda" else None
        h.alloc = _tm.allocator(out_shape, ddt, h.index) if out_shape is not None else None
        h.wbytes, h.ext, h.nd, h.extra = wbytes, tuple(ext), nd, extra
        if len(self.entries) >= _MAX:
            self.entries.clear()
        self.entries[key] = h


def allocator(shape, dt, dev):
    """A function () -> (new torch tensor, its pointer) of `shape` and fp8kit dtype dt on dev ((kind, index)),
    for outputs a hot call allocates besides D."""
    return _tm.allocator(shape, dt, dev[1] if dev[0] == "cuda" else None)


def prepare(h, out, a, b, offs, scale_a, scale_b, *more):
    """(D, a filled copy of h.args, the input pointers) for a call through h: the pointers of a, b, the
    scales, the offsets (fields a, b, scale_a, scale_b, offsets of both grouped GEMMs' argument structs) and
    D set; `more` inputs (None where absent) only in the pointers, after those, for the caller to set.
    (None, None, None) when the full checks must decide about out= (see output)."""
    ptrs = tuple(0 if t is None else t.data_ptr() for t in (a, b, scale_a, scale_b, offs) + more)
    d, pd = output(h, out, ptrs)
    if d is None:
        return None, None, None
    args = type(h.args).from_buffer_copy(h.args)
    args.a.data, args.b.data, args.d.data, args.offsets = ptrs[0], ptrs[1], pd, ptrs[4]
    if scale_a is not None:
        args.scale_a.data = ptrs[2]
    if scale_b is not None:
        args.scale_b.data = ptrs[3]
    return d, args, ptrs


def output(h, out, ptrs):
    """(D, its pointer) for a call through h: out= when it is writable and no input's bytes (ptrs, in the
    order of h.ext; 0 for an absent one) meet its own; a new D without out=; (None, 0) when the full
    checks must decide."""
    if out is None:
        return h.alloc()
    if _tm.readonly_reason(out) is not None:
        return None, 0
    pd, nd = out.data_ptr(), h.nd
    for p, e in zip(ptrs, h.ext):
        if p and p < pd + nd and pd < p + e:
            return None, 0
    return out, pd


def run(h, args, device):
    """The C call of h with args (a filled copy of h.args) on torch's current stream of h's device; a
    workspace of h.wbytes bytes when h has one (args.workspace / workspace_bytes)."""
    ws = None
    if h.wbytes:
        ws = _tm.torch.empty((h.wbytes,), dtype=_tm.torch.uint8, device=device)
        args.workspace, args.workspace_bytes = ws.data_ptr(), h.wbytes
    st = h.fn(h.cx.handle, ctypes.byref(h.desc), ctypes.byref(args),
              _tm.current_stream(h.index) if h.index is not None else None)
    h.cx.check(st)
    del ws
