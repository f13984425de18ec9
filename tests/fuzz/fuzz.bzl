"""kiln_fuzz_target: one fuzz target built as a short mutation test and as a libFuzzer binary."""

def kiln_fuzz_target(name, seeds, seed_glob, deps):
    """<name>_fuzzer.cc defines LLVMFuzzerTestOneInput.

    Args:
      name: the target's base name.
      seeds: labels of seed files; the smoke test uses those whose path contains seed_glob.
      seed_glob: a substring selecting seed files.
      deps: what the target links.
    """
    native.cc_library(
        name = name + "_target",
        testonly = True,
        srcs = [name + "_fuzzer.cc"],
        hdrs = ["fuzz_targets.h"],
        deps = deps,
        alwayslink = True,
    )
    native.cc_test(
        name = name + "_smoke",
        size = "medium",
        srcs = ["mutation_driver.cc"],
        args = ["--only=" + seed_glob, "--seconds=15"] + ["$(locations %s)" % s for s in seeds],
        data = seeds,
        tags = ["fuzz_smoke"],
        deps = [":" + name + "_target"],
    )
    native.cc_binary(
        name = name + "_libfuzzer",
        testonly = True,
        srcs = [name + "_fuzzer.cc", "fuzz_targets.h"],
        linkopts = ["-fsanitize=fuzzer"],
        tags = ["manual"],
        deps = deps,
    )
