//===- TestUtil.h - shared helpers of the CPU backend tests -----*- C++ -*-===//
#ifndef TILEFUSE_TEST_UNIT_TESTUTIL_H
#define TILEFUSE_TEST_UNIT_TESTUTIL_H

#include "tilefuse/runtime/CpuKernel.h"
#include "tilefuse/runtime/Float64Reference.h"
#include "tilefuse/runtime/Reference.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tilefuse::test {

/// Compiles bundled kernel `name` with storage type `dtype`; fails the test on error.
std::unique_ptr<runtime::CpuKernel> compileBundled(const std::string &name,
                                                   const std::string &dtype, int64_t br,
                                                   int64_t bc, bool instrument = false,
                                                   const std::string &cpuTarget = "host");

/// The float64 reference of DSL `text` (specialized to `headDim` and `params`), derived from
/// the text itself; fails the test on error.
std::unique_ptr<runtime::ReferenceKernel>
compileReference(const std::string &text, const std::string &bufferName, int64_t headDim = 0,
                 const std::vector<std::string> &params = {});
/// The same for bundled kernel `name`.
std::unique_ptr<runtime::ReferenceKernel> compileBundledReference(const std::string &name);

/// The text of a variant written only in the tests (test/variants/NAME.mlir).
std::string readTestVariant(const std::string &name);

/// A kernel's DSL text and the buffer name its diagnostics give: bundled kernel `name`, or
/// with `testOnly` test/variants/NAME.mlir. Fails the test (empty text) when there is none.
struct VariantSource {
  std::string text, fileName;
};
VariantSource variantSource(const std::string &name, bool testOnly);

/// The head counts the variant tests run `name` with: the ones gqa and mqa declare (8 query
/// heads; 2 and 1 key/value heads), grouped heads for attention (4 and 2) and gqa_head_window
/// (6 and 2, three query heads a key/value head), 3 and 3 for the other test-only variants, else
/// 4 and 4. True when the kernel declares them (8 query heads: callers keep those runs short).
bool variantHeads(const std::string &name, bool testOnly, runtime::reference::Problem &p);

/// One run of a kernel on fresh random inputs, with its float64 reference.
struct RunResult {
  double outError = 0; ///< ||O - ref|| / ||ref||
  double lseError = 0; ///< same for the logsumexp, over rows with a finite reference
  bool allWritten = true;     ///< no poison left in O or LSE
  bool lseInfMatches = true;  ///< -inf exactly where the reference is -inf
  int64_t maskedRows = 0;     ///< rows the reference masks entirely (LSE = -inf)
  runtime::BlockCounts counts;
};

/// A paged run (kernels compiled with pagedKv): the key/value rows of each batch and the page
/// size. The keys and values are drawn as for a contiguous run (N = the longest length), then
/// copied into a cache in vLLM's [pages, page size, Hkv, D] layout whose pages the sequences
/// get in a random order; rows no sequence owns are NaN, so a read past a length shows.
struct Paging {
  int64_t pageSize = 16;
  std::vector<int64_t> lengths; ///< one per batch
};

/// A varlen run (kernels compiled with varlen): each sequence's query and key rows. The inputs
/// are drawn as for a padded run (M and N the longest lengths), then packed one sequence after
/// another (THD) behind two rows no sequence owns and before three more; those rows are NaN in
/// Q, K and V and must be left as they are in O and LSE. B is the number of sequences. With a
/// Paging too (a paged varlen kernel: chunked prefill) only the queries pack; the keys are the
/// paged caches, keyLengths must equal the paged lengths, and no key offsets are passed.
struct Packing {
  std::vector<int64_t> queryLengths, keyLengths;
};

RunResult runAgainstReference(const runtime::CpuKernel &kernel,
                              const runtime::ReferenceKernel &reference,
                              runtime::reference::Problem p, unsigned seed,
                              int64_t kvSplits = 1, const Paging *paging = nullptr,
                              const Packing *packing = nullptr);

//===----------------------------------------------------------------------===//
// Hand-written semantics, independent of the DSL and the compiler: the tests' own statement of
// what some variants mean, to check the DSL-derived reference itself and to count blocks.
//===----------------------------------------------------------------------===//

struct Semantics {
  double scale = 0; ///< 0: 1/sqrt(D)
  /// score -> score, given (b, h, q_idx, kv_idx); identity when empty.
  std::function<double(double, int64_t, int64_t, int64_t, int64_t)> scoreMod;
  /// keep the score at (b, h, q_idx, kv_idx)?; keep all when empty.
  std::function<bool(int64_t, int64_t, int64_t, int64_t)> mask;
};

/// Naive attention in float64 on contiguous arrays: out (B x H x M x D), lse (B x H x M). Fully
/// masked rows give out = 0 and lse = -inf.
void naiveAttention(const runtime::reference::Problem &p, const Semantics &semantics,
                    const std::vector<double> &q, const std::vector<double> &k,
                    const std::vector<double> &v, std::vector<double> &out,
                    std::vector<double> &lse);

} // namespace tilefuse::test

#endif
