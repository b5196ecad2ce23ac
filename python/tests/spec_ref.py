"""spec_ref.py - an independent numpy implementation of docs/spec.md sections 1-2
(fp8 decode/encode, the fp32-scale schemes, MX scales, scale layouts), written
from the spec text alone and used as the oracle of the binding's tests. It
shares no code with the C library: fp8 values come from decoding bit fields,
encoding is a nearest-even search in that table, and all fp32 arithmetic is
numpy float32 (IEEE, correctly rounded).
"""
import numpy as np

F32 = np.float32
FMT = {  # name: (exponent bits, mantissa bits, bias, max finite code, canonical NaN)
    "e4m3": (4, 3, 7, 0x7E, 0x7F),
    "e5m2": (5, 2, 15, 0x7B, 0x7E),
}
FMAX = {"e4m3": 448.0, "e5m2": 57344.0}
EMAX_ELEM = {"e4m3": 8, "e5m2": 15}


def decode_table(fmt):
    """float64 value of each of the 256 codes, from the bit fields (docs/spec.md 1)."""
    eb, mb, bias, _, _ = FMT[fmt]
    out = np.empty(256, dtype=np.float64)
    for code in range(256):
        s = -1.0 if code & 0x80 else 1.0
        e = (code >> mb) & ((1 << eb) - 1)
        m = code & ((1 << mb) - 1)
        if fmt == "e4m3" and e == 15 and m == 7:
            v = np.nan
        elif fmt == "e5m2" and e == 31:
            v = np.inf if m == 0 else np.nan
        elif e == 0:
            v = m * 2.0 ** (1 - bias - mb)
        else:
            v = (1 + m / 2.0 ** mb) * 2.0 ** (e - bias)
        out[code] = s * v
    return out


_TABLES = {f: decode_table(f) for f in FMT}


def decode(codes, fmt):
    return _TABLES[fmt][np.asarray(codes, dtype=np.uint8)]


def encode(x, fmt):
    """fp32 -> fp8 codes, satfinite round-to-nearest-even (docs/spec.md 1)."""
    with np.errstate(invalid="ignore"):
        x = np.asarray(x, dtype=F32).astype(np.float64)
    _, _, _, maxcode, nan = FMT[fmt]
    pos = _TABLES[fmt][: maxcode + 1]  # increasing magnitudes of codes 0..maxcode
    a = np.minimum(np.abs(x), pos[-1])  # +-Inf and overflow saturate
    hi = np.clip(np.searchsorted(pos, a, side="left"), 0, maxcode)
    lo = np.maximum(hi - 1, 0)
    exact = pos[hi] == a
    mid = (pos[lo] + pos[hi]) / 2  # exact in float64
    code = np.where(a < mid, lo, np.where(a > mid, hi, np.where(lo % 2 == 0, lo, hi)))
    code = np.where(exact, hi, code).astype(np.uint8)
    code = code | np.where(np.signbit(x), 0x80, 0).astype(np.uint8)
    return np.where(np.isnan(x), np.uint8(nan), code).astype(np.uint8)


def bf16_bits_to_f32(b):
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(F32)


def f32_to_bf16_bits(x):
    """fp32 -> bf16 bits, RNE, NaN kept NaN."""
    u = np.asarray(x, dtype=F32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nanq = ((u >> 16) | 0x40).astype(np.uint16)
    return np.where(np.isnan(np.asarray(x, dtype=F32)), nanq, r)


def _amax(g):
    """NaN-propagating max |x| of a float32 group."""
    g = np.asarray(g, dtype=F32)
    if np.isnan(g).any():
        return F32(np.nan)
    return F32(np.abs(g).max())


def pow2_ceil(s):
    m, e = np.frexp(F32(s))
    return F32(s) if m == 0.5 else F32(np.ldexp(F32(1.0), int(e)))


def fp32_group(g, fmt, pow2):
    """docs/spec.md 2.1 for one group: (S, codes)."""
    g = np.asarray(g, dtype=F32)
    amax = _amax(g)
    if amax == 0:
        return F32(1.0), encode(g, fmt)
    if not np.isfinite(amax):
        return F32(np.nan), np.full(g.shape, FMT[fmt][4], dtype=np.uint8)
    S = F32(amax / F32(FMAX[fmt]))
    if S == 0:
        S = F32(np.ldexp(F32(1.0), -149))
    if pow2:
        S = pow2_ceil(S)
    with np.errstate(over="ignore"):
        return S, encode(g / S, fmt)


def mx_scale(amax, fmt, rounding):
    amax = F32(amax)
    if rounding == "floor":
        if not np.isfinite(amax):
            return 255
        e = int(np.array(amax, dtype=F32).view(np.uint32)) >> 23 & 0xFF
        return int(np.clip(e - 127 - EMAX_ELEM[fmt], -127, 128)) + 127
    if np.isnan(amax):
        return 255
    inv = F32(F32(1.0) / F32(FMAX[fmt]))
    d = F32(amax * inv)
    u = int(np.array(d, dtype=F32).view(np.uint32))
    E, M = (u >> 23) & 0xFF, u & 0x7FFFFF
    if E == 255:
        return 255
    if E == 0:
        return int(M > 0x400000)
    return E + (M != 0)


def mx_recip(s):
    if s <= 253:
        return np.array((254 - s) << 23, dtype=np.uint32).view(F32)[()]
    if s == 254:
        return np.array(0x00400000, dtype=np.uint32).view(F32)[()]
    return F32(np.nan)


def mx_block(g, fmt, rounding):
    """docs/spec.md 2.2 for one block of 32: (scale byte, codes)."""
    g = np.asarray(g, dtype=F32)
    if not np.isfinite(g).all():
        return 255, np.full(g.shape, FMT[fmt][4], dtype=np.uint8)
    s = mx_scale(_amax(g), fmt, rounding)
    with np.errstate(over="ignore"):
        return s, encode(g * mx_recip(s), fmt)


def blocked_offset(r, c, Cp):
    """docs/spec.md 2.3 tensor-core 128x4 layout offset."""
    return ((r // 128) * (Cp // 4) + c // 4) * 512 + (r % 32) * 16 + ((r % 128) // 32) * 4 + c % 4


def _cdiv(a, b):
    return -(-a // b)


def quantize_2d(x, scheme, fmt="e4m3", pow2=False, rounding="floor"):
    """One (R, C) matrix: (codes (R, C), plain scales) for row/block/mx axis -1."""
    R, C = x.shape
    q = np.empty((R, C), dtype=np.uint8)
    if scheme == "row":
        S = np.empty((R, 1), dtype=F32)
        for r in range(R):
            S[r, 0], q[r] = fp32_group(x[r], fmt, pow2)
    elif scheme == "block1x128":
        S = np.empty((R, _cdiv(C, 128)), dtype=F32)
        for r in range(R):
            for b in range(S.shape[1]):
                S[r, b], q[r, b * 128:(b + 1) * 128] = fp32_group(x[r, b * 128:(b + 1) * 128], fmt, pow2)
    elif scheme == "block128x128":
        S = np.empty((_cdiv(R, 128), _cdiv(C, 128)), dtype=F32)
        for i in range(S.shape[0]):
            for j in range(S.shape[1]):
                t = x[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128]
                s, c = fp32_group(t.reshape(-1), fmt, pow2)
                S[i, j] = s
                q[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128] = c.reshape(t.shape)
    elif scheme == "mx":
        S = np.empty((R, C // 32), dtype=np.uint8)
        for r in range(R):
            for b in range(C // 32):
                S[r, b], q[r, b * 32:(b + 1) * 32] = mx_block(x[r, b * 32:(b + 1) * 32], fmt, rounding)
    else:
        raise ValueError(scheme)
    return q, S


def to_layout(S, scheme, layout):
    """Plain (rows, cols) scales of one matrix -> the stored layout."""
    if layout == "plain":
        return S
    rows, cols = S.shape
    if layout == "blocked":
        Rp, Cp = 128 * _cdiv(rows, 128), 4 * _cdiv(cols, 4)
        out = np.zeros(Rp * Cp, dtype=S.dtype)
        for r in range(rows):
            for c in range(cols):
                out[blocked_offset(r, c, Cp)] = S[r, c]
        return out.reshape(Rp, Cp)
    if layout == "mn_major":
        out = np.zeros((cols, 4 * _cdiv(rows, 4)), dtype=S.dtype)
        out[:, :rows] = S.T
        return out
    raise ValueError(layout)


def quantize(x, scheme, fmt="e4m3", axis=-1, pow2=False, rounding="floor", layout="plain"):
    """Reference of fp8kit.quantize for a float32 array of 1..4 dims."""
    x = np.asarray(x, dtype=F32)
    if scheme == "tensor":
        S, q = fp32_group(x.reshape(-1), fmt, pow2)
        return q.reshape(x.shape), np.asarray(S, dtype=F32).reshape(())
    lead = x.shape[:-2]
    mats = x.reshape((-1,) + x.shape[-2:])
    qs, ss = [], []
    for m in mats:
        if scheme == "mx" and axis == -2:
            m = np.ascontiguousarray(m.T)
        q, S = quantize_2d(m, scheme, fmt, pow2, rounding)
        qs.append(q)
        ss.append(to_layout(S, scheme, layout))
    q = np.stack(qs).reshape(lead + qs[0].shape)
    S = np.stack(ss).reshape(lead + ss[0].shape)
    return q, S


def dequant_scales_plain(S, scheme, shape, fmt):
    """Per-element multipliers (float32) for a plain-layout scale array of one
    (R, C) matrix of codes (mx: the codes' own row-major orientation)."""
    R, C = shape
    if scheme == "tensor":
        return np.full((R, C), F32(S), dtype=F32)
    if scheme == "row":
        return np.repeat(S.astype(F32), C, axis=1)
    if scheme == "block1x128":
        return np.repeat(S.astype(F32), 128, axis=1)[:, :C]
    if scheme == "block128x128":
        return np.repeat(np.repeat(S.astype(F32), 128, axis=0), 128, axis=1)[:R, :C]
    if scheme == "mx":
        mult = np.where(S == 255, np.nan, np.ldexp(F32(1.0), S.astype(np.int32) - 127)).astype(F32)
        return np.repeat(mult, 32, axis=1)
    raise ValueError(scheme)
