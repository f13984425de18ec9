"""@caffe_models: the Caffe files the tests use, pinned by sha256 (files.bzl).

Each file comes from the offline mirror ../shared/models/caffe when it is there and its sha256
matches, else from the URL of its public origin (checked against the same sha256). A file that
neither gives is left out and named in MISSING, and the tests that need the corpus skip, saying
so (tests/util/caffe_files.cc), instead of the build failing at analysis. The repository is
fetched again when files.bzl changes; `bazel sync --only=caffe_models` forces it.
"""

load("//third_party/caffe_models:files.bzl", "CAFFE_MODEL_FILES")

def _caffe_models_impl(ctx):
    workspace = ctx.path(Label("@//:WORKSPACE")).dirname
    mirror = workspace.dirname.get_child("shared").get_child("models").get_child("caffe")
    missing = []
    for name, (url, sha256) in CAFFE_MODEL_FILES.items():
        urls = []
        local = mirror.get_child(name)
        if local.exists:
            urls.append("file://" + str(local))
        if url:
            urls.append(url)
        ok = False
        if urls:
            ok = ctx.download(url = urls, output = name, sha256 = sha256, allow_fail = True).success
        if not ok:
            missing.append(name)
    ctx.file("MISSING", "".join([m + "\n" for m in missing]))
    ctx.file("BUILD", """filegroup(
    name = "files",
    srcs = glob(["*"], exclude = ["BUILD", "WORKSPACE"]),
    visibility = ["//visibility:public"],
)
""")
    if missing:
        print("caffe_models: %d of %d files neither in %s nor downloadable; the tests that " %
              (len(missing), len(CAFFE_MODEL_FILES), mirror) + "need them skip")

caffe_models_repository = repository_rule(
    implementation = _caffe_models_impl,
    attrs = {"_manifest": attr.label(default = "//third_party/caffe_models:files.bzl")},
)
