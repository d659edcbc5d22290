// The training kernels through the C++ wrapper (include/lshk.hpp): a few
// SGD and lazy-Adam steps of a small sampled-softmax layer lower the loss,
// and the wrapper's size checks throw lshk::Error before calling C.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "lshk.hpp"

static int failed = 0, passed = 0;
#define EXPECT(c)                                                           \
  do {                                                                      \
    if (c) {                                                                \
      passed++;                                                             \
    } else {                                                                \
      failed++;                                                             \
      std::fprintf(stderr, "%s:%d: EXPECT failed: %s\n", __FILE__, __LINE__, #c); \
    }                                                                       \
  } while (0)

int main() {
  const std::size_t rows = 40, dim = 8, nb = 4, seg = 6, n = nb * seg;
  std::vector<float> w(rows * dim), q(nb * dim), logits(n), targets(n, 0.0f), loss(nb),
      dq(nb * dim);
  std::vector<uint32_t> ids(n);
  std::vector<std::size_t> offsets(nb + 1);
  for (std::size_t i = 0; i < w.size(); i++) w[i] = 0.01f * float((i * 37) % 23) - 0.1f;
  for (std::size_t i = 0; i < q.size(); i++) q[i] = float((i * 11) % 7) / 7.0f - 0.5f;
  for (std::size_t b = 0; b < nb; b++) {
    for (std::size_t k = 0; k < seg; k++) ids[b * seg + k] = uint32_t((b * 13 + k * 7) % rows);
    targets[b * seg] = 1.0f;
  }
  for (std::size_t b = 0; b <= nb; b++) offsets[b] = b * seg;
  bool threw = false;

  auto step_loss = [&]() {
    lshk::gathered_matmul(lshk::WeightsView(w, rows, dim, dim), q, dim, ids, offsets, logits);
    lshk::softmax_xent_csr(logits, targets, offsets, loss, logits);
    double s = 0;
    for (float l : loss) s += l;
    return s;
  };
  double first = step_loss();
  // dq = sum_j grad[j] w[ids[j]] per sample: against a double reference,
  // the C call (bit for bit), the bf16 rows' product, and the same from an
  // index's borrowed W (the view's BORROWED_F32 storage is f32 rows).
  lshk::gather_dq(lshk::WeightsView(w, rows, dim, dim), logits, ids, offsets, dq, dim);
  {
    bool close = true;
    for (std::size_t b = 0; b < nb; b++)
      for (std::size_t d = 0; d < dim; d++) {
        double ref = 0, mag = 0;
        for (std::size_t j = offsets[b]; j < offsets[b + 1]; j++) {
          ref += double(logits[j]) * w[ids[j] * dim + d];
          mag += std::fabs(double(logits[j]) * w[ids[j] * dim + d]);
        }
        close = close && std::fabs(dq[b * dim + d] - ref) <= (seg + 1) * 0x1p-23 * mag;
      }
    EXPECT(close);
    std::vector<float> c_dq(nb * dim), bf_dq(nb * dim), ix_dq(nb * dim);
    EXPECT(lshk_gather_dq(LSHK_STORAGE_F32, w.data(), rows, dim, dim, logits.data(), ids.data(),
                          offsets.data(), nb, 1, c_dq.data(), dim) == LSHK_STATUS_OK);
    EXPECT(std::memcmp(c_dq.data(), dq.data(), dq.size() * sizeof(float)) == 0);
    std::vector<uint16_t> wb = lshk::convert(w, LSHK_STORAGE_BF16);
    lshk::gather_dq(lshk::WeightsView(LSHK_STORAGE_BF16, wb, rows, dim, dim), logits, ids,
                    offsets, bf_dq, dim, 2);
    EXPECT(lshk_gather_dq(LSHK_STORAGE_BF16, wb.data(), rows, dim, dim, logits.data(), ids.data(),
                          offsets.data(), nb, 1, c_dq.data(), dim) == LSHK_STATUS_OK);
    EXPECT(std::memcmp(c_dq.data(), bf_dq.data(), dq.size() * sizeof(float)) == 0 && bf_dq != dq);
    lshk::IndexParams bp;
    bp.storage = LSHK_STORAGE_BORROWED_F32;
    bp.lsh.bits_per_table = 4;
    bp.lsh.tables = 2;
    lshk::Index bi(w, {}, rows, dim, dim, bp);
    lshk::gather_dq(bi.weights(), logits, ids, offsets, ix_dq, dim);
    EXPECT(ix_dq == dq);
    // f16 and int8 rows are not the kernel's: the library refuses them.
    std::vector<uint16_t> wh = lshk::convert(w, LSHK_STORAGE_F16);
    threw = false;
    try {
      lshk::gather_dq(lshk::WeightsView(LSHK_STORAGE_F16, wh, rows, dim, dim), logits, ids,
                      offsets, ix_dq, dim);
    } catch (const lshk::Error &e) {
      threw = e.status() == LSHK_STATUS_INVALID_ARGUMENT &&
              std::strncmp(e.message(), "lshk_gather_dq", 14) == 0;
    }
    EXPECT(threw);
    threw = false;
    try {
      lshk::gather_dq(lshk::WeightsView(w, rows, dim, dim), logits, ids, offsets,
                      lshk::span<float>(ix_dq.data(), (nb - 1) * dim), dim);
    } catch (const lshk::Error &e) {
      threw = e.status() == LSHK_STATUS_BUFFER_TOO_SMALL;
    }
    EXPECT(threw);
  }
  lshk::rows_update_sgd(w, rows, dim, dim, q, dim, logits, ids, offsets, 0.5f, 2);
  lshk::AdamParams p;
  p.lr = 0.05f;
  lshk::Adam adam(rows, dim, p);
  double last = 0;
  for (int it = 0; it < 40; it++) {
    last = step_loss();
    adam.step(w, dim, q, dim, logits, ids, offsets, 2);
  }
  std::printf("train_wrapper: loss %.4f -> %.4f\n", first, last);
  EXPECT(last < 0.5 * first);
  threw = false;
  try {
    lshk::softmax_xent_csr(logits, targets, offsets, lshk::span<float>(loss.data(), nb - 1),
                           logits);
  } catch (const lshk::Error &e) {
    threw = e.status() == LSHK_STATUS_BUFFER_TOO_SMALL;
  }
  EXPECT(threw);
  threw = false;
  try {
    adam.step(lshk::span<float>(w.data(), w.size() - 1), dim, q, dim, logits, ids, offsets);
  } catch (const lshk::Error &e) {
    threw = e.status() == LSHK_STATUS_INVALID_ARGUMENT;
  }
  EXPECT(threw);
  lshk::Adam moved = std::move(adam);
  EXPECT(moved.get() != nullptr && adam.get() == nullptr);
  // The mutable index: update + rehash equals a fresh build.
  {
    std::vector<float> w0(rows * dim), w1;
    for (std::size_t i = 0; i < w0.size(); i++) w0[i] = float((i * 29) % 17) / 8.0f - 1.0f;
    w1 = w0;
    std::vector<uint32_t> up = {3, 17, 29};
    std::vector<float> vals(up.size() * dim);
    for (std::size_t i = 0; i < vals.size(); i++) vals[i] = float((i * 7) % 5) - 2.0f;
    for (std::size_t j = 0; j < up.size(); j++)
      for (std::size_t d = 0; d < dim; d++) w1[up[j] * dim + d] = vals[j * dim + d];
    lshk::IndexParams ip;
    ip.lsh.bits_per_table = 4;
    ip.lsh.tables = 6;
    lshk::Index idx(w0, {}, rows, dim, dim, ip), fresh(w1, {}, rows, dim, dim, ip);
    idx.update_rows(up, vals, dim);
    EXPECT(idx.dirty_rows() == up.size());
    EXPECT(idx.rehash_dirty() == up.size());
    auto a = idx.query(q, 5), b = fresh.query(q, 5);
    EXPECT(a.ids == b.ids && a.scores == b.scores);
    EXPECT(lshk::rehash_next(0) == 50 && lshk::rehash_next(200) == 251);
    threw = false;
    try {
      idx.update_rows(up, lshk::span<const float>(vals.data(), vals.size() - 1), dim);
    } catch (const lshk::Error &e) {
      threw = e.status() == LSHK_STATUS_INVALID_ARGUMENT;
    }
    EXPECT(threw);
    // lshk::Index::inclusion_prob (logQ): the wrapper gives the C call's
    // bits; tables_used 0 gives 0, L the same as none; probabilities
    // grow with the tables used; short buffers throw before calling C.
    std::vector<uint32_t> used = {ip.lsh.tables, 0, 2, ip.lsh.tables};
    std::vector<double> pc(n), pn(n);
    EXPECT(lshk_index_inclusion_prob(idx.get(), q.data(), nb, dim, ids.data(), offsets.data(),
                                     used.data(), pc.data()) == LSHK_STATUS_OK);
    EXPECT(lshk_index_inclusion_prob(idx.get(), q.data(), nb, dim, ids.data(), offsets.data(),
                                     nullptr, pn.data()) == LSHK_STATUS_OK);
    std::vector<double> pw = idx.inclusion_prob(q, ids, offsets, used);
    std::vector<double> pa = idx.inclusion_prob(q, ids, offsets);
    EXPECT(pw.size() == n && pa.size() == n);
    bool same = true, ranged = true, order = true;
    for (std::size_t j = 0; j < n; j++) {
      same = same && std::memcmp(&pw[j], &pc[j], sizeof(double)) == 0 &&
             std::memcmp(&pa[j], &pn[j], sizeof(double)) == 0;
      ranged = ranged && pa[j] >= 0.0 && pa[j] <= 1.0;
      std::size_t b = j / seg;
      if (b == 0 || b == 3) order = order && pw[j] == pa[j];
      if (b == 1) order = order && pw[j] == 0.0;
      if (b == 2) order = order && pw[j] <= pa[j];
    }
    EXPECT(same && ranged && order);
    // strided queries: the same as contiguous ones
    std::vector<float> qs(nb * (dim + 3), 7.0f);
    for (std::size_t b = 0; b < nb; b++)
      for (std::size_t d = 0; d < dim; d++) qs[b * (dim + 3) + d] = q[b * dim + d];
    std::vector<double> ps(n);
    idx.inclusion_prob(qs, dim + 3, ids, offsets, {}, ps);
    EXPECT(ps == pa);
    threw = false;
    try {
      idx.inclusion_prob(q, dim, ids, offsets, {}, lshk::span<double>(ps.data(), n - 1));
    } catch (const lshk::Error &e) {
      threw = e.status() == LSHK_STATUS_BUFFER_TOO_SMALL;
    }
    EXPECT(threw);
    threw = false;
    try {
      idx.inclusion_prob(q, lshk::span<const uint32_t>(ids.data(), n - 1), offsets);
    } catch (const lshk::Error &e) {
      threw = e.status() == LSHK_STATUS_INVALID_ARGUMENT;
    }
    EXPECT(threw);
    threw = false;
    try {  // a tables_used value > L: refused by the library
      std::vector<uint32_t> bad = {ip.lsh.tables + 1, 0, 0, 0};
      (void)idx.inclusion_prob(q, ids, offsets, bad);
    } catch (const lshk::Error &e) {
      threw = e.status() == LSHK_STATUS_INVALID_ARGUMENT;
    }
    EXPECT(threw);
    threw = false;
    try {  // an empty owner
      (void)lshk::Index().inclusion_prob(q, ids, offsets);
    } catch (const lshk::Error &e) {
      threw = e.status() == LSHK_STATUS_NULL_POINTER;
    }
    EXPECT(threw);
    threw = false;
    lshk::IndexParams dp = ip;
    dp.source = LSHK_SOURCE_DWTA;
    dp.lsh.bits_per_table = 2;
    dp.lsh.bin_size = 4;
    lshk::Index dw(w0, {}, rows, dim, dim, dp);
    try {  // a DWTA index has no SimHash collision probability
      (void)dw.inclusion_prob(q, ids, offsets);
    } catch (const lshk::Error &e) {
      threw = e.status() == LSHK_STATUS_INVALID_ARGUMENT;
    }
    EXPECT(threw);
  }
  std::printf("train_wrapper: %d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
