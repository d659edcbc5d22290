"""A small PyTorch model trained with lshk.torch.SampledSoftmax on
w2v-gutenberg's (centre, context) pairs: full softmax against LSH negative
sampling (LSH-Embedding), the hashing forest and uniform negatives, as
examples/lns_train.rs does in Rust (its figures: examples/lns_train.md).

Model: an `nn.Embedding` of the centre word, initialised from
`input_embeddings.f32` and frozen by default (as lns_train; `--train-emb`
trains it too, with sparse gradients), then the output layer over all
35,388 words: logits W e + b, W (35,388 x 128) from N(0, 0.01^2), b = 0.

* `full`: the dense PyTorch layer (`h @ W.T + b`, `F.cross_entropy`, dense
  `torch.optim.SGD`): what a user would write without lshk.
* `uniform`, `unigram`, `lsh-embedding`, `lsh-label`, `forest`:
  `SampledSoftmax(sampler=...)` with `--s` candidates per sample (the label
  included); updated by the fused lshk SGD step (`--update fused`, the
  default) or by autograd with sparse gradients and `torch.optim.SGD`
  (`--update autograd`).

Per epoch (`--pairs` training pairs, shuffled with a fixed seed, in
batches of `--batch`): P@1 and P@5 of the full layer's exact top 5 against
each held-out centre's set of context words (the first `--heldout`
held-out pairs grouped by centre), the mean held-out log-likelihood of the
true context under the full softmax, and the training time of the epoch
(evaluation not timed).

    python python/examples/train_w2v.py --pairs 64000 --epochs 1 --heldout 20000

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
    p.add_argument("--methods", default="full,lsh-embedding,forest,uniform")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--pairs", type=int, default=64_000, help="training pairs per epoch")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--s", type=int, default=1024, help="candidates per sample")
    p.add_argument("--lr", type=float, default=0.02,
                   help="SGD step per sample, as lns_train's (the optimizer gets lr x batch "
                        "on the batch's mean loss)")
    p.add_argument("--k", type=int, default=10, help="SimHash bits per table")
    p.add_argument("--l", type=int, default=50, help="SimHash tables")
    p.add_argument("--heldout", type=int, default=20_000)
    p.add_argument("--update", choices=("fused", "autograd"), default="fused")
    p.add_argument("--train-emb", action="store_true")
    p.add_argument("--threads", type=int, default=1, help="torch and lshk threads")
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args()


def load(d):
    emb = np.fromfile(os.path.join(d, "input_embeddings.f32"), np.float32).reshape(-1, 128)
    train = np.fromfile(os.path.join(d, "train_pairs.i32"), np.int32).reshape(-1, 2)
    held = np.fromfile(os.path.join(d, "heldout_pairs.i32"), np.int32).reshape(-1, 2)
    return emb, train, held


def evaluate(torch, emb_layer, weight, bias, held):
    """P@1, P@5 (exact full-layer top 5 per held-out centre against its
    context set) and the mean held-out log-likelihood."""
    with torch.no_grad():
        centres, inv = np.unique(held[:, 0], return_inverse=True)
        ctx = [set() for _ in centres]
        for i, c in zip(inv.tolist(), held[:, 1].tolist()):
            ctx[i].add(c)
        p1 = p5 = 0
        ll = 0.0
        for s in range(0, len(centres), 512):
            h = emb_layer(torch.from_numpy(centres[s:s + 512].astype(np.int64)))
            z = h @ weight.T + bias
            top = z.topk(5, dim=1).indices.numpy()
            for j, row in enumerate(top):
                cs = ctx[s + j]
                p1 += row[0] in cs
                p5 += sum(int(r) in cs for r in row)
            logp = torch.log_softmax(z, dim=1)
            sel = (inv >= s) & (inv < s + 512)
            ll += float(logp[inv[sel] - s, held[sel, 1]].double().sum())
        n = len(centres)
        return p1 / n, p5 / (5 * n), ll / len(held)


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

    import lshk
    from lshk.torch import SampledSoftmax

    torch.set_num_threads(o.threads)
    emb, train, held = load(o.dir)
    rows = emb.shape[0]
    held = held[: o.heldout]
    order = np.random.default_rng(o.seed).permutation(len(train))
    counts = np.bincount(train[:, 1], minlength=rows).astype(np.float64)
    print(f"w2v-gutenberg: {rows} classes, {len(train)} training pairs, "
          f"{len(held)} held-out pairs; lshk {lshk.__version__} ({lshk.isa_active()}), "
          f"torch {torch.__version__}, {o.threads} thread(s)")
    print(f"{o.epochs} epoch(s) of {o.pairs} pairs, batch {o.batch}, S = {o.s}, lr {o.lr} a sample "
          f"({o.lr * o.batch:g} on the mean loss), update {o.update}")
    print("| method | epoch | P@1 | P@5 | held-out LL | s / epoch | ms / step |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    steps = o.pairs // o.batch
    for method in o.methods.split(","):
        torch.manual_seed(o.seed)
        emb_layer = torch.nn.Embedding.from_pretrained(
            torch.from_numpy(emb.copy()), freeze=not o.train_emb, sparse=True
        )
        if method == "full":
            g = torch.Generator().manual_seed(o.seed)
            weight = torch.nn.Parameter(torch.randn(rows, 128, generator=g) * 0.01)
            bias = torch.nn.Parameter(torch.zeros(rows))
            params = [weight, bias]
            layer = None
        else:
            layer = SampledSoftmax(
                rows, 128, sampler=method, num_samples=o.s, seed=o.seed, sparse=True,
                counts=counts if method == "unigram" else None,
                bits_per_table=o.k, tables=o.l, threads=o.threads,
            )
            weight, bias = layer.weight, layer.bias
            params = list(layer.parameters())
        if o.train_emb:
            params = params + list(emb_layer.parameters())
        lr = o.lr * o.batch  # lns_train's step on the summed loss, here on the mean
        opt = torch.optim.SGD(params, lr=lr)
        emb_opt = torch.optim.SGD(emb_layer.parameters(), lr=lr) if o.train_emb else None
        at = 0
        for epoch in range(1, o.epochs + 1):
            t0 = time.perf_counter()
            for _ in range(steps):
                idx = order[at % len(order): at % len(order) + o.batch]
                at += o.batch
                if len(idx) < o.batch:
                    idx = order[: o.batch]
                x = torch.from_numpy(train[idx, 0].astype(np.int64))
                y = torch.from_numpy(train[idx, 1].astype(np.int64))
                h = emb_layer(x)
                if method == "full":
                    loss = F.cross_entropy(h @ weight.T + bias, y)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                elif o.update == "fused":
                    _, dh = layer.sgd_step(h, y, lr)
                    if emb_opt is not None:
                        emb_opt.zero_grad()
                        h.backward(dh)
                        emb_opt.step()
                else:
                    loss = layer(h, y)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
            dt = time.perf_counter() - t0
            p1, p5, ll = evaluate(torch, emb_layer, weight.detach(), bias.detach(), held)
            print(f"| {method} | {epoch} | {p1:.4f} | {p5:.4f} | {ll:.4f} | {dt:.2f} | "
                  f"{1000 * dt / max(steps, 1):.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
