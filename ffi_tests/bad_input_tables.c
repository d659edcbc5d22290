/* Bad-input matrix (issue 8), LSH tables: lshk_tables_* and
 * lshk_gather_params_default / lshk_label_params_default. See bad_input.h
 * for what a case asserts.
 *
 * Functions covered here:
 *   lshk_gather_params_default lshk_label_params_default lshk_tables_build
 *   lshk_tables_free lshk_tables_shape lshk_tables_memory_bytes
 *   lshk_tables_stats lshk_tables_update lshk_tables_gather
 *   lshk_tables_gather_isa lshk_tables_add_labels */
#include "bad_input.h"

#define FX bi_fx()
#define TL BI_FX_L
#define TNR BI_FX_ROWS
#define GK 4 /* bits per table for multi-probing */

/* ---- lshk_tables_build ---------------------------------------------------- */
typedef struct {
  const uint32_t *codes;
  size_t n;
  uint32_t l, range_bits, bucket_cap;
  uint64_t seed;
  uint32_t threads;
  lshk_tables *outv;
  lshk_tables **out;
} bi_args_lshk_tables_build;
static void bi_init_lshk_tables_build(bi_args_lshk_tables_build *a,
                                      bi_outs *o) {
  a->codes = FX->codes;
  a->n = TNR;
  a->l = TL;
  a->range_bits = 4;
  a->bucket_cap = 0;
  a->seed = 5;
  a->threads = 1;
  a->out = &a->outv;
  bi_out(o, &a->outv, sizeof a->outv);
}
static lshk_status bi_call_lshk_tables_build(bi_args_lshk_tables_build *a) {
  lshk_tables *before = a->outv;
  lshk_status s = lshk_tables_build(a->codes, a->n, a->l, a->range_bits,
                                    a->bucket_cap, a->seed, a->threads, a->out);
  if (s == LSHK_STATUS_OK && a->out != NULL && *a->out != before)
    lshk_tables_free(*a->out);
  return s;
}

/* ---- lshk_tables_free ---------------------------------------------------- */
typedef struct {
  lshk_tables *t;
} bi_args_lshk_tables_free;
static void bi_init_lshk_tables_free(bi_args_lshk_tables_free *a, bi_outs *o) {
  (void)o;
  a->t = NULL;
}
static lshk_status bi_call_lshk_tables_free(bi_args_lshk_tables_free *a) {
  return lshk_tables_free(a->t);
}

/* ---- lshk_tables_shape ---------------------------------------------------- */
typedef struct {
  const lshk_tables *t;
  size_t nv[2];
  uint32_t v[2];
  size_t *n;
  uint32_t *l, *range_bits;
} bi_args_lshk_tables_shape;
static void bi_init_lshk_tables_shape(bi_args_lshk_tables_shape *a,
                                      bi_outs *o) {
  a->t = FX->tb;
  a->n = a->nv;
  a->l = &a->v[0];
  a->range_bits = &a->v[1];
  bi_out(o, a->nv, sizeof a->nv);
  bi_out(o, a->v, sizeof a->v);
}
static lshk_status bi_call_lshk_tables_shape(bi_args_lshk_tables_shape *a) {
  return lshk_tables_shape(a->t, a->n, a->l, a->range_bits);
}

/* ---- lshk_tables_memory_bytes ------------------------------------------- */
typedef struct {
  const lshk_tables *t;
  size_t v;
  size_t *out;
} bi_args_lshk_tables_memory_bytes;
static void bi_init_lshk_tables_memory_bytes(bi_args_lshk_tables_memory_bytes *a,
                                             bi_outs *o) {
  a->t = FX->tb;
  a->out = &a->v;
  bi_out(o, &a->v, sizeof a->v);
}
static lshk_status bi_call_lshk_tables_memory_bytes(
    bi_args_lshk_tables_memory_bytes *a) {
  return lshk_tables_memory_bytes(a->t, a->out);
}

/* ---- lshk_tables_stats ---------------------------------------------------- */
typedef struct {
  const lshk_tables *t;
  lshk_table_stats ob[TL + 1];
  lshk_table_stats *out;
  size_t out_len;
} bi_args_lshk_tables_stats;
static void bi_init_lshk_tables_stats(bi_args_lshk_tables_stats *a,
                                      bi_outs *o) {
  a->t = FX->tb;
  a->out = a->ob;
  a->out_len = TL;
  bi_out(o, a->ob, sizeof a->ob);
}
static lshk_status bi_call_lshk_tables_stats(bi_args_lshk_tables_stats *a) {
  return lshk_tables_stats(a->t, a->out, a->out_len);
}

/* ---- lshk_tables_update --------------------------------------------------- */
typedef struct {
  lshk_tables *t;
  uint32_t iv[3];
  uint32_t cv[3 * TL];
  const uint32_t *ids;
  const uint32_t *new_codes;
  size_t count;
} bi_args_lshk_tables_update;
/* The valid call moves rows 0, 17 and 39 to their current codes: a no-op
 * for the tables' content, so FX->tb stays as built. */
static void bi_init_lshk_tables_update(bi_args_lshk_tables_update *a,
                                       bi_outs *o) {
  static const uint32_t rows[3] = {0, 17, TNR - 1};
  (void)o;
  for (int j = 0; j < 3; j++) {
    a->iv[j] = rows[j];
    for (int l = 0; l < TL; l++) a->cv[j * TL + l] = FX->codes[rows[j] * TL + l];
  }
  a->t = FX->tb;
  a->ids = a->iv;
  a->new_codes = a->cv;
  a->count = 3;
}
static lshk_status bi_call_lshk_tables_update(bi_args_lshk_tables_update *a) {
  return lshk_tables_update(a->t, a->ids, a->new_codes, a->count);
}

/* ---- lshk_tables_gather (+ _isa) ------------------------------------------ */
#define GQ 2
typedef struct {
  lshk_isa isa;
  const lshk_tables *t;
  uint32_t cv[GQ * TL];
  lshk_gather_params gp;
  struct {
    lshk_gather_params p;
    unsigned char tail[32];
  } big;
  float pv[GQ * TL * GK];
  size_t fov[GQ + 1];
  uint32_t fiv[3];
  uint32_t ib[GQ * TNR + 8];
  size_t ob[GQ + 2];
  uint32_t cb[GQ * TNR + 8];
  size_t nb;
  const uint32_t *codes;
  size_t q;
  const lshk_gather_params *params;
  const float *projections;
  size_t projections_len;
  const size_t *forced_offsets;
  const uint32_t *forced_ids;
  size_t forced_ids_len;
  uint32_t *ids;
  size_t ids_len;
  size_t *offsets;
  uint32_t *counts;
  size_t *needed;
} bi_gather;
static void gather_init(bi_gather *a, bi_outs *o) {
  for (int i = 0; i < GQ * TL; i++) a->cv[i] = FX->codes[i + 5 * TL];
  for (int i = 0; i < GQ * TL * GK; i++) a->pv[i] = (float)(i % 7) - 3.5f;
  a->gp = lshk_gather_params_default();
  a->gp.probes = 2;
  a->gp.bits_per_table = GK;
  a->big.p = a->gp;
  a->big.p.struct_size = (uint32_t)sizeof a->big;
  memset(a->big.tail, 0x77, sizeof a->big.tail);
  a->fov[0] = 0;
  a->fov[1] = 1;
  a->fov[2] = 3;
  a->fiv[0] = 3;
  a->fiv[1] = 11;
  a->fiv[2] = TNR - 1;
  a->isa = LSHK_ISA_SCALAR;
  a->t = FX->tb;
  a->codes = a->cv;
  a->q = GQ;
  a->params = &a->gp;
  a->projections = a->pv;
  a->projections_len = GQ * TL * GK;
  a->forced_offsets = a->fov;
  a->forced_ids = a->fiv;
  a->forced_ids_len = 3;
  a->ids = a->ib;
  a->ids_len = GQ * TNR;
  a->offsets = a->ob;
  a->counts = a->cb;
  a->needed = &a->nb;
  bi_out(o, a->ib, sizeof a->ib);
  bi_out(o, a->ob, sizeof a->ob);
  bi_out(o, a->cb, sizeof a->cb);
  bi_out(o, &a->nb, sizeof a->nb); /* region 3: *needed */
}
typedef bi_gather bi_args_lshk_tables_gather;
typedef bi_gather bi_args_lshk_tables_gather_isa;
#define bi_init_lshk_tables_gather gather_init
#define bi_init_lshk_tables_gather_isa gather_init
static lshk_status bi_call_lshk_tables_gather(bi_gather *a) {
  return lshk_tables_gather(a->t, a->codes, a->q, a->params, a->projections,
                            a->projections_len, a->forced_offsets,
                            a->forced_ids, a->forced_ids_len, a->ids,
                            a->ids_len, a->offsets, a->counts, a->needed);
}
static lshk_status bi_call_lshk_tables_gather_isa(bi_gather *a) {
  return lshk_tables_gather_isa(a->isa, a->t, a->codes, a->q, a->params,
                                a->projections, a->projections_len,
                                a->forced_offsets, a->forced_ids,
                                a->forced_ids_len, a->ids, a->ids_len,
                                a->offsets, a->counts, a->needed);
}
static size_t gather_need; /* ids the valid call gathers */
#define GATHER_CASES(FN)                                                       \
  do {                                                                         \
    BI_BASELINE(FN);                                                           \
    BI_TABLES_CASES(FN, t, const lshk_tables);                                 \
    BI_ACCEPT(FN, a.t = FX->tb_borrowed);                                      \
    BI_ACCEPT(FN, a.params = &a.big.p);                                        \
    BI_ACCEPT(FN, a.params = NULL);                                            \
    BI_ACCEPT(FN, a.counts = NULL);                                            \
    BI_ACCEPT(FN, a.forced_offsets = NULL; a.forced_ids = NULL;                \
              a.forced_ids_len = 0);                                           \
    BI_ACCEPT(FN, a.gp.min_count = UINT32_MAX; a.gp.max_candidates = 1);       \
    BI_ACCEPT(FN, a.gp.probes = 0; a.pv[0] = NAN); /* unused projections */   \
    BI_ACCEPT(FN, a.q = 0);                                                    \
    /* outputs overlapping an input or each other */                           \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.ids = a.cv + 1);               \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.ids = a.fiv);                  \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.counts = a.ib + 2);            \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.offsets = a.fov);              \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.needed = a.ob + 1);            \
    BI_ACCEPT(FN, a.ids_len = SIZE_MAX / 8);                                   \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.codes = NULL);                     \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.ids = NULL);                       \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.offsets = NULL);                   \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.needed = NULL);                    \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.forced_ids = NULL);                \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.forced_offsets = NULL);            \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.projections = NULL);               \
    BI_CASE(FN, LSHK_STATUS_BUFFER_TOO_SMALL, a.projections = NULL;            \
            a.projections_len = 0);                                            \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.gp.struct_size = 0);           \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.gp.struct_size = (uint32_t)sizeof(lshk_gather_params) - 1);      \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.params = BI_MISALIGN(const lshk_gather_params, &a.gp));          \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.gp.bits_per_table = 0);        \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.gp.bits_per_table = 33);       \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.gp.probes = 1u << GK);         \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.gp.probes = 4097;              \
            a.gp.bits_per_table = 32);                                         \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.gp.probes = UINT32_MAX);       \
    BI_CASE(FN, LSHK_STATUS_BUFFER_TOO_SMALL,                                  \
            a.projections_len = GQ * TL * GK - 1);                             \
    BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.pv[GQ * TL * GK - 1] = NAN);         \
    BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.pv[0] = -INFINITY);                  \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.fov[0] = 1);                   \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.fov[1] = 3; a.fov[2] = 2);     \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.fov[2] = 4);                   \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.forced_ids_len = 2);           \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.fov[2] = SIZE_MAX);            \
    BI_CASE(FN, LSHK_STATUS_INDEX_OUT_OF_RANGE, a.fiv[2] = TNR);               \
    BI_CASE(FN, LSHK_STATUS_INDEX_OUT_OF_RANGE, a.fiv[0] = UINT32_MAX);        \
    BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.q = SIZE_MAX);                    \
    BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.q = SIZE_MAX / 2);                \
    BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.ids_len = SIZE_MAX);              \
    BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.projections_len = SIZE_MAX);      \
    BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.forced_ids_len = SIZE_MAX);       \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.codes = BI_MISALIGN(const uint32_t, a.cv));                      \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.projections = BI_MISALIGN(const float, a.pv));                   \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.forced_offsets = BI_MISALIGN(const size_t, a.fov));              \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.forced_ids = BI_MISALIGN(const uint32_t, a.fiv));                \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.ids = BI_MISALIGN(uint32_t, a.ib));                              \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.offsets = BI_MISALIGN(size_t, a.ob));                            \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.counts = BI_MISALIGN(uint32_t, a.cb));                           \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.needed = BI_MISALIGN(size_t, &a.nb));                            \
    /* one element short: BUFFER_TOO_SMALL, and only *needed is written */    \
    BI_CASE(FN, LSHK_STATUS_BUFFER_TOO_SMALL, a.ids_len = gather_need - 1;     \
            o_.n = 3);                                                         \
    BI_CASE(FN, LSHK_STATUS_BUFFER_TOO_SMALL, a.ids_len = 0; o_.n = 3);        \
    BI_CASE(FN, LSHK_STATUS_BUFFER_TOO_SMALL, a.ids_len = 0; a.ids = NULL;     \
            a.counts = NULL; o_.n = 3);                                        \
  } while (0)
#define BI_ISA_CASES(FN)                                                       \
  do {                                                                         \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.isa = 4);                      \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.isa = UINT32_MAX);             \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.isa = 4; a.t = NULL);          \
    BI_CASE_NO_AVX512(FN, LSHK_STATUS_UNSUPPORTED_ISA, a.isa = LSHK_ISA_AVX512); \
  } while (0)

/* ---- lshk_tables_add_labels ------------------------------------------------ */
#define LQ 3
typedef struct {
  lshk_tables *t;
  uint32_t cv[LQ * TL];
  size_t lo[LQ + 1];
  uint32_t lv[5];
  lshk_label_params lp;
  struct {
    lshk_label_params p;
    unsigned char tail[24];
  } big;
  const uint32_t *codes;
  size_t n;
  const size_t *label_offsets;
  const uint32_t *labels;
  const lshk_label_params *p;
} bi_args_lshk_tables_add_labels;
/* The valid call targets FX->tb; it is only made on pool tables (an
 * accepted call freezes its tables). */
static void bi_init_lshk_tables_add_labels(bi_args_lshk_tables_add_labels *a,
                                           bi_outs *o) {
  static const uint32_t labs[5] = {2, 9, 9, 30, TNR - 1};
  (void)o;
  for (int i = 0; i < LQ * TL; i++) a->cv[i] = FX->codes[i + 20 * TL];
  a->lo[0] = 0;
  a->lo[1] = 2;
  a->lo[2] = 2;
  a->lo[3] = 5;
  memcpy(a->lv, labs, sizeof labs);
  a->lp = lshk_label_params_default();
  a->big.p = a->lp;
  a->big.p.struct_size = (uint32_t)sizeof a->big;
  memset(a->big.tail, 0x33, sizeof a->big.tail);
  a->t = FX->tb;
  a->codes = a->cv;
  a->n = LQ;
  a->label_offsets = a->lo;
  a->labels = a->lv;
  a->p = &a->lp;
}
static lshk_status bi_call_lshk_tables_add_labels(
    bi_args_lshk_tables_add_labels *a) {
  return lshk_tables_add_labels(a->t, a->codes, a->n, a->label_offsets,
                                a->labels, a->p);
}

/* A fingerprint of FX->tb (a gather of every row's codes), to show that
 * refused updates and label additions left the tables unchanged. */
static uint64_t tables_fingerprint(const lshk_tables *t) {
  static uint32_t ids[TNR * TNR];
  static size_t offs[TNR + 1];
  size_t need = 0;
  uint64_t h = 1469598103934665603ull;
  if (lshk_tables_gather(t, FX->codes, TNR, NULL, NULL, 0, NULL, NULL, 0, ids,
                         TNR * TNR, offs, NULL, &need) != LSHK_STATUS_OK)
    return 0;
  for (size_t i = 0; i < need; i++) h = (h ^ ids[i]) * 1099511628211ull;
  for (size_t i = 0; i <= TNR; i++) h = (h ^ offs[i]) * 1099511628211ull;
  return h;
}

int main(void) {
  uint64_t fp;
  bi_fx_setup();
  fp = tables_fingerprint(FX->tb);

  /* parameter defaults: functions without arguments */
  {
    lshk_gather_params g = lshk_gather_params_default();
    lshk_label_params l = lshk_label_params_default();
    BI_EXPECT(lshk_gather_params_default,
              g.struct_size == sizeof g && g.min_count == 1 &&
                  g.max_candidates == 0 && g.probes == 0 &&
                  g.bits_per_table == 0);
    BI_EXPECT(lshk_label_params_default,
              l.struct_size == sizeof l && l.label_cap == 64 &&
                  l.policy == LSHK_LABEL_POLICY_BESIDE);
  }

#define FN lshk_tables_build
  BI_BASELINE(FN);
  BI_ACCEPT(FN, a.threads = UINT32_MAX);
  BI_ACCEPT(FN, a.threads = 0; a.bucket_cap = UINT32_MAX);
  BI_ACCEPT(FN, a.bucket_cap = 1; a.range_bits = 12);
  BI_ACCEPT(FN, a.n = 0; a.codes = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.codes = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out = BI_MISALIGN(lshk_tables *, &a.outv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.codes = BI_MISALIGN(const uint32_t, FX->codes));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.l = 0);
  /* a tiny call asking for more tables than memory (20,000 x 2^24 buckets
   * = 1.3 TB): refused up front, not OOM-killed while filling them */
  BI_CASE(FN, LSHK_STATUS_ALLOCATION_FAILED, a.l = 20000; a.n = 0;
          a.codes = NULL; a.range_bits = 24);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.l = 1u << 31; a.n = 0;
          a.codes = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.range_bits = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.range_bits = 25);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.range_bits = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.n = (size_t)1 << 31; a.l = 1);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.n = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.n = SIZE_MAX / 2);
#undef FN

#define FN lshk_tables_free
  BI_BASELINE(FN);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.t = FX->tb_freed);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.t = (lshk_tables *)FX->tb_dead);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.t = (lshk_tables *)(void *)FX->sh);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE,
          a.t = (lshk_tables *)(void *)FX->idx);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.t = BI_GARBAGE(lshk_tables));
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.t = BI_MISALIGN(lshk_tables, FX->tb));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.t = (lshk_tables *)FX->tb_borrowed);
  BI_ACCEPT(lshk_tables_stats, a.t = FX->tb_borrowed);
#undef FN

#define FN lshk_tables_shape
  BI_BASELINE(FN);
  BI_TABLES_CASES(FN, t, const lshk_tables);
  BI_ACCEPT(FN, a.t = FX->tb_borrowed);
  BI_ACCEPT(FN, a.n = NULL; a.l = NULL; a.range_bits = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.n = BI_MISALIGN(size_t, a.nv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.range_bits = BI_MISALIGN(uint32_t, a.v + 1));
#undef FN

#define FN lshk_tables_memory_bytes
  BI_BASELINE(FN);
  BI_TABLES_CASES(FN, t, const lshk_tables);
  BI_ACCEPT(FN, a.t = FX->tb_borrowed);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.t = NULL; a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out = BI_MISALIGN(size_t, &a.v));
#undef FN

#define FN lshk_tables_stats
  BI_BASELINE(FN);
  BI_TABLES_CASES(FN, t, const lshk_tables);
  BI_ACCEPT(FN, a.out_len = SIZE_MAX); /* only L entries are used */
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_BUFFER_TOO_SMALL, a.out_len = TL - 1);
  BI_CASE(FN, LSHK_STATUS_BUFFER_TOO_SMALL, a.out_len = 0);
  BI_CASE(FN, LSHK_STATUS_BUFFER_TOO_SMALL, a.out_len = 0; a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out = BI_MISALIGN(lshk_table_stats, a.ob));
#undef FN

#define FN lshk_tables_update
  BI_BASELINE(FN);
  BI_TABLES_CASES(FN, t, lshk_tables);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.t = (lshk_tables *)FX->tb_borrowed);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.ids = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.new_codes = NULL);
  BI_CASE(FN, LSHK_STATUS_INDEX_OUT_OF_RANGE, a.iv[2] = TNR);
  BI_CASE(FN, LSHK_STATUS_INDEX_OUT_OF_RANGE, a.iv[1] = UINT32_MAX;
          a.cv[0] ^= 1u);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.count = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.count = SIZE_MAX / 2);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.ids = BI_MISALIGN(const uint32_t, a.iv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.new_codes = BI_MISALIGN(const uint32_t, a.cv));
  BI_CASE(FN, LSHK_STATUS_OK, a.count = 0; a.ids = NULL; a.new_codes = NULL);
#undef FN

#define FN lshk_tables_gather
  {
    bi_gather g;
    bi_outs o;
    memset(&g, 0, sizeof g);
    memset(&o, 0, sizeof o);
    gather_init(&g, &o);
    bi_fx_need(bi_call_lshk_tables_gather(&g), "lshk_tables_gather");
    gather_need = g.nb;
    /* BUFFER_TOO_SMALL reports the size needed */
    g.ids_len = gather_need - 1;
    g.nb = 0;
    BI_EXPECT(lshk_tables_gather,
              bi_call_lshk_tables_gather(&g) == LSHK_STATUS_BUFFER_TOO_SMALL &&
                  g.nb == gather_need);
  }
#undef FN
  GATHER_CASES(lshk_tables_gather);
  GATHER_CASES(lshk_tables_gather_isa);
  BI_ISA_CASES(lshk_tables_gather_isa);

#define FN lshk_tables_add_labels
  BI_ACCEPT(FN, a.t = FX->tb_pool[0]);
  BI_ACCEPT(FN, a.t = FX->tb_pool[1]; a.p = &a.big.p);
  BI_ACCEPT(FN, a.t = FX->tb_pool[2]; a.p = NULL; a.lp.policy = 99);
  BI_ACCEPT(FN, a.t = FX->tb_pool[3]; a.lp.policy = LSHK_LABEL_POLICY_INSTEAD;
            a.lp.label_cap = 0);
  /* label CSR may start past 0 (labels[lo[0]..lo[n]] are used) */
  BI_ACCEPT(FN, a.t = FX->tb_pool[4]; a.lo[0] = 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.t = FX->tb_pool[0]); /* frozen */
  BI_CASE(lshk_tables_update, LSHK_STATUS_INVALID_ARGUMENT,
          a.t = FX->tb_pool[0]); /* frozen */
  BI_TABLES_CASES(FN, t, lshk_tables);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.t = (lshk_tables *)FX->tb_borrowed);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.codes = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.label_offsets = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.labels = NULL);
  BI_CASE(FN, LSHK_STATUS_INDEX_OUT_OF_RANGE, a.lv[4] = TNR);
  BI_CASE(FN, LSHK_STATUS_INDEX_OUT_OF_RANGE, a.lv[0] = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.lo[1] = 3; a.lo[2] = 2);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.lo[3] = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.lp.policy = 2);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.lp.policy = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.lp.struct_size = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.lp.struct_size = (uint32_t)sizeof(lshk_label_params) - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.p = BI_MISALIGN(const lshk_label_params, &a.lp));
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.n = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.n = SIZE_MAX / 2);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.codes = BI_MISALIGN(const uint32_t, a.cv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.label_offsets = BI_MISALIGN(const size_t, a.lo));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.labels = BI_MISALIGN(const uint32_t, a.lv));
#undef FN

  /* Nothing above changed FX->tb: refused updates / label additions and
   * the no-op valid updates leave the same tables (and not frozen). */
  BI_EXPECT(lshk_tables_update, fp != 0 && tables_fingerprint(FX->tb) == fp);
  BI_BASELINE(lshk_tables_update);

  bi_fx_teardown();
  return bi_summary("bad_input_tables");
}
