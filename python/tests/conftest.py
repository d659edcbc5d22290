import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from capi import ROOT, CApi, find_lib_dir  # noqa: E402


def _missing(what):
    """Without CI a missing tool skips the test; with CI set it fails (the
    project's convention, as in tests/abi.rs)."""
    if os.environ.get("CI"):
        pytest.fail(f"{what} (CI is set, so this is a failure)")
    pytest.skip(f"skipped: {what}")


@pytest.fixture(scope="session")
def capi():
    d = find_lib_dir()
    if d is None or not os.path.exists(os.path.join(d, "liblshk.so")):
        _missing("liblshk.so not found (run `cargo build` or set LSHK_LIB_DIR)")
    return CApi(d)


@pytest.fixture(scope="session")
def interop(tmp_path_factory, capi):
    """The C++ interop program (tests/interop.cpp against include/lshk.hpp
    and liblshk.so)."""
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("clang++")
    if not cxx:
        _missing("no C++ compiler (g++ / clang++)")
    lib_dir = os.path.dirname(capi.lib._name)
    exe = str(tmp_path_factory.mktemp("cxx") / "interop")
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "interop.cpp")
    subprocess.run(
        [cxx, "-std=c++17", "-O1", "-I", os.path.join(ROOT, "include"), src, "-o", exe,
         f"-L{lib_dir}", f"-Wl,-rpath,{lib_dir}", "-llshk"],
        check=True,
    )
    return exe


@pytest.fixture(scope="session")
def layer():
    rng = np.random.default_rng(7)
    w = rng.standard_normal((3000, 48)).astype(np.float32)
    b = (0.5 * rng.standard_normal(3000)).astype(np.float32)
    q = rng.standard_normal((17, 48)).astype(np.float32)
    return w, b, q
