"""_cstr.py - Python text and paths as the NUL-terminated strings the C
library reads. C stops at the first NUL byte, so a value holding one would
reach the library cut short ("out\\0evil" read as "out"); every string the
binding passes to C goes through here and such a value is refused with
InvalidArgumentError before any call.
"""
import os

from .errors import InvalidArgumentError


def _whole(raw, what, value):
    at = raw.find(b"\0")
    if at >= 0:
        raise InvalidArgumentError("%s %r holds a NUL character (at byte %d); the C library would read it cut "
                                   "short there" % (what, value, at))
    return raw


def c_text(value, what):
    """The UTF-8 bytes of the str `value` for a const char * argument; `what`
    names the argument in messages."""
    if not isinstance(value, str):
        raise InvalidArgumentError("%s must be a str, not %s" % (what, type(value).__name__))
    try:
        raw = value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidArgumentError("%s %r is not valid text (%s)" % (what, value, e.reason)) from None
    return _whole(raw, what, value)


def c_path(path, what):
    """The bytes of a file system path (str, bytes or os.PathLike), encoded as
    os.fsencode does, for a const char * argument."""
    try:
        p = os.fspath(path)
        raw = os.fsencode(p)
    except TypeError:
        raise InvalidArgumentError("%s must be a str, bytes or os.PathLike path, not %s"
                                   % (what, type(path).__name__)) from None
    except UnicodeEncodeError as e:
        raise InvalidArgumentError("%s %r cannot be encoded as a file name (%s)" % (what, path, e.reason)) from None
    return _whole(raw, what, p)
