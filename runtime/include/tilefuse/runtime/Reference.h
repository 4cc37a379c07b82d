//===- Reference.h - naive float64 attention for checking -------*- C++ -*-===//
//
// The semantics of every kernels/ variant, written by hand in C++ and independently of the DSL
// text and the compiler, evaluated the naive way (whole score rows, two-pass softmax, float64).
// Tests and `tilefuse run` compare the compiled kernels against it.
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_RUNTIME_REFERENCE_H
#define TILEFUSE_RUNTIME_REFERENCE_H

#include "tilefuse/runtime/HostView.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <vector>

namespace tilefuse::runtime::reference {

struct Problem {
  int64_t B = 1, H = 1, Hkv = 1, M = 1, N = 1, D = 64;
};

struct Variant {
  double scale = 0; ///< 0: 1/sqrt(D), as tile.scale without a factor
  /// score -> score, given (b, h, q_idx, kv_idx); identity when empty.
  std::function<double(double, int64_t, int64_t, int64_t, int64_t)> scoreMod;
  /// keep the score at (b, h, q_idx, kv_idx)?; keep all when empty.
  std::function<bool(int64_t, int64_t, int64_t, int64_t)> mask;
};

/// The hand-written semantics of kernels/<name>.mlir for H query heads, or nullopt.
std::optional<Variant> variantFor(llvm::StringRef name, int64_t H);

/// out (B x H x M x D) and lse (B x H x M) from contiguous q (B x H x M x D), k, v
/// (B x Hkv x N x D). Fully masked rows give out = 0 and lse = -inf.
void attention(const Problem &p, const Variant &variant, const std::vector<double> &q,
               const std::vector<double> &k, const std::vector<double> &v,
               std::vector<double> &out, std::vector<double> &lse);

/// `n` draws of a standard normal: the inputs every check uses (random, never zeros).
template <typename Engine> std::vector<float> randomNormal(size_t n, Engine &rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float &f : x)
    f = normal(rng);
  return x;
}

/// Storage conversions (round to nearest even), so inputs can be drawn once and the reference
/// sees exactly the values the kernel reads.
uint16_t toBF16(float x);
float fromBF16(uint16_t x);
uint16_t toF16(float x);
float fromF16(uint16_t x);
/// Bytes per element of a storage type.
size_t elementSize(ElementType t);
/// Writes `values` (rounded to `t`) into `dst`, and returns them as the kernel will read them.
std::vector<double> storeAs(ElementType t, const std::vector<float> &values, void *dst);
/// Reads `count` elements of type `t` from `src`.
std::vector<double> loadAs(ElementType t, const void *src, size_t count);

} // namespace tilefuse::runtime::reference

#endif
