// The training kernels through the C++ wrapper (include/lshk.hpp): a few
// SGD and lazy-Adam steps of a small sampled-softmax layer lower the loss,
// and the wrapper's size checks throw lshk::Error before calling C.
#include <cmath>
#include <cstdio>
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

  auto step_loss = [&]() {
    lshk::gathered_matmul_f32(w, rows, dim, dim, {}, q, dim, ids, offsets, logits);
    lshk::softmax_xent_csr(logits, targets, offsets, loss, logits);
    double s = 0;
    for (float l : loss) s += l;
    return s;
  };
  double first = step_loss();
  lshk::gather_dq_f32(w, rows, dim, dim, logits, ids, offsets, dq, dim);
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
  bool threw = false;
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
  std::printf("train_wrapper: %d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
