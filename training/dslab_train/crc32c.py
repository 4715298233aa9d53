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


def crc32c(data: bytes) -> int:
    if _fast is not None:
        return _fast(data)
    crc = 0xFFFFFFFF
    table = _TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF
