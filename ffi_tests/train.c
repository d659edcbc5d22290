/* A training step of a sampled-softmax output layer through the C ABI:
 * forward gathered matmul (lshk_gathered_matmul over an f32 view), softmax
 * cross-entropy over the candidate segments, the transposed product dq
 * (lshk_gather_dq over f32 and bf16 rows), and the row updates (SGD and
 * lazy Adam), checked against plain C references and for bit-identity
 * across thread counts and tiers; then a short training run whose loss
 * must fall. */
#include <math.h> /* fabs, INFINITY: no libm symbol is linked (no -lm) */

#include "lshk_test.h"

/* exp and log for the references, without libm: exp(x) = (e^(x/1024))^1024
 * with a Taylor series for the small argument; log by Newton steps on it. */
static double t_exp(double x) {
  double r = x / 1024.0, term = 1.0, sum = 1.0;
  for (int k = 1; k < 14; k++) {
    term *= r / k;
    sum += term;
  }
  for (int k = 0; k < 10; k++) sum *= sum;
  return sum;
}
static double t_log(double s) { /* s >= 1 */
  double y = 0.0;
  for (int k = 0; k < 60; k++) {
    double e = t_exp(y);
    y += 2.0 * (s - e) / (s + e);
  }
  return y;
}

#define ROWS 64
#define DIM 19
#define NB 6
#define NEG 9 /* candidates per sample: the label + NEG sampled rows */
#define SEG (NEG + 1)
#define N (NB * SEG)

static uint64_t rng_state = 12345;
static uint32_t rnd(void) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(rng_state >> 33);
}
static float frand(void) { return (float)rnd() / 4294967296.0f * 2.0f - 1.0f; }

static float w0[ROWS * DIM];
static float q[NB * DIM];
static uint32_t label[NB];
static uint32_t ids[N];
static size_t offsets[NB + 1];
static float targets[N];

/* The f32 view of a W of ROWS rows of DIM floats, no bias. */
static lshk_weights_view view_of(const float *w) {
  lshk_weights_view v;
  memset(&v, 0, sizeof v);
  v.struct_size = sizeof v;
  v.storage = LSHK_STORAGE_F32;
  v.w = w;
  v.rows = ROWS;
  v.dim = DIM;
  v.w_stride = DIM;
  return v;
}

static void make_batch(void) {
  for (int b = 0; b < NB; b++) {
    ids[b * SEG] = label[b];
    targets[b * SEG] = 1.0f;
    for (int k = 1; k < SEG; k++) {
      ids[b * SEG + k] = rnd() % ROWS; /* may repeat, may hit a label */
      targets[b * SEG + k] = 0.0f;
    }
  }
  for (int b = 0; b <= NB; b++) offsets[b] = (size_t)b * SEG;
}

/* loss of the batch (sum over samples) for W, in double */
static double batch_loss(const float *w) {
  double total = 0.0;
  for (int b = 0; b < NB; b++) {
    double z[SEG], m = -INFINITY, s = 0.0;
    for (int k = 0; k < SEG; k++) {
      const float *row = w + (size_t)ids[b * SEG + k] * DIM;
      z[k] = 0.0;
      for (int d = 0; d < DIM; d++) z[k] += (double)row[d] * q[b * DIM + d];
      if (z[k] > m) m = z[k];
    }
    for (int k = 0; k < SEG; k++) s += t_exp(z[k] - m);
    total += m + t_log(s) - z[0];
  }
  return total;
}

int main(void) {
  float w[ROWS * DIM], w2[ROWS * DIM];
  float logits[N], loss[NB], grad[N], dq[NB * DIM];
  for (int i = 0; i < ROWS * DIM; i++) w0[i] = 0.1f * frand();
  for (int i = 0; i < NB * DIM; i++) q[i] = frand();
  for (int b = 0; b < NB; b++) label[b] = (uint32_t)(b * 7 + 3) % ROWS;
  make_batch();
  memcpy(w, w0, sizeof w);

  /* forward */
  {
    const lshk_weights_view v = view_of(w);
    EXPECT_OK(lshk_gathered_matmul(&v, q, NB, DIM, ids, offsets, logits, N));
  }
  /* loss and gradient; checked against double */
  EXPECT_OK(lshk_softmax_xent_csr(logits, targets, offsets, NB, 1, loss, grad));
  for (int b = 0; b < NB; b++) {
    double m = -INFINITY, s = 0.0, gsum = 0.0;
    for (int k = 0; k < SEG; k++)
      if (logits[b * SEG + k] > m) m = logits[b * SEG + k];
    for (int k = 0; k < SEG; k++) s += t_exp(logits[b * SEG + k] - m);
    CHECK(fabs(loss[b] - (m + t_log(s) - logits[b * SEG])) < 1e-5);
    for (int k = 0; k < SEG; k++) {
      double p = t_exp(logits[b * SEG + k] - m) / s;
      CHECK(fabs(grad[b * SEG + k] - (p - targets[b * SEG + k])) < 1e-6);
      gsum += grad[b * SEG + k];
    }
    CHECK(fabs(gsum) < 1e-5);
  }
  /* in place: the same bits */
  {
    float x[N], l2[NB];
    memcpy(x, logits, sizeof x);
    EXPECT_OK(lshk_softmax_xent_csr(x, targets, offsets, NB, 2, l2, x));
    CHECK(memcmp(x, grad, sizeof x) == 0 && memcmp(l2, loss, sizeof l2) == 0);
  }
  /* every tier the CPU has: the same bits */
  for (lshk_isa t = 0; t <= lshk_isa_detected(); t++) {
    float l2[NB], g2[N], d2[NB * DIM];
    EXPECT_OK(lshk_softmax_xent_csr_isa(t, logits, targets, offsets, NB, 1, l2,
                                        g2));
    CHECK(memcmp(g2, grad, sizeof g2) == 0 && memcmp(l2, loss, sizeof l2) == 0);
    EXPECT_OK(lshk_gather_dq(LSHK_STORAGE_F32, w, ROWS, DIM, DIM, grad, ids,
                             offsets, NB, 1, dq, DIM));
    EXPECT_OK(lshk_gather_dq_isa(t, LSHK_STORAGE_F32, w, ROWS, DIM, DIM, grad,
                                 ids, offsets, NB, 3, d2, DIM));
    CHECK(memcmp(d2, dq, sizeof d2) == 0);
  }
  /* bf16 rows are widened exactly: dq over bf16 W equals dq over its
   * widened f32 copy, bit for bit, on every tier */
  {
    uint16_t wb[ROWS * DIM];
    float wbf[ROWS * DIM], dref[NB * DIM], d2[NB * DIM];
    EXPECT_OK(lshk_convert(LSHK_STORAGE_F32, w, ROWS * DIM, LSHK_STORAGE_BF16, wb));
    EXPECT_OK(lshk_convert(LSHK_STORAGE_BF16, wb, ROWS * DIM, LSHK_STORAGE_F32, wbf));
    EXPECT_OK(lshk_gather_dq(LSHK_STORAGE_F32, wbf, ROWS, DIM, DIM, grad, ids,
                             offsets, NB, 1, dref, DIM));
    for (lshk_isa t = 0; t <= lshk_isa_detected(); t++) {
      lshk_fill_canary(d2, sizeof d2);
      EXPECT_OK(lshk_gather_dq_isa(t, LSHK_STORAGE_BF16, wb, ROWS, DIM, DIM,
                                   grad, ids, offsets, NB, 2, d2, DIM));
      CHECK(memcmp(d2, dref, sizeof d2) == 0);
    }
    /* only F32 and BF16 rows; nothing written on error */
    lshk_fill_canary(d2, sizeof d2);
    EXPECT_STATUS(lshk_gather_dq(LSHK_STORAGE_F16, wb, ROWS, DIM, DIM, grad,
                                 ids, offsets, NB, 1, d2, DIM),
                  LSHK_STATUS_INVALID_ARGUMENT);
    EXPECT_STATUS(lshk_gather_dq(LSHK_STORAGE_I8, wb, ROWS, DIM, DIM, grad,
                                 ids, offsets, NB, 1, d2, DIM),
                  LSHK_STATUS_INVALID_ARGUMENT);
    EXPECT_STATUS(lshk_gather_dq(9, w, ROWS, DIM, DIM, grad, ids, offsets, NB,
                                 1, d2, DIM),
                  LSHK_STATUS_INVALID_ARGUMENT);
    CHECK(lshk_canary_intact(d2, sizeof d2));
  }
  /* dq against a plain loop (same order: bit for bit unless the compiler
   * contracts, so a tolerance) */
  for (int b = 0; b < NB; b++)
    for (int d = 0; d < DIM; d++) {
      float acc = 0.0f;
      for (int k = 0; k < SEG; k++)
        acc += grad[b * SEG + k] * w[(size_t)ids[b * SEG + k] * DIM + d];
      CHECK(fabsf(acc - dq[b * DIM + d]) <= 1e-6f);
    }

  /* SGD: against a plain dense reference, and the same bits for 1 and 3
   * threads */
  {
    float ref[ROWS * DIM], gd[ROWS * DIM];
    int hit[ROWS];
    const float lr = 0.3f;
    memset(gd, 0, sizeof gd);
    memset(hit, 0, sizeof hit);
    for (int b = 0; b < NB; b++)
      for (int k = 0; k < SEG; k++) {
        uint32_t r = ids[b * SEG + k];
        hit[r] = 1;
        for (int d = 0; d < DIM; d++)
          gd[r * DIM + d] += grad[b * SEG + k] * q[b * DIM + d];
      }
    memcpy(ref, w0, sizeof ref);
    for (int r = 0; r < ROWS; r++)
      if (hit[r])
        for (int d = 0; d < DIM; d++) ref[r * DIM + d] -= lr * gd[r * DIM + d];
    memcpy(w2, w0, sizeof w2);
    EXPECT_OK(lshk_rows_update_sgd(w, ROWS, DIM, DIM, q, DIM, grad, ids,
                                   offsets, NB, lr, 1));
    EXPECT_OK(lshk_rows_update_sgd_isa(LSHK_ISA_SCALAR, w2, ROWS, DIM, DIM, q,
                                       DIM, grad, ids, offsets, NB, lr, 3));
    CHECK(memcmp(w, w2, sizeof w) == 0);
    for (int i = 0; i < ROWS * DIM; i++) CHECK(fabsf(w[i] - ref[i]) <= 1e-6f);
  }

  /* Lazy Adam: 1 vs 3 threads give the same bits over several steps, and
   * training lowers the loss of the batch. */
  {
    lshk_adam_params p = lshk_adam_params_default();
    lshk_adam *a1 = NULL, *a3 = NULL;
    double before, after;
    p.lr = 0.05f;
    EXPECT_OK(lshk_adam_new(ROWS, DIM, &p, &a1));
    EXPECT_OK(lshk_adam_new(ROWS, DIM, &p, &a3));
    memcpy(w, w0, sizeof w);
    memcpy(w2, w0, sizeof w2);
    before = batch_loss(w);
    for (int it = 0; it < 60; it++) {
      if (it % 10 == 0) make_batch(); /* new negatives now and then */
      const lshk_weights_view v = view_of(w);
      EXPECT_OK(lshk_gathered_matmul(&v, q, NB, DIM, ids, offsets, logits, N));
      EXPECT_OK(lshk_softmax_xent_csr(logits, targets, offsets, NB, 0, loss,
                                      logits)); /* in place */
      EXPECT_OK(lshk_adam_step(a1, w, ROWS, DIM, DIM, q, DIM, logits, ids,
                               offsets, NB, 1));
      EXPECT_OK(lshk_adam_step(a3, w2, ROWS, DIM, DIM, q, DIM, logits, ids,
                               offsets, NB, 3));
      if (it == 30) {
        p.lr = 0.02f; /* a schedule */
        EXPECT_OK(lshk_adam_set_params(a1, &p));
        EXPECT_OK(lshk_adam_set_params(a3, &p));
      }
    }
    CHECK(memcmp(w, w2, sizeof w) == 0);
    make_batch();
    after = batch_loss(w);
    printf("train: batch loss %.4f -> %.4f after 60 lazy Adam steps\n", before,
           after);
    CHECK(after < 0.5 * before);
    EXPECT_STATUS(lshk_adam_step(a1, w, ROWS - 1, DIM, DIM, q, DIM, logits, ids,
                                 offsets, NB, 1),
                  LSHK_STATUS_INVALID_ARGUMENT);
    EXPECT_OK(lshk_adam_free(a1));
    EXPECT_OK(lshk_adam_free(a3));
    EXPECT_STATUS(lshk_adam_free(a1), LSHK_STATUS_INVALID_HANDLE);
  }
  return lshk_test_summary("train");
}
