"""cc_proto: compiles .proto files with Debian's protoc into a cc_library on the static libprotobuf.

Generated headers are included by their path relative to the workspace root, e.g.
"proto/caffe.pb.h" for proto/caffe.proto.
"""

def cc_proto(name, srcs, deps = [], **kwargs):
    """A cc_library holding the C++ code protoc generates for `srcs`."""
    hdrs = [s[:-len(".proto")] + ".pb.h" for s in srcs]
    ccs = [s[:-len(".proto")] + ".pb.cc" for s in srcs]
    native.genrule(
        name = name + "_protoc",
        srcs = srcs,
        outs = hdrs + ccs,
        cmd = "$(location @system_libs//:protoc_bin) --proto_path=. --cpp_out=$(GENDIR) " +
              " ".join(["$(location %s)" % s for s in srcs]),
        tools = ["@system_libs//:protoc_bin"],
    )
    native.cc_library(
        name = name,
        srcs = ccs,
        hdrs = hdrs,
        deps = deps + ["@system_libs//:protobuf"],
        **kwargs
    )
