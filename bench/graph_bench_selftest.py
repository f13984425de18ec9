#!/usr/bin/env python3
"""CPU-only self test of bench/caffe_torch.py and the plumbing of bench/graph_bench.py.

    python3 bench/graph_bench_selftest.py [--models-dir ../shared/models/caffe] [--quick]

It checks, without a GPU, Caffe or protobuf:
* the prototxt reader on awkward text (comments, escapes, list syntax, enums, V1 files);
* the wire decoder: round trips through caffe_torch's encoder (V2 packed, V2 unpacked, V1
  legacy dims), hand-made bytes (double_data, unknown fields), and the real lenet caffemodels;
* every listed deploy net builds at batch 1 with random weights that went through a caffemodel,
  runs with per-blob shape checks, and ends in the output shape derived by hand from Caffe's rules;
* the Caffe-specific layer semantics (pooling rounding and divisors, LRN, BatchNorm statistics
  and the BN+Scale fusion, Eltwise, Crop, Slice, Power, Reshape, Deconvolution, the in-place ReLU
  aliasing rule) against small numpy references;
* graph_bench.py's tables, summary and progress lines, its torch.compile column with a stand-in
  compiler and its error paths, and the script end to end on the CPU against a stand-in `kiln`
  script (--torch-device cpu), both Kiln variants (--optimize off/on); with --kiln PATH, also
  against a real kiln binary on the CPU (outputs must agree). Those checks are in
  graph_bench_selftest_driver.py.
Exits non-zero on the first failure.
"""

import argparse
import math
import os
import struct
import sys
import textwrap
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import caffe_torch as ct  # noqa: E402
import graph_bench_selftest_driver as driver  # noqa: E402

DEFAULT_MODELS = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "models", "caffe"))
_checks = [0]


def check(condition, message):
    if not condition:
        raise AssertionError(message)
    _checks[0] += 1


def close(a, b, tol, what):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    check(a.shape == b.shape, "%s: shape %s vs %s" % (what, a.shape, b.shape))
    err = float(np.max(np.abs(a - b))) if a.size else 0.0
    check(err <= tol * max(1.0, float(np.max(np.abs(b))) if b.size else 1.0),
          "%s: max error %.3g" % (what, err))


# ------------------------------------------------------------------------------------------------
# Prototxt reader
# ------------------------------------------------------------------------------------------------

def test_prototxt():
    text = textwrap.dedent(r'''
        # leading comment
        name: "net" "work"   # adjacent strings join
        input: 'data'
        input_dim: 1 input_dim: 3; input_dim: 8, input_dim: 8
        layer {
          name: "a\"b\\c\n\101\x42"
          type: "Convolution"
          convolution_param: { num_output: 16 pad: [1, 2] kernel_size: 3 bias_term: false
                               weight_filler < type: "gaussian" std: 1e-2 > }
          param { lr_mult: 1.5 } param { lr_mult: -2 }
        }
        layer { name: "p" type: "Pooling" pooling_param { pool: AVE round_mode: FLOOR } }
        x: inf y: -inf z: 0x1F w: 1.0f v: True
    ''')
    msg = ct.parse_prototxt(text)
    check(msg.one("name") == "network", "adjacent strings")
    check(msg.many("input_dim") == [1, 3, 8, 8], "separators ; and ,")
    conv = msg.many("layer")[0]
    check(conv.one("name") == 'a"b\\c\nAB', "escapes: %r" % conv.one("name"))
    cp = conv.msg("convolution_param")
    check(cp.many("pad") == [1, 2] and cp.one("num_output") == 16, "list syntax")
    check(cp.one("bias_term") is False, "bool")
    check(cp.msg("weight_filler").one("std") == 0.01, "angle brackets and exponents")
    check([p.one("lr_mult") for p in conv.many("param")] == [1.5, -2], "repeated messages")
    pool = msg.many("layer")[1].msg("pooling_param")
    check(pool.one("pool") == "AVE" and pool.one("round_mode") == "FLOOR", "enums stay words")
    check(msg.one("x") == math.inf and msg.one("y") == -math.inf and msg.one("z") == 31, "numbers")
    check(msg.one("w") == 1.0 and msg.one("v") is True, "1.0f and True")
    check(msg.msg("absent").one("k", 7) == 7, "defaults through absent blocks")
    for bad in ("layer { name: 'x' ", "a: }", "a { b: 1 } }", 'a: "unterminated'):
        try:
            ct.parse_prototxt(bad)
        except ValueError:
            _checks[0] += 1
        else:
            raise AssertionError("accepted bad text %r" % bad)
    return "prototxt reader: %d cases" % 16


# ------------------------------------------------------------------------------------------------
# Wire format
# ------------------------------------------------------------------------------------------------

def _varint(v):
    return ct._varint_bytes(v)


def test_wire(models_dir):
    rng = np.random.default_rng(0)
    weights = {
        "conv": [rng.standard_normal((4, 3, 3, 3), dtype=np.float32),
                 rng.standard_normal(4, dtype=np.float32)],
        "ip": [rng.standard_normal((5, 36), dtype=np.float32)],
        "bn": [rng.standard_normal(4).astype(np.float32), np.ones(4, np.float32),
               np.array([3.0], np.float32)],
        "empty_shape": [np.array(2.5, dtype=np.float32)],
    }
    types = {"conv": "Convolution", "ip": "InnerProduct", "bn": "BatchNorm"}
    for label, kwargs in (("V2 packed", {}), ("V2 unpacked", {"packed": False}),
                          ("V1 legacy dims", {"v1": True}), ("V1 unpacked", {"v1": True,
                                                                             "packed": False})):
        data = ct.save_caffemodel(None, weights, types=types, net_name="t", **kwargs)
        layers = ct.read_caffemodel_layers(data)
        check([n for n, _, _ in layers] == list(weights), "%s: names" % label)
        check(dict((n, t) for n, t, _ in layers)["conv"] == "Convolution", "%s: types" % label)
        decoded = ct.load_caffemodel(data)
        for name, blobs in weights.items():
            for a, b in zip(blobs, decoded[name]):
                check(np.array_equal(a.reshape(-1), b.reshape(-1)), "%s: %s values" % (label, name))
                if kwargs.get("v1"):
                    # Legacy dims are right-aligned in 4-D, as V1 files store them.
                    check(b.shape == (1,) * (4 - a.ndim) + a.shape,
                          "%s: %s legacy shape %s" % (label, name, b.shape))
                else:
                    check(b.shape == a.shape, "%s: %s shape %s" % (label, name, b.shape))

    # Hand-made bytes: double_data wins, unknown fields (bottom, diff, a fixed64) are skipped,
    # packed int64 dims, a negative varint in a legacy field.
    doubles = np.array([1.25, -2.5, 3.75, 1e-3], dtype="<f8")
    blob = (ct._field_bytes(7, ct._field_bytes(1, _varint(2) + _varint(2)))
            + ct._field_bytes(5, np.zeros(4, "<f4").tobytes())
            + ct._field_bytes(6, np.ones(4, "<f4").tobytes())
            + ct._field_bytes(8, doubles.tobytes())
            + _varint((9 << 3) | 1) + struct.pack("<d", 7.0))
    layer = (ct._field_bytes(1, b"L") + ct._field_bytes(3, b"bottom")
             + _varint((10 << 3) | 0) + _varint(1) + ct._field_bytes(7, blob))
    net = ct._field_bytes(1, b"n") + ct._field_bytes(100, layer)
    got = ct.load_caffemodel(net)["L"][0]
    check(got.shape == (2, 2) and np.allclose(got.reshape(-1), doubles), "double_data wins")
    legacy = (_varint(1 << 3) + _varint(1) + _varint(2 << 3) + _varint(2)
              + _varint(3 << 3) + _varint(1) + _varint(4 << 3) + _varint(2)
              + _varint((8 << 3) | 1) + struct.pack("<d", 1.0) + _varint((8 << 3) | 1)
              + struct.pack("<d", 2.0) + _varint((8 << 3) | 1) + struct.pack("<d", 3.0)
              + _varint((8 << 3) | 1) + struct.pack("<d", 4.0))
    got = ct.load_caffemodel(ct._field_bytes(100, ct._field_bytes(1, b"D")
                                             + ct._field_bytes(7, legacy)))["D"][0]
    check(got.shape == (1, 2, 1, 2) and got.reshape(-1).tolist() == [1, 2, 3, 4],
          "unpacked doubles + legacy dims")
    check(ct._read_varint(_varint(-5), 0)[0] == (1 << 64) - 5, "10-byte negative varint")
    check(ct._signed64(ct._read_varint(_varint(-5), 0)[0]) == -5, "signed varint")

    # Real files.
    lenet = ct.read_caffemodel_layers(os.path.join(models_dir, "lenet_iter_10000.caffemodel"))
    shapes = {n: [b.shape for b in blobs] for n, _, blobs in lenet if blobs}
    expected = {"conv1": [(20, 1, 5, 5), (20,)], "conv2": [(50, 20, 5, 5), (50,)],
                "ip1": [(500, 800), (500,)], "ip2": [(10, 500), (10,)]}
    check(shapes == expected, "lenet_iter_10000 blob shapes: %s" % shapes)
    count = sum(b.size for _, _, blobs in lenet for b in blobs)
    check(count == 431080, "lenet float count %d" % count)
    check(dict((n, t) for n, t, _ in lenet)["conv1"] == "Convolution", "V2 type string")
    v1 = ct.read_caffemodel_layers(os.path.join(models_dir, "v1_lenet_iter_10000.caffemodel"))
    v1_shapes = {n: [b.shape for b in blobs] for n, _, blobs in v1 if blobs}
    check(v1_shapes["conv1"] == [(20, 1, 5, 5), (1, 1, 1, 20)], "V1 legacy conv1 %s"
          % v1_shapes["conv1"])
    check(v1_shapes["ip1"] == [(1, 1, 500, 800), (1, 1, 1, 500)], "V1 legacy ip1")
    check(dict((n, t) for n, t, _ in v1)["conv1"] == "Convolution", "V1 enum type")
    cifar = ct.load_caffemodel(os.path.join(models_dir, "v1_cifar10_quick_iter_5000.caffemodel"))
    check(sum(b.size for blobs in cifar.values() for b in blobs) == 145578, "cifar float count")
    rnet = ct.load_caffemodel(os.path.join(models_dir, "mtcnn_det2_rnet.caffemodel"))
    check("conv5-3" in rnet, "rnet caffemodel has the extra conv5-3 layer")
    return ("wire decoder: 4 encodings round-trip, hand-made bytes, lenet %s, v1_lenet legacy "
            "dims, cifar10 %d floats" % (sorted(expected), 145578))


# ------------------------------------------------------------------------------------------------
# Whole nets
# ------------------------------------------------------------------------------------------------

# Output shapes at batch 1, derived by hand from Caffe's rules (conv floors, pooling ceils):
# * lenet: 28 -conv5-> 24 -pool2/2-> 12 -conv5-> 8 -pool-> 4; ip2 10 -> prob 1x10.
# * cifar10_quick: 32 -conv5 pad2-> 32 -pool3/2 (ceil)-> 16 -> 16 -> 8 -> 8 -> 4;
#   64*4*4 -> 64 -> 10.
# * caffenet/alexnet: 227 -conv11/4-> 55 -pool3/2-> 27 -> 27 -> 13 -> 13 -> 6; 256*6*6 -> 1000.
# * resnet18: 224 -conv7/2-> 112 -pool3/2 (ceil)-> 56 -> 28 -> 14 -> 7 -pool7 AVE-> 1; fc 1000.
# * densenet121: 224 -> 112 -pool3/2 pad1 FLOOR-> 56 (CEIL would give ceil(111/2)+1 = 57)
#   -> 28 -> 14 -> 7 -global AVE-> 1; fc6 is a 1x1 conv, so the output is 1x1000x1x1.
# * resnet10_preact_cvgj: ... -> 7 -global-> 1, ip 1000 -> softmax 1x1000.
# * mtcnn pnet: 12 -conv3-> 10 -pool2/2-> 5 -conv3-> 3 -conv3-> 1; prob1 = softmax(conv4-1) 1x2x1x1.
# * mtcnn rnet: 24 -> 22 -pool3/2 ceil-> 11 -> 9 -pool3/2-> 4 -conv2-> 3; 64*3*3 -> 128 -> 2.
# * fcn8s at HxW: the final Crop takes the data blob's size: 1x21xHxW.
EXPECTED = {
    "lenet": ((1, 10), {"pool2": (1, 50, 4, 4)}),
    "cifar10_quick": ((1, 10), {"pool1": (1, 32, 16, 16), "pool3": (1, 64, 4, 4)}),
    "caffenet_deploy": ((1, 1000), {"pool5": (1, 256, 6, 6), "norm2": (1, 256, 13, 13)}),
    "alexnet_deploy": ((1, 1000), {"pool5": (1, 256, 6, 6)}),
    "resnet18_deploy": ((1, 1000), {"pool1": (1, 64, 56, 56), "res5b": (1, 512, 7, 7),
                                    "pool5": (1, 512, 1, 1)}),
    "densenet121_deploy": ((1, 1000, 1, 1), {"pool1": (1, 64, 56, 56),
                                             "conv2_blk": (1, 128, 56, 56),
                                             "pool5": (1, 1024, 1, 1)}),
    "resnet10_preact_cvgj_deploy": ((1, 1000), {"conv1_pool": (1, 64, 56, 56)}),
    "mtcnn_det1_pnet": ((1, 2, 1, 1), {"conv4-2": (1, 4, 1, 1), "pool1": (1, 10, 5, 5)}),
    "mtcnn_det2_rnet": ((1, 2), {"pool1": (1, 28, 11, 11), "pool2": (1, 48, 4, 4),
                                 "conv3": (1, 64, 3, 3)}),
    "v1_lenet": ((1, 10), {}),
    "v1_cifar10_quick": ((1, 10), {"pool1": (1, 32, 16, 16)}),
    "v1_caffenet_deploy": ((1, 1000), {"pool5": (1, 256, 6, 6)}),
}
FCN_SIZE = 64


def build_and_run(models_dir, name, input_shapes=None):
    """Random weights -> caffemodel bytes -> decoder -> CaffeNet; one shape-checked forward."""
    netdef = ct.load_net(os.path.join(models_dir, name + ".prototxt"), batch=1,
                         input_shapes=input_shapes)
    shapes_only = ct.CaffeNet(netdef, init_weights=False)
    weights = ct.random_weights(shapes_only, seed=3)
    decoded = ct.load_caffemodel(ct.save_caffemodel(None, weights, shapes_only.param_types))
    net = ct.CaffeNet(netdef, decoded).eval()
    net.check_shapes = True
    x = torch.from_numpy(np.random.default_rng(1).standard_normal(netdef.inputs[0][1],
                                                                  dtype=np.float32))
    with torch.inference_mode():
        y = net(x)
    check(torch.isfinite(y).all().item(), "%s: non-finite output" % name)
    return net, y


def test_models(models_dir, quick):
    lines = []
    names = list(EXPECTED) + ["fcn8s_voc_deploy"]
    if quick:
        names = ["lenet", "cifar10_quick", "mtcnn_det1_pnet", "mtcnn_det2_rnet", "v1_lenet"]
    for name in names:
        start = time.time()
        if name == "fcn8s_voc_deploy":
            net, y = build_and_run(models_dir, name, {"data": (1, 3, FCN_SIZE, FCN_SIZE)})
            want, inner = (1, 21, FCN_SIZE, FCN_SIZE), {"score_fr": net.blob_shapes["score_fr"]}
        else:
            net, y = build_and_run(models_dir, name)
            want, inner = EXPECTED[name]
        check(tuple(y.shape) == want, "%s: output %s, expected %s" % (name, tuple(y.shape), want))
        for blob, shape in inner.items():
            check(net.blob_shapes[blob] == shape, "%s: %s is %s, expected %s"
                  % (name, blob, net.blob_shapes[blob], shape))
        fused = sum(1 for s in net._steps if s.type == "BatchNorm+Scale")
        lines.append("  %-28s -> %-18s %3d steps%s (%.1fs)" % (
            name, "x".join(map(str, want)), len(net._steps),
            ", %d BN+Scale fused" % fused if fused else "", time.time() - start))
    return "nets (batch 1, random weights via caffemodel, every blob shape-checked):\n" + \
        "\n".join(lines)


def test_real_weights(models_dir):
    """The shipped trained caffemodels load and give probability distributions."""
    out = []
    for proto, model, blob in (("lenet", "lenet_iter_10000", "prob"),
                               ("v1_lenet", "v1_lenet_iter_10000", "prob"),
                               ("v1_cifar10_quick", "v1_cifar10_quick_iter_5000", "prob"),
                               ("mtcnn_det1_pnet", "mtcnn_det1_pnet", "prob1"),
                               ("mtcnn_det2_rnet", "mtcnn_det2_rnet", "prob1")):
        net = ct.CaffeNet.from_files(os.path.join(models_dir, proto + ".prototxt"),
                                     os.path.join(models_dir, model + ".caffemodel"),
                                     batch=2).eval()
        x = torch.from_numpy(np.random.default_rng(2).uniform(
            0, 1, net.input_shapes[0]).astype(np.float32))
        with torch.inference_mode():
            y = net(x)
        sums = y.sum(dim=1)
        check(torch.allclose(sums, torch.ones_like(sums), atol=1e-5), "%s: softmax sums" % proto)
        out.append(proto)
    # A blank and a "1"-like stroke must not get the same LeNet answer (the weights are real).
    net = ct.CaffeNet.from_files(os.path.join(models_dir, "lenet.prototxt"),
                                 os.path.join(models_dir, "lenet_iter_10000.caffemodel"),
                                 batch=1).eval()
    img = np.zeros((1, 1, 28, 28), np.float32)
    img[0, 0, 4:24, 13:15] = 1.0
    with torch.inference_mode():
        digit = int(net(torch.from_numpy(img)).argmax())
    return "trained weights: %s load and give distributions; LeNet reads a vertical bar as %d" % (
        ", ".join(out), digit)


# ------------------------------------------------------------------------------------------------
# Layer semantics against numpy
# ------------------------------------------------------------------------------------------------

def pool_ref(x, k, s, p, method, ceil=True):
    """Caffe's pooling loop, literally: window clipped to H+pad for the divisor, to H for data."""
    n, c, h, w = x.shape

    def size(d):
        out = (math.ceil if ceil else math.floor)((d + 2 * p - k) / s) + 1
        if p > 0 and (out - 1) * s >= d + p:
            out -= 1
        return out

    oh, ow = size(h), size(w)
    y = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            h0, w0 = i * s - p, j * s - p
            h1, w1 = min(h0 + k, h + p), min(w0 + k, w + p)
            area = (h1 - h0) * (w1 - w0)
            h0, w0, h1, w1 = max(h0, 0), max(w0, 0), min(h1, h), min(w1, w)
            window = x[:, :, h0:h1, w0:w1]
            y[:, :, i, j] = window.max(axis=(2, 3)) if method == "MAX" else \
                window.sum(axis=(2, 3)) / area
    return y


def lrn_ref(x, n, alpha, beta, k):
    sq = np.pad(x ** 2, ((0, 0), ((n - 1) // 2, (n - 1) // 2), (0, 0), (0, 0)))
    total = sum(sq[:, i:i + x.shape[1]] for i in range(n))
    return x * (k + alpha / n * total) ** -beta


def deconv_ref(x, w, s, p):
    """Caffe's Deconvolution by scattering: weight is (C_in, C_out, k, k)."""
    n, c, h, wd = x.shape
    _, o, k, _ = w.shape
    full = np.zeros((n, o, (h - 1) * s + k, (wd - 1) * s + k))
    for i in range(h):
        for j in range(wd):
            full[:, :, i * s:i * s + k, j * s:j * s + k] += np.einsum(
                "nc,cokl->nokl", x[:, :, i, j], w)
    return full[:, :, p:full.shape[2] - p, p:full.shape[3] - p]


SEMANTICS_NET = """
name: "semantics"
input: "data"
input_shape { dim: 2 dim: 4 dim: 8 dim: 8 }
layer { name: "bn" type: "BatchNorm" bottom: "data" top: "bn" batch_norm_param { eps: 0.001 } }
layer { name: "sc" type: "Scale" bottom: "bn" top: "bn" scale_param { bias_term: true } }
layer { name: "lrn" type: "LRN" bottom: "bn" top: "lrn"
        lrn_param { local_size: 3 alpha: 0.5 beta: 0.75 k: 2 } }
layer { name: "maxp" type: "Pooling" bottom: "lrn" top: "maxp"
        pooling_param { pool: MAX kernel_size: 3 stride: 2 pad: 1 } }
layer { name: "avep" type: "Pooling" bottom: "lrn" top: "avep"
        pooling_param { pool: AVE kernel_size: 3 stride: 2 pad: 1 } }
layer { name: "avep0" type: "Pooling" bottom: "lrn" top: "avep0"
        pooling_param { pool: AVE kernel_size: 3 stride: 2 } }
layer { name: "clip" type: "Pooling" bottom: "maxp" top: "clip"
        pooling_param { pool: MAX kernel_size: 2 stride: 2 pad: 1 } }
layer { name: "floor" type: "Pooling" bottom: "lrn" top: "floor"
        pooling_param { pool: AVE kernel_size: 3 stride: 2 pad: 1 round_mode: FLOOR } }
layer { name: "sum" type: "Eltwise" bottom: "maxp" bottom: "avep" top: "sum"
        eltwise_param { operation: SUM coeff: 0.5 coeff: -2 } }
layer { name: "emax" type: "Eltwise" bottom: "maxp" bottom: "avep" top: "emax"
        eltwise_param { operation: MAX } }
layer { name: "drop" type: "Dropout" bottom: "sum" top: "d" }
layer { name: "relu" type: "ReLU" bottom: "d" top: "d" }
layer { name: "prod" type: "Eltwise" bottom: "sum" bottom: "d" top: "prod"
        eltwise_param { operation: PROD } }
layer { name: "leaky" type: "ReLU" bottom: "prod" top: "prod" relu_param { negative_slope: 0.1 } }
layer { name: "cat" type: "Concat" bottom: "prod" bottom: "emax" top: "cat" }
layer { name: "sl" type: "Slice" bottom: "cat" top: "s0" top: "s1" top: "s2"
        slice_param { slice_point: 2 slice_point: 5 } }
layer { name: "conv" type: "Convolution" bottom: "s1" top: "conv"
        convolution_param { num_output: 6 kernel_size: 3 group: 3 } }
layer { name: "prelu" type: "PReLU" bottom: "conv" top: "conv" }
layer { name: "crop" type: "Crop" bottom: "s2" bottom: "conv" top: "crop"
        crop_param { axis: 2 offset: 1 offset: 2 } }
layer { name: "pow" type: "Power" bottom: "crop" top: "pow"
        power_param { power: 2 scale: 0.5 shift: 1 } }
layer { name: "up" type: "Deconvolution" bottom: "conv" top: "up"
        convolution_param { num_output: 2 kernel_size: 4 stride: 2 pad: 1 bias_term: false } }
layer { name: "bn2" type: "BatchNorm" bottom: "up" top: "bn2" }
layer { name: "flat" type: "Flatten" bottom: "pow" top: "flat" }
layer { name: "ip" type: "InnerProduct" bottom: "flat" top: "ip"
        inner_product_param { num_output: 5 transpose: true } }
layer { name: "rs" type: "Reshape" bottom: "ip" top: "rs"
        reshape_param { shape { dim: 0 dim: -1 dim: 1 } } }
layer { name: "scale2" type: "Scale" bottom: "rs" top: "scale2" scale_param { axis: 1 } }
layer { name: "prob" type: "Softmax" bottom: "scale2" top: "prob" }
"""


def test_semantics():
    netdef = ct.load_net(SEMANTICS_NET)
    probe = ct.CaffeNet(netdef, init_weights=False)
    weights = ct.random_weights(probe, seed=5)
    blobs = ["data", "bn", "lrn", "maxp", "avep", "avep0", "clip", "floor", "sum", "emax", "d",
             "prod", "cat", "s0", "s1", "s2", "conv", "crop", "pow", "up", "bn2", "ip", "rs",
             "scale2", "prob"]
    x = np.random.default_rng(4).standard_normal((2, 4, 8, 8)).astype(np.float32) * 2
    results = {}
    for fuse in (True, False):
        net = ct.CaffeNet(netdef, weights, outputs=blobs, fuse_bn_scale=fuse).eval()
        net.check_shapes = True
        with torch.inference_mode():
            out = net(torch.from_numpy(x))
        results[fuse] = {b: t.double().numpy() for b, t in zip(blobs, out)}
        kinds = [s.type for s in net._steps]
        check(("BatchNorm+Scale" in kinds) == fuse, "fusion switch")
    r = results[True]
    for b in blobs:
        close(results[False][b], r[b], 1e-5, "fused vs unfused BN+Scale: " + b)
    w = {k: [np.asarray(a, np.float64) for a in v] for k, v in weights.items()}
    mean, var = w["bn"][0] / w["bn"][2][0], w["bn"][1] / w["bn"][2][0]
    g, beta = w["sc"]
    bn = ((x - mean[None, :, None, None]) / np.sqrt(var + 1e-3)[None, :, None, None]
          * g[None, :, None, None] + beta[None, :, None, None])
    close(r["bn"], bn, 1e-5, "BatchNorm (sums / scale factor) + Scale")
    close(r["lrn"], lrn_ref(r["bn"], 3, 0.5, 0.75, 2.0), 1e-5, "LRN across channels")
    close(r["maxp"], pool_ref(r["lrn"], 3, 2, 1, "MAX"), 1e-6, "MAX pool pad 1 ceil")
    close(r["avep"], pool_ref(r["lrn"], 3, 2, 1, "AVE"), 1e-6, "AVE pool divisor incl. pad")
    close(r["avep0"], pool_ref(r["lrn"], 3, 2, 0, "AVE"), 1e-6, "AVE pool ceil overhang")
    check(r["avep0"].shape[2:] == (4, 4), "ceil: 8 -> 4 (floor would give 3)")
    close(r["clip"], pool_ref(r["maxp"], 2, 2, 1, "MAX"), 1e-6, "pooling clip rule")
    check(r["clip"].shape[2:] == (3, 3), "clip rule: 5 -> 3 (ceil alone gives 4)")
    close(r["floor"], pool_ref(r["lrn"], 3, 2, 1, "AVE", ceil=False), 1e-6, "round_mode FLOOR")
    check(r["floor"].shape[2:] == (4, 4), "FLOOR: 8 -> 4")
    close(r["sum"], 0.5 * r["maxp"] - 2 * r["avep"], 1e-6, "Eltwise SUM with coeff")
    close(r["emax"], np.maximum(r["maxp"], r["avep"]), 0, "Eltwise MAX")
    # Dropout's top is a copy in Caffe, so the in-place ReLU on it must leave "sum" alone.
    close(r["d"], np.maximum(r["sum"], 0), 1e-6, "ReLU after Dropout")
    prod = r["sum"] * np.maximum(r["sum"], 0)
    close(r["prod"], np.where(prod > 0, prod, 0.1 * prod), 1e-6, "PROD + leaky ReLU (aliasing)")
    close(r["cat"], np.concatenate([r["prod"], r["emax"]], axis=1), 0, "Concat")
    close(r["s1"], r["cat"][:, 2:5], 0, "Slice points")
    check(r["s0"].shape[1] == 2 and r["s2"].shape[1] == 3, "Slice sizes")
    cw, cb = w["conv"]
    conv = F.conv2d(torch.from_numpy(r["s1"]), torch.from_numpy(cw), torch.from_numpy(cb),
                    groups=3).numpy()
    slope = w["prelu"][0][None, :, None, None]
    close(r["conv"], np.where(conv > 0, conv, slope * conv), 1e-5, "grouped conv + PReLU")
    close(r["crop"], r["s2"][:, :, 1:1 + 3, 2:2 + 3], 0, "Crop with two offsets")
    close(r["pow"], (1 + 0.5 * r["crop"]) ** 2, 1e-6, "Power")
    close(r["up"], deconv_ref(r["conv"], w["up"][0], 2, 1), 1e-5, "Deconvolution")
    m2, v2 = w["bn2"][0] / w["bn2"][2][0], w["bn2"][1] / w["bn2"][2][0]
    close(r["bn2"], (r["up"] - m2[None, :, None, None]) / np.sqrt(v2 + 1e-5)[None, :, None, None],
          1e-5, "BatchNorm alone")
    close(r["ip"], r["pow"].reshape(2, -1) @ w["ip"][0] + w["ip"][1], 1e-5,
          "InnerProduct transpose")
    close(r["rs"], r["ip"].reshape(2, 5, 1), 0, "Reshape 0/-1")
    close(r["scale2"], r["rs"] * w["scale2"][0][None, :, None], 1e-6, "Scale alone")
    e = np.exp(r["scale2"] - r["scale2"].max(axis=1, keepdims=True))
    close(r["prob"], e / e.sum(axis=1, keepdims=True), 1e-6, "Softmax")
    return ("layer semantics vs numpy: BN sums/s + Scale (fused and not), LRN, MAX/AVE pooling "
            "(pad, ceil overhang, clip rule, FLOOR), Eltwise SUM/PROD/MAX, Dropout+in-place ReLU "
            "aliasing, Concat, Slice, grouped conv, PReLU, Crop, Power, Deconvolution, BN alone, "
            "IP transpose, Reshape, Scale alone, Softmax")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models-dir", default=DEFAULT_MODELS)
    parser.add_argument("--quick", action="store_true", help="small nets only")
    parser.add_argument("--kiln", help="also run graph_bench.py on the CPU with this kiln binary")
    args = parser.parse_args()
    torch.manual_seed(0)
    start = time.time()
    steps = [("prototxt", test_prototxt), ("wire", lambda: test_wire(args.models_dir)),
             ("semantics", test_semantics), ("real weights", lambda: test_real_weights(
                 args.models_dir)),
             ("models", lambda: test_models(args.models_dir, args.quick)),
             ("report", driver.test_report),
             ("compile column", lambda: driver.test_compile_column(args.models_dir)),
             ("driver", lambda: driver.test_driver(args.models_dir))]
    if args.kiln:
        steps.append(("real kiln", lambda: driver.test_real_kiln(args.models_dir,
                                                                 os.path.abspath(args.kiln))))
    for name, fn in steps:
        t = time.time()
        summary = fn()
        print("ok  %s [%.1fs]" % (summary, time.time() - t), flush=True)
    print("graph_bench_selftest: all %d checks passed in %.1fs (torch %s, numpy %s)"
          % (_checks[0] + driver.checks[0], time.time() - start, torch.__version__, np.__version__), flush=True)


if __name__ == "__main__":
    main()
