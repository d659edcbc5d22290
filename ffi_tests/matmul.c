/* C tests of the gathered matmul (lshk_gathered_matmul over an
 * lshk_weights_view), conversions (lshk_convert), top-k and softmax:
 * correct results on a small problem for every storage and supported
 * tier, and every bad input rejected with its documented status, outputs
 * left untouched (canaries). */
#include <math.h> /* NAN, INFINITY only: no libm functions, no -lm needed */

#include "lshk_test.h"

static double absd(double v) { return v < 0 ? -v : v; }

enum { ROWS = 7, DIM = 13, NQ = 2, NOUT = 6 };

static float W[ROWS * DIM];
static float Q[NQ * DIM];
static float BIAS[ROWS];
static const uint32_t IDS[NOUT] = {6, 0, 3, 3, 1, 5};
static const size_t OFFS[NQ + 1] = {0, 4, 6};

static double ref(int i, uint32_t id, int bias) {
  double s = bias ? BIAS[id] : 0.0;
  for (int t = 0; t < DIM; t++) s += (double)W[id * DIM + t] * Q[i * DIM + t];
  return s;
}

static int close_to(float got, double want, double mag) {
  return absd((double)got - want) <= (DIM + 2) * 6e-8 * mag + 1e-30;
}

/* A view of `rows` rows of `dim` elements at stride `stride`. */
static lshk_weights_view view(uint32_t storage, const void *w,
                              const float *scales, const float *bias,
                              size_t rows, size_t dim, size_t stride) {
  lshk_weights_view v;
  memset(&v, 0, sizeof v);
  v.struct_size = sizeof v;
  v.storage = storage;
  v.w = w;
  v.scales = scales;
  v.bias = bias;
  v.rows = rows;
  v.dim = dim;
  v.w_stride = stride;
  return v;
}

static double mag(int i, uint32_t id, const float *w) {
  double a = absd(BIAS[id]);
  for (int t = 0; t < DIM; t++) a += absd((double)w[id * DIM + t] * Q[i * DIM + t]);
  return a;
}

static void test_results(void) {
  uint16_t wb[ROWS * DIM], wh[ROWS * DIM];
  int8_t w8[ROWS * DIM];
  float sc[ROWS], wbf[ROWS * DIM], whf[ROWS * DIM], w8f[ROWS * DIM];
  EXPECT_OK(lshk_convert(LSHK_STORAGE_F32, W, ROWS * DIM, LSHK_STORAGE_BF16, wb));
  EXPECT_OK(lshk_convert(LSHK_STORAGE_F32, W, ROWS * DIM, LSHK_STORAGE_F16, wh));
  EXPECT_OK(lshk_convert(LSHK_STORAGE_BF16, wb, ROWS * DIM, LSHK_STORAGE_F32, wbf));
  EXPECT_OK(lshk_convert(LSHK_STORAGE_F16, wh, ROWS * DIM, LSHK_STORAGE_F32, whf));
  EXPECT_OK(lshk_quantize_rows_i8(W, ROWS, DIM, DIM, w8, DIM, sc));
  for (int r = 0; r < ROWS; r++)
    for (int t = 0; t < DIM; t++) w8f[r * DIM + t] = sc[r] * (float)w8[r * DIM + t];
  for (lshk_isa isa = LSHK_ISA_SCALAR; isa <= LSHK_ISA_AVX512; isa++) {
    if (isa > lshk_isa_detected()) {
      printf("skipped: %s tier (CPU lacks it)\n", lshk_isa_name(isa));
      continue;
    }
    float out[5][NOUT];
    const lshk_weights_view v[5] = {
        view(LSHK_STORAGE_F32, W, NULL, BIAS, ROWS, DIM, DIM),
        view(LSHK_STORAGE_BF16, wb, NULL, BIAS, ROWS, DIM, DIM),
        view(LSHK_STORAGE_F16, wh, NULL, BIAS, ROWS, DIM, DIM),
        view(LSHK_STORAGE_I8, w8, sc, BIAS, ROWS, DIM, DIM),
        view(LSHK_STORAGE_BORROWED_F32, W, NULL, BIAS, ROWS, DIM, DIM)};
    for (int d = 0; d < 5; d++)
      EXPECT_OK(lshk_gathered_matmul_isa(isa, &v[d], Q, NQ, DIM, IDS, OFFS, out[d], NOUT));
    /* BORROWED_F32 names the same float rows as F32: the same bits */
    CHECK(memcmp(out[0], out[4], sizeof out[0]) == 0);
    const float *stored[4] = {W, wbf, whf, w8f};
    for (int d = 0; d < 4; d++) {
      for (int i = 0; i < NQ; i++)
        for (size_t j = OFFS[i]; j < OFFS[i + 1]; j++) {
          double s = BIAS[IDS[j]];
          for (int t = 0; t < DIM; t++)
            s += (double)stored[d][IDS[j] * DIM + t] * Q[i * DIM + t];
          CHECK(close_to(out[d][j], s, mag(i, IDS[j], stored[d])));
        }
    }
  }
  /* Active-tier entry points agree with the reference too. */
  float out[NOUT];
  lshk_weights_view v = view(LSHK_STORAGE_F32, W, NULL, NULL, ROWS, DIM, DIM);
  EXPECT_OK(lshk_gathered_matmul(&v, Q, NQ, DIM, IDS, OFFS, out, NOUT));
  for (int i = 0; i < NQ; i++)
    for (size_t j = OFFS[i]; j < OFFS[i + 1]; j++)
      CHECK(close_to(out[j], ref(i, IDS[j], 0), mag(i, IDS[j], W)));
  /* A strided W (every other row of a wider matrix) gives the same. */
  {
    static float wide[ROWS * 2 * DIM];
    float out2[NOUT];
    memset(wide, 0, sizeof wide);
    for (int r = 0; r < ROWS; r++) memcpy(&wide[r * 2 * DIM], &W[r * DIM], DIM * sizeof(float));
    v = view(LSHK_STORAGE_F32, wide, NULL, NULL, ROWS, DIM, 2 * DIM);
    EXPECT_OK(lshk_gathered_matmul(&v, Q, NQ, DIM, IDS, OFFS, out2, NOUT));
    for (int i = 0; i < NQ; i++)
      for (size_t j = OFFS[i]; j < OFFS[i + 1]; j++)
        CHECK(close_to(out2[j], ref(i, IDS[j], 0), mag(i, IDS[j], W)));
  }
  /* Empty problem: NULL everywhere with zero lengths, offsets = {0}. */
  const size_t zero = 0;
  v = view(LSHK_STORAGE_F32, NULL, NULL, NULL, 0, DIM, DIM);
  EXPECT_OK(lshk_gathered_matmul(&v, NULL, 0, DIM, NULL, &zero, NULL, 0));

  /* Conversions of known values: 1.5 and -2 are exact in both 16-bit
   * types; 1 + 2^-9 rounds to even (1.0) in bf16 (7 fraction bits) and is
   * exact in f16 (10). */
  {
    const float x[3] = {1.5f, -2.0f, 1.0f + 0x1p-9f};
    uint16_t hb[3], hh[3];
    float back[3];
    EXPECT_OK(lshk_convert(LSHK_STORAGE_F32, x, 3, LSHK_STORAGE_BF16, hb));
    EXPECT_OK(lshk_convert(LSHK_STORAGE_F32, x, 3, LSHK_STORAGE_F16, hh));
    CHECK(hb[0] == 0x3FC0 && hb[1] == 0xC000 && hb[2] == 0x3F80);
    CHECK(hh[0] == 0x3E00 && hh[1] == 0xC000 && hh[2] == 0x3C02);
    EXPECT_OK(lshk_convert(LSHK_STORAGE_BF16, hb, 3, LSHK_STORAGE_F32, back));
    CHECK(back[0] == 1.5f && back[1] == -2.0f && back[2] == 1.0f);
    EXPECT_OK(lshk_convert(LSHK_STORAGE_F16, hh, 3, LSHK_STORAGE_F32, back));
    CHECK(back[0] == 1.5f && back[1] == -2.0f && back[2] == 1.0f + 0x1p-9f);
  }
}

static void test_bad_inputs(void) {
  float out[NOUT];
  lshk_fill_canary(out, sizeof out);
  uint32_t bad_ids[NOUT] = {6, 0, 3, 7, 1, 5};
  const lshk_weights_view v = view(LSHK_STORAGE_F32, W, NULL, BIAS, ROWS, DIM, DIM);
  lshk_weights_view bv;
  EXPECT_STATUS(lshk_gathered_matmul(&v, Q, NQ, DIM, bad_ids, OFFS, out, NOUT),
                LSHK_STATUS_INDEX_OUT_OF_RANGE);
  char msg[256];
  lshk_last_error_message(msg, sizeof msg);
  CHECK(strstr(msg, "ids[3]") != NULL);
  size_t offs_dec[NQ + 1] = {0, 5, 4};
  size_t offs_start[NQ + 1] = {1, 4, 6};
  size_t offs_end[NQ + 1] = {0, 4, 5};
  EXPECT_STATUS(lshk_gathered_matmul(&v, Q, NQ, DIM, IDS, offs_dec, out, NOUT),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_gathered_matmul(&v, Q, NQ, DIM, IDS, offs_start, out, NOUT),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_gathered_matmul(&v, Q, NQ, DIM, IDS, offs_end, out, NOUT),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_gathered_matmul(NULL, Q, NQ, DIM, IDS, OFFS, out, NOUT),
                LSHK_STATUS_NULL_POINTER); /* the view */
  bv = v;
  bv.w = NULL;
  EXPECT_STATUS(lshk_gathered_matmul(&bv, Q, NQ, DIM, IDS, OFFS, out, NOUT),
                LSHK_STATUS_NULL_POINTER); /* the view's rows */
  EXPECT_STATUS(lshk_gathered_matmul(&v, NULL, NQ, DIM, IDS, OFFS, out, NOUT),
                LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_gathered_matmul(&v, Q, NQ, DIM, NULL, OFFS, out, NOUT),
                LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_gathered_matmul(&v, Q, NQ, DIM, IDS, NULL, out, NOUT),
                LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_gathered_matmul(&v, Q, NQ, DIM, IDS, OFFS, NULL, NOUT),
                LSHK_STATUS_NULL_POINTER);
  bv = v;
  bv.w_stride = DIM - 1;
  EXPECT_STATUS(lshk_gathered_matmul(&bv, Q, NQ, DIM, IDS, OFFS, out, NOUT),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_gathered_matmul(&v, Q, NQ, DIM - 1, IDS, OFFS, out, NOUT),
                LSHK_STATUS_INVALID_ARGUMENT);
  bv = v;
  bv.dim = 0;
  EXPECT_STATUS(lshk_gathered_matmul(&bv, Q, NQ, DIM, IDS, OFFS, out, NOUT),
                LSHK_STATUS_INVALID_ARGUMENT);
  bv = v;
  bv.rows = SIZE_MAX;
  bv.w_stride = SIZE_MAX / 2;
  EXPECT_STATUS(lshk_gathered_matmul(&bv, Q, NQ, DIM, IDS, OFFS, out, NOUT),
                LSHK_STATUS_SIZE_OVERFLOW);
  bv = v;
  bv.w = (const char *)W + 1;
  bv.rows = ROWS - 1;
  EXPECT_STATUS(lshk_gathered_matmul(&bv, Q, NQ, DIM, IDS, OFFS, out, NOUT),
                LSHK_STATUS_INVALID_ARGUMENT); /* misaligned */
  EXPECT_STATUS(lshk_gathered_matmul(&v, Q, NQ, DIM, IDS, OFFS, W, NOUT),
                LSHK_STATUS_INVALID_ARGUMENT); /* out overlaps w */
  bv = v;
  bv.struct_size = 4;
  EXPECT_STATUS(lshk_gathered_matmul(&bv, Q, NQ, DIM, IDS, OFFS, out, NOUT),
                LSHK_STATUS_INVALID_ARGUMENT); /* struct_size too small */
  bv = v;
  bv.storage = 5;
  EXPECT_STATUS(lshk_gathered_matmul(&bv, Q, NQ, DIM, IDS, OFFS, out, NOUT),
                LSHK_STATUS_INVALID_ARGUMENT); /* not an LSHK_STORAGE_* */
  bv = v;
  bv.scales = BIAS;
  EXPECT_STATUS(lshk_gathered_matmul(&bv, Q, NQ, DIM, IDS, OFFS, out, NOUT),
                LSHK_STATUS_INVALID_ARGUMENT); /* scales without I8 */
  EXPECT_STATUS(lshk_gathered_matmul_isa(7, &v, Q, NQ, DIM, IDS, OFFS, out, NOUT),
                LSHK_STATUS_INVALID_ARGUMENT);
  if (lshk_isa_detected() < LSHK_ISA_AVX512)
    EXPECT_STATUS(lshk_gathered_matmul_isa(LSHK_ISA_AVX512, &v, Q, NQ, DIM, IDS, OFFS, out, NOUT),
                  LSHK_STATUS_UNSUPPORTED_ISA);
  bv = view(LSHK_STORAGE_I8, W, NULL, BIAS, ROWS, DIM, DIM);
  EXPECT_STATUS(lshk_gathered_matmul(&bv, Q, NQ, DIM, IDS, OFFS, out, NOUT),
                LSHK_STATUS_NULL_POINTER); /* scales */
  CHECK(lshk_canary_intact(out, sizeof out));

  /* Conversions and quantisation. */
  uint16_t h[4];
  int8_t b[DIM];
  float sc[1];
  lshk_fill_canary(h, sizeof h);
  EXPECT_STATUS(lshk_convert(LSHK_STORAGE_F32, NULL, 4, LSHK_STORAGE_BF16, h), LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_convert(LSHK_STORAGE_F32, W, 4, LSHK_STORAGE_F16, NULL), LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_convert(LSHK_STORAGE_F32, W, 4, LSHK_STORAGE_F16, W),
                LSHK_STATUS_INVALID_ARGUMENT); /* overlap */
  /* only F32 <-> BF16 and F32 <-> F16 */
  EXPECT_STATUS(lshk_convert(LSHK_STORAGE_BF16, W, 4, LSHK_STORAGE_F16, h), LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_convert(LSHK_STORAGE_F32, W, 4, LSHK_STORAGE_I8, h), LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_convert(LSHK_STORAGE_F32, W, 4, 9, h), LSHK_STATUS_INVALID_ARGUMENT);
  CHECK(lshk_canary_intact(h, sizeof h));
  EXPECT_OK(lshk_convert(LSHK_STORAGE_F32, NULL, 0, LSHK_STORAGE_BF16, NULL));
  float nanrow[DIM] = {0};
  nanrow[4] = NAN;
  lshk_fill_canary(b, sizeof b);
  lshk_fill_canary(sc, sizeof sc);
  EXPECT_STATUS(lshk_quantize_rows_i8(nanrow, 1, DIM, DIM, b, DIM, sc), LSHK_STATUS_NON_FINITE);
  EXPECT_STATUS(lshk_quantize_rows_i8(W, 1, DIM, DIM, b, DIM - 1, sc), LSHK_STATUS_INVALID_ARGUMENT);
  CHECK(lshk_canary_intact(b, sizeof b) && lshk_canary_intact(sc, sizeof sc));

  /* Top-k and softmax. */
  const float s[5] = {1.0f, NAN, 3.0f, 3.0f, -2.0f};
  const uint32_t ids[5] = {9, 8, 7, 2, 1};
  const size_t so[3] = {0, 3, 5};
  uint32_t oi[6];
  float os[6];
  EXPECT_OK(lshk_topk(s, ids, so, 2, 3, oi, os));
  CHECK(oi[0] == 7 && os[0] == 3.0f && oi[1] == 9 && os[1] == 1.0f);
  CHECK(oi[2] == UINT32_MAX && os[2] == -INFINITY); /* NaN never selected */
  CHECK(oi[3] == 2 && oi[4] == 1 && oi[5] == UINT32_MAX);
  EXPECT_OK(lshk_topk(s, NULL, so, 2, 1, oi, os));
  CHECK(oi[0] == 2 && oi[1] == 0); /* positions within the segment */
  EXPECT_OK(lshk_topk(s, ids, so, 2, 0, NULL, NULL));
  lshk_fill_canary(oi, sizeof oi);
  size_t bad_so[3] = {0, 4, 3};
  EXPECT_STATUS(lshk_topk(s, ids, bad_so, 2, 3, oi, os), LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_topk(s, ids, so, 2, 3, NULL, os), LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_topk(s, ids, NULL, 2, 3, oi, os), LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_topk(s, ids, so, SIZE_MAX, 3, oi, os), LSHK_STATUS_SIZE_OVERFLOW);
  CHECK(lshk_canary_intact(oi, sizeof oi));

  float p[5], lse[2];
  const float x[5] = {0.0f, 1.0f, 2.0f, 1000.0f, 1000.0f};
  EXPECT_OK(lshk_softmax(x, so, 2, p, lse));
  CHECK(absd(p[3] - 0.5) < 1e-6 && absd(p[4] - 0.5) < 1e-6);
  CHECK(absd(p[0] + p[1] + p[2] - 1.0) < 1e-6 && p[2] > p[1] && p[1] > p[0]);
  CHECK(absd(lse[1] - (1000.0 + 0.69314718055994531)) < 1e-3);
  float inplace[5];
  memcpy(inplace, x, sizeof x);
  EXPECT_OK(lshk_softmax(inplace, so, 2, inplace, NULL));
  CHECK(memcmp(inplace, p, sizeof p) == 0);
  lshk_fill_canary(p, sizeof p);
  EXPECT_STATUS(lshk_softmax(x, bad_so, 2, p, NULL), LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_softmax(inplace, so, 2, inplace + 1, NULL), LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_softmax(NULL, so, 2, p, NULL), LSHK_STATUS_NULL_POINTER);
  CHECK(lshk_canary_intact(p, sizeof p));
}

int main(void) {
  uint64_t z = 12345;
  for (int i = 0; i < ROWS * DIM; i++) {
    z = z * 6364136223846793005ULL + 1442695040888963407ULL;
    W[i] = (float)((double)(z >> 40) / (double)(1 << 24) - 0.5);
  }
  for (int i = 0; i < NQ * DIM; i++) Q[i] = (float)(i % 7) * 0.25f - 0.75f;
  for (int i = 0; i < ROWS; i++) BIAS[i] = (float)i * 0.125f;
  test_results();
  test_bad_inputs();
  return lshk_test_summary("matmul");
}
