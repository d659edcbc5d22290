"""An HRR output layer (lshk.torch.HrrOutput) trained on a multi-label task
from w2v-gutenberg, against a full sigmoid output layer trained the same
way.

Task: the input is a centre word's input embedding (`input_embeddings.f32`,
fixed); its labels are its `--labels` most frequent context words in the
training pairs (a multi-label sample per centre word, over all 35,388
words), leaving out the `--skip-top` most frequent context words of the
corpus ("the", "of", ...: every centre's most frequent contexts, which a
model could predict without looking at its input). The same small MLP (128 -> `--hidden` -> ReLU -> output) is trained
with Adam for `--epochs` passes over the centres, in batches of `--batch`:

* `sigmoid`: the output layer is `nn.Linear(hidden, 35388)` with
  `BCEWithLogitsLoss` over every class (multi-hot targets);
* `hrr`: the output layer is `nn.Linear(hidden, dim)` predicting s, and
  the loss `HrrOutput(35388, dim)`'s J_p + J_n (the authors' form: a fixed
  present vector p and absent vector m, absolute cosines).

Evaluation: the first `--heldout` held-out pairs grouped by centre (the
left-out words removed); P@1 and P@5 of each model's top 5 against the
centre's set of held-out context words (as train_w2v.py). The HRR model's top 5 are the largest
|c . y|, y = p† ⊛ s normalised: exactly (dense scores over all class
vectors) and through an lshk IVF index over the class vectors
(`HrrOutput.predict`); recall@5 of the index against the exact top 5.
Times: training seconds per epoch and the evaluation's milliseconds per
query (the MLP and the output layer's top 5 for all held-out centres, in
batches of 512), one thread. A trivial baseline beside them: the 5 most
frequent labels of the training sets, the same for every centre.

    python python/examples/hrr_xml.py

Prints `skipped: ../shared/data not found` and exits 0 when the data
directory (`../shared/data` next to the repository) is absent.
"""

import argparse
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "..", "shared", "data")


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", default=os.path.join(DATA, "w2v-gutenberg"))
    p.add_argument("--methods", default="sigmoid,hrr")
    p.add_argument("--labels", type=int, default=10, help="labels per centre (most frequent contexts)")
    p.add_argument("--skip-top", type=int, default=100,
                   help="leave out the words that are this many most frequent contexts")
    p.add_argument("--min-pairs", type=int, default=10,
                   help="centres with at least this many training pairs")
    p.add_argument("--centres", type=int, default=0, help="at most this many centres (0: all)")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--dim", type=int, default=400, help="HRR dimension d")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--heldout", type=int, default=100_000)
    p.add_argument("--nlist", type=int, default=0, help="IVF lists (0: lshk's default)")
    p.add_argument("--nprobe", type=int, default=0, help="IVF lists probed (0: lshk's default)")
    p.add_argument("--threads", type=int, default=1, help="torch and lshk threads")
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args()


def label_sets(train, rows, per, min_pairs, stop):
    """For every centre with >= min_pairs training pairs: its `per` most
    frequent context words outside `stop` (ties by the smaller id). CSR
    (centres, offsets, labels)."""
    train = train[~stop[train[:, 1]]]
    key = train[:, 0].astype(np.int64) * rows + train[:, 1]
    uk, cnt = np.unique(key, return_counts=True)
    c, ctx = uk // rows, uk % rows
    pairs = np.bincount(train[:, 0], minlength=rows)
    keep = pairs[c] >= min_pairs
    c, ctx, cnt = c[keep], ctx[keep], cnt[keep]
    order = np.lexsort((ctx, -cnt, c))
    c, ctx = c[order], ctx[order]
    start = np.r_[0, np.flatnonzero(np.diff(c)) + 1]
    rank = np.arange(len(c)) - np.repeat(start, np.diff(np.r_[start, len(c)]))
    sel = rank < per
    c, ctx = c[sel], ctx[sel]
    centres, first = np.unique(c, return_index=True)
    offsets = np.r_[first, len(c)].astype(np.int64)
    return centres, offsets, ctx.astype(np.int64)


def precision(top, ctx):
    p1 = sum(int(row[0]) in cs for row, cs in zip(top, ctx))
    p5 = sum(sum(int(r) in cs for r in row[:5]) for row, cs in zip(top, ctx))
    return p1 / len(ctx), p5 / (5 * len(ctx))


def main():
    o = parse()
    if not os.path.isdir(DATA) and o.dir == os.path.join(DATA, "w2v-gutenberg"):
        print("skipped: ../shared/data not found")
        return 0
    if not os.path.exists(os.path.join(o.dir, "train_pairs.i32")):
        print(f"skipped: {o.dir} not found")
        return 0
    import torch
    import torch.nn.functional as F
    from torch import nn

    import lshk
    from lshk.torch import HrrOutput

    torch.set_num_threads(o.threads)
    emb = np.fromfile(os.path.join(o.dir, "input_embeddings.f32"), np.float32).reshape(-1, 128)
    train = np.fromfile(os.path.join(o.dir, "train_pairs.i32"), np.int32).reshape(-1, 2)
    held = np.fromfile(os.path.join(o.dir, "heldout_pairs.i32"), np.int32).reshape(-1, 2)
    rows = emb.shape[0]
    # the most frequent context words ("the", "of", ...) are every centre's
    # most frequent contexts: left out of the labels and the held-out sets,
    # so that the labels say something about the centre
    stop = np.zeros(rows, bool)
    stop[np.argsort(-np.bincount(train[:, 1], minlength=rows), kind="stable")[: o.skip_top]] = True
    centres, offsets, labels = label_sets(train, rows, o.labels, o.min_pairs, stop)
    rng = np.random.default_rng(o.seed)
    if o.centres and o.centres < len(centres):
        pick = np.sort(rng.choice(len(centres), o.centres, replace=False))
        lens = np.diff(offsets)[pick]
        labels = np.concatenate([labels[offsets[i]:offsets[i + 1]] for i in pick])
        centres = centres[pick]
        offsets = np.r_[0, np.cumsum(lens)]
    n = len(centres)
    # padded label rows (-1) for HrrOutput and the multi-hot targets
    L = int(np.diff(offsets).max())
    padded = -np.ones((n, L), np.int64)
    for i in range(n):
        padded[i, : offsets[i + 1] - offsets[i]] = labels[offsets[i]:offsets[i + 1]]
    held = held[: o.heldout]
    held = held[~stop[held[:, 1]]]
    hc, inv = np.unique(held[:, 0], return_inverse=True)
    hctx = [set() for _ in hc]
    for i, c in zip(inv.tolist(), held[:, 1].tolist()):
        hctx[i].add(c)
    x_all = torch.from_numpy(emb)
    print(f"w2v-gutenberg: {rows} classes; {n} training centres (>= {o.min_pairs} pairs), "
          f"up to {o.labels} labels each (mean {np.diff(offsets).mean():.2f}) outside the "
          f"{o.skip_top} most frequent contexts; {len(hc)} held-out centres from {len(held)} pairs")
    print(f"lshk {lshk.__version__} ({lshk.isa_active()}), torch {torch.__version__}, "
          f"{o.threads} thread(s); MLP 128 -> {o.hidden} -> out, Adam lr {o.lr}, "
          f"{o.epochs} epoch(s), batch {o.batch}, HRR d = {o.dim}")
    # the trivial baseline: the 5 most frequent labels, for every centre
    freq = np.argsort(-np.bincount(labels, minlength=rows), kind="stable")[:5]
    p1, p5 = precision(np.tile(freq, (len(hc), 1)), hctx)
    results = [("the 5 most frequent labels, for every centre", p1, p5, "", 0.0, 0.0)]
    steps = (n + o.batch - 1) // o.batch
    for method in o.methods.split(","):
        torch.manual_seed(o.seed)
        out = rows if method == "sigmoid" else o.dim
        mlp = nn.Sequential(nn.Linear(128, o.hidden), nn.ReLU(), nn.Linear(o.hidden, out))
        knobs = {}
        if o.nlist:
            knobs["nlist"] = o.nlist
        query = dict(nprobe=o.nprobe) if o.nprobe else None
        head = None
        if method == "hrr":
            t0 = time.perf_counter()
            head = HrrOutput(rows, o.dim, seed=o.seed, threads=o.threads, query=query, **knobs)
            t_cv = time.perf_counter() - t0
            print(f"hrr: {rows} class vectors of d = {o.dim} in {t_cv:.2f} s")
        opt = torch.optim.Adam(mlp.parameters(), lr=o.lr)
        order_rng = np.random.default_rng(o.seed)
        train_s = []
        for epoch in range(1, o.epochs + 1):
            perm = order_rng.permutation(n)
            t0 = time.perf_counter()
            tot = 0.0
            for st in range(steps):
                idx = perm[st * o.batch:(st + 1) * o.batch]
                x = x_all[torch.from_numpy(centres[idx])]
                lab = torch.from_numpy(padded[idx])
                s = mlp(x)
                if method == "sigmoid":
                    tgt = torch.zeros(len(idx), rows)
                    m = lab >= 0
                    tgt[torch.nonzero(m)[:, 0], lab[m]] = 1.0
                    loss = F.binary_cross_entropy_with_logits(s, tgt)
                else:
                    loss = head(s, lab)
                opt.zero_grad()
                loss.backward()
                opt.step()
                tot += loss.item()
            dt = time.perf_counter() - t0
            train_s.append(dt)
            print(f"  {method} epoch {epoch}: mean loss {tot / steps:.4f}, {dt:.1f} s", flush=True)
        # evaluation
        with torch.no_grad():
            xs = x_all[torch.from_numpy(hc)]
            if method == "sigmoid":
                t0 = time.perf_counter()
                top = [mlp(xs[i:i + 512]).topk(5, dim=1).indices for i in range(0, len(hc), 512)]
                t_q = time.perf_counter() - t0
                top = torch.cat(top).numpy()
                p1, p5 = precision(top, hctx)
                results.append(("sigmoid, dense top 5", p1, p5, "", np.mean(train_s), t_q))
            else:
                C = head.class_vectors
                t0 = time.perf_counter()
                ex = []
                for i in range(0, len(hc), 512):
                    y = head.unbind(mlp(xs[i:i + 512]))
                    ex.append((y @ C.T).abs().topk(5, dim=1).indices)
                t_ex = time.perf_counter() - t0
                ex = torch.cat(ex).numpy()
                t0 = time.perf_counter()
                head.build_index()
                t_build = time.perf_counter() - t0
                t0 = time.perf_counter()
                ix = torch.cat([head.predict(mlp(xs[i:i + 512]), 5)[0]
                                for i in range(0, len(hc), 512)]).numpy()
                t_ix = time.perf_counter() - t0
                rec = np.mean([len(set(a) & set(b)) / 5 for a, b in zip(ix.tolist(), ex.tolist())])
                p1, p5 = precision(ex, hctx)
                results.append(("HRR, exact top 5 of abs(c . y)", p1, p5, "", np.mean(train_s), t_ex))
                p1, p5 = precision(ix, hctx)
                results.append((f"HRR, lshk IVF index ({head.index.describe().get('nlist', '?')} lists, "
                                f"built in {t_build:.1f} s)", p1, p5, f"{rec:.3f}",
                                np.mean(train_s), t_ix))
    print("| method | P@1 | P@5 | recall@5 vs exact | s / epoch | ms / query (eval) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, p1, p5, rec, ep, tq in results:
        ep_s = f"{ep:.1f}" if ep else "-"
        tq_s = f"{1000 * tq / len(hc):.3f}" if tq else "-"
        print(f"| {name} | {p1:.4f} | {p5:.4f} | {rec} | {ep_s} | {tq_s} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
