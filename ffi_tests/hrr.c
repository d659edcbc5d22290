/* lshk_hrr_* from C (issue 17): bind against a direct circular
 * convolution, unbind with both inverses, projection, class vectors
 * (unit norm, reproducible, independent of threads and of the first row),
 * every tier the CPU has returning the same bits, and the retrieval step
 * of the HRR pipeline (unbind a sum of bound labels, find the labels). */
#include <math.h> /* NAN only */

#include "lshk_test.h"

#define D 64
#define M 200

static double conv_at(const float *x, const float *y, int j) {
  double s = 0.0;
  for (int i = 0; i < D; i++) s += (double)x[i] * (double)y[(j - i + D) % D];
  return s;
}

/* No libm: the harness links -llshk only. */
static double fabs_(double v) { return v < 0 ? -v : v; }
#define fabs fabs_

static double norm2(const float *v, int n) {
  double s = 0.0;
  for (int i = 0; i < n; i++) s += (double)v[i] * (double)v[i];
  return s;
}

int main(void) {
  static float cls[M * D], again[M * D], part[5 * D];
  float x[2 * D], y[2 * D], z[2 * D], back[2 * D], p[2 * D], ref[2 * D];
  lshk_hrr *h = NULL;
  double err = 0.0;

  EXPECT_OK(lshk_hrr_new(D, &h));

  /* class vectors: unit norm, reproducible, row-addressable */
  EXPECT_OK(lshk_hrr_class_vectors(42, D, 0, M, 0, cls));
  EXPECT_OK(lshk_hrr_class_vectors(42, D, 0, M, 1, again));
  CHECK(memcmp(cls, again, sizeof cls) == 0);
  EXPECT_OK(lshk_hrr_class_vectors(42, D, 10, 5, 3, part));
  CHECK(memcmp(part, cls + 10 * D, sizeof part) == 0);
  for (int r = 0; r < M; r++) CHECK(fabs(norm2(cls + r * D, D) - 1.0) < 2e-5);

  /* bind vs the direct convolution (d = 64: the bound of docs/hrr.md is
   * far below 1e-4 for unit vectors) */
  for (int i = 0; i < 2 * D; i++) {
    x[i] = cls[i];
    y[i] = cls[2 * D + i];
  }
  EXPECT_OK(lshk_hrr_bind(h, x, 2, y, 2, z));
  for (int r = 0; r < 2; r++)
    for (int j = 0; j < D; j++) {
      double e = fabs(conv_at(x + r * D, y + r * D, j) - z[r * D + j]);
      if (e > err) err = e;
    }
  CHECK(err < 1e-5);

  /* unbind with the projected key: both inverses recover y */
  for (uint32_t inv = 0; inv <= 1; inv++) {
    double e = 0.0;
    EXPECT_OK(lshk_hrr_unbind(h, inv, x, 2, z, 2, back));
    for (int i = 0; i < 2 * D; i++)
      if (fabs(back[i] - y[i]) > e) e = fabs(back[i] - y[i]);
    CHECK(e < 1e-5);
  }

  /* projecting a projected vector changes it by ~1e-5 only */
  EXPECT_OK(lshk_hrr_project(h, x, 2, p));
  for (int i = 0; i < 2 * D; i++) CHECK(fabs(p[i] - x[i]) < 1e-5);

  /* every tier: the same bits */
  for (lshk_isa t = LSHK_ISA_SCALAR; t <= lshk_isa_detected(); t++) {
    lshk_hrr *ht = NULL;
    EXPECT_OK(lshk_hrr_new_isa(D, t, &ht));
    EXPECT_OK(lshk_hrr_bind(ht, x, 1, y, 2, ref));
    EXPECT_OK(lshk_hrr_bind(h, x, 1, y, 2, back));
    CHECK(memcmp(ref, back, sizeof ref) == 0);
    EXPECT_OK(lshk_hrr_free(ht));
  }

  /* retrieval: s = key (*) (c_3 + c_50 + c_77); unbind, then the three
   * largest inner products with the class vectors are those labels */
  {
    float s[D], sum[D], u[D];
    double best[3] = {-1e9, -1e9, -1e9};
    int arg[3] = {-1, -1, -1};
    for (int j = 0; j < D; j++)
      sum[j] = cls[3 * D + j] + cls[50 * D + j] + cls[77 * D + j];
    EXPECT_OK(lshk_hrr_bind(h, cls + 199 * D, 1, sum, 1, s));
    EXPECT_OK(lshk_hrr_unbind(h, LSHK_HRR_INVERSE_APPROX, cls + 199 * D, 1, s,
                              1, u));
    for (int r = 0; r < 199; r++) {
      double dot = 0.0;
      for (int j = 0; j < D; j++) dot += (double)cls[r * D + j] * u[j];
      for (int k = 0; k < 3; k++)
        if (dot > best[k]) {
          for (int l = 2; l > k; l--) {
            best[l] = best[l - 1];
            arg[l] = arg[l - 1];
          }
          best[k] = dot;
          arg[k] = r;
          break;
        }
    }
    CHECK((arg[0] == 3 || arg[0] == 50 || arg[0] == 77) &&
          (arg[1] == 3 || arg[1] == 50 || arg[1] == 77) &&
          (arg[2] == 3 || arg[2] == 50 || arg[2] == 77));
  }

  /* errors */
  EXPECT_STATUS(lshk_hrr_new(0, &h), LSHK_STATUS_INVALID_ARGUMENT);
  y[5] = NAN;
  EXPECT_STATUS(lshk_hrr_bind(h, x, 1, y, 2, z), LSHK_STATUS_NON_FINITE);
  EXPECT_STATUS(lshk_hrr_unbind(h, 7, x, 1, y, 2, z),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_OK(lshk_hrr_free(h));
  EXPECT_STATUS(lshk_hrr_free(h), LSHK_STATUS_INVALID_HANDLE);
  EXPECT_OK(lshk_hrr_free(NULL));
  return lshk_test_summary("hrr");
}
