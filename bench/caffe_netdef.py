"""A Caffe prototxt reduced to what a side-by-side run needs: its inputs and the layers that
survive a phase's include/exclude rules, in order, whichever format generation (V1 ``layers`` or
V2 ``layer``) it is written in. Needs no protobuf package (caffe_text.py parses the text).
"""

from caffe_blobs import V1_TYPES, V1_TYPE_NAMES
from caffe_text import Message, load_prototxt, parse_prototxt

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


