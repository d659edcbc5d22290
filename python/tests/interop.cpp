// The C++ side of test_files_shared_with_cpp (tests/test_lshk.py): builds,
// saves, loads and queries lshk::Index (include/lshk.hpp) on raw
// little-endian f32 files.
//   interop build-index W.bin rows dim OUT      (SimHash, K 10, L 16, seed 3, F32 copy)
//   interop build-ivf   W.bin rows dim OUT      (IVF, nlist 32, F32 copy)
//   interop query-index FILE Q.bin nq dim k OUT (ids then scores, raw)
//   interop query-ivf   FILE Q.bin nq dim k OUT (the same: one index type)
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "lshk.hpp"

static std::vector<float> read_f32(const char *path, std::size_t n) {
  std::vector<float> v(n);
  std::ifstream f(path, std::ios::binary);
  f.read(reinterpret_cast<char *>(v.data()), static_cast<std::streamsize>(n * sizeof(float)));
  if (!f) throw std::runtime_error(std::string("cannot read ") + path);
  return v;
}

template <class T>
static void write_raw(std::ofstream &f, const std::vector<T> &v) {
  f.write(reinterpret_cast<const char *>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
}

int main(int argc, char **argv) try {
  if (argc < 2) return 2;
  std::string mode = argv[1];
  if (mode == "build-index" || mode == "build-ivf") {
    std::size_t rows = std::strtoull(argv[3], nullptr, 10), dim = std::strtoull(argv[4], nullptr, 10);
    std::vector<float> w = read_f32(argv[2], rows * dim);
    lshk::IndexParams p(mode == "build-index" ? LSHK_SOURCE_SIMHASH : LSHK_SOURCE_IVF);
    if (mode == "build-index") {
      p.lsh.bits_per_table = 10;
      p.lsh.tables = 16;
      p.lsh.seed = 3;
    } else {
      p.ivf.nlist = 32;
    }
    lshk::Index idx(w, {}, rows, dim, dim, p);
    idx.save(argv[5]);
    return 0;
  }
  if (mode == "query-index" || mode == "query-ivf") {
    std::size_t nq = std::strtoull(argv[4], nullptr, 10), dim = std::strtoull(argv[5], nullptr, 10);
    uint32_t k = static_cast<uint32_t>(std::strtoul(argv[6], nullptr, 10));
    std::vector<float> q = read_f32(argv[3], nq * dim);
    std::vector<uint32_t> ids(nq * k);
    std::vector<float> scores(nq * k);
    const lshk::Index idx = lshk::Index::load(argv[2]);
    idx.query(q, nq, dim, k, ids, scores);
    std::ofstream f(argv[7], std::ios::binary);
    write_raw(f, ids);
    write_raw(f, scores);
    return f ? 0 : 1;
  }
  return 2;
} catch (const std::exception &e) {
  std::cerr << "interop: " << e.what() << "\n";
  return 1;
}
