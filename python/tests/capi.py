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


u32, u64, f32, sz, vp = C.c_uint32, C.c_uint64, C.c_float, C.c_size_t, C.c_void_p
PROGRESS = C.CFUNCTYPE(None, vp, u64, u64)


class IndexParams(C.Structure):
    _fields_ = [
        ("struct_size", u32), ("family", u32), ("bits_per_table", u32), ("tables", u32),
        ("sparsity", u32), ("bin_size", u32), ("seed", u64), ("range_bits", u32),
        ("bucket_cap", u32), ("storage", u32), ("transform", u32), ("build_threads", u32),
        ("planes", vp), ("planes_len", sz), ("dwta_map", vp), ("dwta_map_len", sz),
        ("progress", PROGRESS), ("progress_user", vp),
    ]


class GraphParams(C.Structure):  # lshk_graph_params (lshk_index_build_ex)
    _fields_ = [("struct_size", u32), ("m", u32), ("ef_construction", u32), ("storage", u32),
                ("threads", u32), ("reserved", u32), ("seed", u64)]


class GraphQueryParams(C.Structure):  # lshk_graph_query_params (lshk_index_query_ex)
    _fields_ = [("struct_size", u32), ("walk", u32), ("ef", u32), ("rerank", u32)]


class GatherParams(C.Structure):
    _fields_ = [("struct_size", u32), ("min_count", u32), ("max_candidates", u32),
                ("probes", u32), ("bits_per_table", u32)]


class IvfParams(C.Structure):
    _fields_ = [("struct_size", u32), ("nlist", u32), ("iters", u32), ("train_rows", u32),
                ("codes", u32), ("borrow", u32), ("threads", u32), ("pq_m", u32), ("seed", u64)]


class IvfSearch(C.Structure):
    _fields_ = [("struct_size", u32), ("nprobe", u32), ("rerank", u32), ("reach", f32)]


class LabelParams(C.Structure):
    _fields_ = [("struct_size", u32), ("label_cap", u32), ("policy", u32)]


class IulParams(C.Structure):
    _fields_ = [("struct_size", u32), ("rounds", u32), ("epochs", u32), ("batch", u32),
                ("t1", f32), ("t2", f32), ("learning_rate", f32), ("validation_fraction", f32),
                ("max_pairs", u32), ("flags", u32), ("seed", u64)]


FAMILY = {"simhash": 0, "dwta": 1, "graph": 2}
GRAPH_STORAGE = {"f32": 0, "bf16": 1, "i8": 2}
WALK = {"exact": 0, "int8": 1}
STORAGE = {"borrowed_f32": 0, "f32": 1, "bf16": 2, "f16": 3, "i8": 4}
TRANSFORM = {"none": 0, "bias_aug": 1, "mips": 2}
CODES = {"none": 0, "i8": 1, "pq4": 2, "pq4_i8": 3}


def ptr(a):
    return None if a is None else C.c_void_p(a.ctypes.data)


class CApi:
    def __init__(self, lib_dir):
        self.lib = L = C.CDLL(os.path.join(lib_dir, "liblshk.so"))
        L.lshk_index_params_default.restype = IndexParams
        L.lshk_gather_params_default.restype = GatherParams
        L.lshk_graph_params_default.restype = GraphParams
        L.lshk_graph_query_params_default.restype = GraphQueryParams
        L.lshk_ivf_params_default.restype = IvfParams
        L.lshk_ivf_search_default.restype = IvfSearch
        L.lshk_label_params_default.restype = LabelParams
        L.lshk_iul_params_default.restype = IulParams
        L.lshk_status_name.restype = C.c_char_p
        L.lshk_status_name.argtypes = [u32]
        self._keep = []

    def check(self, status):
        if status != 0:
            buf = C.create_string_buffer(4096)
            self.lib.lshk_last_error_message(buf, sz(4096))
            raise RuntimeError(f"{self.lib.lshk_status_name(status).decode()}: {buf.value.decode()}")

    def last_error(self):
        buf = C.create_string_buffer(4096)
        self.lib.lshk_last_error_message(buf, sz(4096))
        return buf.value.decode()

    # ---- index
    def index_build(self, w, bias=None, **kw):
        """lshk_index_build; with family='graph' (or m / ef_construction /
        graph_storage) lshk_index_build_ex, build_threads and seed going to
        the lshk_graph_params too (as the package does)."""
        p = self.lib.lshk_index_params_default()
        gp = self.lib.lshk_graph_params_default()
        graph = kw.get("family") == "graph"
        for k, v in kw.items():
            if k in ("m", "ef_construction"):
                setattr(gp, k, v)
                continue
            if k == "graph_storage":
                gp.storage = GRAPH_STORAGE[v]
                continue
            if k == "family":
                v = FAMILY[v]
            elif k == "storage":
                v = STORAGE[v]
            elif k == "transform":
                v = TRANSFORM[v]
            elif graph and k == "build_threads":
                gp.threads = v
            elif graph and k == "seed":
                gp.seed = v
            setattr(p, k, v)
        h = C.c_void_p()
        if graph:
            self.check(self.lib.lshk_index_build_ex(ptr(w), ptr(bias), sz(w.shape[0]), sz(w.shape[1]),
                                                    sz(w.strides[0] // 4), C.byref(p), C.byref(gp),
                                                    C.byref(h)))
        else:
            self.check(self.lib.lshk_index_build(ptr(w), ptr(bias), sz(w.shape[0]), sz(w.shape[1]),
                                                 sz(w.strides[0] // 4), C.byref(p), C.byref(h)))
        return h

    def index_query(self, h, q, k, **g):
        """lshk_index_query; with ef / walk / rerank lshk_index_query_ex."""
        gp = self.lib.lshk_gather_params_default()
        gq = self.lib.lshk_graph_query_params_default()
        ex = False
        for key, v in g.items():
            if key in ("ef", "walk", "rerank"):
                setattr(gq, key, WALK.get(v, v) if key == "walk" else v)
                ex = True
            else:
                setattr(gp, key, v)
        nq = q.shape[0]
        ids = np.empty((nq, k), np.uint32)
        sc = np.empty((nq, k), np.float32)
        if ex:
            self.check(self.lib.lshk_index_query_ex(h, ptr(q), sz(nq), sz(q.strides[0] // 4), u32(k),
                                                    C.byref(gp), C.byref(gq), ptr(ids), ptr(sc), None))
        else:
            self.check(self.lib.lshk_index_query(h, ptr(q), sz(nq), sz(q.strides[0] // 4), u32(k),
                                                 C.byref(gp), ptr(ids), ptr(sc), None))
        return ids, sc

    def index_save(self, h, path):
        self.check(self.lib.lshk_index_save(h, os.fsencode(path)))

    def index_load(self, path, w=None):
        h = C.c_void_p()
        self.check(self.lib.lshk_index_load(os.fsencode(path), ptr(w), C.byref(h)))
        return h

    def index_free(self, h):
        self.check(self.lib.lshk_index_free(h))

    def train_labels(self, h, queries, offsets, labels, label_cap=64, policy=0,
                     fn="lshk_index_train_labels"):
        p = self.lib.lshk_label_params_default()
        p.label_cap = label_cap
        p.policy = policy
        self.check(getattr(self.lib, fn)(h, ptr(queries), sz(queries.shape[0]),
                                         sz(queries.shape[1]), ptr(offsets), ptr(labels),
                                         C.byref(p)))

    def ivf_train_labels(self, h, queries, offsets, labels, **kw):
        self.train_labels(h, queries, offsets, labels, fn="lshk_ivf_train_labels", **kw)

    def train_iul(self, h, queries, offsets, labels, **kw):
        p = self.lib.lshk_iul_params_default()
        for k, v in kw.items():
            setattr(p, k, v)
        self.check(self.lib.lshk_index_train_iul(h, ptr(queries), sz(queries.shape[0]),
                                                 sz(queries.shape[1]), ptr(offsets), ptr(labels),
                                                 C.byref(p), None, sz(0)))

    # ---- ivf
    def ivf_build(self, w, bias=None, **kw):
        p = self.lib.lshk_ivf_params_default()
        for k, v in kw.items():
            if k == "codes":
                v = CODES[v]
            setattr(p, k, int(v))
        h = C.c_void_p()
        self.check(self.lib.lshk_ivf_build(ptr(w), ptr(bias), sz(w.shape[0]), sz(w.shape[1]),
                                           sz(w.strides[0] // 4), C.byref(p), C.byref(h)))
        return h

    def ivf_query(self, h, q, k, **s):
        sp = self.lib.lshk_ivf_search_default()
        for key, v in s.items():
            setattr(sp, key, v)
        nq = q.shape[0]
        ids = np.empty((nq, k), np.uint32)
        sc = np.empty((nq, k), np.float32)
        self.check(self.lib.lshk_ivf_query(h, ptr(q), sz(nq), sz(q.strides[0] // 4), u32(k),
                                           C.byref(sp), ptr(ids), ptr(sc), None))
        return ids, sc

    def ivf_save(self, h, path):
        self.check(self.lib.lshk_ivf_save(h, os.fsencode(path)))

    def ivf_load(self, path, w=None):
        h = C.c_void_p()
        stride = 0 if w is None else w.strides[0] // 4
        self.check(self.lib.lshk_ivf_load(os.fsencode(path), ptr(w), sz(stride), C.byref(h)))
        return h

    def ivf_free(self, h):
        self.check(self.lib.lshk_ivf_free(h))

    # ---- kernels
    def simhash_hash(self, dim, k, l, x, seed=1):
        h = C.c_void_p()
        self.check(self.lib.lshk_simhash_new(u32(dim), u32(k), u32(l), u32(0), u64(seed), C.byref(h)))
        codes = np.empty((x.shape[0], l), np.uint32)
        self.check(self.lib.lshk_simhash_hash(h, ptr(x), sz(x.shape[0]), sz(x.shape[1]), ptr(codes),
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

    def gathered_matmul_f32(self, w, bias, q, ids, offs):
        out = np.empty(ids.size, np.float32)
        self.check(self.lib.lshk_gathered_matmul_f32(
            ptr(w), sz(w.shape[0]), sz(w.shape[1]), sz(w.shape[1]), ptr(bias), ptr(q),
            sz(q.shape[0]), sz(q.shape[1]), ptr(ids), ptr(offs), ptr(out), sz(out.size)))
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
