"""Builds the kiln Python package: libkiln.so (Bazel) and the pybind11 module over kiln.hpp.

Environment:
  KILN_LIBKILN   an already built libkiln.so to package (no Bazel run), e.g. the one
                 `bazel build --config=portable //api:libkiln.so` made, or tools/install.sh's.
  KILN_BAZEL     the bazel command (default "bazel"); KILN_BAZEL_FLAGS extra build flags.
"""
import os
import re
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


def kiln_version():
    header = open(os.path.join(ROOT, "include", "kiln", "kiln.h")).read()
    parts = [re.search(r"#define KILN_VERSION_%s (\d+)" % p, header).group(1)
             for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


def built_libkiln():
    """The libkiln.so to package: KILN_LIBKILN, or the one Bazel builds here."""
    given = os.environ.get("KILN_LIBKILN")
    if given:
        if not os.path.isfile(given):
            sys.exit("setup.py: KILN_LIBKILN=%s does not exist" % given)
        return given
    bazel = os.environ.get("KILN_BAZEL", "bazel")
    if shutil.which(bazel) is None:
        sys.exit("setup.py: no `%s` to build libkiln.so; run tools/setup.sh, or set "
                 "KILN_LIBKILN to a built libkiln.so" % bazel)
    flags = ["--disk_cache=" + os.path.expanduser("~/.cache/kiln-bazel-disk")]
    flags += shlex.split(os.environ.get("KILN_BAZEL_FLAGS", ""))
    print("setup.py: building //api:libkiln.so with Bazel...", flush=True)
    subprocess.check_call([bazel, "build"] + flags + ["//api:libkiln.so"], cwd=ROOT)
    bin_dir = subprocess.check_output([bazel, "info"] + flags + ["bazel-bin"], cwd=ROOT,
                                      text=True).strip()
    return os.path.join(bin_dir, "api", "libkiln.so")


class BuildWithLibkiln(build_ext):
    """Places libkiln.so.0 beside the module (found through $ORIGIN) before linking to it."""

    def build_extensions(self):
        package_dir = os.path.join(self.build_lib, "kiln")
        os.makedirs(package_dir, exist_ok=True)
        target = os.path.join(package_dir, "libkiln.so.0")
        if os.path.exists(target):
            os.chmod(target, 0o644)
        shutil.copyfile(built_libkiln(), target)
        os.chmod(target, 0o755)
        for ext in self.extensions:
            ext.library_dirs.append(package_dir)
            ext.extra_link_args.append("-l:libkiln.so.0")
        super().build_extensions()
        if self.inplace:  # `setup.py develop` / editable installs run from python/kiln
            shutil.copyfile(target, os.path.join(ROOT, "python", "kiln", "libkiln.so.0"))


def pybind11_include():
    import pybind11
    return pybind11.get_include()


class LazyInclude:
    """pybind11's include folder, looked up only when the extension is built."""

    def __str__(self):
        return pybind11_include()

    def __fspath__(self):
        return pybind11_include()


setup(
    version=kiln_version(),
    packages=["kiln"],
    package_dir={"": "python"},
    ext_modules=[
        Extension(
            "kiln._kiln",
            sources=["python/src/module.cc", "python/src/engine_bindings.cc"],
            include_dirs=[os.path.join(ROOT, "include"), LazyInclude()],
            extra_compile_args=["-std=c++17", "-fvisibility=hidden", "-O2"],
            extra_link_args=["-Wl,-rpath,$ORIGIN"],
            language="c++",
        )
    ],
    cmdclass={"build_ext": BuildWithLibkiln},
    zip_safe=False,
)
