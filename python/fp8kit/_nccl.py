"""_nccl.py - NCCL for fp8kit.distributed, through ctypes on the same
libnccl.so.2 that libfp8kit's expert-parallel layer loads with
dlopen("libnccl.so.2") (include/fp8kit_ep.h): the functions that make and
destroy a communicator, and EPGroup, fp8kit's own NCCL communicator over a
torch.distributed process group.

torch.distributed does not expose the ncclComm_t of its NCCL process group
portably, so EPGroup makes its own: rank 0 of the group calls
ncclGetUniqueId, the 128-byte id goes to every rank through
torch.distributed.broadcast_object_list (any backend: gloo, nccl or both),
and every rank calls ncclCommInitRank on its CUDA device. EPGroup owns the
communicator and destroys it (ncclCommDestroy) in close().

Which NCCL: the dynamic loader returns an object already loaded under the
soname libnccl.so.2 to every later dlopen of that name, so the library that
torch loaded (the nvidia-nccl-* wheel next to it, through libtorch_cuda.so's
RPATH) is the one ctypes gets here and the one libfp8kit gets in
fp8kit_ep_create: one NCCL in the process. Where nothing has loaded
libnccl.so.2 yet and the loader's search path has none, the nvidia-nccl-*
wheel's copy is loaded by path (its soname then answers libfp8kit's dlopen).
Nothing here imports torch at import time.
"""
import ctypes
import os
import threading
import weakref
from typing import Any, List, Optional

from .errors import DeviceError, InternalError, InvalidArgumentError, UnsupportedError

NCCL_SONAME = "libnccl.so.2"
UNIQUE_ID_BYTES = 128  # NCCL_UNIQUE_ID_BYTES of nccl.h


class NcclUniqueId(ctypes.Structure):
    """ncclUniqueId: `char internal[NCCL_UNIQUE_ID_BYTES]` (passed by value to ncclCommInitRank)."""
    _fields_ = [("internal", ctypes.c_char * UNIQUE_ID_BYTES)]


_nccl = None
_nccl_path = None
_nccl_lock = threading.Lock()


def _wheel_path():
    """libnccl.so.2 of an installed nvidia-nccl-* wheel (the one torch's wheels use), or None."""
    try:
        import nvidia.nccl  # type: ignore[import-not-found]  # a namespace package of the wheel
    except ImportError:
        return None
    for d in getattr(nvidia.nccl, "__path__", ()):
        p = os.path.join(d, "lib", NCCL_SONAME)
        if os.path.isfile(p):
            return p
    return None


def _declare(lib):
    c = ctypes
    vp, ip = c.c_void_p, c.POINTER(c.c_int)
    sigs = {
        "ncclGetVersion": (c.c_int, [ip]),
        "ncclGetUniqueId": (c.c_int, [c.POINTER(NcclUniqueId)]),
        "ncclCommInitRank": (c.c_int, [c.POINTER(vp), c.c_int, NcclUniqueId, c.c_int]),
        "ncclCommDestroy": (c.c_int, [vp]),
        "ncclCommCount": (c.c_int, [vp, ip]),
        "ncclCommUserRank": (c.c_int, [vp, ip]),
        "ncclCommCuDevice": (c.c_int, [vp, ip]),
        "ncclGetErrorString": (c.c_char_p, [c.c_int]),
        "ncclGetLastError": (c.c_char_p, [vp]),  # NCCL 2.13 and newer
    }
    for name, (res, args) in sigs.items():
        if name == "ncclGetLastError" and not hasattr(lib, name):
            continue
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args


def nccl_library() -> Any:
    """The ctypes library of libnccl.so.2 (loaded once): the one the process
    already has under that soname (torch's), else the dynamic loader's, else
    the nvidia-nccl-* wheel's. Raises UnsupportedError when none loads or one
    lacks a function EPGroup calls."""
    global _nccl, _nccl_path
    if _nccl is not None:
        return _nccl
    with _nccl_lock:
        if _nccl is not None:
            return _nccl
        errors = []
        for path in (NCCL_SONAME, _wheel_path()):
            if path is None:
                continue
            try:
                lib = ctypes.CDLL(path)
                _declare(lib)
            except (OSError, AttributeError) as e:
                errors.append("%s: %s" % (path, e))
                continue
            _nccl, _nccl_path = lib, path
            return lib
        raise UnsupportedError("fp8kit.distributed: NCCL (%s) could not be loaded; the expert-parallel layer needs "
                               "it (install torch with CUDA, or the nvidia-nccl-cu12 / -cu13 wheel). Tried: %s"
                               % (NCCL_SONAME, "; ".join(errors) or "nothing"))


def nccl_version() -> int:
    """ncclGetVersion's code of the loaded NCCL (e.g. 22809 for 2.28.9)."""
    lib = nccl_library()
    v = ctypes.c_int(0)
    r = lib.ncclGetVersion(ctypes.byref(v))
    if r:
        raise nccl_error(lib, r, None, "ncclGetVersion")
    return int(v.value)


def nccl_error(lib: Any, result: int, comm: Optional[int], what: str) -> DeviceError:
    """The DeviceError for NCCL result `result` of call `what` (ncclGetErrorString, and ncclGetLastError's text
    where NCCL has it)."""
    text = lib.ncclGetErrorString(int(result))
    msg = "fp8kit.distributed: %s failed: %s" % (what, text.decode("utf-8", "replace") if text else "error %d"
                                                 % result)
    last = getattr(lib, "ncclGetLastError", None)
    if last is not None:
        extra = last(comm)
        if extra:
            msg += ": " + extra.decode("utf-8", "replace")
    return DeviceError(msg)


def _torch():
    import torch
    return torch


def cuda_index(device: Any, what: str) -> int:
    """The CUDA device index of `device`: None (torch's current device), an int, 'cuda' / 'cuda:N' or a
    torch.device of type cuda."""
    torch = _torch()
    if device is None:
        return int(torch.cuda.current_device())
    if isinstance(device, int) and not isinstance(device, bool):
        return int(device)
    try:
        d = torch.device(device)
    except (TypeError, RuntimeError, ValueError):
        raise InvalidArgumentError("%s: device %r is not a CUDA device (an int, 'cuda:N' or a torch.device)"
                                   % (what, device)) from None
    if d.type != "cuda":
        raise UnsupportedError("%s: device %s is not a CUDA device; the expert-parallel layer runs on CUDA"
                               % (what, d))
    return int(d.index) if d.index is not None else int(torch.cuda.current_device())


def broadcast_unique_id(group: Any, rank: int, make: Any) -> bytes:
    """The 128 bytes of an ncclUniqueId made on rank 0 of `group` by make() (-> bytes), broadcast to every rank
    with torch.distributed.broadcast_object_list (collective). A failure on rank 0 travels to the other ranks,
    which raise it too instead of waiting in ncclCommInitRank."""
    dist = _torch().distributed
    payload: List[Any] = [None]
    err = None
    if rank == 0:
        try:
            payload[0] = ("id", bytes(make()))
        except Exception as e:  # noqa: BLE001 - every rank must learn it
            err = e
            payload[0] = ("error", "%s: %s" % (type(e).__name__, e))
    src = 0 if group is None else dist.get_global_rank(group, 0)
    dist.broadcast_object_list(payload, src=src, group=group)
    if err is not None:
        raise err
    kind, value = payload[0]
    if kind == "error":
        raise DeviceError("fp8kit.distributed: rank 0 of the group could not make the NCCL unique id (%s)" % value)
    if not isinstance(value, bytes) or len(value) != UNIQUE_ID_BYTES:
        raise InternalError("fp8kit.distributed: the broadcast NCCL unique id is not %d bytes" % UNIQUE_ID_BYTES)
    return value


def new_unique_id() -> bytes:
    """ncclGetUniqueId's 128 bytes (this process then listens for the ranks of the communicator, as NCCL's
    bootstrap root)."""
    lib = nccl_library()
    uid = NcclUniqueId()
    r = lib.ncclGetUniqueId(ctypes.byref(uid))
    if r:
        raise nccl_error(lib, r, None, "ncclGetUniqueId")
    return ctypes.string_at(ctypes.addressof(uid), UNIQUE_ID_BYTES)


class EPGroup:
    """fp8kit's own NCCL communicator over a torch.distributed process group, for the expert-parallel layer
    (ExpertParallel, MoE). Collective: every rank of `group` makes one, in the same order. Rank 0 makes an
    NCCL unique id, torch.distributed.broadcast_object_list sends it to every rank, and every rank calls
    ncclCommInitRank on its CUDA device. close() (or the end of a `with` block, or garbage collection) closes
    the expert-parallel layers made on it, then destroys the communicator (ncclCommDestroy).

    Arguments:
      group: a torch.distributed process group (None: the default, WORLD); torch.distributed must be
        initialized (any backend: the id travels through broadcast_object_list).
      device: this rank's CUDA device: an int, 'cuda:N' or a torch.device (None: torch's current device,
        which torchrun users set with torch.cuda.set_device(local_rank) first).

    Attributes: rank, world (the group's rank and size), device (the CUDA index), comm (the ncclComm_t as
    an int; 0 once closed), nccl_version. Keep NVLink multicast off where the machine says so
    (NCCL_NVLS_ENABLE=0 in the environment before the first communicator)."""

    def __init__(self, group: Any = None, device: Any = None) -> None:
        self.comm = 0
        self._owned = False
        self._layers: "weakref.WeakSet[Any]" = weakref.WeakSet()
        torch = _torch()
        dist = torch.distributed
        if not dist.is_available() or not dist.is_initialized():
            raise InvalidArgumentError("EPGroup: torch.distributed is not initialized (call "
                                       "torch.distributed.init_process_group first, e.g. under torchrun)")
        rank, world = dist.get_rank(group), dist.get_world_size(group)
        if rank < 0:
            raise InvalidArgumentError("EPGroup: this process is not a member of the process group")
        if not torch.cuda.is_available():
            raise UnsupportedError("EPGroup: no CUDA device is visible to torch; the expert-parallel layer "
                                   "runs on CUDA with NCCL")
        dev = cuda_index(device, "EPGroup")
        lib = nccl_library()
        uid = NcclUniqueId()
        with torch.cuda.device(dev):  # broadcast_object_list of the NCCL backend uses the current device
            ctypes.memmove(ctypes.addressof(uid), broadcast_unique_id(group, rank, new_unique_id), UNIQUE_ID_BYTES)
            comm = ctypes.c_void_p()
            r = lib.ncclCommInitRank(ctypes.byref(comm), int(world), uid, int(rank))
        if r:
            raise nccl_error(lib, r, None, "ncclCommInitRank (rank %d of %d, cuda:%d)" % (rank, world, dev))
        self._lib = lib
        self.comm = int(comm.value)
        self._owned = True
        self.rank, self.world, self.device = int(rank), int(world), dev
        self.nccl_version = nccl_version()

    @classmethod
    def from_comm(cls, comm: int, device: Any = None) -> "EPGroup":
        """An EPGroup over an ncclComm_t the caller made (an int address) with the same libnccl.so.2 (e.g.
        through nccl4py or CuPy); close() does not destroy it (the caller keeps owning it).

        Arguments:
          comm: the ncclComm_t, as an int (not 0).
          device: its CUDA device (None: the communicator's own, ncclCommCuDevice)."""
        if not isinstance(comm, int) or isinstance(comm, bool) or comm == 0:
            raise InvalidArgumentError("EPGroup.from_comm: comm must be a non-NULL ncclComm_t address (an int)")
        lib = nccl_library()
        self = cls.__new__(cls)
        self.comm, self._owned, self._layers, self._lib = 0, False, weakref.WeakSet(), lib
        vals = []
        for name in ("ncclCommUserRank", "ncclCommCount", "ncclCommCuDevice"):
            v = ctypes.c_int(0)
            r = getattr(lib, name)(ctypes.c_void_p(comm), ctypes.byref(v))
            if r:
                raise nccl_error(lib, r, comm, name)
            vals.append(int(v.value))
        self.rank, self.world = vals[0], vals[1]
        self.device = vals[2] if device is None else cuda_index(device, "EPGroup.from_comm")
        if self.device != vals[2]:
            raise InvalidArgumentError("EPGroup.from_comm: the communicator is on cuda:%d, not cuda:%d"
                                       % (vals[2], self.device))
        self.comm = comm
        self.nccl_version = nccl_version()
        return self

    def register(self, layer: Any) -> None:
        """Has close() close `layer` (an object with close()) before the communicator goes: the expert-parallel
        layers made on this group call it."""
        if not self.comm:
            raise InvalidArgumentError("EPGroup is closed")
        self._layers.add(layer)

    @property
    def closed(self) -> bool:
        """True once close() ran."""
        return not self.comm

    def close(self) -> None:
        """Closes every expert-parallel layer made on this group (their buffers are freed: tensors that alias
        them must not be used afterwards), waits for the device, and destroys the communicator when this
        EPGroup made it. Idempotent."""
        comm, self.comm = self.comm, 0
        for layer in list(getattr(self, "_layers", ())):
            try:
                layer.close()
            except Exception:  # noqa: BLE001 - the communicator must go anyway
                pass
        if comm and self._owned:
            try:  # work in flight on the communicator (a torch stream) ends before NCCL frees it
                import sys
                torch = sys.modules.get("torch")
                if torch is not None and torch.cuda.is_initialized():
                    torch.cuda.synchronize(self.device)
            except Exception:  # noqa: BLE001 - interpreter shutdown
                pass
            self._lib.ncclCommDestroy(ctypes.c_void_p(comm))

    def __enter__(self) -> "EPGroup":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def __repr__(self):
        return "<fp8kit.distributed.EPGroup rank %d of %d on cuda:%d%s>" % (
            getattr(self, "rank", -1), getattr(self, "world", 0), getattr(self, "device", -1),
            "" if self.comm else ", closed")
