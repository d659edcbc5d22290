// How an inference server uses lshk through the C++ wrapper (lshk.hpp):
//
//   offline:   build an index once over the output layer's weights, save it;
//   start-up:  load the saved index (the file is mapped, not parsed row by row);
//   serving:   several worker threads answer batched top-k queries, all
//              sharing ONE `const lshk::Index &` (queries are thread-safe,
//              lock-free, and reuse per-thread scratch inside the library).
//
// The weights are generated here (deterministic, no files needed): a
// 50,000 x 64 layer whose rows lie around 500 centroids (row r = centroid
// c(r) + noise, c(r) uniform), as trained output layers cluster; a query is
// a random row (its label) times 2 plus noise, as a hidden state near the
// label's output row would be. Generator:
// SplitMix64 (seed 2024) and Box-Muller normals, written out below so the
// layer is the same on every platform.
//
// LSHK_EXAMPLE_SMALL=1 in the environment shrinks the workload (2,000 rows,
// 20 centroids, 256 queries, recall on 16 of them) so that the example runs
// in seconds under valgrind (tests/memcheck.rs sets it); the figures printed
// are then not representative.
//
// Prints the build and load times, index memory, per-thread throughput,
// top-1 / top-10 recall against the exact dense layer on a sample, and a consistency
// check: the multi-threaded answers must equal a single-threaded pass bit
// for bit. Exits 0 when they do.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>  // getpid, for a private file name

#include "lshk.hpp"

namespace {

constexpr std::size_t kDim = 64, kBatch = 64;
constexpr uint32_t kTopK = 10;

struct SplitMix64 {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }
  float normal() {  // Box-Muller, one value per call (simple, deterministic)
    double u = uniform(), v = uniform();
    return static_cast<float>(std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * v));
  }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main() {
  try {
    const bool small = std::getenv("LSHK_EXAMPLE_SMALL") != nullptr;
    const std::size_t kRows = small ? 2000 : 50000, kCentroids = small ? 20 : 500;
    const std::size_t kQueries = small ? 256 : 4096;  // a multiple of kBatch
    using clock = std::chrono::steady_clock;
    std::printf("lshk %s, active tier %s\n", lshk::version(), lshk::isa_name(lshk::isa_active()));

    // ---- the layer and the queries -------------------------------------
    SplitMix64 rng{2024};
    std::vector<float> centroids(kCentroids * kDim);
    for (float &v : centroids) v = rng.normal();
    std::vector<float> w(kRows * kDim), bias(kRows);
    for (std::size_t r = 0; r < kRows; r++) {
      const float *c = &centroids[rng.below(kCentroids) * kDim];
      for (std::size_t j = 0; j < kDim; j++) w[r * kDim + j] = c[j] + 0.35f * rng.normal();
      bias[r] = 0.05f * rng.normal();
    }
    std::vector<uint32_t> labels(kQueries);
    std::vector<float> queries(kQueries * kDim);
    for (std::size_t i = 0; i < kQueries; i++) {
      labels[i] = static_cast<uint32_t>(rng.below(kRows));
      for (std::size_t j = 0; j < kDim; j++)
        queries[i * kDim + j] = 2.0f * w[labels[i] * kDim + j] + 0.3f * rng.normal();
    }

    // ---- offline: build once, save -------------------------------------
    const std::string path = "lshk_serve_" + std::to_string(getpid()) + ".lshk";
    {
      lshk::IndexParams p(LSHK_SOURCE_SIMHASH);
      p.lsh.bits_per_table = 12;       // K
      p.lsh.tables = 32;               // L
      p.storage = LSHK_STORAGE_F32;    // a copy of W goes into the file
      p.transform = LSHK_TRANSFORM_NONE;  // (MIPS would help when row norms vary a lot)
      auto t0 = clock::now();
      lshk::Index built(w, bias, kRows, kDim, kDim, p, [](uint64_t done, uint64_t total) {
        std::printf("  build progress: %llu of %llu rows hashed\n",
                    static_cast<unsigned long long>(done), static_cast<unsigned long long>(total));
      });
      const lshk_index_info info = built.describe();
      std::printf("built %zu x %zu index (K %u, L %u) in %.0f ms, %.1f MiB\n", built.rows(),
                  built.dim(), info.bits_per_table, info.tables, 1e3 * seconds_since(t0),
                  built.memory_bytes() / 1048576.0);
      built.save(path);
    }  // the building process is gone

    // ---- start-up: load ------------------------------------------------
    auto t0 = clock::now();
    const lshk::Index index = lshk::Index::load(path);
    std::printf("loaded %s in %.1f ms\n", path.c_str(), 1e3 * seconds_since(t0));
    std::remove(path.c_str());  // the mapping stays valid after unlink

    // ---- reference: one thread, the whole stream -----------------------
    std::vector<uint32_t> ref_ids(kQueries * kTopK);
    std::vector<float> ref_scores(kQueries * kTopK);
    lshk::QueryStats stats;
    t0 = clock::now();
    uint64_t cands = 0;
    for (std::size_t b = 0; b < kQueries; b += kBatch) {
      index.query(lshk::span<const float>(&queries[b * kDim], kBatch * kDim), kBatch, kDim, kTopK,
                  lshk::span<uint32_t>(&ref_ids[b * kTopK], kBatch * kTopK),
                  lshk::span<float>(&ref_scores[b * kTopK], kBatch * kTopK), lshk::QueryParams(),
                  &stats);
      cands += stats.candidates_total;
    }
    double single = seconds_since(t0);
    std::printf("1 thread: %zu queries in %.1f ms (%.0f queries/s), %.0f candidates/query\n",
                kQueries, 1e3 * single, kQueries / single, static_cast<double>(cands) / kQueries);

    // ---- serving: worker threads share one const Index& ----------------
    unsigned nthreads = std::max(2u, std::min(4u, std::thread::hardware_concurrency()));
    std::vector<uint32_t> ids(kQueries * kTopK, 0);
    std::vector<float> scores(kQueries * kTopK, 0.0f);
    std::vector<double> secs(nthreads, 0.0);
    std::vector<std::size_t> served(nthreads, 0);
    std::vector<std::exception_ptr> errors(nthreads);
    std::vector<std::thread> pool;
    const std::size_t batches = kQueries / kBatch;
    auto wall0 = clock::now();
    for (unsigned t = 0; t < nthreads; t++) {
      pool.emplace_back([&, t] {
        try {
          const lshk::Index &idx = index;  // shared, read-only
          auto s0 = clock::now();
          for (std::size_t b = t; b < batches; b += nthreads) {  // round-robin batches
            std::size_t q0 = b * kBatch;
            idx.query(lshk::span<const float>(&queries[q0 * kDim], kBatch * kDim), kBatch, kDim,
                      kTopK, lshk::span<uint32_t>(&ids[q0 * kTopK], kBatch * kTopK),
                      lshk::span<float>(&scores[q0 * kTopK], kBatch * kTopK));
            served[t] += kBatch;
          }
          secs[t] = seconds_since(s0);
        } catch (...) {
          errors[t] = std::current_exception();
        }
      });
    }
    for (std::thread &th : pool) th.join();
    double wall = seconds_since(wall0);
    for (std::exception_ptr &e : errors)
      if (e) std::rethrow_exception(e);
    for (unsigned t = 0; t < nthreads; t++)
      std::printf("thread %u: %zu queries in %.1f ms (%.0f queries/s)\n", t, served[t],
                  1e3 * secs[t], served[t] / secs[t]);
    std::printf("%u threads together: %zu queries in %.1f ms (%.0f queries/s; %u cores here)\n",
                nthreads, kQueries, 1e3 * wall, kQueries / wall, std::thread::hardware_concurrency());

    // ---- checks --------------------------------------------------------
    bool same = ids == ref_ids &&
                std::memcmp(scores.data(), ref_scores.data(), scores.size() * sizeof(float)) == 0;
    std::printf("consistency: %d threads %s the single-threaded pass\n", nthreads,
                same ? "equal" : "DIFFER FROM");

    // Recall against the exact dense layer (logits W q + b over ALL rows,
    // computed with lshk's gathered matmul given every id, then top-k), on a
    // sample of the queries.
    const std::size_t sample = small ? 16 : 256;
    std::vector<uint32_t> all(kRows);
    for (std::size_t r = 0; r < kRows; r++) all[r] = static_cast<uint32_t>(r);
    const std::size_t whole[2] = {0, kRows};
    std::vector<float> logits(kRows);
    const lshk::WeightsView layer(w, kRows, kDim, kDim, bias);
    std::size_t top1 = 0, top10 = 0;
    t0 = clock::now();
    for (std::size_t i = 0; i < sample; i++) {
      lshk::span<const float> q(&queries[i * kDim], kDim);
      lshk::gathered_matmul(layer, q, kDim, all, whole, logits);
      lshk::TopK exact = lshk::topk(logits, all, whole, kTopK);
      const uint32_t *got = &ref_ids[i * kTopK];
      top1 += got[0] == exact.ids[0];
      for (uint32_t a = 0; a < kTopK; a++)
        top10 += std::count(got, got + kTopK, exact.ids[a]) > 0;
    }
    double dense = seconds_since(t0) / sample;
    std::printf("recall against the exact layer on %zu queries: top-1 %.3f, top-10 %.3f\n",
                sample, static_cast<double>(top1) / sample,
                static_cast<double>(top10) / (sample * kTopK));
    std::printf("per query, 1 thread: lshk index %.4f ms (batches of %zu), exact dense pass "
                "over all %zu rows %.4f ms (B = 1)\n",
                1e3 * single / kQueries, kBatch, kRows, 1e3 * dense);
    return same ? 0 : 1;
  } catch (const lshk::Error &e) {
    std::fprintf(stderr, "lshk error: %s\n", e.what());
    return 1;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
