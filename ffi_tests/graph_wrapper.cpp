// lshk::Index with the graph source (include/lshk.hpp) against the same
// calls through the C API: build (graph knobs in IndexParams::graph),
// query (spans and TopK) with both walks, stats, candidates, save/load,
// memory, describe, move-only ownership, the calls the graph does not
// have (UNSUPPORTED), and the wrapper's size checks throwing lshk::Error
// before calling C.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "lshk.hpp"

static_assert(!std::is_copy_constructible<lshk::Index>::value, "owners are move-only");
static_assert(std::is_nothrow_move_constructible<lshk::Index>::value, "noexcept move");

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

// The status `f` throws (OK when it does not), and the message's prefix.
template <class F>
static lshk_status status_of(F f, std::string *message = nullptr) {
  try {
    f();
  } catch (const lshk::Error &e) {
    if (message) *message = e.message();
    return e.status();
  }
  return LSHK_STATUS_OK;
}

static bool same_bits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

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

  try {
    lshk::IndexParams p(LSHK_SOURCE_GRAPH);
    EXPECT(p.source == LSHK_SOURCE_GRAPH && p.graph.m == 16 &&
           p.graph.storage == LSHK_STORAGE_F32);
    p.graph.m = 8;
    p.graph.ef_construction = 40;
    p.build_threads = 1;
    lshk::Index g(w, bias, rows, dim, dim, p);
    lshk_index_info info = g.describe();
    EXPECT(g && g.rows() == rows && g.dim() == dim && info.source == LSHK_SOURCE_GRAPH &&
           info.storage == LSHK_STORAGE_F32 && info.tables == 0 && info.nlist == 0);
    std::size_t mem = 0;
    lshk_index *raw = nullptr;
    EXPECT(lshk_index_build(w.data(), bias.data(), rows, dim, dim, &p, &raw) == LSHK_STATUS_OK);
    EXPECT(lshk_index_memory_bytes(raw, &mem) == LSHK_STATUS_OK && g.memory_bytes() == mem);

    // The exact walk, a pool of ef: the C call's answer and stats.
    lshk::QueryParams qp = lshk::QueryParams::for_graph(ef);
    EXPECT(qp.graph.ef == ef && qp.graph.walk == LSHK_GRAPH_WALK_EXACT && qp.graph.rerank == 0);
    std::vector<uint32_t> want_ids(nq * k);
    std::vector<float> want_sc(nq * k);
    lshk_query_stats cst;
    std::memset(&cst, 0, sizeof cst);
    cst.struct_size = sizeof cst;
    EXPECT(lshk_index_query(raw, q.data(), nq, dim, k, &qp, want_ids.data(), want_sc.data(),
                            &cst) == LSHK_STATUS_OK);
    lshk::QueryStats st;
    lshk::TopK r = g.query(q, k, qp, &st);
    EXPECT(r.queries() == nq && r.ids == want_ids && same_bits(r.scores, want_sc));
    EXPECT(st.queries == nq && st.candidates_total == cst.candidates_total &&
           st.candidates_min == cst.candidates_min && st.candidates_max == cst.candidates_max &&
           st.candidates_min >= k && st.lists == 0);
    // The int8 walk: the C call's answer too.
    lshk::QueryParams qi = lshk::QueryParams::for_graph(ef, LSHK_GRAPH_WALK_INT8, 2 * k);
    std::vector<uint32_t> wi(nq * k);
    std::vector<float> ws(nq * k);
    EXPECT(lshk_index_query(raw, q.data(), nq, dim, k, &qi, wi.data(), ws.data(), nullptr) ==
           LSHK_STATUS_OK);
    lshk::TopK rw = g.query(q, k, qi, &st);
    EXPECT(rw.ids == wi && same_bits(rw.scores, ws) && st.candidates_total == nq * 2 * k);
    // Default query parameters (ef 100): the C call's answer.
    EXPECT(lshk_index_query(raw, q.data(), nq, dim, k, nullptr, wi.data(), ws.data(), nullptr) ==
           LSHK_STATUS_OK);
    lshk::TopK rd = g.query(q, k);
    EXPECT(rd.ids == wi && same_bits(rd.scores, ws));

    // Candidates: with rerank k the scorer gets exactly k rows per query
    // (best first), and the top k is that set.
    for (uint32_t walk : {LSHK_GRAPH_WALK_EXACT, LSHK_GRAPH_WALK_INT8}) {
      lshk::QueryParams qk = lshk::QueryParams::for_graph(ef, walk, k);
      lshk::GatherResult c = g.candidates(q, k, qk);
      lshk::TopK top = g.query(q, k, qk);
      EXPECT(c.queries() == nq && c.total() == nq * k);
      for (std::size_t i = 0; i < nq; i++) {
        std::vector<uint32_t> a(c[i].begin(), c[i].end());
        std::vector<uint32_t> b(top.ids_of(i).begin(), top.ids_of(i).end());
        std::sort(a.begin(), a.end());
        std::sort(b.begin(), b.end());
        EXPECT(a == b);
        for (std::size_t j = 1; j < k; j++) EXPECT(top.scores_of(i)[j - 1] >= top.scores_of(i)[j]);
      }
    }

    // Save and load: the same answers and memory; the graph stores its
    // rows, so W need not be given again.
    const std::string path = "/tmp/lshk-graph-wrapper-" + std::to_string(uintptr_t(&s)) + ".lshk";
    g.save(path);
    lshk::Index back = lshk::Index::load(path);
    std::remove(path.c_str());
    lshk::TopK r2 = back.query(q, k, qp);
    EXPECT(r2.ids == want_ids && same_bits(r2.scores, want_sc) && back.memory_bytes() == mem &&
           back.describe().source == LSHK_SOURCE_GRAPH);

    // Graph rows in int8: a smaller index, still the C call's answer.
    lshk::IndexParams p8 = p;
    p8.graph.storage = LSHK_STORAGE_I8;
    lshk::Index g8(w, bias, rows, dim, dim, p8);
    lshk_index *raw8 = nullptr;
    EXPECT(lshk_index_build(w.data(), bias.data(), rows, dim, dim, &p8, &raw8) == LSHK_STATUS_OK);
    EXPECT(lshk_index_query(raw8, q.data(), nq, dim, k, &qp, wi.data(), ws.data(), nullptr) ==
           LSHK_STATUS_OK);
    lshk::TopK r8 = g8.query(q, k, qp);
    EXPECT(r8.ids == wi && same_bits(r8.scores, ws) && g8.memory_bytes() < mem);
    lshk_index_free(raw8);

    // Errors: the wrapper's size checks, the library's own, and the calls
    // the graph does not have.
    std::string msg;
    std::vector<uint32_t> small(nq * k - 1);
    std::vector<float> sc(nq * k);
    EXPECT(status_of([&] { g.query(q, nq, dim, k, small, sc, qp); }, &msg) ==
               LSHK_STATUS_BUFFER_TOO_SMALL &&
           msg.rfind("lshk::Index::query", 0) == 0);
    EXPECT(status_of([&] { g.query(q, k, lshk::QueryParams::for_graph(0)); }, &msg) ==
               LSHK_STATUS_INVALID_ARGUMENT &&
           msg.rfind("lshk_index_query", 0) == 0);
    EXPECT(status_of([&] { g.query(q, k, lshk::QueryParams::for_graph(ef, 7)); }) ==
           LSHK_STATUS_INVALID_ARGUMENT);
    EXPECT(status_of([&] { g.simhash(); }, &msg) == LSHK_STATUS_UNSUPPORTED &&
           msg.rfind("lshk_index_simhash", 0) == 0);
    EXPECT(status_of([&] { g.lsh_tables(); }, &msg) == LSHK_STATUS_UNSUPPORTED &&
           msg.rfind("lshk_index_tables", 0) == 0);
    EXPECT(status_of([&] { g.calibrate(q, k, 0.9f); }) == LSHK_STATUS_UNSUPPORTED);
    EXPECT(status_of([&] { g.rebuild(); }) == LSHK_STATUS_UNSUPPORTED);
    lshk::LabelParams lp;
    std::vector<std::size_t> loff{0, 1};
    std::vector<uint32_t> lab{3};
    EXPECT(status_of([&] { g.train_labels(q, 1, dim, loff, lab, lp); }) ==
               LSHK_STATUS_UNSUPPORTED &&
           !g.labels_trained());
    lshk::IndexParams bad = p;
    bad.graph.m = 1;
    EXPECT(status_of([&] { lshk::Index(w, bias, rows, dim, dim, bad); }, &msg) ==
               LSHK_STATUS_INVALID_ARGUMENT &&
           msg.rfind("lshk_index_build", 0) == 0);
    bad = p;
    bad.graph.reserved = 1;
    EXPECT(status_of([&] { lshk::Index(w, bias, rows, dim, dim, bad); }) ==
           LSHK_STATUS_INVALID_ARGUMENT);

    lshk::Index moved = std::move(g);
    EXPECT(moved.get() != nullptr && g.get() == nullptr && moved.rows() == rows);
    EXPECT(status_of([&] { g.query(q, k); }) == LSHK_STATUS_NULL_POINTER);
    lshk_index_free(raw);
  } catch (const lshk::Error &e) {
    std::fprintf(stderr, "unexpected lshk::Error: %s\n", e.what());
    failed++;
  }
  std::printf("graph_wrapper: %d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
