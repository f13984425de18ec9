"""A tiny protobuf wire-format codec for binary .caffemodel files.

Reads just the layer names and their parameter blobs, for V2 (``NetParameter.layer``, field 100),
V1 (``NetParameter.layers``, field 2) and V0-wrapped layers; ``save_caffemodel`` writes the same
subset back, so tools can hand weights to Kiln. Field numbers follow
shared/notes/caffe-format.md. Part of the benchmark's PyTorch side (caffe_torch.py).
"""

import struct

import numpy as np

# ------------------------------------------------------------------------------------------------
# (b) Protobuf wire format, just enough for .caffemodel files
# ------------------------------------------------------------------------------------------------

_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5


def _read_varint(buf, pos):
    result, shift = 0, 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("caffemodel: varint longer than 10 bytes at offset %d" % pos)


def _signed64(value):
    """int32/int64 fields store negatives as 10-byte two's complement varints."""
    return value - (1 << 64) if value >= (1 << 63) else value


def _fields(buf, start, end):
    """Yield (field number, wire type, value) over buf[start:end].

    The value is an int for varints, the byte offset of the payload for fixed32/fixed64, and a
    (start, end) pair for length-delimited fields, so nothing is copied until it is needed.
    """
    pos = start
    while pos < end:
        key, pos = _read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == _VARINT:
            value, pos = _read_varint(buf, pos)
        elif wire == _FIXED64:
            value = pos
            pos += 8
        elif wire == _BYTES:
            length, pos = _read_varint(buf, pos)
            value = (pos, pos + length)
            pos += length
        elif wire == _FIXED32:
            value = pos
            pos += 4
        else:
            raise ValueError("caffemodel: unsupported wire type %d (field %d) at offset %d"
                             % (wire, number, pos))
        if pos > end:
            raise ValueError("caffemodel: field %d runs past the end of its message" % number)
        yield number, wire, value


def _unpacked_run(buf, pos, end, tag, width, dtype):
    """Read a run of unpacked repeated fixed-width values that all carry the same one-byte tag.

    Unpacked floats are one (tag, 4 bytes) record per value; a Python loop over millions of them
    is slow, so the records are viewed as a 2-D byte array and the run's length found with numpy.
    Returns (array, position after the run).
    """
    stride = 1 + width
    rows = (end - pos) // stride
    records = np.frombuffer(buf, dtype=np.uint8, count=rows * stride, offset=pos).reshape(rows,
                                                                                           stride)
    not_tag = np.flatnonzero(records[:, 0] != tag)
    n = int(not_tag[0]) if not_tag.size else rows
    values = np.ascontiguousarray(records[:n, 1:]).view(dtype).reshape(-1)
    return values, pos + n * stride


def _decode_blob_shape(buf, start, end):
    dims = []
    for number, wire, value in _fields(buf, start, end):
        if number != 1:
            continue
        if wire == _BYTES:  # packed
            pos, stop = value
            while pos < stop:
                d, pos = _read_varint(buf, pos)
                dims.append(_signed64(d))
        elif wire == _VARINT:
            dims.append(_signed64(value))
    return dims


def _decode_blob(buf, start, end):
    """BlobProto -> float32 ndarray. double_data wins over data when both are present."""
    shape, legacy = None, {}
    floats, doubles = [], []
    pos = start
    while pos < end:
        key_pos = pos
        key, pos = _read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if number == 5 and wire == _FIXED32:  # unpacked float data
            values, pos = _unpacked_run(buf, key_pos, end, key, 4, "<f4")
            floats.append(values)
            continue
        if number == 8 and wire == _FIXED64:  # unpacked double data
            values, pos = _unpacked_run(buf, key_pos, end, key, 8, "<f8")
            doubles.append(values)
            continue
        if wire == _VARINT:
            value, pos = _read_varint(buf, pos)
            if number in (1, 2, 3, 4):  # legacy num, channels, height, width
                legacy[number] = _signed64(value)
        elif wire == _BYTES:
            length, pos = _read_varint(buf, pos)
            s, e = pos, pos + length
            pos = e
            if number == 5:  # packed float data
                floats.append(np.frombuffer(buf, dtype="<f4", count=length // 4, offset=s))
            elif number == 8:  # packed double data
                doubles.append(np.frombuffer(buf, dtype="<f8", count=length // 8, offset=s))
            elif number == 7:
                shape = _decode_blob_shape(buf, s, e)
            # diff (6) and double_diff (9) are gradients: not needed for inference.
        elif wire == _FIXED64:
            pos += 8
        elif wire == _FIXED32:
            pos += 4
        else:
            raise ValueError("caffemodel: unsupported wire type %d in BlobProto" % wire)
    if doubles:
        data = np.concatenate(doubles).astype(np.float32)
    elif len(floats) == 1:
        data = floats[0]  # a view into the file's buffer: no copy of big weight arrays
    elif floats:
        data = np.concatenate(floats)
    else:
        data = np.zeros(0, np.float32)
    if shape is None and legacy:
        # Caffe reads legacy blobs as 4-D (num, channels, height, width); unset dims are 0.
        shape = [legacy.get(i, 0) for i in (1, 2, 3, 4)]
    if shape is None:
        shape = [data.size] if data.size != 1 else []
    if int(np.prod(shape, dtype=np.int64)) != data.size:
        raise ValueError("caffemodel: blob shape %s holds %d values, the data has %d"
                         % (shape, int(np.prod(shape, dtype=np.int64)), data.size))
    return data.reshape(shape)


# V1LayerParameter.type enum -> V2 type string (caffe-format.md section 4).
V1_TYPES = {
    0: "", 1: "Accuracy", 2: "BNLL", 3: "Concat", 4: "Convolution", 5: "Data", 6: "Dropout",
    7: "EuclideanLoss", 8: "Flatten", 9: "HDF5Data", 10: "HDF5Output", 11: "Im2col",
    12: "ImageData", 13: "InfogainLoss", 14: "InnerProduct", 15: "LRN",
    16: "MultinomialLogisticLoss", 17: "Pooling", 18: "ReLU", 19: "Sigmoid", 20: "Softmax",
    21: "SoftmaxWithLoss", 22: "Split", 23: "TanH", 24: "WindowData", 25: "Eltwise", 26: "Power",
    27: "SigmoidCrossEntropyLoss", 28: "HingeLoss", 29: "MemoryData", 30: "ArgMax",
    31: "Threshold", 32: "DummyData", 33: "Slice", 34: "MVN", 35: "AbsVal", 36: "Silence",
    37: "ContrastiveLoss", 38: "Exp", 39: "Deconvolution",
}
V1_TYPE_NAMES = {
    "NONE": 0, "ACCURACY": 1, "BNLL": 2, "CONCAT": 3, "CONVOLUTION": 4, "DATA": 5, "DROPOUT": 6,
    "EUCLIDEAN_LOSS": 7, "FLATTEN": 8, "HDF5_DATA": 9, "HDF5_OUTPUT": 10, "IM2COL": 11,
    "IMAGE_DATA": 12, "INFOGAIN_LOSS": 13, "INNER_PRODUCT": 14, "LRN": 15,
    "MULTINOMIAL_LOGISTIC_LOSS": 16, "POOLING": 17, "RELU": 18, "SIGMOID": 19, "SOFTMAX": 20,
    "SOFTMAX_LOSS": 21, "SPLIT": 22, "TANH": 23, "WINDOW_DATA": 24, "ELTWISE": 25, "POWER": 26,
    "SIGMOID_CROSS_ENTROPY_LOSS": 27, "HINGE_LOSS": 28, "MEMORY_DATA": 29, "ARGMAX": 30,
    "THRESHOLD": 31, "DUMMY_DATA": 32, "SLICE": 33, "MVN": 34, "ABSVAL": 35, "SILENCE": 36,
    "CONTRASTIVE_LOSS": 37, "EXP": 38, "DECONVOLUTION": 39,
}


def _text(buf, span):
    return bytes(buf[span[0]:span[1]]).decode("utf-8", errors="replace")


def _decode_v0_layer(buf, start, end):
    """V0LayerParameter: name 1, type 2 (lower-case string such as "conv"), blobs 50."""
    name, kind, blobs = "", "", []
    for number, wire, value in _fields(buf, start, end):
        if wire != _BYTES:
            continue
        if number == 1:
            name = _text(buf, value)
        elif number == 2:
            kind = _text(buf, value)
        elif number == 50:
            blobs.append(_decode_blob(buf, *value))
    return name, kind, blobs


def read_caffemodel_layers(path_or_bytes):
    """All layers of a .caffemodel as a list of (name, type, [float32 ndarrays]).

    Packed float arrays are views into the file's buffer (writable when read from a path).
    """
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        buf = memoryview(path_or_bytes).cast("B")
    else:
        # One read straight into a numpy buffer; memoryview indexing still yields ints.
        buf = memoryview(np.fromfile(path_or_bytes, dtype=np.uint8))
    layers = []
    for number, wire, value in _fields(buf, 0, len(buf)):
        if wire != _BYTES:
            continue
        if number == 100:  # V2 LayerParameter: name 1, type 2, blobs 7
            name, kind, blobs = "", "", []
            for n, w, v in _fields(buf, *value):
                if n == 1 and w == _BYTES:
                    name = _text(buf, v)
                elif n == 2 and w == _BYTES:
                    kind = _text(buf, v)
                elif n == 7 and w == _BYTES:
                    blobs.append(_decode_blob(buf, *v))
            layers.append((name, kind, blobs))
        elif number == 2:  # V1LayerParameter: name 4, type 5 (enum), blobs 6, V0 wrapper 1
            name, kind, blobs, v0 = "", "", [], None
            for n, w, v in _fields(buf, *value):
                if n == 4 and w == _BYTES:
                    name = _text(buf, v)
                elif n == 5 and w == _VARINT:
                    kind = V1_TYPES.get(v, "V1type%d" % v)
                elif n == 6 and w == _BYTES:
                    blobs.append(_decode_blob(buf, *v))
                elif n == 1 and w == _BYTES:
                    v0 = _decode_v0_layer(buf, *v)
            if v0 is not None and not name:
                name, kind, blobs = v0[0], v0[1], blobs or v0[2]
            layers.append((name, kind, blobs))
    return layers


def load_caffemodel(path_or_bytes):
    """{layer name: [float32 ndarray, ...]} for every layer that carries blobs.

    Caffe matches weights to a net by layer name, so names are the keys; a later layer of the
    same name overrides an earlier one, as it would when Caffe copies them one after another.
    """
    return {name: blobs for name, _, blobs in read_caffemodel_layers(path_or_bytes) if blobs}


def _varint_bytes(value):
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field_bytes(number, payload):
    """A length-delimited field (small payloads; big ones go through _Chunks)."""
    return _varint_bytes((number << 3) | _BYTES) + _varint_bytes(len(payload)) + payload


class _Chunks:
    """Encoded bytes kept as a list of pieces, so that multi-hundred-MB weight arrays are written
    straight from numpy memory instead of being copied into every enclosing message."""

    def __init__(self, *pieces):
        self.pieces = [p for p in pieces if len(p)]
        self.size = sum(len(p) for p in self.pieces)

    def add(self, piece):
        if isinstance(piece, _Chunks):
            self.pieces.extend(piece.pieces)
            self.size += piece.size
        elif len(piece):
            self.pieces.append(piece)
            self.size += len(piece)
        return self

    def field(self, number, body):
        """Append a length-delimited field holding `body` (bytes or _Chunks)."""
        size = body.size if isinstance(body, _Chunks) else len(body)
        self.add(_varint_bytes((number << 3) | _BYTES) + _varint_bytes(size))
        return self.add(body)


def _encode_blob(array, legacy=False, packed=True):
    # C order, little-endian float32; asarray keeps 0-d blobs 0-d (ascontiguousarray would not).
    data = np.asarray(array, dtype="<f4")
    if not data.flags.c_contiguous:
        data = data.copy(order="C")
    out = _Chunks()
    if legacy:
        # Legacy 4-D dims, right-aligned and padded with 1s, as V1 files store them.
        dims = [1] * max(0, 4 - data.ndim) + list(data.shape)
        if len(dims) != 4:
            raise ValueError("legacy blobs are at most 4-D, got shape %s" % (data.shape,))
        for number, d in zip((1, 2, 3, 4), dims):
            out.add(_varint_bytes(number << 3) + _varint_bytes(int(d)))
    else:
        shape = b"".join(_varint_bytes(int(d)) for d in data.shape)
        out.field(7, _field_bytes(1, shape) if data.ndim else b"")
    if packed:
        out.field(5, memoryview(data.reshape(-1)).cast("B"))
    else:
        tag = _varint_bytes((5 << 3) | _FIXED32)
        out.add(b"".join(tag + struct.pack("<f", float(x)) for x in data.reshape(-1)))
    return out


def save_caffemodel(path, weights, types=None, net_name="", v1=False, packed=True):
    """Write {layer name: [arrays]} as a .caffemodel holding only names, types and blobs.

    That is all Caffe (and Kiln) need to match weights to a deploy net. ``v1`` writes the legacy
    ``layers`` field with 4-D legacy blob dims; ``packed=False`` writes unpacked floats. Both exist
    to exercise the reader; real files today are V2 with packed data. With ``path=None`` the
    bytes are returned instead of written.
    """
    types = types or {}
    net = _Chunks()
    if net_name:
        net.field(1, net_name.encode())
    for name, blobs in weights.items():
        body = _Chunks()
        kind = types.get(name, "")
        if v1:
            body.field(4, name.encode())
            if kind:
                enum = V1_TYPE_NAMES.get(kind.upper()) or next(
                    (k for k, v in V1_TYPES.items() if v == kind), 0)
                body.add(_varint_bytes(5 << 3) + _varint_bytes(enum))
            for b in blobs:
                body.field(6, _encode_blob(b, legacy=True, packed=packed))
            net.field(2, body)
        else:
            body.field(1, name.encode())
            if kind:
                body.field(2, kind.encode())
            for b in blobs:
                body.field(7, _encode_blob(b, packed=packed))
            net.field(100, body)
    if path is None:
        return b"".join(net.pieces)
    with open(path, "wb") as f:
        for piece in net.pieces:
            f.write(piece)
    return None
