// lshk::Index with the forest source (include/lshk.hpp): the wrapper
// equals the C calls (build, candidate sets, union with a cap, rebuild
// with a new seed after W changed in place, save/load), a query's top k
// are the best of its set, a rebuild equals a fresh build, moves transfer
// the handle, and wrapper-side and C-side errors throw lshk::Error with
// the status.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "lshk.hpp"
#include "lshk_test.h"

namespace {

template <class F>
lshk_status status_of(F f) {
  try {
    f();
  } catch (const lshk::Error &e) {
    return e.status();
  }
  return LSHK_STATUS_OK;
}

// Candidate sets as plain vectors, for comparisons.
struct Sets {
  std::vector<uint32_t> ids;
  std::vector<std::size_t> offsets;
  bool operator==(const Sets &o) const { return ids == o.ids && offsets == o.offsets; }
  bool operator!=(const Sets &o) const { return !(*this == o); }
};
Sets sets_of(const lshk::GatherResult &r) {
  return {std::vector<uint32_t>(r.ids().begin(), r.ids().end()),
          std::vector<std::size_t>(r.offsets().begin(), r.offsets().end())};
}

// The same candidate sets through the C API.
Sets c_sets(const lshk_index *f, const std::vector<float> &x, std::size_t nx, std::size_t stride,
            uint32_t set_size) {
  lshk_query_params qp = lshk_query_params_default();
  qp.forest.set_size = set_size;
  Sets r;
  r.ids.resize(nx * set_size);
  r.offsets.resize(nx + 1);
  std::size_t needed = 0;
  lshk::check(lshk_index_candidates(f, x.data(), nx, stride, 0, &qp, r.ids.data(), r.ids.size(),
                                    r.offsets.data(), &needed));
  r.ids.resize(needed);
  return r;
}

}  // namespace

int main() {
  const std::size_t rows = 400, dim = 10, stride = 12, nx = 6;
  const uint32_t q = 20, k = 5;
  try {
    std::vector<float> w(rows * stride), w2(rows * stride), x(nx * stride), bias(rows);
    uint64_t s = 11;
    auto next = [&s]() {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      return float(double(s >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
    };
    for (float &v : w) v = next();
    for (float &v : w2) v = next();
    for (float &v : x) v = next();
    for (float &v : bias) v = 0.1f * next();
    // Each index borrows its own copy of W: training changes it in place.
    std::vector<float> wf = w, wc_api = w;

    lshk::IndexParams p(LSHK_SOURCE_FOREST);
    CHECK(p.source == LSHK_SOURCE_FOREST && p.forest.trees == 8 && p.forest.leaf_size == 64 &&
          p.forest.normalize_rows == 1 && p.forest.reserved == 0);
    p.forest.trees = 4;
    p.forest.leaf_size = 16;
    p.build_threads = 1;
    p.storage = LSHK_STORAGE_BORROWED_F32;
    lshk::Index f(wf, bias, rows, dim, stride, p);
    lshk_index_info info = f.describe();
    CHECK(f && f.rows() == rows && f.dim() == dim && info.source == LSHK_SOURCE_FOREST &&
          info.tables == 4 && info.storage == LSHK_STORAGE_BORROWED_F32);
    lshk_index *raw = nullptr;
    CHECK(lshk_index_build(wc_api.data(), bias.data(), rows, dim, stride, &p, &raw) ==
          LSHK_STATUS_OK);

    // Candidate sets: the C call's, q per sample, ascending.
    const lshk::QueryParams qs = lshk::QueryParams::for_forest(q);
    CHECK(qs.forest.set_size == q && qs.lsh.min_count == lshk_query_params_default().lsh.min_count);
    // The sets of the strided samples x.
    auto sets_at = [&](const lshk::Index &i) {
      lshk::GatherResult r;
      i.candidates(x, nx, stride, 0, r, qs);
      return sets_of(r);
    };
    lshk::GatherResult cand;
    f.candidates(x, nx, stride, 0, cand, qs);
    Sets got = sets_of(cand);
    CHECK(got == c_sets(raw, x, nx, stride, q));
    CHECK(cand.queries() == nx && got.ids.size() == nx * q);
    bool ascending = true;
    for (std::size_t i = 0; i < nx; i++)
      ascending = ascending && std::is_sorted(cand[i].begin(), cand[i].end()) &&
                  std::adjacent_find(cand[i].begin(), cand[i].end()) == cand[i].end();
    CHECK(ascending);
    {
      // HF-A's confidence: the wrapper's params reach the C call; each
      // set shrinks to a subset of the whole one, never below k.
      const lshk::QueryParams qc = lshk::QueryParams::for_forest(q, 0.5f);
      CHECK(qc.forest.confidence == 0.5f && qc.forest.set_size == q);
      lshk::GatherResult trimmed;
      f.candidates(x, nx, stride, 2, trimmed, qc);
      bool subset = trimmed.queries() == nx;
      for (std::size_t i = 0; subset && i < nx; i++) {
        subset = trimmed[i].size() >= 2 && trimmed[i].size() <= cand[i].size();
        for (uint32_t id : trimmed[i])
          subset = subset && std::binary_search(cand[i].begin(), cand[i].end(), id);
      }
      CHECK(subset);
    }
    // A set is never smaller than k.
    lshk::GatherResult wide;
    f.candidates(x, nx, stride, 2 * q, wide, qs);
    CHECK(wide.total() == nx * 2 * q);

    // A query's top k: ids of its set, best first by the exact logit.
    std::vector<uint32_t> top(nx * k);
    std::vector<float> top_sc(nx * k);
    f.query(x, nx, stride, k, top, top_sc, qs);
    bool best = true;
    for (std::size_t i = 0; i < nx; i++) {
      double m = -1e300;
      for (uint32_t id : cand[i]) {
        double z = bias[id];
        for (std::size_t d = 0; d < dim; d++) z += double(wf[id * stride + d]) * x[i * stride + d];
        m = std::max(m, z);
      }
      for (uint32_t j = 0; j < k; j++)
        best = best && std::binary_search(cand[i].begin(), cand[i].end(), top[i * k + j]) &&
               (j == 0 || top_sc[i * k + j - 1] >= top_sc[i * k + j]);
      best = best && std::abs(top_sc[i * k] - m) <= 1e-5 * (1 + std::abs(m));
    }
    CHECK(best);

    // Union with and without a cap, against the C call.
    std::vector<uint32_t> u, uc, cu(rows), cuc(rows);
    f.union_(got.ids, 0, 3, u, &uc);
    std::size_t needed = 0;
    CHECK(lshk_index_union(raw, got.ids.data(), got.ids.size(), 0, 3, cu.data(), cuc.data(),
                           cu.size(), &needed) == LSHK_STATUS_OK);
    cu.resize(needed);
    cuc.resize(needed);
    CHECK(u == cu && uc == cuc && u.size() > 25 && std::is_sorted(u.begin(), u.end()));
    std::size_t total = 0;
    for (uint32_t c : uc) total += c;
    CHECK(total == got.ids.size());
    f.union_(got.ids, 25, 3, u);
    cu.assign(rows, 0);
    CHECK(lshk_index_union(raw, got.ids.data(), got.ids.size(), 25, 3, cu.data(), nullptr,
                           cu.size(), &needed) == LSHK_STATUS_OK);
    cu.resize(needed);
    CHECK(u == cu && u.size() == 25);

    // W changes in place (training), then a rebuild with a new seed: the
    // C rebuild's sets, a fresh build's over the new W, not the old sets.
    wf = w2;
    wc_api = w2;
    f.rebuild(99);
    uint64_t seed = 99;
    CHECK(lshk_index_rebuild(raw, &seed) == LSHK_STATUS_OK);
    Sets after = sets_at(f);
    CHECK(after == c_sets(raw, x, nx, stride, q));
    CHECK(after != got);
    lshk::IndexParams p99 = p;
    p99.forest.seed = 99;
    lshk::Index fresh(w2, bias, rows, dim, stride, p99);
    CHECK(sets_at(fresh) == after);

    // Save / load: the same sets; the borrowed W is given again.
    std::string path = "forest_wrapper_test.lshk";
    f.save(path);
    CHECK(status_of([&] { lshk::Index::load(path); }) == LSHK_STATUS_INVALID_ARGUMENT);
    lshk::Index g = lshk::Index::load(path, wf.data(), stride);
    std::remove(path.c_str());
    CHECK(g.rows() == rows && g.dim() == dim && g.describe().tables == 4 &&
          g.describe().source == LSHK_SOURCE_FOREST);
    CHECK(sets_at(g) == after);

    // Raw rows (normalize_rows = 0; unit rows are the default) on an F32
    // copy: the C build's sets, kept by save / load (no W to give); a bad
    // value throws.
    {
      lshk::IndexParams pu = p;
      pu.forest.normalize_rows = 0;
      pu.storage = LSHK_STORAGE_F32;
      lshk::Index fu(w, bias, rows, dim, stride, pu);
      lshk_index *rawu = nullptr;
      CHECK(lshk_index_build(w.data(), bias.data(), rows, dim, stride, &pu, &rawu) ==
            LSHK_STATUS_OK);
      lshk::GatherResult su;
      fu.candidates(x, nx, stride, 0, su, qs);
      CHECK(sets_of(su) == c_sets(rawu, x, nx, stride, q));
      std::string upath = "forest_wrapper_raw.lshk";
      fu.save(upath);
      lshk::Index gu = lshk::Index::load(upath);
      std::remove(upath.c_str());
      lshk::GatherResult lu;
      gu.candidates(x, nx, stride, 0, lu, qs);
      CHECK(sets_of(lu) == sets_of(su));
      lshk_index_free(rawu);
      pu.forest.normalize_rows = 2;
      CHECK(status_of([&] { lshk::Index bad(w, bias, rows, dim, stride, pu); }) ==
            LSHK_STATUS_INVALID_ARGUMENT);
    }

    // Contiguous rows and samples (stride = dim): the same sets.
    std::vector<float> wc(rows * dim), xc(nx * dim);
    for (std::size_t r = 0; r < rows; r++)
      for (std::size_t d = 0; d < dim; d++) wc[r * dim + d] = w2[r * stride + d];
    for (std::size_t i = 0; i < nx; i++)
      for (std::size_t d = 0; d < dim; d++) xc[i * dim + d] = x[i * stride + d];
    lshk::Index fc(wc, bias, rows, dim, dim, p99);
    CHECK(sets_of(fc.candidates(xc, 0, qs)) == after);

    // Moves transfer the handle; an empty owner throws NULL_POINTER.
    lshk::Index h(std::move(g));
    CHECK(h && !g && h.rows() == rows);
    CHECK(status_of([&] { g.candidates(xc, 0, qs); }) == LSHK_STATUS_NULL_POINTER);
    const lshk_index *hh = h.get();
    lshk_index *released = h.release();
    CHECK(released == hh && !h);
    CHECK(lshk_index_free(released) == LSHK_STATUS_OK);

    // Wrapper-side size checks (before the C call) and C-side errors.
    lshk::GatherResult r;
    CHECK(status_of([&] { f.candidates(x, nx + 1, stride, 0, r, qs); }) ==
          LSHK_STATUS_INVALID_ARGUMENT);
    CHECK(status_of([&] {
            fc.candidates(std::vector<float>(xc.begin(), xc.end() - 1), 0, qs);
          }) == LSHK_STATUS_INVALID_ARGUMENT);
    CHECK(status_of([&] { f.candidates(x, nx, stride - 3, 0, r, qs); }) ==
          LSHK_STATUS_INVALID_ARGUMENT);
    lshk::QueryParams bad_q = qs;
    bad_q.forest.confidence = 1.5f;
    CHECK(status_of([&] { f.candidates(x, nx, stride, 0, r, bad_q); }) ==
          LSHK_STATUS_INVALID_ARGUMENT);
    std::vector<uint32_t> bad = {1, 2, uint32_t(rows)};
    CHECK(status_of([&] { f.union_(bad, 0, 1, u); }) == LSHK_STATUS_INDEX_OUT_OF_RANGE);
    CHECK(status_of([&] { f.calibrate(xc, k, 0.9f); }) == LSHK_STATUS_UNSUPPORTED);
    CHECK(status_of([&] { f.lsh_tables(); }) == LSHK_STATUS_UNSUPPORTED);
    lshk::IndexParams pb = p;
    pb.storage = LSHK_STORAGE_BF16;
    CHECK(status_of([&] { lshk::Index bad_f(w, bias, rows, dim, stride, pb); }) ==
          LSHK_STATUS_INVALID_ARGUMENT);
    CHECK(status_of([&] { lshk::Index bad_f(w, bias, 1, dim, stride, p); }) ==
          LSHK_STATUS_INVALID_ARGUMENT);
    CHECK(status_of([] { lshk::Index::load("no/such/forest.lshk"); }) == LSHK_STATUS_IO_ERROR);
    // A NaN in the borrowed W: the rebuild is refused and the forest
    // unchanged (W restored before the next query).
    const float kept = wf[5];
    wf[5] = std::numeric_limits<float>::quiet_NaN();
    CHECK(status_of([&] { f.rebuild(); }) == LSHK_STATUS_NON_FINITE);
    wf[5] = kept;
    CHECK(sets_at(f) == after);

    lshk_index_free(raw);
  } catch (const lshk::Error &e) {
    std::fprintf(stderr, "unexpected lshk::Error: %s\n", e.what());
    return 1;
  }
  return lshk_test_summary("forest_wrapper");
}
