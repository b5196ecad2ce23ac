"""Independent numpy reference for the consumer tests.

decode_e4m3 / decode_e8m0 turn raw bytes into float32 from the bit layouts
alone (no torch), so the tests can compute decode(q) * scale for a converted
checkpoint without trusting either the converter or the loader.

The quantizers (used by mock_convert.py) follow docs/spec.md sections 2.1/2.2:
fp32 scale = amax / 448 per group (1.0 for an all-zero group, rounded up to a
power of two with pow2), elements x / scale encoded to e4m3 (round to nearest
even, saturating at 448) by torch's float8_e4m3fn cast; mx: one e8m0 byte per
32 elements, OCP floor rule (or rceil).
"""

from __future__ import annotations

import math

import numpy as np

FP8_MAX = 448.0


def _e4m3_table() -> np.ndarray:
    t = np.zeros(256, dtype=np.float32)
    for b in range(256):
        s = -1.0 if b & 0x80 else 1.0
        e = (b >> 3) & 0xF
        m = b & 0x7
        if e == 0xF and m == 0x7:
            t[b] = np.nan
        elif e == 0:
            t[b] = s * (m / 8.0) * 2.0**-6
        else:
            t[b] = s * (1.0 + m / 8.0) * 2.0 ** (e - 7)
    return t


E4M3_TABLE = _e4m3_table()


def decode_e4m3(raw: np.ndarray) -> np.ndarray:
    """uint8 codes -> float32 values (OCP e4m3fn)."""
    return E4M3_TABLE[np.asarray(raw, dtype=np.uint8)]


def decode_e8m0(raw: np.ndarray) -> np.ndarray:
    """uint8 e8m0 bytes -> float32 2^(b-127); 255 is NaN."""
    b = np.asarray(raw, dtype=np.uint8).astype(np.int32)
    out = np.ldexp(np.float64(1.0), b - 127).astype(np.float32)
    out[b == 255] = np.nan
    return out


def encode_e4m3(x: np.ndarray) -> np.ndarray:
    """float32 -> uint8 e4m3fn codes (saturating at +-448, NaN kept)."""
    import torch

    t = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
    t = torch.where(torch.isnan(t), t, t.clamp(-FP8_MAX, FP8_MAX))
    return t.to(torch.float8_e4m3fn).view(torch.uint8).numpy()


def _pow2_ceil(s: np.ndarray) -> np.ndarray:
    m, e = np.frexp(s.astype(np.float64))
    # s = m * 2^e with m in [0.5, 1): power of two iff m == 0.5
    p = np.where(m == 0.5, np.ldexp(1.0, e - 1), np.ldexp(1.0, e))
    return p.astype(np.float32)


def _fp32_scale(amax: np.ndarray, pow2: bool) -> np.ndarray:
    amax = amax.astype(np.float32)
    s = (amax / np.float32(FP8_MAX)).astype(np.float32)
    s = np.where(s == 0, np.float32(2.0**-149), s)
    if pow2:
        s = _pow2_ceil(s)
    s = np.where(amax == 0, np.float32(1.0), s)
    return s.astype(np.float32)


def quantize_tensor(w: np.ndarray, pow2: bool = False):
    s = _fp32_scale(np.array(np.abs(w).max() if w.size else 0.0), pow2)
    return encode_e4m3(w / s), np.float32(s)


def quantize_row(w: np.ndarray, pow2: bool = False):
    s = _fp32_scale(np.abs(w).max(axis=1, keepdims=True), pow2)  # [N, 1]
    return encode_e4m3(w / s), s


def block_expand(s: np.ndarray, n: int, k: int, bn: int = 128, bk: int = 128) -> np.ndarray:
    return np.repeat(np.repeat(s, bn, axis=0), bk, axis=1)[:n, :k]


def quantize_block(w: np.ndarray, pow2: bool = False, bs: int = 128):
    n, k = w.shape
    gn, gk = math.ceil(n / bs), math.ceil(k / bs)
    pad = np.zeros((gn * bs, gk * bs), dtype=np.float32)
    pad[:n, :k] = np.abs(w)
    amax = pad.reshape(gn, bs, gk, bs).max(axis=(1, 3))
    s = _fp32_scale(amax, pow2)
    return encode_e4m3(w / block_expand(s, n, k, bs, bs)), s


def quantize_mx(w: np.ndarray, rounding: str = "floor"):
    """-> (codes uint8 [N,K], e8m0 bytes uint8 [N, K/32])."""
    n, k = w.shape
    assert k % 32 == 0
    amax = np.abs(w.astype(np.float32)).reshape(n, k // 32, 32).max(axis=2)
    if rounding == "floor":
        ebits = (amax.view(np.uint32) >> 23) & 0xFF
        s = np.clip(ebits.astype(np.int32) - 127 - 8, -127, 128) + 127
    else:  # rceil
        d = (amax * np.float32(1.0 / FP8_MAX)).astype(np.float32)
        bits = d.view(np.uint32)
        E = ((bits >> 23) & 0xFF).astype(np.int32)
        M = (bits & 0x7FFFFF).astype(np.int32)
        s = np.where(E == 0, (M > 0x400000).astype(np.int32), E + (M != 0))
        s = np.where(E == 255, 255, s)
    s = np.where(np.isnan(amax) | np.isinf(amax), 255, s).astype(np.uint8)
    scale = decode_e8m0(s)
    q = encode_e4m3(w / np.repeat(scale, 32, axis=1))
    return q, s


def rel_fro(a, b) -> float:
    """||a - b||_F / ||b||_F in float64."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))
