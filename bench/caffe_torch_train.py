"""Caffe TRAIN-phase nets as ordinary PyTorch modules, for training steps side by side with Kiln.

caffe_torch.CaffeNet builds deploy nets; this module adds what a train prototxt needs on top of it,
written as a PyTorch user would write the net:

* data layers (Data, ImageData, HDF5Data, ...) are not run: their tops become net inputs, with
  shapes the caller gives (the databases they name need not exist);
* SoftmaxWithLoss becomes ``F.cross_entropy`` on the scores and an integer label, with Caffe's
  ``ignore_label`` and ``normalization`` (FULL, VALID, BATCH_SIZE, NONE);
* Accuracy layers are dropped (no gradient; a training loop reports them apart);
* Dropout is ``nn.Dropout`` in train mode, BatchNorm + Scale one affine ``nn.BatchNorm2d`` in
  train mode (batch statistics, running averages kept with Caffe's moving_average_fraction), as in
  caffe_torch; a BatchNorm with ``use_global_stats: true`` is frozen (eval mode) even in train().

``forward(*inputs)`` returns the objective: the sum of every loss top times its loss_weight.

Typical use::

    netdef = train_netdef("lenet_train_test.prototxt", {"data": (64, 1, 28, 28), "label": (64,)})
    net = CaffeTrainNet(netdef).train()
    loss = net(images, labels)      # labels: int64, shape (64,)
    loss.backward()

Layer semantics follow shared/notes/caffe-format.md. Nothing here is copied from another project.
"""

import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import caffe_torch as ct  # noqa: E402  (the path must be set first)
from caffe_modules import _canonical_axis, _enum  # noqa: E402

__all__ = ["DATA_LAYERS", "LOSS_LAYERS", "train_netdef", "CaffeTrainNet", "SoftmaxLoss"]

# Layers that read a database or a file: in this benchmark their tops are inputs instead.
DATA_LAYERS = ("Data", "ImageData", "HDF5Data", "WindowData", "MemoryData", "DummyData",
               "AnnotatedData", "VideoData")
# Layers dropped from the TRAIN net: they have no gradient and feed no other layer.
DROPPED_LAYERS = ("Accuracy",)
# Loss layers this builder knows; their top 0 has loss_weight 1 unless the prototxt says more.
LOSS_LAYERS = ("SoftmaxWithLoss",)


def train_netdef(prototxt, input_shapes, phase="TRAIN", level=0, stages=()):
    """A NetDef of the TRAIN net: data layers replaced by inputs of the given shapes.

    ``input_shapes`` maps every top of every data layer to its shape, e.g. {"data": (N, C, H, W),
    "label": (N,)}; a top without one is an error naming the layer. Net inputs declared in the
    prototxt (``input:`` or Input layers) keep their shapes unless ``input_shapes`` names them.
    """
    netdef = ct.load_net(prototxt, phase=phase, level=level, stages=stages,
                         input_shapes=input_shapes)
    inputs = list(netdef.inputs)
    layers = []
    for layer in netdef.layers:
        if layer.type in DATA_LAYERS:
            for top in layer.tops:
                if top not in input_shapes:
                    raise ValueError("layer '%s' (%s): top '%s' needs a shape (the data layer is "
                                     "replaced by an input)" % (layer.name, layer.type, top))
                if any(top == name for name, _ in inputs):
                    raise ValueError("layer '%s' (%s): top '%s' is already an input"
                                     % (layer.name, layer.type, top))
                inputs.append((top, [int(d) for d in input_shapes[top]]))
            continue
        if layer.type in DROPPED_LAYERS:
            continue
        layers.append(layer)
    return ct.NetDef(netdef.name, inputs, layers)


def loss_weights(layer):
    """{top: weight} of the layer's tops that count in the objective (Caffe's loss_weight rule:
    loss layers default to 1 on top 0, other layers to 0)."""
    given = [float(w) for w in layer.param.many("loss_weight")]
    if given and len(given) != len(layer.tops):
        raise ValueError("%d loss_weight values for %d tops" % (len(given), len(layer.tops)))
    if not given:
        given = [1.0 if (layer.type in LOSS_LAYERS and i == 0) else 0.0
                 for i in range(len(layer.tops))]
    return {top: w for top, w in zip(layer.tops, given) if w != 0.0}


class SoftmaxLoss(nn.Module):
    """Caffe SoftmaxWithLoss: cross entropy of softmax over ``axis`` against an integer label.

    The label has the scores' shape without the axis dim (N for N x K scores); float labels (as
    Caffe's Data layer makes them) are truncated to integers. ``normalization``: VALID divides
    the summed loss by the count of labels that are not ``ignore_label``, FULL by the count of all
    labels, BATCH_SIZE by N, NONE by 1 (never below 1, as in Caffe).
    """

    def __init__(self, axis=1, ignore_label=None, normalization="VALID"):
        super().__init__()
        self.axis, self.ignore_label, self.normalization = axis, ignore_label, normalization

    def forward(self, scores, label):
        if self.axis != 1:
            scores = scores.movedim(self.axis, 1)
        target = label.reshape(scores.shape[:1] + scores.shape[2:])
        if target.dtype != torch.long:
            target = target.long()
        ignore = -100 if self.ignore_label is None else self.ignore_label
        if self.normalization == "VALID":
            return F.cross_entropy(scores, target, ignore_index=ignore)
        total = F.cross_entropy(scores, target, ignore_index=ignore, reduction="sum")
        if self.normalization == "FULL":
            return total / max(1, target.numel())
        if self.normalization == "BATCH_SIZE":
            return total / max(1, scores.shape[0])
        return total  # NONE


class CaffeTrainNet(ct.CaffeNet):
    """A Caffe TRAIN net (from train_netdef) as a PyTorch module whose forward is the objective.

    Weights start from PyTorch's own initialisation unless ``weights`` ({layer: [arrays]}, as
    from a .caffemodel) are given. Attributes beyond CaffeNet's: ``loss_weights`` ({top: weight}
    of the tops that make the objective) and ``frozen_batchnorm`` (names of the layers kept in
    eval mode).
    """

    def __init__(self, netdef, weights=None, **kwargs):
        self.loss_weights = {}
        for layer in netdef.layers:
            self.loss_weights.update(loss_weights(layer))
        if not self.loss_weights:
            raise ValueError("the net has no loss (no SoftmaxWithLoss, no loss_weight)")
        self._frozen = []
        super().__init__(netdef, weights, outputs=list(self.loss_weights), **kwargs)
        self.frozen_batchnorm = [name for name, _ in self._frozen]

    def forward(self, *inputs):
        out = super().forward(*inputs)
        if not isinstance(out, tuple):
            out = (out,)
        total = None
        for value, name in zip(out, self.output_names):
            weight = self.loss_weights[name]
            term = value.sum() if weight == 1.0 else value.sum() * weight
            total = term if total is None else total + term
        return total

    def train(self, mode=True):
        """Train mode everywhere except the BatchNorms that use global statistics in TRAIN."""
        super().train(mode)
        for _, module in getattr(self, "_frozen", ()):
            module.eval()
        return self

    # -- the layers that differ from the deploy builder --------------------------------------

    def _layer_SoftmaxWithLoss(self, layer, shapes, index):
        if len(layer.bottoms) != 2:
            raise ValueError("takes scores and label, got %d bottoms" % len(layer.bottoms))
        if len(layer.tops) != 1:
            raise NotImplementedError("a second top (the probabilities)")
        scores, label = shapes
        axis = _canonical_axis(int(layer.param.msg("softmax_param").one("axis", 1)), len(scores))
        p = layer.param.msg("loss_param")
        if p.has("normalization"):
            normalization = _enum(p.one("normalization"), ["FULL", "VALID", "BATCH_SIZE", "NONE"])
        elif p.has("normalize"):
            normalization = "VALID" if bool(p.one("normalize")) else "BATCH_SIZE"
        else:
            normalization = "VALID"
        ignore = int(p.one("ignore_label")) if p.has("ignore_label") else None
        count = 1
        for i, d in enumerate(scores):
            count *= d if i != axis else 1
        label_count = 1
        for d in label:
            label_count *= d
        if label_count != count:
            raise ValueError("label has %d values, the scores %s need %d (N x spatial)"
                             % (label_count, scores, count))
        return SoftmaxLoss(axis, ignore, normalization), [[]]

    def _layer_BatchNorm(self, layer, shapes, index, scale=None):
        module, outs = super()._layer_BatchNorm(layer, shapes, index, scale)
        p = layer.param.msg("batch_norm_param")
        # In TRAIN an unset use_global_stats means false: batch statistics, running averages
        # updated as Caffe does (new = fraction * old + (1 - fraction) * batch).
        if bool(p.one("use_global_stats", False)):
            self._frozen.append((layer.name, module))
        elif module.track_running_stats:
            module.momentum = 1.0 - float(p.one("moving_average_fraction", 0.999))
        return module, outs
