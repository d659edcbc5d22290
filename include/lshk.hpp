/* lshk.hpp: a header-only C++17 wrapper over the C API of lshk (lshk.h).
 *
 * What it adds to the C API, and nothing more:
 *  - errors become exceptions: every failing call throws lshk::Error, which
 *    carries the lshk_status and the calling thread's last-error message
 *    (lshk_last_error_message) at the moment of the failure;
 *  - handles become RAII owners (lshk::SimHash, lshk::Dwta, lshk::Tables,
 *    lshk::Index for every candidate source, lshk::Hrr, lshk::Adam): unique
 *    ownership, move-only (noexcept moves, a moved-from owner is empty), the
 *    destructor frees the handle and never throws;
 *    lshk::SimHashRef / DwtaRef / TablesRef are non-owning views (of an owner,
 *    or of a handle borrowed from an index) and are cheap to copy;
 *  - buffers are passed as lshk::span<T> (pointer + element count; C++17 has
 *    no std::span), built implicitly from std::vector, std::array, C arrays
 *    or (pointer, size). Where the C function takes no length for a buffer,
 *    the wrapper checks the span is long enough before calling and throws
 *    lshk::Error itself: INVALID_ARGUMENT for a short input,
 *    BUFFER_TOO_SMALL for a short output (its message starts with "lshk::",
 *    the C library's own messages with "lshk_").
 *
 * Everything else (validation, units, thread-safety, error codes, memory) is
 * exactly as documented in lshk.h: every method names the C function it
 * calls. Const methods of the views and owners call C functions documented
 * as thread-safe, so a `const lshk::Index&` (or SimHash, Dwta, Tables) may be
 * shared by many threads. The wrapper itself keeps no global state and
 * allocates only in the functions that return std::vector (or grow a
 * caller-provided lshk::GatherResult / lshk::TopK) and in lshk::topk_merge
 * (its array of C shard descriptors).
 *
 * Build: C++17, any of g++/clang++ (`-std=c++17 -Wall -Wextra -Werror
 * -pedantic` clean), link with -llshk (pkg-config lshk).
 */
#ifndef LSHK_HPP
#define LSHK_HPP

#if __cplusplus < 201703L
#error "lshk.hpp needs C++17 (-std=c++17); C and older C++ can use lshk.h directly"
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "lshk.h"

namespace lshk {

/* ------------------------------------------------------------------ span */

template <class T>
class span;

namespace detail {
template <class T>
struct is_span : std::false_type {};
template <class T>
struct is_span<span<T>> : std::true_type {};

template <class C, class T, class = void>
struct is_container_of : std::false_type {};
/* C has .data() returning a pointer convertible (as an array pointer, so no
 * derived-to-base or int->float surprises) to T*, and .size(). */
template <class C, class T>
struct is_container_of<
    C, T,
    std::void_t<decltype(std::declval<C>().data()), decltype(std::declval<C>().size())>>
    : std::integral_constant<
          bool, !is_span<std::remove_cv_t<std::remove_reference_t<C>>>::value &&
                    std::is_pointer<decltype(std::declval<C>().data())>::value &&
                    std::is_convertible<
                        std::remove_pointer_t<decltype(std::declval<C>().data())> (*)[],
                        T (*)[]>::value> {};
}  // namespace detail

/* A non-owning view of `size()` contiguous elements of type T (a minimal
 * std::span). An empty span may have a NULL data(). */
template <class T>
class span {
 public:
  using element_type = T;
  using value_type = std::remove_cv_t<T>;
  using size_type = std::size_t;
  using pointer = T *;
  using reference = T &;
  using iterator = T *;

  constexpr span() noexcept = default;
  constexpr span(T *data, std::size_t size) noexcept : data_(data), size_(size) {}
  template <std::size_t N>
  constexpr span(T (&arr)[N]) noexcept : data_(arr), size_(N) {}
  /* span<float> -> span<const float>. */
  template <class U, std::enable_if_t<std::is_convertible<U (*)[], T (*)[]>::value &&
                                          !std::is_same<U, T>::value,
                                      int> = 0>
  constexpr span(const span<U> &o) noexcept : data_(o.data()), size_(o.size()) {}
  /* Any contiguous container with data() and size() (std::vector,
   * std::array, std::string, ...). */
  template <class C, std::enable_if_t<detail::is_container_of<C &, T>::value, int> = 0>
  constexpr span(C &c) noexcept(noexcept(c.data()) && noexcept(c.size()))
      : data_(c.data()), size_(c.size()) {}
  /* Const views also bind to const and temporary containers (valid for the
   * full expression, e.g. one call). */
  template <class C, std::enable_if_t<std::is_const<T>::value &&
                                          detail::is_container_of<const C &, T>::value,
                                      int> = 0>
  constexpr span(const C &c) noexcept(noexcept(c.data()) && noexcept(c.size()))
      : data_(c.data()), size_(c.size()) {}

  constexpr T *data() const noexcept { return data_; }
  constexpr std::size_t size() const noexcept { return size_; }
  constexpr std::size_t size_bytes() const noexcept { return size_ * sizeof(T); }
  constexpr bool empty() const noexcept { return size_ == 0; }
  constexpr T &operator[](std::size_t i) const noexcept { return data_[i]; }
  constexpr T *begin() const noexcept { return data_; }
  constexpr T *end() const noexcept { return data_ + size_; }
  /* Elements [offset, offset + count), clamped to the span. */
  constexpr span subspan(std::size_t offset, std::size_t count = static_cast<std::size_t>(-1)) const
      noexcept {
    std::size_t o = offset < size_ ? offset : size_;
    std::size_t c = count < size_ - o ? count : size_ - o;
    return span(data_ + o, c);
  }
  constexpr span first(std::size_t count) const noexcept { return subspan(0, count); }

 private:
  T *data_ = nullptr;
  std::size_t size_ = 0;
};

/* ----------------------------------------------------------------- errors */

/* The calling thread's last error message (empty if no call on this thread
 * has failed). */
inline std::string last_error_message() {
  std::size_t n = lshk_last_error_message(nullptr, 0);
  std::string s(n + 1, '\0');
  lshk_last_error_message(&s[0], s.size());
  s.resize(std::strlen(s.c_str()));
  return s;
}

/* Name of a status code, e.g. "LSHK_STATUS_NULL_POINTER". */
inline const char *status_name(lshk_status status) noexcept { return lshk_status_name(status); }

/* A failed lshk call. what() is "LSHK_STATUS_X: <message>"; status() the
 * code; message() the message alone: the C library's last-error message of
 * the throwing thread (it names the C function, "lshk_simhash_hash: ..."),
 * or, for checks done by this wrapper, a message naming the wrapper method
 * ("lshk::SimHash::hash: ..."). Copying an Error never throws. */
class Error : public std::runtime_error {
 public:
  Error(lshk_status status, const std::string &message)
      : std::runtime_error(std::string(lshk_status_name(status)) + ": " + message),
        status_(status),
        prefix_(std::strlen(lshk_status_name(status)) + 2) {}
  lshk_status status() const noexcept { return status_; }
  const char *message() const noexcept { return what() + prefix_; }

 private:
  lshk_status status_;
  std::size_t prefix_;
};

/* Throws lshk::Error(status, last_error_message()) unless status is OK. */
inline void check(lshk_status status) {
  if (status != LSHK_STATUS_OK) throw Error(status, last_error_message());
}

namespace detail {
[[noreturn]] inline void fail(lshk_status status, const std::string &message) {
  throw Error(status, message);
}
inline std::string num(std::size_t v) { return std::to_string(v); }

/* Elements needed for n rows of dim at stride: (n-1)*stride + dim. Returns
 * false when the product overflows or the stride/dim is one the C library
 * rejects itself (then the wrapper leaves the diagnosis to it). */
inline bool rows_extent(std::size_t n, std::size_t dim, std::size_t stride, std::size_t *need) {
  if (n == 0) {
    *need = 0;
    return true;
  }
  if (dim == 0 || stride < dim) return false;
  std::size_t m = n - 1;
  if (stride != 0 && m > (static_cast<std::size_t>(-1) - dim) / stride) return false;
  *need = m * stride + dim;
  return true;
}
/* Throws INVALID_ARGUMENT if `have` elements cannot hold n rows. */
inline void need_rows(const char *where, const char *name, std::size_t have, std::size_t n,
                      std::size_t dim, std::size_t stride) {
  std::size_t need = 0;
  if (rows_extent(n, dim, stride, &need) && have < need)
    fail(LSHK_STATUS_INVALID_ARGUMENT, std::string(where) + ": " + name + " holds " + num(have) +
                                           " elements, " + num(n) + " rows of " + num(dim) +
                                           " at stride " + num(stride) + " need " + num(need));
}
/* a * b, or false on overflow. */
inline bool mul(std::size_t a, std::size_t b, std::size_t *out) {
  if (a != 0 && b > static_cast<std::size_t>(-1) / a) return false;
  *out = a * b;
  return true;
}
inline void need_in(const char *where, const char *name, std::size_t have, std::size_t need) {
  if (have < need)
    fail(LSHK_STATUS_INVALID_ARGUMENT, std::string(where) + ": " + name + " holds " + num(have) +
                                           " elements, the call needs " + num(need));
}
inline void need_out(const char *where, const char *name, std::size_t have, std::size_t need) {
  if (have < need)
    fail(LSHK_STATUS_BUFFER_TOO_SMALL, std::string(where) + ": " + name + " holds " + num(have) +
                                           " elements, the call needs " + num(need));
}
/* Number of rows of `dim` elements in a contiguous buffer of `size`. */
inline std::size_t whole_rows(const char *where, const char *name, std::size_t size,
                              std::size_t dim) {
  if (dim == 0) fail(LSHK_STATUS_NULL_POINTER, std::string(where) + ": empty handle");
  if (size % dim != 0)
    fail(LSHK_STATUS_INVALID_ARGUMENT, std::string(where) + ": " + name + " holds " + num(size) +
                                           " elements, not a whole number of rows of " +
                                           num(dim));
  return size / dim;
}
/* nq for CSR offsets (nq + 1 entries). */
inline std::size_t csr_queries(const char *where, std::size_t offsets_size) {
  if (offsets_size == 0)
    fail(LSHK_STATUS_INVALID_ARGUMENT,
         std::string(where) + ": offsets is empty (it holds nq + 1 entries)");
  return offsets_size - 1;
}
template <class T>
inline T *or_null(span<T> s) noexcept {
  return s.empty() ? nullptr : s.data();
}
}  // namespace detail

/* -------------------------------------------------------------- ISA tiers */

/* An instruction-set tier (LSHK_ISA_*). */
enum class Isa : lshk_isa {
  scalar = LSHK_ISA_SCALAR,
  portable = LSHK_ISA_PORTABLE,
  avx2 = LSHK_ISA_AVX2,
  avx512 = LSHK_ISA_AVX512,
};

/* lshk_isa_detected: the best tier of this CPU. */
inline Isa isa_detected() noexcept { return static_cast<Isa>(lshk_isa_detected()); }
/* lshk_isa_active: the tier kernels run on now. */
inline Isa isa_active() noexcept { return static_cast<Isa>(lshk_isa_active()); }
/* lshk_isa_set_max: caps the tier for the whole process. */
inline void isa_set_max(Isa max) { check(lshk_isa_set_max(static_cast<lshk_isa>(max))); }
/* lshk_isa_name: "scalar", "portable", "avx2", "avx512" or "unknown". */
inline const char *isa_name(Isa isa) noexcept {
  return lshk_isa_name(static_cast<lshk_isa>(isa));
}
/* Tiers this CPU can run, scalar first (a tier is supported when it is at
 * most the detected one). */
inline std::vector<Isa> isa_supported() {
  std::vector<Isa> v;
  for (lshk_isa i = LSHK_ISA_SCALAR; i <= lshk_isa_detected(); ++i) v.push_back(static_cast<Isa>(i));
  return v;
}
/* lshk_version: the library's version string (LSHK_VERSION_STRING of the
 * header it was built with). */
inline const char *version() noexcept { return lshk_version(); }

/* lshk_rehash_next: the iteration of the next rehash after one at `t` (or
 * the start, t = 0); defaults: LNS's schedule (50, 100, 150, 200, 251, ...). */
inline uint64_t rehash_next(uint64_t t, double initial_period = LSHK_LNS_REHASH_PERIOD,
                            double lambda = LSHK_LNS_REHASH_LAMBDA) {
  uint64_t next = 0;
  check(lshk_rehash_next(initial_period, lambda, t, &next));
  return next;
}

/* ---------------------------------------------------------------- owners */

namespace detail {
/* The ownership half of lshk::SimHash, lshk::Dwta, lshk::Tables and
 * lshk::Index (Derived), on top of their const operations or shape (Base,
 * which holds the handle h_, sets it with take() and empties itself with
 * clear()): move-only, the handle freed with Free by the destructor. */
template <class Derived, class Base, class Handle, lshk_status (*Free)(Handle *)>
class Owner : public Base {
 public:
  /* Takes ownership of a handle from the matching C constructor (freed here
   * too if reading its shape fails). */
  static Derived adopt_handle(Handle *h) {
    Derived d;
    d.adopt(h);
    return d;
  }

  Owner(const Owner &) = delete;
  Owner &operator=(const Owner &) = delete;
  Owner(Owner &&o) noexcept : Base(o) { o.clear(); }
  Owner &operator=(Owner &&o) noexcept {
    if (this != &o) {
      reset();
      Base::operator=(o);
      o.clear();
    }
    return *this;
  }
  ~Owner() { reset(); }

  /* Frees the object now; the owner becomes empty. */
  void reset() noexcept {
    if (this->h_) (void)Free(const_cast<Handle *>(this->h_));
    this->clear();
  }
  /* Gives up ownership: the caller frees the returned handle. */
  Handle *release() noexcept {
    Handle *h = const_cast<Handle *>(this->h_);
    this->clear();
    return h;
  }
  Handle *get() noexcept { return const_cast<Handle *>(this->h_); }
  const Handle *get() const noexcept { return this->h_; }

 protected:
  Owner() noexcept = default;
  /* Takes `h` (reading its shape); frees it if that throws. */
  void adopt(Handle *h) {
    try {
      this->take(h);
    } catch (...) {
      (void)Free(h);
      throw;
    }
  }
};
}  // namespace detail

/* ---------------------------------------------------------------- SimHash */

namespace detail {
/* The const operations shared by lshk::SimHash and lshk::SimHashRef. The
 * shape is read once (lshk_simhash_shape) when the handle is taken. */
class SimHashBase {
 public:
  const lshk_simhash *get() const noexcept { return h_; }
  explicit operator bool() const noexcept { return h_ != nullptr; }
  uint32_t dim() const noexcept { return dim_; }
  uint32_t bits_per_table() const noexcept { return bits_; }
  uint32_t tables() const noexcept { return tables_; }

  /* lshk_simhash_copy_planes: the K*L x dim planes, row-major. */
  void copy_planes(span<float> out) const {
    check(lshk_simhash_copy_planes(h_, out.data(), out.size()));
  }
  std::vector<float> planes() const {
    std::vector<float> v(std::size_t{bits_} * tables_ * dim_);
    copy_planes(v);
    return v;
  }

  /* lshk_simhash_hash: n rows of x at x_stride into codes[i*L + l]. */
  void hash(span<const float> x, std::size_t n, std::size_t x_stride, span<uint32_t> codes) const {
    hash_impl(nullptr, x, n, x_stride, codes);
  }
  /* lshk_simhash_hash_isa: the same on one chosen tier. */
  void hash(Isa isa, span<const float> x, std::size_t n, std::size_t x_stride,
            span<uint32_t> codes) const {
    hash_impl(&isa, x, n, x_stride, codes);
  }
  /* Contiguous rows (x.size() a multiple of dim). */
  void hash(span<const float> x, span<uint32_t> codes) const {
    hash(x, detail::whole_rows("lshk::SimHash::hash", "x", x.size(), dim_), dim_, codes);
  }
  std::vector<uint32_t> hash(span<const float> x) const {
    std::size_t n = detail::whole_rows("lshk::SimHash::hash", "x", x.size(), dim_);
    std::vector<uint32_t> codes(n * tables_);
    hash(x, n, dim_, codes);
    return codes;
  }

  /* lshk_simhash_project: out[i*K*L + p] = dot(x_i, plane_p). */
  void project(span<const float> x, std::size_t n, std::size_t x_stride, span<float> out) const {
    project_impl(nullptr, x, n, x_stride, out);
  }
  void project(Isa isa, span<const float> x, std::size_t n, std::size_t x_stride,
               span<float> out) const {
    project_impl(&isa, x, n, x_stride, out);
  }
  void project(span<const float> x, span<float> out) const {
    project(x, detail::whole_rows("lshk::SimHash::project", "x", x.size(), dim_), dim_, out);
  }
  std::vector<float> project(span<const float> x) const {
    std::size_t n = detail::whole_rows("lshk::SimHash::project", "x", x.size(), dim_);
    std::vector<float> out(n * bits_ * tables_);
    project(x, n, dim_, out);
    return out;
  }

 protected:
  SimHashBase() noexcept = default;
  /* Takes the handle and reads its shape (lshk_simhash_shape); on error
   * throws and leaves *this unchanged. */
  void take(const lshk_simhash *h) {
    uint32_t d = 0, b = 0, t = 0;
    if (h) check(lshk_simhash_shape(h, &d, &b, &t));
    h_ = h;
    dim_ = d;
    bits_ = b;
    tables_ = t;
  }
  SimHashBase(const SimHashBase &) noexcept = default;
  SimHashBase &operator=(const SimHashBase &) noexcept = default;
  ~SimHashBase() = default;
  void clear() noexcept { *this = SimHashBase(); }

  const lshk_simhash *h_ = nullptr;
  uint32_t dim_ = 0, bits_ = 0, tables_ = 0;

 private:
  void hash_impl(const Isa *isa, span<const float> x, std::size_t n, std::size_t x_stride,
                 span<uint32_t> codes) const {
    detail::need_rows("lshk::SimHash::hash", "x", x.size(), n, dim_, x_stride);
    check(isa ? lshk_simhash_hash_isa(static_cast<lshk_isa>(*isa), h_, x.data(), n, x_stride,
                                      codes.data(), codes.size())
              : lshk_simhash_hash(h_, x.data(), n, x_stride, codes.data(), codes.size()));
  }
  void project_impl(const Isa *isa, span<const float> x, std::size_t n, std::size_t x_stride,
                    span<float> out) const {
    detail::need_rows("lshk::SimHash::project", "x", x.size(), n, dim_, x_stride);
    check(isa ? lshk_simhash_project_isa(static_cast<lshk_isa>(*isa), h_, x.data(), n, x_stride,
                                         out.data(), out.size())
              : lshk_simhash_project(h_, x.data(), n, x_stride, out.data(), out.size()));
  }
};
}  // namespace detail

/* A non-owning view of a SimHash family (of an lshk::SimHash, or borrowed
 * from an index): valid while the family lives. */
class SimHashRef : public detail::SimHashBase {
 public:
  SimHashRef() noexcept = default;
  /* Reads the shape; throws for an invalid handle. NULL gives an empty view. */
  explicit SimHashRef(const lshk_simhash *h) { take(h); }
  /* A view of an owner (lshk::SimHash converts implicitly). */
  SimHashRef(const detail::SimHashBase &b) noexcept : SimHashBase(b) {}
  SimHashRef(const SimHashRef &) noexcept = default;
  SimHashRef &operator=(const SimHashRef &) noexcept = default;
};

/* Owns an lshk_simhash (freed by the destructor). Move-only. */
class SimHash : public detail::Owner<SimHash, detail::SimHashBase, lshk_simhash, lshk_simhash_free> {
 public:
  /* An empty owner (every operation throws NULL_POINTER). */
  SimHash() noexcept = default;
  /* lshk_simhash_new: K*L planes over dim, sparsity 0 (Gaussian), 1 (±1)
   * or s >= 2 (sparse ±1), from seed. */
  SimHash(uint32_t dim, uint32_t bits_per_table, uint32_t tables, uint32_t sparsity = 0,
          uint64_t seed = 1) {
    lshk_simhash *h = nullptr;
    check(lshk_simhash_new(dim, bits_per_table, tables, sparsity, seed, &h));
    adopt(h);
  }
  /* lshk_simhash_from_planes: caller-given planes (K*L rows of dim, copied). */
  static SimHash from_planes(span<const float> planes, uint32_t dim, uint32_t bits_per_table,
                             uint32_t tables) {
    std::size_t need = 0;
    if (detail::mul(std::size_t{bits_per_table} * tables, dim, &need))
      detail::need_in("lshk::SimHash::from_planes", "planes", planes.size(), need);
    lshk_simhash *h = nullptr;
    check(lshk_simhash_from_planes(planes.data(), dim, bits_per_table, tables, &h));
    return adopt_handle(h);
  }
  SimHashRef ref() const noexcept { return SimHashRef(*this); }
};

/* ------------------------------------------------------------------- DWTA */

namespace detail {
class DwtaBase {
 public:
  const lshk_dwta *get() const noexcept { return h_; }
  explicit operator bool() const noexcept { return h_ != nullptr; }
  uint32_t dim() const noexcept { return dim_; }
  uint32_t bins_per_table() const noexcept { return bins_; }
  uint32_t tables() const noexcept { return tables_; }
  uint32_t bin_size() const noexcept { return bin_size_; }

  /* lshk_dwta_copy_map: the K*L*B bin map, bin-major. */
  void copy_map(span<uint32_t> out) const { check(lshk_dwta_copy_map(h_, out.data(), out.size())); }
  std::vector<uint32_t> map() const {
    std::vector<uint32_t> v(std::size_t{bins_} * tables_ * bin_size_);
    copy_map(v);
    return v;
  }

  /* lshk_dwta_hash_dense: n dense rows at x_stride into codes[i*L + l]. */
  void hash_dense(span<const float> x, std::size_t n, std::size_t x_stride,
                  span<uint32_t> codes) const {
    dense_impl(nullptr, x, n, x_stride, codes);
  }
  /* lshk_dwta_hash_dense_isa. */
  void hash_dense(Isa isa, span<const float> x, std::size_t n, std::size_t x_stride,
                  span<uint32_t> codes) const {
    dense_impl(&isa, x, n, x_stride, codes);
  }
  void hash_dense(span<const float> x, span<uint32_t> codes) const {
    hash_dense(x, detail::whole_rows("lshk::Dwta::hash_dense", "x", x.size(), dim_), dim_, codes);
  }
  std::vector<uint32_t> hash_dense(span<const float> x) const {
    std::size_t n = detail::whole_rows("lshk::Dwta::hash_dense", "x", x.size(), dim_);
    std::vector<uint32_t> codes(n * tables_);
    hash_dense(x, n, dim_, codes);
    return codes;
  }

  /* lshk_dwta_hash_sparse: CSR rows (n = indptr.size() - 1). */
  void hash_sparse(span<const std::size_t> indptr, span<const uint32_t> indices,
                   span<const float> values, span<uint32_t> codes) const {
    sparse_impl(nullptr, indptr, indices, values, codes);
  }
  /* lshk_dwta_hash_sparse_isa. */
  void hash_sparse(Isa isa, span<const std::size_t> indptr, span<const uint32_t> indices,
                   span<const float> values, span<uint32_t> codes) const {
    sparse_impl(&isa, indptr, indices, values, codes);
  }
  std::vector<uint32_t> hash_sparse(span<const std::size_t> indptr, span<const uint32_t> indices,
                                    span<const float> values) const {
    std::size_t n = indptr.empty() ? 0 : indptr.size() - 1;
    std::vector<uint32_t> codes(n * tables_);
    hash_sparse(indptr, indices, values, codes);
    return codes;
  }

 protected:
  DwtaBase() noexcept = default;
  void take(const lshk_dwta *h) {
    uint32_t d = 0, k = 0, l = 0, b = 0;
    if (h) check(lshk_dwta_shape(h, &d, &k, &l, &b));
    h_ = h;
    dim_ = d;
    bins_ = k;
    tables_ = l;
    bin_size_ = b;
  }
  DwtaBase(const DwtaBase &) noexcept = default;
  DwtaBase &operator=(const DwtaBase &) noexcept = default;
  ~DwtaBase() = default;
  void clear() noexcept { *this = DwtaBase(); }

  const lshk_dwta *h_ = nullptr;
  uint32_t dim_ = 0, bins_ = 0, tables_ = 0, bin_size_ = 0;

 private:
  void dense_impl(const Isa *isa, span<const float> x, std::size_t n, std::size_t x_stride,
                  span<uint32_t> codes) const {
    detail::need_rows("lshk::Dwta::hash_dense", "x", x.size(), n, dim_, x_stride);
    check(isa ? lshk_dwta_hash_dense_isa(static_cast<lshk_isa>(*isa), h_, x.data(), n, x_stride,
                                         codes.data(), codes.size())
              : lshk_dwta_hash_dense(h_, x.data(), n, x_stride, codes.data(), codes.size()));
  }
  void sparse_impl(const Isa *isa, span<const std::size_t> indptr, span<const uint32_t> indices,
                   span<const float> values, span<uint32_t> codes) const {
    const char *where = "lshk::Dwta::hash_sparse";
    std::size_t n = indptr.empty() ? 0 : indptr.size() - 1;
    if (n > 0) {
      std::size_t nnz = indptr[n];
      detail::need_in(where, "indices", indices.size(), nnz);
      detail::need_in(where, "values", values.size(), nnz);
    }
    const std::size_t *ip = n > 0 ? indptr.data() : nullptr;
    check(isa ? lshk_dwta_hash_sparse_isa(static_cast<lshk_isa>(*isa), h_, ip, indices.data(),
                                          values.data(), n, codes.data(), codes.size())
              : lshk_dwta_hash_sparse(h_, ip, indices.data(), values.data(), n, codes.data(),
                                      codes.size()));
  }
};
}  // namespace detail

/* A non-owning view of a DWTA family. */
class DwtaRef : public detail::DwtaBase {
 public:
  DwtaRef() noexcept = default;
  explicit DwtaRef(const lshk_dwta *h) { take(h); }
  DwtaRef(const detail::DwtaBase &b) noexcept : DwtaBase(b) {}
  DwtaRef(const DwtaRef &) noexcept = default;
  DwtaRef &operator=(const DwtaRef &) noexcept = default;
};

/* Owns an lshk_dwta. Move-only. */
class Dwta : public detail::Owner<Dwta, detail::DwtaBase, lshk_dwta, lshk_dwta_free> {
 public:
  Dwta() noexcept = default;
  /* lshk_dwta_new: L tables of K bins of B coordinates over dim. */
  Dwta(uint32_t dim, uint32_t bins_per_table, uint32_t tables, uint32_t bin_size,
       uint64_t seed = 1) {
    lshk_dwta *h = nullptr;
    check(lshk_dwta_new(dim, bins_per_table, tables, bin_size, seed, &h));
    adopt(h);
  }
  /* lshk_dwta_from_map: a caller-given bin map (K*L*B entries, copied). */
  static Dwta from_map(span<const uint32_t> map, uint32_t dim, uint32_t bins_per_table,
                       uint32_t tables, uint32_t bin_size) {
    lshk_dwta *h = nullptr;
    check(lshk_dwta_from_map(map.data(), map.size(), dim, bins_per_table, tables, bin_size, &h));
    return adopt_handle(h);
  }
  DwtaRef ref() const noexcept { return DwtaRef(*this); }
};

/* ----------------------------------------------------------------- Tables */

/* lshk_gather_params with its defaults (lshk_gather_params_default()). */
struct GatherParams : lshk_gather_params {
  GatherParams() noexcept : lshk_gather_params(lshk_gather_params_default()) {}
  GatherParams(const lshk_gather_params &p) noexcept : lshk_gather_params(p) {}
};

/* Optional inputs of a gather. */
struct GatherOptions {
  GatherParams params;
  /* SimHash projections (q*K*L floats, lshk_simhash_project), needed only
   * when params.probes > 0. */
  span<const float> projections;
  /* Forced ids: query i's are forced_ids[forced_offsets[i] ..
   * forced_offsets[i+1]]; forced_offsets empty = none. */
  span<const std::size_t> forced_offsets;
  span<const uint32_t> forced_ids;
  /* Also return, per id, the number of tables it was found in. */
  bool counts = false;
};

namespace detail {
class TablesBase;
}
class Index;

/* The CSR output of a gather (Tables::gather) or of Index::candidates,
 * reusable across calls: its buffers only grow (a call into a warm
 * GatherResult does not allocate). */
class GatherResult {
 public:
  /* Number of queries. */
  std::size_t queries() const noexcept { return queries_; }
  /* Total number of ids (offsets()[queries()]). */
  std::size_t total() const noexcept { return total_; }
  span<const uint32_t> ids() const noexcept { return {ids_.data(), total_}; }
  /* queries() + 1 entries (empty before the first call). */
  span<const std::size_t> offsets() const noexcept {
    return {offsets_.data(), queries_ + (offsets_.empty() ? 0 : 1)};
  }
  /* Parallel to ids() when GatherOptions::counts was set, else empty. */
  span<const uint32_t> counts() const noexcept {
    return {counts_.data(), has_counts_ ? total_ : 0};
  }
  /* Query i's ids. */
  span<const uint32_t> operator[](std::size_t i) const noexcept {
    return {ids_.data() + offsets_[i], offsets_[i + 1] - offsets_[i]};
  }
  span<const uint32_t> counts_of(std::size_t i) const noexcept {
    return has_counts_ ? span<const uint32_t>(counts_.data() + offsets_[i], offsets_[i + 1] - offsets_[i])
                       : span<const uint32_t>();
  }

 private:
  friend class detail::TablesBase;
  friend class Index;
  /* Runs `call(ids, ids_len, offsets, counts, &needed)`, a C call with the
   * two-call protocol (BUFFER_TOO_SMALL with *needed when ids_len is
   * short), for q queries: grows the ids (and counts) once and calls
   * again when needed. On error the result is left empty and Error is
   * thrown. */
  template <class Call>
  void fill(std::size_t q, bool counts, Call call) {
    queries_ = total_ = 0;
    has_counts_ = false;
    if (offsets_.size() < q + 1) offsets_.resize(q + 1);
    if (ids_.size() < ids_.capacity()) ids_.resize(ids_.capacity());
    for (int attempt = 0;; ++attempt) {
      if (counts && counts_.size() < ids_.size()) counts_.resize(ids_.size());
      std::size_t needed = 0;
      lshk_status st = call(ids_.data(), ids_.size(), offsets_.data(),
                            counts ? counts_.data() : nullptr, &needed);
      if (st == LSHK_STATUS_BUFFER_TOO_SMALL && attempt == 0 && needed > ids_.size()) {
        ids_.resize(needed);
        continue;
      }
      check(st);
      queries_ = q;
      total_ = needed;
      has_counts_ = counts;
      return;
    }
  }

  std::vector<uint32_t> ids_, counts_;
  std::vector<std::size_t> offsets_;
  std::size_t queries_ = 0, total_ = 0;
  bool has_counts_ = false;
};

namespace detail {
class TablesBase {
 public:
  const lshk_tables *get() const noexcept { return h_; }
  explicit operator bool() const noexcept { return h_ != nullptr; }
  /* Rows the tables were built over. */
  std::size_t rows() const noexcept { return n_; }
  uint32_t tables() const noexcept { return tables_; }
  uint32_t range_bits() const noexcept { return range_bits_; }

  /* lshk_tables_memory_bytes. */
  std::size_t memory_bytes() const {
    std::size_t b = 0;
    check(lshk_tables_memory_bytes(h_, &b));
    return b;
  }
  /* lshk_tables_stats: one entry per table. */
  std::vector<lshk_table_stats> stats() const {
    std::vector<lshk_table_stats> v(tables_);
    check(lshk_tables_stats(h_, v.data(), v.size()));
    return v;
  }

  /* lshk_tables_gather: candidates for q = codes.size() / L queries
   * (codes[i*L + t], as from SimHash::hash / Dwta::hash_dense) into `out`,
   * which is resized as needed (sizing call and retry done here). On error
   * `out` is left empty (queries() == 0) and Error is thrown. */
  void gather(span<const uint32_t> codes, GatherResult &out,
              const GatherOptions &opt = GatherOptions()) const {
    gather_impl(nullptr, codes, out, opt);
  }
  /* lshk_tables_gather_isa. */
  void gather(Isa isa, span<const uint32_t> codes, GatherResult &out,
              const GatherOptions &opt = GatherOptions()) const {
    gather_impl(&isa, codes, out, opt);
  }
  GatherResult gather(span<const uint32_t> codes, const GatherOptions &opt = GatherOptions()) const {
    GatherResult r;
    gather(codes, r, opt);
    return r;
  }

 protected:
  TablesBase() noexcept = default;
  void take(const lshk_tables *h) {
    std::size_t n = 0;
    uint32_t l = 0, r = 0;
    if (h) check(lshk_tables_shape(h, &n, &l, &r));
    h_ = h;
    n_ = n;
    tables_ = l;
    range_bits_ = r;
  }
  TablesBase(const TablesBase &) noexcept = default;
  TablesBase &operator=(const TablesBase &) noexcept = default;
  ~TablesBase() = default;
  void clear() noexcept { *this = TablesBase(); }

  const lshk_tables *h_ = nullptr;
  std::size_t n_ = 0;
  uint32_t tables_ = 0, range_bits_ = 0;

 private:
  void gather_impl(const Isa *isa, span<const uint32_t> codes, GatherResult &out,
                   const GatherOptions &opt) const {
    const char *where = "lshk::Tables::gather";
    out.queries_ = out.total_ = 0;
    out.has_counts_ = false;
    std::size_t q = whole_rows(where, "codes", codes.size(), tables_);
    if (!opt.forced_offsets.empty() && opt.forced_offsets.size() != q + 1)
      fail(LSHK_STATUS_INVALID_ARGUMENT, std::string(where) + ": forced_offsets holds " +
                                             num(opt.forced_offsets.size()) +
                                             " entries, expected q + 1 = " + num(q + 1));
    const std::size_t *fo = or_null(opt.forced_offsets);
    out.fill(q, opt.counts, [&](uint32_t *ids, std::size_t ids_len, std::size_t *offsets,
                                uint32_t *counts, std::size_t *needed) {
      return isa ? lshk_tables_gather_isa(static_cast<lshk_isa>(*isa), h_, codes.data(), q,
                                          &opt.params, opt.projections.data(),
                                          opt.projections.size(), fo, opt.forced_ids.data(),
                                          opt.forced_ids.size(), ids, ids_len, offsets, counts,
                                          needed)
                 : lshk_tables_gather(h_, codes.data(), q, &opt.params, opt.projections.data(),
                                      opt.projections.size(), fo, opt.forced_ids.data(),
                                      opt.forced_ids.size(), ids, ids_len, offsets, counts,
                                      needed);
    });
  }
};
}  // namespace detail

/* A non-owning view of tables (e.g. borrowed from an index). */
class TablesRef : public detail::TablesBase {
 public:
  TablesRef() noexcept = default;
  explicit TablesRef(const lshk_tables *h) { take(h); }
  TablesRef(const detail::TablesBase &b) noexcept : TablesBase(b) {}
  TablesRef(const TablesRef &) noexcept = default;
  TablesRef &operator=(const TablesRef &) noexcept = default;
};

/* Owns an lshk_tables. Move-only. */
class Tables : public detail::Owner<Tables, detail::TablesBase, lshk_tables, lshk_tables_free> {
 public:
  Tables() noexcept = default;
  /* lshk_tables_build: L = `tables` tables over n rows from their codes
   * (codes[i*L + t], n*L values). */
  Tables(span<const uint32_t> codes, std::size_t n, uint32_t tables, uint32_t range_bits,
         uint32_t bucket_cap = 0, uint64_t seed = 0, uint32_t threads = 0) {
    std::size_t need = 0;
    if (detail::mul(n, tables, &need))
      detail::need_in("lshk::Tables::Tables", "codes", codes.size(), need);
    lshk_tables *h = nullptr;
    check(lshk_tables_build(codes.data(), n, tables, range_bits, bucket_cap, seed, threads, &h));
    adopt(h);
  }

  /* lshk_tables_update: rows ids[j] move to the buckets of
   * new_codes[j*L .. (j+1)*L]. Needs exclusive access (no concurrent
   * gather on these tables). */
  void update(span<const uint32_t> ids, span<const uint32_t> new_codes) {
    std::size_t need = 0;
    if (detail::mul(ids.size(), tables_, &need))
      detail::need_in("lshk::Tables::update", "new_codes", new_codes.size(), need);
    check(lshk_tables_update(get(), ids.data(), new_codes.data(), ids.size()));
  }

  /* lshk_tables_add_labels (HALOS label-aware buckets on standalone
   * tables): `codes` holds the per-table codes of n training queries
   * (codes[i*L + t]), query i's labels are labels[label_offsets[i] ..
   * label_offsets[i+1]] (CSR, n + 1 offsets). Needs exclusive access; the
   * tables are frozen afterwards (no update, no second add_labels). */
  void add_labels(span<const uint32_t> codes, std::size_t n,
                  span<const std::size_t> label_offsets, span<const uint32_t> labels) {
    lshk_label_params p = lshk_label_params_default();
    add_labels(codes, n, label_offsets, labels, p);
  }
  void add_labels(span<const uint32_t> codes, std::size_t n,
                  span<const std::size_t> label_offsets, span<const uint32_t> labels,
                  const lshk_label_params &p) {
    const char *where = "lshk::Tables::add_labels";
    std::size_t need = 0;
    if (!detail::mul(n, tables_, &need) || n == static_cast<std::size_t>(-1))
      detail::fail(LSHK_STATUS_SIZE_OVERFLOW, std::string(where) + ": n * L overflows");
    detail::need_in(where, "codes", codes.size(), need);
    detail::need_in(where, "label_offsets", label_offsets.size(), n + 1);
    detail::need_in(where, "labels", labels.size(), label_offsets.data()[n]);
    check(lshk_tables_add_labels(get(), codes.data(), n, label_offsets.data(), labels.data(),
                                 &p));
  }

  TablesRef ref() const noexcept { return TablesRef(*this); }
};

/* ------------------------------------------- gathered matmul and epilogues */

/* An lshk_weights_view (struct_size set) of a caller's matrix: `rows` rows
 * of `dim` elements, row r at element r * w_stride, and an optional bias
 * (`bias` empty = none, else `rows` floats). It points into the spans,
 * which must outlive it. The constructors check the spans' lengths
 * (INVALID_ARGUMENT); the library checks the rest when the view is used.
 * Index::weights() gives an index's own view. */
struct WeightsView : lshk_weights_view {
  WeightsView(const lshk_weights_view &v) noexcept : lshk_weights_view(v) {}
  /* f32 rows (LSHK_STORAGE_F32). */
  WeightsView(span<const float> w, std::size_t rows, std::size_t dim, std::size_t w_stride,
              span<const float> bias = {})
      : WeightsView(LSHK_STORAGE_F32, w.data(), w.size(), {}, rows, dim, w_stride, bias) {}
  /* 16-bit rows: `storage` LSHK_STORAGE_BF16 or LSHK_STORAGE_F16 (bit
   * patterns, e.g. from lshk::convert). */
  WeightsView(uint32_t storage, span<const uint16_t> w, std::size_t rows, std::size_t dim,
              std::size_t w_stride, span<const float> bias = {})
      : WeightsView(storage, w.data(), w.size(), {}, rows, dim, w_stride, bias) {}
  /* int8 rows with one scale per row (LSHK_STORAGE_I8, e.g. from
   * lshk::quantize_rows_i8): row r is scales[r] * w[r]. */
  WeightsView(span<const int8_t> w, span<const float> scales, std::size_t rows, std::size_t dim,
              std::size_t w_stride, span<const float> bias = {})
      : WeightsView(LSHK_STORAGE_I8, w.data(), w.size(), scales, rows, dim, w_stride, bias) {
    detail::need_in("lshk::WeightsView", "scales", scales.size(), rows);
  }

 private:
  WeightsView(uint32_t st, const void *data, std::size_t size, span<const float> sc,
              std::size_t n, std::size_t d, std::size_t stride, span<const float> b)
      : lshk_weights_view() {
    detail::need_rows("lshk::WeightsView", "w", size, n, d, stride);
    if (!b.empty()) detail::need_in("lshk::WeightsView", "bias", b.size(), n);
    struct_size = static_cast<uint32_t>(sizeof(lshk_weights_view));
    storage = st;
    w = data;
    scales = detail::or_null(sc);
    bias = detail::or_null(b);
    rows = n;
    dim = d;
    w_stride = stride;
  }
};

namespace detail {
inline void gathered_matmul(const Isa *isa, const lshk_weights_view &w, span<const float> q,
                            std::size_t q_stride, span<const uint32_t> ids,
                            span<const std::size_t> offsets, span<float> out) {
  const char *where = "lshk::gathered_matmul";
  std::size_t nq = csr_queries(where, offsets.size());
  need_rows(where, "q", q.size(), nq, w.dim, q_stride);
  std::size_t len = offsets[nq];
  need_in(where, "ids", ids.size(), len);
  need_out(where, "out", out.size(), len);
  check(isa ? lshk_gathered_matmul_isa(static_cast<lshk_isa>(*isa), &w, q.data(), nq, q_stride,
                                       ids.data(), offsets.data(), out.data(), len)
            : lshk_gathered_matmul(&w, q.data(), nq, q_stride, ids.data(), offsets.data(),
                                   out.data(), len));
}
}  // namespace detail

/* lshk_gathered_matmul: out[j] = dot(W[ids[j]], q[i]) + bias[ids[j]] for j
 * in query i's segment offsets[i] .. offsets[i+1] (nq = offsets.size() -
 * 1), W and the bias as the view `w` describes them (a WeightsView, or
 * Index::weights()); `out` holds at least offsets[nq] floats, the first
 * offsets[nq] are written. */
inline void gathered_matmul(const lshk_weights_view &w, span<const float> q, std::size_t q_stride,
                            span<const uint32_t> ids, span<const std::size_t> offsets,
                            span<float> out) {
  detail::gathered_matmul(nullptr, w, q, q_stride, ids, offsets, out);
}
/* lshk_gathered_matmul_isa: the same on one chosen tier. */
inline void gathered_matmul(Isa isa, const lshk_weights_view &w, span<const float> q,
                            std::size_t q_stride, span<const uint32_t> ids,
                            span<const std::size_t> offsets, span<float> out) {
  detail::gathered_matmul(&isa, w, q, q_stride, ids, offsets, out);
}

/* lshk_convert of src.size() values from f32 to `to` (LSHK_STORAGE_BF16 or
 * LSHK_STORAGE_F16 bit patterns); dst holds at least src.size(). */
inline void convert(span<const float> src, uint32_t to, span<uint16_t> dst) {
  detail::need_out("lshk::convert", "dst", dst.size(), src.size());
  check(lshk_convert(LSHK_STORAGE_F32, src.data(), src.size(), to, dst.data()));
}
/* lshk_convert from `from` (LSHK_STORAGE_BF16 or LSHK_STORAGE_F16 bit
 * patterns) to f32. */
inline void convert(uint32_t from, span<const uint16_t> src, span<float> dst) {
  detail::need_out("lshk::convert", "dst", dst.size(), src.size());
  check(lshk_convert(from, src.data(), src.size(), LSHK_STORAGE_F32, dst.data()));
}
inline std::vector<uint16_t> convert(span<const float> src, uint32_t to) {
  std::vector<uint16_t> v(src.size());
  convert(src, to, v);
  return v;
}
inline std::vector<float> convert(uint32_t from, span<const uint16_t> src) {
  std::vector<float> v(src.size());
  convert(from, src, v);
  return v;
}

/* lshk_quantize_rows_i8: rows of w (at w_stride) into out (at out_stride)
 * and one scale per row. */
inline void quantize_rows_i8(span<const float> w, std::size_t rows, std::size_t dim,
                             std::size_t w_stride, span<int8_t> out, std::size_t out_stride,
                             span<float> scales) {
  const char *where = "lshk::quantize_rows_i8";
  detail::need_rows(where, "w", w.size(), rows, dim, w_stride);
  std::size_t need = 0;
  if (detail::rows_extent(rows, dim, out_stride, &need))
    detail::need_out(where, "out", out.size(), need);
  detail::need_out(where, "scales", scales.size(), rows);
  check(lshk_quantize_rows_i8(w.data(), rows, dim, w_stride, out.data(), out_stride,
                              scales.data()));
}
/* int8 rows (stride dim) and their scales. */
struct QuantizedRows {
  std::vector<int8_t> values;
  std::vector<float> scales;
};
inline QuantizedRows quantize_rows_i8(span<const float> w, std::size_t rows, std::size_t dim,
                                      std::size_t w_stride) {
  QuantizedRows r;
  std::size_t n = 0;
  if (!detail::mul(rows, dim, &n))
    detail::fail(LSHK_STATUS_SIZE_OVERFLOW, "lshk::quantize_rows_i8: rows * dim overflows");
  r.values.resize(n);
  r.scales.resize(rows);
  quantize_rows_i8(w, rows, dim, w_stride, r.values, dim, r.scales);
  return r;
}

/* lshk_topk: per query (nq = offsets.size() - 1) the k best candidates of
 * scores[offsets[i] .. offsets[i+1]] (ids from `ids`, or positions when
 * `ids` is empty) into out_ids / out_scores[i*k .. i*k + k]. */
inline void topk(span<const float> scores, span<const uint32_t> ids,
                 span<const std::size_t> offsets, uint32_t k, span<uint32_t> out_ids,
                 span<float> out_scores) {
  const char *where = "lshk::topk";
  std::size_t nq = detail::csr_queries(where, offsets.size());
  std::size_t len = offsets[nq];
  detail::need_in(where, "scores", scores.size(), len);
  if (!ids.empty()) detail::need_in(where, "ids", ids.size(), len);
  std::size_t outn = 0;
  if (detail::mul(nq, k, &outn)) {
    detail::need_out(where, "out_ids", out_ids.size(), outn);
    detail::need_out(where, "out_scores", out_scores.size(), outn);
  }
  check(lshk_topk(scores.data(), len > 0 ? detail::or_null(ids) : nullptr, offsets.data(), nq, k,
                  out_ids.data(), out_scores.data()));
}
/* k ids and scores per query, row-major (query i at [i*k, i*k + k)). */
struct TopK {
  uint32_t k = 0;
  std::vector<uint32_t> ids;
  std::vector<float> scores;
  std::size_t queries() const noexcept { return k ? ids.size() / k : 0; }
  span<const uint32_t> ids_of(std::size_t i) const noexcept { return {ids.data() + i * k, k}; }
  span<const float> scores_of(std::size_t i) const noexcept {
    return {scores.data() + i * k, k};
  }
};
inline TopK topk(span<const float> scores, span<const uint32_t> ids,
                 span<const std::size_t> offsets, uint32_t k) {
  std::size_t nq = detail::csr_queries("lshk::topk", offsets.size());
  TopK r;
  r.k = k;
  std::size_t n = 0;
  if (!detail::mul(nq, k, &n))
    detail::fail(LSHK_STATUS_SIZE_OVERFLOW, "lshk::topk: nq * k overflows");
  r.ids.resize(n);
  r.scores.resize(n);
  topk(scores, ids, offsets, k, r.ids, r.scores);
  return r;
}

/* One shard's answers for lshk::topk_merge: k ids (the shard's own rows)
 * and scores per query, and the shard's first row in the whole layer. */
struct ShardTopK {
  span<const uint32_t> ids;
  span<const float> scores;
  std::size_t k = 0;
  uint32_t first_row = 0;
  ShardTopK() noexcept = default;
  ShardTopK(span<const uint32_t> ids_, span<const float> scores_, std::size_t k_,
            uint32_t first_row_) noexcept
      : ids(ids_), scores(scores_), k(k_), first_row(first_row_) {}
  /* A shard's Index::query answer (keep `t` alive while this is used). */
  ShardTopK(const TopK &t, uint32_t first_row_) noexcept
      : ids(t.ids), scores(t.scores), k(t.k), first_row(first_row_) {}
  ShardTopK(TopK &&, uint32_t) = delete;  // would view a temporary
};
/* lshk_topk_merge: per query i < nq the k best over every shard's entries,
 * ids made global (first_row + id), into out_ids / out_scores[i*k ..].
 * Allocates the array of C shard descriptors. */
inline void topk_merge(span<const ShardTopK> shards, std::size_t nq, uint32_t k,
                       span<uint32_t> out_ids, span<float> out_scores) {
  const char *where = "lshk::topk_merge";
  std::vector<lshk_shard_topk> cs(shards.size());
  for (std::size_t s = 0; s < shards.size(); s++) {
    const ShardTopK &p = shards[s];
    std::size_t n = 0;
    if (detail::mul(nq, p.k, &n)) {
      detail::need_in(where, "a shard's ids", p.ids.size(), n);
      detail::need_in(where, "a shard's scores", p.scores.size(), n);
    }
    cs[s].ids = p.ids.data();
    cs[s].scores = p.scores.data();
    cs[s].k = p.k;
    cs[s].first_row = p.first_row;
  }
  std::size_t outn = 0;
  if (detail::mul(nq, k, &outn)) {
    detail::need_out(where, "out_ids", out_ids.size(), outn);
    detail::need_out(where, "out_scores", out_scores.size(), outn);
  }
  check(lshk_topk_merge(cs.data(), cs.size(), nq, k, out_ids.data(), out_scores.data()));
}
inline TopK topk_merge(span<const ShardTopK> shards, std::size_t nq, uint32_t k) {
  TopK r;
  r.k = k;
  std::size_t n = 0;
  if (!detail::mul(nq, k, &n))
    detail::fail(LSHK_STATUS_SIZE_OVERFLOW, "lshk::topk_merge: nq * k overflows");
  r.ids.resize(n);
  r.scores.resize(n);
  topk_merge(shards, nq, k, r.ids, r.scores);
  return r;
}

/* lshk_softmax: per query the softmax of scores[offsets[i] .. offsets[i+1]]
 * into the same positions of `out` (out may be scores itself); `lse`, if
 * not empty, receives nq log-sum-exps. */
inline void softmax(span<const float> scores, span<const std::size_t> offsets, span<float> out,
                    span<float> lse = span<float>()) {
  const char *where = "lshk::softmax";
  std::size_t nq = detail::csr_queries(where, offsets.size());
  std::size_t len = offsets[nq];
  detail::need_in(where, "scores", scores.size(), len);
  detail::need_out(where, "out", out.size(), len);
  if (!lse.empty()) detail::need_out(where, "lse", lse.size(), nq);
  check(lshk_softmax(scores.data(), offsets.data(), nq, out.data(), detail::or_null(lse)));
}

/* ------------------------------------------------------------------ Index */

/* lshk_index_params with the library's defaults (lshk_index_params_default():
 * the SimHash source, F32 storage), or those defaults with another source
 * (LSHK_SOURCE_*). Each source reads only its own knobs (lsh, ivf, graph,
 * forest), which keep their defaults until changed, e.g.
 *   lshk::IndexParams p(LSHK_SOURCE_IVF);
 *   p.ivf.nlist = 64;
 *   p.storage = LSHK_STORAGE_BORROWED_F32; */
struct IndexParams : lshk_index_params {
  IndexParams() noexcept : lshk_index_params(lshk_index_params_default()) {}
  explicit IndexParams(uint32_t source_) noexcept : IndexParams() { source = source_; }
  IndexParams(const lshk_index_params &p) noexcept : lshk_index_params(p) {}

  /* Caller-given SimHash planes (K*L rows of dim', copied by the build;
   * the span must stay valid until then). Empty = from the seed. */
  IndexParams &set_planes(span<const float> given) noexcept {
    lsh.planes = detail::or_null(given);
    lsh.planes_len = given.size();
    return *this;
  }
  /* Caller-given DWTA bin map (K*L*B coordinates, copied by the build). */
  IndexParams &set_dwta_map(span<const uint32_t> map) noexcept {
    lsh.dwta_map = detail::or_null(map);
    lsh.dwta_map_len = map.size();
    return *this;
  }
  /* IVF row weights steering the k-means (`rows` floats, read by the
   * build only). Empty = all 1. */
  IndexParams &set_row_weights(span<const float> weights) noexcept {
    ivf.row_weights = detail::or_null(weights);
    ivf.n_weights = weights.size();
    return *this;
  }
};

/* lshk_query_params with the library's defaults (lshk_query_params_default());
 * the for_* constructors set one source's main knobs (a source reads only
 * its own; the names cannot be the fields' own, lsh, ivf, graph, forest,
 * which they would hide). */
struct QueryParams : lshk_query_params {
  QueryParams() noexcept : lshk_query_params(lshk_query_params_default()) {}
  QueryParams(const lshk_query_params &p) noexcept : lshk_query_params(p) {}
  /* LSH: `probes` extra buckets per table (SimHash multi-probing), at most
   * `max_candidates` distinct ids per query (0: no budget). */
  static QueryParams for_lsh(uint32_t probes, uint32_t max_candidates = 0) noexcept {
    QueryParams p;
    p.lsh.probes = probes;
    p.lsh.max_candidates = max_candidates;
    return p;
  }
  /* IVF: exactly `nprobe` lists (reach 0), or at most that many with an
   * adaptive `reach`; `rerank` exact re-scores. */
  static QueryParams for_ivf(uint32_t nprobe, uint32_t rerank, float reach = 0.0f) noexcept {
    QueryParams p;
    p.ivf.nprobe = nprobe;
    p.ivf.rerank = rerank;
    p.ivf.reach = reach;
    return p;
  }
  /* Graph: a pool of max(ef, k), the walk (LSHK_GRAPH_WALK_*), the pool's
   * best `rerank` as candidates (0: the whole pool). */
  static QueryParams for_graph(uint32_t ef, uint32_t walk = LSHK_GRAPH_WALK_EXACT,
                               uint32_t rerank = 0) noexcept {
    QueryParams p;
    p.graph.ef = ef;
    p.graph.walk = walk;
    p.graph.rerank = rerank;
    return p;
  }
  /* Forest: candidate sets of max(set_size, k) classes, trimmed by
     HF-A's confidence threshold (0 = not trimmed). */
  static QueryParams for_forest(uint32_t set_size, float confidence = 0.0f) noexcept {
    QueryParams p;
    p.forest.set_size = set_size;
    p.forest.confidence = confidence;
    return p;
  }
};

/* lshk_query_stats with struct_size set. */
struct QueryStats : lshk_query_stats {
  QueryStats() noexcept : lshk_query_stats() { struct_size = sizeof(lshk_query_stats); }
};

/* lshk_label_params initialised by lshk_label_params_default(). */
struct LabelParams : lshk_label_params {
  LabelParams() noexcept : lshk_label_params(lshk_label_params_default()) {}
  LabelParams(const lshk_label_params &p) noexcept : lshk_label_params(p) {}
};

/* Build progress: called with (rows done, total rows). */
using Progress = std::function<void(uint64_t done, uint64_t total)>;

namespace detail {
/* The handle of lshk::Index and its shape, read once (lshk_index_describe)
 * when the handle is taken: rows and dim never change. */
class IndexBase {
 public:
  const lshk_index *get() const noexcept { return h_; }
  explicit operator bool() const noexcept { return h_ != nullptr; }
  std::size_t rows() const noexcept { return rows_; }
  std::size_t dim() const noexcept { return dim_; }

 protected:
  IndexBase() noexcept = default;
  void take(const lshk_index *h) {
    lshk_index_info i{};
    i.struct_size = sizeof i;
    if (h) check(lshk_index_describe(h, &i));
    h_ = h;
    rows_ = h ? i.rows : 0;
    dim_ = h ? i.dim : 0;
  }
  IndexBase(const IndexBase &) noexcept = default;
  IndexBase &operator=(const IndexBase &) noexcept = default;
  ~IndexBase() = default;
  void clear() noexcept { *this = IndexBase(); }

  const lshk_index *h_ = nullptr;
  std::size_t rows_ = 0, dim_ = 0;
};
}  // namespace detail

/* Owns an lshk_index, the one retrieval object of every candidate source
 * (SimHash or DWTA tables, the graph, IVF lists, the forest): one call
 * from a query batch to its top-k rows. Move-only; every const method is
 * thread-safe, so one `const lshk::Index &` may serve many threads (no
 * locks, per-thread scratch inside the library). The non-const methods
 * need EXCLUSIVE access: no other call on the index (queries included, and
 * its simhash()/dwta()/lsh_tables() views) may run meanwhile. A call that
 * the index's source does not have throws the status lshk.h gives for it
 * (mostly LSHK_STATUS_UNSUPPORTED). */
class Index : public detail::Owner<Index, detail::IndexBase, lshk_index, lshk_index_free> {
 public:
  /* An empty owner (every operation throws NULL_POINTER). */
  Index() noexcept = default;

  /* lshk_index_build over `rows` rows of `dim` floats of w (row r at
   * w[r * w_stride]); `bias` empty = none, else `rows` floats. The source
   * and its knobs are p's. With p.storage == LSHK_STORAGE_BORROWED_F32, w
   * is NOT copied: it must stay alive (and unchanged, but for rows passed
   * to update_rows or followed by rebuild) as long as the index. */
  Index(span<const float> w, span<const float> bias, std::size_t rows, std::size_t dim,
        std::size_t w_stride, const lshk_index_params &p = IndexParams()) {
    build(w, bias, rows, dim, w_stride, p, nullptr);
  }
  /* The same, reporting progress: `progress(done, total)` is called on the
   * calling thread (see lshk_progress_fn). An exception thrown by
   * `progress` is caught before it reaches the library, later progress
   * calls are skipped, and it is rethrown here once the build has
   * returned (the index is freed). */
  Index(span<const float> w, span<const float> bias, std::size_t rows, std::size_t dim,
        std::size_t w_stride, const lshk_index_params &p, const Progress &progress) {
    build(w, bias, rows, dim, w_stride, p, progress ? &progress : nullptr);
  }

  /* lshk_index_load: maps the file (0.2 IVF, graph and forest files load
   * as indexes of their source). `w` is needed, and only allowed, for a
   * file whose W is not stored (built on a borrowed W): the same W as at
   * build time, which must outlive the returned index; `w_stride` 0 = the
   * stride the file records. It is a plain pointer, not a span, because
   * the shape it must have is in the file: the wrapper cannot check it. */
  static Index load(const std::string &path, const float *w = nullptr, std::size_t w_stride = 0) {
    lshk_index *h = nullptr;
    check(lshk_index_load(path.c_str(), w, w_stride, &h));
    return adopt_handle(h);
  }
  /* lshk_index_load_borrowed: the same with W as a span, whose length the
   * library checks against the file's shape before reading W (a file
   * needing more throws LSHK_STATUS_BUFFER_TOO_SMALL). Prefer it whenever
   * W's length is known. */
  static Index load(const std::string &path, span<const float> w, std::size_t w_stride = 0) {
    lshk_index *h = nullptr;
    check(lshk_index_load_borrowed(path.c_str(), w.data(), w.size(), w_stride, &h));
    return adopt_handle(h);
  }
  /* lshk_index_save: written to a temporary file, then renamed. A borrowed
   * W is not stored (load takes it again). */
  void save(const std::string &path) const { check(lshk_index_save(h_, path.c_str())); }

  /* lshk_index_describe: the source, storage, transform, shape and the
   * source's main sizes, as they are now (`labelled` changes with
   * train_labels). */
  lshk_index_info describe() const {
    lshk_index_info i{};
    i.struct_size = sizeof i;
    check(lshk_index_describe(h_, &i));
    return i;
  }
  /* lshk_index_memory_bytes. */
  std::size_t memory_bytes() const {
    std::size_t b = 0;
    check(lshk_index_memory_bytes(h_, &b));
    return b;
  }
  /* lshk_index_weights: the weights (and bias) the logits come from, for
   * gathered_matmul; the view is valid while the index lives. */
  lshk_weights_view weights() const {
    lshk_weights_view v{};
    v.struct_size = sizeof v;
    check(lshk_index_weights(h_, &v));
    return v;
  }

  /* lshk_index_query: the top k rows of each of nq queries (row i at
   * q[i * q_stride]) into out_ids / out_scores[i*k .. i*k + k] (descending,
   * padded with UINT32_MAX / -inf; `out_scores` empty = not wanted), with
   * the knobs of `qp`; `stats` NULL = not wanted. */
  void query(span<const float> q, std::size_t nq, std::size_t q_stride, uint32_t k,
             span<uint32_t> out_ids, span<float> out_scores,
             const lshk_query_params &qp = QueryParams(),
             lshk_query_stats *stats = nullptr) const {
    const char *where = "lshk::Index::query";
    detail::need_rows(where, "q", q.size(), nq, dim_, q_stride);
    std::size_t n = 0;
    if (detail::mul(nq, k, &n)) {
      detail::need_out(where, "out_ids", out_ids.size(), n);
      if (!out_scores.empty()) detail::need_out(where, "out_scores", out_scores.size(), n);
    }
    check(lshk_index_query(h_, q.data(), nq, q_stride, k, &qp, out_ids.data(),
                           detail::or_null(out_scores), stats));
  }
  /* Contiguous queries (q.size() a multiple of dim) into a reusable TopK
   * (its vectors are resized to nq * k; a warm TopK does not allocate). */
  void query(span<const float> q, uint32_t k, TopK &out,
             const lshk_query_params &qp = QueryParams(),
             lshk_query_stats *stats = nullptr) const {
    std::size_t nq = detail::whole_rows("lshk::Index::query", "q", q.size(), dim_);
    std::size_t n = 0;
    if (!detail::mul(nq, k, &n))
      detail::fail(LSHK_STATUS_SIZE_OVERFLOW, "lshk::Index::query: nq * k overflows");
    out.k = k;
    out.ids.resize(n);
    out.scores.resize(n);
    query(q, nq, dim_, k, out.ids, out.scores, qp, stats);
  }
  TopK query(span<const float> q, uint32_t k, const lshk_query_params &qp = QueryParams(),
             lshk_query_stats *stats = nullptr) const {
    TopK r;
    query(q, k, r, qp, stats);
    return r;
  }

  /* lshk_index_candidates: the candidate sets of nq queries (row i at
   * q[i * q_stride]) as the source hands them to the scorer for a top-k
   * query with `qp` (k may be 0), unscored, into `out` (CSR; query i's
   * ids out[i], in the source's order). On error `out` is left empty. */
  void candidates(span<const float> q, std::size_t nq, std::size_t q_stride, uint32_t k,
                  GatherResult &out, const lshk_query_params &qp = QueryParams()) const {
    out.queries_ = out.total_ = 0;
    out.has_counts_ = false;
    detail::need_rows("lshk::Index::candidates", "q", q.size(), nq, dim_, q_stride);
    out.fill(nq, false, [&](uint32_t *ids, std::size_t ids_len, std::size_t *offsets, uint32_t *,
                            std::size_t *needed) {
      return lshk_index_candidates(h_, q.data(), nq, q_stride, k, &qp, ids, ids_len, offsets,
                                   needed);
    });
  }
  /* Contiguous queries (q.size() a multiple of dim). */
  GatherResult candidates(span<const float> q, uint32_t k,
                          const lshk_query_params &qp = QueryParams()) const {
    GatherResult r;
    candidates(q, detail::whole_rows("lshk::Index::candidates", "q", q.size(), dim_), dim_, k, r,
               qp);
    return r;
  }

  /* lshk_index_union: S(X), the distinct ids among `ids` (each < rows(),
   * e.g. a batch's candidates) with their counts, sampled down to `cap`
   * of them (0: no cap) with `seed`, into out_ids (ascending) and, when
   * not null, out_counts (both resized). */
  void union_(span<const uint32_t> ids, std::size_t cap, uint64_t seed,
              std::vector<uint32_t> &out_ids, std::vector<uint32_t> *out_counts = nullptr) const {
    std::size_t most = ids.size() < rows_ ? ids.size() : rows_;
    if (cap != 0 && cap < most) most = cap;
    out_ids.resize(most);
    if (out_counts) out_counts->resize(most);
    std::size_t needed = 0;
    check(lshk_index_union(h_, detail::or_null(ids), ids.size(), cap, seed,
                           detail::or_null(span<uint32_t>(out_ids)),
                           out_counts ? detail::or_null(span<uint32_t>(*out_counts)) : nullptr,
                           most, &needed));
    out_ids.resize(needed);
    if (out_counts) out_counts->resize(needed);
  }

  /* lshk_index_calibrate (IVF source): the query parameters that reach
   * `target_recall` recall@k on the sample queries (contiguous rows of dim
   * floats; held-out queries of the real workload). Pass the result's
   * `query` to query(). */
  lshk_calibration calibrate(span<const float> q, uint32_t k, float target_recall,
                             uint32_t rerank = 32, uint32_t threads = 0) const {
    std::size_t nq = detail::whole_rows("lshk::Index::calibrate", "q", q.size(), dim_);
    lshk_calibration c{};
    c.struct_size = static_cast<uint32_t>(sizeof c);
    check(lshk_index_calibrate(h_, q.data(), nq, dim_, k, target_recall, rerank, threads, &c));
    return c;
  }

  /* lshk_index_rebuild (forest source): the trees again from the index's
   * current W (a borrowed W the caller changed in place), with the
   * forest's seed or `new_seed`. EXCLUSIVE; on error the index is
   * unchanged. */
  void rebuild() { check(lshk_index_rebuild(get(), nullptr)); }
  void rebuild(uint64_t new_seed) { check(lshk_index_rebuild(get(), &new_seed)); }

  /* lshk_index_set_codes (LSH, graph and forest sources): with
   * LSHK_IVF_CODES_I8 every candidate is scored from int8 codes of the
   * rows and the best max(rerank, k) of each query again exactly from W
   * (those answer); LSHK_IVF_CODES_NONE scores every candidate exactly.
   * The codes follow row updates, rehashes and rebuilds and are saved;
   * describe().codes reports them. EXCLUSIVE. */
  void set_codes(uint32_t codes, uint32_t rerank = 32) {
    check(lshk_index_set_codes(get(), codes, rerank));
  }

  /* lshk_index_train_labels (LSH and IVF sources): label-aware buckets or
   * lists from n training queries (row i at q[i * q_stride]) with CSR
   * labels (label_offsets: n + 1 non-decreasing values; labels: at least
   * label_offsets[n] row ids). EXCLUSIVE. An index is trained once; the
   * training is saved with it. */
  void train_labels(span<const float> q, std::size_t n, std::size_t q_stride,
                    span<const std::size_t> label_offsets, span<const uint32_t> labels,
                    const lshk_label_params &p = LabelParams()) {
    const char *where = "lshk::Index::train_labels";
    detail::need_rows(where, "q", q.size(), n, dim_, q_stride);
    if (n == static_cast<std::size_t>(-1))
      detail::fail(LSHK_STATUS_SIZE_OVERFLOW, std::string(where) + ": n + 1 overflows");
    detail::need_in(where, "label_offsets", label_offsets.size(), n + 1);
    detail::need_in(where, "labels", labels.size(), label_offsets.data()[n]);
    check(lshk_index_train_labels(get(), q.data(), n, q_stride, label_offsets.data(),
                                  labels.data(), &p));
  }
  /* lshk_index_label_info: whether the index was trained with labels; if so
   * and `p` is not null, *p receives the training parameters. */
  bool labels_trained(lshk_label_params *p = nullptr) const {
    uint32_t trained = 0;
    LabelParams lp;
    check(lshk_index_label_info(h_, &trained, &lp));
    if (trained && p) *p = lp;
    return trained != 0;
  }

  /* The LSH sources' family and tables, for callers who want the kernels
   * directly: views valid while the index lives. */
  SimHashRef simhash() const {
    const lshk_simhash *s = nullptr;
    check(lshk_index_simhash(h_, &s));
    return SimHashRef(s);
  }
  DwtaRef dwta() const {
    const lshk_dwta *d = nullptr;
    check(lshk_index_dwta(h_, &d));
    return DwtaRef(d);
  }
  TablesRef lsh_tables() const {
    const lshk_tables *t = nullptr;
    check(lshk_index_tables(h_, &t));
    return TablesRef(t);
  }

  /* lshk_index_update_rows (LSH sources) writes new values of rows `ids`
   * (row j at rows[j * row_stride]; `rows` empty for a borrowed W, which
   * the caller changed in place) and optionally their bias (`bias` empty =
   * unchanged, else ids.size() values), marking them dirty; rehash_rows /
   * rehash_dirty move rows to their new buckets and return how many were
   * rehashed. EXCLUSIVE. */
  void update_rows(span<const uint32_t> ids, span<const float> rows, std::size_t row_stride,
                   span<const float> bias = {}) {
    const char *where = "lshk::Index::update_rows";
    if (!rows.empty()) detail::need_rows(where, "rows", rows.size(), ids.size(), dim_, row_stride);
    if (!bias.empty()) detail::need_in(where, "bias", bias.size(), ids.size());
    check(lshk_index_update_rows(get(), ids.data(), ids.size(), detail::or_null(rows), row_stride,
                                 detail::or_null(bias)));
  }
  std::size_t rehash_rows(span<const uint32_t> ids) {
    std::size_t n = 0;
    check(lshk_index_rehash_rows(get(), ids.data(), ids.size(), &n));
    return n;
  }
  std::size_t rehash_dirty() {
    std::size_t n = 0;
    check(lshk_index_rehash_dirty(get(), &n));
    return n;
  }
  std::size_t dirty_rows() const {
    std::size_t n = 0;
    check(lshk_index_dirty_rows(h_, &n));
    return n;
  }

  /* lshk_index_inclusion_prob (SimHash source, logQ correction): for query
   * i (row i at q[i * q_stride]; nq = offsets.size() - 1) and each
   * candidate ids[offsets[i] .. offsets[i+1]] (CSR), out_prob[j] = 1 - (1 -
   * p^K)^l, p = 1 - theta/pi (the angle as the index hashes query and row),
   * l = tables_used[i] (`tables_used` empty = L for every query). A trainer
   * subtracts log(out_prob[j]) from sampled negative j's logit. */
  void inclusion_prob(span<const float> q, std::size_t q_stride, span<const uint32_t> ids,
                      span<const std::size_t> offsets, span<const uint32_t> tables_used,
                      span<double> out_prob) const {
    const char *where = "lshk::Index::inclusion_prob";
    std::size_t nq = detail::csr_queries(where, offsets.size());
    detail::need_rows(where, "q", q.size(), nq, dim_, q_stride);
    std::size_t len = offsets.data()[nq];
    detail::need_in(where, "ids", ids.size(), len);
    if (!tables_used.empty()) detail::need_in(where, "tables_used", tables_used.size(), nq);
    detail::need_out(where, "out_prob", out_prob.size(), len);
    check(lshk_index_inclusion_prob(h_, detail::or_null(q), nq, q_stride, detail::or_null(ids),
                                    offsets.data(), detail::or_null(tables_used),
                                    detail::or_null(out_prob)));
  }
  /* Contiguous queries (row i at q[i * dim()]): the offsets[nq]
   * probabilities as a new vector. */
  std::vector<double> inclusion_prob(span<const float> q, span<const uint32_t> ids,
                                     span<const std::size_t> offsets,
                                     span<const uint32_t> tables_used = {}) const {
    std::size_t nq = detail::csr_queries("lshk::Index::inclusion_prob", offsets.size());
    std::vector<double> out(offsets.data()[nq]);
    inclusion_prob(q, dim_, ids, offsets, tables_used, out);
    return out;
  }

 private:
  struct ProgressCtx {
    const Progress *fn;
    std::exception_ptr error;
  };
  static void progress_trampoline(void *user, uint64_t done, uint64_t total) noexcept {
    ProgressCtx *c = static_cast<ProgressCtx *>(user);
    if (c->error) return;
    try {
      (*c->fn)(done, total);
    } catch (...) {
      c->error = std::current_exception();
    }
  }
  void build(span<const float> w, span<const float> bias, std::size_t rows, std::size_t dim,
             std::size_t w_stride, const lshk_index_params &p, const Progress *progress) {
    const char *where = "lshk::Index::Index";
    detail::need_rows(where, "w", w.size(), rows, dim, w_stride);
    if (!bias.empty()) detail::need_in(where, "bias", bias.size(), rows);
    lshk_index_params pp = p;
    ProgressCtx ctx{progress, nullptr};
    if (progress) {
      pp.progress = &Index::progress_trampoline;
      pp.progress_user = &ctx;
    }
    lshk_index *h = nullptr;
    lshk_status st =
        lshk_index_build(w.data(), detail::or_null(bias), rows, dim, w_stride, &pp, &h);
    if (ctx.error) {
      if (st == LSHK_STATUS_OK) (void)lshk_index_free(h);
      std::rethrow_exception(ctx.error);
    }
    check(st);
    adopt(h);
  }
};

/* -------------------------------------------------------------------- HRR */

/* lshk_hrr_*: binding, unbinding and projection of d-dimensional
 * holographic reduced representations (docs/hrr.md). Owns an lshk_hrr
 * handle (FFT plans and scratch buffers): move-only, and one object per
 * thread, because every call uses the handle's buffers. Rows are
 * contiguous, d floats each. */
class Hrr {
 public:
  /* The inverse of lshk_hrr_unbind (LSHK_HRR_INVERSE_*). */
  enum class Inverse : std::uint32_t {
    approx = LSHK_HRR_INVERSE_APPROX,
    exact = LSHK_HRR_INVERSE_EXACT,
  };

  /* An empty owner (every operation throws NULL_POINTER). */
  Hrr() noexcept = default;
  /* lshk_hrr_new: plans for vectors of d floats. */
  explicit Hrr(std::size_t d) {
    check(lshk_hrr_new(d, &h_));
    d_ = d;
  }
  /* lshk_hrr_new_isa: every call on tier `isa`. */
  Hrr(std::size_t d, Isa isa) {
    check(lshk_hrr_new_isa(d, static_cast<lshk_isa>(isa), &h_));
    d_ = d;
  }
  Hrr(const Hrr &) = delete;
  Hrr &operator=(const Hrr &) = delete;
  Hrr(Hrr &&o) noexcept : h_(o.h_), d_(o.d_) {
    o.h_ = nullptr;
    o.d_ = 0;
  }
  Hrr &operator=(Hrr &&o) noexcept {
    if (this != &o) {
      reset();
      h_ = o.h_;
      d_ = o.d_;
      o.h_ = nullptr;
      o.d_ = 0;
    }
    return *this;
  }
  ~Hrr() { reset(); }
  /* Frees the handle now; the owner becomes empty. */
  void reset() noexcept {
    if (h_) (void)lshk_hrr_free(h_);
    h_ = nullptr;
    d_ = 0;
  }
  std::size_t dim() const noexcept { return d_; }
  lshk_hrr *get() noexcept { return h_; }

  /* lshk_hrr_bind: out_r = x_r (*) y_r for every row r of y; x holds one
   * row (bound to every row) or as many rows as y; out y.size() floats. */
  void bind(span<const float> x, span<const float> y, span<float> out) {
    const char *where = "lshk::Hrr::bind";
    std::size_t n = detail::whole_rows(where, "y", y.size(), d_);
    std::size_t xr = detail::whole_rows(where, "x", x.size(), d_);
    detail::need_out(where, "out", out.size(), y.size());
    check(lshk_hrr_bind(h_, detail::or_null(x), xr, detail::or_null(y), n, detail::or_null(out)));
  }
  /* lshk_hrr_unbind: out_r = key_r^+ (*) s_r; key one row or as many as s. */
  void unbind(Inverse inverse, span<const float> key, span<const float> s, span<float> out) {
    const char *where = "lshk::Hrr::unbind";
    std::size_t n = detail::whole_rows(where, "s", s.size(), d_);
    std::size_t kr = detail::whole_rows(where, "key", key.size(), d_);
    detail::need_out(where, "out", out.size(), s.size());
    check(lshk_hrr_unbind(h_, static_cast<std::uint32_t>(inverse), detail::or_null(key), kr,
                          detail::or_null(s), n, detail::or_null(out)));
  }
  /* lshk_hrr_project: every row of x to unit magnitude in the Fourier
   * domain; out x.size() floats. */
  void project(span<const float> x, span<float> out) {
    const char *where = "lshk::Hrr::project";
    std::size_t n = detail::whole_rows(where, "x", x.size(), d_);
    detail::need_out(where, "out", out.size(), x.size());
    check(lshk_hrr_project(h_, detail::or_null(x), n, detail::or_null(out)));
  }
  /* lshk_hrr_class_vectors: rows first .. first + out.size() / d of the
   * projected class vectors of (seed, d); out holds whole rows. */
  static void class_vectors(std::uint64_t seed, std::size_t d, std::uint64_t first,
                            span<float> out, std::uint32_t threads = 0) {
    const char *where = "lshk::Hrr::class_vectors";
    if (d == 0) detail::fail(LSHK_STATUS_INVALID_ARGUMENT, std::string(where) + ": d is 0");
    std::size_t m = detail::whole_rows(where, "out", out.size(), d);
    check(lshk_hrr_class_vectors(seed, d, first, m, threads, detail::or_null(out)));
  }

 private:
  lshk_hrr *h_ = nullptr;
  std::size_t d_ = 0;
};

/* ------------------------------------------------ training (docs/training.md) */

namespace detail {
/* Checks shared by the training calls; returns n = offsets[nb]. */
inline std::size_t csr_total(const char *where, span<const std::size_t> offsets) {
  std::size_t nb = csr_queries(where, offsets.size());
  return offsets[nb];
}
}  // namespace detail

/* lshk_softmax_xent_csr: per sample b (nb = offsets.size() - 1) the loss
 * loss[b] and the gradient grad[j] = softmax(z)_j - t_j over its segment,
 * t = targets / sum(targets) (non-negative weights). grad may be the same
 * memory as logits (in place). threads: 0 = every core. */
inline void softmax_xent_csr(span<const float> logits, span<const float> targets,
                             span<const std::size_t> offsets, span<float> loss, span<float> grad,
                             uint32_t threads = 1) {
  const char *where = "lshk::softmax_xent_csr";
  std::size_t n = detail::csr_total(where, offsets);
  std::size_t nb = offsets.size() - 1;
  detail::need_in(where, "logits", logits.size(), n);
  detail::need_in(where, "targets", targets.size(), n);
  detail::need_out(where, "loss", loss.size(), nb);
  detail::need_out(where, "grad", grad.size(), n);
  check(lshk_softmax_xent_csr(logits.data(), targets.data(), offsets.data(), nb, threads,
                              loss.data(), grad.data()));
}

/* lshk_gather_dq: dq[b * dq_stride + k] = sum_j grad[j] W[ids[j]][k] over
 * sample b's segment, W as the view `w` describes it (f32 rows, F32 or
 * BORROWED_F32, or BF16 rows; a WeightsView, or Index::weights()). The
 * view's bias is not read: dq does not depend on it. */
inline void gather_dq(const lshk_weights_view &w, span<const float> grad,
                      span<const uint32_t> ids, span<const std::size_t> offsets, span<float> dq,
                      std::size_t dq_stride, uint32_t threads = 1) {
  const char *where = "lshk::gather_dq";
  std::size_t n = detail::csr_total(where, offsets);
  std::size_t nb = offsets.size() - 1;
  detail::need_in(where, "grad", grad.size(), n);
  detail::need_in(where, "ids", ids.size(), n);
  std::size_t need = 0;
  if (detail::rows_extent(nb, w.dim, dq_stride, &need))
    detail::need_out(where, "dq", dq.size(), need);
  /* Both f32 storages hold the same element type, which is what the
   * kernel asks for. */
  uint32_t dtype = w.storage == LSHK_STORAGE_BORROWED_F32 ? LSHK_STORAGE_F32 : w.storage;
  check(lshk_gather_dq(dtype, w.w, w.rows, w.dim, w.w_stride, grad.data(), ids.data(),
                       offsets.data(), nb, threads, dq.data(), dq_stride));
}

/* lshk_rows_update_sgd: w[ids[j]] -= (lr * grad[j]) q[b(j)] for every
 * position j of the batch, in order, in place. */
inline void rows_update_sgd(span<float> w, std::size_t rows, std::size_t dim,
                            std::size_t w_stride, span<const float> q, std::size_t q_stride,
                            span<const float> grad, span<const uint32_t> ids,
                            span<const std::size_t> offsets, float lr, uint32_t threads = 1) {
  const char *where = "lshk::rows_update_sgd";
  std::size_t n = detail::csr_total(where, offsets);
  std::size_t nb = offsets.size() - 1;
  detail::need_rows(where, "w", w.size(), rows, dim, w_stride);
  detail::need_rows(where, "q", q.size(), nb, dim, q_stride);
  detail::need_in(where, "grad", grad.size(), n);
  detail::need_in(where, "ids", ids.size(), n);
  check(lshk_rows_update_sgd(w.data(), rows, dim, w_stride, q.data(), q_stride, grad.data(),
                             ids.data(), offsets.data(), nb, lr, threads));
}

/* lshk_adam_params with the defaults (lr 1e-3, 0.9, 0.999, 1e-8). */
struct AdamParams : lshk_adam_params {
  AdamParams() : lshk_adam_params(lshk_adam_params_default()) {}
};

/* Owns lazy Adam state (lshk_adam_*) for a W of rows x dim. Move-only;
 * step() needs exclusive access. */
class Adam {
 public:
  Adam() noexcept = default;
  Adam(std::size_t rows, std::size_t dim, const lshk_adam_params &p = AdamParams())
      : rows_(rows), dim_(dim) {
    check(lshk_adam_new(rows, dim, &p, &h_));
  }
  Adam(Adam &&o) noexcept : h_(o.h_), rows_(o.rows_), dim_(o.dim_) { o.h_ = nullptr; }
  Adam &operator=(Adam &&o) noexcept {
    if (this != &o) {
      lshk_adam_free(h_);
      h_ = o.h_;
      rows_ = o.rows_;
      dim_ = o.dim_;
      o.h_ = nullptr;
    }
    return *this;
  }
  Adam(const Adam &) = delete;
  Adam &operator=(const Adam &) = delete;
  ~Adam() { lshk_adam_free(h_); }

  lshk_adam *get() const noexcept { return h_; }
  std::size_t rows() const noexcept { return rows_; }
  std::size_t dim() const noexcept { return dim_; }

  /* lshk_adam_set_params (a learning-rate schedule). */
  void set_params(const lshk_adam_params &p) { check(lshk_adam_set_params(h_, &p)); }

  /* lshk_adam_step: one lazy Adam step on the rows of the batch. */
  void step(span<float> w, std::size_t w_stride, span<const float> q, std::size_t q_stride,
            span<const float> grad, span<const uint32_t> ids, span<const std::size_t> offsets,
            uint32_t threads = 1) {
    const char *where = "lshk::Adam::step";
    std::size_t n = detail::csr_total(where, offsets);
    std::size_t nb = offsets.size() - 1;
    detail::need_rows(where, "w", w.size(), rows_, dim_, w_stride);
    detail::need_rows(where, "q", q.size(), nb, dim_, q_stride);
    detail::need_in(where, "grad", grad.size(), n);
    detail::need_in(where, "ids", ids.size(), n);
    check(lshk_adam_step(h_, w.data(), rows_, dim_, w_stride, q.data(), q_stride, grad.data(),
                         ids.data(), offsets.data(), nb, threads));
  }

 private:
  lshk_adam *h_ = nullptr;
  std::size_t rows_ = 0, dim_ = 0;
};

}  // namespace lshk

#endif /* LSHK_HPP */
