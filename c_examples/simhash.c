/* SimHash from C: hash a few vectors and show that similar vectors agree on
 * more code bits than unrelated ones (signed random projections: two
 * vectors at angle theta agree on a bit with probability 1 - theta/pi).
 *
 * Build: see Makefile / CMakeLists.txt in this directory (pkg-config lshk). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "lshk.h"

enum { DIM = 128, K = 16, L = 32, N = 3 };

/* Reports a failed lshk call with its status name and message, then exits. */
static void check(lshk_status st, const char *what) {
  if (st != LSHK_STATUS_OK) {
    char msg[256];
    lshk_last_error_message(msg, sizeof msg);
    fprintf(stderr, "%s failed: %s (%s)\n", what, lshk_status_name(st), msg);
    exit(1);
  }
}

/* A small deterministic generator for the example's data (not lshk's). */
static uint64_t state = 0x9E3779B97F4A7C15u;
static float uniform_pm1(void) {
  state = state * 6364136223846793005u + 1442695040888963407u;
  return (float)((double)(state >> 40) / (double)(1u << 24)) * 2.0f - 1.0f;
}

static int popcount32(uint32_t v) {
  int c = 0;
  for (; v; v &= v - 1) c++;
  return c;
}

static double cosine(const float *a, const float *b) {
  double ab = 0, aa = 0, bb = 0;
  for (int j = 0; j < DIM; j++) {
    ab += (double)a[j] * b[j];
    aa += (double)a[j] * a[j];
    bb += (double)b[j] * b[j];
  }
  return ab / sqrt(aa * bb);
}

int main(void) {
  printf("lshk %s; CPU tier %s, active tier %s\n", lshk_version(),
         lshk_isa_name(lshk_isa_detected()), lshk_isa_name(lshk_isa_active()));

  lshk_simhash *h = NULL;
  check(lshk_simhash_new(DIM, K, L, 0 /* dense Gaussian */, 42, &h),
        "lshk_simhash_new");

  /* Row 0: random; row 1: row 0 plus a little noise; row 2: random. */
  static float x[N * DIM];
  for (int j = 0; j < DIM; j++) {
    x[j] = uniform_pm1();
    x[DIM + j] = x[j] + 0.3f * uniform_pm1();
    x[2 * DIM + j] = uniform_pm1();
  }

  uint32_t codes[N * L];
  check(lshk_simhash_hash(h, x, N, DIM, codes, N * L), "lshk_simhash_hash");

  for (int i = 0; i < N; i++)
    printf("row %d, tables 0..3: %08x %08x %08x %08x\n", i,
           (unsigned)codes[i * L + 0], (unsigned)codes[i * L + 1],
           (unsigned)codes[i * L + 2], (unsigned)codes[i * L + 3]);

  const double pi = 3.14159265358979323846;
  for (int b = 1; b < N; b++) {
    int same = 0;
    for (int l = 0; l < L; l++)
      same += K - popcount32(codes[l] ^ codes[b * L + l]);
    double c = cosine(x, x + b * DIM);
    printf("rows 0 and %d: cosine %.3f, %d of %d bits agree (expected %.0f)\n",
           b, c, same, K * L, (1.0 - acos(c) / pi) * K * L);
  }

  check(lshk_simhash_free(h), "lshk_simhash_free");
  return 0;
}
