"""kiln_fuzz_target: one fuzz target built as a short mutation test and as a libFuzzer binary."""

def kiln_fuzz_target(name, seeds, seed_glob, deps, seconds = 15):
    """<name>_fuzzer.cc defines LLVMFuzzerTestOneInput.

    The smoke test also replays every file of corpus/<name>/ (the seeds and the minimized inputs
    found by the long runs, crash reproducers included), then mutates them with the rest.

    Args:
      name: the target's base name.
      seeds: labels of seed files; the smoke test uses those whose path contains seed_glob.
      seed_glob: a substring selecting seed files.
      deps: what the target links.
      seconds: how long the smoke test mutates.
    """
    corpus = native.glob(["corpus/%s/*" % name])
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
        args = [
            "--only=" + seed_glob,
            "--only=corpus/%s/" % name,
            "--seconds=%d" % seconds,
        ] + ["$(locations %s)" % s for s in seeds] + ["$(location %s)" % c for c in corpus],
        data = seeds + corpus,
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
