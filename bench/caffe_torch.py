"""Caffe deploy nets as ordinary PyTorch modules, for side-by-side runs against Kiln.

This module needs only numpy and torch: no protobuf package and no Caffe. It has three parts, (a)
in caffe_text.py, (b) in caffe_blobs.py and the helper modules of (c) in caffe_modules.py; the
net definition (``load_net``: a prototxt reduced to inputs and TEST-phase layers) is in
caffe_netdef.py.

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
import os
import sys

import numpy as np
import torch
from torch import nn

# The parts live beside this file (bench/ is not a package).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from caffe_text import (  # noqa: F401  (some re-exported for the self-test)
    Message, parse_prototxt, load_prototxt)
from caffe_blobs import (  # noqa: F401  (some re-exported for the self-test)
    _read_varint, _signed64, V1_TYPES, V1_TYPE_NAMES, read_caffemodel_layers, load_caffemodel, _varint_bytes,
    _field_bytes, save_caffemodel)
from caffe_modules import (  # noqa: F401  (some re-exported for the self-test)
    ChannelShuffle, Concat, Eltwise, Crop, Slice, Split, Reshape, Power, ScaleBias, WithinChannelLRN,
    caffe_pool_size, torch_pool_size, caffe_reshape, _canonical_axis, _spatial, _enum)
from caffe_netdef import LayerDef, NetDef, load_net  # noqa: F401  (re-exported: ct.load_net)

__all__ = [
    "Message", "parse_prototxt", "load_prototxt",
    "read_caffemodel_layers", "load_caffemodel", "save_caffemodel",
    "NetDef", "LayerDef", "load_net", "CaffeNet", "random_weights", "caffe_pool_size",
]


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

    def _layer_Convolution(self, layer, shapes, index, transposed=False, depthwise=False):
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
        group = c if depthwise else int(p.one("group", 1))
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

    # The forks' layers of ShuffleNet: a convolution with one group per input channel, and the
    # channel shuffle.
    def _layer_ConvolutionDepthwise(self, layer, shapes, index):
        return self._layer_Convolution(layer, shapes, index, depthwise=True)

    def _layer_ShuffleChannel(self, layer, shapes, index):
        group = int(layer.param.msg("shuffle_channel_param").one("group", 1))
        if group < 1 or shapes[0][1] % group:
            raise ValueError("group %d must divide %d channels" % (group, shapes[0][1]))
        return ChannelShuffle(group), [list(shapes[0])]

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
