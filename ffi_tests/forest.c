/* The hashing forest through the C ABI (issue 14, item 4): build, shape,
 * per-sample candidates (a class's own row finds it), the capped union,
 * rebuild, save / load round trip, BUFFER_TOO_SMALL's *needed. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <unistd.h>

#include "lshk_test.h"

#define ROWS 500
#define DIM 10
#define NX 6
#define Q 12

static float w[ROWS * DIM], x[NX * DIM];
static uint32_t ids[NX * Q], ids2[NX * Q], uids[NX * Q], ucnt[NX * Q];
static size_t offs[NX + 1], offs2[NX + 1];

int main(void) {
  uint64_t s = 99;
  lshk_forest *f = NULL, *g = NULL;
  lshk_forest_params p = lshk_forest_params_default();
  size_t rows = 0, dim = 0, need = 0, need2 = 0;
  uint32_t trees = 0, seed2 = 0;
  uint64_t ns = 42;
  char path[256];
  const char *tmp = getenv("TMPDIR");
  (void)seed2;
  for (int i = 0; i < ROWS * DIM; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    w[i] = (float)(s >> 40) / 16777216.0f - 0.5f;
  }
  for (int i = 0; i < NX; i++)
    for (int d = 0; d < DIM; d++) x[i * DIM + d] = w[(i * 71) * DIM + d];
  p.trees = 4;
  p.leaf_size = 16;
  p.build_threads = 2;
  EXPECT_OK(lshk_forest_build(w, ROWS, DIM, DIM, &p, &f));
  EXPECT_OK(lshk_forest_shape(f, &rows, &dim, &trees));
  CHECK(rows == ROWS && dim == DIM && trees == 4);
  EXPECT_OK(lshk_forest_query(f, w, DIM, x, NX, DIM, Q, ids, NX * Q, offs, &need));
  CHECK(need == NX * Q && offs[NX] == need);
  for (int i = 0; i < NX; i++) {
    int found = 0;
    for (size_t k = offs[i]; k < offs[i + 1]; k++) found |= ids[k] == (uint32_t)(i * 71);
    CHECK(found);
  }
  EXPECT_STATUS(lshk_forest_query(f, w, DIM, x, NX, DIM, Q, ids2, need - 1, offs2, &need2),
                LSHK_STATUS_BUFFER_TOO_SMALL);
  CHECK(need2 == need);
  EXPECT_OK(lshk_forest_union(f, ids, need, 20, 7, uids, ucnt, NX * Q, &need2));
  CHECK(need2 == 20);
  for (size_t k = 1; k < need2; k++) CHECK(uids[k - 1] < uids[k]);
  EXPECT_OK(lshk_forest_union(f, ids, need, 0, 7, uids, NULL, NX * Q, &need2));
  CHECK(need2 <= need);

  snprintf(path, sizeof path, "%s/lshk-forest-c-%ld.lshk", tmp ? tmp : "/tmp", (long)getpid());
  EXPECT_OK(lshk_forest_save(f, path));
  EXPECT_OK(lshk_forest_load(path, &g));
  EXPECT_OK(lshk_forest_query(g, w, DIM, x, NX, DIM, Q, ids2, NX * Q, offs2, &need2));
  CHECK(need2 == need && memcmp(ids, ids2, need * 4) == 0);
  remove(path);

  EXPECT_OK(lshk_forest_rebuild(g, w, DIM, &ns));
  EXPECT_OK(lshk_forest_rebuild(g, w, DIM, NULL));
  EXPECT_STATUS(lshk_forest_rebuild(g, w, DIM - 1, NULL), LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_OK(lshk_forest_free(f));
  EXPECT_OK(lshk_forest_free(g));
  EXPECT_OK(lshk_forest_free(NULL));
  return lshk_test_summary("forest");
}
