"""CRC-32C (Castagnoli), as TFRecord framing uses it, with TensorFlow's mask.

Pure Python (the container may lack a CRC-32C package). The 8-byte length header is always
checked; checking every payload is optional because it costs far more than reading it.
"""

from __future__ import annotations

_POLY = 0x82F63B78
_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ _POLY if _c & 1 else _c >> 1
    _TABLE.append(_c)
_TABLE = tuple(_TABLE)

try:  # a fast implementation where one exists (the operator's machine has it; the container may not)
    from crc32c import crc32c as _fast  # type: ignore
except Exception:  # pragma: no cover - depends on the environment
    _fast = None


# Slicing-by-8 tables: eight bytes per step, which makes the 8-byte TFRecord header check cheap.
_T = [list(_TABLE)]
for _k in range(1, 8):
    _prev = _T[-1]
    _T.append([(_prev[i] >> 8) ^ _TABLE[_prev[i] & 0xFF] for i in range(256)])
_T0, _T1, _T2, _T3, _T4, _T5, _T6, _T7 = (tuple(t) for t in _T)


def crc_tables() -> tuple[tuple[int, ...], ...]:
    return _T0, _T1, _T2, _T3, _T4, _T5, _T6, _T7


def masked_crc32c_u64(data: bytes) -> int:
    """masked_crc32c of exactly 8 bytes (pass exactly 8) (a TFRecord length) in one slicing-by-8 step."""
    value = int.from_bytes(data, "little")
    crc = (value & 0xFFFFFFFF) ^ 0xFFFFFFFF
    hi = value >> 32
    crc = (_T7[crc & 0xFF] ^ _T6[(crc >> 8) & 0xFF] ^ _T5[(crc >> 16) & 0xFF] ^ _T4[crc >> 24]
           ^ _T3[hi & 0xFF] ^ _T2[(hi >> 8) & 0xFF] ^ _T1[(hi >> 16) & 0xFF] ^ _T0[hi >> 24]) ^ 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _update(crc: int, data) -> int:
    """The CRC register after ``data`` (no initial value or final xor applied)."""
    table = _TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc


# Past this size, numpy computes many chunks' CRCs at once and joins them (a DLIO sample is megabytes).
_CHUNKED_FROM = 1 << 16
_CHUNKS = 4096
_SHIFT_TABLES: dict[int, tuple] = {}


def _shift_tables(length: int):
    """Byte tables of the linear map "the register after ``length`` zero bytes" (CRC is linear over GF(2)):
    register(s, A || B) = shift_len(B)(register(s, A)) xor register(0, B)."""
    if length not in _SHIFT_TABLES:
        if len(_SHIFT_TABLES) >= 256:   # records of many sizes: keep the cache bounded
            _SHIFT_TABLES.clear()
        basis = [_update(1 << bit, bytes(length)) for bit in range(32)]
        tables = []
        for k in range(4):
            table = []
            for value in range(256):
                out = 0
                for bit in range(8):
                    if value >> bit & 1:
                        out ^= basis[8 * k + bit]
                table.append(out)
            tables.append(tuple(table))
        _SHIFT_TABLES[length] = tuple(tables)
    return _SHIFT_TABLES[length]


def _crc32c_chunked(data) -> int:
    import numpy as np
    length = len(data) // _CHUNKS
    head = np.frombuffer(data, dtype=np.uint8, count=length * _CHUNKS).reshape(_CHUNKS, length)
    table = np.asarray(_TABLE, dtype=np.uint32)
    registers = np.zeros(_CHUNKS, dtype=np.uint32)
    for column in range(length):   # every chunk's register, one byte position at a time
        registers = table[(registers ^ head[:, column]) & 0xFF] ^ (registers >> 8)
    t0, t1, t2, t3 = _shift_tables(length)
    crc = 0xFFFFFFFF
    for chunk in registers.tolist():
        crc = t0[crc & 0xFF] ^ t1[(crc >> 8) & 0xFF] ^ t2[(crc >> 16) & 0xFF] ^ t3[crc >> 24] ^ chunk
    return _update(crc, memoryview(data)[length * _CHUNKS:])


def crc32c(data: bytes) -> int:
    if _fast is not None:
        return _fast(data)
    if len(data) >= _CHUNKED_FROM:
        try:
            return _crc32c_chunked(data) ^ 0xFFFFFFFF
        except ImportError:   # pragma: no cover - numpy is in the training image and the lab's environment
            pass
    return _update(0xFFFFFFFF, data) ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF
