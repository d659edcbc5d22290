/* Bad-input matrix (issue 8), holographic reduced representations:
 * lshk_hrr_* (issue 17). See bad_input.h for what a case asserts.
 *
 * Calls that succeed and write (other d, tiers, one key row, the exact
 * inverse, thread counts) are checked in ffi_tests/hrr.c and tests/hrr.rs;
 * here only the baselines and the no-op n = 0 calls succeed.
 *
 * Functions covered here:
 *   lshk_hrr_new lshk_hrr_new_isa lshk_hrr_free lshk_hrr_bind
 *   lshk_hrr_unbind lshk_hrr_project lshk_hrr_class_vectors */
#include "bad_input.h"

#define FX bi_fx()
#define HD 6 /* d of the fixture handle */
#define HN 3 /* rows */

static lshk_hrr *hrr_live;
static lshk_hrr *hrr_freed;

/* ---- lshk_hrr_new / lshk_hrr_new_isa ------------------------------------- */
typedef struct {
  size_t d;
  lshk_isa isa;
  lshk_hrr *outv;
  lshk_hrr **out;
} bi_args_lshk_hrr_new;
typedef bi_args_lshk_hrr_new bi_args_lshk_hrr_new_isa;
static void bi_init_lshk_hrr_new(bi_args_lshk_hrr_new *a, bi_outs *o) {
  a->d = 10;
  a->isa = LSHK_ISA_SCALAR;
  a->out = &a->outv;
  bi_out(o, &a->outv, sizeof a->outv);
}
#define bi_init_lshk_hrr_new_isa bi_init_lshk_hrr_new
static lshk_status hrr_new_done(lshk_status s, bi_args_lshk_hrr_new *a) {
  if (s == LSHK_STATUS_OK && a->out != NULL) lshk_hrr_free(*a->out);
  return s;
}
static lshk_status bi_call_lshk_hrr_new(bi_args_lshk_hrr_new *a) {
  return hrr_new_done(lshk_hrr_new(a->d, a->out), a);
}
static lshk_status bi_call_lshk_hrr_new_isa(bi_args_lshk_hrr_new *a) {
  return hrr_new_done(lshk_hrr_new_isa(a->d, a->isa, a->out), a);
}

/* ---- lshk_hrr_bind / lshk_hrr_unbind ------------------------------------- */
typedef struct {
  lshk_hrr *h;
  uint32_t inverse;
  float xv[HN * HD + 1];
  float yv[HN * HD + 1];
  float ov[HN * HD + 1];
  const float *x;
  size_t x_rows;
  const float *y;
  size_t n;
  float *out;
} bi_pair;
typedef bi_pair bi_args_lshk_hrr_bind;
typedef bi_pair bi_args_lshk_hrr_unbind;
static void pair_init(bi_pair *a, bi_outs *o) {
  for (int i = 0; i < HN * HD + 1; i++) {
    a->xv[i] = (float)((i * 7) % 11) * 0.125f - 0.6f;
    a->yv[i] = (float)((i * 5) % 13) * 0.1f - 0.5f;
  }
  a->h = hrr_live;
  a->inverse = LSHK_HRR_INVERSE_APPROX;
  a->x = a->xv;
  a->x_rows = HN;
  a->y = a->yv;
  a->n = HN;
  a->out = a->ov;
  bi_out(o, a->ov, sizeof a->ov);
}
#define bi_init_lshk_hrr_bind pair_init
#define bi_init_lshk_hrr_unbind pair_init
static lshk_status bi_call_lshk_hrr_bind(bi_pair *a) {
  return lshk_hrr_bind(a->h, a->x, a->x_rows, a->y, a->n, a->out);
}
static lshk_status bi_call_lshk_hrr_unbind(bi_pair *a) {
  return lshk_hrr_unbind(a->h, a->inverse, a->x, a->x_rows, a->y, a->n,
                         a->out);
}

/* The cases both two-operand calls share (x = the key for unbind). */
#define PAIR_CASES(FN)                                                         \
  do {                                                                         \
    BI_BASELINE(FN);                                                           \
    BI_HANDLE_CASES(FN, h, lshk_hrr, hrr_freed, (lshk_hrr *)NULL, hrr_live,    \
                    FX->idx, FX->sh);                                          \
    BI_CASE(FN, LSHK_STATUS_OK, a.n = 0; a.x_rows = 1; a.y = NULL;            \
            a.out = NULL);                                                     \
    BI_CASE(FN, LSHK_STATUS_OK, a.n = 0; a.x_rows = 0; a.x = NULL;            \
            a.y = NULL; a.out = NULL);                                         \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.x = NULL);                         \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.y = NULL);                         \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);                       \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.x_rows = 1; a.x = NULL);           \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.x_rows = 2);                   \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.x_rows = 0);                   \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.x_rows = HN + 1);              \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.n = 1; a.x_rows = 3);          \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.x = BI_MISALIGN(const float, a.xv));                             \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.y = BI_MISALIGN(const float, a.yv));                             \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.out = BI_MISALIGN(float, a.ov));                                 \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out = a.yv); /* overlap */     \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out = a.xv + 1);               \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.x = a.ov + 2; a.x_rows = 1);   \
    BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.n = SIZE_MAX; a.x_rows = 1);      \
    BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.n = SIZE_MAX / HD + 1;            \
            a.x_rows = 1);                                                     \
    BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.n = SIZE_MAX / 4 / HD + 1;        \
            a.x_rows = 1);                                                     \
    BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.xv[HD + 2] = NAN);                   \
    BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.xv[0] = INFINITY; a.x_rows = 1);     \
    BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.yv[HN * HD - 1] = -INFINITY);        \
    BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.yv[0] = NAN; a.x_rows = 1);          \
  } while (0)

/* ---- lshk_hrr_project ---------------------------------------------------- */
typedef struct {
  lshk_hrr *h;
  float xv[HN * HD + 1];
  float ov[HN * HD + 1];
  const float *x;
  size_t n;
  float *out;
} bi_args_lshk_hrr_project;
static void bi_init_lshk_hrr_project(bi_args_lshk_hrr_project *a,
                                     bi_outs *o) {
  for (int i = 0; i < HN * HD + 1; i++)
    a->xv[i] = (float)((i * 3) % 7) * 0.25f - 0.7f;
  a->h = hrr_live;
  a->x = a->xv;
  a->n = HN;
  a->out = a->ov;
  bi_out(o, a->ov, sizeof a->ov);
}
static lshk_status bi_call_lshk_hrr_project(bi_args_lshk_hrr_project *a) {
  return lshk_hrr_project(a->h, a->x, a->n, a->out);
}

/* ---- lshk_hrr_class_vectors ---------------------------------------------- */
typedef struct {
  uint64_t seed;
  size_t d;
  uint64_t first;
  size_t m;
  uint32_t threads;
  float ov[4 * 5 + 1];
  float *out;
} bi_args_lshk_hrr_class_vectors;
static void bi_init_lshk_hrr_class_vectors(bi_args_lshk_hrr_class_vectors *a,
                                           bi_outs *o) {
  a->seed = 42;
  a->d = 5;
  a->first = 7;
  a->m = 4;
  a->threads = 2;
  a->out = a->ov;
  bi_out(o, a->ov, sizeof a->ov);
}
static lshk_status bi_call_lshk_hrr_class_vectors(
    bi_args_lshk_hrr_class_vectors *a) {
  return lshk_hrr_class_vectors(a->seed, a->d, a->first, a->m, a->threads,
                                a->out);
}

/* ---- lshk_hrr_free ------------------------------------------------------- */
typedef struct {
  lshk_hrr *h;
} bi_args_lshk_hrr_free;
static void bi_init_lshk_hrr_free(bi_args_lshk_hrr_free *a, bi_outs *o) {
  (void)o;
  a->h = NULL;
}
static lshk_status bi_call_lshk_hrr_free(bi_args_lshk_hrr_free *a) {
  return lshk_hrr_free(a->h);
}

int main(void) {
  bi_fx_setup();
  bi_fx_need(lshk_hrr_new(HD, &hrr_live), "lshk_hrr_new");
  bi_fx_need(lshk_hrr_new(HD, &hrr_freed), "lshk_hrr_new");
  bi_fx_need(lshk_hrr_free(hrr_freed), "lshk_hrr_free");

#define FN lshk_hrr_new
  BI_BASELINE(FN);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out = BI_MISALIGN(lshk_hrr *, &a.outv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.d = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.d = (1u << 24) + 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.d = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL; a.d = 0);
#undef FN

#define FN lshk_hrr_new_isa
  BI_BASELINE(FN);
  BI_CASE_NO_AVX512(FN, LSHK_STATUS_UNSUPPORTED_ISA, a.isa = LSHK_ISA_AVX512);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.isa = 4);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.isa = 0xFFFFFFFFu);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.d = 0);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out = BI_MISALIGN(lshk_hrr *, &a.outv));
#undef FN

#define FN lshk_hrr_bind
  PAIR_CASES(FN);
#undef FN

#define FN lshk_hrr_unbind
  PAIR_CASES(FN);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.inverse = 2);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.inverse = 0xFFFFFFFFu);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.inverse = 2; a.n = 0;
          a.x_rows = 1);
#undef FN

#define FN lshk_hrr_project
  BI_BASELINE(FN);
  BI_HANDLE_CASES(FN, h, lshk_hrr, hrr_freed, (lshk_hrr *)NULL, hrr_live,
                  FX->idx, FX->tb);
  BI_CASE(FN, LSHK_STATUS_OK, a.n = 0; a.x = NULL; a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.x = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.x = BI_MISALIGN(const float, a.xv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out = BI_MISALIGN(float, a.ov));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out = a.xv + 1); /* overlap */
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.n = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.n = SIZE_MAX / 4 / HD + 1);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.xv[HD * 2 + 1] = NAN);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.xv[0] = -INFINITY);
#undef FN

#define FN lshk_hrr_class_vectors
  BI_BASELINE(FN);
  BI_CASE(FN, LSHK_STATUS_OK, a.m = 0; a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out = BI_MISALIGN(float, a.ov));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.d = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.d = (1u << 24) + 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.d = 0; a.m = 0; a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.m = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.m = SIZE_MAX / 5 + 1);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.m = SIZE_MAX / 4 / 5 + 1);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.first = UINT64_MAX - 2);
#undef FN

#define FN lshk_hrr_free
  BI_BASELINE(FN);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.h = hrr_freed);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.h = (lshk_hrr *)(void *)FX->idx);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.h = (lshk_hrr *)(void *)FX->sh);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE,
          a.h = (lshk_hrr *)(void *)FX->sh_borrowed);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.h = BI_GARBAGE(lshk_hrr));
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.h = BI_MISALIGN(lshk_hrr, hrr_live));
#undef FN

  bi_fx_need(lshk_hrr_free(hrr_live), "lshk_hrr_free");
  bi_fx_teardown();
  return bi_summary("bad_input_hrr");
}
