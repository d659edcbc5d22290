/* C tests of lshk_tables_*: good and bad inputs, canaries, the
 * BUFFER_TOO_SMALL + *needed protocol, update == rebuild. */
#include <math.h>

#include "lshk_test.h"

#define N 300
#define L 4
#define RB 5

static uint64_t rng_state = 12345;
static uint32_t next_u32(void) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (uint32_t)(rng_state >> 33);
}

static int gather_all(const lshk_tables *t, const uint32_t *codes, size_t q,
                      const lshk_gather_params *p, uint32_t **ids,
                      size_t *offsets, uint32_t **counts, size_t *needed) {
  lshk_status s = lshk_tables_gather(t, codes, q, p, NULL, 0, NULL, NULL, 0,
                                     NULL, 0, offsets, NULL, needed);
  if (s != LSHK_STATUS_BUFFER_TOO_SMALL && s != LSHK_STATUS_OK) return 0;
  *ids = malloc((*needed + 1) * sizeof **ids);
  *counts = malloc((*needed + 1) * sizeof **counts);
  return lshk_tables_gather(t, codes, q, p, NULL, 0, NULL, NULL, 0, *ids,
                            *needed, offsets, *counts,
                            needed) == LSHK_STATUS_OK;
}

int main(void) {
  static uint32_t codes[N * L];
  for (size_t i = 0; i < N * L; i++) codes[i] = next_u32() & 0xff;

  /* params */
  lshk_gather_params p = lshk_gather_params_default();
  CHECK(p.struct_size == sizeof(lshk_gather_params));
  CHECK(p.min_count == 1 && p.max_candidates == 0 && p.probes == 0);

  /* build: bad inputs, *out untouched */
  lshk_tables *canary_t = (lshk_tables *)(uintptr_t)0x1234;
  lshk_tables *t = canary_t;
  EXPECT_STATUS(lshk_tables_build(codes, N, L, RB, 0, 1, 1, NULL),
                LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_tables_build(NULL, N, L, RB, 0, 1, 1, &t),
                LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_tables_build(codes, N, 0, RB, 0, 1, 1, &t),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_tables_build(codes, N, L, 0, 0, 1, 1, &t),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_tables_build(codes, N, L, 25, 0, 1, 1, &t),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_tables_build(codes, SIZE_MAX, L, RB, 0, 1, 1, &t),
                LSHK_STATUS_SIZE_OVERFLOW);
  CHECK(t == canary_t);
  EXPECT_OK(lshk_tables_build(codes, N, L, RB, 0, 1, 0, &t));
  CHECK(t != canary_t && t != NULL);

  /* shape, memory, stats */
  size_t n = 0;
  uint32_t l = 0, rb = 0;
  EXPECT_OK(lshk_tables_shape(t, &n, &l, &rb));
  CHECK(n == N && l == L && rb == RB);
  {
    size_t mem = 0, keep = 12345;
    EXPECT_OK(lshk_tables_memory_bytes(t, &mem));
    CHECK(mem >= (size_t)N * L * 4);
    /* errors leave the output alone */
    mem = keep;
    EXPECT_STATUS(lshk_tables_memory_bytes(NULL, &mem), LSHK_STATUS_NULL_POINTER);
    EXPECT_STATUS(lshk_tables_memory_bytes(t, NULL), LSHK_STATUS_NULL_POINTER);
    CHECK(mem == keep);
  }
  lshk_table_stats st[L + 1];
  lshk_fill_canary(st, sizeof st);
  EXPECT_STATUS(lshk_tables_stats(t, st, L - 1), LSHK_STATUS_BUFFER_TOO_SMALL);
  CHECK(lshk_canary_intact(st, sizeof st));
  EXPECT_OK(lshk_tables_stats(t, st, L));
  CHECK(lshk_canary_intact(&st[L], sizeof st[L]));
  for (int i = 0; i < L; i++) {
    CHECK(st[i].stored_ids == N);
    CHECK(st[i].nonempty_buckets >= 1 && st[i].nonempty_buckets <= 32);
    CHECK(st[i].mean_bucket_size * (double)st[i].nonempty_buckets > N - 0.5);
  }

  /* gather: size protocol */
  const size_t q = 3;
  const uint32_t *qcodes = codes; /* rows 0..2 as queries */
  size_t offsets[q + 1], needed = 0;
  lshk_fill_canary(offsets, sizeof offsets);
  EXPECT_STATUS(lshk_tables_gather(t, qcodes, q, &p, NULL, 0, NULL, NULL, 0,
                                   NULL, 0, offsets, NULL, &needed),
                LSHK_STATUS_BUFFER_TOO_SMALL);
  CHECK(lshk_canary_intact(offsets, sizeof offsets));
  CHECK(needed >= q); /* each query finds at least itself */
  uint32_t *ids = malloc((needed + 4) * sizeof *ids);
  uint32_t *counts = malloc((needed + 4) * sizeof *counts);
  lshk_fill_canary(ids, (needed + 4) * sizeof *ids);
  size_t needed2 = 0;
  EXPECT_STATUS(lshk_tables_gather(t, qcodes, q, &p, NULL, 0, NULL, NULL, 0,
                                   ids, needed - 1, offsets, NULL, &needed2),
                LSHK_STATUS_BUFFER_TOO_SMALL);
  CHECK(needed2 == needed);
  CHECK(lshk_canary_intact(ids, (needed + 4) * sizeof *ids));
  EXPECT_OK(lshk_tables_gather(t, qcodes, q, &p, NULL, 0, NULL, NULL, 0, ids,
                               needed, offsets, counts, &needed2));
  CHECK(lshk_canary_intact(ids + needed, 4 * sizeof *ids));
  CHECK(offsets[0] == 0 && offsets[q] == needed);
  for (size_t i = 0; i < q; i++) {
    int self = 0;
    for (size_t j = offsets[i]; j < offsets[i + 1]; j++) {
      CHECK(ids[j] < N);
      if (j > offsets[i]) CHECK(ids[j] > ids[j - 1]);
      CHECK(counts[j] >= 1 && counts[j] <= L);
      if (ids[j] == i) {
        self = 1;
        CHECK(counts[j] == L);
      }
    }
    CHECK(self);
  }

  /* every supported tier gives the same answer */
  uint32_t *ids2 = malloc((needed + 4) * sizeof *ids2);
  size_t off2[q + 1];
  for (lshk_isa isa = LSHK_ISA_SCALAR; isa <= LSHK_ISA_AVX512; isa++) {
    lshk_status s = lshk_tables_gather_isa(isa, t, qcodes, q, &p, NULL, 0, NULL,
                                           NULL, 0, ids2, needed, off2, NULL,
                                           &needed2);
    if (isa > lshk_isa_detected()) {
      CHECK(s == LSHK_STATUS_UNSUPPORTED_ISA);
      printf("skipped: %s tier (CPU lacks it)\n", lshk_isa_name(isa));
      continue;
    }
    CHECK(s == LSHK_STATUS_OK);
    CHECK(memcmp(ids, ids2, needed * sizeof *ids) == 0);
    CHECK(memcmp(offsets, off2, sizeof off2) == 0);
  }
  EXPECT_STATUS(lshk_tables_gather_isa(7, t, qcodes, q, &p, NULL, 0, NULL,
                                       NULL, 0, ids2, needed, off2, NULL,
                                       &needed2),
                LSHK_STATUS_INVALID_ARGUMENT);

  /* bad gather inputs: nothing written */
  lshk_fill_canary(ids2, (needed + 4) * sizeof *ids2);
  lshk_fill_canary(off2, sizeof off2);
  size_t needed_c = 77;
#define BAD(call, want)                                                   \
  do {                                                                    \
    EXPECT_STATUS(call, want);                                            \
    CHECK(lshk_canary_intact(ids2, (needed + 4) * sizeof *ids2));         \
    CHECK(lshk_canary_intact(off2, sizeof off2));                         \
    CHECK(needed_c == 77);                                                \
  } while (0)
  lshk_gather_params small = p;
  small.struct_size = 4;
  BAD(lshk_tables_gather(t, qcodes, q, &small, NULL, 0, NULL, NULL, 0, ids2,
                         needed, off2, NULL, &needed_c),
      LSHK_STATUS_INVALID_ARGUMENT);
  BAD(lshk_tables_gather(NULL, qcodes, q, &p, NULL, 0, NULL, NULL, 0, ids2,
                         needed, off2, NULL, &needed_c),
      LSHK_STATUS_NULL_POINTER);
  BAD(lshk_tables_gather(t, NULL, q, &p, NULL, 0, NULL, NULL, 0, ids2, needed,
                         off2, NULL, &needed_c),
      LSHK_STATUS_NULL_POINTER);
  BAD(lshk_tables_gather(t, qcodes, q, &p, NULL, 0, NULL, NULL, 0, ids2,
                         needed, NULL, NULL, &needed_c),
      LSHK_STATUS_NULL_POINTER);
  size_t fo[q + 1];
  uint32_t fi[3] = {1, 2, N};
  fo[0] = 0, fo[1] = 1, fo[2] = 2, fo[3] = 3;
  BAD(lshk_tables_gather(t, qcodes, q, &p, NULL, 0, fo, fi, 3, ids2, needed,
                         off2, NULL, &needed_c),
      LSHK_STATUS_INDEX_OUT_OF_RANGE);
  fo[2] = 0;
  fi[2] = 5;
  BAD(lshk_tables_gather(t, qcodes, q, &p, NULL, 0, fo, fi, 3, ids2, needed,
                         off2, NULL, &needed_c),
      LSHK_STATUS_INVALID_ARGUMENT);
  BAD(lshk_tables_gather(t, qcodes, q, &p, NULL, 0, NULL, fi, 3, ids2, needed,
                         off2, NULL, &needed_c),
      LSHK_STATUS_NULL_POINTER);
  lshk_gather_params pp = p;
  pp.probes = 2;
  pp.bits_per_table = 8;
  float proj[q * L * 8];
  for (size_t i = 0; i < q * L * 8; i++) proj[i] = (float)(i % 7) - 3.0f;
  BAD(lshk_tables_gather(t, qcodes, q, &pp, NULL, 0, NULL, NULL, 0, ids2,
                         needed, off2, NULL, &needed_c),
      LSHK_STATUS_BUFFER_TOO_SMALL);
  proj[5] = NAN;
  BAD(lshk_tables_gather(t, qcodes, q, &pp, proj, q * L * 8, NULL, NULL, 0,
                         ids2, needed, off2, NULL, &needed_c),
      LSHK_STATUS_NON_FINITE);
  proj[5] = 0.5f;
  pp.bits_per_table = 33;
  BAD(lshk_tables_gather(t, qcodes, q, &pp, proj, q * L * 8, NULL, NULL, 0,
                         ids2, needed, off2, NULL, &needed_c),
      LSHK_STATUS_INVALID_ARGUMENT);
  pp.bits_per_table = 1;
  BAD(lshk_tables_gather(t, qcodes, q, &pp, proj, q * L * 8, NULL, NULL, 0,
                         ids2, needed, off2, NULL, &needed_c),
      LSHK_STATUS_INVALID_ARGUMENT); /* 2 probes > 2^1 - 1 */
  BAD(lshk_tables_gather(t, qcodes, q, &p, NULL, 0, NULL, NULL, 0,
                         (uint32_t *)((char *)ids2 + 1), needed, off2, NULL,
                         &needed_c),
      LSHK_STATUS_INVALID_ARGUMENT); /* misaligned */

  /* probes, forced ids, budget, min_count > L: all succeed */
  pp.bits_per_table = 8;
  fo[0] = 0, fo[1] = 3, fo[2] = 3, fo[3] = 3;
  fi[0] = 5, fi[1] = 5, fi[2] = 299;
  lshk_gather_params pb = pp;
  pb.max_candidates = 4;
  pb.min_count = L + 1;
  uint32_t big[4 * N];
  size_t nd = 0;
  EXPECT_OK(lshk_tables_gather(t, qcodes, q, &pb, proj, q * L * 8, fo, fi, 3,
                               big, 4 * N, off2, NULL, &nd));
  CHECK(off2[1] == 2 && big[0] == 5 && big[1] == 299); /* forced only */
  CHECK(off2[3] == 2);

  /* q = 0 */
  size_t off0[1] = {99};
  EXPECT_OK(lshk_tables_gather(t, NULL, 0, NULL, NULL, 0, NULL, NULL, 0, NULL,
                               0, off0, NULL, &nd));
  CHECK(off0[0] == 0 && nd == 0);

  /* update == rebuild */
  uint32_t uid[3] = {0, 7, 0};
  uint32_t ucodes[3 * L];
  for (int i = 0; i < 3 * L; i++) ucodes[i] = next_u32() & 0xff;
  EXPECT_STATUS(lshk_tables_update(t, (uint32_t[]){N}, ucodes, 1),
                LSHK_STATUS_INDEX_OUT_OF_RANGE);
  EXPECT_STATUS(lshk_tables_update(t, NULL, ucodes, 1),
                LSHK_STATUS_NULL_POINTER);
  EXPECT_OK(lshk_tables_update(t, uid, ucodes, 3));
  EXPECT_OK(lshk_tables_update(t, NULL, NULL, 0));
  for (int j = 0; j < 3; j++)
    memcpy(&codes[uid[j] * L], &ucodes[j * L], L * sizeof *codes);
  lshk_tables *fresh = NULL;
  EXPECT_OK(lshk_tables_build(codes, N, L, RB, 0, 1, 1, &fresh));
  uint32_t *ia, *ib, *ca, *cb;
  size_t oa[q + 1], ob[q + 1], na = 0, nb = 0;
  CHECK(gather_all(t, codes, q, &p, &ia, oa, &ca, &na));
  CHECK(gather_all(fresh, codes, q, &p, &ib, ob, &cb, &nb));
  CHECK(na == nb && memcmp(ia, ib, na * sizeof *ia) == 0);
  CHECK(memcmp(oa, ob, sizeof oa) == 0);
  free(ia), free(ib), free(ca), free(cb);

  /* free */
  EXPECT_OK(lshk_tables_free(fresh));
  EXPECT_OK(lshk_tables_free(t));
  EXPECT_STATUS(lshk_tables_free(t), LSHK_STATUS_INVALID_HANDLE);
  EXPECT_STATUS(lshk_tables_shape(t, &n, NULL, NULL),
                LSHK_STATUS_INVALID_HANDLE);
  {
    size_t mem = 777;
    EXPECT_STATUS(lshk_tables_memory_bytes(t, &mem), LSHK_STATUS_INVALID_HANDLE);
    CHECK(mem == 777);
  }
  EXPECT_OK(lshk_tables_free(NULL));
  free(ids), free(ids2), free(counts);
  return lshk_test_summary("tables");
}
