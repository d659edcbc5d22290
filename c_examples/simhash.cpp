// SimHash from C++17 through the plain C API: a sparse ±1 family (s = 3, as
// in SLIDE), a handle owned by std::unique_ptr, and a bucket lookup: the
// nearest of a few stored vectors is found among those that share a code
// with the query in at least one table.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "lshk.h"

namespace {

void check(lshk_status st, const char *what) {
  if (st != LSHK_STATUS_OK) {
    std::string msg(lshk_last_error_message(nullptr, 0) + 1, '\0');
    lshk_last_error_message(msg.data(), msg.size());
    throw std::runtime_error(std::string(what) + ": " + lshk_status_name(st) +
                             " (" + msg.c_str() + ")");
  }
}

struct SimHashDeleter {
  void operator()(lshk_simhash *h) const { lshk_simhash_free(h); }
};
using SimHashPtr = std::unique_ptr<lshk_simhash, SimHashDeleter>;

constexpr uint32_t kDim = 96, kBits = 8, kTables = 24, kRows = 64;

}  // namespace

int main() {
  try {
    lshk_simhash *raw = nullptr;
    check(lshk_simhash_new(kDim, kBits, kTables, 3, 7, &raw), "lshk_simhash_new");
    SimHashPtr h(raw);

    uint32_t dim = 0, bits = 0, tables = 0;
    check(lshk_simhash_shape(h.get(), &dim, &bits, &tables), "lshk_simhash_shape");
    std::printf("lshk %s: sparse family dim %u, K %u, L %u, active tier %s\n",
                lshk_version(), dim, bits, tables, lshk_isa_name(lshk_isa_active()));

    std::mt19937 gen(1);
    std::normal_distribution<float> normal;
    std::vector<float> rows(std::size_t{kRows} * kDim);
    for (float &v : rows) v = normal(gen);
    // The query is row 17 with some noise.
    std::vector<float> query(rows.begin() + 17 * kDim, rows.begin() + 18 * kDim);
    for (float &v : query) v += 0.25f * normal(gen);

    std::vector<uint32_t> codes(std::size_t{kRows} * kTables), qcodes(kTables);
    check(lshk_simhash_hash(h.get(), rows.data(), kRows, kDim, codes.data(), codes.size()),
          "lshk_simhash_hash");
    check(lshk_simhash_hash(h.get(), query.data(), 1, kDim, qcodes.data(), qcodes.size()),
          "lshk_simhash_hash");

    std::vector<uint32_t> candidates;
    for (uint32_t r = 0; r < kRows; r++)
      for (uint32_t l = 0; l < kTables; l++)
        if (codes[std::size_t{r} * kTables + l] == qcodes[l]) {
          candidates.push_back(r);
          break;
        }
    std::printf("%zu of %u rows share a bucket with the query\n", candidates.size(), kRows);
    uint32_t best = kRows;
    float best_dot = -INFINITY;
    for (uint32_t r : candidates) {
      float d = 0;
      for (uint32_t j = 0; j < kDim; j++) d += rows[std::size_t{r} * kDim + j] * query[j];
      if (d > best_dot) best_dot = d, best = r;
    }
    std::printf("best candidate: row %u (the query was made from row 17)\n", best);
    return best == 17 ? 0 : 1;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
