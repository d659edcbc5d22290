/* Bad-input matrix (issue 8) for the gather budget rules (issue 14, item
 * 3): lshk_tables_gather_budget gets every case of lshk_tables_gather (the
 * same argument struct and list, copied from bad_input_tables.c) plus its
 * budget params: NULL, larger struct_size, each rule accepted; too small
 * struct_size, unknown rules and a misaligned pointer refused. See
 * bad_input.h for what a case asserts.
 *
 * Functions covered here:
 *   lshk_tables_gather_budget lshk_budget_params_default */
#include "bad_input.h"

#define FX bi_fx()
#define TL BI_FX_L
#define TNR BI_FX_ROWS
#define GK 4 /* bits per table for multi-probing */

/* ---- lshk_tables_gather_budget (the lshk_tables_gather cases, + budget) -- */
#define GQ 2
typedef struct {
  lshk_isa isa;
  const lshk_tables *t;
  uint32_t cv[GQ * TL];
  lshk_gather_params gp;
  lshk_budget_params bp;
  struct {
    lshk_budget_params p;
    unsigned char tail[24];
  } bigb;
  const lshk_budget_params *budget;
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
  a->bp = lshk_budget_params_default();
  a->bp.rule = LSHK_BUDGET_WHOLE_BUCKETS;
  a->bp.seed = 5;
  a->bigb.p = a->bp;
  a->bigb.p.struct_size = (uint32_t)sizeof a->bigb;
  memset(a->bigb.tail, 0x66, sizeof a->bigb.tail);
  a->budget = &a->bp;
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
typedef bi_gather bi_args_lshk_tables_gather_budget;
#define bi_init_lshk_tables_gather_budget gather_init
static lshk_status bi_call_lshk_tables_gather_budget(bi_gather *a) {
  return lshk_tables_gather_budget(a->t, a->codes, a->q, a->params, a->budget,
                                   a->projections, a->projections_len,
                                   a->forced_offsets, a->forced_ids,
                                   a->forced_ids_len, a->ids, a->ids_len,
                                   a->offsets, a->counts, a->needed);
}

int main(void) {
  bi_fx_setup();
  {
    lshk_budget_params d = lshk_budget_params_default();
    BI_EXPECT(lshk_budget_params_default,
              d.struct_size == sizeof(lshk_budget_params) &&
                  d.rule == LSHK_BUDGET_MID_BUCKET && d.seed == 0);
  }
#define FN lshk_tables_gather_budget
  {
    bi_gather g;
    bi_outs o;
    memset(&g, 0, sizeof g);
    memset(&o, 0, sizeof o);
    gather_init(&g, &o);
    bi_fx_need(bi_call_lshk_tables_gather_budget(&g), "lshk_tables_gather_budget");
    gather_need = g.nb;
  }
  GATHER_CASES(FN);
  BI_ACCEPT(FN, a.budget = NULL);
  BI_ACCEPT(FN, a.budget = &a.bigb.p);
  BI_ACCEPT(FN, a.bp.rule = LSHK_BUDGET_MID_BUCKET);
  BI_ACCEPT(FN, a.bp.rule = LSHK_BUDGET_MID_BUCKET_ROTATED; a.gp.max_candidates = 3);
  BI_ACCEPT(FN, a.bp.rule = LSHK_BUDGET_WHOLE_BUCKETS; a.gp.max_candidates = 1;
            a.bp.seed = UINT64_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.bp.struct_size = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.bp.struct_size = (uint32_t)sizeof(lshk_budget_params) - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.bp.rule = 3);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.bp.rule = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.budget = BI_MISALIGN(const lshk_budget_params, &a.bp));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.bp.rule = 3; a.q = 0);
#undef FN
  bi_fx_teardown();
  return bi_summary("bad_input_budget");
}
