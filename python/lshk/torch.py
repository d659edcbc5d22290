"""lshk for PyTorch: a top-k head for inference and a sampled-softmax
output layer for training, both on lshk's kernels (docs/torch.md).

* `TopKHead`: the top-k rows of a wide output layer (an `nn.Linear`, or a
  weight and bias) for a batch of hidden states, through an `lshk.Index`
  built over the weights. CPU float32 tensors go to lshk without a copy
  (`Tensor.numpy()` shares memory, and lshk uses row-contiguous arrays in
  place). Thread-safe and usable inside `torch.inference_mode()`.
* `SampledSoftmax`: class weights W (rows x dim) and a bias as
  `nn.Parameter`s; `forward(h, labels)` is the mean softmax cross-entropy
  of each sample over its candidate set (the label always in it), chosen
  by a sampler: "full", "uniform", "unigram", "lsh-embedding",
  "lsh-label" or "forest". Forward and backward run on lshk's kernels
  (gathered matmul, softmax cross-entropy, gather_dq, the row update);
  `sparse=True` gives sparse COO gradients for W and the bias, as
  `nn.Embedding(sparse=True)` does, for `torch.optim.SGD` and
  `torch.optim.SparseAdam`.
* `HrrOutput`: the HRR output layer (Ganesan et al., NeurIPS 2021): fixed
  seeded class vectors, a present and an absent vector; `forward(s,
  labels)` is the J_p + J_n loss of the network's prediction s (forward
  on lshk's unbind and gathered matmul, backward on gather_dq and bind),
  `predict(s, k)` the top-k labels through an `lshk.Index` over the class
  vectors; `hrr_loss` is its loss as a function (float64: the reference
  path for gradcheck).
* `sampled_softmax_loss`: the loss of `SampledSoftmax` for given candidate
  sets (CSR), as a function. float32 tensors run on lshk's kernels;
  float64 tensors run the same formulas (forward and hand-written
  backward) in PyTorch, the reference path that
  `torch.autograd.gradcheck` checks.

Only CPU tensors are supported: lshk runs on the CPU.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Optional, Tuple

import numpy as np
import torch
from torch import nn

import lshk as _lshk

__all__ = ["TopKHead", "SampledSoftmax", "sampled_softmax_loss", "SAMPLERS", "HrrOutput", "hrr_loss"]

SAMPLERS = ("full", "uniform", "unigram", "lsh-embedding", "lsh-label", "forest")

_PAD_ID = np.uint32(0xFFFFFFFF)


# ---------------------------------------------------------------------------
# tensors in and out


def _check_tensor(t: Any, name: str, dtypes=(torch.float32,)) -> torch.Tensor:
    """`t` must be a CPU tensor of one of `dtypes` (TypeError / ValueError)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: must be a torch.Tensor, got {type(t).__name__}")
    if t.device.type != "cpu":
        raise ValueError(
            f"{name}: must be on the CPU (lshk runs on the CPU), got device {t.device}"
        )
    if t.dtype not in dtypes:
        want = " or ".join(str(d) for d in dtypes)
        raise TypeError(f"{name}: must be {want}, got {t.dtype}")
    if t.layout != torch.strided:
        raise TypeError(f"{name}: must be a dense (strided) tensor, got {t.layout}")
    return t


def _check_batch_and_rows(x: Any, xname: str, rows: Any, rname: str, rdim: str) -> torch.dtype:
    """Checks a float32/float64 batch `x` (nb x dim) and a matrix `rows`
    (rdim x dim) of the same dtype and width; returns the dtype."""
    _check_tensor(x, xname, (torch.float32, torch.float64))
    dt = x.dtype
    _check_tensor(rows, rname, (dt,))
    if x.dim() != 2 or rows.dim() != 2 or x.shape[1] != rows.shape[1]:
        raise ValueError(
            f"{xname} (nb x dim) and {rname} ({rdim} x dim): shapes {tuple(x.shape)} and "
            f"{tuple(rows.shape)} do not match"
        )
    return dt


def _np(t: torch.Tensor) -> np.ndarray:
    """A numpy view of a CPU tensor's memory (no copy)."""
    return t.detach().numpy()


def _version(t: torch.Tensor) -> Optional[int]:
    """The tensor's in-place version counter (None for an inference tensor,
    which has none)."""
    try:
        return t._version
    except RuntimeError:
        return None


def _labels(labels: Any, n: int, rows: int) -> np.ndarray:
    """Labels as a uint32 numpy array of n values in 0..rows (ValueError /
    TypeError otherwise), checked before anything changes."""
    if not isinstance(labels, torch.Tensor):
        raise TypeError(f"labels: must be a torch.Tensor, got {type(labels).__name__}")
    if labels.device.type != "cpu":
        raise ValueError(f"labels: must be on the CPU, got device {labels.device}")
    if labels.dtype not in (torch.int64, torch.int32, torch.int16, torch.uint8, torch.int8):
        raise TypeError(f"labels: must be an integer tensor, got {labels.dtype}")
    if labels.numel() != n:
        raise ValueError(
            f"labels: must hold one label per sample ({n}), got shape {tuple(labels.shape)}"
        )
    lab = labels.detach().reshape(-1).numpy()
    if n and (int(lab.min()) < 0 or int(lab.max()) >= rows):
        raise ValueError(
            f"labels: must lie in 0..{rows - 1}, got min {int(lab.min())}, max {int(lab.max())}"
        )
    return lab.astype(np.uint32)


# ---------------------------------------------------------------------------
# TopKHead


class TopKHead(nn.Module):
    """The top-k logits of a wide output layer through an `lshk.Index`.

    `TopKHead(weight, bias=None, k=10, source="ivf", storage=None,
    query=None, **index_knobs)` builds the index over `weight` (rows x dim,
    float32 CPU) and `bias` (rows,) with the source's build knobs
    (`lshk.Index`'s: `nlist=`, `codes=`, `bits_per_table=`, `m=`, ...);
    `query` is a dict of query knobs for every call (`nprobe=`, `rerank=`,
    `reach=`, `ef=`, ...). `storage=None` reads the weight tensor in place
    ("borrowed": W is held once, by the tensor) when it is contiguous
    float32, else lets the index keep a copy ("f32").

    `forward(h, k=None)`: h of shape (..., dim), float32 on the CPU;
    returns (ids int64 (..., k), logits float32 (..., k)), best first, ties
    by the smaller id. A query that finds fewer than k rows is padded with
    id -1 and logit -inf. The logits are exact for the ids returned
    (W . h + b as the index stores W); which ids are found depends on the
    source and knobs (exhaustive knobs give the exact top k).

    The weight and bias are held as non-persistent buffers sharing the
    given tensors' memory. Changing them in place after the build (an
    optimizer step, `copy_`) makes `forward` raise RuntimeError until
    `refresh()` rebuilds the index. `forward` may run from several threads
    at once (lshk's queries are thread-safe and release the GIL);
    `refresh` must not run concurrently with them.
    """

    def __init__(
        self,
        weight: torch.Tensor,
        bias: Optional[torch.Tensor] = None,
        *,
        k: int = 10,
        source: str = "ivf",
        storage: Optional[str] = None,
        query: Optional[Dict[str, Any]] = None,
        **index_knobs: Any,
    ) -> None:
        super().__init__()
        _check_tensor(weight, "weight")
        if weight.dim() != 2:
            raise ValueError(f"weight: must be 2-D (rows x dim), got shape {tuple(weight.shape)}")
        if bias is not None:
            _check_tensor(bias, "bias")
            if tuple(bias.shape) != (weight.shape[0],):
                raise ValueError(
                    f"bias: must have shape ({weight.shape[0]},), got {tuple(bias.shape)}"
                )
        if k < 1:
            raise ValueError(f"k: must be >= 1, got {k}")
        self.register_buffer("weight", weight.detach(), persistent=False)
        self.register_buffer(
            "bias", None if bias is None else bias.detach(), persistent=False
        )
        self.k = int(k)
        self.source = source
        self.storage = storage
        self.query_knobs = dict(query or {})
        self.index_knobs = dict(index_knobs)
        self.index: Optional[_lshk.Index] = None
        self.refresh()

    @classmethod
    def from_linear(
        cls, linear: nn.Linear, k: int = 10, source: str = "ivf", **kwargs: Any
    ) -> "TopKHead":
        """A head over `linear.weight` (out_features x in_features) and
        `linear.bias`, sharing their memory."""
        if not isinstance(linear, nn.Linear):
            raise TypeError(f"linear: must be an nn.Linear, got {type(linear).__name__}")
        return cls(linear.weight, linear.bias, k=k, source=source, **kwargs)

    @property
    def rows(self) -> int:
        return int(self.weight.shape[0])

    @property
    def dim(self) -> int:
        return int(self.weight.shape[1])

    def _stamp(self) -> Tuple[Any, ...]:
        w, b = self.weight, self.bias
        return (
            w.data_ptr(),
            tuple(w.shape),
            _version(w),
            None if b is None else b.data_ptr(),
            None if b is None else _version(b),
        )

    def refresh(self) -> None:
        """Builds the index again from the current weight and bias (after
        they were changed on purpose). Not concurrently with `forward`."""
        w = _np(self.weight)
        b = None if self.bias is None else _np(self.bias)
        storage = self.storage
        if storage is None:
            inplace = self.weight.is_contiguous() and (
                self.bias is None or self.bias.is_contiguous()
            )
            storage = "borrowed" if inplace else "f32"
        self.index = _lshk.Index(w, b, source=self.source, storage=storage, **self.index_knobs)
        self._built = self._stamp()

    def forward(self, h: torch.Tensor, k: Optional[int] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        _check_tensor(h, "h")
        if h.dim() < 1 or h.shape[-1] != self.dim:
            raise ValueError(
                f"h: must have shape (..., {self.dim}), got {tuple(h.shape)}"
            )
        if self._stamp() != self._built:
            raise RuntimeError(
                "TopKHead: the weight or bias changed after the index was built "
                "(in place, or replaced); call refresh() to build it again"
            )
        k = self.k if k is None else int(k)
        if k < 1:
            raise ValueError(f"k: must be >= 1, got {k}")
        lead = tuple(h.shape[:-1])
        q = h.detach().reshape(-1, self.dim)
        ids, scores = self.index.query(q.numpy(), k, **self.query_knobs)
        ids64 = ids.astype(np.int64)
        ids64[ids == _PAD_ID] = -1
        return (
            torch.from_numpy(ids64).reshape(*lead, k),
            torch.from_numpy(scores).reshape(*lead, k),
        )

    def extra_repr(self) -> str:
        return f"rows={self.rows}, dim={self.dim}, k={self.k}, index={self.index!r}"


# ---------------------------------------------------------------------------
# the sampled softmax cross-entropy as an autograd function


def _segments(offsets: np.ndarray) -> np.ndarray:
    """The sample of every position of a CSR layout."""
    return np.repeat(np.arange(len(offsets) - 1), np.diff(offsets).astype(np.int64))


class _XentLshk(torch.autograd.Function):
    """float32: the forward and backward on lshk's kernels."""

    @staticmethod
    def forward(ctx, h, weight, bias, ids, offsets, targets, sparse, threads):
        hn, wn = _np(h), _np(weight)
        bn = None if bias is None else _np(bias)
        z = _lshk.gathered_matmul(wn, hn, ids, offsets, bias=bn)
        loss, g = _lshk.softmax_xent_csr(z, targets, offsets, threads=threads)
        ctx.save_for_backward(h, weight)
        ctx.g, ctx.ids, ctx.offsets = g, ids, offsets
        ctx.sparse, ctx.threads, ctx.has_bias = sparse, threads, bias is not None
        nb = len(offsets) - 1
        return h.new_tensor(float(loss.sum(dtype=np.float64)) / max(nb, 1))

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        h, weight = ctx.saved_tensors
        ids, offsets, threads = ctx.ids, ctx.offsets, ctx.threads
        nb = len(offsets) - 1
        rows, dim = weight.shape
        # the gradient of the mean: every logit's gradient times grad / nb
        gz = (ctx.g * np.float32(float(grad_out) / max(nb, 1))).astype(np.float32)
        hn, wn = _np(h), _np(weight)
        dh = dw = db = None
        if ctx.needs_input_grad[0]:
            dh = torch.from_numpy(_lshk.gather_dq(wn, gz, ids, offsets, threads=threads))
        need_w = ctx.needs_input_grad[1]
        need_b = ctx.has_bias and ctx.needs_input_grad[2]
        if ctx.sparse and (need_w or need_b):
            # the touched rows only: the row update over a compact matrix
            u, inv = np.unique(ids, return_inverse=True)
            inv = inv.reshape(-1).astype(np.uint32)
            idx = torch.from_numpy(u.astype(np.int64)).unsqueeze(0)
            if need_w:
                gw = np.zeros((len(u), dim), np.float32)
                _lshk.rows_update_sgd(gw, hn, gz, inv, offsets, -1.0, threads=threads)
                dw = torch.sparse_coo_tensor(
                    idx, torch.from_numpy(gw), (rows, dim), is_coalesced=True, check_invariants=False
                )
            if need_b:
                gb = np.bincount(inv, weights=gz, minlength=len(u)).astype(np.float32)
                db = torch.sparse_coo_tensor(
                    idx, torch.from_numpy(gb), (rows,), is_coalesced=True, check_invariants=False
                )
        else:
            if need_w:
                # W - (-1 * g_j) h_b position by position from zero: sum_j g_j h_b
                gw = np.zeros((rows, dim), np.float32)
                _lshk.rows_update_sgd(gw, hn, gz, ids, offsets, -1.0, threads=threads)
                dw = torch.from_numpy(gw)
            if need_b:
                gb = np.bincount(ids, weights=gz, minlength=rows).astype(np.float32)
                db = torch.from_numpy(gb)
        return dh, dw, db, None, None, None, None, None


class _XentTorch(torch.autograd.Function):
    """float64 reference: the same formulas in PyTorch, the backward
    written out as in `_XentLshk` (checked by gradcheck)."""

    @staticmethod
    def forward(ctx, h, weight, bias, ids, offsets, targets, sparse, threads):
        seg = torch.from_numpy(_segments(offsets))
        idt = torch.from_numpy(ids.astype(np.int64))
        t = torch.from_numpy(targets).to(h.dtype)
        nb = len(offsets) - 1
        z = (weight[idt] * h[seg]).sum(1)
        if bias is not None:
            z = z + bias[idt]
        m = torch.full((nb,), -math.inf, dtype=h.dtype).scatter_reduce(
            0, seg, z, "amax", include_self=True
        )
        m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
        e = torch.exp(z - m[seg])
        s = torch.zeros(nb, dtype=h.dtype).index_add(0, seg, e)
        tsum = torch.zeros(nb, dtype=h.dtype).index_add(0, seg, t)
        has = tsum > 0
        tn = torch.where(has[seg], t / torch.where(has, tsum, torch.ones_like(tsum))[seg], 0)
        lse = torch.log(torch.where(s > 0, s, torch.ones_like(s))) + m
        tz = torch.zeros(nb, dtype=h.dtype).index_add(0, seg, tn * z)
        loss = torch.where(has, lse - tz, torch.zeros_like(lse))
        p = e / torch.where(s > 0, s, torch.ones_like(s))[seg]
        g = torch.where(has[seg], p - tn, torch.zeros_like(p))
        ctx.save_for_backward(h, weight, g, seg, idt)
        ctx.sparse, ctx.has_bias = sparse, bias is not None
        return loss.sum() / max(nb, 1)

    @staticmethod
    def backward(ctx, grad_out):
        h, weight, g, seg, idt = ctx.saved_tensors
        nb = h.shape[0]
        rows, dim = weight.shape
        gz = g * (grad_out / max(nb, 1))
        dh = dw = db = None
        if ctx.needs_input_grad[0]:
            dh = torch.zeros_like(h).index_add(0, seg, gz[:, None] * weight[idt])
        need_w = ctx.needs_input_grad[1]
        need_b = ctx.has_bias and ctx.needs_input_grad[2]
        if need_w:
            dw = torch.zeros_like(weight).index_add(0, idt, gz[:, None] * h[seg])
        if need_b:
            db = torch.zeros(rows, dtype=h.dtype).index_add(0, idt, gz)
        if ctx.sparse:
            if dw is not None:
                dw = dw.to_sparse(1)
            if db is not None:
                db = db.to_sparse()
        return dh, dw, db, None, None, None, None, None


def _csr(ids: Any, offsets: Any, nb: int, rows: int) -> Tuple[np.ndarray, np.ndarray]:
    ids = np.asarray(ids.numpy() if isinstance(ids, torch.Tensor) else ids)
    offsets = np.asarray(offsets.numpy() if isinstance(offsets, torch.Tensor) else offsets)
    if ids.ndim != 1 or offsets.ndim != 1:
        raise ValueError("ids and offsets: must be 1-D")
    if not (np.issubdtype(ids.dtype, np.integer) and np.issubdtype(offsets.dtype, np.integer)):
        raise TypeError("ids and offsets: must be integer arrays")
    if len(offsets) != nb + 1:
        raise ValueError(f"offsets: must hold nb + 1 = {nb + 1} values, got {len(offsets)}")
    if offsets[0] != 0 or np.any(np.diff(offsets) < 0) or offsets[-1] != len(ids):
        raise ValueError("offsets: must start at 0, not decrease and end at len(ids)")
    if len(ids) and (ids.min() < 0 or ids.max() >= rows):
        raise ValueError(f"ids: must lie in 0..{rows - 1}")
    return ids.astype(np.uint32), offsets.astype(np.uint64)


def sampled_softmax_loss(
    h: torch.Tensor,
    weight: torch.Tensor,
    bias: Optional[torch.Tensor],
    ids: Any,
    offsets: Any,
    labels: torch.Tensor,
    *,
    sparse: bool = False,
    threads: int = 0,
) -> torch.Tensor:
    """The mean over the batch of each sample's softmax cross-entropy over
    its candidates: sample b's logits are `weight[j] . h[b] + bias[j]` for
    j in `ids[offsets[b]:offsets[b+1]]` (CSR, distinct ids per sample), its
    target the position holding `labels[b]` (a sample whose label is not
    among its candidates has loss 0 and no gradient).

    float32 tensors run on lshk's kernels; float64 tensors run the same
    formulas in PyTorch (the reference path). Gradients flow to h, weight
    and bias; `sparse=True` makes those of weight and bias sparse COO
    tensors over the touched rows. `threads`: for lshk's kernels (0 =
    every core; the results do not depend on it)."""
    dt = _check_batch_and_rows(h, "h", weight, "weight", "rows")
    rows = weight.shape[0]
    if bias is not None:
        _check_tensor(bias, "bias", (dt,))
        if tuple(bias.shape) != (rows,):
            raise ValueError(f"bias: must have shape ({rows},), got {tuple(bias.shape)}")
    nb = h.shape[0]
    lab = _labels(labels, nb, rows)
    ids, offsets = _csr(ids, offsets, nb, rows)
    targets = (ids == np.repeat(lab, np.diff(offsets).astype(np.int64))).astype(np.float32)
    fn = _XentLshk if dt == torch.float32 else _XentTorch
    return fn.apply(h, weight, bias, ids, offsets, targets, bool(sparse), int(threads))


# ---------------------------------------------------------------------------
# SampledSoftmax


class SampledSoftmax(nn.Module):
    """A softmax output layer over `rows` classes trained on sampled
    candidate sets.

    Parameters: `weight` (rows x dim) and `bias` (rows; None with
    bias=False), float32, initialised N(0, init_std^2) and 0 (a zero W
    would put every row in one SimHash bucket).

    `forward(h, labels)`: h (..., dim) float32 on the CPU, labels (...)
    integer in 0..rows-1; returns the mean over the samples of the softmax
    cross-entropy over each sample's candidate set C_b (its label always
    in it, no other id repeated): `log sum_{j in C_b} exp(z_j) - z_label`,
    z_j = weight[j] . h_b + bias[j]. `sampler`:

    * "full": every class (the exact softmax cross-entropy) through the
      same gathered kernels, each sample reading all of W: the exact
      reference on lshk's path (a dense PyTorch layer is faster for a
      full softmax).
    * "uniform": the label and `num_samples - 1` negatives of its own,
      drawn uniformly without replacement (repeats and the label
      rejected). `shared_negatives=True`: one draw of `num_samples`
      negatives shared by the batch (the label removed where it was
      drawn, else the last one), as TensorFlow's sampled softmax does.
    * "unigram": as uniform, drawn with probabilities proportional to
      counts^unigram_power (`counts`: one per class; classes of count 0
      are never drawn).
    * "lsh-embedding" / "lsh-label": LSH negative sampling. A SimHash
      index (`bits_per_table` K, `tables` L, rows [w, b]) over W, queried
      with [h, 1] (embedding) or [w_label, 1] (label); the label, then
      whole buckets table by table from a per-sample start table while the
      set stays within num_samples ids. The index follows W: on the
      decaying schedule (`rehash_period`, `rehash_lambda`: rehashes at
      steps 50, 100, 150, 200, 251, ... by default), the rows whose weight
      or bias changed since the last rehash are written to the index and
      rehashed (only those). `centre_rows` (default True): the index holds
      the rows minus their mean, [w - mean w, b - mean b] (the label query
      likewise); a shift shared by every row changes every logit of a
      query alike, so the ranking the hash approximates is the same, but
      without centring such a shift dominates the rows' directions: Adam
      moves every row by about lr per coordinate along one shared
      direction, the rows end up in a few huge buckets and the queries in
      empty ones (examples/lns_train.md: active sets of ~50 classes
      instead of 1,024 on w2v-gutenberg; centred, 920). The mean is
      recomputed at each rehash; when it has moved by more than 5 % of
      the centred rows' rms norm the index is rebuilt around the new one.
    * "forest": the hashing forest over the rows [w, b]
      (`forest_trees`, `forest_leaf`, unit rows with `forest_normalize`),
      rebuilt from the current W every `forest_rebuild` steps; each sample
      finds its `forest_set_size` nearest classes to [h, 1] (with
      `forest_confidence` > 0, HF-A's threshold: only the fewest of them,
      by logit, holding that share of their softmax mass), the batch's
      union is capped at num_samples - 1 classes (drawn by their counts),
      and each sample's set is its label plus that union.

    A step is one call of forward in training mode with gradients
    enabled; the schedules count these. The candidate sets depend only on
    the seed, the step and the inputs.

    `sparse=True`: the gradients of weight and bias are sparse COO tensors
    over the rows in the batch's candidate sets (for torch.optim.SGD and
    torch.optim.SparseAdam); default dense. `threads`: for lshk's kernels
    (0 = every core; results do not depend on it).
    """

    def __init__(
        self,
        rows: int,
        dim: int,
        *,
        bias: bool = True,
        sampler: str = "uniform",
        num_samples: int = 1024,
        counts: Optional[Any] = None,
        unigram_power: float = 0.75,
        sparse: bool = False,
        bits_per_table: int = 10,
        tables: int = 50,
        rehash_period: float = 50.0,
        rehash_lambda: float = 1e-4,
        forest_trees: int = 4,
        forest_leaf: int = 16,
        forest_set_size: int = 32,
        forest_rebuild: int = 100,
        forest_normalize: bool = True,
        forest_confidence: float = 0.0,
        centre_rows: bool = True,
        shared_negatives: bool = False,
        init_std: float = 0.01,
        seed: int = 0,
        threads: int = 0,
    ) -> None:
        super().__init__()
        if sampler not in SAMPLERS:
            raise ValueError(f"sampler: one of {', '.join(SAMPLERS)}; got {sampler!r}")
        if rows < 1 or dim < 1:
            raise ValueError(f"rows and dim: must be >= 1, got {rows} and {dim}")
        if num_samples < 1:
            raise ValueError(f"num_samples: must be >= 1, got {num_samples}")
        if not 0.0 <= forest_confidence <= 1.0:
            raise ValueError(f"forest_confidence: must be in [0, 1], got {forest_confidence}")
        gen = torch.Generator().manual_seed(int(seed))
        self.weight = nn.Parameter(torch.randn(rows, dim, generator=gen) * init_std)
        self.bias = nn.Parameter(torch.zeros(rows)) if bias else None
        self.rows, self.dim = int(rows), int(dim)
        self.sampler = sampler
        self.num_samples = int(min(num_samples, rows))
        self.sparse = bool(sparse)
        self.shared_negatives = bool(shared_negatives)
        self.threads = int(threads)
        self.seed = int(seed)
        self.step = 0
        self._logp = None
        if sampler == "unigram":
            if counts is None:
                raise ValueError("counts: needed by sampler='unigram' (one count per class)")
            c = np.asarray(counts, dtype=np.float64).reshape(-1)
            if c.shape != (rows,) or not np.all(np.isfinite(c)) or np.any(c < 0) or c.sum() <= 0:
                raise ValueError(
                    f"counts: must be {rows} finite non-negative values, not all 0"
                )
            with np.errstate(divide="ignore"):
                self._logp = unigram_power * np.log(c)
        self.lsh = dict(bits_per_table=int(bits_per_table), tables=int(tables))
        self.rehash = (float(rehash_period), float(rehash_lambda))
        self.forest = dict(
            trees=int(forest_trees),
            leaf_size=int(forest_leaf),
            normalize_rows=bool(forest_normalize),
        )
        self.centre_rows = bool(centre_rows)
        self._mu: Optional[np.ndarray] = None
        self._mub = 0.0
        self.forest_set_size = int(forest_set_size)
        self.forest_confidence = float(forest_confidence)
        self.forest_rebuild = int(forest_rebuild)
        self.index: Optional[_lshk.Index] = None
        self._next_sync = 0
        self._aug: Optional[np.ndarray] = None
        self._scratch: Optional[np.ndarray] = None
        self.rehashed_rows = 0

    def extra_repr(self) -> str:
        return (
            f"rows={self.rows}, dim={self.dim}, sampler={self.sampler!r}, "
            f"num_samples={self.num_samples}, sparse={self.sparse}, bias={self.bias is not None}"
        )

    # -- candidate sets -------------------------------------------------

    def _rng(self) -> np.random.Generator:
        return np.random.default_rng([self.seed, self.step, 0x5EED])

    def _with_label(self, shared: np.ndarray, lab: np.ndarray, cap: int) -> Tuple[np.ndarray, np.ndarray]:
        """Each sample's label, then the shared ids other than it, at most
        `cap` ids a sample (CSR)."""
        nb = len(lab)
        keep = shared[None, :] != lab[:, None]
        over = keep.sum(1) + 1 > cap
        if over.any():
            # the label was not among them and all fit: drop the last one
            last = keep.shape[1] - 1 - np.argmax(keep[:, ::-1], axis=1)
            keep[over, last[over]] = False
        cand = np.concatenate([lab[:, None], np.broadcast_to(shared, (nb, len(shared)))], 1)
        mask = np.concatenate([np.ones((nb, 1), bool), keep], 1)
        ids = cand[mask].astype(np.uint32)
        offsets = np.zeros(nb + 1, np.uint64)
        np.cumsum(mask.sum(1), out=offsets[1:])
        return ids, offsets

    def _per_sample(self, lab: np.ndarray, s: int) -> Tuple[np.ndarray, np.ndarray]:
        """Each sample's label and its own s - 1 distinct negatives: draws
        (uniform, or by counts^power) in order, repeats and the label
        rejected, i.e. sampling without replacement."""
        nb, rows = len(lab), self.rows
        rng = self._rng()
        if self.sampler == "unigram":
            support = int(np.count_nonzero(np.isfinite(self._logp)))
            cdf = np.cumsum(np.exp(self._logp - np.max(self._logp)))
            cdf /= cdf[-1]

            def draw(n, m):
                return np.minimum(np.searchsorted(cdf, rng.random((n, m)), side="right"), rows - 1)
        else:
            support = rows

            def draw(n, m):
                return rng.integers(0, rows, (n, m))

        need = max(min(s, support + 1) - 1, 0)
        need_b = np.full(nb, need)
        if self.sampler == "unigram":
            # a label outside the support leaves `support` negatives
            lab_in = np.isfinite(self._logp[lab])
            need_b = np.where(lab_in, np.minimum(need, support - 1), np.minimum(need, support))
        m = need + need // 8 + 16
        drawn = draw(nb, m)
        while True:
            valid = self._first_draws(drawn) & (drawn != lab[:, None])
            if (valid.sum(1) >= need_b).all():
                break
            drawn = np.concatenate([drawn, draw(nb, m)], 1)
        valid &= np.cumsum(valid, 1) <= need_b[:, None]
        cand = np.concatenate([lab[:, None].astype(np.int64), drawn], 1)
        mask = np.concatenate([np.ones((nb, 1), bool), valid], 1)
        ids = cand[mask].astype(np.uint32)
        offsets = np.zeros(nb + 1, np.uint64)
        np.cumsum(mask.sum(1), out=offsets[1:])
        return ids, offsets

    def _first_draws(self, drawn: np.ndarray) -> np.ndarray:
        """True where drawn[b, i] is the first occurrence of its value in
        row b: per row, the smallest position of each value, through a
        scratch of int32 positions indexed by (sample, class)
        (np.minimum.at, which is defined for repeated indices), in chunks
        of samples so the scratch stays within 16 MiB."""
        nb, m = drawn.shape
        rows = self.rows
        chunk = max(1, (1 << 22) // rows)
        if self._scratch is None or self._scratch.size < min(chunk, nb) * rows:
            self._scratch = np.empty(min(chunk, nb) * rows, np.int32)
        scratch = self._scratch
        pos = np.arange(m, dtype=np.int32)
        out = np.empty((nb, m), bool)
        for b0 in range(0, nb, chunk):
            d = drawn[b0:b0 + chunk]
            flat = (d + (np.arange(d.shape[0], dtype=np.int64) * rows)[:, None]).ravel()
            p = np.broadcast_to(pos, d.shape).ravel()
            scratch[flat] = m
            np.minimum.at(scratch, flat, p)
            out[b0:b0 + chunk] = (scratch[flat] == p).reshape(d.shape)
        return out

    def _aug_rows(self) -> np.ndarray:
        """[w, b] as a float32 array (rows x (dim + 1)), refreshed."""
        if self._aug is None:
            self._aug = np.empty((self.rows, self.dim + 1), np.float32)
        self._aug[:, : self.dim] = _np(self.weight)
        self._aug[:, self.dim] = 0.0 if self.bias is None else _np(self.bias)
        return self._aug

    def _lsh_rows(self, w: np.ndarray, b: Optional[np.ndarray]) -> Tuple[np.ndarray, Optional[np.ndarray]]:
        """The rows the LSH index holds: w and b, less their means when
        centred (the means of the last (re)build)."""
        if not self.centre_rows:
            return w, b
        wc = (w - self._mu).astype(np.float32)
        return wc, None if b is None else (b - np.float32(self._mub)).astype(np.float32)

    def _build_lsh(
        self, w: np.ndarray, b: Optional[np.ndarray], mu: Optional[np.ndarray] = None
    ) -> None:
        """Builds the index over the rows (centred: around their mean `mu`,
        in float64, computed here when not given)."""
        if self.centre_rows:
            if mu is None:
                mu = w.mean(axis=0, dtype=np.float64)
            self._mu = mu.astype(np.float32)
            self._mub = 0.0 if b is None else float(b.mean(dtype=np.float64))
        wc, bc = self._lsh_rows(w, b)
        self.index = _lshk.Index(
            wc, bc, source="simhash", transform="bias_aug", storage="f32",
            seed=self.seed + 1, **self.lsh,
        )
        self._views = (self.index.simhash(), self.index.tables())

    def _recentre_due(self, w: np.ndarray) -> Optional[np.ndarray]:
        """The rows' new mean (float64) when it moved by more than 5 % of
        the centred rows' rms norm since the index was built around the
        old one, else None."""
        if not self.centre_rows:
            return None
        mu = w.mean(axis=0, dtype=np.float64)
        rms = math.sqrt(float(np.mean(np.sum((w - mu) ** 2, axis=1, dtype=np.float64))))
        return mu if float(np.linalg.norm(mu - self._mu)) > 0.05 * rms else None

    def _sync_lsh(self) -> None:
        """Build the SimHash index, or on the schedule write the rows that
        changed since the last rehash to it and rehash them (rebuild it
        around the new mean when that has moved, with centre_rows)."""
        w0 = _np(self.weight)
        b0 = None if self.bias is None else _np(self.bias)
        due = self.index is not None and self.step >= self._next_sync
        mu = self._recentre_due(w0) if due else None
        if self.index is None:
            self._build_lsh(w0, b0)
        elif mu is not None:
            self._build_lsh(w0, b0, mu)
            self.rehashed_rows += self.rows
        elif due:
            w, b = self._lsh_rows(w0, b0)
            held = self.index.weights()
            changed = np.any(w != held["w"], axis=1)
            if b is not None:
                changed |= b != held["bias"]
            ids = np.flatnonzero(changed).astype(np.uint32)
            if len(ids):
                self.index.update_rows(ids, w[ids], bias=None if b is None else b[ids])
                self.rehashed_rows += self.index.rehash_dirty()
        else:
            return
        period, lam = self.rehash
        self._next_sync = _lshk.rehash_next(self.step, period, lam)

    def _sync_forest(self) -> None:
        due = self.step % max(self.forest_rebuild, 1) == 0
        if self.index is None:
            self.index = _lshk.Index(
                self._aug_rows(), source="forest", storage="borrowed",
                seed=self.seed + 1, **self.forest,
            )
        elif due:
            self._aug_rows()
            self.index.rebuild()

    def candidates(self, h: torch.Tensor, labels: torch.Tensor) -> Tuple[np.ndarray, np.ndarray]:
        """The candidate sets of the samples (h (nb, dim), labels (nb,)) at
        the current step, as CSR (ids uint32, offsets uint64 of nb + 1),
        each holding its sample's label once. Keeps the sampler's index up
        to date with W first (on its schedule)."""
        hn = _np(h)
        nb = hn.shape[0]
        lab = _labels(labels, nb, self.rows)
        s, rows = self.num_samples, self.rows
        if self.sampler == "full":
            ids = np.tile(np.arange(rows, dtype=np.uint32), nb)
            return ids, (np.arange(nb + 1, dtype=np.uint64) * np.uint64(rows))
        if self.sampler in ("uniform", "unigram") and self.shared_negatives:
            rng = self._rng()
            if self.sampler == "uniform":
                neg = rng.choice(rows, size=min(s, rows), replace=False)
            else:
                # Gumbel top-s: s distinct classes drawn without replacement
                # with probabilities proportional to counts^power
                key = self._logp + rng.gumbel(size=rows)
                neg = np.argpartition(-key, min(s, rows) - 1)[: min(s, rows)]
                neg = neg[np.isfinite(key[neg])]
            return self._with_label(np.sort(neg).astype(np.uint32), lab, s)
        if self.sampler in ("uniform", "unigram"):
            return self._per_sample(lab, s)
        ones = np.ones((nb, 1), np.float32)
        if self.sampler in ("lsh-embedding", "lsh-label"):
            self._sync_lsh()
            if self.sampler == "lsh-embedding":
                q = np.hstack([hn, ones])
            else:
                w, _ = self._lsh_rows(_np(self.weight)[lab], None)
                q = np.hstack([w, ones])
            sh, tabs = self._views
            codes = sh.hash(q)
            return tabs.gather(
                codes,
                max_candidates=s,
                forced_offsets=np.arange(nb + 1, dtype=np.uint64),
                forced_ids=lab,
                rule="whole_buckets",
                budget_seed=(self.seed << 32) ^ self.step,
            )
        # forest
        self._sync_forest()
        cids, _ = self.index.candidates(
            np.hstack([hn, ones]),
            set_size=self.forest_set_size,
            confidence=self.forest_confidence,
        )
        shared = self.index.union(cids, cap=max(s - 1, 1), seed=(self.seed << 32) ^ self.step)
        return self._with_label(shared.astype(np.uint32), lab, s)

    def forward(self, h: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        _check_tensor(h, "h")
        if h.dim() < 1 or h.shape[-1] != self.dim:
            raise ValueError(f"h: must have shape (..., {self.dim}), got {tuple(h.shape)}")
        _check_tensor(self.weight, "weight")
        if tuple(self.weight.shape) != (self.rows, self.dim):
            raise RuntimeError(
                f"weight: was replaced by one of shape {tuple(self.weight.shape)}; "
                f"this layer has {self.rows} x {self.dim}"
            )
        h2 = h.reshape(-1, self.dim)
        lab = labels.reshape(-1) if isinstance(labels, torch.Tensor) else labels
        _labels(lab, h2.shape[0], self.rows)
        if not torch.isfinite(h2).all():
            raise ValueError("h: holds NaN or infinite values")
        ids, offsets = self.candidates(h2, lab)
        loss = sampled_softmax_loss(
            h2, self.weight, self.bias, ids, offsets, lab,
            sparse=self.sparse, threads=self.threads,
        )
        if self.training and torch.is_grad_enabled():
            self.step += 1
        return loss

    def sgd_step(
        self, h: torch.Tensor, labels: torch.Tensor, lr: float
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """One fused training step of plain SGD without autograd: the loss
        of `forward` (same candidate sets, same kernels), then the rows in
        the candidate sets updated in place by lshk_rows_update_sgd
        (`W[r] -= (lr g_j) h_b` position by position: W - lr dL/dW up to
        rounding) and the bias by `lr` times its gradient. Returns (loss,
        dL/dh) with dL/dh computed from W before the update, for the layers
        below. Counts as a step; no gradient is stored in weight.grad."""
        _check_tensor(h, "h")
        if h.dim() < 1 or h.shape[-1] != self.dim:
            raise ValueError(f"h: must have shape (..., {self.dim}), got {tuple(h.shape)}")
        if not math.isfinite(lr):
            raise ValueError(f"lr: must be finite, got {lr}")
        h2 = h.detach().reshape(-1, self.dim)
        lab = labels.reshape(-1) if isinstance(labels, torch.Tensor) else labels
        _labels(lab, h2.shape[0], self.rows)
        if not torch.isfinite(h2).all():
            raise ValueError("h: holds NaN or infinite values")
        ids, offsets = self.candidates(h2, lab)
        nb = h2.shape[0]
        hn, wn = _np(h2), _np(self.weight)
        bn = None if self.bias is None else _np(self.bias)
        lab_np = _labels(lab, nb, self.rows)
        targets = (ids == np.repeat(lab_np, np.diff(offsets).astype(np.int64))).astype(np.float32)
        z = _lshk.gathered_matmul(wn, hn, ids, offsets, bias=bn)
        loss, g = _lshk.softmax_xent_csr(z, targets, offsets, threads=self.threads)
        gz = (g * np.float32(1.0 / max(nb, 1))).astype(np.float32)
        dh = _lshk.gather_dq(wn, gz, ids, offsets, threads=self.threads)
        _lshk.rows_update_sgd(wn, hn, gz, ids, offsets, float(lr), threads=self.threads)
        if bn is not None:
            # rows outside the sets get b - 0 = b, unchanged
            gb = np.bincount(ids, weights=gz, minlength=self.rows)
            bn -= (float(lr) * gb).astype(np.float32)
        # the parameters changed through numpy: tell autograd's version
        # counters, so graphs that saved them refuse a stale backward
        bump = getattr(torch.autograd.graph, "increment_version", None)
        if bump is not None:
            bump(self.weight)
            if self.bias is not None:
                bump(self.bias)
        self.step += 1
        mean = float(loss.sum(dtype=np.float64)) / max(nb, 1)
        return torch.tensor(mean, dtype=torch.float32), torch.from_numpy(dh).reshape(h.shape)

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """The full layer's logits h @ weight.T + bias (dense PyTorch), for
        evaluation."""
        z = h @ self.weight.T
        return z if self.bias is None else z + self.bias


# ---------------------------------------------------------------------------
# HrrOutput: the HRR output layer (Ganesan et al., "Learning with
# Holographic Reduced Representations", NeurIPS 2021)

_HRR_EPS = 1e-8  # the normalisation's epsilon, as lshk's hrr::normalize
_HRRS: Dict[int, Any] = {}


def _hrr(dim: int) -> Any:
    """A shared `lshk.Hrr` for vectors of `dim` floats (its calls are
    serialised by the object's own lock)."""
    h = _HRRS.get(dim)
    if h is None:
        h = _HRRS.setdefault(dim, _lshk.Hrr(dim))
    return h


def _hrr_terms(pos_ids, pos_off, neg_ids, neg_off, absent):
    """The loss terms as CSR over 2 nb query rows: row b is sample b's
    estimate unbound with p (its positives, then its sampled negatives),
    row nb + b the one unbound with the absent vector m (its positives when
    `absent`, else nothing). Returns (ids uint32, offsets uint64, w) with
    w = -1 for a positive under p (loss 1 - |z|, or 1 - z when signs
    count) and +1 otherwise (loss |z|)."""
    nb = len(pos_off) - 1
    np_ = np.diff(pos_off).astype(np.int64)
    nn_ = np.diff(neg_off).astype(np.int64)
    seg_p = np.repeat(np.arange(nb), np_)
    seg_n = np.repeat(np.arange(nb), nn_)
    # row b: positives, then negatives (stable sort by row keeps each order)
    rows = np.concatenate([seg_p, seg_n])
    ids = np.concatenate([pos_ids, neg_ids]).astype(np.uint32)
    w = np.concatenate([-np.ones(len(pos_ids)), np.ones(len(neg_ids))])
    order = np.argsort(rows, kind="stable")
    ids, w = ids[order], w[order]
    cnt = np.concatenate([np_ + nn_, np_ if absent else np.zeros(nb, np.int64)])
    if absent:
        ids = np.concatenate([ids, pos_ids.astype(np.uint32)])
        w = np.concatenate([w, np.ones(len(pos_ids))])
    off = np.zeros(2 * nb + 1, np.uint64)
    np.cumsum(cnt, out=off[1:])
    return ids, off, w


class _HrrLshk(torch.autograd.Function):
    """float32: unbinding (forward) and binding (backward) on lshk's HRR
    kernels, the class vectors' dot products on its gathered matmul and
    their gradient on gather_dq."""

    @staticmethod
    def forward(ctx, s, classes, present, absent, ids, offsets, w, absolute, threads):
        nb, dim = s.shape
        hrr = _hrr(dim)
        sn = _np(s.contiguous())
        pn, mn = _np(present), _np(absent)
        # rows nb.. (the absent vector's) hold no term without J_n's m part
        has_m = int(offsets[2 * nb]) > int(offsets[nb])
        ym = hrr.unbind(mn, sn) if has_m else np.zeros_like(sn)
        y = np.concatenate([hrr.unbind(pn, sn), ym]).astype(np.float64)
        n = np.sqrt((y * y).sum(1))
        yhat = (y / (n + _HRR_EPS)[:, None]).astype(np.float32)
        z = _lshk.gathered_matmul(_np(classes), yhat, ids, offsets)
        z64 = z.astype(np.float64)
        az = np.abs(z64)
        loss = np.where(w < 0, 1.0 - (az if absolute else z64), az).sum() / max(nb, 1)
        ctx.save_for_backward(classes, present, absent)
        ctx.y, ctx.n, ctx.z = y, n, z
        ctx.ids, ctx.offsets, ctx.w, ctx.threads = ids, offsets, w, threads
        ctx.absolute, ctx.has_m = absolute, has_m
        return s.new_tensor(loss)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        classes, present, absent = ctx.saved_tensors
        if not ctx.needs_input_grad[0]:
            return (None,) * 9
        y, n = ctx.y, ctx.n
        nb2, dim = y.shape
        nb = nb2 // 2
        # dL/dz_j = w_j sign(z_j) / nb (a signed positive term: -1 / nb)
        sg = np.sign(ctx.z).astype(np.float64)
        if not ctx.absolute:
            sg = np.where(ctx.w < 0, 1.0, sg)
        g = (ctx.w * sg * (float(grad_out) / max(nb, 1))).astype(np.float32)
        gq = _lshk.gather_dq(_np(classes), g, ctx.ids, ctx.offsets, threads=ctx.threads)
        gq = gq.astype(np.float64)
        # through yhat = y / (|y| + eps):
        # dL/dy = G / (n + eps) - y (y . G) / (n (n + eps)^2)
        ne = n + _HRR_EPS
        safe = np.where(n > 0, n, 1.0)
        dy = gq / ne[:, None] - y * ((y * gq).sum(1) / (safe * ne * ne))[:, None]
        dy = dy.astype(np.float32)
        # the adjoint of the correlation key† ⊛ s is the convolution key ⊛ .
        hrr = _hrr(dim)
        ds = hrr.bind(_np(present), dy[:nb]).astype(np.float64)
        if ctx.has_m:
            ds += hrr.bind(_np(absent), dy[nb:])
        return (torch.from_numpy(ds.astype(np.float32)),) + (None,) * 8


def _unbind_torch(key: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    d = s.shape[-1]
    return torch.fft.irfft(torch.conj(torch.fft.rfft(key)) * torch.fft.rfft(s), n=d)


def _bind_torch(key: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    d = v.shape[-1]
    return torch.fft.irfft(torch.fft.rfft(key) * torch.fft.rfft(v), n=d)


class _HrrTorch(torch.autograd.Function):
    """float64 reference: the same formulas with torch.fft, the backward
    written out as in `_HrrLshk` (checked by gradcheck)."""

    @staticmethod
    def forward(ctx, s, classes, present, absent, ids, offsets, w, absolute, threads):
        nb, dim = s.shape
        y = torch.cat([_unbind_torch(present, s), _unbind_torch(absent, s)])
        n = y.norm(dim=1)
        yhat = y / (n + _HRR_EPS)[:, None]
        seg = torch.from_numpy(_segments(offsets))
        idt = torch.from_numpy(ids.astype(np.int64))
        wt = torch.from_numpy(w).to(s.dtype)
        z = (classes[idt] * yhat[seg]).sum(1)
        loss = torch.where(wt < 0, 1 - (z.abs() if absolute else z), z.abs()).sum() / max(nb, 1)
        ctx.save_for_backward(classes, present, absent, y, n, z, seg, idt, wt)
        ctx.absolute = absolute
        return loss

    @staticmethod
    def backward(ctx, grad_out):
        classes, present, absent, y, n, z, seg, idt, wt = ctx.saved_tensors
        nb = y.shape[0] // 2
        ds = None
        if ctx.needs_input_grad[0]:
            sg = torch.sign(z)
            if not ctx.absolute:
                sg = torch.where(wt < 0, torch.ones_like(sg), sg)
            g = wt * sg * (grad_out / max(nb, 1))
            gq = torch.zeros_like(y).index_add(0, seg, g[:, None] * classes[idt])
            ne = n + _HRR_EPS
            safe = torch.where(n > 0, n, torch.ones_like(n))
            dy = gq / ne[:, None] - y * ((y * gq).sum(1) / (safe * ne * ne))[:, None]
            ds = _bind_torch(present, dy[:nb]) + _bind_torch(absent, dy[nb:])
        return (ds,) + (None,) * 8


def _multi_labels(labels: Any, offsets: Any, nb: int, classes: int) -> Tuple[np.ndarray, np.ndarray]:
    """Each sample's positive labels as CSR (ids uint32, offsets uint64),
    from a 1-D tensor with `offsets` (CSR), a 1-D tensor of one label per
    sample, or a 2-D (nb, L) tensor padded with -1. Checked: integer, in
    range, no label twice in a sample."""
    if not isinstance(labels, torch.Tensor):
        raise TypeError(f"labels: must be a torch.Tensor, got {type(labels).__name__}")
    if labels.device.type != "cpu":
        raise ValueError(f"labels: must be on the CPU, got device {labels.device}")
    if labels.dtype not in (torch.int64, torch.int32, torch.int16, torch.uint8, torch.int8):
        raise TypeError(f"labels: must be an integer tensor, got {labels.dtype}")
    lab = labels.detach().numpy().astype(np.int64)
    if offsets is not None:
        off = np.asarray(offsets.numpy() if isinstance(offsets, torch.Tensor) else offsets)
        if lab.ndim != 1 or off.ndim != 1 or not np.issubdtype(off.dtype, np.integer):
            raise ValueError("labels with offsets: both must be 1-D, offsets integer (CSR)")
        if len(off) != nb + 1:
            raise ValueError(f"offsets: must hold nb + 1 = {nb + 1} values, got {len(off)}")
        if off[0] != 0 or np.any(np.diff(off) < 0) or off[-1] != len(lab):
            raise ValueError("offsets: must start at 0, not decrease and end at len(labels)")
        ids, off = lab, off.astype(np.int64)
    elif lab.ndim == 1:
        if len(lab) != nb:
            raise ValueError(f"labels: must hold one label per sample ({nb}), got {len(lab)}")
        ids, off = lab, np.arange(nb + 1, dtype=np.int64)
    elif lab.ndim == 2:
        if lab.shape[0] != nb:
            raise ValueError(f"labels: must have one row per sample ({nb}), got {tuple(lab.shape)}")
        keep = lab != -1
        ids = lab[keep]
        off = np.zeros(nb + 1, np.int64)
        np.cumsum(keep.sum(1), out=off[1:])
    else:
        raise ValueError(f"labels: must be 1-D or 2-D, got shape {tuple(lab.shape)}")
    if len(ids) and (ids.min() < 0 or ids.max() >= classes):
        raise ValueError(
            f"labels: must lie in 0..{classes - 1} (-1 pads a 2-D tensor), "
            f"got min {int(ids.min())}, max {int(ids.max())}"
        )
    seg = np.repeat(np.arange(nb), np.diff(off))
    key = np.sort(seg * classes + ids)
    if len(key) > 1 and np.any(key[1:] == key[:-1]):
        raise ValueError("labels: a sample holds the same label twice")
    return ids.astype(np.uint32), off.astype(np.uint64)


def hrr_loss(
    s: torch.Tensor,
    classes: torch.Tensor,
    present: torch.Tensor,
    absent: Optional[torch.Tensor],
    pos_ids: Any,
    pos_offsets: Any,
    neg_ids: Any = None,
    neg_offsets: Any = None,
    *,
    absolute: bool = True,
    threads: int = 0,
) -> torch.Tensor:
    """The HRR output layer's loss J_p + J_n, the mean over the samples.

    For sample b with positive labels Y_b (`pos_ids[pos_offsets[b]:
    pos_offsets[b+1]]`, CSR) and negatives N_b (`neg_ids`, `neg_offsets`,
    or none): y_p = p† ⊛ s_b and y_m = m† ⊛ s_b (the approximate inverse:
    circular correlation), normalised as y / (|y| + 1e-8), and with unit
    class vectors c

        J_p = sum_{y in Y_b} (1 - |c_y . y_p|)
        J_n = sum_{y in Y_b} |c_y . y_m| + sum_{n in N_b} |c_n . y_p|

    (the m term only when `absent` is given; `absolute=False`: J_p's terms
    are 1 - c_y . y_p, the sign counts). float32 tensors run on lshk's
    kernels (unbind, gathered matmul; backward: gather_dq, bind); float64
    ones run the same formulas in PyTorch with torch.fft (the reference
    path for gradcheck). Gradients flow to s only: the class vectors, p
    and m are fixed."""
    dt = _check_batch_and_rows(s, "s", classes, "classes", "m")
    nb, dim = s.shape
    m = classes.shape[0]
    _check_tensor(present, "present", (dt,))
    if tuple(present.shape) != (dim,):
        raise ValueError(f"present: must have shape ({dim},), got {tuple(present.shape)}")
    use_absent = absent is not None
    if use_absent:
        _check_tensor(absent, "absent", (dt,))
        if tuple(absent.shape) != (dim,):
            raise ValueError(f"absent: must have shape ({dim},), got {tuple(absent.shape)}")
    else:
        absent = torch.zeros_like(present)
    pid, poff = _csr(pos_ids, pos_offsets, nb, m)
    if neg_ids is None:
        nid, noff = np.zeros(0, np.uint32), np.zeros(nb + 1, np.uint64)
    else:
        nid, noff = _csr(neg_ids, neg_offsets, nb, m)
    if not torch.isfinite(s).all():
        raise ValueError("s: holds NaN or infinite values")
    ids, off, w = _hrr_terms(pid, poff, nid, noff, use_absent)
    fn = _HrrLshk if dt == torch.float32 else _HrrTorch
    if dt == torch.float32:
        present, absent = present.contiguous(), absent.contiguous()
    return fn.apply(s, classes, present, absent, ids, off, w, bool(absolute), int(threads))


class HrrOutput(nn.Module):
    """The HRR output layer (Ganesan et al., NeurIPS 2021): `classes`
    labels, each a fixed d-dimensional class vector; the network below
    predicts one vector s of `dim` floats instead of one logit per label.

    The class vectors are rows 0..classes-1 of lshk's projected class
    vectors of (`seed`, dim) (`lshk.hrr_class_vectors`: unit vectors, unit
    magnitude at every frequency, the same bits everywhere); the present
    vector p and the absent vector m are rows `classes` and `classes + 1`.
    All are fixed buffers (no parameters).

    `forward(s, labels, offsets=None)`: s (..., dim) float32 (or float64:
    the reference path); labels the positives of each sample: a 1-D
    integer tensor with `offsets` (CSR), a 1-D tensor of one label per
    sample, or a 2-D (nb, L) tensor padded with -1. Returns the mean over
    the samples of J_p + J_n (`hrr_loss`):

        J_p = sum_{y in Y} (1 - |c_y . p†⊛s / |p†⊛s||)
        J_n = sum_{y in Y} |c_y . m†⊛s / |m†⊛s||          (absent=True)
            + sum_{n in N} |c_n . p†⊛s / |p†⊛s||          (num_negatives)

    This is the form of the authors' code (absent=True, num_negatives=0,
    absolute=True): the positives must be found under p and not under m,
    with absolute cosines in both terms, so a label may be encoded with
    either sign. `num_negatives` > 0 adds that many negatives of each
    sample's own, uniform over the classes outside its positives (without
    replacement, seeded by `seed` and the step). `absolute=False`: J_p's
    terms are 1 - c_y . p†⊛s / |p†⊛s| (the sign counts).

    `predict(s, k)`: the top-k labels: y = p† ⊛ s normalised, then the
    largest |c . y| (absolute=True: the index is queried with y and -y and
    the answers merged) or c . y (absolute=False) over the class vectors,
    through an `lshk.Index` (`source`, `index_knobs`, `query` as for
    `TopKHead`; `source=None`: exact dense scores in PyTorch). Returns
    (ids int64, scores float32: |c . y| or c . y) of shape (..., k), best
    first, ties by the smaller id.
    """

    def __init__(
        self,
        classes: int,
        dim: int,
        *,
        seed: int = 0,
        absent: bool = True,
        num_negatives: int = 0,
        absolute: bool = True,
        source: Optional[str] = "ivf",
        query: Optional[Dict[str, Any]] = None,
        threads: int = 0,
        **index_knobs: Any,
    ) -> None:
        super().__init__()
        if classes < 1 or dim < 1:
            raise ValueError(f"classes and dim: must be >= 1, got {classes} and {dim}")
        if num_negatives < 0:
            raise ValueError(f"num_negatives: must be >= 0, got {num_negatives}")
        if not absent and num_negatives == 0:
            raise ValueError("absent=False needs num_negatives > 0 (else J_n is empty)")
        self.classes, self.dim = int(classes), int(dim)
        self.seed = int(seed)
        self.use_absent = bool(absent)
        self.absolute = bool(absolute)
        self.num_negatives = int(min(num_negatives, max(classes - 1, 0)))
        self.threads = int(threads)
        self.source = source
        self.query_knobs = dict(query or {})
        self.index_knobs = dict(index_knobs)
        c = _lshk.hrr_class_vectors(self.seed, self.dim, self.classes + 2, threads=self.threads)
        cv = torch.from_numpy(c)
        self.register_buffer("class_vectors", cv[: self.classes], persistent=False)
        self.register_buffer("present", cv[self.classes].clone(), persistent=False)
        self.register_buffer("absent", cv[self.classes + 1].clone(), persistent=False)
        self.index: Optional[_lshk.Index] = None
        self.step = 0

    def extra_repr(self) -> str:
        return (
            f"classes={self.classes}, dim={self.dim}, seed={self.seed}, "
            f"absent={self.use_absent}, num_negatives={self.num_negatives}, "
            f"absolute={self.absolute}, source={self.source!r}"
        )

    def _check_s(self, s: torch.Tensor, dtypes) -> torch.Tensor:
        _check_tensor(s, "s", dtypes)
        if s.dim() < 1 or s.shape[-1] != self.dim:
            raise ValueError(f"s: must have shape (..., {self.dim}), got {tuple(s.shape)}")
        s2 = s.reshape(-1, self.dim)
        if not torch.isfinite(s2).all():
            raise ValueError("s: holds NaN or infinite values")
        return s2

    def negatives(self, pos_ids: np.ndarray, pos_off: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """`num_negatives` distinct labels per sample outside its positives,
        uniform, drawn from the generator of (seed, step) (CSR)."""
        nb = len(pos_off) - 1
        k = self.num_negatives
        if k == 0:
            return np.zeros(0, np.uint32), np.zeros(nb + 1, np.uint64)
        rng = np.random.default_rng([self.seed, self.step, 0x4852])
        m = self.classes
        lens = np.diff(pos_off).astype(np.int64)
        if np.any(m - lens < k):
            raise ValueError(
                f"num_negatives: {k} labels outside a sample's positives are needed, "
                f"but a sample has {int(lens.max())} of {m} classes as positives"
            )
        seg = np.repeat(np.arange(nb), lens)
        pos_keys = seg * m + pos_ids.astype(np.int64)
        out = np.empty((nb, k), np.int64)
        # draws in order, repeats and positives rejected; a row still short
        # after 2k + 8 draws (only with few classes) is finished from the
        # labels left, in random order
        draw = rng.integers(0, m, size=(nb, 2 * k + 8))
        bad = np.isin(np.arange(nb)[:, None] * m + draw, pos_keys)
        for b in range(nb):
            row = draw[b][~bad[b]]
            _, first = np.unique(row, return_index=True)
            row = row[np.sort(first)][:k]
            if len(row) < k:
                taken = np.union1d(row, pos_ids[pos_off[b]:pos_off[b + 1]])
                free = np.setdiff1d(np.arange(m), taken)
                row = np.concatenate([row, rng.permutation(free)[: k - len(row)]])
            out[b] = row
        return out.reshape(-1).astype(np.uint32), (np.arange(nb + 1) * k).astype(np.uint64)

    def forward(self, s: torch.Tensor, labels: torch.Tensor, offsets: Any = None) -> torch.Tensor:
        s2 = self._check_s(s, (torch.float32, torch.float64))
        nb = s2.shape[0]
        pid, poff = _multi_labels(labels, offsets, nb, self.classes)
        nid, noff = self.negatives(pid, poff)
        dt = s2.dtype
        cls, p, m = self.class_vectors, self.present, self.absent
        if dt == torch.float64:
            cls, p, m = cls.double(), p.double(), m.double()
        loss = hrr_loss(
            s2, cls, p, m if self.use_absent else None, pid, poff,
            nid if self.num_negatives else None, noff if self.num_negatives else None,
            absolute=self.absolute, threads=self.threads,
        )
        if self.training and torch.is_grad_enabled():
            self.step += 1
        return loss

    def unbind(self, s: torch.Tensor) -> torch.Tensor:
        """p† ⊛ s normalised (y / (|y| + 1e-8)) on lshk's kernel: the
        estimate of the label superposition, (..., dim) float32."""
        s2 = self._check_s(s, (torch.float32,))
        y = _hrr(self.dim).unbind(_np(self.present), _np(s2.contiguous())).astype(np.float64)
        y /= (np.sqrt((y * y).sum(1)) + _HRR_EPS)[:, None]
        return torch.from_numpy(y.astype(np.float32)).reshape(s.shape)

    def build_index(self) -> None:
        """Builds the lshk index over the class vectors (borrowed: they are
        held once, by this module); `predict` does it on first use."""
        if self.source is not None:
            self.index = _lshk.Index(
                _np(self.class_vectors), None, source=self.source, storage="borrowed",
                **self.index_knobs,
            )

    def predict(self, s: torch.Tensor, k: int = 5) -> Tuple[torch.Tensor, torch.Tensor]:
        if k < 1:
            raise ValueError(f"k: must be >= 1, got {k}")
        y = self.unbind(s).reshape(-1, self.dim)
        lead = tuple(s.shape[:-1])
        nq = y.shape[0]
        if self.source is None:
            sc = y @ self.class_vectors.T
            if self.absolute:
                sc = sc.abs()
            # best first, ties by the smaller id (a stable descending sort)
            order = torch.sort(sc, dim=1, descending=True, stable=True).indices[:, :k]
            kk = order.shape[1]
            ids = torch.full((nq, k), -1, dtype=torch.int64)
            scores = torch.full((nq, k), -math.inf)
            ids[:, :kk], scores[:, :kk] = order, sc.gather(1, order)
            return ids.reshape(*lead, k), scores.reshape(*lead, k)
        if self.index is None:
            self.build_index()
        q = y.numpy()
        if self.absolute:
            # max |c . y| = the better of max c . y and max c . (-y)
            ids, scores = self.index.query(np.concatenate([q, -q]), k, **self.query_knobs)
            ids = np.concatenate([ids[:nq], ids[nq:]], axis=1)
            scores = np.concatenate([scores[:nq], scores[nq:]], axis=1)
            order = np.lexsort((ids, -scores.astype(np.float64)), axis=1)
            ids = np.take_along_axis(ids, order, 1)
            scores = np.take_along_axis(scores, order, 1)
            # a class in both answers (only where k nears the class count):
            # keep its better entry, the first after the sort
            by_id = np.argsort(ids, axis=1, kind="stable")
            sid = np.take_along_axis(ids, by_id, 1)
            dup = np.zeros(ids.shape, bool)
            np.put_along_axis(dup, by_id[:, 1:], (sid[:, 1:] == sid[:, :-1]) & (sid[:, 1:] != _PAD_ID), 1)
            if dup.any():
                ids[dup], scores[dup] = _PAD_ID, -np.inf
                order = np.lexsort((ids, -scores.astype(np.float64)), axis=1)
                ids = np.take_along_axis(ids, order, 1)
                scores = np.take_along_axis(scores, order, 1)
            ids, scores = ids[:, :k], scores[:, :k]
        else:
            ids, scores = self.index.query(q, k, **self.query_knobs)
        ids64 = ids.astype(np.int64)
        ids64[ids == _PAD_ID] = -1
        return (
            torch.from_numpy(ids64).reshape(*lead, k),
            torch.from_numpy(np.ascontiguousarray(scores)).reshape(*lead, k),
        )
