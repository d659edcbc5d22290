// lshk against its peers on W1 (670,091 x 128), in one process, one thread.
//
//   1. The dense layer: OpenBLAS sgemv (B = 1) / sgemm (B = 64) + bias +
//      argmax, against lshk_index_query (SimHash, index defaults K = 12,
//      L = 50: about 8K candidates per query on this W) with k = 1.
//   2. FAISS fvec_inner_products_by_idx against lshk_gathered_matmul on
//      f32 rows (an lshk_weights_view of W), on the same ids (10,000
//      random ids per query, ascending, as a bucket gather produces
//      them), B = 1 and B = 64.
//
// W is random Gaussian (N(0, 1/dim) entries, bias N(0, 0.05^2), from
// std::mt19937_64 seed 42); queries are rows of W plus noise
// (q = w_y + 0.5 * N(0, 1/dim)), so each has a clear top row. OpenBLAS and
// FAISS are optional (HAVE_OPENBLAS / HAVE_FAISS, set by the Makefile when
// they are installed). Build and run: see README.md in this directory.

#include <lshk.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>
#include <unistd.h>

#ifdef HAVE_OPENBLAS
#include <cblas.h>
#endif
#ifdef HAVE_FAISS
#include <faiss/utils/distances.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

using Clock = std::chrono::steady_clock;

size_t env_size(const char *name, size_t dflt) {
  const char *v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : dflt;
}

// Median seconds per call of f over `reps` calls (after one warm-up call).
template <class F> double time_median(int reps, F &&f) {
  f();
  std::vector<double> t;
  for (int i = 0; i < reps; i++) {
    auto a = Clock::now();
    f();
    t.push_back(std::chrono::duration<double>(Clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void check(lshk_status s, const char *what) {
  if (s != LSHK_STATUS_OK) {
    char msg[512];
    lshk_last_error_message(msg, sizeof msg);
    std::fprintf(stderr, "%s failed: %s: %s\n", what, lshk_status_name(s), msg);
    std::exit(1);
  }
}

volatile float g_sink;

}  // namespace

int main(int argc, char **argv) {
  // OpenBLAS picks its kernels when the library loads, from
  // OPENBLAS_CORETYPE: choose it from the CPU (SkylakeX kernels SIGILL
  // without AVX-512; Debian's 0.3.21 does not know Zen 3 and would fall
  // back to SSE3 code) and re-execute ourselves once so it takes effect.
  // OMP_NUM_THREADS=1 likewise keeps FAISS's OpenMP runtime on one thread
  // even when this file is compiled without -fopenmp.
  if (!std::getenv("OPENBLAS_CORETYPE") || !std::getenv("OMP_NUM_THREADS")) {
    __builtin_cpu_init();
    const char *ct = __builtin_cpu_supports("avx512f") ? "SkylakeX"
                     : __builtin_cpu_supports("avx2")  ? "Haswell"
                                                       : "Prescott";
    setenv("OPENBLAS_CORETYPE", ct, 0);
    setenv("OMP_NUM_THREADS", "1", 0);
    execv("/proc/self/exe", argv);  // returns only on failure: go on
  }
  (void)argc;
#ifdef HAVE_OPENBLAS
  openblas_set_num_threads(1);
#endif
#ifdef _OPENMP
  omp_set_num_threads(1);
#endif

  const size_t rows = env_size("PEERS_ROWS", 670091), dim = 128, nq = 64;
  const size_t ncand = env_size("PEERS_CANDIDATES", 10000);
  std::printf("lshk peers: W %zu x %zu f32 (random Gaussian), one thread, tier %u, OPENBLAS_CORETYPE=%s\n",
              rows, dim, lshk_isa_active(), std::getenv("OPENBLAS_CORETYPE"));

  std::mt19937_64 rng(42);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const float s = 1.0f / std::sqrt(float(dim));
  std::vector<float> w(rows * dim), bias(rows), q(nq * dim);
  for (auto &v : w) v = s * nd(rng);
  for (auto &v : bias) v = 0.05f * nd(rng);
  std::vector<uint32_t> label(nq);
  for (size_t i = 0; i < nq; i++) {
    label[i] = uint32_t(rng() % rows);
    for (size_t d = 0; d < dim; d++) q[i * dim + d] = w[label[i] * dim + d] + 0.5f * s * nd(rng);
  }

  // ---------------------------------------------------------- dense layer
  std::printf("\n== dense layer (logits + bias + argmax) vs lshk_index_query (k = 1)\n");
  std::vector<float> logits(nq * rows);
  double dense1 = 0, dense64 = 0;
  std::vector<uint32_t> argmax(nq);
#ifdef HAVE_OPENBLAS
  auto dense = [&](size_t b) {
    if (b == 1)
      cblas_sgemv(CblasRowMajor, CblasNoTrans, int(rows), int(dim), 1.0f, w.data(), int(dim), q.data(), 1,
                  0.0f, logits.data(), 1);
    else
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(b), int(rows), int(dim), 1.0f, q.data(),
                  int(dim), w.data(), int(dim), 0.0f, logits.data(), int(rows));
    for (size_t i = 0; i < b; i++) {
      float *l = logits.data() + i * rows;
      size_t best = 0;
      for (size_t r = 0; r < rows; r++) {
        l[r] += bias[r];
        if (l[r] > l[best]) best = r;
      }
      argmax[i] = uint32_t(best);
    }
  };
  dense1 = time_median(9, [&] { dense(1); });  // one query: W streamed from DRAM each time
  dense64 = time_median(3, [&] { dense(64); }) / 64;
  size_t hits = 0;
  for (size_t i = 0; i < nq; i++) hits += argmax[i] == label[i];
  std::printf("OpenBLAS sgemv+bias+argmax  B = 1 : %9.3f ms per query\n", dense1 * 1e3);
  std::printf("OpenBLAS sgemm+bias+argmax  B = 64: %9.3f ms per query (argmax = label for %zu/%zu)\n",
              dense64 * 1e3, hits, nq);
#else
  std::printf("OpenBLAS: skipped (not installed at build time)\n");
#endif

#ifdef LSHK_SOURCE_SIMHASH
  {
    lshk_index_params p = lshk_index_params_default();
    p.storage = LSHK_STORAGE_BORROWED_F32;
    lshk_index *idx = nullptr;
    auto t0 = Clock::now();
    check(lshk_index_build(w.data(), bias.data(), rows, dim, dim, &p, &idx), "lshk_index_build");
    double build = std::chrono::duration<double>(Clock::now() - t0).count();
    size_t mem = 0;
    check(lshk_index_memory_bytes(idx, &mem), "lshk_index_memory_bytes");
    std::vector<uint32_t> ids(nq);
    std::vector<float> sc(nq);
    lshk_query_stats st;
    std::memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    size_t cur = 0;
    double l1 = time_median(127, [&] {
      size_t i = cur++ % nq;
      check(lshk_index_query(idx, q.data() + i * dim, 1, dim, 1, nullptr, ids.data() + i, sc.data() + i, &st),
            "query");
    });
    double l64 = time_median(11, [&] {
      check(lshk_index_query(idx, q.data(), 64, dim, 1, nullptr, ids.data(), sc.data(), &st), "query");
    }) / 64;
    size_t agree = 0, lab = 0;
    for (size_t i = 0; i < nq; i++) {
      lab += ids[i] == label[i];
      agree += ids[i] == argmax[i];
    }
    std::printf("lshk index: SimHash K=%u L=%u (defaults), built in %.2f s (all cores), %.1f MiB besides W\n",
                p.lsh.bits_per_table, p.lsh.tables, build, double(mem) / (1 << 20));
    std::printf("lshk_index_query            B = 1 : %9.3f ms per query\n", l1 * 1e3);
    std::printf("lshk_index_query            B = 64: %9.3f ms per query, %.0f candidates per query, "
                "top-1 = label %zu/%zu", l64 * 1e3, double(st.candidates_total) / double(st.queries), lab, nq);
#ifdef HAVE_OPENBLAS
    std::printf(", = dense argmax %zu/%zu\n", agree, nq);
    std::printf("ratio dense / lshk          B = 1 : %9.1fx\n", dense1 / l1);
    std::printf("ratio dense / lshk          B = 64: %9.1fx\n", dense64 / l64);
#else
    std::printf("\n");
#endif
    check(lshk_index_free(idx), "lshk_index_free");
  }
#else
  std::printf("lshk_index_query: not in this lshk build (header without the index)\n");
#endif

  // ---------------------------------------------------- gathered matmul
  std::printf("\n== gathered inner products on the same ids (%zu random ids per query, ascending)\n", ncand);
  std::vector<uint32_t> ids(nq * ncand);
  std::vector<int64_t> ids64(nq * ncand);
  std::vector<size_t> offsets(nq + 1);
  for (size_t i = 0; i < nq; i++) {
    std::vector<uint32_t> v(ncand);
    for (auto &x : v) x = uint32_t(rng() % rows);
    std::sort(v.begin(), v.end());
    std::copy(v.begin(), v.end(), ids.begin() + i * ncand);
    for (size_t j = 0; j < ncand; j++) ids64[i * ncand + j] = v[j];
  }
  for (size_t i = 0; i <= nq; i++) offsets[i] = i * ncand;
  std::vector<float> out(nq * ncand), out2(nq * ncand);
  // W as the kernel reads it: f32 rows, no bias (FAISS's inner products
  // have none either).
  lshk_weights_view wv;
  std::memset(&wv, 0, sizeof wv);
  wv.struct_size = sizeof wv;
  wv.storage = LSHK_STORAGE_F32;
  wv.w = w.data();
  wv.rows = rows;
  wv.dim = dim;
  wv.w_stride = dim;
  // B = 1 cycles through the 64 queries' id sets (rows mostly from DRAM:
  // 64 x 10,000 rows of 512 bytes exceed the L3), as does B = 64.
  for (size_t b : {size_t(1), size_t(64)}) {
    int reps = b == 1 ? 127 : 11;
    size_t cur = 0;
    double tl = time_median(reps, [&] {
      size_t i = b == 1 ? cur++ % nq : 0;
      check(lshk_gathered_matmul(&wv, q.data() + i * dim, b, dim, ids.data() + i * ncand, offsets.data(),
                                 out.data() + i * ncand, b * ncand),
            "lshk_gathered_matmul");
    }) / double(b);
    std::printf("lshk_gathered_matmul (f32)        B = %2zu: %8.1f ns per row\n", b, tl * 1e9 / double(ncand));
#ifdef HAVE_FAISS
    cur = 0;
    double tf = time_median(reps, [&] {
      size_t i = b == 1 ? cur++ % nq : 0;
      faiss::fvec_inner_products_by_idx(out2.data() + i * ncand, q.data() + i * dim, w.data(),
                                        ids64.data() + i * ncand, dim, b, ncand);
    }) / double(b);
    double maxdiff = 0;
    for (size_t j = 0; j < (b == 1 ? nq : b) * ncand; j++) maxdiff = std::max(maxdiff, double(std::fabs(out[j] - out2[j])));
    std::printf("faiss::fvec_inner_products_by_idx B = %2zu: %8.1f ns per row  (faiss / lshk %.2fx, max |diff| %.1e)\n",
                b, tf * 1e9 / double(ncand), tf / tl, maxdiff);
#else
    std::printf("FAISS: skipped (libfaiss not installed at build time)\n");
#endif
  }
  g_sink = out[0] + out2[0];
  return 0;
}
