"""The op-family test pieces: one source file of one family for one backend's test binary."""

def family_test_library(name, deps = []):
    """`name`.cc as a test library the backend binaries in //tests/kernels link whole.

    Its TESTs register themselves (alwayslink), and a case table is found by its function, so
    the binary that links every family's piece for a backend runs them all, as one program.
    """
    native.cc_library(
        name = name,
        testonly = True,
        srcs = [name + ".cc"],
        alwayslink = True,
        visibility = ["//tests:__subpackages__"],
        deps = deps,
    )
