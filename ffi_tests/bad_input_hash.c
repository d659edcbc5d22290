/* Bad-input matrix (issue 8), hash families: lshk_simhash_* and lshk_dwta_*
 * (and lshk_simhash_train_iul). See bad_input.h for what a case asserts.
 *
 * Functions covered here:
 *   lshk_simhash_new lshk_simhash_from_planes lshk_simhash_free
 *   lshk_simhash_shape lshk_simhash_copy_planes lshk_simhash_hash
 *   lshk_simhash_hash_isa lshk_simhash_project lshk_simhash_project_isa
 *   lshk_simhash_train_iul
 *   lshk_dwta_new lshk_dwta_from_map lshk_dwta_free lshk_dwta_shape
 *   lshk_dwta_copy_map lshk_dwta_hash_dense lshk_dwta_hash_dense_isa
 *   lshk_dwta_hash_sparse lshk_dwta_hash_sparse_isa */
#include "bad_input.h"

#define FX bi_fx()
#define SD BI_FX_DIM
#define SK BI_FX_K
#define SL BI_FX_L
#define SP (SK * SL) /* planes */

/* ---- lshk_simhash_new / lshk_simhash_from_planes ----------------------- */
typedef struct {
  uint32_t dim, k, l, sparsity;
  uint64_t seed;
  lshk_simhash *outv;
  lshk_simhash **out;
} bi_args_lshk_simhash_new;
static void bi_init_lshk_simhash_new(bi_args_lshk_simhash_new *a, bi_outs *o) {
  a->dim = SD;
  a->k = SK;
  a->l = SL;
  a->sparsity = 3;
  a->seed = 9;
  a->out = &a->outv;
  bi_out(o, &a->outv, sizeof a->outv);
}
static lshk_status bi_call_lshk_simhash_new(bi_args_lshk_simhash_new *a) {
  lshk_simhash *before = a->outv;
  lshk_status s =
      lshk_simhash_new(a->dim, a->k, a->l, a->sparsity, a->seed, a->out);
  if (s == LSHK_STATUS_OK && a->out != NULL && *a->out != before)
    lshk_simhash_free(*a->out);
  return s;
}

typedef struct {
  float pv[SP * SD + 1];
  const float *planes;
  uint32_t dim, k, l;
  lshk_simhash *outv;
  lshk_simhash **out;
} bi_args_lshk_simhash_from_planes;
static void bi_init_lshk_simhash_from_planes(bi_args_lshk_simhash_from_planes *a,
                                             bi_outs *o) {
  for (int i = 0; i < SP * SD + 1; i++) a->pv[i] = (float)(i % 7) - 3.0f;
  a->planes = a->pv;
  a->dim = SD;
  a->k = SK;
  a->l = SL;
  a->out = &a->outv;
  bi_out(o, &a->outv, sizeof a->outv);
}
static lshk_status bi_call_lshk_simhash_from_planes(
    bi_args_lshk_simhash_from_planes *a) {
  lshk_simhash *before = a->outv;
  lshk_status s =
      lshk_simhash_from_planes(a->planes, a->dim, a->k, a->l, a->out);
  if (s == LSHK_STATUS_OK && a->out != NULL && *a->out != before)
    lshk_simhash_free(*a->out);
  return s;
}

/* ---- lshk_simhash_free ------------------------------------------------ */
typedef struct {
  lshk_simhash *h;
} bi_args_lshk_simhash_free;
static void bi_init_lshk_simhash_free(bi_args_lshk_simhash_free *a,
                                      bi_outs *o) {
  (void)o;
  a->h = NULL; /* the valid call frees NULL (a no-op) */
}
static lshk_status bi_call_lshk_simhash_free(bi_args_lshk_simhash_free *a) {
  return lshk_simhash_free(a->h);
}

/* ---- lshk_simhash_shape ------------------------------------------------ */
typedef struct {
  const lshk_simhash *h;
  uint32_t v[3];
  uint32_t *dim, *k, *l;
} bi_args_lshk_simhash_shape;
static void bi_init_lshk_simhash_shape(bi_args_lshk_simhash_shape *a,
                                       bi_outs *o) {
  a->h = FX->sh;
  a->dim = &a->v[0];
  a->k = &a->v[1];
  a->l = &a->v[2];
  bi_out(o, a->v, sizeof a->v);
}
static lshk_status bi_call_lshk_simhash_shape(bi_args_lshk_simhash_shape *a) {
  return lshk_simhash_shape(a->h, a->dim, a->k, a->l);
}

/* ---- lshk_simhash_copy_planes ----------------------------------------- */
typedef struct {
  const lshk_simhash *h;
  float ob[SP * SD + 4];
  float *out;
  size_t out_len;
} bi_args_lshk_simhash_copy_planes;
static void bi_init_lshk_simhash_copy_planes(bi_args_lshk_simhash_copy_planes *a,
                                             bi_outs *o) {
  a->h = FX->sh;
  a->out = a->ob;
  a->out_len = SP * SD;
  bi_out(o, a->ob, sizeof a->ob);
}
static lshk_status bi_call_lshk_simhash_copy_planes(
    bi_args_lshk_simhash_copy_planes *a) {
  return lshk_simhash_copy_planes(a->h, a->out, a->out_len);
}

/* ---- lshk_simhash_hash / _project (+ _isa) ----------------------------- */
#define SN 3
#define SXS 10
typedef struct {
  lshk_isa isa;
  const lshk_simhash *h;
  float xv[SN * SXS];
  const float *x;
  size_t n, x_stride;
  uint32_t cb[SN * SP + 4];
  float pb[SN * SP + 4];
  uint32_t *codes;
  float *proj;
  size_t out_len;
} bi_sh_hash;
static void sh_hash_init(bi_sh_hash *a, bi_outs *o, int project) {
  for (int i = 0; i < SN * SXS; i++) a->xv[i] = (float)(i % 5) - 2.0f;
  a->isa = LSHK_ISA_SCALAR;
  a->h = FX->sh;
  a->x = a->xv;
  a->n = SN;
  a->x_stride = SXS;
  a->codes = a->cb;
  a->proj = a->pb;
  a->out_len = project ? SN * SP : SN * SL;
  if (project)
    bi_out(o, a->pb, sizeof a->pb);
  else
    bi_out(o, a->cb, sizeof a->cb);
}
typedef bi_sh_hash bi_args_lshk_simhash_hash;
typedef bi_sh_hash bi_args_lshk_simhash_hash_isa;
typedef bi_sh_hash bi_args_lshk_simhash_project;
typedef bi_sh_hash bi_args_lshk_simhash_project_isa;
static void bi_init_lshk_simhash_hash(bi_sh_hash *a, bi_outs *o) {
  sh_hash_init(a, o, 0);
}
static void bi_init_lshk_simhash_hash_isa(bi_sh_hash *a, bi_outs *o) {
  sh_hash_init(a, o, 0);
}
static void bi_init_lshk_simhash_project(bi_sh_hash *a, bi_outs *o) {
  sh_hash_init(a, o, 1);
}
static void bi_init_lshk_simhash_project_isa(bi_sh_hash *a, bi_outs *o) {
  sh_hash_init(a, o, 1);
}
static lshk_status bi_call_lshk_simhash_hash(bi_sh_hash *a) {
  return lshk_simhash_hash(a->h, a->x, a->n, a->x_stride, a->codes,
                           a->out_len);
}
static lshk_status bi_call_lshk_simhash_hash_isa(bi_sh_hash *a) {
  return lshk_simhash_hash_isa(a->isa, a->h, a->x, a->n, a->x_stride,
                               a->codes, a->out_len);
}
static lshk_status bi_call_lshk_simhash_project(bi_sh_hash *a) {
  return lshk_simhash_project(a->h, a->x, a->n, a->x_stride, a->proj,
                              a->out_len);
}
static lshk_status bi_call_lshk_simhash_project_isa(bi_sh_hash *a) {
  return lshk_simhash_project_isa(a->isa, a->h, a->x, a->n, a->x_stride,
                                  a->proj, a->out_len);
}
/* OUT is the output field (codes or proj), PER the outputs per row. */
#define SH_HASH_CASES(FN, OUT, PER, T)                                          \
  do {                                                                         \
    BI_BASELINE(FN);                                                           \
    BI_SIMHASH_CASES(FN, h, const lshk_simhash);                               \
    BI_ACCEPT(FN, a.h = FX->sh_borrowed; a.x_stride = SD + 1; a.n = 2);        \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.x = NULL);                         \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.OUT = NULL);                       \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.x_stride = SD - 1);            \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.x_stride = 0);                 \
    BI_CASE(FN, LSHK_STATUS_BUFFER_TOO_SMALL, a.out_len = SN * (PER) - 1);     \
    BI_CASE(FN, LSHK_STATUS_BUFFER_TOO_SMALL, a.out_len = 0);                  \
    BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.n = SIZE_MAX);                    \
    BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.x_stride = SIZE_MAX / 2);         \
    BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.n = SIZE_MAX / 4;                 \
            a.x_stride = SD; a.out_len = SIZE_MAX);                            \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.x = BI_MISALIGN(const float, a.xv));                             \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.OUT = BI_MISALIGN(T, a.OUT));                                    \
    BI_CASE(FN, LSHK_STATUS_OK, a.n = 0);                                      \
    BI_CASE(FN, LSHK_STATUS_OK, a.n = 0; a.x = NULL; a.OUT = NULL;             \
            a.out_len = 0);                                                    \
    /* output overlapping the input (row 1) */                                 \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.OUT = (T *)(void *)(a.xv + SXS));                                \
  } while (0)
#define BI_ISA_CASES(FN)                                                       \
  do {                                                                         \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.isa = 4);                      \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.isa = UINT32_MAX);             \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.isa = 4; a.h = NULL);          \
    BI_CASE_NO_AVX512(FN, LSHK_STATUS_UNSUPPORTED_ISA, a.isa = LSHK_ISA_AVX512); \
  } while (0)

/* ---- lshk_simhash_train_iul ------------------------------------------- */
#define TN 6  /* queries */
#define TR 12 /* rows */
typedef struct {
  float pin[SP * SD];
  float rv[TR * SXS];
  float qv[TN * SXS];
  size_t lo[TN + 1];
  uint32_t lv[TN * 2];
  lshk_iul_params pv;
  struct {
    lshk_iul_params p;
    unsigned char tail[40];
  } big;
  float pout[SP * SD + 4];
  lshk_iul_report rep[3];
  const float *planes_in;
  size_t planes_len, dim;
  uint32_t k, l, range_bits;
  const float *rows;
  size_t n_rows, row_stride;
  const float *queries;
  size_t n, q_stride;
  const size_t *label_offsets;
  const uint32_t *labels;
  const lshk_iul_params *p;
  float *planes_out;
  size_t planes_out_len;
  lshk_iul_report *reports;
  size_t reports_len;
} bi_args_lshk_simhash_train_iul;
static void bi_init_lshk_simhash_train_iul(bi_args_lshk_simhash_train_iul *a,
                                           bi_outs *o) {
  for (int i = 0; i < SP * SD; i++) a->pin[i] = (float)((i * 7) % 11) - 5.0f;
  for (int i = 0; i < TR * SXS; i++) a->rv[i] = (float)((i * 5) % 9) - 4.0f;
  for (int i = 0; i < TN * SXS; i++) a->qv[i] = (float)((i * 3) % 7) - 3.0f;
  for (int i = 0; i <= TN; i++) a->lo[i] = (size_t)i * 2;
  for (int i = 0; i < TN * 2; i++) a->lv[i] = (uint32_t)((i * 5) % TR);
  a->pv = lshk_iul_params_default();
  a->pv.rounds = 2;
  a->pv.epochs = 1;
  a->pv.batch = 4;
  a->pv.validation_fraction = 0.0f;
  a->big.p = a->pv;
  a->big.p.struct_size = (uint32_t)sizeof a->big;
  memset(a->big.tail, 0x5A, sizeof a->big.tail);
  a->planes_in = a->pin;
  a->planes_len = SP * SD;
  a->dim = SD;
  a->k = SK;
  a->l = SL;
  a->range_bits = 3;
  a->rows = a->rv;
  a->n_rows = TR;
  a->row_stride = SXS;
  a->queries = a->qv;
  a->n = TN;
  a->q_stride = SXS;
  a->label_offsets = a->lo;
  a->labels = a->lv;
  a->p = &a->pv;
  a->planes_out = a->pout;
  a->planes_out_len = SP * SD;
  a->reports = a->rep;
  a->reports_len = 2;
  bi_out(o, a->pout, sizeof a->pout);
  bi_out(o, a->rep, sizeof a->rep);
}
static lshk_status bi_call_lshk_simhash_train_iul(
    bi_args_lshk_simhash_train_iul *a) {
  return lshk_simhash_train_iul(
      a->planes_in, a->planes_len, a->dim, a->k, a->l, a->range_bits, a->rows,
      a->n_rows, a->row_stride, a->queries, a->n, a->q_stride,
      a->label_offsets, a->labels, a->p, a->planes_out, a->planes_out_len,
      a->reports, a->reports_len);
}

/* ---- DWTA ---------------------------------------------------------------- */
#define DD 16
#define DK 2
#define DL 3
#define DB 4
#define DM (DK * DL * DB)
typedef struct {
  uint32_t dim, k, l, b;
  uint64_t seed;
  lshk_dwta *outv;
  lshk_dwta **out;
} bi_args_lshk_dwta_new;
static void bi_init_lshk_dwta_new(bi_args_lshk_dwta_new *a, bi_outs *o) {
  a->dim = DD;
  a->k = DK;
  a->l = DL;
  a->b = DB;
  a->seed = 3;
  a->out = &a->outv;
  bi_out(o, &a->outv, sizeof a->outv);
}
static lshk_status bi_call_lshk_dwta_new(bi_args_lshk_dwta_new *a) {
  lshk_dwta *before = a->outv;
  lshk_status s = lshk_dwta_new(a->dim, a->k, a->l, a->b, a->seed, a->out);
  if (s == LSHK_STATUS_OK && a->out != NULL && *a->out != before)
    lshk_dwta_free(*a->out);
  return s;
}

typedef struct {
  uint32_t mv[DM + 1];
  const uint32_t *map;
  size_t map_len;
  uint32_t dim, k, l, b;
  lshk_dwta *outv;
  lshk_dwta **out;
} bi_args_lshk_dwta_from_map;
static void bi_init_lshk_dwta_from_map(bi_args_lshk_dwta_from_map *a,
                                       bi_outs *o) {
  for (int i = 0; i < DM + 1; i++) a->mv[i] = (uint32_t)((i * 5) % DD);
  a->map = a->mv;
  a->map_len = DM;
  a->dim = DD;
  a->k = DK;
  a->l = DL;
  a->b = DB;
  a->out = &a->outv;
  bi_out(o, &a->outv, sizeof a->outv);
}
static lshk_status bi_call_lshk_dwta_from_map(bi_args_lshk_dwta_from_map *a) {
  lshk_dwta *before = a->outv;
  lshk_status s = lshk_dwta_from_map(a->map, a->map_len, a->dim, a->k, a->l,
                                     a->b, a->out);
  if (s == LSHK_STATUS_OK && a->out != NULL && *a->out != before)
    lshk_dwta_free(*a->out);
  return s;
}

typedef struct {
  lshk_dwta *h;
} bi_args_lshk_dwta_free;
static void bi_init_lshk_dwta_free(bi_args_lshk_dwta_free *a, bi_outs *o) {
  (void)o;
  a->h = NULL;
}
static lshk_status bi_call_lshk_dwta_free(bi_args_lshk_dwta_free *a) {
  return lshk_dwta_free(a->h);
}

typedef struct {
  const lshk_dwta *h;
  uint32_t v[4];
  uint32_t *dim, *k, *l, *b;
} bi_args_lshk_dwta_shape;
static void bi_init_lshk_dwta_shape(bi_args_lshk_dwta_shape *a, bi_outs *o) {
  a->h = FX->dw;
  a->dim = &a->v[0];
  a->k = &a->v[1];
  a->l = &a->v[2];
  a->b = &a->v[3];
  bi_out(o, a->v, sizeof a->v);
}
static lshk_status bi_call_lshk_dwta_shape(bi_args_lshk_dwta_shape *a) {
  return lshk_dwta_shape(a->h, a->dim, a->k, a->l, a->b);
}

typedef struct {
  const lshk_dwta *h;
  uint32_t ob[DM + 4];
  uint32_t *out;
  size_t out_len;
} bi_args_lshk_dwta_copy_map;
static void bi_init_lshk_dwta_copy_map(bi_args_lshk_dwta_copy_map *a,
                                       bi_outs *o) {
  a->h = FX->dw;
  a->out = a->ob;
  a->out_len = DM;
  bi_out(o, a->ob, sizeof a->ob);
}
static lshk_status bi_call_lshk_dwta_copy_map(bi_args_lshk_dwta_copy_map *a) {
  return lshk_dwta_copy_map(a->h, a->out, a->out_len);
}

#define DN 3
#define DXS 17
typedef struct {
  lshk_isa isa;
  const lshk_dwta *h;
  float xv[DN * DXS];
  const float *x;
  size_t n, x_stride;
  size_t ipv[DN + 1];
  uint32_t iv[12];
  float vv[12];
  const size_t *indptr;
  const uint32_t *indices;
  const float *values;
  uint32_t cb[DN * DL + 4];
  uint32_t *codes;
  size_t codes_len;
} bi_dw_hash;
static void dw_hash_init(bi_dw_hash *a, bi_outs *o) {
  /* sparse rows: {1, 4, 9}, {0, 15}, {2, 3, 5, 7, 11, 13, 14} */
  static const uint32_t idx[12] = {1, 4, 9, 0, 15, 2, 3, 5, 7, 11, 13, 14};
  for (int i = 0; i < DN * DXS; i++) a->xv[i] = (float)((i * 7) % 13) - 6.0f;
  for (int i = 0; i < 12; i++) {
    a->iv[i] = idx[i];
    a->vv[i] = (float)i - 5.5f;
  }
  a->ipv[0] = 0;
  a->ipv[1] = 3;
  a->ipv[2] = 5;
  a->ipv[3] = 12;
  a->isa = LSHK_ISA_SCALAR;
  a->h = FX->dw;
  a->x = a->xv;
  a->n = DN;
  a->x_stride = DXS;
  a->indptr = a->ipv;
  a->indices = a->iv;
  a->values = a->vv;
  a->codes = a->cb;
  a->codes_len = DN * DL;
  bi_out(o, a->cb, sizeof a->cb);
}
typedef bi_dw_hash bi_args_lshk_dwta_hash_dense;
typedef bi_dw_hash bi_args_lshk_dwta_hash_dense_isa;
typedef bi_dw_hash bi_args_lshk_dwta_hash_sparse;
typedef bi_dw_hash bi_args_lshk_dwta_hash_sparse_isa;
#define bi_init_lshk_dwta_hash_dense dw_hash_init
#define bi_init_lshk_dwta_hash_dense_isa dw_hash_init
#define bi_init_lshk_dwta_hash_sparse dw_hash_init
#define bi_init_lshk_dwta_hash_sparse_isa dw_hash_init
static lshk_status bi_call_lshk_dwta_hash_dense(bi_dw_hash *a) {
  return lshk_dwta_hash_dense(a->h, a->x, a->n, a->x_stride, a->codes,
                              a->codes_len);
}
static lshk_status bi_call_lshk_dwta_hash_dense_isa(bi_dw_hash *a) {
  return lshk_dwta_hash_dense_isa(a->isa, a->h, a->x, a->n, a->x_stride,
                                  a->codes, a->codes_len);
}
static lshk_status bi_call_lshk_dwta_hash_sparse(bi_dw_hash *a) {
  return lshk_dwta_hash_sparse(a->h, a->indptr, a->indices, a->values, a->n,
                               a->codes, a->codes_len);
}
static lshk_status bi_call_lshk_dwta_hash_sparse_isa(bi_dw_hash *a) {
  return lshk_dwta_hash_sparse_isa(a->isa, a->h, a->indptr, a->indices,
                                   a->values, a->n, a->codes, a->codes_len);
}
#define DW_COMMON_CASES(FN)                                                    \
  do {                                                                         \
    BI_BASELINE(FN);                                                           \
    BI_DWTA_CASES(FN, h, const lshk_dwta);                                     \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.codes = NULL);                     \
    BI_CASE(FN, LSHK_STATUS_BUFFER_TOO_SMALL, a.codes_len = DN * DL - 1);      \
    BI_CASE(FN, LSHK_STATUS_BUFFER_TOO_SMALL, a.codes_len = 0);                \
    BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.n = SIZE_MAX);                    \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.codes = BI_MISALIGN(uint32_t, a.cb));                            \
    BI_CASE(FN, LSHK_STATUS_OK, a.n = 0);                                      \
  } while (0)
#define DW_DENSE_CASES(FN)                                                     \
  do {                                                                         \
    DW_COMMON_CASES(FN);                                                       \
    BI_ACCEPT(FN, a.h = FX->dw_borrowed; a.x_stride = SD; a.n = 2);            \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.x = NULL);                         \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.x_stride = DD - 1);            \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.x_stride = 0);                 \
    BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.x_stride = SIZE_MAX / 2);         \
    BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.n = SIZE_MAX / 4;                 \
            a.x_stride = DD; a.codes_len = SIZE_MAX);                          \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.x = BI_MISALIGN(const float, a.xv));                             \
    BI_CASE(FN, LSHK_STATUS_OK, a.n = 0; a.x = NULL; a.codes = NULL;           \
            a.codes_len = 0);                                                  \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.codes = (uint32_t *)(void *)(a.xv + DXS));                       \
  } while (0)
/* Bad entries sit in the LAST row: the whole batch is validated first. */
#define DW_SPARSE_CASES(FN)                                                    \
  do {                                                                         \
    DW_COMMON_CASES(FN);                                                       \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.indptr = NULL);                    \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.indices = NULL);                   \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.values = NULL);                    \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.ipv[0] = 1);                   \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.ipv[2] = 2);                   \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.ipv[2] = 13);                  \
    BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.ipv[3] = SIZE_MAX);               \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.iv[10] = 15; a.iv[11] = 14);   \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.iv[11] = 13); /* dup */        \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.iv[5] = 9); /* < prev row */   \
    BI_CASE(FN, LSHK_STATUS_INDEX_OUT_OF_RANGE, a.iv[11] = DD);                \
    BI_CASE(FN, LSHK_STATUS_INDEX_OUT_OF_RANGE, a.iv[11] = UINT32_MAX);        \
    BI_CASE(FN, LSHK_STATUS_INDEX_OUT_OF_RANGE, a.h = FX->dw_borrowed);        \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.indptr = BI_MISALIGN(const size_t, a.ipv));                      \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.indices = BI_MISALIGN(const uint32_t, a.iv));                    \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.values = BI_MISALIGN(const float, a.vv));                        \
    BI_CASE(FN, LSHK_STATUS_OK, a.n = 0; a.indices = NULL; a.values = NULL;    \
            a.codes = NULL; a.codes_len = 0);                                  \
    BI_CASE(FN, LSHK_STATUS_OK, a.n = 0; a.indptr = NULL; a.indices = NULL;    \
            a.values = NULL; a.codes = NULL; a.codes_len = 0);                 \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.codes = a.iv + 11);            \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.codes = (uint32_t *)(void *)(a.vv + 11));                        \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.codes = (uint32_t *)(void *)(a.ipv + DN));                       \
  } while (0)

int main(void) {
  bi_fx_setup();

#define FN lshk_simhash_new
  BI_BASELINE(FN);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out = BI_MISALIGN(lshk_simhash *, &a.outv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.dim = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.k = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.k = 33);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.k = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.l = 0);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.dim = UINT32_MAX; a.k = 32;
          a.l = UINT32_MAX);
  if (bi_huge_alloc_ok()) /* 2^56 planes: 256 PiB */
    BI_CASE(FN, LSHK_STATUS_ALLOCATION_FAILED, a.dim = 1u << 31; a.k = 32;
            a.l = 1u << 20; a.sparsity = 0);
  BI_ACCEPT(FN, a.sparsity = UINT32_MAX); /* s >= dim: one nonzero */
#undef FN

#define FN lshk_simhash_from_planes
  BI_BASELINE(FN);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.planes = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out = BI_MISALIGN(lshk_simhash *, &a.outv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.planes = BI_MISALIGN(const float, a.pv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.dim = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.k = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.k = 33);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.l = 0);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.dim = UINT32_MAX; a.k = 32;
          a.l = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.pv[SP * SD - 1] = NAN);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.pv[5] = INFINITY);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.pv[0] = -INFINITY);
#undef FN

#define FN lshk_simhash_free
  BI_BASELINE(FN); /* NULL: a no-op */
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.h = FX->sh_freed);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.h = (lshk_simhash *)FX->sh_dead);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.h = (lshk_simhash *)(void *)FX->dw);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.h = (lshk_simhash *)(void *)FX->tb);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE,
          a.h = (lshk_simhash *)(void *)FX->idx);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.h = BI_GARBAGE(lshk_simhash));
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.h = BI_MISALIGN(lshk_simhash, FX->sh));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.h = (lshk_simhash *)FX->sh_borrowed);
  /* the refused handles still work */
  BI_ACCEPT(lshk_simhash_hash, a.h = FX->sh);
  BI_ACCEPT(lshk_simhash_shape, a.h = FX->sh_borrowed);
#undef FN

#define FN lshk_simhash_shape
  BI_BASELINE(FN);
  BI_SIMHASH_CASES(FN, h, const lshk_simhash);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.k = BI_MISALIGN(uint32_t, a.v + 1));
  BI_ACCEPT(FN, a.dim = NULL; a.k = NULL; a.l = NULL);
#undef FN

#define FN lshk_simhash_copy_planes
  BI_BASELINE(FN);
  BI_SIMHASH_CASES(FN, h, const lshk_simhash);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_BUFFER_TOO_SMALL, a.out_len = SP * SD - 1);
  BI_CASE(FN, LSHK_STATUS_BUFFER_TOO_SMALL, a.out_len = 0);
  BI_CASE(FN, LSHK_STATUS_BUFFER_TOO_SMALL, a.out_len = 0; a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out = BI_MISALIGN(float, a.ob));
  BI_ACCEPT(FN, a.out_len = SIZE_MAX); /* only the needed length is used */
#undef FN

  SH_HASH_CASES(lshk_simhash_hash, codes, SL, uint32_t);
  SH_HASH_CASES(lshk_simhash_hash_isa, codes, SL, uint32_t);
  BI_ISA_CASES(lshk_simhash_hash_isa);
  SH_HASH_CASES(lshk_simhash_project, proj, SP, float);
  SH_HASH_CASES(lshk_simhash_project_isa, proj, SP, float);
  BI_ISA_CASES(lshk_simhash_project_isa);

#define FN lshk_simhash_train_iul
  BI_BASELINE(FN);
  BI_ACCEPT(FN, a.p = &a.big.p);
  BI_ACCEPT(FN, a.p = NULL; a.reports = NULL; a.reports_len = 0);
  BI_ACCEPT(FN, a.reports_len = 3);
  BI_ACCEPT(FN, a.pv.flags = LSHK_IUL_TO_CONVERGENCE);
  BI_ACCEPT(FN, a.pv.flags = LSHK_IUL_COLLISION_LOSS);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.planes_in = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.rows = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.queries = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.label_offsets = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.labels = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.planes_out = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.reports = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.dim = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.k = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.k = 33);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.l = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.planes_len = SP * SD - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.planes_len = SP * SD + 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.range_bits = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.range_bits = 25);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.n = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.n_rows = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.row_stride = SD - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.q_stride = SD - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.lv[TN * 2 - 1] = TR);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.lv[3] = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.lo[0] = 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.lo[3] = 1);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.lo[TN] = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.struct_size = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.pv.struct_size = (uint32_t)sizeof(lshk_iul_params) - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.flags = 16);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.flags = LSHK_IUL_RANK_THRESHOLDS;
          a.pv.t1 = 0.5f);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.batch = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.learning_rate = 0.0f);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.learning_rate = -1.0f);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.learning_rate = NAN);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.validation_fraction = 1.0f);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.validation_fraction = -0.5f);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.pv.t1 = NAN);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.pv.t2 = -INFINITY);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.p = BI_MISALIGN(const lshk_iul_params, &a.pv));
  BI_CASE(FN, LSHK_STATUS_BUFFER_TOO_SMALL, a.planes_out_len = SP * SD - 1);
  BI_CASE(FN, LSHK_STATUS_BUFFER_TOO_SMALL, a.reports_len = 1);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.pin[SP * SD - 1] = NAN);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.rv[(TR - 1) * SXS + SD - 1] = INFINITY);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.qv[(TN - 1) * SXS] = NAN);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.n = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.n_rows = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.row_stride = SIZE_MAX / 2);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.q_stride = SIZE_MAX / 2);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.planes_out = (float *)(uintptr_t)a.planes_in);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.planes_out = a.qv);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.planes_out = a.rv + 3);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.reports = (lshk_iul_report *)(void *)a.qv; a.reports_len = 1;
          a.pv.rounds = 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.reports = (lshk_iul_report *)(void *)a.pout; a.reports_len = 1;
          a.pv.rounds = 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.planes_in = BI_MISALIGN(const float, a.pin));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.label_offsets = BI_MISALIGN(const size_t, a.lo));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.planes_out = BI_MISALIGN(float, a.pout));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.reports = BI_MISALIGN(lshk_iul_report, a.rep));
#undef FN

#define FN lshk_dwta_new
  BI_BASELINE(FN);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out = BI_MISALIGN(lshk_dwta *, &a.outv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.dim = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.dim = 1u << 31);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.dim = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.b = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.b = 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.b = 3);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.b = 512);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.b = 1u << 31);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.k = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.k = 17; a.b = 4); /* 34 bits */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.k = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.l = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.k = 2; a.l = (1u << 19) + 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.l = UINT32_MAX);
#undef FN

#define FN lshk_dwta_from_map
  BI_BASELINE(FN);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.map = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out = BI_MISALIGN(lshk_dwta *, &a.outv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.map = BI_MISALIGN(const uint32_t, a.mv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.map_len = DM - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.map_len = DM + 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.map_len = 0; a.map = NULL);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.map_len = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_INDEX_OUT_OF_RANGE, a.mv[DM - 1] = DD);
  BI_CASE(FN, LSHK_STATUS_INDEX_OUT_OF_RANGE, a.mv[0] = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.dim = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.b = 3);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.k = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.l = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.k = 17);
#undef FN

#define FN lshk_dwta_free
  BI_BASELINE(FN);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.h = FX->dw_freed);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.h = (lshk_dwta *)FX->dw_dead);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.h = (lshk_dwta *)(void *)FX->sh);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE,
          a.h = (lshk_dwta *)(void *)FX->idx_dw);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.h = BI_GARBAGE(lshk_dwta));
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.h = BI_MISALIGN(lshk_dwta, FX->dw));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.h = (lshk_dwta *)FX->dw_borrowed);
  BI_ACCEPT(lshk_dwta_shape, a.h = FX->dw_borrowed);
#undef FN

#define FN lshk_dwta_shape
  BI_BASELINE(FN);
  BI_DWTA_CASES(FN, h, const lshk_dwta);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.b = BI_MISALIGN(uint32_t, a.v + 3));
  BI_ACCEPT(FN, a.dim = NULL; a.k = NULL; a.l = NULL; a.b = NULL);
#undef FN

#define FN lshk_dwta_copy_map
  BI_BASELINE(FN);
  BI_DWTA_CASES(FN, h, const lshk_dwta);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_BUFFER_TOO_SMALL, a.out_len = DM - 1);
  BI_CASE(FN, LSHK_STATUS_BUFFER_TOO_SMALL, a.out_len = 0; a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out = BI_MISALIGN(uint32_t, a.ob));
  BI_ACCEPT(FN, a.out_len = SIZE_MAX); /* only the needed length is used */
#undef FN

  DW_DENSE_CASES(lshk_dwta_hash_dense);
  DW_DENSE_CASES(lshk_dwta_hash_dense_isa);
  BI_ISA_CASES(lshk_dwta_hash_dense_isa);
  DW_SPARSE_CASES(lshk_dwta_hash_sparse);
  DW_SPARSE_CASES(lshk_dwta_hash_sparse_isa);
  BI_ISA_CASES(lshk_dwta_hash_sparse_isa);

  bi_fx_teardown();
  return bi_summary("bad_input_hash");
}
