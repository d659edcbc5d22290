/* Bad-input matrix (issue 8) for the hashing forest (issue 14, item 4).
 * See bad_input.h for what a case asserts.
 *
 * Functions covered here:
 *   lshk_forest_params_default lshk_forest_build lshk_forest_free
 *   lshk_forest_shape lshk_forest_query lshk_forest_union
 *   lshk_forest_rebuild lshk_forest_save lshk_forest_load */
#define _POSIX_C_SOURCE 200809L
#include <sys/stat.h>
#include <unistd.h>

#include "bad_input.h"

#define FX bi_fx()
#define FR BI_FX_ROWS
#define FD BI_FX_DIM
#define FXN 3
#define FQ 5

static lshk_forest *live, *freed, *pool[4];
static char path_ok[400], path_bad[400], path_dir[256];

static lshk_forest *make(uint64_t seed) {
  lshk_forest_params p = lshk_forest_params_default();
  lshk_forest *f = NULL;
  p.trees = 3;
  p.leaf_size = 6;
  p.seed = seed;
  p.build_threads = 1;
  bi_fx_need(lshk_forest_build(FX->w, FR, FD, FD, &p, &f), "lshk_forest_build");
  return f;
}

/* ---- lshk_forest_build ------------------------------------------------- */
typedef struct {
  float wv[FR * 10];
  lshk_forest_params pv;
  struct {
    lshk_forest_params p;
    unsigned char tail[24];
  } big;
  lshk_forest *outv;
  const float *w;
  size_t rows, dim, w_stride;
  const lshk_forest_params *p;
  lshk_forest **out;
} bi_args_lshk_forest_build;
static void bi_init_lshk_forest_build(bi_args_lshk_forest_build *a, bi_outs *o) {
  for (int i = 0; i < FR * 10; i++) a->wv[i] = (float)((i * 13) % 17) / 8.0f - 1.0f;
  a->pv = lshk_forest_params_default();
  a->pv.trees = 2;
  a->pv.leaf_size = 8;
  a->pv.build_threads = 1;
  a->big.p = a->pv;
  a->big.p.struct_size = (uint32_t)sizeof a->big;
  memset(a->big.tail, 0x31, sizeof a->big.tail);
  a->w = a->wv;
  a->rows = FR;
  a->dim = FD;
  a->w_stride = 10;
  a->p = &a->pv;
  a->out = &a->outv;
  bi_out(o, &a->outv, sizeof a->outv);
}
static lshk_status bi_call_lshk_forest_build(bi_args_lshk_forest_build *a) {
  lshk_forest *before = a->outv;
  lshk_status s = lshk_forest_build(a->w, a->rows, a->dim, a->w_stride, a->p, a->out);
  if (s == LSHK_STATUS_OK && a->out != NULL && *a->out != before) lshk_forest_free(*a->out);
  return s;
}

/* ---- lshk_forest_free -------------------------------------------------- */
typedef struct {
  lshk_forest *f;
} bi_args_lshk_forest_free;
static void bi_init_lshk_forest_free(bi_args_lshk_forest_free *a, bi_outs *o) {
  (void)o;
  a->f = NULL;
}
static lshk_status bi_call_lshk_forest_free(bi_args_lshk_forest_free *a) {
  return lshk_forest_free(a->f);
}

/* ---- lshk_forest_shape ------------------------------------------------- */
typedef struct {
  const lshk_forest *f;
  size_t rv[2], dv[2];
  uint32_t tv[2];
  size_t *rows, *dim;
  uint32_t *trees;
} bi_args_lshk_forest_shape;
static void bi_init_lshk_forest_shape(bi_args_lshk_forest_shape *a, bi_outs *o) {
  a->f = live;
  a->rows = a->rv;
  a->dim = a->dv;
  a->trees = a->tv;
  bi_out(o, a->rv, sizeof a->rv);
  bi_out(o, a->dv, sizeof a->dv);
  bi_out(o, a->tv, sizeof a->tv);
}
static lshk_status bi_call_lshk_forest_shape(bi_args_lshk_forest_shape *a) {
  return lshk_forest_shape(a->f, a->rows, a->dim, a->trees);
}

/* ---- lshk_forest_query ------------------------------------------------- */
typedef struct {
  const lshk_forest *f;
  float xv[FXN * 10];
  uint32_t ib[FXN * FQ + 4];
  size_t ob[FXN + 2];
  size_t nb;
  const float *w;
  size_t w_stride;
  const float *x;
  size_t nx, x_stride;
  uint32_t q;
  uint32_t *ids;
  size_t ids_len;
  size_t *offsets;
  size_t *needed;
} bi_args_lshk_forest_query;
static void bi_init_lshk_forest_query(bi_args_lshk_forest_query *a, bi_outs *o) {
  for (int i = 0; i < FXN * 10; i++) a->xv[i] = (float)((i * 7) % 9) - 4.0f;
  a->f = live;
  a->w = FX->w;
  a->w_stride = FD;
  a->x = a->xv;
  a->nx = FXN;
  a->x_stride = 10;
  a->q = FQ;
  a->ids = a->ib;
  a->ids_len = FXN * FQ;
  a->offsets = a->ob;
  a->needed = &a->nb;
  bi_out(o, a->ib, sizeof a->ib);
  bi_out(o, a->ob, sizeof a->ob);
  bi_out(o, &a->nb, sizeof a->nb);
}
static lshk_status bi_call_lshk_forest_query(bi_args_lshk_forest_query *a) {
  return lshk_forest_query(a->f, a->w, a->w_stride, a->x, a->nx, a->x_stride, a->q,
                           a->ids, a->ids_len, a->offsets, a->needed);
}

/* ---- lshk_forest_union ------------------------------------------------- */
typedef struct {
  const lshk_forest *f;
  uint32_t iv[8];
  uint32_t ub[8 + 2], cb[8 + 2];
  size_t nb;
  const uint32_t *ids;
  size_t count, cap;
  uint64_t seed;
  uint32_t *out_ids, *out_counts;
  size_t out_len;
  size_t *needed;
} bi_args_lshk_forest_union;
static void bi_init_lshk_forest_union(bi_args_lshk_forest_union *a, bi_outs *o) {
  for (int i = 0; i < 8; i++) a->iv[i] = (uint32_t)((i * 5) % 7);
  a->f = live;
  a->ids = a->iv;
  a->count = 8;
  a->cap = 4;
  a->seed = 3;
  a->out_ids = a->ub;
  a->out_counts = a->cb;
  a->out_len = 8;
  a->needed = &a->nb;
  bi_out(o, a->ub, sizeof a->ub);
  bi_out(o, a->cb, sizeof a->cb);
  bi_out(o, &a->nb, sizeof a->nb);
}
static lshk_status bi_call_lshk_forest_union(bi_args_lshk_forest_union *a) {
  return lshk_forest_union(a->f, a->ids, a->count, a->cap, a->seed, a->out_ids,
                           a->out_counts, a->out_len, a->needed);
}

/* ---- lshk_forest_rebuild ----------------------------------------------- */
typedef struct {
  lshk_forest *f;
  float wv[FR * FD];
  uint64_t sv[2];
  const float *w;
  size_t w_stride;
  const uint64_t *new_seed;
} bi_args_lshk_forest_rebuild;
static void bi_init_lshk_forest_rebuild(bi_args_lshk_forest_rebuild *a, bi_outs *o) {
  (void)o;
  for (int i = 0; i < FR * FD; i++) a->wv[i] = FX->w[i] * 0.5f + 0.1f;
  a->f = pool[0];
  a->w = a->wv;
  a->w_stride = FD;
  a->sv[0] = 11;
  a->new_seed = a->sv;
}
static lshk_status bi_call_lshk_forest_rebuild(bi_args_lshk_forest_rebuild *a) {
  return lshk_forest_rebuild(a->f, a->w, a->w_stride, a->new_seed);
}

/* ---- lshk_forest_save / _load ------------------------------------------ */
typedef struct {
  const lshk_forest *f;
  const char *path;
} bi_args_lshk_forest_save;
static void bi_init_lshk_forest_save(bi_args_lshk_forest_save *a, bi_outs *o) {
  (void)o;
  a->f = live;
  a->path = path_ok;
}
static lshk_status bi_call_lshk_forest_save(bi_args_lshk_forest_save *a) {
  return lshk_forest_save(a->f, a->path);
}
typedef struct {
  const char *path;
  lshk_forest *outv;
  lshk_forest **out;
} bi_args_lshk_forest_load;
static void bi_init_lshk_forest_load(bi_args_lshk_forest_load *a, bi_outs *o) {
  a->path = path_ok;
  a->out = &a->outv;
  bi_out(o, &a->outv, sizeof a->outv);
}
static lshk_status bi_call_lshk_forest_load(bi_args_lshk_forest_load *a) {
  lshk_forest *before = a->outv;
  lshk_status s = lshk_forest_load(a->path, a->out);
  if (s == LSHK_STATUS_OK && a->out != NULL && *a->out != before) lshk_forest_free(*a->out);
  return s;
}

#define BI_FOREST_CASES(FN, FIELD, T)                                          \
  BI_HANDLE_CASES(FN, FIELD, T, freed, (T *)NULL, live, FX->idx, FX->tb)

int main(void) {
  const char *tmp = getenv("TMPDIR");
  bi_fx_setup();
  live = make(1);
  for (int i = 0; i < 4; i++) pool[i] = make(2 + (uint64_t)i);
  freed = make(9);
  bi_fx_need(lshk_forest_free(freed), "lshk_forest_free");
  snprintf(path_dir, sizeof path_dir, "%.200s/lshk-bi-forest-%ld", tmp ? tmp : "/tmp",
           (long)getpid());
  mkdir(path_dir, 0700);
  snprintf(path_ok, sizeof path_ok, "%s/ok.lshk", path_dir);
  snprintf(path_bad, sizeof path_bad, "%s/bad.lshk", path_dir);
  {
    FILE *fp = fopen(path_bad, "wb");
    if (fp) {
      fputs("not a forest", fp);
      fclose(fp);
    }
  }
  {
    lshk_forest_params d = lshk_forest_params_default();
    BI_EXPECT(lshk_forest_params_default,
              d.struct_size == sizeof d && d.trees == 8 && d.leaf_size == 64 && d.seed == 1 &&
                  d.normalize_rows == 0 && d.reserved == 0);
  }

#define FN lshk_forest_build
  BI_BASELINE(FN);
  BI_ACCEPT(FN, a.p = NULL);
  BI_ACCEPT(FN, a.p = &a.big.p);
  BI_ACCEPT(FN, a.rows = 2; a.pv.leaf_size = 2);
  BI_ACCEPT(FN, a.pv.normalize_rows = 1);
  BI_ACCEPT(FN, a.rows = 2; a.pv.leaf_size = 2; a.pv.normalize_rows = 1);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.w = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out = BI_MISALIGN(lshk_forest *, &a.outv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w = BI_MISALIGN(const float, a.wv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.p = BI_MISALIGN(const lshk_forest_params, &a.pv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.rows = 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.rows = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.dim = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w_stride = FD - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.trees = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.trees = 4097);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.leaf_size = 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.normalize_rows = 2);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.normalize_rows = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.reserved = 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.normalize_rows = 1; a.pv.reserved = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.struct_size = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.pv.struct_size = (uint32_t)sizeof(lshk_forest_params) - 1);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.wv[(FR - 1) * 10 + FD - 1] = NAN);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.wv[0] = INFINITY);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.rows = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.w_stride = SIZE_MAX / 2);
#undef FN

#define FN lshk_forest_free
  BI_BASELINE(FN); /* NULL */
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.f = freed);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.f = (lshk_forest *)(void *)FX->idx);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.f = BI_GARBAGE(lshk_forest));
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.f = BI_MISALIGN(lshk_forest, live));
#undef FN

#define FN lshk_forest_shape
  BI_BASELINE(FN);
  BI_ACCEPT(FN, a.rows = NULL; a.dim = NULL; a.trees = NULL);
  BI_FOREST_CASES(FN, f, const lshk_forest);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.rows = BI_MISALIGN(size_t, a.rv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.trees = BI_MISALIGN(uint32_t, a.tv));
#undef FN

#define FN lshk_forest_query
  BI_BASELINE(FN);
  BI_ACCEPT(FN, a.nx = 0);
  BI_ACCEPT(FN, a.q = 1);
  BI_ACCEPT(FN, a.ids_len = SIZE_MAX / 8);
  BI_FOREST_CASES(FN, f, const lshk_forest);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.w = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.x = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.ids = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.offsets = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.needed = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.q = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w_stride = FD - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.x_stride = FD - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.x = BI_MISALIGN(const float, a.xv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.ids = BI_MISALIGN(uint32_t, a.ib));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.offsets = BI_MISALIGN(size_t, a.ob));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.needed = BI_MISALIGN(size_t, &a.nb));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.ids = (uint32_t *)(void *)a.xv);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.needed = a.ob + 1);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.xv[(FXN - 1) * 10 + FD - 1] = NAN);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.nx = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.x_stride = SIZE_MAX / 2);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.ids_len = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_BUFFER_TOO_SMALL, a.ids_len = FXN * FQ - 1; o_.n = 2);
  BI_CASE(FN, LSHK_STATUS_BUFFER_TOO_SMALL, a.ids_len = 0; a.ids = NULL; o_.n = 2);
#undef FN

#define FN lshk_forest_union
  BI_BASELINE(FN);
  BI_ACCEPT(FN, a.cap = 0);
  BI_ACCEPT(FN, a.out_counts = NULL);
  BI_ACCEPT(FN, a.count = 0; a.ids = NULL);
  BI_FOREST_CASES(FN, f, const lshk_forest);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.ids = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out_ids = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.needed = NULL);
  BI_CASE(FN, LSHK_STATUS_INDEX_OUT_OF_RANGE, a.iv[7] = FR);
  BI_CASE(FN, LSHK_STATUS_INDEX_OUT_OF_RANGE, a.iv[0] = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.ids = BI_MISALIGN(const uint32_t, a.iv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out_ids = BI_MISALIGN(uint32_t, a.ub));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out_counts = BI_MISALIGN(uint32_t, a.cb));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.needed = BI_MISALIGN(size_t, &a.nb));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out_ids = a.iv);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out_counts = a.ub + 1);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.count = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.out_len = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_BUFFER_TOO_SMALL, a.out_len = 3; o_.n = 2);
#undef FN

#define FN lshk_forest_rebuild
  BI_ACCEPT(FN, a.f = pool[0]);
  BI_ACCEPT(FN, a.f = pool[1]; a.new_seed = NULL);
  BI_FOREST_CASES(FN, f, lshk_forest);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.w = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w_stride = FD - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w = BI_MISALIGN(const float, a.wv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.new_seed = BI_MISALIGN(const uint64_t, a.sv));
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.wv[FR * FD - 1] = NAN);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.w_stride = SIZE_MAX / 2);
#undef FN

#define FN lshk_forest_save
  BI_BASELINE(FN);
  BI_FOREST_CASES(FN, f, const lshk_forest);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.path = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.path = "");
  BI_CASE(FN, LSHK_STATUS_IO_ERROR, a.path = "/nonexistent-dir-lshk/f.lshk");
#undef FN

#define FN lshk_forest_load
  BI_BASELINE(FN);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.path = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.path = "");
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out = BI_MISALIGN(lshk_forest *, &a.outv));
  BI_CASE(FN, LSHK_STATUS_IO_ERROR, a.path = "/nonexistent-dir-lshk/f.lshk");
  BI_CASE(FN, LSHK_STATUS_BAD_FILE_FORMAT, a.path = path_bad);
#undef FN

  remove(path_ok);
  remove(path_bad);
  rmdir(path_dir);
  bi_fx_need(lshk_forest_free(live), "lshk_forest_free");
  for (int i = 0; i < 4; i++) bi_fx_need(lshk_forest_free(pool[i]), "lshk_forest_free");
  bi_fx_teardown();
  return bi_summary("bad_input_forest");
}
