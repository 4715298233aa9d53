"""Record formats: TFRecord framing, tf.train.Example payloads, and MXNet RecordIO (Pipe wrapper).

TFRecord record: uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data).
The payload is a tf.train.Example protobuf with ``image/encoded`` (bytes) and
``image/class/label`` (int64), encoded and decoded here without protobuf or TensorFlow.
RecordIO record: uint32 magic 0xced7230a | uint32 (cflag << 29 | length) | data | pad to 4 bytes.
"""

from __future__ import annotations

import struct
from typing import BinaryIO, Iterator

from .crc32c import crc_tables, masked_crc32c, masked_crc32c_u64

RECORDIO_MAGIC = 0xCED7230A
_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")


class RecordError(ValueError):
    """A record that cannot be read, with where it is."""

    def __init__(self, source: str, offset: int, problem: str):
        self.source, self.offset, self.problem = source, offset, problem
        super().__init__(f"{source} at byte offset {offset}: {problem}")


# ---- TFRecord --------------------------------------------------------------------------------

def tfrecord_frame(data: bytes) -> bytes:
    length = _U64.pack(len(data))
    return length + _U32.pack(masked_crc32c(length)) + data + _U32.pack(masked_crc32c(data))


def read_tfrecords(stream: BinaryIO, source: str, verify_data: bool = False,
                   offset: int = 0, chunk_size: int = 4 * 1024 * 1024) -> Iterator[tuple[int, memoryview]]:
    """Yield (offset, payload) for each record; raise RecordError naming the source and offset.

    Reads large chunks and yields zero-copy views into them (the chunks are immutable bytes, so a
    view stays valid; it keeps its chunk alive). Every length header is CRC-checked; payload CRCs
    only with ``verify_data`` (pure-Python CRC-32C of every byte costs far more than reading it).
    """
    read = stream.read
    buf = memoryview(b"")
    pos = 0
    unpack_u64, unpack_u32 = _U64.unpack_from, _U32.unpack_from

    def spill(n: int) -> memoryview | None:
        """n bytes that run past the current chunk: only these are copied, never the chunk."""
        nonlocal buf, pos
        parts, got = [bytes(buf[pos:])], len(buf) - pos
        while got < n:
            more = read(max(chunk_size, n - got))
            if not more:
                buf, pos = memoryview(b""), 0
                return None if got == 0 else memoryview(b"".join(parts))
            need = n - got
            if len(more) > need:
                parts.append(more[:need])
                buf, pos = memoryview(more), need
                got = n
            else:
                parts.append(more)
                got += len(more)
                buf, pos = memoryview(b""), 0
        return memoryview(b"".join(parts))

    header3 = struct.Struct("<III").unpack_from
    t0, t1, t2, t3, t4, t5, t6, t7 = crc_tables()
    while True:
        avail = len(buf) - pos
        if avail >= 12:
            # Fast path, all inside the current chunk: the header CRC is computed inline
            # (slicing-by-8) because it runs once per record.
            lo, hi, header_crc = header3(buf, pos)
            length = lo | (hi << 32)
            if avail >= length + 16:
                crc = lo ^ 0xFFFFFFFF
                crc = (t7[crc & 0xFF] ^ t6[(crc >> 8) & 0xFF] ^ t5[(crc >> 16) & 0xFF] ^ t4[crc >> 24]
                       ^ t3[hi & 0xFF] ^ t2[(hi >> 8) & 0xFF] ^ t1[(hi >> 16) & 0xFF] ^ t0[hi >> 24]) ^ 0xFFFFFFFF
                if ((((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF) != header_crc:
                    raise RecordError(source, offset, "corrupted record length (CRC mismatch): not TFRecord data, or damaged")
                start = pos + 12
                pos = start + length + 4
                data = buf[start:start + length]
                if verify_data and masked_crc32c(bytes(data)) != unpack_u32(buf, pos - 4)[0]:
                    raise RecordError(source, offset, "corrupted record data (CRC mismatch)")
                yield offset, data
                offset += length + 16
                continue
        # Slow path: the record runs past the chunk.
        if avail >= 12:
            header = buf[pos:pos + 12]
            pos += 12
        else:
            header = spill(12)
            if header is None:
                return
            if len(header) < 12:
                raise RecordError(source, offset, f"truncated record header ({len(header)} of 12 bytes)")
        (length,) = unpack_u64(header, 0)
        if masked_crc32c_u64(header[:8]) != unpack_u32(header, 8)[0]:
            raise RecordError(source, offset, "corrupted record length (CRC mismatch): not TFRecord data, or damaged")
        if len(buf) - pos >= length + 4:
            body = buf[pos:pos + length + 4]
            pos += length + 4
        else:
            body = spill(length + 4)
            if body is None or len(body) < length + 4:
                raise RecordError(source, offset, f"truncated record: expected {length + 16} bytes")
        data = body[:length]
        if verify_data and masked_crc32c(bytes(data)) != unpack_u32(body, length)[0]:
            raise RecordError(source, offset, "corrupted record data (CRC mismatch)")
        yield offset, data
        offset += length + 16


def looks_like_tfrecord(prefix: bytes) -> bool:
    if len(prefix) < 12:
        return False
    return masked_crc32c_u64(prefix[:8]) == _U32.unpack_from(prefix, 8)[0]


# ---- tf.train.Example ------------------------------------------------------------------------

def _varint(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1
    while True:
        bits = value & 0x7F
        value >>= 7
        if value:
            out.append(bits | 0x80)
        else:
            out.append(bits)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint((number << 3) | 2) + _varint(len(payload)) + payload


def encode_example(image: bytes, label: int) -> bytes:
    """tf.train.Example{features{feature{"image/encoded": bytes_list, "image/class/label": int64_list}}}."""
    bytes_feature = _field(1, _field(1, image))                 # Feature.bytes_list(1){value(1)}
    int64_feature = _field(3, _field(1, _varint(label)))         # Feature.int64_list(3){packed value(1)}
    entries = (_field(1, _field(1, b"image/class/label") + _field(2, int64_feature)) +
               _field(1, _field(1, b"image/encoded") + _field(2, bytes_feature)))
    return _field(1, entries)                                    # Example.features(1)


def encode_dlio_example(data: bytes, size: int) -> bytes:
    """A record as DLIO's TFRecord generator writes it (dlio_benchmark/data_generator/tf_generator.py):
    tf.train.Example{features{feature{"image": bytes_list, "size": int64_list}}}: a sample of random bytes."""
    entries = (_field(1, _field(1, b"image") + _field(2, _field(1, _field(1, data)))) +
               _field(1, _field(1, b"size") + _field(2, _field(3, _field(1, _varint(size))))))
    return _field(1, entries)


def is_dlio_example(payload) -> bool:
    """Whether a tf.train.Example is a DLIO sample ("image" bytes beside "size", no label): its bytes are read,
    not decoded, as DLIO's reader does (the emulated step stands for what the model would do with them)."""
    keys = set()
    for number, wire, value in _fields(memoryview(payload)):
        if number == 1 and wire == 2:
            for enumber, ewire, entry in _fields(value):
                if enumber == 1 and ewire == 2:
                    for f, w, v in _fields(entry):
                        if f == 1:
                            keys.add(bytes(v))
                            break
    return b"size" in keys and b"image" in keys and b"image/encoded" not in keys


def _read_varint(buf: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(buf: memoryview) -> Iterator[tuple[int, int, object]]:
    pos = 0
    while pos < len(buf):
        key, pos = _read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 2:
            length, pos = _read_varint(buf, pos)
            if pos + length > len(buf):
                raise ValueError("truncated field")
            yield number, wire, buf[pos:pos + length]
            pos += length
        elif wire == 0:
            value, pos = _read_varint(buf, pos)
            yield number, wire, value
        elif wire == 5:
            yield number, wire, buf[pos:pos + 4]
            pos += 4
        elif wire == 1:
            yield number, wire, buf[pos:pos + 8]
            pos += 8
        else:
            raise ValueError(f"unsupported wire type {wire}")


IMAGE_KEYS = (b"image/encoded", b"image", b"image_raw", b"encoded")
LABEL_KEYS = (b"image/class/label", b"label", b"class")


def decode_example(payload: bytes) -> tuple[bytes, int]:
    """(image bytes, label) from a tf.train.Example; label -1 where the example carries none."""
    features: dict[bytes, memoryview] = {}
    for number, wire, value in _fields(memoryview(payload)):
        if number == 1 and wire == 2:
            for enumber, ewire, entry in _fields(value):  # Features.feature map entries
                if enumber != 1 or ewire != 2:
                    continue
                key = val = None
                for f, w, v in _fields(entry):
                    if f == 1:
                        key = bytes(v)
                    elif f == 2:
                        val = v
                if key is not None and val is not None:
                    features[key] = val
    image, label = None, -1
    for key in IMAGE_KEYS:
        if key in features:
            for f, w, v in _fields(features[key]):
                if f == 1:  # bytes_list
                    for f2, w2, v2 in _fields(v):
                        image = bytes(v2)
                        break
            break
    for key in LABEL_KEYS:
        if key in features:
            for f, w, v in _fields(features[key]):
                if f == 3:  # int64_list
                    for f2, w2, v2 in _fields(v):
                        if w2 == 2:
                            label, _ = _read_varint(v2, 0)
                        else:
                            label = v2
                        break
            break
    if image is None:
        raise ValueError("no image bytes in the example (expected feature 'image/encoded')")
    if label >= 1 << 63:
        label -= 1 << 64
    return image, label


# ---- RecordIO --------------------------------------------------------------------------------

_MAGIC_BYTES = _U32.pack(RECORDIO_MAGIC)


def _recordio_part(cflag: int, data: bytes) -> bytes:
    if len(data) >= 1 << 29:
        raise ValueError("record part too large for RecordIO (2^29 bytes)")
    pad = (4 - len(data) % 4) % 4
    return _MAGIC_BYTES + _U32.pack((cflag << 29) | len(data)) + data + b"\0" * pad


def recordio_frame(data: bytes) -> bytes:
    """One RecordIO record. As dmlc's writer does, the magic word where it appears 4-byte aligned in
    the data splits the record into parts (cflag 1 start, 2 middle, 3 end); readers put it back."""
    cuts, at = [], data.find(_MAGIC_BYTES)
    while at != -1:
        if at % 4 == 0 and (not cuts or at >= cuts[-1] + 4):
            cuts.append(at)
        at = data.find(_MAGIC_BYTES, at + 1)
    if not cuts:
        return _recordio_part(0, data)
    pieces, start = [], 0
    for cut in cuts:
        pieces.append(data[start:cut])
        start = cut + 4
    pieces.append(data[start:])
    out = [_recordio_part(1, pieces[0])]
    out += [_recordio_part(2, p) for p in pieces[1:-1]]
    out.append(_recordio_part(3, pieces[-1]))
    return b"".join(out)


def read_recordio(stream: BinaryIO, source: str, offset: int = 0) -> Iterator[tuple[int, bytes]]:
    """Yield (offset, record) from a RecordIO stream, joining multi-part records (cflag 1..3)."""
    read = stream.read
    parts: list[bytes] = []
    start = offset
    while True:
        header = read(8)
        if not header:
            if parts:
                raise RecordError(source, offset, "stream ended inside a multi-part RecordIO record")
            return
        if len(header) < 8:
            raise RecordError(source, offset, "truncated RecordIO header")
        magic, lrec = _U32.unpack_from(header, 0)[0], _U32.unpack_from(header, 4)[0]
        if magic != RECORDIO_MAGIC:
            raise RecordError(source, offset, "not a RecordIO record (bad magic)")
        cflag, length = lrec >> 29, lrec & ((1 << 29) - 1)
        padded = length + (4 - length % 4) % 4
        body = read(padded)
        if len(body) < padded:
            raise RecordError(source, offset, "truncated RecordIO record")
        if not parts:
            start = offset
        parts.append(body[:length])
        offset += 8 + padded
        if cflag in (0, 3):
            yield start, _MAGIC_BYTES.join(parts) if len(parts) > 1 else parts[0]
            parts = []
