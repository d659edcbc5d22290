// Tests of lshk::Hrr (include/lshk.hpp): the RAII wrapper equals the C
// calls bit for bit, moves transfer the handle, and wrapper-side and
// C-side errors throw lshk::Error with the status.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "lshk.hpp"
#include "lshk_test.h"

namespace {

template <class F>
lshk_status status_of(F f) {
  try {
    f();
  } catch (const lshk::Error &e) {
    return e.status();
  }
  return LSHK_STATUS_OK;
}

}  // namespace

int main() {
  const std::size_t d = 100, m = 30;
  try {
    std::vector<float> cls(m * d), c_cls(m * d);
    lshk::Hrr::class_vectors(7, d, 0, cls);
    lshk::check(lshk_hrr_class_vectors(7, d, 0, m, 0, c_cls.data()));
    CHECK(cls == c_cls);

    lshk::Hrr h(d);
    CHECK(h.dim() == d);
    std::vector<float> key(cls.begin(), cls.begin() + d);
    std::vector<float> y(cls.begin() + d, cls.end());
    std::vector<float> s(y.size()), back(y.size()), c_s(y.size());
    h.bind(key, y, s);
    lshk_hrr *raw = nullptr;
    lshk::check(lshk_hrr_new(d, &raw));
    lshk::check(lshk_hrr_bind(raw, key.data(), 1, y.data(), m - 1, c_s.data()));
    CHECK(s == c_s);
    lshk::check(lshk_hrr_free(raw));

    lshk::Hrr moved = std::move(h);
    CHECK(h.dim() == 0 && moved.dim() == d);
    moved.unbind(lshk::Hrr::Inverse::exact, key, s, back);
    double e = 0.0;
    for (std::size_t i = 0; i < y.size(); i++) e = std::fmax(e, std::fabs(back[i] - y[i]));
    CHECK(e < 1e-5);
    std::vector<float> p(d);
    moved.project(key, p);

    lshk::Hrr scalar(d, lshk::Isa::scalar);
    std::vector<float> s2(y.size());
    scalar.bind(key, y, s2);
    CHECK(s2 == s);

    // wrapper-side checks
    std::vector<float> short_out(d);
    CHECK(status_of([&] { moved.bind(key, y, short_out); }) == LSHK_STATUS_BUFFER_TOO_SMALL);
    std::vector<float> ragged(d + 1);
    CHECK(status_of([&] { moved.project(ragged, ragged); }) == LSHK_STATUS_INVALID_ARGUMENT);
    CHECK(status_of([&] { h.project(key, p); }) == LSHK_STATUS_NULL_POINTER);  // moved-from
    // C-side checks
    y[3] = NAN;
    CHECK(status_of([&] { moved.bind(key, y, back); }) == LSHK_STATUS_NON_FINITE);
    CHECK(status_of([&] { lshk::Hrr bad(0); }) == LSHK_STATUS_INVALID_ARGUMENT);
    CHECK(status_of([&] { lshk::Hrr::class_vectors(1, 0, 0, ragged); }) ==
          LSHK_STATUS_INVALID_ARGUMENT);
  } catch (const lshk::Error &e) {
    std::printf("unexpected lshk::Error: %s\n", e.what());
    CHECK(false);
  }
  return lshk_test_summary("hrr_wrapper");
}
