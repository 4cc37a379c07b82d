//===- Reference.h - running a kernel's float64 reference -------*- C++ -*-===//
//
// A kernel's float64 reference is derived from its own DSL text (tile-to-f64-reference: the
// written form evaluated naively in f64), so every variant, bundled or a user's, is checked the
// same way and written once. The compiler side (MLIR) builds it: JIT'd in process by
// runtime::ReferenceKernel (Float64Reference.h), or compiled ahead of time into a shared library
// (`tilefuse compile --emit reference`). This header is the part that needs no MLIR: the entry
// point's C interface, running it over all cores on host arrays, loading it from a shared
// library; and the inputs every check uses, with the storage conversions.
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_RUNTIME_REFERENCE_H
#define TILEFUSE_RUNTIME_REFERENCE_H

#include "tilefuse/runtime/HostView.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace tilefuse::runtime::reference {

struct Problem {
  int64_t B = 1, H = 1, Hkv = 1, M = 1, N = 1, D = 64;
};

/// MLIR's C interface descriptor of a ranked memref of f64.
template <int Rank> struct MemRefDescriptor {
  double *allocated;
  double *aligned;
  int64_t offset;
  int64_t sizes[Rank];
  int64_t strides[Rank];
};

/// The C entry point `_mlir_ciface_<kernel>_reference` of a compiled reference: Q, K, V, O
/// (rank 4) and LSE (rank 3) as f64 memrefs, then the query rows [rowBegin, rowEnd) of the
/// B x H x M row space (row (b * H + h) * M + i) to evaluate.
using ReferenceEntry = void (*)(MemRefDescriptor<4> *q, MemRefDescriptor<4> *k,
                                MemRefDescriptor<4> *v, MemRefDescriptor<4> *o,
                                MemRefDescriptor<3> *lse, int64_t rowBegin, int64_t rowEnd);

/// The C symbol of kernel `name`'s reference entry point.
std::string referenceSymbol(llvm::StringRef name);

/// Runs a reference entry on float64 host views (HostView::data points at doubles): Q, O are
/// B x H x M x D, K, V are B x Hkv x N x D, LSE is B x H x M. Checks the views against each other
/// (InvalidArgument-style messages naming the tensor), then evaluates the rows on every core.
llvm::Error runReference(ReferenceEntry entry, llvm::StringRef name, const HostView &q,
                         const HostView &k, const HostView &v, const HostView &o,
                         const HostView &lse);

/// A reference compiled ahead of time into a shared library (`tilefuse compile --emit
/// reference`), for machines without the compiler (the GPU tests).
class ReferenceLibrary {
public:
  /// Loads `path` and finds kernel `name`'s entry point in it.
  static llvm::Expected<std::unique_ptr<ReferenceLibrary>> load(llvm::StringRef path,
                                                                 llvm::StringRef name);
  llvm::Error run(const HostView &q, const HostView &k, const HostView &v, const HostView &o,
                  const HostView &lse) const {
    return runReference(entry, name, q, k, v, o, lse);
  }

private:
  ReferenceLibrary(ReferenceEntry entry, std::string name) : entry(entry), name(std::move(name)) {}
  ReferenceEntry entry;
  std::string name;
};

/// `n` draws of a standard normal: the inputs every check uses (random, never zeros).
template <typename Engine> std::vector<float> randomNormal(size_t n, Engine &rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float &f : x)
    f = normal(rng);
  return x;
}

/// The float64 reference of sequences of their own key lengths (a paged run): sequence b on the
/// first lengths[b] of its N keys, one run per sequence, or all at once with N keys each when
/// `lengths` is null; with `queryLengths` (a varlen run) also on the first queryLengths[b] of
/// its M query rows (the others are left as they are). q, k, v, out, lse are contiguous
/// B x H x M x D, B x Hkv x N x D, ..., B x H x M; a sequence without keys gets out = 0 and
/// lse = -inf, as a fully masked row. `reference` is anything with ReferenceKernel's run(q, k,
/// v, o, lse). (The regions of the variants checked this way do not read the batch index,
/// which restarts at 0 per sequence.)
template <class Reference>
llvm::Error runPerSequence(const Reference &reference, const Problem &p,
                           const std::vector<int64_t> *lengths, double *q, double *k, double *v,
                           double *out, double *lse,
                           const std::vector<int64_t> *queryLengths = nullptr) {
  int64_t step = lengths || queryLengths ? 1 : p.B;
  for (int64_t b0 = 0; b0 < p.B; b0 += step) {
    int64_t keys = lengths ? (*lengths)[b0] : p.N;
    int64_t rows = queryLengths ? (*queryLengths)[b0] : p.M;
    size_t qAt = size_t(b0 * p.H * p.M * p.D), kAt = size_t(b0 * p.Hkv * p.N * p.D);
    size_t lAt = size_t(b0 * p.H * p.M);
    // The first `rows` rows of each head: the views keep the padded strides.
    auto rowsView = [&](double *x, int64_t width, int rank) {
      HostView view = HostView::contiguous(x, {step, p.H, p.M, width}, rank);
      view.sizes[2] = rows;
      return view;
    };
    if (rows == 0)
      continue;
    if (keys == 0) {
      for (int64_t h = 0; h < step * p.H; ++h) {
        std::fill_n(out + qAt + h * p.M * p.D, rows * p.D, 0.0);
        std::fill_n(lse + lAt + h * p.M, rows, -std::numeric_limits<double>::infinity());
      }
      continue;
    }
    auto kvView = [&](double *x) {
      HostView view = HostView::contiguous(x + kAt, {step, p.Hkv, p.N, p.D});
      view.sizes[2] = keys;
      return view;
    };
    if (llvm::Error e = reference.run(rowsView(q + qAt, p.D, 4), kvView(k), kvView(v),
                                      rowsView(out + qAt, p.D, 4), rowsView(lse + lAt, 0, 3)))
      return e;
  }
  return llvm::Error::success();
}

/// The cumulative offsets (cu_seqlens) of sequences of `lengths` rows packed one after another
/// from row `first`: lengths.size() + 1 entries.
std::vector<int32_t> sequenceOffsets(const std::vector<int64_t> &lengths, int64_t first = 0);

/// A varlen run's packing (Varlen, the THD layout): the first lengths[b] rows of each head of
/// sequence b of a padded B x heads x rows tensor (rows of `rowBytes` bytes, contiguous) go to
/// rows offsets[b] ... of a [tokens, heads] one; its other rows are `fill` bytes.
std::vector<char> packRows(const char *padded, size_t rowBytes, int64_t heads, int64_t rows,
                           const std::vector<int64_t> &lengths,
                           const std::vector<int32_t> &offsets, int64_t tokens, char fill);
/// The inverse for the rows sequences own: packed rows back into a padded tensor, whose rows
/// past a sequence's length are left as they are.
void unpackRows(const char *packed, char *padded, size_t rowBytes, int64_t heads, int64_t rows,
                const std::vector<int64_t> &lengths, const std::vector<int32_t> &offsets);
/// The same for a packed logsumexp, [heads, tokens] (FlashAttention's varlen LSE layout), into a
/// padded B x heads x rows one.
void unpackLseRows(const float *packed, float *padded, int64_t heads, int64_t rows,
                   int64_t tokens, const std::vector<int64_t> &lengths,
                   const std::vector<int32_t> &offsets);

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
