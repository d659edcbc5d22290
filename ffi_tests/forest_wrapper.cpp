// Tests of lshk::Forest (include/lshk.hpp): the RAII wrapper equals the C
// calls (build, query, union with a cap, rebuild with a new seed,
// save/load), moves transfer the handle, and wrapper-side and C-side
// errors throw lshk::Error with the status.
#include <cstdio>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "lshk.hpp"
#include "lshk_test.h"

static_assert(!std::is_copy_constructible<lshk::Forest>::value, "owners are move-only");
static_assert(std::is_nothrow_move_constructible<lshk::Forest>::value, "noexcept move");

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

// The same query through the C API.
lshk::ForestSets c_query(const lshk_forest *f, const std::vector<float> &w, std::size_t stride,
                         const std::vector<float> &x, std::size_t nx, uint32_t q) {
  lshk::ForestSets r;
  r.ids.resize(nx * q);
  r.offsets.resize(nx + 1);
  std::size_t needed = 0;
  lshk::check(lshk_forest_query(f, w.data(), stride, x.data(), nx, stride, q, r.ids.data(),
                                r.ids.size(), r.offsets.data(), &needed));
  r.ids.resize(needed);
  return r;
}

}  // namespace

int main() {
  const std::size_t rows = 400, dim = 10, stride = 12, nx = 6;
  const uint32_t q = 20;
  try {
    std::vector<float> w(rows * stride), w2(rows * stride), x(nx * stride);
    uint64_t s = 11;
    auto next = [&s]() {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      return float(double(s >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
    };
    for (float &v : w) v = next();
    for (float &v : w2) v = next();
    for (float &v : x) v = next();

    lshk::ForestParams p;
    CHECK(p.struct_size == sizeof(lshk_forest_params) && p.trees == 8 && p.leaf_size == 64);
    p.trees = 4;
    p.leaf_size = 16;
    p.build_threads = 1;
    lshk::Forest f(w, rows, dim, stride, p);
    CHECK(f && f.rows() == rows && f.dim() == dim && f.trees() == 4);
    lshk_forest *raw = nullptr;
    CHECK(lshk_forest_build(w.data(), rows, dim, stride, &p, &raw) == LSHK_STATUS_OK);

    // query: the same sets as the C call, q per sample, ascending.
    lshk::ForestSets got;
    f.query(w, stride, x, nx, stride, q, got);
    lshk::ForestSets want = c_query(raw, w, stride, x, nx, q);
    CHECK(got.ids == want.ids && got.offsets == want.offsets);
    CHECK(got.samples() == nx && got.ids.size() == nx * q);
    bool ascending = true;
    for (std::size_t i = 0; i < nx; i++)
      for (std::size_t j = got.offsets[i] + 1; j < got.offsets[i + 1]; j++)
        ascending = ascending && got.ids[j - 1] < got.ids[j];
    CHECK(ascending);

    // union with and without a cap, against the C call.
    std::vector<uint32_t> u, uc, cu(rows), cuc(rows);
    f.union_capped(got.ids, 0, 3, u, &uc);
    std::size_t needed = 0;
    CHECK(lshk_forest_union(raw, got.ids.data(), got.ids.size(), 0, 3, cu.data(), cuc.data(),
                            cu.size(), &needed) == LSHK_STATUS_OK);
    cu.resize(needed);
    cuc.resize(needed);
    CHECK(u == cu && uc == cuc && u.size() > 25);
    std::size_t total = 0;
    for (uint32_t c : uc) total += c;
    CHECK(total == got.ids.size());
    f.union_capped(got.ids, 25, 3, u);
    cu.assign(rows, 0);
    CHECK(lshk_forest_union(raw, got.ids.data(), got.ids.size(), 25, 3, cu.data(), nullptr,
                            cu.size(), &needed) == LSHK_STATUS_OK);
    cu.resize(needed);
    CHECK(u == cu && u.size() == 25);

    // rebuild (new W, new seed) equals the C rebuild; the old sets change.
    f.rebuild(w2, stride, 99);
    uint64_t seed = 99;
    CHECK(lshk_forest_rebuild(raw, w2.data(), stride, &seed) == LSHK_STATUS_OK);
    lshk::ForestSets after;
    f.query(w2, stride, x, nx, stride, q, after);
    CHECK(after.ids == c_query(raw, w2, stride, x, nx, q).ids);
    CHECK(after.ids != got.ids);

    // save / load: the same queries.
    std::string path = "forest_wrapper_test.lshk";
    f.save(path);
    lshk::Forest g = lshk::Forest::load(path);
    std::remove(path.c_str());
    CHECK(g.rows() == rows && g.dim() == dim && g.trees() == 4);
    lshk::ForestSets loaded;
    g.query(w2, stride, x, nx, stride, q, loaded);
    CHECK(loaded.ids == after.ids && loaded.offsets == after.offsets);

    // unit rows (normalize_rows = 1): the C build's sets, kept by save /
    // load; a bad value throws INVALID_ARGUMENT.
    {
      lshk::ForestParams pu = p;
      CHECK(pu.normalize_rows == 0 && pu.reserved == 0);
      pu.normalize_rows = 1;
      lshk::Forest fu(w, rows, dim, stride, pu);
      lshk_forest *rawu = nullptr;
      CHECK(lshk_forest_build(w.data(), rows, dim, stride, &pu, &rawu) == LSHK_STATUS_OK);
      lshk::ForestSets su;
      fu.query(w, stride, x, nx, stride, q, su);
      CHECK(su.ids == c_query(rawu, w, stride, x, nx, q).ids);
      std::string upath = "forest_wrapper_unit.lshk";
      fu.save(upath);
      lshk::Forest gu = lshk::Forest::load(upath);
      std::remove(upath.c_str());
      lshk::ForestSets lu;
      gu.query(w, stride, x, nx, stride, q, lu);
      CHECK(lu.ids == su.ids && lu.offsets == su.offsets);
      lshk_forest_free(rawu);
      bool threw = false;
      pu.normalize_rows = 2;
      try {
        lshk::Forest bad(w, rows, dim, stride, pu);
      } catch (const lshk::Error &e) {
        threw = e.status() == LSHK_STATUS_INVALID_ARGUMENT;
      }
      CHECK(threw);
    }

    // contiguous overload (stride = dim)
    std::vector<float> wc(rows * dim), xc(nx * dim);
    for (std::size_t r = 0; r < rows; r++)
      for (std::size_t k = 0; k < dim; k++) wc[r * dim + k] = w2[r * stride + k];
    for (std::size_t i = 0; i < nx; i++)
      for (std::size_t k = 0; k < dim; k++) xc[i * dim + k] = x[i * stride + k];
    CHECK(g.query(wc, xc, q).ids == after.ids);

    // moves transfer the handle; an empty owner throws NULL_POINTER.
    lshk::Forest h(std::move(g));
    CHECK(h && !g && h.rows() == rows);
    CHECK(status_of([&] { g.query(wc, xc, q); }) == LSHK_STATUS_NULL_POINTER);
    const lshk_forest *hh = h.get();
    lshk_forest *released = h.release();
    CHECK(released == hh && !h);
    CHECK(lshk_forest_free(released) == LSHK_STATUS_OK);

    // wrapper-side size checks (before the C call) and C-side errors.
    lshk::ForestSets r;
    CHECK(status_of([&] { f.query(w, stride, x, nx + 1, stride, q, r); }) ==
          LSHK_STATUS_INVALID_ARGUMENT);
    CHECK(status_of([&] {
            f.query(std::vector<float>(w.begin(), w.end() - 3), stride, x, nx, stride, q, r);
          }) == LSHK_STATUS_INVALID_ARGUMENT);
    CHECK(status_of([&] { f.query(w, stride, x, nx, stride, 0, r); }) ==
          LSHK_STATUS_INVALID_ARGUMENT);
    CHECK(status_of([&] { f.query(wc, std::vector<float>(xc.begin(), xc.end() - 1), q); }) ==
          LSHK_STATUS_INVALID_ARGUMENT);
    std::vector<uint32_t> bad = {1, 2, uint32_t(rows)};
    CHECK(status_of([&] { f.union_capped(bad, 0, 1, u); }) == LSHK_STATUS_INDEX_OUT_OF_RANGE);
    std::vector<float> nan_w = w;
    nan_w[5] = std::numeric_limits<float>::quiet_NaN();
    CHECK(status_of([&] { f.rebuild(nan_w, stride); }) == LSHK_STATUS_NON_FINITE);
    CHECK(status_of([&] { lshk::Forest bad_f(w, 1, dim, stride, p); }) ==
          LSHK_STATUS_INVALID_ARGUMENT);
    CHECK(status_of([] { lshk::Forest::load("no/such/forest.lshk"); }) == LSHK_STATUS_IO_ERROR);
    // the failed rebuild left the forest unchanged
    f.query(w2, stride, x, nx, stride, q, r);
    CHECK(r.ids == after.ids);

    lshk_forest_free(raw);
  } catch (const lshk::Error &e) {
    std::fprintf(stderr, "unexpected lshk::Error: %s\n", e.what());
    return 1;
  }
  return lshk_test_summary("forest_wrapper");
}
