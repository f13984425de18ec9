"""Repository rule exposing the local CUDA toolkit (KILN_CUDA_PATH, default /usr/local/cuda).

When the toolkit is missing the repository still exists but `:available` is false and the CUDA
targets fail with a message that says so, rather than Bazel failing on a missing path.

NCCL is optional: `@local_cuda//:defs.bzl` says whether the toolkit has nccl.h and libnccl.so
(HAS_NCCL), and `@local_cuda//:nccl` links it where it does (engine/distributed uses both).
"""

def _cuda_configure_impl(repository_ctx):
    cuda_path = repository_ctx.os.environ.get("KILN_CUDA_PATH", "/usr/local/cuda")
    nvcc = repository_ctx.path(cuda_path + "/bin/nvcc")
    if not nvcc.exists:
        fail("CUDA toolkit not found at %s (set KILN_CUDA_PATH)" % cuda_path)
    repository_ctx.symlink(cuda_path + "/include", "include")
    repository_ctx.symlink(cuda_path + "/lib64", "lib64")
    repository_ctx.symlink(cuda_path + "/bin", "bin")
    if repository_ctx.path(cuda_path + "/nvvm").exists:
        repository_ctx.symlink(cuda_path + "/nvvm", "nvvm")
    has_nccl = (repository_ctx.path(cuda_path + "/include/nccl.h").exists and
                repository_ctx.path(cuda_path + "/lib64/libnccl.so").exists)
    repository_ctx.file("defs.bzl", "HAS_NCCL = %s\n" % ("True" if has_nccl else "False"))
    nccl_target = """
# NCCL, dynamic as cuBLAS (the toolkit has no static NCCL here).
cc_library(
    name = "nccl",
    srcs = ["lib64/libnccl.so"],
    linkopts = ["-Wl,-rpath,{cuda}/lib64"],
    deps = [":cuda_headers"],
)
""" if has_nccl else ""
    repository_ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])

# nvcc and everything it reads (ptxas, cicc, the headers).
filegroup(
    name = "nvcc_files",
    srcs = glob(["bin/**", "nvvm/**", "include/**"]),
)

filegroup(
    name = "nvcc",
    srcs = ["bin/nvcc"],
)

cc_library(
    name = "cuda_headers",
    hdrs = glob(["include/**/*.h", "include/**/*.hpp"]),
    includes = ["include"],
)

# The CUDA runtime, linked statically so binaries need only the driver on the target machine.
cc_library(
    name = "cudart_static",
    srcs = ["lib64/libcudart_static.a"],
    linkopts = ["-ldl", "-lrt", "-lpthread"],
    deps = [":cuda_headers"],
)

# cuBLAS is linked dynamically (no static cuBLAS in the toolkit here); the rpath finds it in the
# toolkit's lib64 on the machine that runs the binary.
cc_library(
    name = "cublas",
    srcs = ["lib64/libcublas.so", "lib64/libcublasLt.so"],
    linkopts = ["-Wl,-rpath,{cuda}/lib64"],
    deps = [":cuda_headers"],
)

# cuFFT, for the FFT convolution; dynamic as cuBLAS.
cc_library(
    name = "cufft",
    srcs = ["lib64/libcufft.so"],
    linkopts = ["-Wl,-rpath,{cuda}/lib64"],
    deps = [":cuda_headers"],
)
""".replace("{cuda}", cuda_path) + nccl_target.replace("{cuda}", cuda_path))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["KILN_CUDA_PATH"],
    local = True,
)
