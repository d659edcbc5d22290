// lshk::Graph (include/lshk.hpp) against the same calls through the C API
// (and lshk::Index with the graph family against lshk::Graph):
// build, query (spans and TopK), stats, save/load, memory, move-only
// ownership, and the wrapper's size checks throwing lshk::Error before
// calling C.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "lshk.hpp"

static_assert(!std::is_copy_constructible<lshk::Graph>::value, "owners are move-only");
static_assert(std::is_nothrow_move_constructible<lshk::Graph>::value, "noexcept move");

static int failed = 0, passed = 0;
#define EXPECT(c)                                                           \
  do {                                                                      \
    if (c) {                                                                \
      passed++;                                                             \
    } else {                                                                \
      failed++;                                                             \
      std::fprintf(stderr, "%s:%d: EXPECT failed: %s\n", __FILE__, __LINE__, #c); \
    }                                                                       \
  } while (0)

int main() {
  const std::size_t rows = 300, dim = 12, nq = 5;
  const uint32_t k = 4, ef = 32;
  std::vector<float> w(rows * dim), bias(rows), q(nq * dim);
  uint64_t s = 5;
  auto next = [&s]() {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return float(double(s >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
  };
  for (float &v : w) v = next();
  for (float &v : bias) v = 0.1f * next();
  for (float &v : q) v = next();

  lshk::GraphParams p;
  EXPECT(p.struct_size == sizeof(lshk_graph_params) && p.m == 16);
  p.m = 8;
  p.ef_construction = 40;
  lshk::Graph g(w, bias, rows, dim, dim, p);
  EXPECT(g && g.rows() == rows && g.dim() == dim);
  std::size_t mem = 0;
  lshk_graph *raw = nullptr;
  EXPECT(lshk_graph_build(w.data(), bias.data(), rows, dim, dim, &p, &raw) == LSHK_STATUS_OK);
  EXPECT(lshk_graph_memory_bytes(raw, &mem) == LSHK_STATUS_OK && g.memory_bytes() == mem);
  std::vector<uint32_t> want_ids(nq * k);
  std::vector<float> want_sc(nq * k);
  lshk_graph_stats cst;
  cst.struct_size = sizeof cst;
  EXPECT(lshk_graph_query(raw, q.data(), nq, dim, k, ef, want_ids.data(), want_sc.data(), &cst) ==
         LSHK_STATUS_OK);
  lshk::GraphStats st;
  lshk::TopK r = g.query(q, k, ef, &st);
  EXPECT(r.ids == want_ids && r.scores == want_sc && st.distances == cst.distances);
  EXPECT(r.queries() == nq);
  /* The int8 walk through lshk_graph_query_ex and the wrapper. */
  lshk::GraphQueryParams qp;
  EXPECT(qp.struct_size == sizeof(lshk_graph_query_params) && qp.walk == LSHK_GRAPH_WALK_EXACT);
  qp.ef = ef;
  lshk::TopK rx = g.query(qp, q, k);
  EXPECT(rx.ids == want_ids && rx.scores == want_sc); /* WALK_EXACT = lshk_graph_query */
  qp.walk = LSHK_GRAPH_WALK_INT8;
  std::vector<uint32_t> wi(nq * k);
  std::vector<float> ws(nq * k);
  EXPECT(lshk_graph_query_ex(raw, &qp, q.data(), nq, dim, k, wi.data(), ws.data(), nullptr) ==
         LSHK_STATUS_OK);
  lshk::TopK rw = g.query(qp, q, k);
  EXPECT(rw.ids == wi && rw.scores == ws);

  const std::string path = "/tmp/lshk-graph-wrapper-" + std::to_string(uintptr_t(&s)) + ".lshk";
  g.save(path);
  lshk::Graph back = lshk::Graph::load(path);
  std::remove(path.c_str());
  lshk::TopK r2 = back.query(q, k, ef);
  EXPECT(r2.ids == want_ids && r2.scores == want_sc && back.memory_bytes() == mem);

  bool threw = false;
  try {
    std::vector<uint32_t> small(nq * k - 1);
    std::vector<float> sc(nq * k);
    g.query(q, nq, dim, k, ef, small, sc);
  } catch (const lshk::Error &e) {
    threw = e.status() == LSHK_STATUS_BUFFER_TOO_SMALL;
  }
  EXPECT(threw);
  threw = false;
  try {
    g.query(q, k, 0);
  } catch (const lshk::Error &e) {
    threw = e.status() == LSHK_STATUS_INVALID_ARGUMENT &&
            std::strncmp(e.message(), "lshk_graph_query", 16) == 0;
  }
  EXPECT(threw);
  /* The graph family of lshk::Index: IndexParams::set_graph + the
   * constructor with lshk_graph_params (lshk_index_build_ex) and the
   * query with lshk_graph_query_params (lshk_index_query_ex): with rerank
   * k the index re-scores exactly the k rows the graph returns. */
  {
    lshk::IndexParams ip;
    ip.set_graph();
    EXPECT(ip.family == LSHK_FAMILY_GRAPH);
    lshk::Index idx(w, bias, rows, dim, dim, ip, p);
    EXPECT(idx.rows() == rows && idx.dim() == dim);
    lshk::GraphQueryParams gq;
    gq.ef = ef;
    gq.rerank = k;
    for (uint32_t walk : {LSHK_GRAPH_WALK_EXACT, LSHK_GRAPH_WALK_INT8}) {
      gq.walk = walk;
      lshk::QueryStats ist;
      lshk::TopK ri = idx.query(gq, q, k, nullptr, &ist);
      lshk::TopK rg = g.query(gq, q, k);
      EXPECT(ist.queries == nq && ist.candidates_total == nq * k);
      for (std::size_t i = 0; i < nq; i++) {
        std::vector<uint32_t> a(ri.ids.begin() + i * k, ri.ids.begin() + (i + 1) * k);
        std::vector<uint32_t> b(rg.ids.begin() + i * k, rg.ids.begin() + (i + 1) * k);
        std::sort(a.begin(), a.end());
        std::sort(b.begin(), b.end());
        EXPECT(a == b);
        for (std::size_t j = 1; j < k; j++) EXPECT(ri.scores[i * k + j - 1] >= ri.scores[i * k + j]);
      }
    }
    /* Without graph options: lshk_graph_query_params_default(). */
    lshk::TopK rd = idx.query(q, k);
    lshk::TopK rd2 = idx.query(lshk::GraphQueryParams(), q, k);
    EXPECT(rd.ids == rd2.ids && rd.scores == rd2.scores);
    threw = false;
    try {
      lshk::GraphQueryParams bad;
      bad.ef = 0;
      idx.query(bad, q, k);
    } catch (const lshk::Error &e) {
      threw = e.status() == LSHK_STATUS_INVALID_ARGUMENT;
    }
    EXPECT(threw);
  }

  lshk::Graph moved = std::move(g);
  EXPECT(moved.get() != nullptr && g.get() == nullptr);
  lshk_graph_free(raw);
  std::printf("graph_wrapper: %d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
