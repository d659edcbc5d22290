/* The C side of python/bench/overhead.py: builds the same Index and Ivf as
 * the Python side (same W, same parameters: a SimHash-source and an
 * IVF-source lshk_index) and times the same B = 1 query loop through the C
 * API. Prints "<name> <ns per call>" lines.
 *   overhead W.bin rows dim Q.bin nq k iters */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "lshk.h"

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static float *read_f32(const char *path, size_t n) {
  float *v = malloc(n * sizeof *v);
  FILE *f = fopen(path, "rb");
  if (!v || !f || fread(v, sizeof *v, n, f) != n) {
    fprintf(stderr, "cannot read %s\n", path);
    exit(1);
  }
  fclose(f);
  return v;
}

#define CHECK(s)                                                 \
  do {                                                           \
    if ((s) != LSHK_STATUS_OK) {                                 \
      char m[512];                                               \
      lshk_last_error_message(m, sizeof m);                      \
      fprintf(stderr, "%s\n", m);                                \
      exit(1);                                                   \
    }                                                            \
  } while (0)

int main(int argc, char **argv) {
  if (argc != 8) return 2;
  size_t rows = strtoull(argv[2], NULL, 10), dim = strtoull(argv[3], NULL, 10);
  size_t nq = strtoull(argv[5], NULL, 10);
  uint32_t k = (uint32_t)strtoul(argv[6], NULL, 10);
  long iters = strtol(argv[7], NULL, 10);
  float *w = read_f32(argv[1], rows * dim), *q = read_f32(argv[4], nq * dim);
  uint32_t *ids = malloc(k * sizeof *ids);
  float *scores = malloc(k * sizeof *scores);

  lshk_index_params p = lshk_index_params_default();
  p.lsh.bits_per_table = 12;
  p.lsh.tables = 8;
  lshk_index *idx;
  CHECK(lshk_index_build(w, NULL, rows, dim, dim, &p, &idx));
  lshk_index *ivf;
  lshk_index_params ip = lshk_index_params_default();
  ip.source = LSHK_SOURCE_IVF;
  ip.storage = LSHK_STORAGE_BORROWED_F32; /* the IVF default: W in place */
  CHECK(lshk_index_build(w, NULL, rows, dim, dim, &ip, &ivf));

  lshk_query_params sp = lshk_query_params_default();
  sp.ivf.nprobe = 4; /* 4 lists, no adaptive reach: a cheap query */
  sp.ivf.reach = 0.0f;
  for (int rep = 0; rep < 3; rep++) {
    double t0 = now_ns();
    for (long i = 0; i < iters; i++)
      CHECK(lshk_index_query(idx, q + (i % nq) * dim, 1, dim, k, NULL, ids, scores, NULL));
    double t1 = now_ns();
    for (long i = 0; i < iters; i++)
      CHECK(lshk_index_query(ivf, q + (i % nq) * dim, 1, dim, k, &sp, ids, scores, NULL));
    double t2 = now_ns();
    printf("index %.1f\nivf %.1f\n", (t1 - t0) / iters, (t2 - t1) / iters);
  }
  lshk_index_free(ivf);
  lshk_index_free(idx);
  return 0;
}
