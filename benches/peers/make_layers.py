"""Writes the harness's hard layers as .npy directories for ann_peers.py
(`--npy DIR`) and examples/ivf_eval.rs (`--npy DIR`).

zipf50 (default DIR target/zipf50-npy): w2v-gutenberg's output layer cut
to its first 50 dimensions (50 is not a multiple of 16: the codes' padding
path), every row rescaled to a Zipf-distributed norm: unit direction times
rank^-0.25, the ranks a seeded random permutation of 1..rows (norm max /
median 11.5). The queries are the input embeddings of the held-out pairs'
centre words, cut to the same 50 dimensions, in the held-out file's order
(as ann_peers.py's w2v workload takes them). On it a few hub rows sit in
most top-10s: the make prints how many queries hold one of the 20 rows
most often in a top-10 (0.78 of 2,000 when written).

`python benches/peers/make_layers.py [--w2v DIR] [--out DIR] [--nq N]`
Prints `skipped: ../shared/data not found` and exits 0 without the data.
"""
import argparse
import os
import sys

import numpy as np

DIM = 50
ZIPF_S = 0.25
SEED = 50


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--w2v", default="../shared/data/w2v-gutenberg")
    ap.add_argument("--out", default="target/zipf50-npy")
    ap.add_argument("--nq", type=int, default=21000, help="queries written (ann_peers: 500 + 500 + 20,000)")
    a = ap.parse_args()
    src = os.path.join(a.w2v, "output_layer.f32")
    if not os.path.exists(src):
        print("skipped: ../shared/data not found")
        return 0
    W = np.fromfile(src, np.float32).reshape(-1, 128)[:, :DIM].astype(np.float64)
    E = np.fromfile(os.path.join(a.w2v, "input_embeddings.f32"), np.float32).reshape(-1, 128)[:, :DIM]
    pairs = np.fromfile(os.path.join(a.w2v, "heldout_pairs.i32"), np.int32).reshape(-1, 2)
    n = len(W)
    rank = np.random.default_rng(SEED).permutation(n) + 1
    norms = rank.astype(np.float64) ** -ZIPF_S
    Wz = (W / np.linalg.norm(W, axis=1, keepdims=True) * norms[:, None]).astype(np.float32)
    Q = np.ascontiguousarray(E[pairs[: a.nq, 0]], dtype=np.float32)
    os.makedirs(a.out, exist_ok=True)
    np.save(os.path.join(a.out, "W.npy"), Wz)
    np.save(os.path.join(a.out, "Q.npy"), Q)
    name = f"zipf50: w2v-gutenberg cut to {DIM} dims, Zipf norms rank^-{ZIPF_S} ({n:,} x {DIM}, no bias)"
    with open(os.path.join(a.out, "name.txt"), "w") as f:
        f.write(name + "\n")
    # How hub-dominated the exact top-10s are.
    S = Q[:2000] @ Wz.T
    top = np.argpartition(-S, 10, axis=1)[:, :10]
    cnt = np.bincount(top.ravel(), minlength=n)
    hubs = set(np.argsort(-cnt)[:20].tolist())
    frac = np.mean([len(hubs & set(r.tolist())) > 0 for r in top])
    print(f"{name} -> {a.out}: {len(Q):,} queries; norm max/median "
          f"{norms.max() / np.median(norms):.1f}; {frac:.2f} of 2,000 queries hold one of the "
          f"20 most frequent top-10 rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
