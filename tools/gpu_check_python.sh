#!/usr/bin/env bash
# The Python package's GPU checks (docs/PYTHON.md, issue 35): the package built on the GPU
# machine against a portable libkiln.so, the pytest suite with its nets and engines on CUDA, and
# examples/python/torch_feature_extractor.py (Kiln inside a torch training loop: torch tensors in
# and out, no host copy, no synchronize) in fp16 and fp32.
# libkiln.so links Debian's Abseil, protobuf, LMDB, libjpeg, libpng and HDF5 dynamically (a portable,
# static build cannot make a shared library: Debian's static archives are not PIC), so those
# libraries travel with it. Stage here:
#   bazel build -c opt --linkopt=-static-libgcc --define=kiln_cuda_archs=80,90 //api:libkiln.so
#   bash tools/gpu_check_python.sh --stage [BAZEL_BIN]     # fills .gpu-py/ (xz-compressed)
# then run there (carry [".gpu-py"]): OUT=$OUT bash tools/gpu_check_python.sh
set -u
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--stage" ]; then
  bin="${2:-bazel-bin}"
  rm -rf .gpu-py && mkdir -p .gpu-py/models .gpu-py/lib
  strip --strip-unneeded -o .gpu-py/lib/libkiln.so "$bin/api/libkiln.so"
  for lib in $(ldd "$bin/api/libkiln.so" | awk '/=> \/lib/ {print $3}' |
    grep -E "absl|protobuf|lmdb|jpeg|png|hdf5|libsz|libaec"); do
    cp -L "$lib" .gpu-py/lib/
  done
  tar -C .gpu-py -cf - lib | xz -T2 -6 >.gpu-py/lib.tar.xz && rm -rf .gpu-py/lib
  cp ../shared/models/caffe/{lenet.prototxt,lenet_iter_10000.caffemodel,resnet18_deploy.prototxt} \
    .gpu-py/models/
  grep -qx "/.gpu-py/" .git/info/exclude || echo "/.gpu-py/" >>.git/info/exclude
  du -sh .gpu-py
  exit 0
fi
out="${OUT:-/tmp/kiln-gpu-python}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1 LD_LIBRARY_PATH=/usr/local/cuda/lib64
declare -A result
rm -rf /tmp/kiln-lib && mkdir -p /tmp/kiln-lib && tar -C /tmp/kiln-lib -xJf .gpu-py/lib.tar.xz
export LD_LIBRARY_PATH="/tmp/kiln-lib/lib:$LD_LIBRARY_PATH"
site=/tmp/kiln-site
rm -rf "$site" build
KILN_LIBKILN=/tmp/kiln-lib/lib/libkiln.so python3 -m pip install --no-build-isolation --no-index \
  --no-deps --disable-pip-version-check -q --target "$site" . >"$out/pip.log" 2>&1 &&
  result[install]=PASS || result[install]=FAIL
export PYTHONPATH="$site"
(cd /tmp && python3 -c "import kiln; print('kiln', kiln.__version__, 'GPUs', kiln.cuda_device_count())") \
  2>&1 | tee "$out/import.log"
KILN_TEST_DEVICE=cuda KILN_CAFFE_MODELS="$PWD/.gpu-py/models" python3 -m pytest -q \
  -p no:cacheprovider python/tests >"$out/pytest.log" 2>&1 && result[pytest]=PASS ||
  result[pytest]=FAIL
for precision in fp16 fp32; do
  python3 examples/python/torch_feature_extractor.py \
    --prototxt .gpu-py/models/resnet18_deploy.prototxt --precision "$precision" --batch 32 \
    --steps 40 >"$out/torch_$precision.log" 2>&1 && result[torch_$precision]=PASS ||
    result[torch_$precision]=FAIL
done
tail -3 "$out/pytest.log"
for precision in fp16 fp32; do
  echo "== torch_feature_extractor $precision"
  tail -12 "$out/torch_$precision.log"
done
echo
printf '%-16s %s\n' check result
for k in install pytest torch_fp16 torch_fp32; do printf '%-16s %s\n' "$k" "${result[$k]}"; done
