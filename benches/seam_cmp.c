/* seam_cmp.c: lshk_index_query cost at B = 1, top-10, through the C ABI
 * only, so that two versions of liblshk.so (before and after a change of
 * the Rust API) run the very same driver (docs/architecture.md, "Query cost
 * before and after, with probes (Zen 4)").
 *
 * Build (against the header of the library it runs with):
 *   cc -O2 -std=c11 -Iinclude benches/seam_cmp.c -Ltarget/release -llshk \
 *      -lm -o /tmp/seam_cmp
 * Run:  LD_LIBRARY_PATH=... LSHK_MAX_ISA=avx2 /tmp/seam_cmp L2|L3 PROBES [SAMPLES]
 *
 * Cases: L2 = 1,024 x 64, K 8, L 16; L3 = 16,384 x 128, K 12, L 32; SimHash
 * (Gaussian planes, seed 1), F32 storage, no transform, one build thread.
 * W, the bias and 256 queries come from a fixed xorshift generator. One
 * sample = the 256 queries, one lshk_index_query call each (nq = 1), timed
 * with CLOCK_THREAD_CPUTIME_ID; SAMPLES (default 101) samples after
 * SAMPLES / 10 + 1 warm-up passes;
 * prints the median (and quartiles) per query in ns, plus an FNV-1a hash of
 * all returned ids and scores, which must match between versions.
 */
#define _POSIX_C_SOURCE 199309L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lshk.h"

#define NQ 256
#define TOPK 10

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float next_unit(void) { /* uniform in [-1, 1) */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static double thread_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void check(lshk_status s, const char *what) {
    if (s != LSHK_STATUS_OK) {
        char msg[256];
        lshk_last_error_message(msg, sizeof msg);
        fprintf(stderr, "%s: status %u: %s\n", what, (unsigned)s, msg);
        exit(1);
    }
}

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: seam_cmp L2|L3 PROBES [SAMPLES]\n");
        return 2;
    }
    int l3 = strcmp(argv[1], "L3") == 0;
    size_t rows = l3 ? 16384 : 1024, dim = l3 ? 128 : 64;
    uint32_t K = l3 ? 12 : 8, L = l3 ? 32 : 16;
    uint32_t probes = (uint32_t)atoi(argv[2]);
    int SAMPLES = argc == 4 ? atoi(argv[3]) : 101, WARMUP = SAMPLES / 10 + 1;
    if (SAMPLES < 1) return 2;

    float *w = malloc(rows * dim * sizeof *w), *b = malloc(rows * sizeof *b);
    float *q = malloc(NQ * dim * sizeof *q);
    uint32_t *ids = malloc(NQ * TOPK * sizeof *ids);
    float *sc = malloc(NQ * TOPK * sizeof *sc);
    double *t = malloc(SAMPLES * sizeof *t);
    if (!w || !b || !q || !ids || !sc || !t) return 1;
    for (size_t i = 0; i < rows * dim; i++) w[i] = next_unit();
    for (size_t i = 0; i < rows; i++) b[i] = 0.1f * next_unit();
    for (size_t i = 0; i < NQ * dim; i++) q[i] = next_unit();

    struct lshk_index_params p = lshk_index_params_default();
    p.bits_per_table = K;
    p.tables = L;
    p.seed = 1;
    p.build_threads = 1;
    struct lshk_index *idx = NULL;
    check(lshk_index_build(w, b, rows, dim, dim, &p, &idx), "build");

    struct lshk_gather_params g = lshk_gather_params_default();
    g.probes = probes;
    g.bits_per_table = probes ? K : 0;
    struct lshk_query_stats st;
    uint64_t cands = 0;
    for (int pass = 0; pass < WARMUP + SAMPLES; pass++) {
        double t0 = thread_ns();
        for (size_t i = 0; i < NQ; i++) {
            memset(&st, 0, sizeof st);
            st.struct_size = sizeof st;
            check(lshk_index_query(idx, q + i * dim, 1, dim, TOPK, &g, ids + i * TOPK,
                                   sc + i * TOPK, &st),
                  "query");
            if (pass == 0) cands += st.candidates_total;
        }
        double t1 = thread_ns();
        if (pass >= WARMUP) t[pass - WARMUP] = (t1 - t0) / NQ;
    }
    qsort(t, SAMPLES, sizeof *t, cmp_d);

    uint64_t h = 1469598103934665603ull; /* FNV-1a over ids, then scores */
    const unsigned char *bytes[2] = {(const unsigned char *)ids, (const unsigned char *)sc};
    for (int a = 0; a < 2; a++)
        for (size_t i = 0; i < NQ * TOPK * 4; i++) h = (h ^ bytes[a][i]) * 1099511628211ull;
    uint64_t hid = 1469598103934665603ull;
    for (size_t i = 0; i < NQ * TOPK * 4; i++) hid = (hid ^ bytes[0][i]) * 1099511628211ull;

    printf("%s probes=%u tier=%s median_ns=%.1f q1=%.1f q3=%.1f cand/q=%.1f ids=%016llx "
           "ids+scores=%016llx\n",
           argv[1], probes, lshk_isa_name(lshk_isa_active()), t[SAMPLES / 2], t[SAMPLES / 4],
           t[3 * SAMPLES / 4], (double)cands / NQ, (unsigned long long)hid,
           (unsigned long long)h);
    lshk_index_free(idx);
    free(w), free(b), free(q), free(ids), free(sc), free(t);
    return 0;
}
