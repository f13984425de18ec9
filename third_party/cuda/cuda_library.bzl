"""cuda_library: compiles .cu files with nvcc and wraps the objects in a cc_library.

GPU architectures come from `--define=kiln_cuda_archs=80,90` (default "80,90"): SASS for each,
plus PTX for the highest so newer GPUs can JIT it. Extra flags: `--define=kiln_nvcc_opts=...`.
A library with `sm90a = True` holds Hopper-only instructions (wgmma): where 90 is among the
archs it is built for sm_90a alone (SASS, no PTX, which could not run elsewhere); otherwise for
the first arch, where its kernels compile to empty bodies that the host never launches.
"""

def _cuda_objects_impl(ctx):
    archs = ctx.var.get("kiln_cuda_archs", "80,90").split(",")
    gencode = []
    if ctx.attr.sm90a:
        arch = "90a" if "90" in archs else archs[0]
        gencode.append("-gencode=arch=compute_%s,code=sm_%s" % (arch, arch))
    else:
        for arch in archs:
            gencode.append("-gencode=arch=compute_%s,code=sm_%s" % (arch, arch))
        gencode.append("-gencode=arch=compute_%s,code=compute_%s" % (archs[-1], archs[-1]))
    extra = [o for o in ctx.var.get("kiln_nvcc_opts", "").split(" ") if o]

    headers = depset(ctx.files.hdrs, transitive = [
        dep[CcInfo].compilation_context.headers
        for dep in ctx.attr.deps
        if CcInfo in dep
    ])
    nvcc = ctx.file._nvcc
    outputs = []
    for src in ctx.files.srcs:
        obj = ctx.actions.declare_file("_cuda_objs/%s/%s.o" % (ctx.label.name, src.basename))
        args = ctx.actions.args()
        args.add_all(["-x", "cu", "-std=c++17", "-O3", "-Xcompiler", "-fPIC", "-I", "."])
        args.add_all(["-I", ctx.bin_dir.path, "-I", ctx.genfiles_dir.path])
        args.add_all(gencode)
        args.add_all(extra)
        args.add_all(["-c", src.path, "-o", obj.path])
        ctx.actions.run(
            executable = nvcc,
            arguments = [args],
            inputs = depset([src], transitive = [headers]),
            tools = ctx.files._nvcc_files,
            outputs = [obj],
            mnemonic = "Nvcc",
            progress_message = "nvcc %s" % src.short_path,
            use_default_shell_env = True,
        )
        outputs.append(obj)
    return [DefaultInfo(files = depset(outputs))]

_cuda_objects = rule(
    implementation = _cuda_objects_impl,
    attrs = {
        "srcs": attr.label_list(allow_files = [".cu"]),
        "hdrs": attr.label_list(allow_files = [".h", ".cuh"]),
        "deps": attr.label_list(),
        "sm90a": attr.bool(default = False),
        "_nvcc": attr.label(
            default = "@local_cuda//:bin/nvcc",
            allow_single_file = True,
            executable = True,
            cfg = "host",
        ),
        "_nvcc_files": attr.label(default = "@local_cuda//:nvcc_files", cfg = "host"),
    },
)

def cuda_library(name, srcs, hdrs = [], deps = [], sm90a = False, **kwargs):
    """A cc_library whose .cu sources are compiled by nvcc; hdrs are plain C++ headers."""
    _cuda_objects(
        name = name + "_objs",
        srcs = srcs,
        hdrs = hdrs,
        deps = deps,
        sm90a = sm90a,
    )
    native.cc_library(
        name = name,
        srcs = [":" + name + "_objs"],
        hdrs = hdrs,
        deps = deps + ["@local_cuda//:cudart_static"],
        **kwargs
    )
