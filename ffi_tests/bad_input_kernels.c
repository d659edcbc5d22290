/* Bad-input matrix (issue 8), stateless entry points: status/error/version/
 * ISA functions, conversions, int8 quantisation, top-k, softmax and the
 * gathered matmul over a weights view of every storage. See bad_input.h
 * for what a case asserts.
 *
 * Functions covered here (tests/bad_input_coverage.rs checks that every
 * function of include/lshk.h is named in some bad_input_*.c):
 *   lshk_status_name lshk_last_error_message lshk_version lshk_isa_detected
 *   lshk_isa_active lshk_isa_set_max lshk_isa_name lshk_convert
 *   lshk_quantize_rows_i8 lshk_topk lshk_topk_merge lshk_softmax
 *   lshk_gathered_matmul
 *   lshk_gathered_matmul_isa */
#include "bad_input.h"


/* ---- lshk_isa_set_max ------------------------------------------------- */
typedef struct {
  lshk_isa max;
} bi_args_lshk_isa_set_max;
static void bi_init_lshk_isa_set_max(bi_args_lshk_isa_set_max *a,
                                     bi_outs *o) {
  (void)o;
  a->max = LSHK_ISA_AVX512; /* "more than the CPU has" is not an error */
}
static lshk_status bi_call_lshk_isa_set_max(bi_args_lshk_isa_set_max *a) {
  return lshk_isa_set_max(a->max);
}

/* ---- lshk_convert --------------------------------------------------------
 * One argument block for the four pairs; conv_pair picks the pair the next
 * cases start from (the source is a->f or a->h, the destination a->fo or
 * a->ho). */
#define CN 19
typedef struct {
  float f[CN + 1];
  uint16_t h[CN + 1];
  float fo[CN + 1];
  uint16_t ho[CN + 1];
  uint32_t from, to;
  const void *src;
  size_t n;
  void *dst;
} bi_args_lshk_convert;
static const uint32_t conv_pairs[4][2] = {
    {LSHK_STORAGE_F32, LSHK_STORAGE_BF16},
    {LSHK_STORAGE_F32, LSHK_STORAGE_F16},
    {LSHK_STORAGE_BF16, LSHK_STORAGE_F32},
    {LSHK_STORAGE_F16, LSHK_STORAGE_F32}};
static int conv_pair;
static void bi_init_lshk_convert(bi_args_lshk_convert *a, bi_outs *o) {
  int narrow = conv_pairs[conv_pair][0] == LSHK_STORAGE_F32;
  for (int i = 0; i < CN + 1; i++) {
    a->f[i] = (float)i * 0.25f - 2.0f;
    a->h[i] = (uint16_t)(0x3C00 + i);
  }
  a->from = conv_pairs[conv_pair][0];
  a->to = conv_pairs[conv_pair][1];
  a->src = narrow ? (const void *)a->f : (const void *)a->h;
  a->n = CN;
  a->dst = narrow ? (void *)a->ho : (void *)a->fo;
  bi_out(o, a->fo, sizeof a->fo);
  bi_out(o, a->ho, sizeof a->ho);
}
static lshk_status bi_call_lshk_convert(bi_args_lshk_convert *a) {
  return lshk_convert(a->from, a->src, a->n, a->to, a->dst);
}

/* The cases of one pair (the source and destination by the pair's types). */
#define CONV_CASES(PAIR)                                                       \
  do {                                                                         \
    conv_pair = (PAIR);                                                        \
    BI_BASELINE(lshk_convert);                                                 \
    BI_CASE(lshk_convert, LSHK_STATUS_NULL_POINTER, a.src = NULL);             \
    BI_CASE(lshk_convert, LSHK_STATUS_NULL_POINTER, a.dst = NULL);             \
    BI_CASE(lshk_convert, LSHK_STATUS_INVALID_ARGUMENT,                        \
            a.src = (const char *)a.src + 1);                                  \
    BI_CASE(lshk_convert, LSHK_STATUS_INVALID_ARGUMENT,                        \
            a.dst = (char *)a.dst + 1);                                        \
    BI_CASE(lshk_convert, LSHK_STATUS_INVALID_ARGUMENT,                        \
            a.dst = (void *)(uintptr_t)a.src); /* overlap */                   \
    BI_CASE(lshk_convert, LSHK_STATUS_SIZE_OVERFLOW, a.n = SIZE_MAX);          \
    BI_CASE(lshk_convert, LSHK_STATUS_SIZE_OVERFLOW, a.n = SIZE_MAX / 4 + 1);  \
    BI_CASE(lshk_convert, LSHK_STATUS_OK, a.n = 0; a.src = NULL; a.dst = NULL);\
    BI_CASE(lshk_convert, LSHK_STATUS_OK, a.n = 0);                            \
  } while (0)

/* ---- lshk_quantize_rows_i8 -------------------------------------------- */
#define QR 3
#define QD 5
#define QWS 6
#define QOS 7
typedef struct {
  float w[QR * QWS];
  int8_t ob[QR * QOS + 8];
  float sb[QR + 1];
  const float *wp;
  size_t rows, dim, w_stride;
  int8_t *out;
  size_t out_stride;
  float *scales;
} bi_args_lshk_quantize_rows_i8;
static void bi_init_lshk_quantize_rows_i8(bi_args_lshk_quantize_rows_i8 *a,
                                          bi_outs *o) {
  for (int i = 0; i < QR * QWS; i++) a->w[i] = (float)(i % 7) - 3.0f;
  a->wp = a->w;
  a->rows = QR;
  a->dim = QD;
  a->w_stride = QWS;
  a->out = a->ob;
  a->out_stride = QOS;
  a->scales = a->sb;
  bi_out(o, a->ob, sizeof a->ob);
  bi_out(o, a->sb, sizeof a->sb);
}
static lshk_status bi_call_lshk_quantize_rows_i8(
    bi_args_lshk_quantize_rows_i8 *a) {
  return lshk_quantize_rows_i8(a->wp, a->rows, a->dim, a->w_stride, a->out,
                               a->out_stride, a->scales);
}

/* ---- lshk_topk ---------------------------------------------------------- */
#define TK 3
typedef struct {
  float sc[8];
  uint32_t idv[8];
  size_t offv[4];
  uint32_t oib[2 * TK + 2];
  float osb[2 * TK + 2];
  const float *scores;
  const uint32_t *ids;
  const size_t *offsets;
  size_t nq;
  uint32_t k;
  uint32_t *out_ids;
  float *out_scores;
} bi_args_lshk_topk;
static void bi_init_lshk_topk(bi_args_lshk_topk *a, bi_outs *o) {
  for (int i = 0; i < 8; i++) {
    a->sc[i] = (float)((i * 5) % 8);
    a->idv[i] = (uint32_t)(100 + i);
  }
  a->offv[0] = 0;
  a->offv[1] = 3;
  a->offv[2] = 8;
  a->offv[3] = 8;
  a->scores = a->sc;
  a->ids = a->idv;
  a->offsets = a->offv;
  a->nq = 2;
  a->k = TK;
  a->out_ids = a->oib;
  a->out_scores = a->osb;
  bi_out(o, a->oib, sizeof a->oib);
  bi_out(o, a->osb, sizeof a->osb);
}
static lshk_status bi_call_lshk_topk(bi_args_lshk_topk *a) {
  return lshk_topk(a->scores, a->ids, a->offsets, a->nq, a->k, a->out_ids,
                   a->out_scores);
}

/* ---- lshk_topk_merge ---------------------------------------------------- */
#define MK 3
typedef struct {
  uint32_t ida[2 * 2], idb[2 * 3];
  float sca[2 * 2], scb[2 * 3];
  lshk_shard_topk sh[2];
  uint32_t oib[2 * MK];
  float osb[2 * MK];
  const lshk_shard_topk *shards;
  size_t n_shards, nq, k;
  uint32_t *out_ids;
  float *out_scores;
} bi_args_lshk_topk_merge;
static void bi_init_lshk_topk_merge(bi_args_lshk_topk_merge *a, bi_outs *o) {
  for (int i = 0; i < 4; i++) {
    a->ida[i] = (uint32_t)i;
    a->sca[i] = (float)(4 - i);
  }
  for (int i = 0; i < 6; i++) {
    a->idb[i] = (uint32_t)(i % 3);
    a->scb[i] = (float)(i % 4) - 0.5f;
  }
  a->sh[0].ids = a->ida;
  a->sh[0].scores = a->sca;
  a->sh[0].k = 2;
  a->sh[0].first_row = 0;
  a->sh[1].ids = a->idb;
  a->sh[1].scores = a->scb;
  a->sh[1].k = 3;
  a->sh[1].first_row = 100;
  a->shards = a->sh;
  a->n_shards = 2;
  a->nq = 2;
  a->k = MK;
  a->out_ids = a->oib;
  a->out_scores = a->osb;
  bi_out(o, a->oib, sizeof a->oib);
  bi_out(o, a->osb, sizeof a->osb);
}
static lshk_status bi_call_lshk_topk_merge(bi_args_lshk_topk_merge *a) {
  return lshk_topk_merge(a->shards, a->n_shards, a->nq, a->k, a->out_ids,
                         a->out_scores);
}

/* ---- lshk_softmax ------------------------------------------------------- */
typedef struct {
  float sc[8];
  size_t offv[4];
  float ob[10];
  float lb[4];
  const float *scores;
  const size_t *offsets;
  size_t nq;
  float *out;
  float *lse;
} bi_args_lshk_softmax;
static void bi_init_lshk_softmax(bi_args_lshk_softmax *a, bi_outs *o) {
  for (int i = 0; i < 8; i++) a->sc[i] = (float)i * 0.5f;
  a->offv[0] = 0;
  a->offv[1] = 3;
  a->offv[2] = 8;
  a->offv[3] = 8;
  a->scores = a->sc;
  a->offsets = a->offv;
  a->nq = 2;
  a->out = a->ob;
  a->lse = a->lb;
  bi_out(o, a->ob, sizeof a->ob);
  bi_out(o, a->lb, sizeof a->lb);
}
static lshk_status bi_call_lshk_softmax(bi_args_lshk_softmax *a) {
  return lshk_softmax(a->scores, a->offsets, a->nq, a->out, a->lse);
}

/* ---- lshk_gathered_matmul[_isa] ------------------------------------------
 * One argument block: a weights view over the f32, 16-bit or int8 rows
 * (mm_storage picks the storage the next cases start from) and the
 * gathered-matmul arguments. */
#define MR 5
#define MD 6
#define MWS 7
#define MNQ 2
#define MQS 6
#define MOUT 5
typedef struct {
  float wf[MR * MWS];
  uint16_t wh[MR * MWS];
  int8_t wi[MR * MWS];
  float sv[MR];
  float bv[MR];
  float qv[MNQ * MQS];
  uint32_t idv[MOUT];
  size_t offv[MNQ + 1];
  float ob[MOUT + 3];
  lshk_isa isa;
  lshk_weights_view v;
  struct {
    lshk_weights_view v;
    unsigned char tail[24];
  } big; /* a caller with a newer, larger lshk_weights_view */
  const lshk_weights_view *w;
  const float *q;
  size_t nq, q_stride;
  const uint32_t *ids;
  const size_t *offsets;
  float *out;
  size_t out_len;
} bi_mm;
static uint32_t mm_storage;
static void mm_init(bi_mm *a, bi_outs *o) {
  for (int i = 0; i < MR * MWS; i++) {
    a->wf[i] = (float)(i % 5) * 0.5f - 1.0f;
    a->wh[i] = (uint16_t)(0x3C00 + (i % 9));
    a->wi[i] = (int8_t)(i % 11 - 5);
  }
  for (int i = 0; i < MR; i++) {
    a->sv[i] = 0.01f * (float)(i + 1);
    a->bv[i] = 0.5f * (float)i;
  }
  for (int i = 0; i < MNQ * MQS; i++) a->qv[i] = (float)(i % 3) - 1.0f;
  a->idv[0] = 4;
  a->idv[1] = 0;
  a->idv[2] = 2;
  a->idv[3] = 2;
  a->idv[4] = 1;
  a->offv[0] = 0;
  a->offv[1] = 2;
  a->offv[2] = MOUT;
  a->isa = LSHK_ISA_SCALAR;
  a->v.struct_size = (uint32_t)sizeof a->v;
  a->v.storage = mm_storage;
  switch (mm_storage) {
  case LSHK_STORAGE_BF16:
  case LSHK_STORAGE_F16:
    a->v.w = a->wh;
    break;
  case LSHK_STORAGE_I8:
    a->v.w = a->wi;
    a->v.scales = a->sv;
    break;
  default:
    a->v.w = a->wf;
  }
  a->v.bias = a->bv;
  a->v.rows = MR;
  a->v.dim = MD;
  a->v.w_stride = MWS;
  a->big.v = a->v;
  a->big.v.struct_size = (uint32_t)sizeof a->big;
  memset(a->big.tail, 0x5C, sizeof a->big.tail);
  a->w = &a->v;
  a->q = a->qv;
  a->nq = MNQ;
  a->q_stride = MQS;
  a->ids = a->idv;
  a->offsets = a->offv;
  a->out = a->ob;
  a->out_len = MOUT;
  bi_out(o, a->ob, sizeof a->ob);
}
typedef bi_mm bi_args_lshk_gathered_matmul;
typedef bi_mm bi_args_lshk_gathered_matmul_isa;
#define bi_init_lshk_gathered_matmul mm_init
#define bi_init_lshk_gathered_matmul_isa mm_init
static lshk_status bi_call_lshk_gathered_matmul(bi_mm *a) {
  return lshk_gathered_matmul(a->w, a->q, a->nq, a->q_stride, a->ids,
                              a->offsets, a->out, a->out_len);
}
static lshk_status bi_call_lshk_gathered_matmul_isa(bi_mm *a) {
  return lshk_gathered_matmul_isa(a->isa, a->w, a->q, a->nq, a->q_stride,
                                  a->ids, a->offsets, a->out, a->out_len);
}

/* The cases of one storage (the view's pointers of its element type). */
#define MM_CASES(FN, STORAGE)                                                  \
  do {                                                                         \
    mm_storage = (STORAGE);                                                    \
    BI_BASELINE(FN);                                                           \
    BI_ACCEPT(FN, a.w = &a.big.v); /* larger struct_size: tail ignored */      \
    BI_ACCEPT(FN, a.v.bias = NULL);                                            \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.v.w = NULL);                       \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.q = NULL);                         \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.ids = NULL);                       \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.offsets = NULL);                   \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);                       \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.v.dim = 0);                    \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.v.w_stride = MD - 1);          \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.q_stride = MD - 1);            \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.v.w_stride = 0);               \
    BI_CASE(FN, LSHK_STATUS_INDEX_OUT_OF_RANGE, a.idv[3] = MR);                \
    BI_CASE(FN, LSHK_STATUS_INDEX_OUT_OF_RANGE, a.idv[0] = UINT32_MAX);        \
    BI_CASE(FN, LSHK_STATUS_INDEX_OUT_OF_RANGE, a.v.rows = 2);                 \
    BI_CASE(FN, LSHK_STATUS_INDEX_OUT_OF_RANGE, a.v.rows = 0);                 \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.offv[0] = 1);                  \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.offv[1] = 4; a.offv[2] = 3;    \
            a.out_len = 3);                                                    \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.offv[1] = SIZE_MAX);           \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.out_len = MOUT - 1); /* one short: offsets[nq] != out_len */     \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out_len = MOUT + 1);           \
    BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.v.rows = SIZE_MAX);               \
    BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.v.w_stride = SIZE_MAX / 2);       \
    BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.q_stride = SIZE_MAX / 2);         \
    BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.nq = SIZE_MAX);                   \
    BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.out_len = SIZE_MAX;               \
            a.offv[2] = SIZE_MAX);                                             \
    if ((STORAGE) != LSHK_STORAGE_I8) /* int8 has no alignment */              \
      BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                \
              a.v.w = (const char *)a.v.w + 1);                                \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.q = BI_MISALIGN(const float, a.qv));                             \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.v.bias = BI_MISALIGN(const float, a.bv));                        \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.ids = BI_MISALIGN(const uint32_t, a.idv));                       \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.offsets = BI_MISALIGN(const size_t, a.offv));                    \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.out = BI_MISALIGN(float, a.ob));                                 \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.out = (float *)(void *)a.qv); /* overlaps q */                   \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.out = a.bv); /* overlaps bias */                                 \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.out = (float *)(void *)a.idv); /* overlaps ids */                \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.out = (float *)(void *)((char *)(uintptr_t)a.v.w)); /* w */      \
    /* the view itself: NULL, misaligned, too small, a bad storage, scales    \
     * with another storage than I8 */                                        \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.w = NULL);                         \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.w = BI_MISALIGN(const lshk_weights_view, &a.v));                 \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.v.struct_size = 0);            \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.v.struct_size = (uint32_t)sizeof(lshk_weights_view) - 1);        \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.v.storage = 5);                \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.v.storage = UINT32_MAX);       \
    if ((STORAGE) != LSHK_STORAGE_I8)                                          \
      BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.v.scales = a.sv);            \
    BI_CASE(FN, LSHK_STATUS_OK, a.nq = 0; a.out_len = 0; a.ids = NULL;         \
            a.out = NULL);                                                     \
    BI_CASE(FN, LSHK_STATUS_OK, a.offv[1] = 0; a.offv[2] = 0; a.out_len = 0);  \
  } while (0)

/* Extra cases of the _isa variant: bad tier values. */
#define MM_ISA_CASES(STORAGE)                                                  \
  do {                                                                         \
    mm_storage = (STORAGE);                                                    \
    BI_CASE(lshk_gathered_matmul_isa, LSHK_STATUS_INVALID_ARGUMENT,            \
            a.isa = 4);                                                        \
    BI_CASE(lshk_gathered_matmul_isa, LSHK_STATUS_INVALID_ARGUMENT,            \
            a.isa = UINT32_MAX);                                               \
    BI_CASE_NO_AVX512(lshk_gathered_matmul_isa, LSHK_STATUS_UNSUPPORTED_ISA,   \
                      a.isa = LSHK_ISA_AVX512);                                \
  } while (0)
/* I8 only: the scales. */
#define MM_I8_CASES(FN)                                                        \
  do {                                                                         \
    mm_storage = LSHK_STORAGE_I8;                                              \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.v.scales = NULL);                  \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.v.scales = BI_MISALIGN(const float, a.sv));                      \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out = a.sv);                   \
  } while (0)

int main(void) {

  /* ---- functions without arguments or without a status ---- */
  BI_EXPECT(lshk_version, lshk_version() != NULL &&
                              strcmp(lshk_version(), LSHK_VERSION_STRING) == 0);
  BI_EXPECT(lshk_isa_detected, lshk_isa_detected() <= LSHK_ISA_AVX512);
  BI_EXPECT(lshk_isa_active, lshk_isa_active() <= lshk_isa_detected());
  BI_EXPECT(lshk_status_name,
            strcmp(lshk_status_name(14), "LSHK_STATUS_UNKNOWN") == 0);
  BI_EXPECT(lshk_status_name,
            strcmp(lshk_status_name(LSHK_STATUS_UNSUPPORTED),
                   "LSHK_STATUS_UNSUPPORTED") == 0);
  BI_EXPECT(lshk_status_name,
            strcmp(lshk_status_name(UINT32_MAX), "LSHK_STATUS_UNKNOWN") == 0);
  BI_EXPECT(lshk_status_name,
            strcmp(lshk_status_name(LSHK_STATUS_PANIC), "LSHK_STATUS_PANIC") ==
                0);
  BI_EXPECT(lshk_isa_name, strcmp(lshk_isa_name(4), "unknown") == 0);
  BI_EXPECT(lshk_isa_name, strcmp(lshk_isa_name(UINT32_MAX), "unknown") == 0);

  /* lshk_last_error_message: NULL buffer with a length, 1-byte and short
   * buffers (truncated, NUL-terminated, nothing past buf_len written). */
  {
    char buf[64];
    size_t full;
    (void)lshk_isa_set_max(77);
    full = lshk_last_error_message(NULL, 0);
    BI_EXPECT(lshk_last_error_message, full > 8);
    BI_EXPECT(lshk_last_error_message, lshk_last_error_message(NULL, 5) == full);
    lshk_fill_canary(buf, sizeof buf);
    BI_EXPECT(lshk_last_error_message,
              lshk_last_error_message(buf, 1) == full && buf[0] == '\0' &&
                  lshk_canary_intact(buf + 1, sizeof buf - 1));
    lshk_fill_canary(buf, sizeof buf);
    BI_EXPECT(lshk_last_error_message,
              lshk_last_error_message(buf, 6) == full && buf[5] == '\0' &&
                  strlen(buf) == 5 &&
                  lshk_canary_intact(buf + 6, sizeof buf - 6));
    lshk_fill_canary(buf, sizeof buf);
    BI_EXPECT(lshk_last_error_message,
              lshk_last_error_message(buf, 0) == full &&
                  lshk_canary_intact(buf, sizeof buf));
  }

  BI_BASELINE(lshk_isa_set_max);
  BI_CASE(lshk_isa_set_max, LSHK_STATUS_INVALID_ARGUMENT, a.max = 4);
  BI_CASE(lshk_isa_set_max, LSHK_STATUS_INVALID_ARGUMENT, a.max = 0x80000000u);
  BI_CASE(lshk_isa_set_max, LSHK_STATUS_INVALID_ARGUMENT, a.max = UINT32_MAX);
  BI_EXPECT(lshk_isa_set_max, lshk_isa_active() == lshk_isa_detected());

  for (int p = 0; p < 4; p++) CONV_CASES(p);
  /* a pair other than F32 <-> BF16 / F16, refused before the buffers */
  conv_pair = 0;
  BI_CASE(lshk_convert, LSHK_STATUS_INVALID_ARGUMENT, a.to = LSHK_STORAGE_F32);
  BI_CASE(lshk_convert, LSHK_STATUS_INVALID_ARGUMENT, a.from = LSHK_STORAGE_BF16;
          a.to = LSHK_STORAGE_F16);
  BI_CASE(lshk_convert, LSHK_STATUS_INVALID_ARGUMENT, a.from = LSHK_STORAGE_F16;
          a.to = LSHK_STORAGE_BF16);
  BI_CASE(lshk_convert, LSHK_STATUS_INVALID_ARGUMENT, a.from = LSHK_STORAGE_BF16;
          a.to = LSHK_STORAGE_BF16);
  BI_CASE(lshk_convert, LSHK_STATUS_INVALID_ARGUMENT,
          a.from = LSHK_STORAGE_BORROWED_F32);
  BI_CASE(lshk_convert, LSHK_STATUS_INVALID_ARGUMENT, a.to = LSHK_STORAGE_I8);
  BI_CASE(lshk_convert, LSHK_STATUS_INVALID_ARGUMENT, a.from = LSHK_STORAGE_I8;
          a.to = LSHK_STORAGE_F32);
  BI_CASE(lshk_convert, LSHK_STATUS_INVALID_ARGUMENT, a.to = 5);
  BI_CASE(lshk_convert, LSHK_STATUS_INVALID_ARGUMENT, a.from = UINT32_MAX);
  BI_CASE(lshk_convert, LSHK_STATUS_INVALID_ARGUMENT, a.to = UINT32_MAX;
          a.n = 0; a.src = NULL; a.dst = NULL);
  BI_CASE(lshk_convert, LSHK_STATUS_INVALID_ARGUMENT, a.to = LSHK_STORAGE_F32;
          a.src = NULL);

#define FN lshk_quantize_rows_i8
  BI_BASELINE(FN);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.wp = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.scales = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w_stride = QD - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out_stride = QD - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w_stride = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.wp = BI_MISALIGN(const float, a.w));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.scales = BI_MISALIGN(float, a.sb));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out = (int8_t *)(void *)a.w);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.scales = (float *)(void *)a.ob; a.rows = 1);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.w[QWS + 2] = NAN);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.w[2 * QWS + QD - 1] = INFINITY);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.w[0] = -INFINITY);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.rows = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.w_stride = SIZE_MAX / 2);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.out_stride = SIZE_MAX / 2);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.dim = SIZE_MAX; a.w_stride = SIZE_MAX;
          a.out_stride = SIZE_MAX; a.rows = 1);
  BI_CASE(FN, LSHK_STATUS_OK, a.rows = 0);
  BI_CASE(FN, LSHK_STATUS_OK, a.rows = 0; a.wp = NULL; a.out = NULL;
          a.scales = NULL);
#undef FN

#define FN lshk_topk
  BI_BASELINE(FN);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.scores = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.offsets = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out_ids = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out_scores = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.offv[0] = 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.offv[1] = 5; a.offv[2] = 4);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.offv[2] = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.nq = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.nq = SIZE_MAX / 2; a.k = 4);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.scores = BI_MISALIGN(const float, a.sc));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.ids = BI_MISALIGN(const uint32_t, a.idv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.offsets = BI_MISALIGN(const size_t, a.offv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out_ids = BI_MISALIGN(uint32_t, a.oib));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out_scores = BI_MISALIGN(float, a.osb));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out_scores = a.sc);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out_ids = a.idv);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out_ids = (uint32_t *)(void *)a.osb); /* outputs overlap */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out_scores = (float *)(void *)a.offv);
  BI_CASE(FN, LSHK_STATUS_OK, a.k = 0);
  BI_CASE(FN, LSHK_STATUS_OK, a.k = 0; a.out_ids = NULL; a.out_scores = NULL);
  BI_CASE(FN, LSHK_STATUS_OK, a.nq = 0);
#undef FN

#define FN lshk_topk_merge
  BI_BASELINE(FN);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.shards = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.sh[1].ids = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.sh[0].scores = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out_ids = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out_scores = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.sh[1].reserved = 1);
  BI_CASE(FN, LSHK_STATUS_INDEX_OUT_OF_RANGE,
          a.sh[1].first_row = UINT32_MAX - 2);
  BI_CASE(FN, LSHK_STATUS_INDEX_OUT_OF_RANGE, a.ida[3] = UINT32_MAX - 1;
          a.sh[0].first_row = 1);
  BI_ACCEPT(FN, a.ida[3] = UINT32_MAX - 1); /* global UINT32_MAX - 1 */
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.nq = SIZE_MAX / 2);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.sh[0].k = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.k = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.shards = BI_MISALIGN(const lshk_shard_topk, a.sh));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.sh[0].ids = BI_MISALIGN(const uint32_t, a.ida));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.sh[1].scores = BI_MISALIGN(const float, a.scb));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out_ids = BI_MISALIGN(uint32_t, a.oib));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out_scores = a.scb);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out_ids = a.idb);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out_ids = (uint32_t *)(void *)a.sh); /* over the shard array */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out_ids = (uint32_t *)(void *)a.osb); /* outputs overlap */
  BI_CASE(FN, LSHK_STATUS_OK, a.k = 0; a.out_ids = NULL; a.out_scores = NULL);
  BI_ACCEPT(FN, a.n_shards = 0; a.shards = NULL); /* all padding */
  BI_CASE(FN, LSHK_STATUS_OK, a.nq = 0);
  BI_ACCEPT(FN, a.sh[0].k = 0; a.sh[0].ids = NULL; a.sh[0].scores = NULL);
#undef FN

#define FN lshk_softmax
  BI_BASELINE(FN);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.scores = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.offsets = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.offv[0] = 2);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.offv[1] = 6; a.offv[2] = 5);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.offv[2] = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.nq = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.scores = BI_MISALIGN(const float, a.sc));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out = BI_MISALIGN(float, a.ob));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.lse = BI_MISALIGN(float, a.lb));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.offsets = BI_MISALIGN(const size_t, a.offv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out = a.sc + 1); /* partial */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.lse = a.sc);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.lse = a.ob + 6);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out = (float *)(void *)a.offv);
  BI_CASE(FN, LSHK_STATUS_OK, a.nq = 0; a.lse = NULL);
  BI_CASE(FN, LSHK_STATUS_OK, a.nq = 0; a.out = NULL; a.scores = NULL;
          a.lse = NULL);
#undef FN

  {
    static const uint32_t storages[5] = {
        LSHK_STORAGE_BORROWED_F32, LSHK_STORAGE_F32, LSHK_STORAGE_BF16,
        LSHK_STORAGE_F16, LSHK_STORAGE_I8};
    for (int i = 0; i < 5; i++) {
      MM_CASES(lshk_gathered_matmul, storages[i]);
      MM_CASES(lshk_gathered_matmul_isa, storages[i]);
      MM_ISA_CASES(storages[i]);
    }
  }
  MM_I8_CASES(lshk_gathered_matmul);
  MM_I8_CASES(lshk_gathered_matmul_isa);

  return bi_summary("bad_input_kernels");
}
