"""Caffe deploy nets as ordinary PyTorch modules, for side-by-side runs against Kiln.

This module needs only numpy and torch: no protobuf package and no Caffe. It has three parts.

(a) ``parse_prototxt``: a reader for protobuf text format as Caffe writes it (nested ``name { }``
    blocks, ``key: value``, repeated keys, quoted strings, bare-word enums, ``#`` comments).
    Every message becomes a ``Message``: a dict from field name to the *list* of its values, so
    repeated and single fields look the same; ``one()`` gives the last value (protobuf's rule for
    a non-repeated field given twice) and ``many()`` gives all of them.
(b) ``load_caffemodel``: a tiny protobuf wire-format decoder for binary ``.caffemodel`` files that
    reads just the layer names and their parameter blobs, for V2 (``NetParameter.layer``, field
    100), V1 (``NetParameter.layers``, field 2) and V0-wrapped layers. ``save_caffemodel`` writes
    the same subset back, so tools can hand weights to Kiln.
(c) ``CaffeNet``: an ``nn.Module`` built from a deploy prototxt plus weights, made of the modules a
    PyTorch user would pick by hand (``nn.Conv2d``, ``nn.BatchNorm2d``, ``nn.MaxPool2d``...).
    Layers run in prototxt order over a dict of named blobs, as in Caffe. Blob shapes are worked
    out with Caffe's own formulas while building, and the builder refuses any layer whose PyTorch
    counterpart would produce a different shape.

Field numbers and layer semantics follow shared/notes/caffe-format.md (taken from BVLC Caffe's
caffe.proto and layer sources, commit 9b891540183d). Nothing here is copied from another project.

Typical use::

    net = CaffeNet.from_files("resnet18_deploy.prototxt", "weights.caffemodel", batch=8)
    prob = net.eval()(torch.randn(8, 3, 224, 224))
"""

import math
import re
import struct

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "Message", "parse_prototxt", "load_prototxt",
    "read_caffemodel_layers", "load_caffemodel", "save_caffemodel",
    "NetDef", "LayerDef", "load_net", "CaffeNet", "random_weights", "caffe_pool_size",
]


# ------------------------------------------------------------------------------------------------
# (a) Protobuf text format
# ------------------------------------------------------------------------------------------------

class Message(dict):
    """A parsed text-format message: field name -> list of values (scalars or Messages).

    Values are kept as lists because the text format does not say which fields are repeated;
    the reader of a field knows, and picks ``one()`` or ``many()`` accordingly.
    """

    def add(self, key, value):
        self.setdefault(key, []).append(value)

    def one(self, key, default=None):
        """The field's value; protobuf keeps the last one when a singular field is repeated."""
        values = dict.get(self, key)
        return values[-1] if values else default

    def many(self, key):
        return list(dict.get(self, key, ()))

    def has(self, key):
        return bool(dict.get(self, key))

    def msg(self, key):
        """A sub-message, or an empty one so that defaults apply when the block is absent."""
        value = self.one(key)
        return value if isinstance(value, Message) else Message()


# Strings may use either quote; everything that is not punctuation, space or a quote is one word
# (identifiers, enum names, numbers such as -1.5e-3, inf, 0x1F).
_TOKEN_RE = re.compile(r"""
      (?P<space>\s+|\#[^\n]*)
    | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
    | (?P<punct>[{}\[\]:;,<>])
    | (?P<word>[^\s{}\[\]:;,<>"'\#]+)
""", re.VERBOSE)

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "a": "\a",
            "b": "\b", "f": "\f", "v": "\v", "?": "?"}


def _unescape(body):
    """C-style escapes as protobuf's text format allows them (\\n, \\", octal, \\x hex)."""
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c != "\\" or i + 1 == len(body):
            out.append(c)
            i += 1
            continue
        n = body[i + 1]
        if n in _ESCAPES:
            out.append(_ESCAPES[n])
            i += 2
        elif n in "01234567":
            digits = re.match(r"[0-7]{1,3}", body[i + 1:]).group(0)
            out.append(chr(int(digits, 8)))
            i += 1 + len(digits)
        elif n in "xX":
            digits = re.match(r"[0-9a-fA-F]{1,2}", body[i + 2:])
            if not digits:
                raise ValueError("bad \\x escape in string %r" % body)
            out.append(chr(int(digits.group(0), 16)))
            i += 2 + len(digits.group(0))
        else:
            raise ValueError("unknown escape \\%s in string %r" % (n, body))
    return "".join(out)


def _scalar(word):
    """A bare word: number, bool, or enum name (kept as a string)."""
    if word in ("true", "True", "t"):
        return True
    if word in ("false", "False", "f"):
        return False
    try:
        return int(word, 0) if not re.fullmatch(r"-?0[0-7]+", word) else int(word, 8)
    except ValueError:
        pass
    text = word[:-1] if word[-1:] in "fF" and re.search(r"[0-9.]", word) else word
    lowered = text.lower()
    if lowered in ("inf", "infinity", "-inf", "-infinity", "nan", "-nan"):
        return float(lowered.replace("infinity", "inf"))
    try:
        return float(text)
    except ValueError:
        return word  # an enum value such as MAX or ACROSS_CHANNELS


class _Tokens:
    """The token stream, with line numbers for error messages."""

    def __init__(self, text):
        self.items = []  # (kind, text, line)
        line, pos = 1, 0
        while pos < len(text):
            m = _TOKEN_RE.match(text, pos)
            if not m:
                raise ValueError("prototxt line %d: unexpected character %r" % (line, text[pos]))
            kind = m.lastgroup
            if kind != "space":
                self.items.append((kind, m.group(kind), line))
            line += m.group(0).count("\n")
            pos = m.end()
        self.i = 0

    def peek(self):
        return self.items[self.i] if self.i < len(self.items) else (None, None, -1)

    def take(self):
        item = self.peek()
        if item[0] is None:
            raise ValueError("prototxt: unexpected end of text")
        self.i += 1
        return item

    def accept(self, text):
        kind, value, _ = self.peek()
        if kind == "punct" and value == text:
            self.i += 1
            return True
        return False

    def error(self, what):
        kind, value, line = self.peek()
        return ValueError("prototxt line %d: %s (found %r)" % (line, what, value))


def _parse_value(tokens):
    kind, value, line = tokens.take()
    if kind == "string":
        # Adjacent string literals concatenate, as in C.
        parts = [_unescape(value[1:-1])]
        while tokens.peek()[0] == "string":
            parts.append(_unescape(tokens.take()[1][1:-1]))
        return "".join(parts)
    if kind == "word":
        return _scalar(value)
    raise ValueError("prototxt line %d: expected a value, found %r" % (line, value))


def _parse_fields(tokens, closing):
    msg = Message()
    while True:
        if closing is None and tokens.peek()[0] is None:
            return msg
        if closing is not None and tokens.accept(closing):
            return msg
        kind, name, line = tokens.take()
        if kind != "word":
            raise ValueError("prototxt line %d: expected a field name, found %r" % (line, name))
        colon = tokens.accept(":")
        if tokens.accept("{"):
            msg.add(name, _parse_fields(tokens, "}"))
        elif tokens.accept("<"):
            msg.add(name, _parse_fields(tokens, ">"))
        elif not colon:
            raise tokens.error("expected ':' or '{' after %r" % name)
        elif tokens.accept("["):
            # List syntax: key: [v1, v2] (values or messages).
            if not tokens.accept("]"):
                while True:
                    if tokens.accept("{"):
                        msg.add(name, _parse_fields(tokens, "}"))
                    else:
                        msg.add(name, _parse_value(tokens))
                    if tokens.accept("]"):
                        break
                    if not tokens.accept(","):
                        raise tokens.error("expected ',' or ']' in list")
        else:
            msg.add(name, _parse_value(tokens))
        # Fields may be separated by an optional ',' or ';'.
        if not tokens.accept(";"):
            tokens.accept(",")


def parse_prototxt(text):
    """Protobuf text format -> Message (nested dicts of lists)."""
    return _parse_fields(_Tokens(text), None)


def load_prototxt(path):
    with open(path, "r", encoding="utf-8") as f:
        return parse_prototxt(f.read())


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


# ------------------------------------------------------------------------------------------------
# Net definition: the deploy prototxt reduced to inputs and an ordered list of layers
# ------------------------------------------------------------------------------------------------

class LayerDef:
    """One layer as V2 sees it, whichever format generation it came from."""

    def __init__(self, name, type, bottoms, tops, param):
        self.name, self.type, self.bottoms, self.tops, self.param = name, type, bottoms, tops, param

    def __repr__(self):
        return "LayerDef(%r, %r, %s -> %s)" % (self.name, self.type, self.bottoms, self.tops)


class NetDef:
    """Net inputs [(name, shape)] and the layers that survive TEST-phase filtering, in order."""

    def __init__(self, name, inputs, layers):
        self.name, self.inputs, self.layers = name, inputs, layers

    @property
    def last_top(self):
        """The top of the last layer: the blob a benchmark reads as "the output"."""
        for layer in reversed(self.layers):
            if layer.tops:
                return layer.tops[0]
        return self.inputs[0][0]


def _rule_holds(rule, phase, level, stages):
    if rule.has("phase") and rule.one("phase") not in (phase, {"TRAIN": 0, "TEST": 1}[phase]):
        return False
    if rule.has("min_level") and level < rule.one("min_level"):
        return False
    if rule.has("max_level") and level > rule.one("max_level"):
        return False
    if any(s not in stages for s in rule.many("stage")):
        return False
    if any(s in stages for s in rule.many("not_stage")):
        return False
    return True


def _layer_kept(layer, phase, level, stages):
    includes, excludes = layer.many("include"), layer.many("exclude")
    if includes:
        return any(_rule_holds(r, phase, level, stages) for r in includes)
    return not any(_rule_holds(r, phase, level, stages) for r in excludes)


def load_net(prototxt, phase="TEST", level=0, stages=(), batch=None, input_shapes=None):
    """Parse a prototxt (path, text or Message) into a NetDef.

    ``batch`` replaces dim 0 of every input; ``input_shapes`` ({name: shape}) replaces whole
    input shapes, e.g. to run a fully convolutional net at another image size.
    """
    if isinstance(prototxt, Message):
        net = prototxt
    elif "\n" in prototxt or "{" in prototxt:
        net = parse_prototxt(prototxt)
    else:
        net = load_prototxt(prototxt)
    if net.has("layer") and net.has("layers"):
        raise ValueError("prototxt has both 'layer' and 'layers' (Caffe rejects this too)")

    inputs = []
    names = net.many("input")
    shapes = net.many("input_shape")
    dims = net.many("input_dim")
    for i, name in enumerate(names):
        if shapes:
            inputs.append((name, [int(d) for d in shapes[i].many("dim")]))
        elif dims:
            inputs.append((name, [int(d) for d in dims[4 * i:4 * i + 4]]))
        else:
            raise ValueError("input '%s' has no input_shape or input_dim" % name)

    layers = []
    v1 = net.has("layers")
    for entry in net.many("layers") if v1 else net.many("layer"):
        if v1 and entry.has("layer"):
            raise NotImplementedError("V0 prototxt (layers { layer { ... } }) is not supported; "
                                      "upgrade it with Caffe's upgrade_net_proto_text")
        if not _layer_kept(entry, phase, level, stages):
            continue
        kind = entry.one("type", "")
        if v1 and not isinstance(kind, str):
            kind = V1_TYPES.get(kind, str(kind))
        elif v1 and kind in V1_TYPE_NAMES:
            kind = V1_TYPES[V1_TYPE_NAMES[kind]]
        layer = LayerDef(entry.one("name", ""), kind, entry.many("bottom"), entry.many("top"),
                         entry)
        if kind == "Input":
            param_shapes = layer.param.msg("input_param").many("shape")
            for i, top in enumerate(layer.tops):
                shape = param_shapes[i if len(param_shapes) > 1 else 0]
                inputs.append((top, [int(d) for d in shape.many("dim")]))
            continue
        layers.append(layer)

    resolved = []
    for name, shape in inputs:
        shape = list(shape)
        if input_shapes and name in input_shapes:
            shape = [int(d) for d in input_shapes[name]]
        elif batch is not None and shape:
            shape[0] = int(batch)
        resolved.append((name, shape))
    return NetDef(net.one("name", ""), resolved, layers)


# ------------------------------------------------------------------------------------------------
# (c) Modules for the Caffe layers that have no one-line PyTorch equivalent
# ------------------------------------------------------------------------------------------------

class Concat(nn.Module):
    def __init__(self, axis):
        super().__init__()
        self.axis = axis

    def forward(self, *xs):
        return torch.cat(xs, dim=self.axis)


class Eltwise(nn.Module):
    """Caffe Eltwise: SUM (optionally weighted by coeff), PROD or MAX over all bottoms."""

    def __init__(self, operation, coeffs=None):
        super().__init__()
        self.operation, self.coeffs = operation, coeffs

    def forward(self, *xs):
        if self.operation == "SUM":
            if self.coeffs is None:
                out = xs[0] + xs[1]
                for x in xs[2:]:
                    out = out + x
                return out
            out = xs[0] * self.coeffs[0]
            for c, x in zip(self.coeffs[1:], xs[1:]):
                out = out + x * c
            return out
        out = xs[0]
        for x in xs[1:]:
            out = out * x if self.operation == "PROD" else torch.maximum(out, x)
        return out


class Crop(nn.Module):
    """Caffe Crop: dims from ``axis`` on take bottom[1]'s size, starting at the given offsets."""

    def __init__(self, axis, offsets):
        super().__init__()
        self.axis, self.offsets = axis, offsets

    def forward(self, x, reference):
        for i, offset in enumerate(self.offsets):
            dim = self.axis + i
            x = x.narrow(dim, offset, reference.shape[dim])
        return x


class Slice(nn.Module):
    def __init__(self, axis, sizes):
        super().__init__()
        self.axis, self.sizes = axis, sizes

    def forward(self, x):
        return tuple(torch.split(x, self.sizes, dim=self.axis))


class Split(nn.Module):
    """Caffe Split hands the same data to several consumers; so does this (no copy)."""

    def __init__(self, count):
        super().__init__()
        self.count = count

    def forward(self, x):
        return (x,) * self.count


class Reshape(nn.Module):
    """Caffe Reshape: dims[axis:axis+num_axes] replaced; 0 copies an input dim, -1 is inferred."""

    def __init__(self, dims, axis, num_axes):
        super().__init__()
        self.dims, self.axis, self.num_axes = dims, axis, num_axes

    def forward(self, x):
        return x.reshape(caffe_reshape(list(x.shape), self.dims, self.axis, self.num_axes))


class Power(nn.Module):
    """y = (shift + scale * x) ** power."""

    def __init__(self, power, scale, shift):
        super().__init__()
        self.power, self.scale, self.shift = power, scale, shift

    def forward(self, x):
        y = x * self.scale if self.scale != 1 else x
        if self.shift != 0:
            y = y + self.shift
        return y if self.power == 1 else torch.pow(y, self.power)


def _broadcast_view(t, axis, rank):
    """Reshape a parameter covering dims [axis, axis + t.dim()) so it broadcasts over rank dims."""
    return t.reshape(list(t.shape) + [1] * (rank - axis - t.dim()))


class ScaleBias(nn.Module):
    """Caffe Scale (and Bias): y = x * s + b with s, b covering dims [axis, axis + num_axes).

    With a second bottom, that bottom is the scale (Scale) or the bias (Bias) instead of a
    learned blob.
    """

    def __init__(self, axis, shape, scale, bias, scale_from_input=False, bias_from_input=False):
        super().__init__()
        self.axis = axis
        self.scale_from_input, self.bias_from_input = scale_from_input, bias_from_input
        self.weight = nn.Parameter(torch.ones(shape)) if scale else None
        self.bias = nn.Parameter(torch.zeros(shape)) if bias else None

    def forward(self, x, other=None):
        rank = x.dim()
        if self.scale_from_input:
            x = x * _broadcast_view(other, self.axis, rank)
        elif self.weight is not None:
            x = x * _broadcast_view(self.weight, self.axis, rank)
        if self.bias_from_input:
            x = x + _broadcast_view(other, self.axis, rank)
        elif self.bias is not None:
            x = x + _broadcast_view(self.bias, self.axis, rank)
        return x


class WithinChannelLRN(nn.Module):
    """Caffe LRN WITHIN_CHANNEL: x * (1 + alpha * mean of x^2 over an n x n window)^-beta.

    Caffe builds it from AVE pooling with pad (n-1)/2 and stride 1; the window never leaves the
    padded area, so the divisor is always n*n, which is count_include_pad=True. k is unused.
    """

    def __init__(self, size, alpha, beta):
        super().__init__()
        self.size, self.alpha, self.beta = size, alpha, beta

    def forward(self, x):
        mean = F.avg_pool2d(x * x, self.size, stride=1, padding=(self.size - 1) // 2,
                            count_include_pad=True)
        return x * torch.pow(1 + self.alpha * mean, -self.beta)


# ------------------------------------------------------------------------------------------------
# Caffe's shape rules
# ------------------------------------------------------------------------------------------------

def caffe_pool_size(size, kernel, pad, stride, ceil=True):
    """Caffe's pooling output size: rounded up (or down), then the padding clip rule."""
    span = size + 2 * pad - kernel
    out = (-(-span // stride) if ceil else span // stride) + 1
    if pad > 0 and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def torch_pool_size(size, kernel, pad, stride, ceil):
    """The size PyTorch's pooling computes (its ceil_mode applies the clip even without pad)."""
    span = size + 2 * pad - kernel
    out = (-(-span // stride) if ceil else span // stride) + 1
    if ceil and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def caffe_reshape(shape, dims, axis, num_axes):
    rank = len(shape)
    start = axis if axis >= 0 else axis + rank + 1
    end = rank if num_axes == -1 else start + num_axes
    if not 0 <= start <= end <= rank:
        raise ValueError("Reshape: axis %d / num_axes %d out of range for %s"
                         % (axis, num_axes, shape))
    middle = []
    for i, d in enumerate(dims):
        if d == 0:
            if start + i >= end:
                raise ValueError("Reshape: dim 0 at %d copies nothing" % i)
            middle.append(shape[start + i])
        else:
            middle.append(d)
    out = shape[:start] + middle + shape[end:]
    if out.count(-1) > 1:
        raise ValueError("Reshape: more than one -1")
    if -1 in out:
        known = int(np.prod([d for d in out if d != -1], dtype=np.int64))
        total = int(np.prod(shape, dtype=np.int64))
        if known == 0 or total % known:
            raise ValueError("Reshape: cannot infer -1 for %s -> %s" % (shape, out))
        out[out.index(-1)] = total // known
    if int(np.prod(out, dtype=np.int64)) != int(np.prod(shape, dtype=np.int64)):
        raise ValueError("Reshape: %s -> %s changes the element count" % (shape, out))
    return out


def _canonical_axis(axis, rank):
    a = axis + rank if axis < 0 else axis
    if not 0 <= a < rank:
        raise ValueError("axis %d out of range for rank %d" % (axis, rank))
    return a


def _spatial(p, name, h_name, w_name, default):
    """A 2-D conv/pool setting given as repeated `name` (1 or 2 values) or as name_h/name_w."""
    if p.has(h_name) or p.has(w_name):
        if not (p.has(h_name) and p.has(w_name)):
            raise ValueError("%s and %s must be given together" % (h_name, w_name))
        return int(p.one(h_name)), int(p.one(w_name))
    values = [int(v) for v in p.many(name)]
    if not values:
        if default is None:
            raise ValueError("%s missing" % name)
        return default, default
    if len(values) == 1:
        return values[0], values[0]
    if len(values) == 2:
        return values[0], values[1]
    raise ValueError("%s has %d values; only 2-D is supported" % (name, len(values)))


def _enum(value, names):
    """An enum field given as a bare word or as its number."""
    if isinstance(value, str):
        return value
    return names[int(value)]


# ------------------------------------------------------------------------------------------------
# The net
# ------------------------------------------------------------------------------------------------

# View-like layers: their tops share memory with their bottom in this implementation.
_ALIASING = {"Split", "Flatten", "Reshape", "Dropout", "Slice", "Crop"}


class _Step:
    __slots__ = ("module", "bottoms", "tops", "shapes", "free", "name", "type")

    def __init__(self, name, type, module, bottoms, tops, shapes):
        self.name, self.type, self.module = name, type, module
        self.bottoms, self.tops, self.shapes = bottoms, tops, shapes
        self.free = ()


class CaffeNet(nn.Module):
    """A Caffe deploy net as a PyTorch module.

    ``forward(*inputs)`` takes the net inputs in declaration order and returns the blob(s) named
    by ``outputs`` (default: the top of the last layer). Attributes of interest:

    * ``input_names``, ``input_shapes``: as declared (after batch / shape overrides);
    * ``blob_shapes``: every blob's shape by Caffe's rules for those input shapes;
    * ``param_shapes``: {layer: [Caffe blob shapes]} for every layer that takes weights, in the
      order a .caffemodel stores them (useful to make random weights);
    * ``check_shapes``: when True, forward() compares every top with ``blob_shapes`` and raises
      on a difference (only when the inputs have the declared shapes).

    BatchNorm followed by a Scale that reads it becomes one affine ``nn.BatchNorm2d`` (turn off
    with ``fuse_bn_scale=False``). With ``strict`` (default) every layer that takes weights must
    find them in ``weights``; with ``weights=None`` PyTorch's own initialisation is kept, or
    skipped for convolutions and inner products with ``init_weights=False`` (a fast build when
    only the shapes are wanted).
    """

    def __init__(self, netdef, weights=None, outputs=None, fuse_bn_scale=True, strict=True,
                 init_weights=True):
        super().__init__()
        # init_weights=False leaves large parameters uninitialised (for shape-only builds).
        self._init_weights = init_weights
        self.netdef = netdef
        self.input_names = [name for name, _ in netdef.inputs]
        self.input_shapes = [tuple(shape) for _, shape in netdef.inputs]
        self.output_names = list(outputs) if outputs else [netdef.last_top]
        self.blob_shapes = {name: tuple(shape) for name, shape in netdef.inputs}
        self.param_shapes = {}
        self.param_types = {}
        self.param_fan_in = {}
        self.check_shapes = False
        self.layers = nn.ModuleDict()
        self._weights = weights
        self._strict = weights is not None and strict
        self._steps = []
        self._build(fuse_bn_scale)
        self._weights = None
        for name in self.output_names:
            if name not in self.blob_shapes:
                raise ValueError("output '%s' is not a blob of the net" % name)
        self._plan_frees()

    @classmethod
    def from_files(cls, prototxt, caffemodel=None, batch=None, input_shapes=None, **kwargs):
        netdef = load_net(prototxt, batch=batch, input_shapes=input_shapes)
        weights = load_caffemodel(caffemodel) if caffemodel else None
        return cls(netdef, weights, **kwargs)

    # -- running -----------------------------------------------------------------------------

    def forward(self, *inputs):
        if len(inputs) != len(self.input_names):
            raise ValueError("the net takes %d inputs (%s), got %d"
                             % (len(self.input_names), ", ".join(self.input_names), len(inputs)))
        check = self.check_shapes and all(
            tuple(x.shape) == s for x, s in zip(inputs, self.input_shapes))
        blobs = dict(zip(self.input_names, inputs))
        for step in self._steps:
            out = step.module(*[blobs[b] for b in step.bottoms])
            if not isinstance(out, tuple):
                out = (out,)
            for top, value, shape in zip(step.tops, out, step.shapes):
                if check and tuple(value.shape) != shape:
                    raise RuntimeError("layer '%s' (%s): top '%s' is %s, Caffe gives %s"
                                       % (step.name, step.type, top, tuple(value.shape), shape))
                blobs[top] = value
            # Drop blobs nobody reads any more so that memory behaves as in a hand-written model.
            for name in step.free:
                del blobs[name]
        if len(self.output_names) == 1:
            return blobs[self.output_names[0]]
        return tuple(blobs[name] for name in self.output_names)

    def _plan_frees(self):
        last_use = {}
        for i, step in enumerate(self._steps):
            for name in list(step.bottoms) + list(step.tops):
                last_use[name] = i
        for name in self.input_names:
            last_use.setdefault(name, -1)
        frees = {}
        for name, i in last_use.items():
            if name not in self.output_names and i >= 0:
                frees.setdefault(i, []).append(name)
        for i, step in enumerate(self._steps):
            step.free = tuple(frees.get(i, ()))

    # -- building ----------------------------------------------------------------------------

    def _build(self, fuse_bn_scale):
        layers = self.netdef.layers
        # Alias groups: which blob names may share storage (for safe in-place ReLU).
        self._alias = {name: ("input", name) for name in self.input_names}
        i = 0
        while i < len(layers):
            layer = layers[i]
            fused_scale = None
            if (fuse_bn_scale and layer.type == "BatchNorm" and i + 1 < len(layers)
                    and self._fusable_scale(layers, i)):
                fused_scale = layers[i + 1]
            try:
                self._add_layer(i, layer, fused_scale)
            except (ValueError, KeyError, NotImplementedError, IndexError) as e:
                raise type(e)("layer '%s' (%s): %s" % (layer.name, layer.type, e)) from None
            i += 2 if fused_scale is not None else 1

    def _readers_after(self, index, blob):
        """Layers after `index` that read the value `blob` has right after layer `index`."""
        readers = []
        for j in range(index + 1, len(self.netdef.layers)):
            other = self.netdef.layers[j]
            if blob in other.bottoms:
                readers.append(j)
            if blob in other.tops:
                break
        else:
            if blob in self.output_names:
                readers.append(len(self.netdef.layers))
        return readers

    def _fusable_scale(self, layers, i):
        bn, scale = layers[i], layers[i + 1]
        if scale.type != "Scale" or len(scale.bottoms) != 1 or len(bn.tops) != 1:
            return False
        if scale.bottoms[0] != bn.tops[0]:
            return False
        p = scale.param.msg("scale_param")
        if int(p.one("axis", 1)) != 1 or int(p.one("num_axes", 1)) != 1:
            return False
        # The BN output must not be read by anyone but the Scale (an in-place Scale overwrites it).
        return scale.tops[0] == bn.tops[0] or self._readers_after(i, bn.tops[0]) == [i + 1]

    def _blobs_for(self, layer, count):
        """The layer's weights from the caffemodel, checked for count; None to keep torch's."""
        if self._weights is None:
            return None
        blobs = self._weights.get(layer.name)
        if blobs is None:
            if self._strict:
                raise KeyError("no weights for this layer in the caffemodel")
            return None
        if len(blobs) != count:
            raise ValueError("the caffemodel has %d blobs, the layer takes %d"
                             % (len(blobs), count))
        return blobs

    @staticmethod
    def _tensor(blob, shape, what):
        """A Caffe blob as a tensor of `shape`; only the element count must agree.

        Legacy V1 blobs carry 4-D dims (1x1x1xN for a bias), hence the count-only check; Caffe
        itself accepts them right-aligned against the expected shape.
        """
        shape = tuple(int(d) for d in shape)
        if int(np.prod(shape, dtype=np.int64)) != blob.size:
            raise ValueError("%s: blob is %s, expected %s" % (what, blob.shape, shape))
        array = np.asarray(blob, dtype=np.float32).reshape(shape)
        if not array.flags.writeable:  # torch.from_numpy warns on read-only memory
            array = array.copy()
        return torch.from_numpy(array)

    def _register(self, layer, module):
        key = layer.name.replace(".", "_") or "layer"
        base, n = key, 1
        while key in self.layers:
            n += 1
            key = "%s_%d" % (base, n)
        self.layers[key] = module
        return key

    def _add_layer(self, index, layer, fused_scale):
        shapes = []
        for b in layer.bottoms:
            if b not in self.blob_shapes:
                raise KeyError("bottom '%s' is not produced by any earlier layer" % b)
            shapes.append(list(self.blob_shapes[b]))
        if fused_scale is not None:
            module, outs = self._layer_BatchNorm(layer, shapes, index, scale=fused_scale)
            tops, last, kind = fused_scale.tops, index + 1, "BatchNorm+Scale"
        else:
            handler = getattr(self, "_layer_" + layer.type, None)
            if handler is None:
                raise NotImplementedError("layer type '%s' is not supported" % layer.type)
            module, outs = handler(layer, shapes, index)
            tops, last, kind = layer.tops, index, layer.type
        if len(outs) != len(tops):
            raise ValueError("%d tops given, the layer makes %d" % (len(tops), len(outs)))
        if module is None:  # Silence: nothing to run, nothing produced.
            return
        outs = [tuple(int(d) for d in s) for s in outs]
        for top, shape in zip(tops, outs):
            if any(d <= 0 for d in shape):
                raise ValueError("top '%s' would have shape %s" % (top, shape))
            self.blob_shapes[top] = shape
        # Alias bookkeeping for the in-place decision of later layers: view-like layers share
        # their bottom's storage, an in-place ReLU keeps it, every other module makes a new one.
        inplace = getattr(module, "inplace", False)
        for k, top in enumerate(tops):
            if (kind in _ALIASING or inplace) and layer.bottoms:
                self._alias[top] = self._alias[layer.bottoms[0]]
            else:
                self._alias[top] = ("layer", last, k)
        self._register(layer, module)
        self._steps.append(_Step(layer.name, kind, module, list(layer.bottoms), list(tops), outs))

    def _inplace_ok(self, index, layer):
        """Whether an in-place op on the layer's bottom is invisible to every other reader.

        Caffe's in-place layers overwrite their bottom. Here that is safe unless the same storage
        is still reachable under another name that is read later (a net input, a Split or
        Dropout sibling...), in which case the op runs out of place.
        """
        if len(layer.bottoms) != 1 or layer.tops != layer.bottoms:
            return False
        blob = layer.bottoms[0]
        group = self._alias.get(blob)
        if group is None or group[0] == "input":
            return False
        for other, other_group in self._alias.items():
            if other != blob and other_group == group and self._readers_after(index, other):
                return False
        return True

    # Each _layer_X(layer, bottom_shapes, index) returns (module, [top shapes]).

    def _layer_Convolution(self, layer, shapes, index, transposed=False):
        p = layer.param.msg("convolution_param")
        if int(p.one("axis", 1)) != 1:
            raise NotImplementedError("convolution_param.axis other than 1")
        x = shapes[0]
        if len(x) != 4:
            raise NotImplementedError("only 2-D convolution (4-D blobs) is supported, got %s" % x)
        n, c, h, w = x
        kh, kw = _spatial(p, "kernel_size", "kernel_h", "kernel_w", None)
        ph, pw = _spatial(p, "pad", "pad_h", "pad_w", 0)
        sh, sw = _spatial(p, "stride", "stride_h", "stride_w", 1)
        dh, dw = _spatial(p, "dilation", "dilation_h", "dilation_w", 1)
        out_c = int(p.one("num_output"))
        group = int(p.one("group", 1))
        bias = bool(p.one("bias_term", True))
        if c % group or out_c % group:
            raise ValueError("group %d must divide %d input and %d output channels"
                             % (group, c, out_c))
        ext_h, ext_w = dh * (kh - 1) + 1, dw * (kw - 1) + 1
        # Inputs summed into one output value: for a transposed conv, each output pixel sees
        # about kernel/stride taps per dim.
        fan_in = (c // group) * kh * kw
        if transposed:
            fan_in = max(1, (c // group) * (kh * kw) // (sh * sw))
            wshape = (c, out_c // group, kh, kw)
        else:
            wshape = (out_c, c // group, kh, kw)
        self._record_params(layer, [wshape] + ([(out_c,)] if bias else []), fan_in)
        blobs = self._blobs_for(layer, 2 if bias else 1)
        make = self._maker(blobs)
        if transposed:
            oh, ow = sh * (h - 1) + ext_h - 2 * ph, sw * (w - 1) + ext_w - 2 * pw
            module = make(nn.ConvTranspose2d, c, out_c, (kh, kw), (sh, sw), (ph, pw),
                          groups=group, bias=bias, dilation=(dh, dw))
        else:
            oh, ow = (h + 2 * ph - ext_h) // sh + 1, (w + 2 * pw - ext_w) // sw + 1
            module = make(nn.Conv2d, c, out_c, (kh, kw), (sh, sw), (ph, pw), (dh, dw), group,
                          bias)
        if blobs is not None:
            with torch.no_grad():
                module.weight.copy_(self._tensor(blobs[0], wshape, "weight"))
                if bias:
                    module.bias.copy_(self._tensor(blobs[1], (out_c,), "bias"))
        return module, [[n, out_c, oh, ow]]

    def _layer_Deconvolution(self, layer, shapes, index):
        return self._layer_Convolution(layer, shapes, index, transposed=True)

    def _maker(self, blobs):
        """How to construct a weighted module: skip PyTorch's init when it is overwritten."""
        return _make_uninitialized if blobs is not None or not self._init_weights \
            else _make_initialized

    def _record_params(self, layer, shapes, fan_in=None):
        self.param_shapes[layer.name] = [tuple(int(d) for d in s) for s in shapes]
        self.param_types[layer.name] = layer.type
        if fan_in is not None:
            self.param_fan_in[layer.name] = fan_in

    def _layer_Pooling(self, layer, shapes, index):
        p = layer.param.msg("pooling_param")
        x = shapes[0]
        if len(x) != 4:
            raise NotImplementedError("pooling needs a 4-D blob, got %s" % x)
        if len(layer.tops) != 1:
            raise NotImplementedError("a second (argmax mask) top")
        n, c, h, w = x
        method = _enum(p.one("pool", "MAX"), ["MAX", "AVE", "STOCHASTIC"])
        if method not in ("MAX", "AVE"):
            raise NotImplementedError("pool: %s" % method)
        if p.one("global_pooling", False):
            module = nn.AdaptiveMaxPool2d(1) if method == "MAX" else nn.AdaptiveAvgPool2d(1)
            return module, [[n, c, 1, 1]]
        kh, kw = _spatial(p, "kernel_size", "kernel_h", "kernel_w", None)
        ph, pw = _spatial(p, "pad", "pad_h", "pad_w", 0)
        sh, sw = _spatial(p, "stride", "stride_h", "stride_w", 1)
        # BVLC's round_mode (CEIL default); some forks write ceil_mode: false instead.
        ceil = _enum(p.one("round_mode", "CEIL"), ["CEIL", "FLOOR"]) == "CEIL"
        if p.has("ceil_mode"):
            ceil = bool(p.one("ceil_mode"))
        oh, ow = caffe_pool_size(h, kh, ph, sh, ceil), caffe_pool_size(w, kw, pw, sw, ceil)
        # PyTorch's ceil_mode rule differs from Caffe's in one corner (clip without padding),
        # and PyTorch refuses padding over half the kernel; refuse rather than differ.
        if (torch_pool_size(h, kh, ph, sh, ceil), torch_pool_size(w, kw, pw, sw, ceil)) != (oh, ow):
            raise ValueError("PyTorch pooling would give %dx%d, Caffe gives %dx%d"
                             % (torch_pool_size(h, kh, ph, sh, ceil),
                                torch_pool_size(w, kw, pw, sw, ceil), oh, ow))
        if 2 * ph > kh or 2 * pw > kw:
            raise NotImplementedError("pad %dx%d is over half the kernel %dx%d (PyTorch limit)"
                                      % (ph, pw, kh, kw))
        if method == "MAX":
            module = nn.MaxPool2d((kh, kw), (sh, sw), (ph, pw), ceil_mode=ceil)
        else:
            # Caffe divides by the window clipped to the padded image, which is exactly
            # count_include_pad=True in PyTorch (overhang past the padding is not counted).
            module = nn.AvgPool2d((kh, kw), (sh, sw), (ph, pw), ceil_mode=ceil,
                                  count_include_pad=True)
        return module, [[n, c, oh, ow]]

    def _layer_LRN(self, layer, shapes, index):
        p = layer.param.msg("lrn_param")
        size = int(p.one("local_size", 5))
        alpha, beta = float(p.one("alpha", 1.0)), float(p.one("beta", 0.75))
        k = float(p.one("k", 1.0))
        region = _enum(p.one("norm_region", "ACROSS_CHANNELS"), ["ACROSS_CHANNELS",
                                                                  "WITHIN_CHANNEL"])
        if size % 2 == 0:
            raise ValueError("local_size must be odd")
        if region == "ACROSS_CHANNELS":
            # Both Caffe and nn.LocalResponseNorm use k + alpha/size * sum(x^2) over size
            # channels centred on c, with missing channels counted as 0.
            module = nn.LocalResponseNorm(size, alpha=alpha, beta=beta, k=k)
        else:
            module = WithinChannelLRN(size, alpha, beta)
        return module, [shapes[0]]

    def _layer_ReLU(self, layer, shapes, index):
        slope = float(layer.param.msg("relu_param").one("negative_slope", 0.0))
        inplace = self._inplace_ok(index, layer)
        module = nn.LeakyReLU(slope, inplace=inplace) if slope else nn.ReLU(inplace=inplace)
        return module, [shapes[0]]

    def _layer_PReLU(self, layer, shapes, index):
        shared = bool(layer.param.msg("prelu_param").one("channel_shared", False))
        channels = 1 if shared else shapes[0][1]
        module = nn.PReLU(channels, init=0.25)  # Caffe's default filler is also 0.25
        self._record_params(layer, [() if shared else (channels,)])
        blobs = self._blobs_for(layer, 1)
        if blobs is not None:
            with torch.no_grad():
                module.weight.copy_(self._tensor(blobs[0], (channels,), "slope"))
        return module, [shapes[0]]

    def _layer_Sigmoid(self, layer, shapes, index):
        return nn.Sigmoid(), [shapes[0]]

    def _layer_TanH(self, layer, shapes, index):
        return nn.Tanh(), [shapes[0]]

    def _layer_ELU(self, layer, shapes, index):
        alpha = float(layer.param.msg("elu_param").one("alpha", 1.0))
        return nn.ELU(alpha), [shapes[0]]

    def _layer_BNLL(self, layer, shapes, index):
        return nn.Softplus(), [shapes[0]]  # log(1 + exp(x))

    def _layer_AbsVal(self, layer, shapes, index):
        return _Abs(), [shapes[0]]

    def _layer_Power(self, layer, shapes, index):
        p = layer.param.msg("power_param")
        module = Power(float(p.one("power", 1.0)), float(p.one("scale", 1.0)),
                       float(p.one("shift", 0.0)))
        return module, [shapes[0]]

    def _layer_InnerProduct(self, layer, shapes, index):
        p = layer.param.msg("inner_product_param")
        x = shapes[0]
        axis = _canonical_axis(int(p.one("axis", 1)), len(x))
        k = int(np.prod(x[axis:], dtype=np.int64))
        out = int(p.one("num_output"))
        bias = bool(p.one("bias_term", True))
        transpose = bool(p.one("transpose", False))
        wshape = (k, out) if transpose else (out, k)
        self._record_params(layer, [wshape] + ([(out,)] if bias else []), k)
        blobs = self._blobs_for(layer, 2 if bias else 1)
        make = self._maker(blobs)
        linear = make(nn.Linear, k, out, bias=bias)
        if blobs is not None:
            with torch.no_grad():
                weight = self._tensor(blobs[0], wshape, "weight")
                linear.weight.copy_(weight.t() if transpose else weight)
                if bias:
                    linear.bias.copy_(self._tensor(blobs[1], (out,), "bias"))
        # Caffe flattens every dim from `axis` on, C-major, like nn.Flatten(axis).
        module = nn.Sequential(nn.Flatten(axis), linear) if axis < len(x) - 1 else linear
        return module, [x[:axis] + [out]]

    def _layer_Softmax(self, layer, shapes, index):
        axis = _canonical_axis(int(layer.param.msg("softmax_param").one("axis", 1)),
                               len(shapes[0]))
        return nn.Softmax(dim=axis), [shapes[0]]

    def _layer_Dropout(self, layer, shapes, index):
        ratio = float(layer.param.msg("dropout_param").one("dropout_ratio", 0.5))
        return nn.Dropout(ratio), [shapes[0]]  # the identity in eval mode, as in Caffe's TEST

    def _layer_Concat(self, layer, shapes, index):
        p = layer.param.msg("concat_param")
        axis = int(p.one("concat_dim", 1)) if p.has("concat_dim") else int(p.one("axis", 1))
        axis = _canonical_axis(axis, len(shapes[0]))
        out = list(shapes[0])
        for s in shapes[1:]:
            if len(s) != len(out) or any(a != b for d, (a, b) in enumerate(zip(s, out))
                                         if d != axis):
                raise ValueError("bottom shapes %s do not concatenate on axis %d" % (shapes, axis))
            out[axis] += s[axis]
        return Concat(axis), [out]

    def _layer_Eltwise(self, layer, shapes, index):
        p = layer.param.msg("eltwise_param")
        op = _enum(p.one("operation", "SUM"), ["PROD", "SUM", "MAX"])
        coeffs = [float(c) for c in p.many("coeff")]
        if coeffs and op != "SUM":
            raise ValueError("coeff is only for SUM")
        if coeffs and len(coeffs) != len(layer.bottoms):
            raise ValueError("%d coeffs for %d bottoms" % (len(coeffs), len(layer.bottoms)))
        if any(s != shapes[0] for s in shapes):
            raise ValueError("bottom shapes differ: %s" % shapes)
        if len(shapes) < 2:
            raise ValueError("needs at least 2 bottoms")
        if coeffs and all(c == 1.0 for c in coeffs):
            coeffs = []
        return Eltwise(op, coeffs or None), [shapes[0]]

    def _layer_Crop(self, layer, shapes, index):
        p = layer.param.msg("crop_param")
        x, ref = shapes
        axis = _canonical_axis(int(p.one("axis", 2)), len(x))
        count = len(x) - axis
        offsets = [int(o) for o in p.many("offset")]
        if not offsets:
            offsets = [0] * count
        elif len(offsets) == 1:
            offsets = offsets * count
        elif len(offsets) != count:
            raise ValueError("%d offsets for %d cropped dims" % (len(offsets), count))
        out = list(x[:axis]) + list(ref[axis:])
        for i, o in enumerate(offsets):
            if o < 0 or o + ref[axis + i] > x[axis + i]:
                raise ValueError("crop of %d at offset %d exceeds dim %d of size %d"
                                 % (ref[axis + i], o, axis + i, x[axis + i]))
        return Crop(axis, offsets), [out]

    def _layer_Slice(self, layer, shapes, index):
        p = layer.param.msg("slice_param")
        x = shapes[0]
        axis = int(p.one("slice_dim")) if p.has("slice_dim") else int(p.one("axis", 1))
        axis = _canonical_axis(axis, len(x))
        points = [int(s) for s in p.many("slice_point")]
        tops = len(layer.tops)
        if points:
            if len(points) != tops - 1:
                raise ValueError("%d slice points for %d tops" % (len(points), tops))
            edges = [0] + points + [x[axis]]
            sizes = [b - a for a, b in zip(edges, edges[1:])]
            if any(s <= 0 for s in sizes):
                raise ValueError("slice points %s do not increase within %d" % (points, x[axis]))
        else:
            if x[axis] % tops:
                raise ValueError("dim %d of size %d does not split into %d" % (axis, x[axis], tops))
            sizes = [x[axis] // tops] * tops
        outs = []
        for s in sizes:
            o = list(x)
            o[axis] = s
            outs.append(o)
        return Slice(axis, sizes), outs

    def _layer_Split(self, layer, shapes, index):
        return Split(len(layer.tops)), [shapes[0]] * len(layer.tops)

    def _layer_Flatten(self, layer, shapes, index):
        p = layer.param.msg("flatten_param")
        x = shapes[0]
        start = _canonical_axis(int(p.one("axis", 1)), len(x))
        end = _canonical_axis(int(p.one("end_axis", -1)), len(x))
        out = x[:start] + [int(np.prod(x[start:end + 1], dtype=np.int64))] + x[end + 1:]
        return nn.Flatten(start, end), [out]

    def _layer_Reshape(self, layer, shapes, index):
        p = layer.param.msg("reshape_param")
        dims = [int(d) for d in p.msg("shape").many("dim")]
        axis, num_axes = int(p.one("axis", 0)), int(p.one("num_axes", -1))
        return Reshape(dims, axis, num_axes), [caffe_reshape(list(shapes[0]), dims, axis,
                                                             num_axes)]

    def _scale_or_bias(self, layer, shapes, is_scale):
        p = layer.param.msg("scale_param" if is_scale else "bias_param")
        x = shapes[0]
        axis = _canonical_axis(int(p.one("axis", 1)), len(x))
        bias_term = bool(p.one("bias_term", False)) if is_scale else True
        if len(shapes) == 2:
            covered = list(shapes[1])
            if x[axis:axis + len(covered)] != covered:
                raise ValueError("bottom[1] %s does not match bottom[0] %s at axis %d"
                                 % (covered, x, axis))
            blob_shapes = [covered] if (is_scale and bias_term) else []
            module = ScaleBias(axis, covered, scale=False, bias=is_scale and bias_term,
                               scale_from_input=is_scale, bias_from_input=not is_scale)
        else:
            num_axes = int(p.one("num_axes", 1))
            covered = list(x[axis:]) if num_axes == -1 else list(x[axis:axis + num_axes])
            if num_axes != -1 and axis + num_axes > len(x):
                raise ValueError("num_axes %d from axis %d exceeds rank %d"
                                 % (num_axes, axis, len(x)))
            blob_shapes = ([covered] if is_scale else []) + ([covered] if bias_term else [])
            module = ScaleBias(axis, covered, scale=is_scale, bias=bias_term)
        self._record_params(layer, blob_shapes)
        blobs = self._blobs_for(layer, len(blob_shapes))
        if blobs is not None:
            with torch.no_grad():
                i = 0
                if module.weight is not None:
                    module.weight.copy_(self._tensor(blobs[0], covered, "scale"))
                    i = 1
                if module.bias is not None:
                    module.bias.copy_(self._tensor(blobs[i], covered, "bias"))
        return module, [x]

    def _layer_Scale(self, layer, shapes, index):
        return self._scale_or_bias(layer, shapes, True)

    def _layer_Bias(self, layer, shapes, index):
        return self._scale_or_bias(layer, shapes, False)

    def _layer_BatchNorm(self, layer, shapes, index, scale=None):
        p = layer.param.msg("batch_norm_param")
        x = shapes[0]
        channels = x[1] if len(x) > 1 else 1
        eps = float(p.one("eps", 1e-5))
        # Unset use_global_stats means "true in TEST", the phase this module runs in.
        global_stats = bool(p.one("use_global_stats", True))
        affine = scale is not None
        cls = nn.BatchNorm2d if len(x) == 4 else nn.BatchNorm1d
        if len(x) not in (2, 3, 4):
            raise NotImplementedError("BatchNorm on a %d-D blob" % len(x))
        module = cls(channels, eps=eps, affine=affine, track_running_stats=global_stats)
        self._record_params(layer, [(channels,), (channels,), (1,)])
        blobs = self._blobs_for(layer, 3)
        if blobs is not None and global_stats:
            # Caffe stores running sums and their weight s; the statistics are sums / s.
            s = float(np.asarray(blobs[2]).reshape(-1)[0])
            factor = 0.0 if s == 0 else 1.0 / s
            with torch.no_grad():
                module.running_mean.copy_(self._tensor(blobs[0], (channels,), "mean") * factor)
                module.running_var.copy_(self._tensor(blobs[1], (channels,), "variance") * factor)
        if scale is not None:
            sp = scale.param.msg("scale_param")
            bias_term = bool(sp.one("bias_term", False))
            self._record_params(scale, [(channels,)] + ([(channels,)] if bias_term else []))
            sblobs = self._blobs_for(scale, 2 if bias_term else 1)
            with torch.no_grad():
                module.weight.fill_(1.0)
                module.bias.zero_()
                if sblobs is not None:
                    module.weight.copy_(self._tensor(sblobs[0], (channels,), "scale"))
                    if bias_term:
                        module.bias.copy_(self._tensor(sblobs[1], (channels,), "bias"))
        return module, [x]

    def _layer_Silence(self, layer, shapes, index):
        return None, []


def _make_initialized(cls, *args, **kwargs):
    return cls(*args, **kwargs)


def _make_uninitialized(cls, *args, **kwargs):
    """A module whose parameters are about to be overwritten: skip PyTorch's random init.

    Initialising the 100M+ parameters of VGG-style nets on the CPU takes tens of seconds.
    """
    return torch.nn.utils.skip_init(cls, *args, **kwargs)


class _Abs(nn.Module):
    def forward(self, x):
        return torch.abs(x)




# ------------------------------------------------------------------------------------------------
# Random weights with sensible magnitudes
# ------------------------------------------------------------------------------------------------

def random_weights(net, seed=1):
    """{layer: [arrays]} in Caffe's blob shapes, with magnitudes that keep activations O(1).

    Weights are He-normal over the fan-in, so deep nets neither explode nor vanish; BatchNorm
    gets non-trivial statistics (and a scale factor s != 1, so the division by s is exercised);
    Scale gets gamma near 1 and small beta. ``net`` is a CaffeNet (built with weights=None).
    """
    rng = np.random.default_rng(seed)
    weights = {}
    for name, shapes in net.param_shapes.items():
        kind = net.param_types[name]
        blobs = []
        if kind == "BatchNorm":
            c = shapes[0][0]
            s = 2.0
            mean = rng.normal(0.0, 0.2, c) * s
            var = rng.uniform(0.5, 2.0, c) * s
            blobs = [mean, var, np.array([s])]
        elif kind in ("Scale", "Bias"):
            if kind == "Scale" and shapes:
                blobs.append(rng.uniform(0.5, 1.5, shapes[0]))
            if len(shapes) > len(blobs):
                blobs.append(rng.normal(0.0, 0.1, shapes[len(blobs)]))
        elif kind == "PReLU":
            blobs = [rng.uniform(0.1, 0.3, shapes[0])]
        else:  # Convolution, Deconvolution, InnerProduct: weight then optional bias
            wshape = shapes[0]
            fan_in = net.param_fan_in.get(name) or int(np.prod(wshape[1:]))
            std = math.sqrt(2.0 / max(1, fan_in))  # He: unit gain through a ReLU
            blobs.append(rng.standard_normal(wshape, dtype=np.float32) * np.float32(std))
            if len(shapes) > 1:
                blobs.append(rng.normal(0.0, 0.05, shapes[1]))
        weights[name] = [np.asarray(b, dtype=np.float32).reshape(s)
                         for b, s in zip(blobs, shapes)]
    return weights
