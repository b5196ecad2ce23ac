"""errors.py - Python exceptions for fp8kit status codes.

Every failing C call raises the subclass of FP8KitError that matches its
status, carrying the status (an IntEnum), its C name ("FP8KIT_ERR_INVALID_SHAPE")
and the library's message (fp8kit_last_error). Checks done in Python before any
call raise the same classes, so callers catch one family. Each class also
derives from the closest builtin (ValueError, TypeError, MemoryError, ...).
"""
from ._lib import Status


class FP8KitError(Exception):
    """Base of all fp8kit errors. Attributes: status, status_name, message."""

    status = Status.ERR_INTERNAL

    def __init__(self, message, status=None):
        if status is not None:
            self.status = Status(status)
        self.status_name = "FP8KIT_" + self.status.name
        self.message = message
        super().__init__("%s: %s" % (self.status_name, message))


class NullPointerError(FP8KitError, ValueError):
    status = Status.ERR_NULL_POINTER


class InvalidArgumentError(FP8KitError, ValueError):
    status = Status.ERR_INVALID_ARGUMENT


class InvalidShapeError(FP8KitError, ValueError):
    status = Status.ERR_INVALID_SHAPE


class SizeOverflowError(FP8KitError, OverflowError):
    status = Status.ERR_SIZE_OVERFLOW


class InvalidStrideError(FP8KitError, ValueError):
    status = Status.ERR_INVALID_STRIDE


class MisalignedError(FP8KitError, ValueError):
    status = Status.ERR_MISALIGNED


class UnsupportedError(FP8KitError, TypeError):
    """A dtype / scheme / device / option combination that is not supported."""
    status = Status.ERR_UNSUPPORTED


class BackendUnavailableError(FP8KitError, RuntimeError):
    status = Status.ERR_BACKEND_UNAVAILABLE


class ArchMismatchError(FP8KitError, RuntimeError):
    status = Status.ERR_ARCH_MISMATCH


class DeviceError(FP8KitError, RuntimeError):
    status = Status.ERR_DEVICE


class OutOfMemoryError(FP8KitError, MemoryError):
    status = Status.ERR_OUT_OF_MEMORY


class WorkspaceTooSmallError(FP8KitError, ValueError):
    status = Status.ERR_WORKSPACE_TOO_SMALL


class IOFailedError(FP8KitError, OSError):
    status = Status.ERR_IO


class CorruptFileError(FP8KitError, ValueError):
    status = Status.ERR_CORRUPT_FILE


class InternalError(FP8KitError, RuntimeError):
    status = Status.ERR_INTERNAL


_BY_STATUS = {cls.status: cls for cls in (
    NullPointerError, InvalidArgumentError, InvalidShapeError, SizeOverflowError,
    InvalidStrideError, MisalignedError, UnsupportedError, BackendUnavailableError,
    ArchMismatchError, DeviceError, OutOfMemoryError, WorkspaceTooSmallError,
    IOFailedError, CorruptFileError, InternalError)}


def error_class(status):
    """The exception class raised for a status value."""
    try:
        return _BY_STATUS[Status(status)]
    except ValueError:
        return InternalError


def raise_status(status, message):
    """Raises the exception of `status` (an int from C) with `message`."""
    try:
        st = Status(status)
    except ValueError:
        raise InternalError("unknown status %d: %s" % (status, message)) from None
    raise error_class(st)(message)
