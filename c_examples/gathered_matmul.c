/* Gathered matmul + top-k + softmax: the sublinear output layer's last step.
 *
 * A toy output layer of 10,000 rows x 64 floats; two queries, each with its
 * own candidate rows (as an LSH bucket gather would return them, in CSR
 * form). We compute the candidates' logits in f32 and in bf16, pick the top
 * 5 and turn the candidate logits into probabilities.
 *
 * Build: cc -std=c11 -Iinclude c_examples/gathered_matmul.c -Ltarget/release -llshk */
#include <stdio.h>
#include <stdlib.h>

#include "lshk.h"

enum { ROWS = 10000, DIM = 64, NQ = 2, K = 5 };

static int check(lshk_status s, const char *what) {
  if (s != LSHK_STATUS_OK) {
    char msg[256];
    lshk_last_error_message(msg, sizeof msg);
    fprintf(stderr, "%s failed: %s (%s)\n", what, lshk_status_name(s), msg);
    return 1;
  }
  return 0;
}

int main(void) {
  float *w = malloc(sizeof(float) * ROWS * DIM);
  uint16_t *wbf = malloc(sizeof(uint16_t) * ROWS * DIM);
  float q[NQ * DIM];
  if (!w || !wbf) return 1;
  uint64_t z = 42;
  for (size_t i = 0; i < (size_t)ROWS * DIM; i++) {
    z = z * 6364136223846793005ULL + 1442695040888963407ULL;
    w[i] = (float)((double)(z >> 40) / (double)(1 << 24) - 0.5);
  }
  for (int i = 0; i < NQ * DIM; i++) q[i] = (float)((i * 37) % 11) / 11.0f - 0.5f;

  /* Candidates: query 0 gets rows 0, 7, 14, ...; query 1 rows 3, 14, 25, ... */
  enum { N0 = 300, N1 = 200 };
  uint32_t ids[N0 + N1];
  size_t offsets[NQ + 1] = {0, N0, N0 + N1};
  for (int j = 0; j < N0; j++) ids[j] = (uint32_t)(7 * j);
  for (int j = 0; j < N1; j++) ids[N0 + j] = (uint32_t)(3 + 11 * j);

  /* The weights as views: the element type, the rows and their stride. */
  lshk_weights_view vf = {sizeof vf, LSHK_STORAGE_F32, w, NULL, NULL, ROWS, DIM, DIM};
  lshk_weights_view vb = {sizeof vb, LSHK_STORAGE_BF16, wbf, NULL, NULL, ROWS, DIM, DIM};

  float logits[N0 + N1], logits_bf[N0 + N1], probs[N0 + N1], lse[NQ];
  if (check(lshk_gathered_matmul(&vf, q, NQ, DIM, ids, offsets, logits, N0 + N1), "f32 matmul")) return 1;
  if (check(lshk_convert(LSHK_STORAGE_F32, w, (size_t)ROWS * DIM, LSHK_STORAGE_BF16, wbf), "bf16 conversion"))
    return 1;
  if (check(lshk_gathered_matmul(&vb, q, NQ, DIM, ids, offsets, logits_bf, N0 + N1), "bf16 matmul")) return 1;

  uint32_t top_ids[NQ * K];
  float top_scores[NQ * K];
  if (check(lshk_topk(logits, ids, offsets, NQ, K, top_ids, top_scores), "topk")) return 1;
  if (check(lshk_softmax(logits, offsets, NQ, probs, lse), "softmax")) return 1;

  printf("tier: %s\n", lshk_isa_name(lshk_isa_active()));
  for (int i = 0; i < NQ; i++) {
    printf("query %d: %zu candidates, log-sum-exp %.4f, top %d:\n", i, offsets[i + 1] - offsets[i], lse[i], K);
    for (int t = 0; t < K; t++) {
      uint32_t id = top_ids[i * K + t];
      size_t pos = offsets[i];
      while (ids[pos] != id) pos++;
      printf("  row %5u  logit %8.5f  (bf16 %8.5f)  p = %.4f\n", id, top_scores[i * K + t], logits_bf[pos],
             probs[pos]);
    }
  }

  /* A bad id is caught before anything is written. */
  ids[5] = ROWS;
  lshk_status s = lshk_gathered_matmul(&vf, q, NQ, DIM, ids, offsets, logits, N0 + N1);
  char msg[256];
  lshk_last_error_message(msg, sizeof msg);
  printf("with a bad id: %s (%s)\n", lshk_status_name(s), msg);
  free(w);
  free(wbf);
  return s == LSHK_STATUS_INDEX_OUT_OF_RANGE ? 0 : 1;
}
