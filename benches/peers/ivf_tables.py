"""Several k-means tables vs one finer table (issue 13 item 1: "one table,
or several tables with different seeds"), measured without building it:
recall@10 against the exact top-10 at equal rows scanned (duplicates across
tables counted), lists of all tables pooled and visited best estimate
first (<[q,1],c> + |q| spread, as lshk::ivf ranks them). FAISS k-means
(10 iterations, 64 training rows per list) stands in for lshk's.

Usage (the peers' venv, benches/peers/run_ann.sh):
  python benches/peers/ivf_tables.py ../shared/data/w2v-gutenberg
  python benches/peers/ivf_tables.py target/minilm-npy
"""
import os
import sys

import numpy as np

d = sys.argv[1] if len(sys.argv) > 1 else "../shared/data/w2v-gutenberg"
if not os.path.isdir(d):
    print(f"skipped: ../shared/data not found ({d})")
    sys.exit(0)
try:
    import faiss
except ImportError:
    print("skipped: faiss not installed (benches/peers/run_ann.sh makes the venv)")
    sys.exit(0)
if d.endswith('w2v-gutenberg'):
    W = np.fromfile(f"{d}/output_layer.f32", np.float32).reshape(-1,128)
    E = np.fromfile(f"{d}/input_embeddings.f32", np.float32).reshape(-1,128)
    hp = np.fromfile(f"{d}/heldout_pairs.i32", np.int32).reshape(-1,2)
    Q = E[np.unique(hp[:,0])[:500]]
    b = np.zeros(len(W), np.float32)
else:
    W = np.load(f"{d}/W.npy").astype(np.float32); Q = np.load(f"{d}/Q.npy").astype(np.float32)[:500]
    b = np.zeros(len(W), np.float32)
X = np.hstack([W, b[:,None]]); Qa = np.hstack([Q, np.ones((len(Q),1),np.float32)])
m, xd = X.shape; nlist = int(round(4*np.sqrt(m)))
S = Qa @ X.T; top = np.argsort(-S, 1)[:, :10]
def part(seed, nl):
    km = faiss.Kmeans(xd, nl, niter=10, seed=seed); km.train(X[np.random.default_rng(seed).permutation(m)[:64*nl]])
    C = km.centroids; idx = faiss.IndexFlatL2(xd); idx.add(C); _, a = idx.search(X, 1); a = a[:,0]
    n = np.bincount(a, minlength=nl); R = X - C[a]
    s2 = np.bincount(a, weights=(R**2).sum(1), minlength=nl)/np.maximum(n,1)/xd
    sp = np.sqrt(s2)*np.sqrt(2*np.log(np.maximum(n,2)))
    return C, a, n, sp
parts = {s: part(s, nlist) for s in [1, 2]}
big = part(3, 2*nlist)
qn = np.linalg.norm(Qa, axis=1)
def curve(ps, budgets):
    # lists of all partitions pooled, ranked by estimate
    out = []
    est = np.hstack([Qa @ C.T + qn[:,None]*sp[None,:] for (C,a,n,sp) in ps])
    sizes = np.hstack([n for (C,a,n,sp) in ps])
    offs = np.cumsum([0]+[len(n) for (C,a,n,sp) in ps])
    for B in budgets:
        rec = 0
        for i in range(len(Q)):
            order = np.argsort(-est[i]); cum = np.cumsum(sizes[order]); k = np.searchsorted(cum, B)+1
            sel = order[:k]; found = np.zeros(m, bool)
            for t,(C,a,n,sp) in enumerate(ps):
                ls = sel[(sel>=offs[t])&(sel<offs[t+1])]-offs[t]
                found |= np.isin(a, ls)
            rec += found[top[i]].mean()
        out.append(rec/len(Q))
    return out
budgets = [int(m*f) for f in [0.05, 0.1, 0.2, 0.3, 0.4]]
print("rows scanned budget (fraction):", [0.05,0.1,0.2,0.3,0.4])
print("1 table  nlist", nlist, ["%.3f"%x for x in curve([parts[1]], budgets)])
print("2 tables nlist", nlist, ["%.3f"%x for x in curve([parts[1], parts[2]], budgets)])
print("1 table  nlist", 2*nlist, ["%.3f"%x for x in curve([big], budgets)])
