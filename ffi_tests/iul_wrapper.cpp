// Tests of include/lshk_iul.hpp: lshk::train_iul equals the C call bit for
// bit (planes and reports), wrapper-side and C-side errors throw
// lshk::Error with the status, and the index is unchanged after an error.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "lshk_iul.hpp"
#include "lshk_test.h"

namespace {

const std::size_t ROWS = 300, DIM = 10, NQ = 150;
const uint32_t K = 4, L = 6;

std::vector<float> planes_of(const lshk::Index &idx) {
  std::vector<float> p(K * L * DIM);
  const lshk_simhash *h = nullptr;
  lshk::check(lshk_index_simhash(idx.get(), &h));
  lshk::check(lshk_simhash_copy_planes(h, p.data(), p.size()));
  return p;
}

template <class F>
lshk_status status_of(F f) {
  try {
    f();
  } catch (const lshk::Error &e) {
    return e.status();
  }
  return LSHK_STATUS_OK;
}

}  // namespace

int main() {
  uint64_t s = 99;
  auto next = [&s]() {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<float>(static_cast<double>(s >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
  };
  std::vector<float> w(ROWS * DIM), q(NQ * DIM);
  for (auto &v : w) v = next();
  std::vector<std::size_t> offs{0};
  std::vector<uint32_t> labels;
  for (std::size_t i = 0; i < NQ; i++) {
    for (std::size_t d = 0; d < DIM; d++) q[i * DIM + d] = 0.5f * next();
    for (std::size_t j = 0; j < i % 3; j++) {
      uint32_t y = static_cast<uint32_t>((i * 11 + j * 5) % ROWS);
      labels.push_back(y);
      for (std::size_t d = 0; d < DIM; d++) q[i * DIM + d] += w[y * DIM + d];
    }
    offs.push_back(labels.size());
  }
  lshk::IndexParams ip;
  ip.lsh.bits_per_table = K;
  ip.lsh.tables = L;
  lshk::IulParams p;
  CHECK(p.struct_size == sizeof(lshk_iul_params) && p.rounds == 3);
  p.rounds = 2;
  p.epochs = 2;
  p.batch = 32;

  try {
    lshk::Index a(w, {}, ROWS, DIM, DIM, ip);
    lshk::Index b(w, {}, ROWS, DIM, DIM, ip);
    std::vector<float> before = planes_of(a);
    CHECK(status_of([&] { lshk::train_iul(a, q, NQ, DIM, offs, labels, p); }) == LSHK_STATUS_OK);
    // Wrapper-side (short spans: INVALID_ARGUMENT, as every lshk.hpp
    // check) and C-side errors; the index stays unchanged.
    lshk::Index c(w, {}, ROWS, DIM, DIM, ip);
    CHECK(status_of([&] { lshk::train_iul(c, q, NQ + 1, DIM, offs, labels, p); }) ==
          LSHK_STATUS_INVALID_ARGUMENT);
    CHECK(status_of([&] { lshk::train_iul(c, q, NQ, DIM - 1, offs, labels, p); }) ==
          LSHK_STATUS_INVALID_ARGUMENT);
    CHECK(status_of([&] { lshk::train_iul(c, q, 0, DIM, offs, labels, p); }) ==
          LSHK_STATUS_INVALID_ARGUMENT);
    lshk::IulParams bad = p;
    bad.learning_rate = -1.0f;
    CHECK(status_of([&] { lshk::train_iul(c, q, NQ, DIM, offs, labels, bad); }) ==
          LSHK_STATUS_INVALID_ARGUMENT);
    std::vector<uint32_t> l2 = labels;
    l2[0] = ROWS;
    CHECK(status_of([&] { lshk::train_iul(c, q, NQ, DIM, offs, l2, p); }) ==
          LSHK_STATUS_INVALID_ARGUMENT);
    CHECK(planes_of(c) == before);
    // Sources without SimHash planes: DWTA tables, IVF lists.
    lshk::IndexParams dp(LSHK_SOURCE_DWTA);
    dp.lsh.bits_per_table = 2;
    dp.lsh.tables = L;
    dp.lsh.bin_size = 4;
    lshk::Index dw(w, {}, ROWS, DIM, DIM, dp);
    CHECK(status_of([&] { lshk::train_iul(dw, q, NQ, DIM, offs, labels, p); }) ==
          LSHK_STATUS_INVALID_ARGUMENT);
    lshk::Index iv(w, {}, ROWS, DIM, DIM, lshk::IndexParams(LSHK_SOURCE_IVF));
    CHECK(status_of([&] { lshk::train_iul(iv, q, NQ, DIM, offs, labels, p); }) ==
          LSHK_STATUS_UNSUPPORTED);

    // `a` was trained above through the wrapper; `b` through the C API.
    std::vector<lshk_iul_report> rc(2);
    EXPECT_OK(lshk_index_train_iul(b.get(), q.data(), NQ, DIM, offs.data(), labels.data(), &p,
                                   rc.data(), rc.size()));
    CHECK(planes_of(a) == planes_of(b));
    CHECK(planes_of(a) != before);
    lshk::Index d(w, {}, ROWS, DIM, DIM, ip);
    std::vector<lshk_iul_report> rw = lshk::train_iul(d, q, NQ, DIM, offs, labels, p);
    CHECK(rw.size() == 2);
    CHECK(std::memcmp(rw.data(), rc.data(), 2 * sizeof(lshk_iul_report)) == 0);
    CHECK(rw[0].positives == rw[0].negatives);
    // Planes in, planes out: same result (index range_bits = K = 4 here).
    lshk::IulResult pr = lshk::train_iul_planes(before, DIM, K, L, K, w, ROWS, DIM, q, NQ, DIM,
                                                offs, labels, p);
    CHECK(pr.planes == planes_of(a));
    CHECK(pr.reports.size() == 2 &&
          std::memcmp(pr.reports.data(), rc.data(), 2 * sizeof(lshk_iul_report)) == 0);
    CHECK(status_of([&] {
            lshk::train_iul_planes(before, DIM, K, L, 0, w, ROWS, DIM, q, NQ, DIM, offs, labels, p);
          }) == LSHK_STATUS_INVALID_ARGUMENT);
  } catch (const lshk::Error &e) {
    std::printf("unexpected lshk::Error: %s\n", e.what());
    CHECK(false);
  }
  return lshk_test_summary("iul_wrapper");
}
