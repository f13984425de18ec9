"""A pycaffe-style script with Kiln: LeNet's blobs and parameters as NumPy arrays, a forward on
a few images, a weight changed in place, and a backward through a TRAIN-phase net.

    python3 examples/python/lenet_pycaffe.py [--models ../shared/models/caffe] [--device cpu]
"""
import argparse
import os

import numpy as np

import kiln

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=os.path.join(os.path.dirname(REPO), "shared",
                                                         "models", "caffe"))
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()

    net = kiln.Net(os.path.join(args.models, "lenet.prototxt"),
                   os.path.join(args.models, "lenet_iter_10000.caffemodel"), kiln.TEST,
                   device=args.device, batch=4)
    print(net.describe())
    for name, blob in net.blobs.items():
        print("  blob  %-6s %s" % (name, blob.data.shape))
    for layer, blobs in net.params.items():
        print("  param %-6s %s" % (layer, [b.data.shape for b in blobs]))

    images = np.random.default_rng(0).random((4, 1, 28, 28), dtype=np.float32)
    prob = net.forward(data=images)["prob"]
    print("classes:", prob.argmax(axis=1).tolist(), "max prob:", prob.max(axis=1).round(3))

    # Surgery: push every answer to class 7 through the last bias; the next pass uses it.
    net.params["ip2"][1].data[7] += 100
    print("after setting ip2's bias[7]:", net.forward()["prob"].argmax(axis=1).tolist())

    # A TRAIN-phase net computes diffs: the loss of labels 0..3 with respect to the pixels.
    train = kiln.Net(os.path.join(REPO, "examples", "python", "lenet_with_loss.prototxt"),
                     os.path.join(args.models, "lenet_iter_10000.caffemodel"), kiln.TRAIN,
                     device=args.device)
    train.forward(data=images, label=np.arange(4, dtype=np.float32))
    grads = train.backward()
    print("loss %.4f, |d loss / d data| %.4g, |d loss / d conv1| %.4g" % (
        float(train.blobs["loss"].data), np.abs(grads["data"]).sum(),
        np.abs(train.params["conv1"][0].diff).sum()))


if __name__ == "__main__":
    main()
