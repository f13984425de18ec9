#!/usr/bin/env bash
# Installs what Kiln's build needs on Debian 12 (apt only; nothing is downloaded from elsewhere)
# and checks that the CUDA toolkit is where the build expects it. Safe to run again.
set -euo pipefail

packages=(bazel-bootstrap g++ libabsl-dev libprotobuf-dev protobuf-compiler libgtest-dev
          libgmock-dev libbenchmark-dev libopenblas-dev graphviz liblmdb-dev libleveldb-dev
          libsnappy-dev zlib1g-dev libjpeg62-turbo-dev libpng-dev libhdf5-dev python3-h5py fortunes
          dataset-fashion-mnist python3 cmake pkg-config
          python3-dev python3-numpy python3-pip python3-venv python3-setuptools python3-wheel
          pybind11-dev python3-pybind11 python3-pytest python3-tqdm python3-torch)
missing=()
for p in "${packages[@]}"; do
  [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" == *"install ok installed"* ]] ||
    missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q "${missing[@]}"
fi

cuda="${KILN_CUDA_PATH:-/usr/local/cuda}"
if [ ! -x "$cuda/bin/nvcc" ]; then
  echo "setup: no CUDA toolkit at $cuda (set KILN_CUDA_PATH to the toolkit's folder)" >&2
  exit 1
fi
echo "setup: ok (bazel $(bazel --version 2>/dev/null | awk '{print $2}'), nvcc $("$cuda/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'))"
