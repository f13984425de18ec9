#!/usr/bin/env python3
"""Writes the public Caffe deploy nets the benchmarks cover beyond ../shared into a folder.

Users bring every family of network, so bench/graph_bench.py runs more than the nets the project
was tuned on: MobileNet v1 and v2 (depthwise), SqueezeNet 1.1 (fire modules), GoogLeNet
(inception), ResNet-50 and ResNet-101 as their authors published them. They are not part of Kiln;
this script fetches each prototxt at a pinned commit, either from GitHub (raw files over HTTPS) or
from local git mirrors (--mirror DIR, with DIR/<owner>+<name>/repo a bare or normal clone, as the
project's fetch tool lays them out), and writes DIR/<name>_deploy.prototxt, the name
graph_bench.py's --rows look up. Weights are not fetched: the benchmark seeds its own.

    python3 bench/public_models.py --out .gpu-nets/models [--mirror /work/.mirror]
"""

import argparse
import os
import subprocess
import sys
import urllib.request

# name, repository, commit, path of the deploy prototxt in it.
MODELS = [
    ("mobilenet", "shicai/MobileNet-Caffe", "a0b0c46152e658559956158d7c2bf42bb029c09e",
     "mobilenet_deploy.prototxt"),
    ("mobilenet_v2", "shicai/MobileNet-Caffe", "a0b0c46152e658559956158d7c2bf42bb029c09e",
     "mobilenet_v2_deploy.prototxt"),
    ("squeezenet_v1.1", "forresti/SqueezeNet", "51147dc0681638c28aad593b9e923f3500117125",
     "SqueezeNet_v1.1/deploy.prototxt"),
    ("googlenet", "BVLC/caffe", "9b891540183ddc834a02b2bd81b31afae71b2153",
     "models/bvlc_googlenet/deploy.prototxt"),
    ("resnet50", "KaimingHe/deep-residual-networks", "a7026cb6d478e131b765b898c312e25f9f6dc031",
     "prototxt/ResNet-50-deploy.prototxt"),
    ("resnet101", "KaimingHe/deep-residual-networks", "a7026cb6d478e131b765b898c312e25f9f6dc031",
     "prototxt/ResNet-101-deploy.prototxt"),
    # The VGG-16 of the ILSVRC-2014 release (V1 layer format), as a project kept it.
    ("vgg16", "pongsate1/fashion-parsing", "4b1b6037582ef97359588902b85774f3ce15418f",
     "models/vgg16/deploy.prototxt"),
    # ShuffleNet v2 1x: the forks' ConvolutionDepthwise and ShuffleChannel layers.
    ("shufflenet_v2", "farmingyard/ShuffleNet", "fe26638adcf90c153e84d857c9adacfec4cb91bc",
     "shufflenet_v2_1x_deploy.prototxt"),
]


def from_mirror(mirror, repo, commit, path):
    top = os.path.join(mirror, repo.replace("/", "+"), "repo")
    git_dir = os.path.join(top, ".git") if os.path.isdir(os.path.join(top, ".git")) else top
    return subprocess.run(["git", "--git-dir", git_dir, "show", "%s:%s" % (commit, path)],
                          check=True, capture_output=True).stdout


def from_github(repo, commit, path):
    url = "https://raw.githubusercontent.com/%s/%s/%s" % (repo, commit, path)
    with urllib.request.urlopen(url, timeout=60) as response:
        return response.read()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder for <name>_deploy.prototxt")
    parser.add_argument("--mirror", help="folder of local git mirrors instead of GitHub")
    parser.add_argument("--only", help="comma-separated names (default: all)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace files already there (default: keep them)")
    args = parser.parse_args()
    wanted = set(args.only.split(",")) if args.only else None
    os.makedirs(args.out, exist_ok=True)
    failures = 0
    for name, repo, commit, path in MODELS:
        if wanted is not None and name not in wanted:
            continue
        dest = os.path.join(args.out, name + "_deploy.prototxt")
        if os.path.exists(dest) and not args.overwrite:
            print("%-16s kept %s (--overwrite replaces it)" % (name, dest))
            continue
        try:
            data = (from_mirror(args.mirror, repo, commit, path) if args.mirror
                    else from_github(repo, commit, path))
        except (OSError, subprocess.CalledProcessError) as e:
            print("%-16s FAILED %s@%s:%s: %s" % (name, repo, commit[:12], path, e),
                  file=sys.stderr)
            failures += 1
            continue
        with open(dest, "wb") as f:
            f.write(data)
        print("%-16s %s@%s:%s -> %s" % (name, repo, commit[:12], path, dest))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
