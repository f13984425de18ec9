#!/usr/bin/env python3
"""What the compiler makes of every shared deploy net: `kiln compile --json` per net, a table of
steps, fused kernels and planned activation memory against what Caffe allocates, and the
structural checks of the fusion issue (AlexNet: conv+ReLU fused, no Dropout; ResNet-18:
BatchNorm+Scale folded, residual add+ReLU inside a convolution; DenseNet-121: no Concat step;
planned <= 1/3 of naive for nets of 20 or more layers, below naive for all).

Usage: compile_report.py --kiln BIN --models-dir DIR [--batch N] [--kiln-args "..."]
Exit status 1 when a check fails."""
import argparse
import glob
import json
import os
import shlex
import subprocess
import sys


def compile_net(kiln, prototxt, batch, extra):
    cmd = [kiln, "compile", "--model", prototxt, "--batch", str(batch), "--fill-seed", "1",
           "--json"] + extra
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        return None, done.stderr.strip().splitlines()[-1:] or ["exit %d" % done.returncode]
    return json.loads(done.stdout), None


def layers_of(report, layer_type_prefix):
    return [k for k in report["kernels"] if any(l.startswith(layer_type_prefix) for l in k["layers"])]


def checks_for(name, report):
    """(description, passed) pairs for the nets the issue names."""
    kernels = report["kernels"]
    names = [l for k in kernels for l in k["layers"]]
    out = []
    if name == "alexnet_deploy":
        fused = [k for k in kernels if any(l.startswith("conv") for l in k["layers"])
                 and any(l.startswith("relu") for l in k["layers"])]
        out.append(("conv+ReLU fused (%d kernels)" % len(fused), len(fused) == 5))
        out.append(("no Dropout step", not any(l.startswith("drop") for l in names)))
    if name == "resnet18_deploy":
        bn_alone = [k for k in kernels if all(l.startswith(("bn", "scale")) for l in k["layers"])]
        out.append(("BatchNorm+Scale folded (no BN/Scale step)", not bn_alone))
        residual = [k for k in kernels if any(l.startswith("res") and "_" not in l
                                              for l in k["layers"])]
        inside = [k for k in residual if any("branch" in l for l in k["layers"])]
        out.append(("residual add+ReLU inside a convolution (%d of %d)" % (len(inside),
                                                                          len(residual)),
                    len(residual) > 0 and len(inside) == len(residual)))
    if name == "densenet121_deploy":
        concat = [k for k in kernels if k["kernel"].split(".")[1:2] == ["concat"]]
        out.append(("no Concat step (%d left)" % len(concat), not concat))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kiln", required=True)
    parser.add_argument("--models-dir", required=True)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--kiln-args", default="")
    args = parser.parse_args()
    extra = shlex.split(args.kiln_args)
    nets = sorted(glob.glob(os.path.join(args.models_dir, "*deploy*.prototxt")))
    nets += [os.path.join(args.models_dir, n) for n in ("lenet.prototxt", "cifar10_quick.prototxt")
             if os.path.exists(os.path.join(args.models_dir, n))]
    failed = 0
    rows = []
    for i, path in enumerate(nets):
        name = os.path.basename(path).replace(".prototxt", "")
        print("[%d/%d] kiln compile %s" % (i + 1, len(nets), name), file=sys.stderr, flush=True)
        report, error = compile_net(args.kiln, path, args.batch, extra)
        if report is None:
            rows.append((name, "error: %s" % error))
            failed += 1
            continue
        layers = len({l for k in report["kernels"] for l in k["layers"]})
        naive = report["naive_activation_bytes"]
        planned = report["planned_activation_bytes"]
        ratio = planned / naive if naive else 0.0
        limit = 1.0 / 3.0 if layers >= 20 else 1.0
        ok = ratio <= limit if layers >= 20 else ratio < 1.0
        checks = [("planned/naive %.3f (limit %s)" % (ratio, "1/3" if layers >= 20 else "< 1"),
                   ok)] + checks_for(name, report)
        failed += sum(1 for _, passed in checks if not passed)
        rows.append((name, "%s %s: %d steps, %d layers, fused kernels %d, naive %.1f MiB, "
                     "planned %.1f MiB, largest step workspace %.1f MiB, arena %.1f MiB; %s" % (
                         report["backend"], report["precision"], report["steps"], layers,
                         sum(1 for k in report["kernels"] if len(k["layers"]) > 1),
                         naive / 2**20, planned / 2**20, report["workspace_bytes"] / 2**20,
                         report.get("arena_bytes", 0) / 2**20,
                         "; ".join("%s %s" % (d, "ok" if p else "FAILED") for d, p in checks))))
    for name, text in rows:
        print("compile %-36s %s" % (name, text))
    print("compile checks: %s" % ("all passed" if not failed else "%d FAILED" % failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
