/* C++17 wrapper of lshk's IUL training (learned SimHash planes):
 * lshk_index_train_iul and lshk_simhash_train_iul. Kept beside lshk.hpp (include this header instead
 * of, or after, lshk.hpp). */
#ifndef LSHK_IUL_HPP
#define LSHK_IUL_HPP

#include <vector>

#include "lshk.hpp"

namespace lshk {

/* lshk_iul_params with its defaults (lshk_iul_params_default()). */
struct IulParams : lshk_iul_params {
  IulParams() noexcept : lshk_iul_params(lshk_iul_params_default()) {}
  IulParams(const lshk_iul_params &p) noexcept : lshk_iul_params(p) {}
};

/* lshk_index_train_iul on a SimHash index: learns its planes from `nq`
 * queries (row i at q[i * q_stride], the index's dim floats) and their
 * labels as CSR (`label_offsets`: nq + 1 values from 0; `labels`:
 * label_offsets[nq] row ids), replaces them and rebuilds the tables.
 * Returns one report per round. Needs exclusive access to the index (and
 * its simhash()/lsh_tables() views). Throws lshk::Error (the index is then
 * unchanged): INVALID_ARGUMENT on a DWTA index, UNSUPPORTED on a source
 * without tables. */
inline std::vector<lshk_iul_report> train_iul(Index &idx, span<const float> q, std::size_t nq,
                                              std::size_t q_stride,
                                              span<const std::size_t> label_offsets,
                                              span<const uint32_t> labels,
                                              const lshk_iul_params &p = IulParams()) {
  const char *where = "lshk::train_iul";
  if (nq == 0) detail::fail(LSHK_STATUS_INVALID_ARGUMENT, std::string(where) + ": nq is 0");
  detail::need_rows(where, "q", q.size(), nq, idx.dim(), q_stride);
  detail::need_in(where, "label_offsets", label_offsets.size(), nq + 1);
  detail::need_in(where, "labels", labels.size(), label_offsets[nq]);
  std::vector<lshk_iul_report> r(p.rounds);
  check(lshk_index_train_iul(idx.get(), q.data(), nq, q_stride, label_offsets.data(),
                             labels.data(), &p, r.empty() ? nullptr : r.data(), r.size()));
  return r;
}

/* Planes and reports from train_iul_planes. */
struct IulResult {
  std::vector<float> planes;
  std::vector<lshk_iul_report> reports;
};

/* lshk_simhash_train_iul: IUL on caller-given planes (K*L x dim, row-major)
 * over `n_rows` rows (row r at rows[r * row_stride]) and `nq` queries with
 * CSR labels, tables of 2^range_bits buckets. Thread-safe; throws
 * lshk::Error. */
inline IulResult train_iul_planes(span<const float> planes, std::size_t dim, uint32_t bits,
                                  uint32_t tables, uint32_t range_bits, span<const float> rows,
                                  std::size_t n_rows, std::size_t row_stride, span<const float> q,
                                  std::size_t nq, std::size_t q_stride,
                                  span<const std::size_t> label_offsets,
                                  span<const uint32_t> labels,
                                  const lshk_iul_params &p = IulParams()) {
  const char *where = "lshk::train_iul_planes";
  if (nq == 0) detail::fail(LSHK_STATUS_INVALID_ARGUMENT, std::string(where) + ": nq is 0");
  detail::need_rows(where, "rows", rows.size(), n_rows, dim, row_stride);
  detail::need_rows(where, "q", q.size(), nq, dim, q_stride);
  detail::need_in(where, "label_offsets", label_offsets.size(), nq + 1);
  detail::need_in(where, "labels", labels.size(), label_offsets[nq]);
  IulResult r;
  r.planes.resize(planes.size());
  r.reports.resize(p.rounds);
  check(lshk_simhash_train_iul(planes.data(), planes.size(), dim, bits, tables, range_bits,
                               rows.data(), n_rows, row_stride, q.data(), nq, q_stride,
                               label_offsets.data(), labels.data(), &p,
                               r.planes.empty() ? nullptr : r.planes.data(), r.planes.size(),
                               r.reports.empty() ? nullptr : r.reports.data(), r.reports.size()));
  return r;
}

}  // namespace lshk

#endif
