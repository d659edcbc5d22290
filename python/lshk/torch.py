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

__all__ = ["TopKHead", "SampledSoftmax", "sampled_softmax_loss", "SAMPLERS"]

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
    _check_tensor(h, "h", (torch.float32, torch.float64))
    dt = h.dtype
    _check_tensor(weight, "weight", (dt,))
    if h.dim() != 2 or weight.dim() != 2 or h.shape[1] != weight.shape[1]:
        raise ValueError(
            f"h (nb x dim) and weight (rows x dim): shapes {tuple(h.shape)} and "
            f"{tuple(weight.shape)} do not match"
        )
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
      rehashed (only those).
    * "forest": the hashing forest over the rows [w, b]
      (`forest_trees`, `forest_leaf`, unit rows with `forest_normalize`),
      rebuilt from the current W every `forest_rebuild` steps; each sample
      finds its `forest_set_size` nearest classes to [h, 1], the batch's
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
        self.forest_set_size = int(forest_set_size)
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

    def _sync_lsh(self) -> None:
        """Build the SimHash index, or on the schedule write the rows that
        changed since the last rehash to it and rehash them."""
        w = _np(self.weight)
        b = None if self.bias is None else _np(self.bias)
        if self.index is None:
            self.index = _lshk.Index(
                w, b, source="simhash", transform="bias_aug", storage="f32",
                seed=self.seed + 1, **self.lsh,
            )
            self._views = (self.index.simhash(), self.index.tables())
        elif self.step >= self._next_sync:
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
                w = _np(self.weight)
                q = np.hstack([w[lab], ones])
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
        cids, _ = self.index.candidates(np.hstack([hn, ones]), set_size=self.forest_set_size)
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
