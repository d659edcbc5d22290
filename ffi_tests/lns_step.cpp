// One LNS (LSH negative sampling, SLIDE-style) training step of a softmax
// output layer through the C++ header alone (examples/lns_train.rs is the
// Rust run on w2v-gutenberg). LSH-Embedding variant:
//
//   1-2. the index's candidate sets of the batch's inputs (their hashed
//      buckets' union, every table) per sample, plus the true label
//      (target 1, the sampled classes 0);
//   3. logits of those classes only (gathered matmul);
//   4. softmax cross-entropy over each sample's classes (loss, dL/dlogit);
//   5. SGD on the touched rows of W only;
//   6. push the changed rows into the index and rehash them.
//
// Checked against a plain double-precision reference (loss, gradient, the
// updated rows), and the index after step 6 against a fresh build over the
// updated W (the same answers, bit for bit). A few steps lower the loss.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "lshk.hpp"
#include "lshk_test.h"

namespace {

const std::size_t kRows = 3000, kDim = 24, kBatch = 16;
const float kLr = 0.05f;

struct Rng {
  uint64_t s;
  double uniform() {  // splitmix64 -> [0, 1)
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return double((z ^ (z >> 31)) >> 11) / 9007199254740992.0;
  }
};

lshk::IndexParams index_params() {
  lshk::IndexParams p(LSHK_SOURCE_SIMHASH);
  p.lsh.bits_per_table = 6;
  p.lsh.tables = 8;
  p.storage = LSHK_STORAGE_F32;  // the index's own copy, updated in step 6
  p.lsh.seed = 7;
  return p;
}

// The sampled classes of every sample: the union of its buckets (the
// index's candidate set, which is the gather of its hashed codes), then
// its label if the buckets missed it; targets 1 for the label, 0 otherwise.
void candidates(const lshk::Index &idx, const std::vector<float> &x,
                const std::vector<uint32_t> &y, std::vector<uint32_t> &ids,
                std::vector<std::size_t> &offsets, std::vector<float> &targets) {
  lshk::GatherResult g = idx.candidates(x, 0);
  lshk::GatherResult direct = idx.lsh_tables().gather(idx.simhash().hash(x));
  CHECK(g.total() == direct.total() &&
        std::equal(g.ids().begin(), g.ids().end(), direct.ids().begin()));
  ids.clear();
  targets.clear();
  offsets.assign(1, 0);
  for (std::size_t b = 0; b < kBatch; b++) {
    bool has_label = false;
    for (uint32_t id : g[b]) {
      ids.push_back(id);
      targets.push_back(id == y[b] ? 1.0f : 0.0f);
      has_label |= id == y[b];
    }
    if (!has_label) {
      ids.push_back(y[b]);
      targets.push_back(1.0f);
    }
    offsets.push_back(ids.size());
  }
}

}  // namespace

int main() {
  Rng rng{42};
  std::vector<float> w(kRows * kDim), x(kBatch * kDim);
  std::vector<uint32_t> y(kBatch);
  for (float &v : w) v = float(rng.uniform() - 0.5);
  for (float &v : x) v = float(rng.uniform() - 0.5);
  for (uint32_t &v : y) v = uint32_t(rng.uniform() * kRows);
  lshk::Index idx(w, {}, kRows, kDim, kDim, index_params());

  std::vector<uint32_t> ids;
  std::vector<std::size_t> offsets;
  std::vector<float> targets, logits, grad, loss(kBatch);
  double first_loss = 0, last_loss = 0;
  for (int step = 0; step < 5; step++) {
    // 1-2. candidates from the index's buckets.
    candidates(idx, x, y, ids, offsets, targets);
    const std::size_t n = ids.size();
    CHECK(n > kBatch && n < kBatch * kRows / 4);  // sampled, not the full layer
    // 3-4. logits of the sampled classes, softmax cross-entropy.
    logits.assign(n, 0.0f);
    grad.assign(n, 0.0f);
    lshk::gathered_matmul(lshk::WeightsView(w, kRows, kDim, kDim), x, kDim, ids, offsets, logits);
    lshk::softmax_xent_csr(logits, targets, offsets, loss, grad);
    double total = 0;
    for (float l : loss) total += l;
    if (step == 0) first_loss = total;
    last_loss = total;

    // The double-precision reference of the same step.
    std::vector<double> ref_w(w.begin(), w.end());
    bool close = true;
    for (std::size_t b = 0; b < kBatch; b++) {
      std::size_t s = offsets[b], e = offsets[b + 1];
      std::vector<double> z(e - s);
      double m = -1e300;
      for (std::size_t j = s; j < e; j++) {
        double d = 0;
        for (std::size_t k = 0; k < kDim; k++) d += double(w[ids[j] * kDim + k]) * x[b * kDim + k];
        z[j - s] = d;
        m = std::max(m, d);
      }
      double se = 0;
      for (double v : z) se += std::exp(v - m);
      double lse = m + std::log(se), l = 0;
      for (std::size_t j = s; j < e; j++) {
        double p = std::exp(z[j - s] - lse), g = p - targets[j];
        l -= targets[j] * (z[j - s] - lse);
        close &= std::fabs(g - grad[j]) <= 1e-5;
        for (std::size_t k = 0; k < kDim; k++) ref_w[ids[j] * kDim + k] -= kLr * g * x[b * kDim + k];
      }
      close &= std::fabs(l - loss[b]) <= 1e-4 * std::max(1.0, std::fabs(l));
    }
    CHECK(close);

    // 5. SGD on the touched rows only.
    lshk::rows_update_sgd(w, kRows, kDim, kDim, x, kDim, grad, ids, offsets, kLr);
    double worst = 0;
    for (std::size_t i = 0; i < w.size(); i++) worst = std::max(worst, std::fabs(w[i] - ref_w[i]));
    CHECK(worst <= 1e-5);

    // 6. The changed rows into the index, rehashed.
    std::vector<uint32_t> touched(ids);
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    std::vector<float> rows(touched.size() * kDim);
    for (std::size_t i = 0; i < touched.size(); i++)
      std::copy(&w[touched[i] * kDim], &w[touched[i] * kDim] + kDim, &rows[i * kDim]);
    idx.update_rows(touched, rows, kDim);
    CHECK(idx.dirty_rows() == touched.size());
    CHECK(idx.rehash_dirty() == touched.size());
    CHECK(idx.dirty_rows() == 0);
  }
  CHECK(last_loss < first_loss);

  // The updated index answers like a fresh build over the updated W.
  lshk::Index fresh(w, {}, kRows, kDim, kDim, index_params());
  lshk::TopK a = idx.query(x, 10), b = fresh.query(x, 10);
  bool same = a.ids == b.ids && a.scores.size() == b.scores.size();
  for (std::size_t i = 0; same && i < a.scores.size(); i++)
    same = std::memcmp(&a.scores[i], &b.scores[i], sizeof(float)) == 0;
  CHECK(same);

  std::printf("lns_step: loss %.4f -> %.4f over 5 steps\n", first_loss, last_loss);
  return lshk_test_summary("lns_step");
}
