"""PyTorch modules for the Caffe layers with no one-line PyTorch equivalent, and Caffe's shape
rules (pooling's ceil rounding and clip, Reshape's 0/-1 entries). Part of the benchmark's
PyTorch side (caffe_torch.py).
"""

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

# ------------------------------------------------------------------------------------------------
# (c) Modules for the Caffe layers that have no one-line PyTorch equivalent
# ------------------------------------------------------------------------------------------------

class Concat(nn.Module):
    def __init__(self, axis):
        super().__init__()
        self.axis = axis

    def forward(self, *xs):
        return torch.cat(xs, dim=self.axis)


class ChannelShuffle(nn.Module):
    """ShuffleNet's ShuffleChannel (a fork's layer): the channels of `group` groups interleaved."""

    def __init__(self, group):
        super().__init__()
        self.group = group

    def forward(self, x):
        n, c = x.shape[0], x.shape[1]
        rest = x.shape[2:]
        return x.reshape(n, self.group, c // self.group, *rest).transpose(1, 2).reshape(
            n, c, *rest)


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

