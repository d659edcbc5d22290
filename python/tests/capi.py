"""A thin ctypes binding of liblshk.so (the C API), the reference the
Python package is compared with bit for bit in the tests."""

import ctypes as C
import os
import glob

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def find_lib_dir():
    """LSHK_LIB_DIR, or the newest of target/{debug,release} holding liblshk.so."""
    d = os.environ.get("LSHK_LIB_DIR")
    if d:
        return d
    found = [p for p in glob.glob(os.path.join(ROOT, "target", "*", "liblshk.so"))]
    if not found:
        return None
    return os.path.dirname(max(found, key=os.path.getmtime))


u32, u64, f32, f64, sz, vp = C.c_uint32, C.c_uint64, C.c_float, C.c_double, C.c_size_t, C.c_void_p
PROGRESS = C.CFUNCTYPE(None, vp, u64, u64)


# ---- include/lshk.h's structs (ctypes lays them out with C's alignment)

class LshParams(C.Structure):  # lshk_lsh_params
    _fields_ = [("bits_per_table", u32), ("tables", u32), ("sparsity", u32), ("bin_size", u32),
                ("range_bits", u32), ("bucket_cap", u32), ("seed", u64), ("planes", vp),
                ("planes_len", sz), ("dwta_map", vp), ("dwta_map_len", sz)]


class IvfParams(C.Structure):  # lshk_ivf_params
    _fields_ = [("nlist", u32), ("iters", u32), ("train_rows", u32), ("codes", u32), ("pq_m", u32),
                ("reserved", u32), ("seed", u64), ("row_weights", vp), ("n_weights", sz)]


class GraphParams(C.Structure):  # lshk_graph_params
    _fields_ = [("m", u32), ("ef_construction", u32), ("storage", u32), ("reserved", u32),
                ("seed", u64)]


class ForestParams(C.Structure):  # lshk_forest_params
    _fields_ = [("trees", u32), ("leaf_size", u32), ("normalize_rows", u32), ("reserved", u32),
                ("seed", u64)]


class IndexParams(C.Structure):  # lshk_index_params
    _fields_ = [("struct_size", u32), ("source", u32), ("storage", u32), ("transform", u32),
                ("build_threads", u32), ("lsh", LshParams), ("ivf", IvfParams),
                ("graph", GraphParams), ("forest", ForestParams), ("progress", PROGRESS),
                ("progress_user", vp)]


class LshQuery(C.Structure):  # lshk_lsh_query
    _fields_ = [("min_count", u32), ("max_candidates", u32), ("probes", u32), ("bits_per_table", u32)]


class IvfQuery(C.Structure):  # lshk_ivf_query
    _fields_ = [("nprobe", u32), ("rerank", u32), ("reach", f32), ("refine", u32)]


class GraphQuery(C.Structure):  # lshk_graph_query
    _fields_ = [("walk", u32), ("ef", u32), ("rerank", u32), ("reserved", u32)]


class ForestQuery(C.Structure):  # lshk_forest_query
    _fields_ = [("set_size", u32), ("confidence", C.c_float)]


class QueryParams(C.Structure):  # lshk_query_params
    _fields_ = [("struct_size", u32), ("reserved", u32), ("lsh", LshQuery), ("ivf", IvfQuery),
                ("graph", GraphQuery), ("forest", ForestQuery)]


class QueryStats(C.Structure):  # lshk_query_stats
    _fields_ = [("struct_size", u32), ("reserved", u32), ("queries", u64), ("candidates_total", u64),
                ("candidates_min", u64), ("candidates_max", u64), ("lists", u64), ("scanned", u64),
                ("reranked", u64)]


class IndexInfo(C.Structure):  # lshk_index_info
    _fields_ = [("struct_size", u32), ("source", u32), ("storage", u32), ("transform", u32),
                ("rows", sz), ("dim", sz), ("bits_per_table", u32), ("tables", u32), ("nlist", u32),
                ("codes", u32), ("labelled", u32), ("reserved", u32)]


class WeightsView(C.Structure):  # lshk_weights_view
    _fields_ = [("struct_size", u32), ("storage", u32), ("w", vp), ("scales", vp), ("bias", vp),
                ("rows", sz), ("dim", sz), ("w_stride", sz)]


class Calibration(C.Structure):  # lshk_calibration
    _fields_ = [("struct_size", u32), ("met", u32), ("query", QueryParams), ("recall", f32),
                ("fixed_nprobe", u32), ("fixed_recall", f32), ("adaptive_reach", f32),
                ("adaptive_recall", f32), ("recall_lower", f32), ("scanned", f64),
                ("fixed_scanned", f64), ("adaptive_scanned", f64)]


class GatherParams(C.Structure):  # lshk_gather_params (lshk_tables_gather)
    _fields_ = [("struct_size", u32), ("min_count", u32), ("max_candidates", u32),
                ("probes", u32), ("bits_per_table", u32)]


class LabelParams(C.Structure):
    _fields_ = [("struct_size", u32), ("label_cap", u32), ("policy", u32)]


class IulParams(C.Structure):
    _fields_ = [("struct_size", u32), ("rounds", u32), ("epochs", u32), ("batch", u32),
                ("t1", f32), ("t2", f32), ("learning_rate", f32), ("validation_fraction", f32),
                ("max_pairs", u32), ("flags", u32), ("seed", u64)]


SOURCE = {"simhash": 0, "dwta": 1, "graph": 2, "ivf": 3, "forest": 4}
STORAGE = {"borrowed": 0, "borrowed_f32": 0, "f32": 1, "bf16": 2, "f16": 3, "i8": 4}
TRANSFORM = {"none": 0, "bias_aug": 1, "mips": 2}
CODES = {"none": 0, "i8": 1, "pq4": 2, "pq4_i8": 3}
WALK = {"exact": 0, "int8": 1}
POLICY = {"beside": 0, "instead": 1}

# The package's build keywords -> (sub-struct of lshk_index_params, field).
BUILD_KNOBS = {
    "bits_per_table": ("lsh", "bits_per_table"), "tables": ("lsh", "tables"),
    "sparsity": ("lsh", "sparsity"), "bin_size": ("lsh", "bin_size"),
    "range_bits": ("lsh", "range_bits"), "bucket_cap": ("lsh", "bucket_cap"),
    "nlist": ("ivf", "nlist"), "iters": ("ivf", "iters"), "train_rows": ("ivf", "train_rows"),
    "codes": ("ivf", "codes"), "pq_m": ("ivf", "pq_m"),
    "m": ("graph", "m"), "ef_construction": ("graph", "ef_construction"),
    "graph_storage": ("graph", "storage"),
    "trees": ("forest", "trees"), "leaf_size": ("forest", "leaf_size"),
    "normalize_rows": ("forest", "normalize_rows"),
}
# The package's query keywords -> (sub-struct of lshk_query_params, field);
# rerank is the IVF's or the graph's, by the index's source.
QUERY_KNOBS = {
    "min_count": ("lsh", "min_count"), "max_candidates": ("lsh", "max_candidates"),
    "probes": ("lsh", "probes"), "bits_per_table": ("lsh", "bits_per_table"),
    "nprobe": ("ivf", "nprobe"), "reach": ("ivf", "reach"), "refine": ("ivf", "refine"),
    "ef": ("graph", "ef"), "walk": ("graph", "walk"), "set_size": ("forest", "set_size"),
    "confidence": ("forest", "confidence"),
}
SEED_OF = {0: "lsh", 1: "lsh", 2: "graph", 3: "ivf", 4: "forest"}


def ptr(a):
    return None if a is None else C.c_void_p(a.ctypes.data)


def stride(a):
    return a.strides[0] // a.itemsize if a.ndim == 2 and a.shape[0] > 1 else a.shape[-1]


class CApi:
    def __init__(self, lib_dir):
        self.lib = L = C.CDLL(os.path.join(lib_dir, "liblshk.so"))
        L.lshk_index_params_default.restype = IndexParams
        L.lshk_query_params_default.restype = QueryParams
        L.lshk_gather_params_default.restype = GatherParams
        L.lshk_label_params_default.restype = LabelParams
        L.lshk_iul_params_default.restype = IulParams
        L.lshk_status_name.restype = C.c_char_p
        L.lshk_status_name.argtypes = [u32]
        L.lshk_last_error_message.restype = sz
        L.lshk_last_error_message.argtypes = [C.c_char_p, sz]

    def status_name(self, status):
        return self.lib.lshk_status_name(status).decode()

    def check(self, status):
        if status != 0:
            raise RuntimeError(f"{self.status_name(status)}: {self.last_error()}")

    def last_error(self):
        buf = C.create_string_buffer(4096)
        self.lib.lshk_last_error_message(buf, 4096)
        return buf.value.decode()

    # ---- index
    def index_params(self, source="simhash", **kw):
        """lshk_index_params_default() with the package's build keywords
        set where the package sets them (seed: the source's own)."""
        p = self.lib.lshk_index_params_default()
        p.source = SOURCE[source] if isinstance(source, str) else source
        for k, v in kw.items():
            if k == "storage":
                p.storage = STORAGE[v]
            elif k == "transform":
                p.transform = TRANSFORM[v]
            elif k == "build_threads":
                p.build_threads = v
            elif k == "seed":
                setattr(getattr(p, SEED_OF[p.source]), "seed", v)
            else:
                sub, field = BUILD_KNOBS[k]
                if k == "codes":
                    v = CODES[v]
                elif k == "graph_storage":
                    v = STORAGE[v]
                setattr(getattr(p, sub), field, int(v))
        return p

    def index_build(self, w, bias=None, source="simhash", row_weights=None, **kw):
        p = self.index_params(source, **kw)
        if row_weights is not None:
            p.ivf.row_weights = ptr(row_weights)
            p.ivf.n_weights = row_weights.size
        h = C.c_void_p()
        self.check(self.lib.lshk_index_build(ptr(w), ptr(bias), sz(w.shape[0]), sz(w.shape[1]),
                                             sz(stride(w)), C.byref(p), C.byref(h)))
        return h

    def query_params(self, h, **kw):
        qp = self.lib.lshk_query_params_default()
        src = self.index_describe(h).source
        for k, v in kw.items():
            if k == "rerank":
                sub, field = ("graph" if src == SOURCE["graph"] else "ivf"), "rerank"
            else:
                sub, field = QUERY_KNOBS[k]
            if k == "walk":
                v = WALK.get(v, v)
            setattr(getattr(qp, sub), field, v)
        return qp

    def index_query(self, h, q, k, stats=False, **kw):
        qp = self.query_params(h, **kw)
        nq = q.shape[0]
        ids = np.empty((nq, k), np.uint32)
        sc = np.empty((nq, k), np.float32)
        st = QueryStats(struct_size=C.sizeof(QueryStats))
        self.check(self.lib.lshk_index_query(h, ptr(q), sz(nq), sz(stride(q)), u32(k), C.byref(qp),
                                             ptr(ids), ptr(sc), C.byref(st)))
        if stats:
            return ids, sc, {f: getattr(st, f) for f, _ in QueryStats._fields_[2:]}
        return ids, sc

    def index_candidates(self, h, q, k=0, **kw):
        qp = self.query_params(h, **kw)
        nq = q.shape[0]
        offs = np.empty(nq + 1, np.uint64)
        needed = sz(0)
        s = self.lib.lshk_index_candidates(h, ptr(q), sz(nq), sz(stride(q)), u32(k), C.byref(qp), None,
                                           sz(0), ptr(offs), C.byref(needed))
        if s != 0 and self.status_name(s) != "LSHK_STATUS_BUFFER_TOO_SMALL":
            self.check(s)
        ids = np.empty(max(needed.value, 1), np.uint32)
        self.check(self.lib.lshk_index_candidates(h, ptr(q), sz(nq), sz(stride(q)), u32(k), C.byref(qp),
                                                  ptr(ids), sz(ids.size), ptr(offs), C.byref(needed)))
        return ids[: needed.value], offs

    def index_union(self, h, ids, cap=0, seed=0):
        out = np.empty(max(ids.size, 1), np.uint32)
        cnt = np.empty(max(ids.size, 1), np.uint32)
        needed = sz(0)
        self.check(self.lib.lshk_index_union(h, ptr(ids), sz(ids.size), sz(cap), u64(seed), ptr(out),
                                             ptr(cnt), sz(out.size), C.byref(needed)))
        return out[: needed.value], cnt[: needed.value]

    def index_calibrate(self, h, q, k, target, rerank=32, threads=0):
        c = Calibration(struct_size=C.sizeof(Calibration))
        self.check(self.lib.lshk_index_calibrate(h, ptr(q), sz(q.shape[0]), sz(stride(q)), u32(k),
                                                 f32(target), u32(rerank), u32(threads), C.byref(c)))
        return c

    def index_rebuild(self, h, seed=None):
        self.check(self.lib.lshk_index_rebuild(h, None if seed is None else C.byref(u64(seed))))

    def index_set_codes(self, h, codes, rerank):
        self.check(self.lib.lshk_index_set_codes(h, u32(codes), u32(rerank)))

    def index_describe(self, h):
        info = IndexInfo(struct_size=C.sizeof(IndexInfo))
        self.check(self.lib.lshk_index_describe(h, C.byref(info)))
        return info

    def index_weights(self, h):
        v = WeightsView(struct_size=C.sizeof(WeightsView))
        self.check(self.lib.lshk_index_weights(h, C.byref(v)))
        return v

    def index_save(self, h, path):
        self.check(self.lib.lshk_index_save(h, os.fsencode(path)))

    def index_load(self, path, w=None, w_stride=0):
        h = C.c_void_p()
        self.check(self.lib.lshk_index_load(os.fsencode(path), ptr(w), sz(w_stride), C.byref(h)))
        return h

    def index_free(self, h):
        self.check(self.lib.lshk_index_free(h))

    def train_labels(self, h, queries, offsets, labels, label_cap=64, policy="beside"):
        p = self.lib.lshk_label_params_default()
        p.label_cap = label_cap
        p.policy = POLICY[policy]
        self.check(self.lib.lshk_index_train_labels(h, ptr(queries), sz(queries.shape[0]),
                                                    sz(stride(queries)), ptr(offsets), ptr(labels),
                                                    C.byref(p)))

    def train_iul(self, h, queries, offsets, labels, **kw):
        p = self.lib.lshk_iul_params_default()
        for k, v in kw.items():
            setattr(p, k, v)
        self.check(self.lib.lshk_index_train_iul(h, ptr(queries), sz(queries.shape[0]),
                                                 sz(stride(queries)), ptr(offsets), ptr(labels),
                                                 C.byref(p), None, sz(0)))

    # ---- kernels
    def simhash_hash(self, dim, k, l, x, seed=1):
        h = C.c_void_p()
        self.check(self.lib.lshk_simhash_new(u32(dim), u32(k), u32(l), u32(0), u64(seed), C.byref(h)))
        codes = np.empty((x.shape[0], l), np.uint32)
        self.check(self.lib.lshk_simhash_hash(h, ptr(x), sz(x.shape[0]), sz(stride(x)), ptr(codes),
                                              sz(codes.size)))
        self.lib.lshk_simhash_free(h)
        return codes

    def tables_gather(self, codes, qcodes, range_bits):
        h = C.c_void_p()
        n, l = codes.shape
        self.check(self.lib.lshk_tables_build(ptr(codes), sz(n), u32(l), u32(range_bits), u32(0),
                                              u64(1), u32(0), C.byref(h)))
        q = qcodes.shape[0]
        ids = np.empty(q * n, np.uint32)
        offs = np.empty(q + 1, np.uint64)
        needed = sz(0)
        self.check(self.lib.lshk_tables_gather(h, ptr(qcodes), sz(q), None, None, sz(0), None, None,
                                               sz(0), ptr(ids), sz(ids.size), ptr(offs), None,
                                               C.byref(needed)))
        self.lib.lshk_tables_free(h)
        return ids[: needed.value], offs

    def gathered_matmul(self, w, bias, q, ids, offs, storage="f32", scales=None):
        """lshk_gathered_matmul over a caller-described lshk_weights_view."""
        v = WeightsView(struct_size=C.sizeof(WeightsView), storage=STORAGE[storage], w=w.ctypes.data,
                        scales=None if scales is None else scales.ctypes.data,
                        bias=None if bias is None else bias.ctypes.data, rows=w.shape[0],
                        dim=w.shape[1], w_stride=stride(w))
        out = np.empty(ids.size, np.float32)
        self.check(self.lib.lshk_gathered_matmul(C.byref(v), ptr(q), sz(q.shape[0]), sz(stride(q)),
                                                 ptr(ids), ptr(offs), ptr(out), sz(out.size)))
        return out

    def topk(self, scores, ids, offs, k):
        nq = offs.size - 1
        oi = np.empty((nq, k), np.uint32)
        os_ = np.empty((nq, k), np.float32)
        self.check(self.lib.lshk_topk(ptr(scores), ptr(ids), ptr(offs), sz(nq), u32(k), ptr(oi),
                                      ptr(os_)))
        return oi, os_

    def softmax(self, scores, offs):
        nq = offs.size - 1
        out = np.empty_like(scores)
        lse = np.empty(nq, np.float32)
        self.check(self.lib.lshk_softmax(ptr(scores), ptr(offs), sz(nq), ptr(out), ptr(lse)))
        return out, lse

    def convert(self, src, frm, to):
        """lshk_convert between f32 and bf16 / f16 bit patterns."""
        dst = np.empty(src.size, np.float32 if to == "f32" else np.uint16)
        self.check(self.lib.lshk_convert(u32(STORAGE[frm]), ptr(src), sz(src.size), u32(STORAGE[to]),
                                         ptr(dst)))
        return dst


def _xent(api, logits, targets, offs, threads=0):
    nb = offs.size - 1
    loss = np.empty(nb, np.float32)
    grad = np.empty_like(logits)
    api.check(api.lib.lshk_softmax_xent_csr(ptr(logits), ptr(targets), ptr(offs), sz(nb), u32(threads),
                                            ptr(loss), ptr(grad)))
    return loss, grad


def _gather_dq(api, w, grad, ids, offs, threads=0):
    nb = offs.size - 1
    dq = np.empty((nb, w.shape[1]), np.float32)
    api.check(api.lib.lshk_gather_dq(u32(STORAGE["f32"]), ptr(w), sz(w.shape[0]), sz(w.shape[1]),
                                     sz(stride(w)), ptr(grad), ptr(ids), ptr(offs), sz(nb), u32(threads),
                                     ptr(dq), sz(w.shape[1])))
    return dq


def _rows_update_sgd(api, w, q, grad, ids, offs, lr, threads=0):
    """In place on w, as the C call."""
    nb = offs.size - 1
    api.check(api.lib.lshk_rows_update_sgd(ptr(w), sz(w.shape[0]), sz(w.shape[1]), sz(stride(w)), ptr(q),
                                           sz(stride(q)), ptr(grad), ptr(ids), ptr(offs), sz(nb), f32(lr),
                                           u32(threads)))


CApi.softmax_xent_csr = _xent
CApi.gather_dq = _gather_dq
CApi.rows_update_sgd = _rows_update_sgd


# ---- holographic reduced representations (lshk_hrr_*)

def _hrr_new(api, d, isa=None):
    h = vp()
    if isa is None:
        api.check(api.lib.lshk_hrr_new(sz(d), C.byref(h)))
    else:
        api.check(api.lib.lshk_hrr_new_isa(sz(d), u32(isa), C.byref(h)))
    return h


def _hrr_free(api, h):
    api.check(api.lib.lshk_hrr_free(h))


def _hrr_bind(api, h, x, y):
    """x: (1 or n, d), y: (n, d), both C-contiguous float32."""
    out = np.empty_like(y)
    api.check(api.lib.lshk_hrr_bind(h, ptr(x), sz(x.shape[0]), ptr(y), sz(y.shape[0]), ptr(out)))
    return out


def _hrr_unbind(api, h, key, s, inverse=0):
    out = np.empty_like(s)
    api.check(api.lib.lshk_hrr_unbind(h, u32(inverse), ptr(key), sz(key.shape[0]), ptr(s),
                                      sz(s.shape[0]), ptr(out)))
    return out


def _hrr_project(api, h, x):
    out = np.empty_like(x)
    api.check(api.lib.lshk_hrr_project(h, ptr(x), sz(x.shape[0]), ptr(out)))
    return out


def _hrr_class_vectors(api, seed, d, m, first=0, threads=0):
    out = np.empty((m, d), np.float32)
    api.check(api.lib.lshk_hrr_class_vectors(u64(seed), sz(d), u64(first), sz(m), u32(threads),
                                             ptr(out)))
    return out


CApi.hrr_new = _hrr_new
CApi.hrr_free = _hrr_free
CApi.hrr_bind = _hrr_bind
CApi.hrr_unbind = _hrr_unbind
CApi.hrr_project = _hrr_project
CApi.hrr_class_vectors = _hrr_class_vectors
