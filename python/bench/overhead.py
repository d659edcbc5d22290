"""Python query overhead over the C API at B = 1 (issue 18's target: <= 2 us).

Builds the same two lshk.Index over the same random W from Python and from C:
the SimHash source (K 12, L 8) and the IVF source (defaults, W borrowed),
queried with nprobe 4, reach 0: a fixed, cheap amount of work (overhead.c,
compiled here against
include/lshk.h and target/release/liblshk.so, or LSHK_LIB_DIR), then times
the same loop of single-query calls (k = 10) through each, three rounds,
best round. Overhead = Python ns/call - C ns/call. A small layer, so the
query itself is cheap and the per-call cost is visible.

Run from the repository root, with the package installed:
    cargo build --release && python python/bench/overhead.py
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

import lshk

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROWS, DIM, NQ, K, ITERS = 5000, 64, 256, 10, 20000


def main():
    lib_dir = os.environ.get("LSHK_LIB_DIR", os.path.join(ROOT, "target", "release"))
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    rng = np.random.default_rng(0)
    w = rng.standard_normal((ROWS, DIM)).astype(np.float32)
    q = rng.standard_normal((NQ, DIM)).astype(np.float32)
    tmp = tempfile.mkdtemp()
    w.tofile(os.path.join(tmp, "w.bin"))
    q.tofile(os.path.join(tmp, "q.bin"))
    exe = os.path.join(tmp, "overhead")
    subprocess.run([cc, "-O2", "-std=c11", "-I", os.path.join(ROOT, "include"),
                    os.path.join(ROOT, "python", "bench", "overhead.c"), "-o", exe, f"-L{lib_dir}",
                    f"-Wl,-rpath,{lib_dir}", "-llshk"], check=True)
    out = subprocess.run([exe, os.path.join(tmp, "w.bin"), str(ROWS), str(DIM), os.path.join(tmp, "q.bin"),
                          str(NQ), str(K), str(ITERS)], check=True, capture_output=True, text=True).stdout
    c_ns = {}
    for name, v in zip(out.split()[0::2], out.split()[1::2]):
        c_ns[name] = min(c_ns.get(name, float("inf")), float(v))

    idx = lshk.Index(w, bits_per_table=12, tables=8)
    ivf = lshk.Index(w, source="ivf", storage="borrowed")
    rows = [q[i] for i in range(NQ)]
    py_ns = {}
    for _ in range(3):
        for name, obj in (("index", idx), ("ivf", ivf)):
            query = obj.query
            t0 = time.perf_counter_ns()
            if name == "index":
                for i in range(ITERS):
                    query(rows[i % NQ], K)
            else:
                for i in range(ITERS):
                    query(rows[i % NQ], K, nprobe=4, reach=0.0)
            dt = (time.perf_counter_ns() - t0) / ITERS
            py_ns[name] = min(py_ns.get(name, float("inf")), dt)
    print(f"lshk {lshk.__version__}, tier {lshk.isa_active()}, Python {sys.version.split()[0]}, "
          f"numpy {np.__version__}; {ROWS} x {DIM}, B = 1, k = {K}, {ITERS} calls x 3 rounds (best)")
    print(f"{'':8}{'C API':>12}{'Python':>12}{'overhead':>12}")
    for name in ("index", "ivf"):
        print(f"{name:8}{c_ns[name] / 1e3:>9.2f} us{py_ns[name] / 1e3:>9.2f} us"
              f"{(py_ns[name] - c_ns[name]) / 1e3:>9.2f} us")
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
