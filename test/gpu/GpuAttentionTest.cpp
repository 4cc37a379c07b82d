//===- GpuAttentionTest.cpp - compiled kernels on the GPU vs float64 ------===//
//
// tilefuse-gpu-tests: every kernel in $TILEFUSE_PTX_DIR (<stem>.ptx + <stem>.json, the kernel ABI
// of CudaKernel.h) runs through the CUDA runtime on fresh random inputs and is compared with its
// float64 reference, <stem>.reference.so (derived from the same DSL text by the compiler and
// compiled ahead of time: this machine may have no compiler; see Reference.h); plus tests of the runtime itself (driver, module loading,
// metadata, launch checks). Where there is no driver or no GPU it prints
// "skipped: no GPU (<reason>)" and the GPU tests skip; the rest still run.
//
//   TILEFUSE_PTX_DIR=build-gpu/kernels tilefuse-gpu-tests [--gtest_filter=...]
//   TILEFUSE_GPU_SMALL=1: only the small cases (M = N = 128, and M = 17 with N = 1000 for the
//   partial blocks), for compute-sanitizer.
//
// Bounds: kernels compute in f32 and round P to the storage type for the P·V product, so O is
// checked to a relative L2 error of 1e-2 (bf16) or 3e-3 (f16) and LSE to 1e-3 relative on its
// finite entries; LSE must be -inf exactly where the reference is, and nothing may be NaN
// (outputs are poisoned with NaN before every launch, so an unwritten element shows).
//
//===----------------------------------------------------------------------===//
#include "tilefuse/runtime/Reference.h"
#include "tilefuse/runtime/cuda/CudaKernel.h"
#include "tilefuse/runtime/cuda/Driver.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/xxhash.h"

#include "GpuTestSupport.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace tilefuse::runtime;
using namespace tilefuse::runtime::cuda;
namespace ref = tilefuse::runtime::reference;
namespace launch_abi = tilefuse::launch_abi;

namespace {

using tilefuse::test::gpuStatus;
using tilefuse::test::skipMessage;

//===----------------------------------------------------------------------===//
// Host-side tensors in device layouts
//===----------------------------------------------------------------------===//

/// A rank-4 logical tensor (outer, heads, rows, inner) stored with element strides; inner has
/// stride 1. The logical order is row-major over the four sizes (what the reference reads).
struct Layout {
  int64_t sizes[4];
  int64_t strides[3]; ///< of the outer three dimensions

  int64_t logicalCount() const { return sizes[0] * sizes[1] * sizes[2] * sizes[3]; }
  /// Elements of storage the tensor spans.
  int64_t storageCount() const {
    int64_t last = 0;
    for (int i = 0; i < 3; ++i)
      last += (sizes[i] - 1) * strides[i];
    return last + sizes[3];
  }
  template <typename Fn> void forEach(Fn fn) const {
    int64_t logical = 0;
    for (int64_t a = 0; a < sizes[0]; ++a)
      for (int64_t b = 0; b < sizes[1]; ++b)
        for (int64_t c = 0; c < sizes[2]; ++c) {
          int64_t base = a * strides[0] + b * strides[1] + c * strides[2];
          for (int64_t d = 0; d < sizes[3]; ++d)
            fn(logical++, base + d);
        }
  }
};

/// Copies logical elements (contiguous, `elementBytes` each) into a storage buffer of `layout`.
std::vector<char> scatter(const Layout &layout, const std::vector<char> &logical,
                          size_t elementBytes, char fill) {
  std::vector<char> storage(layout.storageCount() * elementBytes, fill);
  layout.forEach([&](int64_t l, int64_t s) {
    std::memcpy(&storage[s * elementBytes], &logical[l * elementBytes], elementBytes);
  });
  return storage;
}

std::vector<char> gather(const Layout &layout, const std::vector<char> &storage,
                         size_t elementBytes) {
  std::vector<char> logical(layout.logicalCount() * elementBytes);
  layout.forEach([&](int64_t l, int64_t s) {
    std::memcpy(&logical[l * elementBytes], &storage[s * elementBytes], elementBytes);
  });
  return logical;
}

//===----------------------------------------------------------------------===//
// Comparison
//===----------------------------------------------------------------------===//

struct Comparison {
  double outError = 0;      ///< ||O - ref|| / ||ref|| over non-NaN entries
  double lseError = 0;      ///< the same over entries where both are finite
  int64_t outNaN = 0;       ///< NaN entries in O (unwritten, or computed NaN)
  int64_t lseNaN = 0;       ///< NaN entries in LSE
  int64_t lseInfRows = 0;   ///< rows the reference masks entirely (LSE = -inf)
  int64_t lseMismatch = 0;  ///< -inf where the reference is finite, or the other way round
  int64_t paddingTouched = 0; ///< LSE padding elements that lost their poison
};

double relativeL2(double errorSquares, double referenceSquares) {
  return referenceSquares == 0 ? std::sqrt(errorSquares)
                               : std::sqrt(errorSquares / referenceSquares);
}

void compareOutput(const std::vector<double> &got, const std::vector<double> &want,
                   Comparison &c) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i])) {
      ++c.outNaN;
      continue;
    }
    double d = got[i] - want[i];
    num += d * d;
    den += want[i] * want[i];
  }
  c.outError = relativeL2(num, den);
}

void compareLse(const std::vector<float> &got, const std::vector<double> &want, Comparison &c) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    bool wantMasked = std::isinf(want[i]) && want[i] < 0;
    c.lseInfRows += wantMasked;
    if (std::isnan(got[i])) {
      ++c.lseNaN;
      continue;
    }
    bool gotMasked = std::isinf(got[i]) && got[i] < 0;
    if (wantMasked != gotMasked || std::isinf(got[i]) != std::isinf(want[i])) {
      ++c.lseMismatch;
      continue;
    }
    if (wantMasked)
      continue;
    double d = got[i] - want[i];
    num += d * d;
    den += want[i] * want[i];
  }
  c.lseError = relativeL2(num, den);
}

//===----------------------------------------------------------------------===//
// Kernels and cases
//===----------------------------------------------------------------------===//

struct KernelFiles {
  std::string stem; ///< e.g. causal_d64
  std::string ptxPath, jsonPath;
  /// <stem>.reference.so: the kernel's float64 reference, compiled from its DSL text with the
  /// same specialization (`tilefuse compile --emit reference`).
  std::string referencePath;
};

/// <stem>.json files with a <stem>.ptx beside them, sorted by stem.
std::vector<KernelFiles> findKernels(llvm::StringRef dir) {
  std::vector<KernelFiles> found;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec; it.increment(ec)) {
    llvm::StringRef path = it->path();
    if (llvm::sys::path::extension(path) != ".json")
      continue;
    llvm::SmallString<256> ptx(path);
    llvm::sys::path::replace_extension(ptx, "ptx");
    llvm::SmallString<256> reference(path);
    llvm::sys::path::replace_extension(reference, "reference.so");
    if (llvm::sys::fs::exists(ptx))
      found.push_back({llvm::sys::path::stem(path).str(), ptx.str().str(), path.str(),
                       reference.str().str()});
  }
  llvm::sort(found, [](const KernelFiles &a, const KernelFiles &b) { return a.stem < b.stem; });
  return found;
}

struct Case {
  int64_t B, H, Hkv, M, N;
  /// Q, K, V, O stored B x M x H x D (heads interleaved, as PyTorch's (B, S, H, D) transposed)
  /// and LSE rows padded, instead of contiguous B x H x M x D: exercises every stride.
  bool interleaved;
  /// A split-KV kernel's key splits (CudaKernel::launch's kvSplits; 0: its own choice).
  int64_t kvSplits = 0;
  /// A paged-KV kernel's rows per page (0: not paged). Its sequences have the lengths
  /// pagedLengths gives (N the longest), in a cache whose pages they get in a random order.
  int64_t pageSize = 0;

  std::string name() const {
    return "B" + std::to_string(B) + "_H" + std::to_string(H) + "_Hkv" + std::to_string(Hkv) +
           "_M" + std::to_string(M) + "_N" + std::to_string(N) +
           (interleaved ? "_bmhd" : "_bhmd") + (kvSplits ? "_S" + std::to_string(kvSplits) : "") +
           (pageSize ? "_P" + std::to_string(pageSize) : "");
  }
};

/// The ragged lengths of a paged case: N, then about two thirds of it, then one row, then none
/// (an empty sequence: zero output, logsumexp -inf), repeating.
std::vector<int64_t> pagedLengths(const Case &c) {
  std::vector<int64_t> lengths;
  for (int64_t b = 0; b < c.B; ++b)
    lengths.push_back(b % 4 == 0 ? c.N : b % 4 == 1 ? std::max<int64_t>(1, c.N * 2 / 3 - 5)
                                     : b % 4 == 2 ? 1
                                                  : 0);
  return lengths;
}

/// The ragged lengths of a varlen case, queries and keys: M and N, then about two thirds of
/// them, then a sequence with no queries, then one query row with no keys (fully masked:
/// logsumexp -inf), repeating.
std::pair<std::vector<int64_t>, std::vector<int64_t>> varlenLengths(const Case &c) {
  std::vector<int64_t> queries, keys;
  for (int64_t b = 0; b < c.B; ++b) {
    int64_t i = b % 4;
    queries.push_back(i == 0 ? c.M : i == 1 ? std::max<int64_t>(1, c.M * 2 / 3 - 5) : i == 2 ? 0 : 1);
    keys.push_back(i == 0 ? c.N : i == 1 ? std::max<int64_t>(1, c.N * 2 / 3 - 5) : i == 2 ? 1 : 0);
  }
  return {queries, keys};
}

/// Extra LSE elements per row in interleaved cases; they must keep their poison.
constexpr int64_t lsePadding = 5;

std::vector<Case> casesFor(const KernelMetadata &metadata, bool smallOnly) {
  const std::string &name = metadata.name;
  // Head counts the kernel declares (gqa: 8 and 2), else 3 and 3.
  auto declaredOr = [&](int tensor, int dim, int64_t otherwise) {
    int64_t declared = metadata.declaredSizes.sizes[tensor][dim];
    return declared == DeclaredSizes::dynamic ? otherwise : declared;
  };
  int64_t H = declaredOr(/*Q*/ 0, 1, 3);
  int64_t Hkv = declaredOr(/*K*/ 1, 1, H);
  if (metadata.pagedKv) {
    // Ragged sequences in pages of odd and even sizes (interleaved: vLLM's [pages, page size,
    // Hkv, D] cache), decode and prefill; split kernels at their own and fixed split counts.
    if (name == "attention" || name == "gqa_head_window") {
      H = 8;
      Hkv = 2;
    }
    int64_t S = metadata.splitKv ? 7 : 0, S2 = metadata.splitKv ? 64 : 0;
    std::vector<Case> cases =
        smallOnly ? std::vector<Case>{{4, H, Hkv, 1, 1000, true, S, 16},
                                      {2, H, Hkv, 17, 300, false, 0, 5}}
                  : std::vector<Case>{{4, H, Hkv, 1, 1000, true, 0, 16},
                                      {4, H, Hkv, 1, 4096, true, S, 5},
                                      {4, H, Hkv, 1, 32768, true, 0, 256},
                                      {4, H, Hkv, 1, 777, false, S2, 1},
                                      {2, H, Hkv, 17, 1000, true, 0, 48},
                                      {2, H, Hkv, 300, 2000, false, S, 64},
                                      {2, H, Hkv, 1000, 1000, true, 0, 16}};
    // A kernel compiled for one page size runs every case in pages of that size.
    if (metadata.pageSize)
      for (Case &c : cases)
        c.pageSize = metadata.pageSize;
    return cases;
  }
  if (metadata.varlen) {
    // Ragged packed sequences (varlenLengths): prefill, M != N both ways, block-aligned and not.
    if (name == "attention" || name == "gqa_head_window") {
      H = 8;
      Hkv = 2;
    }
    if (metadata.splitKv) {
      // Decode over ragged keys (FlashDecoding on a packed batch): the launcher's split count
      // and fixed ones (one split, a few, more than there are key blocks); short prefill too.
      if (smallOnly)
        return {{4, H, Hkv, 1, 1000, false, 0}, {3, H, Hkv, 17, 300, false, 5}};
      std::vector<Case> cases;
      for (int64_t N : {1000, 4096, 32768})
        for (int64_t splits : {0, 1, 5, 64})
          cases.push_back({4, H, Hkv, 1, N, false, splits});
      cases.push_back({4, H, Hkv, 17, 1000, false, 0});
      cases.push_back({3, H, Hkv, 300, 2000, false, 7});
      return cases;
    }
    if (smallOnly)
      return {{4, H, Hkv, 17, 300, false}, {2, H, Hkv, 128, 128, false}};
    return {{4, H, Hkv, 1000, 1000, false}, {4, H, Hkv, 4096, 4096, false},
            {4, H, Hkv, 17, 1000, false},   {4, H, Hkv, 1000, 17, false},
            {8, H, Hkv, 128, 128, false},   {3, H, Hkv, 300, 2000, false}};
  }
  if (metadata.splitKv) {
    // Decode (one query row, long keys) with the launcher's split count and fixed ones: one
    // split, a few, more than there are key blocks (empty shares); prefill shapes too. Kernels
    // whose K and V take their own head count run grouped heads, so a packed program holds
    // several query heads.
    if (name == "attention" || name == "gqa_head_window") {
      H = 8;
      Hkv = 2;
    }
    if (smallOnly)
      return {{1, H, Hkv, 1, 1000, false, 0}, {2, H, Hkv, 17, 1000, true, 7}};
    std::vector<Case> cases;
    for (int64_t N : {1, 1000, 4096, 32768})
      for (int64_t splits : {0, 1, 5, 64})
        cases.push_back({2, H, Hkv, 1, N, N % 2 == 0, splits});
    for (auto [M, N] : {std::pair<int64_t, int64_t>{17, 1000}, {128, 128}, {1000, 4096},
                        {1000, 17}})
      for (int64_t splits : {0, 3})
        cases.push_back({1, H, Hkv, M, N, M == 1000, splits});
    return cases;
  }
  if (smallOnly) // partial blocks matter most to memcheck, so keep one case with them
    return {{1, H, Hkv, 128, 128, false}, {2, H, Hkv, 17, 1000, true}};

  // Lengths below, at, and off the block sizes; M < N; and M > N + 100, where sliding_window has
  // fully masked rows.
  const std::pair<int64_t, int64_t> lengths[] = {{1, 1},       {17, 17},     {128, 128},
                                                 {1000, 1000}, {4096, 4096}, {17, 1000},
                                                 {1000, 4096}, {1000, 17}};
  std::vector<Case> cases;
  for (auto [M, N] : lengths) {
    cases.push_back({1, H, Hkv, M, N, false});
    cases.push_back({2, H, Hkv, M, N, true});
  }
  if (name == "attention") { // grouped-query heads through the general kernel
    cases.push_back({2, 8, 2, 128, 128, true});
    cases.push_back({1, 8, 2, 1000, 4096, false});
  }
  // Long sequences, with few heads so the float64 reference stays within seconds: at the two
  // head dims the bench leads with, in bf16. Every kernel set holds the attention and causal
  // kernels at six head dims and two dtypes; all of them at 16384 made the float64 references
  // (about 2 x 16384^2 x D multiply-adds each) most of a 600 s device call. The 4096 cases
  // above still cover every head dim's loop past one wave of the grid.
  if ((name == "attention" || name == "causal") && metadata.dtype == ElementType::BF16 &&
      (metadata.headDim == 64 || metadata.headDim == 128))
    cases.push_back({1, 2, 2, 16384, 16384, false});
  return cases;
}

/// Kernels are loaded once per process (the JIT takes a while); a failed load fails every case.
struct LoadedKernel {
  std::unique_ptr<CudaKernel> kernel;
  std::unique_ptr<ref::ReferenceLibrary> reference;
  std::string error;
};

const LoadedKernel &loadOnce(const KernelFiles &files) {
  static std::map<std::string, LoadedKernel> loaded;
  auto [it, inserted] = loaded.try_emplace(files.ptxPath);
  if (inserted) {
    auto kernel = CudaKernel::loadFiles(files.ptxPath, files.jsonPath);
    if (kernel) {
      it->second.kernel = std::move(*kernel);
      std::printf("[ kernel   ] %s: %d registers/thread\n", files.stem.c_str(),
                  it->second.kernel->registersPerThread());
      auto reference =
          ref::ReferenceLibrary::load(files.referencePath, it->second.kernel->metadata().name);
      if (reference) {
        it->second.reference = std::move(*reference);
      } else {
        it->second.kernel.reset();
        it->second.error = llvm::toString(reference.takeError());
      }
    } else {
      it->second.error = takeReport(kernel.takeError()).message;
    }
  }
  return it->second;
}

/// A device buffer holding `bytes`.
llvm::Expected<DeviceBuffer> uploadBytes(const std::vector<char> &bytes) {
  auto buffer = DeviceBuffer::allocate(bytes.size());
  if (!buffer)
    return buffer.takeError();
  if (llvm::Error error = buffer->upload(bytes.data(), bytes.size()))
    return std::move(error);
  return std::move(*buffer);
}

/// Uploads `values` drawn in logical B x X x L x D order, stored in `layout`, and returns what the
/// kernel will read (rounded to the storage type), in logical order.
llvm::Expected<DeviceBuffer> uploadInput(ElementType dtype, const Layout &layout,
                                         const std::vector<float> &values,
                                         std::vector<double> &seen) {
  size_t elementBytes = ref::elementSize(dtype);
  std::vector<char> logical(values.size() * elementBytes);
  seen = ref::storeAs(dtype, values, logical.data());
  return uploadBytes(scatter(layout, logical, elementBytes, 0));
}

/// Prints a case's line and checks its comparison against the bounds (kernels compute in f32
/// and round P and O to the storage type: 1e-2 relative for bf16, 3e-3 for f16; LSE 1e-3).
/// `paddingName` / `paddingWhy`: what Comparison::paddingTouched counted.
void reportAndCheck(const KernelFiles &files, const KernelMetadata &metadata,
                    const std::string &caseName, const Comparison &cmp, const char *paddingName,
                    const char *paddingWhy) {
  double outBound = metadata.dtype == ElementType::BF16 ? 1e-2 : 3e-3;
  double lseBound = 1e-3;
  std::printf("[ case     ] %-18s %-4s %-34s O %.2e (bound %.0e)  LSE %.2e (bound %.0e)  "
              "-inf rows %lld  NaN %lld/%lld  -inf mismatches %lld  %s %lld\n",
              files.stem.c_str(), dtypeName(metadata.dtype).data(), caseName.c_str(),
              cmp.outError, outBound, cmp.lseError, lseBound, (long long)cmp.lseInfRows,
              (long long)cmp.outNaN, (long long)cmp.lseNaN, (long long)cmp.lseMismatch,
              paddingName, (long long)cmp.paddingTouched);
  std::fflush(stdout);
  EXPECT_EQ(cmp.outNaN, 0) << "NaN (or unwritten) elements in O";
  EXPECT_EQ(cmp.lseNaN, 0) << "NaN (or unwritten) elements in LSE";
  EXPECT_EQ(cmp.lseMismatch, 0) << "LSE is -inf where the reference is finite or vice versa";
  EXPECT_EQ(cmp.paddingTouched, 0) << paddingWhy;
  EXPECT_LE(cmp.outError, outBound) << "O relative L2 error";
  EXPECT_LE(cmp.lseError, lseBound) << "LSE relative L2 error";
}

/// A paged cache's pages for the sequences: B rows of perSequence entries, the pages in a random
/// order (a few pages belong to no sequence).
struct PageTable {
  int64_t pageSize = 0, perSequence = 0, pages = 0;
  std::vector<int32_t> table;
};
PageTable shuffledPages(int64_t B, int64_t N, int64_t pageSize, std::mt19937_64 &rng) {
  PageTable t;
  t.pageSize = pageSize;
  t.perSequence = (N + pageSize - 1) / pageSize;
  t.pages = B * t.perSequence + 3;
  std::vector<int32_t> order(t.pages);
  for (int64_t i = 0; i < t.pages; ++i)
    order[i] = int32_t(i);
  std::shuffle(order.begin(), order.end(), rng);
  t.table.assign(order.begin(), order.begin() + B * t.perSequence);
  return t;
}

/// The cache strides (page, head, row) of K and V: interleaved, vLLM's [pages, page size, Hkv,
/// D]; else [pages, Hkv, page size, D].
void setCacheStrides(AttentionStrides &strides, int64_t Hkv, int64_t D, int64_t pageSize,
                     bool interleaved) {
  if (interleaved) {
    strides.kB = strides.vB = pageSize * Hkv * D;
    strides.kH = strides.vH = D;
    strides.kN = strides.vN = Hkv * D;
  } else {
    strides.kB = strides.vB = Hkv * pageSize * D;
    strides.kH = strides.vH = pageSize * D;
    strides.kN = strides.vN = D;
  }
}

/// K or V as a paged cache on the device: sequence b's first lengths[b] rows of `logical`
/// (B x Hkv x N x D as drawn) in the pages `t` gives it, at the cache strides; NaN elsewhere.
llvm::Expected<DeviceBuffer> pagedCache(ElementType dtype, const ref::Problem &p,
                                        const std::vector<double> &logical,
                                        const std::vector<int64_t> &lengths, const PageTable &t,
                                        const AttentionStrides &strides) {
  size_t elementBytes = ref::elementSize(dtype);
  int64_t ps = t.pageSize, D = p.D;
  std::vector<char> bytes(size_t(t.pages * ps * p.Hkv * D) * elementBytes, char(0xFF));
  std::vector<float> row(D);
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < p.Hkv; ++h)
      for (int64_t n = 0; n < lengths[b]; ++n) {
        int64_t page = t.table[b * t.perSequence + n / ps];
        int64_t at = page * strides.kB + h * strides.kH + (n % ps) * strides.kN;
        for (int64_t d = 0; d < D; ++d)
          row[d] = float(logical[((b * p.Hkv + h) * p.N + n) * D + d]);
        ref::storeAs(dtype, row, bytes.data() + at * elementBytes);
      }
  return uploadBytes(bytes);
}

/// A varlen kernel's case: the inputs drawn as for a padded B x H x M x D batch, then packed one
/// sequence after another (THD: [tokens, heads, D], LSE [heads, tokens]) behind two rows no
/// sequence owns and before three more (NaN in Q, K, V; they must keep their poison in O and
/// LSE), and checked per sequence against float64.
void runVarlenCase(const KernelFiles &files, const KernelMetadata &metadata, const Case &c,
                   const LoadedKernel &loaded) {
  ref::Problem p{c.B, c.H, c.Hkv, c.M, c.N, metadata.headDim};
  int64_t D = p.D;
  auto [queryLengths, keyLengths] = varlenLengths(c);
  std::mt19937_64 rng(llvm::xxh3_64bits(files.stem + "/" + c.name() + "/varlen"));
  auto draw = [&](int64_t n) { return ref::randomNormal(n, rng); };
  size_t elementBytes = ref::elementSize(metadata.dtype);
  const int64_t lead = 2, tail = 3;
  std::vector<int32_t> cuQ = ref::sequenceOffsets(queryLengths, lead),
                       cuK = ref::sequenceOffsets(keyLengths, lead);
  int64_t tokensQ = cuQ.back() + tail, tokensK = cuK.back() + tail;
  // Logical (padded) values, rounded to the storage type, and their packed bytes.
  auto pack = [&](int64_t heads, int64_t rows, const std::vector<int64_t> &lengths,
                  const std::vector<int32_t> &cu, int64_t tokens, std::vector<double> &seen)
      -> llvm::Expected<DeviceBuffer> {
    std::vector<float> values = draw(p.B * heads * rows * D);
    std::vector<char> logical(values.size() * elementBytes);
    seen = ref::storeAs(metadata.dtype, values, logical.data());
    return uploadBytes(ref::packRows(logical.data(), D * elementBytes, heads, rows, lengths, cu,
                                     tokens, char(0xFF)));
  };
  std::vector<double> q, k, v;
  TF_ASSERT_OK_AND_ASSIGN(DeviceBuffer qDevice, pack(p.H, p.M, queryLengths, cuQ, tokensQ, q));
  TF_ASSERT_OK_AND_ASSIGN(DeviceBuffer kDevice, pack(p.Hkv, p.N, keyLengths, cuK, tokensK, k));
  TF_ASSERT_OK_AND_ASSIGN(DeviceBuffer vDevice, pack(p.Hkv, p.N, keyLengths, cuK, tokensK, v));
  // Over a paged cache (chunked prefill): the same keys and values in pages instead, and no
  // key offsets passed (the kernel must not read them).
  AttentionStrides strides;
  PagedKV paged;
  std::optional<DeviceBuffer> tableDevice, lengthsDevice;
  if (metadata.pagedKv) {
    PageTable t = shuffledPages(p.B, p.N, c.pageSize, rng);
    setCacheStrides(strides, p.Hkv, D, t.pageSize, c.interleaved);
    TF_ASSERT_OK_AND_ASSIGN(kDevice, pagedCache(metadata.dtype, p, k, keyLengths, t, strides));
    TF_ASSERT_OK_AND_ASSIGN(vDevice, pagedCache(metadata.dtype, p, v, keyLengths, t, strides));
    std::vector<int32_t> lengths32(keyLengths.begin(), keyLengths.end());
    TF_ASSERT_OK_AND_ASSIGN(tableDevice, DeviceBuffer::allocate(t.table.size() * 4));
    TF_ASSERT_OK(tableDevice->upload(t.table.data(), t.table.size() * 4));
    TF_ASSERT_OK_AND_ASSIGN(lengthsDevice, DeviceBuffer::allocate(lengths32.size() * 4));
    TF_ASSERT_OK(lengthsDevice->upload(lengths32.data(), lengths32.size() * 4));
    paged = PagedKV::of(reinterpret_cast<const int32_t *>(tableDevice->address()),
                        t.perSequence, t.perSequence,
                        reinterpret_cast<const int32_t *>(lengthsDevice->address()), t.pageSize,
                        t.pages);
  } else {
    strides.kH = strides.vH = D;
    strides.kN = strides.vN = p.Hkv * D;
  }
  TF_ASSERT_OK_AND_ASSIGN(DeviceBuffer oDevice,
                          DeviceBuffer::allocate(size_t(tokensQ * p.H * D) * elementBytes));
  TF_ASSERT_OK_AND_ASSIGN(DeviceBuffer lseDevice,
                          DeviceBuffer::allocate(size_t(p.H * tokensQ) * sizeof(float)));
  TF_ASSERT_OK(oDevice.fill(0xFF));
  TF_ASSERT_OK(lseDevice.fill(0xFF));
  TF_ASSERT_OK_AND_ASSIGN(DeviceBuffer cuQDevice, DeviceBuffer::allocate(cuQ.size() * 4));
  TF_ASSERT_OK(cuQDevice.upload(cuQ.data(), cuQ.size() * 4));
  TF_ASSERT_OK_AND_ASSIGN(DeviceBuffer cuKDevice, DeviceBuffer::allocate(cuK.size() * 4));
  TF_ASSERT_OK(cuKDevice.upload(cuK.data(), cuK.size() * 4));

  // THD strides; the batch strides are not read (0).
  AttentionShape shape{p.B, p.H, p.Hkv, p.M, p.N, D};
  strides.qH = strides.oH = D;
  strides.qM = strides.oM = p.H * D;
  strides.lseH = tokensQ;
  Varlen varlen = Varlen::of(
      reinterpret_cast<const int32_t *>(cuQDevice.address()),
      metadata.pagedKv ? nullptr : reinterpret_cast<const int32_t *>(cuKDevice.address()),
      tokensQ, tokensK);
  TF_ASSERT_OK_AND_ASSIGN(Stream stream, Stream::create());
  AttentionBuffers buffers{qDevice.address(), kDevice.address(), vDevice.address(),
                           oDevice.address(), lseDevice.address()};
  TF_ASSERT_OK(loaded.kernel->launch(stream.handle(), buffers, shape, strides, c.kvSplits,
                                     metadata.pagedKv ? &paged : nullptr, &varlen));
  TF_ASSERT_OK(stream.synchronize());
  std::vector<char> oBytes(oDevice.size());
  std::vector<float> lsePacked(p.H * tokensQ);
  TF_ASSERT_OK(oDevice.download(oBytes.data(), oBytes.size()));
  TF_ASSERT_OK(lseDevice.download(lsePacked.data(), lsePacked.size() * sizeof(float)));
  std::vector<double> outPacked = ref::loadAs(metadata.dtype, oBytes.data(), tokensQ * p.H * D);

  std::vector<double> refOut(p.B * p.H * p.M * D), refLse(p.B * p.H * p.M);
  TF_ASSERT_OK(ref::runPerSequence(*loaded.reference, p, &keyLengths, q.data(), k.data(),
                                   v.data(), refOut.data(), refLse.data(), &queryLengths));
  // Back to the padded layout. Rows past a sequence's length compare as equal: zero here, and
  // zero in the reference, which leaves them as they were.
  std::vector<double> out(refOut.size(), 0.0);
  std::vector<float> lse(refLse.size(), 0.0f);
  ref::unpackRows(reinterpret_cast<const char *>(outPacked.data()),
                  reinterpret_cast<char *>(out.data()), D * sizeof(double), p.H, p.M,
                  queryLengths, cuQ);
  ref::unpackLseRows(lsePacked.data(), lse.data(), p.H, p.M, tokensQ, queryLengths, cuQ);
  Comparison cmp;
  compareOutput(out, refOut, cmp);
  compareLse(lse, refLse, cmp);
  // The rows no sequence owns keep their poison.
  for (int64_t t : {int64_t(0), lead - 1, tokensQ - tail, tokensQ - 1})
    for (int64_t h = 0; h < p.H; ++h) {
      bool poisoned = std::isnan(lsePacked[h * tokensQ + t]);
      for (int64_t d = 0; d < D; ++d)
        poisoned = poisoned && std::isnan(outPacked[(t * p.H + h) * D + d]);
      cmp.paddingTouched += !poisoned;
    }

  reportAndCheck(files, metadata, c.name() + (metadata.pagedKv ? "_paged_varlen" : "_varlen"), cmp,
                 "foreign rows written", "the kernel wrote rows that belong to no sequence");
}

void runCase(const KernelFiles &files, const KernelMetadata &metadata, const Case &c) {
  TF_REQUIRE_GPU();
  const LoadedKernel &loaded = loadOnce(files);
  ASSERT_TRUE(loaded.kernel) << files.ptxPath << ": " << loaded.error;
  const CudaKernel &kernel = *loaded.kernel;
  if (metadata.varlen)
    return runVarlenCase(files, metadata, c, loaded);

  ref::Problem p{c.B, c.H, c.Hkv, c.M, c.N, metadata.headDim};
  int64_t D = p.D;
  AttentionShape shape{p.B, p.H, p.Hkv, p.M, p.N, D};
  AttentionStrides strides = AttentionStrides::contiguous(shape);
  if (c.interleaved) {
    strides.qB = strides.oB = p.M * p.H * D;
    strides.qH = strides.oH = D;
    strides.qM = strides.oM = p.H * D;
    strides.kB = strides.vB = p.N * p.Hkv * D;
    strides.kH = strides.vH = D;
    strides.kN = strides.vN = p.Hkv * D;
    strides.lseH = p.M + lsePadding;
    strides.lseB = p.H * strides.lseH;
    // At odd M, O's rows two elements apart from 16 bytes (the ABI's 4-byte alignment): the
    // kernel's 16-byte stores of whole rows give way to its pairs' stores. A map that stores
    // O (o_tma) needs 16-byte strides, so those kernels keep the interleaved rows.
    if (p.M % 2 == 1 && !metadata.oTma) {
      strides.oM = p.H * D + 2;
      strides.oB = p.M * strides.oM;
    }
  }
  Layout qLayout{{p.B, p.H, p.M, D}, {strides.qB, strides.qH, strides.qM}};
  Layout kLayout{{p.B, p.Hkv, p.N, D}, {strides.kB, strides.kH, strides.kN}};
  Layout vLayout{{p.B, p.Hkv, p.N, D}, {strides.vB, strides.vH, strides.vN}};
  Layout oLayout{{p.B, p.H, p.M, D}, {strides.oB, strides.oH, strides.oM}};
  Layout lseLayout{{p.B, p.H, p.M, 1}, {strides.lseB, strides.lseH, 1}};

  // Fresh inputs per case, reproducible from the kernel and case names.
  std::mt19937_64 rng(llvm::xxh3_64bits(files.stem + "/" + c.name()));
  auto draw = [&](int64_t n) { return ref::randomNormal(n, rng); };
  std::vector<double> q, k, v;
  TF_ASSERT_OK_AND_ASSIGN(DeviceBuffer qDevice,
                          uploadInput(metadata.dtype, qLayout, draw(qLayout.logicalCount()), q));
  TF_ASSERT_OK_AND_ASSIGN(DeviceBuffer kDevice,
                          uploadInput(metadata.dtype, kLayout, draw(kLayout.logicalCount()), k));
  TF_ASSERT_OK_AND_ASSIGN(DeviceBuffer vDevice,
                          uploadInput(metadata.dtype, vLayout, draw(vLayout.logicalCount()), v));
  size_t elementBytes = ref::elementSize(metadata.dtype);

  // Paged: the same keys and values, each sequence's first lengths[b] rows, in a cache of
  // pages (interleaved: [pages, page size, Hkv, D]; else [pages, Hkv, page size, D]) that the
  // sequences get in a random order; rows no sequence owns are NaN. K and V become the caches.
  std::vector<int64_t> lengths;
  PagedKV paged;
  std::optional<DeviceBuffer> tableDevice, lengthsDevice;
  if (c.pageSize) {
    lengths = pagedLengths(c);
    PageTable t = shuffledPages(p.B, p.N, c.pageSize, rng);
    std::vector<int32_t> lengths32(lengths.begin(), lengths.end());
    setCacheStrides(strides, p.Hkv, D, t.pageSize, c.interleaved);
    TF_ASSERT_OK_AND_ASSIGN(kDevice, pagedCache(metadata.dtype, p, k, lengths, t, strides));
    TF_ASSERT_OK_AND_ASSIGN(vDevice, pagedCache(metadata.dtype, p, v, lengths, t, strides));
    const std::vector<int32_t> &table = t.table;
    int64_t ps = t.pageSize, perSequence = t.perSequence, pages = t.pages;
    TF_ASSERT_OK_AND_ASSIGN(tableDevice, DeviceBuffer::allocate(table.size() * 4));
    TF_ASSERT_OK(tableDevice->upload(table.data(), table.size() * 4));
    TF_ASSERT_OK_AND_ASSIGN(lengthsDevice, DeviceBuffer::allocate(lengths32.size() * 4));
    TF_ASSERT_OK(lengthsDevice->upload(lengths32.data(), lengths32.size() * 4));
    paged.pageTable = reinterpret_cast<const int32_t *>(tableDevice->address());
    paged.kvLengths = reinterpret_cast<const int32_t *>(lengthsDevice->address());
    paged.pagesPerSequence = paged.tableStride = perSequence;
    paged.pageSize = ps;
    paged.pages = pages;
  }

  // Poison the outputs: 0xFF bytes are NaN in bf16, f16 and f32.
  TF_ASSERT_OK_AND_ASSIGN(DeviceBuffer oDevice,
                          DeviceBuffer::allocate(oLayout.storageCount() * elementBytes));
  TF_ASSERT_OK_AND_ASSIGN(DeviceBuffer lseDevice,
                          DeviceBuffer::allocate(lseLayout.storageCount() * sizeof(float)));
  TF_ASSERT_OK(oDevice.fill(0xFF));
  TF_ASSERT_OK(lseDevice.fill(0xFF));

  TF_ASSERT_OK_AND_ASSIGN(Stream stream, Stream::create());
  AttentionBuffers buffers{qDevice.address(), kDevice.address(), vDevice.address(),
                           oDevice.address(), lseDevice.address()};
  TF_ASSERT_OK(kernel.launch(stream.handle(), buffers, shape, strides, c.kvSplits,
                             c.pageSize ? &paged : nullptr));
  TF_ASSERT_OK(stream.synchronize());

  std::vector<char> oStorage(oDevice.size()), lseStorage(lseDevice.size());
  TF_ASSERT_OK(oDevice.download(oStorage.data(), oStorage.size()));
  TF_ASSERT_OK(lseDevice.download(lseStorage.data(), lseStorage.size()));
  std::vector<double> out =
      ref::loadAs(metadata.dtype, gather(oLayout, oStorage, elementBytes).data(),
                  oLayout.logicalCount());
  std::vector<char> lseBytes = gather(lseLayout, lseStorage, sizeof(float));
  std::vector<float> lse(lseLayout.logicalCount());
  std::memcpy(lse.data(), lseBytes.data(), lseBytes.size());

  // The float64 reference, derived from the kernel's own DSL text, on every core.
  // Paged, per sequence on its own keys.
  std::vector<double> refOut(oLayout.logicalCount()), refLse(lseLayout.logicalCount());
  TF_ASSERT_OK(ref::runPerSequence(*loaded.reference, p, c.pageSize ? &lengths : nullptr,
                                   q.data(), k.data(), v.data(), refOut.data(), refLse.data()));

  Comparison cmp;
  compareOutput(out, refOut, cmp);
  compareLse(lse, refLse, cmp);
  if (c.interleaved) { // the padding after each LSE row must still hold the poison
    int64_t rowStride = strides.lseH;
    for (int64_t row = 0; row + 1 < p.B * p.H; ++row) // the last row's padding is not allocated
      for (int64_t i = p.M; i < rowStride; ++i)
        for (size_t byte = 0; byte < sizeof(float); ++byte)
          if (uint8_t(lseStorage[(row * rowStride + i) * sizeof(float) + byte]) != 0xFF) {
            ++cmp.paddingTouched;
            break;
          }
  }

  reportAndCheck(files, metadata, c.name(), cmp, "padding writes",
                 "the kernel wrote LSE elements between rows");
}

class KernelCaseTest : public testing::Test {
public:
  KernelCaseTest(KernelFiles files, KernelMetadata metadata, Case c)
      : files(std::move(files)), metadata(std::move(metadata)), c(c) {}
  void TestBody() override { runCase(files, metadata, c); }

private:
  KernelFiles files;
  KernelMetadata metadata;
  Case c;
};

/// A test that fails (or, with no GPU, skips) with `message`: for a missing kernel directory or
/// a sidecar that does not parse.
class ProblemTest : public testing::Test {
public:
  explicit ProblemTest(std::string message) : message(std::move(message)) {}
  void TestBody() override {
    TF_REQUIRE_GPU();
    FAIL() << message;
  }

private:
  std::string message;
};

void registerProblem(const std::string &suite, const std::string &name, std::string message) {
  testing::RegisterTest(suite.c_str(), name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                        [message]() -> testing::Test * { return new ProblemTest(message); });
}

/// One test per (kernel in $TILEFUSE_PTX_DIR, case): GpuAttention/<stem>.<case>.
void registerKernelTests() {
  const char *dir = std::getenv("TILEFUSE_PTX_DIR");
  if (!dir || !*dir) {
    registerProblem("GpuAttention", "KernelDirectory",
                    "TILEFUSE_PTX_DIR is not set: point it at the compiled kernels "
                    "(<name>.ptx + <name>.json), e.g. build-gpu/kernels");
    return;
  }
  std::vector<KernelFiles> kernels = findKernels(dir);
  if (kernels.empty()) {
    registerProblem("GpuAttention", "KernelDirectory",
                    std::string("no <name>.ptx + <name>.json pairs in ") + dir);
    return;
  }
  const char *small = std::getenv("TILEFUSE_GPU_SMALL");
  bool smallOnly = small && *small && std::string(small) != "0";
  for (const KernelFiles &files : kernels) {
    std::string suite = "GpuAttention/" + files.stem;
    auto buffer = llvm::MemoryBuffer::getFile(files.jsonPath, /*IsText=*/true);
    if (!buffer) {
      registerProblem(suite, "Sidecar",
                      "cannot read " + files.jsonPath + ": " + buffer.getError().message());
      continue;
    }
    auto metadata = KernelMetadata::parse((*buffer)->getBuffer(), files.jsonPath);
    if (!metadata) {
      registerProblem(suite, "Sidecar", takeReport(metadata.takeError()).message);
      continue;
    }
    for (const Case &c : casesFor(*metadata, smallOnly))
      testing::RegisterTest(suite.c_str(), c.name().c_str(), nullptr, nullptr, __FILE__,
                            __LINE__, [files, md = *metadata, c]() -> testing::Test * {
                              return new KernelCaseTest(files, md, c);
                            });
  }
}

//===----------------------------------------------------------------------===//
// The runtime without a kernel: metadata, launch checks (no GPU needed)
//===----------------------------------------------------------------------===//

constexpr const char *validSidecar = R"({"name": "causal", "block_m": 64, "block_n": 64,
  "threads": 128, "head_dim": 64, "dtype": "bf16", "shared_bytes": 0,
  "declared_sizes": {"Q": [null, null, null, 64], "K": [null, null, null, 64],
                     "V": [null, null, null, 64], "O": [null, null, null, 64],
                     "LSE": [null, null, null]}})";

/// kernels/gqa.mlir's sidecar: 8 query heads, 2 key/value heads, head dim 64.
constexpr const char *gqaSidecar = R"({"name": "gqa", "block_m": 64, "block_n": 128,
  "threads": 128, "head_dim": 64, "dtype": "bf16", "shared_bytes": 49152,
  "declared_sizes": {"Q": [null, 8, null, 64], "K": [null, 2, null, 64],
                     "V": [null, 2, null, 64], "O": [null, 8, null, 64],
                     "LSE": [null, 8, null]}})";

/// `validSidecar` with "declared_sizes" replaced by `declared` (JSON text; empty: no key).
std::string sidecarDeclaring(llvm::StringRef declared) {
  std::string json = R"({"name": "causal", "block_m": 64, "block_n": 64, "threads": 128,
    "head_dim": 64, "dtype": "bf16", "shared_bytes": 0)";
  if (!declared.empty())
    json += (", \"declared_sizes\": " + declared).str();
  return json + "}";
}

TEST(KernelMetadata, ParsesTheSidecar) {
  TF_ASSERT_OK_AND_ASSIGN(KernelMetadata m, KernelMetadata::parse(validSidecar, "causal.json"));
  EXPECT_EQ(m.name, "causal");
  EXPECT_EQ(m.dtype, ElementType::BF16);
  EXPECT_EQ(m.blockM, 64);
  EXPECT_EQ(m.blockN, 64);
  EXPECT_EQ(m.threads, 128);
  EXPECT_EQ(m.headDim, 64);
  EXPECT_EQ(m.sharedBytes, 0);
  EXPECT_FALSE(m.scale);
  DeclaredSizes onlyHeadDim;
  for (int tensor = 0; tensor < 4; ++tensor)
    onlyHeadDim.sizes[tensor][3] = 64;
  EXPECT_EQ(m.declaredSizes, onlyHeadDim);

  TF_ASSERT_OK_AND_ASSIGN(
      KernelMetadata f16,
      KernelMetadata::parse(R"({"name": "attention", "block_m": 128, "block_n": 64, "threads": 256,
        "head_dim": 128, "dtype": "f16", "shared_bytes": 98304, "scale": 0.0884,
        "declared_sizes": {"Q": [null, null, null, null], "K": [null, null, null, null],
          "V": [null, null, null, null], "O": [null, null, null, null],
          "LSE": [null, null, null]}})",
                            "x.json"));
  EXPECT_EQ(f16.dtype, ElementType::F16);
  EXPECT_EQ(f16.sharedBytes, 98304);
  ASSERT_TRUE(f16.scale);
  EXPECT_DOUBLE_EQ(*f16.scale, 0.0884);
  EXPECT_EQ(f16.declaredSizes, DeclaredSizes()) << "all null: nothing declared";

  TF_ASSERT_OK_AND_ASSIGN(KernelMetadata gqa, KernelMetadata::parse(gqaSidecar, "gqa.json"));
  EXPECT_EQ(gqa.declaredSizes.sizes[0], (std::array<int64_t, 4>{-1, 8, -1, 64}));
  EXPECT_EQ(gqa.declaredSizes.sizes[1], (std::array<int64_t, 4>{-1, 2, -1, 64}));
  EXPECT_EQ(gqa.declaredSizes.sizes[4], (std::array<int64_t, 4>{-1, 8, -1, -1}));
}

TEST(KernelMetadata, DeclaredSizesRoundTrip) {
  DeclaredSizes declared;
  declared.sizes[0] = {-1, 8, -1, 64};
  declared.sizes[1] = {3, 2, 1000, 64};
  declared.sizes[4] = {-1, 8, 17, -1};
  llvm::json::Value json = declared.toJson();
  std::string text;
  llvm::raw_string_ostream(text) << json;
  EXPECT_EQ(text, R"({"K":[3,2,1000,64],"LSE":[null,8,17],"O":[null,null,null,null],)"
                  R"("Q":[null,8,null,64],"V":[null,null,null,null]})");
  TF_ASSERT_OK_AND_ASSIGN(DeclaredSizes parsed, DeclaredSizes::fromJson(json, "x.json"));
  EXPECT_EQ(parsed, declared);
  TF_ASSERT_OK_AND_ASSIGN(DeclaredSizes none,
                          DeclaredSizes::fromJson(DeclaredSizes().toJson(), "x.json"));
  EXPECT_EQ(none, DeclaredSizes());

  // The ABI's tensors and dimension names, as the messages and the AOT header spell them.
  ASSERT_EQ(abiTensors().size(), size_t(abiTensorCount));
  std::string spelled;
  for (const AbiTensor &tensor : abiTensors()) {
    spelled += tensor.name.str() + ":";
    for (SizeParameter p : tensor.dimensions)
      spelled += " " + sizeParameterName(p).str();
    spelled += ";";
  }
  EXPECT_EQ(spelled, "Q: B H M D;K: B Hkv N D;V: B Hkv N D;O: B H M D;LSE: B H M;");
}

TEST(KernelMetadata, RejectsBadSidecars) {
  struct {
    const char *json;
    const char *expected;
  } bad[] = {
      {"{", "x.json: not JSON"},
      {"[1]", "not a JSON object"},
      {R"({"block_m": 64})", "missing string \"name\""},
      {R"({"name": "2fast", "dtype": "bf16"})", "not a PTX entry name"},
      {R"({"name": "causal", "dtype": "f32"})", "\"dtype\" must be bf16 or f16, not 'f32'"},
      {R"({"name": "causal", "dtype": "bf16", "block_m": 64})", "missing integer \"block_n\""},
      {R"({"name": "causal", "dtype": "bf16", "block_m": 64, "block_n": 64, "threads": 2048,
          "head_dim": 64, "shared_bytes": 0})",
       "\"threads\" is 2048, outside [1, 1024]"},
      {R"({"name": "causal", "dtype": "bf16", "block_m": 0, "block_n": 64, "threads": 128,
          "head_dim": 64, "shared_bytes": 0})",
       "\"block_m\" is 0"},
      {R"({"name": "causal", "dtype": "bf16", "block_m": 64, "block_n": 64, "threads": 128,
          "head_dim": 64, "shared_bytes": 0, "scale": "big"})",
       "\"scale\" must be a positive number"},
  };
  // Sidecars of kernels compiled before launches checked declared sizes are refused rather than
  // read as declaring nothing: a gqa kernel launched with 6 heads would run and be wrong.
  const std::string declaredBad[][2] = {
      {sidecarDeclaring(""), "x.json: missing \"declared_sizes\""},
      {sidecarDeclaring(""), "compile the kernel again"},
      {sidecarDeclaring("[1, 2]"), "\"declared_sizes\" must be an object"},
      {sidecarDeclaring(R"({"Q": [null, 8, null, 64]})"), "needs \"K\": an array of 4 sizes"},
      {sidecarDeclaring(R"({"Q": [null, 8, null, 64], "K": [null, 2, null, 64],
         "V": [null, 2, null, 64], "O": [null, 8, null, 64], "LSE": [null, 8, null, 1]})"),
       "needs \"LSE\": an array of 3 sizes"},
      {sidecarDeclaring(R"({"Q": [null, 0, null, 64], "K": [null, 2, null, 64],
         "V": [null, 2, null, 64], "O": [null, 8, null, 64], "LSE": [null, 8, null]})"),
       "Q[1] must be null or a positive integer"},
      {sidecarDeclaring(R"({"Q": [null, 8, null, "64"], "K": [null, 2, null, 64],
         "V": [null, 2, null, 64], "O": [null, 8, null, 64], "LSE": [null, 8, null]})"),
       "Q[3] must be null or a positive integer"},
      {sidecarDeclaring(R"({"Q": [null, 8, null, 64], "K": [null, 2, null, 64],
         "V": [null, 2, null, 64], "O": [null, 8, null, 64], "LSE": [null, 8, null],
         "dO": [null, 8, null, 64]})"),
       "has an unknown tensor \"dO\""},
      {sidecarDeclaring(R"({"Q": [null, 8, null, 128], "K": [null, 2, null, 128],
         "V": [null, 2, null, 128], "O": [null, 8, null, 128], "LSE": [null, 8, null]})"),
       "\"head_dim\" is 64 but \"declared_sizes\" gives Q a head dim of 128"},
  };
  for (const auto &[json, expected] : declaredBad) {
    auto parsed = KernelMetadata::parse(json, "x.json");
    ASSERT_FALSE(parsed) << json;
    ErrorReport report = takeReport(parsed.takeError());
    EXPECT_EQ(report.kind, ErrorKind::InvalidArgument);
    EXPECT_NE(report.message.find(expected), std::string::npos)
        << "message: " << report.message << "\nexpected to contain: " << expected;
  }
  for (const auto &b : bad) {
    auto parsed = KernelMetadata::parse(b.json, "x.json");
    ASSERT_FALSE(parsed) << b.json;
    ErrorReport report = takeReport(parsed.takeError());
    EXPECT_EQ(report.kind, ErrorKind::InvalidArgument);
    EXPECT_NE(report.message.find(b.expected), std::string::npos)
        << "message: " << report.message << "\nexpected to contain: " << b.expected;
  }
}

TEST(LaunchValidation, AcceptsAValidLaunch) {
  TF_ASSERT_OK_AND_ASSIGN(KernelMetadata m, KernelMetadata::parse(validSidecar, "causal.json"));
  AttentionShape shape{2, 8, 2, 1000, 4096, 64};
  AttentionBuffers buffers{0x1000, 0x2000, 0x3000, 0x4000, 0x5000};
  TF_ASSERT_OK(validateLaunch(m, buffers, shape, AttentionStrides::contiguous(shape)));
}

TEST(LaunchValidation, RejectsBadShapesStridesAndPointers) {
  TF_ASSERT_OK_AND_ASSIGN(KernelMetadata m, KernelMetadata::parse(validSidecar, "causal.json"));
  const AttentionShape good{2, 8, 2, 1000, 4096, 64};
  const AttentionBuffers goodBuffers{0x1000, 0x2000, 0x3000, 0x4000, 0x5000};
  struct Bad {
    const char *expected;
    AttentionShape shape;
    AttentionBuffers buffers;
    int strideIndex = -1; ///< made negative
  };
  auto withShape = [&](auto edit) {
    AttentionShape s = good;
    edit(s);
    return s;
  };
  auto withBuffers = [&](auto edit) {
    AttentionBuffers b = goodBuffers;
    edit(b);
    return b;
  };
  Bad bad[] = {
      {"H (8) is not a multiple of Hkv (3)", withShape([](auto &s) { s.Hkv = 3; }), goodBuffers},
      {"Q dimension 3 (D) is 128 but the kernel declares 64", withShape([](auto &s) { s.D = 128; }),
       goodBuffers},
      {"M must be positive, not 0", withShape([](auto &s) { s.M = 0; }), goodBuffers},
      {"B must be positive, not -1", withShape([](auto &s) { s.B = -1; }), goodBuffers},
      {"H and B must be at most 65535", withShape([](auto &s) { s.B = 70000; }), goodBuffers},
      {"q is a null pointer", good, withBuffers([](auto &b) { b.q = 0; })},
      {"lse is not aligned as the kernel needs (4 bytes)", good,
       withBuffers([](auto &b) { b.lse = 0x5002; })},
      {"o is not aligned as the kernel needs (4 bytes)", good,
       withBuffers([](auto &b) { b.o = 0x4002; })},
      {"k is not aligned as the kernel needs (16 bytes)", good,
       withBuffers([](auto &b) { b.k = 0x2008; })},
      {"q spans more than 2^31 elements", withShape([](auto &s) { s.M = 1 << 24; }), goodBuffers},
      {"stride k_n is negative", good, goodBuffers, 5},
  };
  // Metadata built in code may declare nothing; head_dim still holds D.
  KernelMetadata undeclared = m;
  undeclared.declaredSizes = DeclaredSizes();
  AttentionShape d128 = withShape([](auto &s) { s.D = 128; });
  llvm::Error headDim =
      validateLaunch(undeclared, goodBuffers, d128, AttentionStrides::contiguous(d128));
  ASSERT_TRUE(bool(headDim));
  EXPECT_NE(takeReport(std::move(headDim))
                .message.find("D is 128 but the kernel was compiled for head dim 64"),
            std::string::npos);
  // Strides the vector accesses cannot take.
  for (auto [index, expected] : {std::pair<int, const char *>{2, "stride q_m must be even"},
                                 {5, "stride k_n must be a multiple of 8"}}) {
    auto strides = AttentionStrides::contiguous(good).toArray();
    strides[index] += 1;
    llvm::Error error =
        validateLaunch(m, goodBuffers, good, AttentionStrides::fromArray(strides.data()));
    ASSERT_TRUE(bool(error)) << expected;
    EXPECT_NE(takeReport(std::move(error)).message.find(expected), std::string::npos) << expected;
  }
  for (const Bad &b : bad) {
    std::array<int64_t, AttentionStrides::count> strides =
        AttentionStrides::contiguous(b.shape).toArray();
    if (b.strideIndex >= 0)
      strides[b.strideIndex] = -1;
    llvm::Error error =
        validateLaunch(m, b.buffers, b.shape, AttentionStrides::fromArray(strides.data()));
    ASSERT_TRUE(bool(error)) << b.expected;
    ErrorReport report = takeReport(std::move(error));
    EXPECT_EQ(report.kind, ErrorKind::InvalidArgument);
    EXPECT_NE(report.message.find(b.expected), std::string::npos)
        << "message: " << report.message << "\nexpected to contain: " << b.expected;
  }
}

TEST(LaunchValidation, RefusesSizesTheKernelDoesNotDeclare) {
  TF_ASSERT_OK_AND_ASSIGN(KernelMetadata gqa, KernelMetadata::parse(gqaSidecar, "gqa.json"));
  const AttentionBuffers buffers{0x1000, 0x2000, 0x3000, 0x4000, 0x5000};
  AttentionShape declared{2, 8, 2, 1000, 333, 64};
  TF_ASSERT_OK(validateLaunch(gqa, buffers, declared, AttentionStrides::contiguous(declared)));

  struct {
    AttentionShape shape;
    const char *expected;
  } mismatches[] = {
      // The issue's case: it ran, and its output was wrong.
      {{2, 6, 2, 1000, 333, 64},
       "launch of 'gqa': Q dimension 1 (H) is 6 but the kernel declares 8"},
      {{2, 8, 1, 1000, 333, 64}, "K dimension 1 (Hkv) is 1 but the kernel declares 2"},
      {{2, 8, 4, 1000, 333, 64}, "K dimension 1 (Hkv) is 4 but the kernel declares 2"},
      {{2, 16, 4, 1000, 333, 64}, "Q dimension 1 (H) is 16 but the kernel declares 8"},
      {{2, 8, 2, 1000, 333, 128}, "Q dimension 3 (D) is 128 but the kernel declares 64"},
  };
  for (const auto &m : mismatches) {
    llvm::Error error =
        validateLaunch(gqa, buffers, m.shape, AttentionStrides::contiguous(m.shape));
    ASSERT_TRUE(bool(error)) << m.expected;
    ErrorReport report = takeReport(std::move(error));
    EXPECT_EQ(report.kind, ErrorKind::InvalidArgument);
    EXPECT_NE(report.message.find(m.expected), std::string::npos)
        << "message: " << report.message << "\nexpected to contain: " << m.expected;
  }

  // Every tensor's declared sizes are checked, each named as the ABI names it.
  KernelMetadata fixedLengths = gqa;
  fixedLengths.declaredSizes.sizes[2][2] = 333;  // V: N
  fixedLengths.declaredSizes.sizes[4][0] = 2;    // LSE: B
  fixedLengths.declaredSizes.sizes[3][2] = 1000; // O: M
  TF_ASSERT_OK(
      validateLaunch(fixedLengths, buffers, declared, AttentionStrides::contiguous(declared)));
  struct {
    void (*edit)(AttentionShape &);
    const char *expected;
  } fixed[] = {
      {[](AttentionShape &s) { s.N = 334; },
       "V dimension 2 (N) is 334 but the kernel declares 333"},
      {[](AttentionShape &s) { s.B = 1; }, "LSE dimension 0 (B) is 1 but the kernel declares 2"},
      {[](AttentionShape &s) { s.M = 999; },
       "O dimension 2 (M) is 999 but the kernel declares 1000"},
  };
  for (const auto &f : fixed) {
    AttentionShape shape = declared;
    f.edit(shape);
    llvm::Error error =
        validateLaunch(fixedLengths, buffers, shape, AttentionStrides::contiguous(shape));
    ASSERT_TRUE(bool(error)) << f.expected;
    std::string message = takeReport(std::move(error)).message;
    EXPECT_NE(message.find(f.expected), std::string::npos)
        << "message: " << message << "\nexpected to contain: " << f.expected;
  }
}

// TMA kernels (warp_specialize; "kv_tma"): never paged or varlen, in the sidecar or at launch,
// and K and V must make tensor maps the driver takes, refused with the tensor's name.
TEST(LaunchValidation, TmaKernels) {
  std::string sidecar = validSidecar;
  sidecar.insert(sidecar.find("\"declared_sizes\""), "\"kv_tma\": true, ");
  TF_ASSERT_OK_AND_ASSIGN(KernelMetadata m, KernelMetadata::parse(sidecar, "causal.json"));
  EXPECT_TRUE(m.kvTma);
  {
    std::string paged = sidecar;
    paged.insert(paged.find("\"declared_sizes\""), "\"paged_kv\": true, ");
    auto parsed = KernelMetadata::parse(paged, "causal.json");
    ASSERT_FALSE(parsed);
    EXPECT_NE(takeReport(parsed.takeError()).message.find("a TMA kernel (\"kv_tma\") is not paged"),
              std::string::npos);
    // A packed batch's maps span its rows (LaunchAbi.h).
    std::string packed = sidecar;
    packed.insert(packed.find("\"declared_sizes\""), "\"varlen\": true, ");
    TF_ASSERT_OK_AND_ASSIGN(KernelMetadata varlenTma, KernelMetadata::parse(packed, "causal.json"));
    EXPECT_TRUE(varlenTma.kvTma && varlenTma.varlen);
  }

  AttentionShape shape{2, 8, 2, 1000, 4096, 64};
  AttentionBuffers buffers{0x1000, 0x2000, 0x3000, 0x4000, 0x5000};
  AttentionStrides strides = AttentionStrides::contiguous(shape);
  TF_ASSERT_OK(validateLaunch(m, buffers, shape, strides));
  auto refusal = [&](const KernelMetadata &metadata, const PagedKV *paged,
                     const Varlen *varlen) {
    llvm::Error error = validateLaunch(metadata, buffers, shape, strides, paged, varlen);
    if (!error)
      return std::string("(accepted)");
    ErrorReport report = takeReport(std::move(error));
    EXPECT_EQ(report.kind, ErrorKind::InvalidArgument);
    return report.message;
  };
  int32_t table[1] = {0};
  PagedKV paged = PagedKV::of(table, 1, 1, table, 4096, 8);
  Varlen varlen = Varlen::of(table, table, 2000, 8192);
  EXPECT_NE(refusal(m, &paged, nullptr)
                .find("launch of 'causal': the kernel reads K and V with TMA (warp_specialize), "
                      "whose tensor maps take no paged cache"),
            std::string::npos);
  // A packed batch's maps span its rows; this kernel is padded.
  EXPECT_NE(refusal(m, nullptr, &varlen).find("the kernel runs on a padded batch"),
            std::string::npos);
  // Packed, the maps' base is N rows before K's and V's: accepted where that does not wrap.
  KernelMetadata packed = m;
  packed.varlen = true;
  EXPECT_NE(refusal(packed, nullptr, &varlen).find("where its tensor map's base"),
            std::string::npos);
  AttentionBuffers high{0x10000000, 0x20000000, 0x30000000, 0x40000000, 0x50000000};
  if (llvm::Error error = validateLaunch(packed, high, shape, strides, nullptr, &varlen))
    ADD_FAILURE() << takeReport(std::move(error)).message;
  KernelMetadata wide = m;
  wide.blockN = 512;
  EXPECT_NE(refusal(wide, nullptr, nullptr)
                .find("launch of 'causal': the TMA map of K: its box of block_n = 512 rows"),
            std::string::npos);
  // The box is the tensor map's: a kernel without TMA has none to fit.
  KernelMetadata plain = wide;
  plain.kvTma = false;
  EXPECT_EQ(refusal(plain, nullptr, nullptr), "(accepted)");
}

TEST(LaunchValidation, StridesRoundTripInParameterOrder) {
  int64_t values[AttentionStrides::count];
  for (int i = 0; i < AttentionStrides::count; ++i)
    values[i] = 100 + i;
  AttentionStrides s = AttentionStrides::fromArray(values);
  EXPECT_EQ(s.qB, 100);
  EXPECT_EQ(s.kN, 105);
  EXPECT_EQ(s.oM, 111);
  EXPECT_EQ(s.lseH, 113);
  auto back = s.toArray();
  EXPECT_TRUE(std::equal(back.begin(), back.end(), values));
}

//===----------------------------------------------------------------------===//
// The runtime on the GPU, without compiled kernels
//===----------------------------------------------------------------------===//

// Tiny PTX modules to exercise loading; the attention kernels come from the compiler only.
constexpr const char *noopPtx = R"(.version 8.0
.target sm_80
.address_size 64
.visible .entry noop() .maxntid 64, 1, 1
{
  ret;
}
)";

constexpr const char *brokenPtx = R"(.version 8.0
.target sm_80
.address_size 64
.visible .entry broken()
{
  not_an_instruction.u32 %r1;
  ret;
}
)";

KernelMetadata metadataNamed(const char *name, int64_t threads) {
  KernelMetadata m;
  m.name = name;
  m.blockM = m.blockN = 64;
  m.threads = threads;
  m.headDim = 64;
  return m;
}

TEST(CudaDriver, ReportsTheDevice) {
  TF_REQUIRE_GPU();
  Driver &driver = *Driver::get();
  TF_ASSERT_OK_AND_ASSIGN(DeviceInfo device, driver.currentDevice());
  std::printf("[ device   ] %s, sm_%d%d, %d KiB opt-in shared memory per block, driver %d.%d, "
              "%d device(s)\n",
              device.name.c_str(), device.computeMajor, device.computeMinor,
              device.maxSharedBytesPerBlockOptin / 1024, driver.version() / 1000,
              driver.version() % 1000 / 10, driver.deviceCount());
  EXPECT_GE(device.computeMajor, 8) << "tilefuse targets sm_80 and newer";
}

TEST(CudaDriver, DeviceBuffersRoundTrip) {
  TF_REQUIRE_GPU();
  TF_ASSERT_OK_AND_ASSIGN(DeviceBuffer buffer, DeviceBuffer::allocate(4096));
  std::vector<uint8_t> in(4096), out(4096);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = uint8_t(i * 7);
  TF_ASSERT_OK(buffer.upload(in.data(), in.size()));
  TF_ASSERT_OK(buffer.download(out.data(), out.size()));
  EXPECT_EQ(in, out);
  TF_ASSERT_OK(buffer.fill(0xFF));
  TF_ASSERT_OK(buffer.download(out.data(), 16, 4000));
  EXPECT_EQ(out[0], 0xFF);
  llvm::Error overrun = buffer.download(out.data(), 100, 4000);
  ASSERT_TRUE(bool(overrun));
  EXPECT_EQ(takeReport(std::move(overrun)).kind, ErrorKind::InvalidArgument);
}

TEST(CudaDriver, JitErrorsCarryTheLog) {
  TF_REQUIRE_GPU();
  auto kernel = CudaKernel::load(brokenPtx, metadataNamed("broken", 64));
  ASSERT_FALSE(kernel);
  ErrorReport report = takeReport(kernel.takeError());
  EXPECT_EQ(report.kind, ErrorKind::DriverCall);
  EXPECT_NE(report.message.find("cuModuleLoadDataEx(broken)"), std::string::npos)
      << report.message;
  EXPECT_NE(report.message.find("not_an_instruction"), std::string::npos)
      << "the JIT log should name the bad instruction:\n"
      << report.message;
}

TEST(CudaDriver, LoadChecksTheSidecarAgainstTheModule) {
  TF_REQUIRE_GPU();
  auto wrongName = CudaKernel::load(noopPtx, metadataNamed("causal", 64));
  ASSERT_FALSE(wrongName);
  EXPECT_NE(takeReport(wrongName.takeError()).message.find("no .entry named 'causal'"),
            std::string::npos);
  auto tooManyThreads = CudaKernel::load(noopPtx, metadataNamed("noop", 128));
  ASSERT_FALSE(tooManyThreads);
  EXPECT_NE(takeReport(tooManyThreads.takeError()).message.find("runs at most 64 threads"),
            std::string::npos);
}

TEST(CudaDriver, LaunchesOnAStream) {
  TF_REQUIRE_GPU();
  TF_ASSERT_OK_AND_ASSIGN(std::unique_ptr<CudaKernel> kernel,
                          CudaKernel::load(noopPtx, metadataNamed("noop", 64)));
  TF_ASSERT_OK_AND_ASSIGN(Stream stream, Stream::create());
  AttentionShape shape{2, 4, 2, 300, 300, 64};
  AttentionBuffers buffers{0x1000, 0x2000, 0x3000, 0x4000, 0x5000}; // never dereferenced
  TF_ASSERT_OK(kernel->launch(stream.handle(), buffers, shape,
                              AttentionStrides::contiguous(shape)));
  TF_ASSERT_OK(stream.synchronize());
  shape.D = 128;
  llvm::Error mismatch =
      kernel->launch(stream.handle(), buffers, shape, AttentionStrides::contiguous(shape));
  ASSERT_TRUE(bool(mismatch));
  EXPECT_EQ(takeReport(std::move(mismatch)).kind, ErrorKind::InvalidArgument);
}

TEST(CudaDriver, LaunchRefusesSizesTheKernelDoesNotDeclare) {
  TF_REQUIRE_GPU();
  // A loaded module whose metadata declares gqa's heads: the refusal comes from launch itself.
  KernelMetadata metadata = metadataNamed("noop", 64);
  metadata.declaredSizes.sizes[0][1] = 8; // Q: H
  metadata.declaredSizes.sizes[1][1] = 2; // K: Hkv
  TF_ASSERT_OK_AND_ASSIGN(std::unique_ptr<CudaKernel> kernel, CudaKernel::load(noopPtx, metadata));
  TF_ASSERT_OK_AND_ASSIGN(Stream stream, Stream::create());
  AttentionBuffers buffers{0x1000, 0x2000, 0x3000, 0x4000, 0x5000}; // never dereferenced
  AttentionShape shape{2, 8, 2, 300, 300, 64};
  TF_ASSERT_OK(
      kernel->launch(stream.handle(), buffers, shape, AttentionStrides::contiguous(shape)));
  shape.H = 6;
  llvm::Error mismatch =
      kernel->launch(stream.handle(), buffers, shape, AttentionStrides::contiguous(shape));
  ASSERT_TRUE(bool(mismatch));
  ErrorReport report = takeReport(std::move(mismatch));
  EXPECT_EQ(report.kind, ErrorKind::InvalidArgument);
  EXPECT_NE(report.message.find("Q dimension 1 (H) is 6 but the kernel declares 8"),
            std::string::npos)
      << report.message;
  TF_ASSERT_OK(stream.synchronize());
}

/// A TMA probe of the launch ABI (LaunchAbi.h: the base parameters, the split ones with
/// `split`, then the tensor maps k_map and v_map): CTA 0 writes every other parameter, as 64-bit
/// values in order, to lse; each CTA of the first split (x < gridDim.x / S) loads the boxes at
/// {panel · 64, x · 64, y, z} of K's and V's maps, two panels each, into a 1024-byte aligned
/// shared tile and copies the 32 KiB to o at ((z · gridDim.y + y) · rowBlocks + x) · 32 KiB.
std::string tmaProbePtx(const std::string &name, bool split) {
  int parameters = launch_abi::kParameterCount + (split ? launch_abi::kSplitParameterCount : 0);
  std::string ptx = ".version 8.0\n.target sm_90a\n.address_size 64\n"
                    ".shared .align 1024 .b8 tile[32768];\n.shared .align 8 .b64 bar;\n"
                    ".visible .entry " + name + "(\n";
  for (int i = 0; i < parameters; ++i)
    ptx += "  .param .u64 p" + std::to_string(i) + ",\n";
  ptx += "  .param .align 64 .b8 k_map[128],\n  .param .align 64 .b8 v_map[128]\n)"
         " .maxntid 128, 1, 1\n{\n"
         "  .reg .pred %p<4>;\n  .reg .b32 %r<24>;\n  .reg .b64 %rd<8>;\n"
         "  mov.u32 %r1, %ctaid.x;\n  mov.u32 %r2, %ctaid.y;\n  mov.u32 %r3, %ctaid.z;\n"
         "  mov.u32 %r4, %tid.x;\n  or.b32 %r5, %r1, %r2;\n  or.b32 %r5, %r5, %r3;\n"
         "  or.b32 %r5, %r5, %r4;\n  setp.ne.u32 %p1, %r5, 0;\n  @%p1 bra PARAMETERS_DONE;\n"
         "  ld.param.u64 %rd1, [p4];\n  cvta.to.global.u64 %rd1, %rd1;\n";
  for (int i = 0; i < parameters; ++i)
    ptx += "  ld.param.u64 %rd2, [p" + std::to_string(i) + "];\n  st.global.u64 [%rd1+" +
           std::to_string(8 * i) + "], %rd2;\n";
  ptx += "PARAMETERS_DONE:\n  mov.u32 %r6, %nctaid.x;\n";
  if (split) // rowBlocks = gridDim.x / S
    ptx += "  ld.param.u64 %rd2, [p" + std::to_string(parameters - 1) +
           "];\n  cvt.u32.u64 %r7, %rd2;\n  div.u32 %r6, %r6, %r7;\n";
  ptx += R"(  setp.ge.u32 %p1, %r1, %r6;
  @%p1 bra DONE;
  mov.u32 %r8, bar;
  mov.u32 %r9, tile;
  setp.ne.u32 %p2, %r4, 0;
  @%p2 bra INITIALIZED;
  mbarrier.init.shared.b64 [%r8], 1;
  fence.proxy.async.shared::cta;
INITIALIZED:
  bar.sync 0;
  @%p2 bra ISSUED;
  mov.u32 %r10, 32768;
  mbarrier.arrive.expect_tx.shared.b64 _, [%r8], %r10;
  shl.b32 %r10, %r1, 6;
  mov.u32 %r11, 0;
  mov.u32 %r12, 64;
  mov.b64 %rd3, k_map;
  cvta.param.u64 %rd3, %rd3;
  mov.b64 %rd4, v_map;
  cvta.param.u64 %rd4, %rd4;
  cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes
      [%r9], [%rd3, {%r11, %r10, %r2, %r3}], [%r8];
  add.u32 %r13, %r9, 8192;
  cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes
      [%r13], [%rd3, {%r12, %r10, %r2, %r3}], [%r8];
  add.u32 %r13, %r9, 16384;
  cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes
      [%r13], [%rd4, {%r11, %r10, %r2, %r3}], [%r8];
  add.u32 %r13, %r9, 24576;
  cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes
      [%r13], [%rd4, {%r12, %r10, %r2, %r3}], [%r8];
ISSUED:
WAIT:
  mbarrier.try_wait.parity.shared.b64 %p3, [%r8], 0;
  @!%p3 bra WAIT;
  mov.u32 %r14, %nctaid.y;
  mad.lo.u32 %r15, %r3, %r14, %r2;
  mad.lo.u32 %r15, %r15, %r6, %r1;
  ld.param.u64 %rd5, [p3];
  cvta.to.global.u64 %rd5, %rd5;
  mul.wide.u32 %rd6, %r15, 32768;
  add.u64 %rd5, %rd5, %rd6;
  mov.u32 %r16, %r4;
COPY:
  shl.b32 %r17, %r16, 4;
  add.u32 %r18, %r9, %r17;
  ld.shared.v4.u32 {%r19, %r20, %r21, %r22}, [%r18];
  cvt.u64.u32 %rd6, %r17;
  add.u64 %rd7, %rd5, %rd6;
  st.global.v4.u32 [%rd7], {%r19, %r20, %r21, %r22};
  add.u32 %r16, %r16, 128;
  setp.lt.u32 %p1, %r16, 2048;
  @%p1 bra COPY;
DONE:
  ret;
}
)";
  return ptx;
}

// A TMA kernel's launch (metadata.kvTma) encodes K's and V's tensor maps and passes them after
// every other parameter, split or not: the probe's boxes are the tensors' elements (BSHD K with
// padded rows, BHND V with padded heads), 128-byte swizzled, zero past N = 100 and D = 96.
TEST(CudaDriver, TmaKernelsReadTheirTensorMaps) {
  TF_REQUIRE_GPU();
  TF_ASSERT_OK_AND_ASSIGN(DeviceInfo device, Driver::get()->currentDevice());
  if (device.computeMajor != 9)
    GTEST_SKIP() << "TMA probe PTX is sm_90a; " << device.name << " is sm_"
                 << device.computeMajor << device.computeMinor;
  const AttentionShape shape{2, 2, 2, 128, 100, 96};
  const int64_t rowBlocks = 2, paddedD = 104;
  AttentionStrides strides = AttentionStrides::contiguous(shape);
  strides.kN = shape.Hkv * paddedD;
  strides.kH = paddedD;
  strides.kB = shape.N * shape.Hkv * paddedD;
  strides.vH = shape.N * shape.D + 64;
  strides.vB = shape.Hkv * strides.vH;
  auto value = [](int t, int64_t b, int64_t h, int64_t n, int64_t d) {
    return uint16_t(1 + (t * 40503 + b * 7919 + h * 104729 + n * 131 + d) % 65000);
  };
  // NaN where no element is: a box that reads padding shows.
  std::vector<uint16_t> kHost(shape.B * strides.kB, 0xFFFF), vHost(shape.B * strides.vB, 0xFFFF);
  for (int64_t b = 0; b < shape.B; ++b)
    for (int64_t h = 0; h < shape.Hkv; ++h)
      for (int64_t n = 0; n < shape.N; ++n)
        for (int64_t d = 0; d < shape.D; ++d) {
          kHost[b * strides.kB + h * strides.kH + n * strides.kN + d] = value(0, b, h, n, d);
          vHost[b * strides.vB + h * strides.vH + n * strides.vN + d] = value(1, b, h, n, d);
        }
  size_t tileBytes = 32768, outBytes = shape.B * shape.H * rowBlocks * tileBytes;
  TF_ASSERT_OK_AND_ASSIGN(DeviceBuffer q, DeviceBuffer::allocate(4096));
  TF_ASSERT_OK_AND_ASSIGN(DeviceBuffer k, DeviceBuffer::allocate(kHost.size() * 2));
  TF_ASSERT_OK_AND_ASSIGN(DeviceBuffer v, DeviceBuffer::allocate(vHost.size() * 2));
  TF_ASSERT_OK_AND_ASSIGN(DeviceBuffer o, DeviceBuffer::allocate(outBytes));
  TF_ASSERT_OK_AND_ASSIGN(DeviceBuffer lse, DeviceBuffer::allocate(4096));
  TF_ASSERT_OK(k.upload(kHost.data(), kHost.size() * 2));
  TF_ASSERT_OK(v.upload(vHost.data(), vHost.size() * 2));
  AttentionBuffers buffers{q.address(), k.address(), v.address(), o.address(), lse.address()};
  TF_ASSERT_OK_AND_ASSIGN(Stream stream, Stream::create());
  for (bool split : {false, true}) {
    SCOPED_TRACE(split ? "split" : "unsplit");
    std::string name = split ? "tma_probe_split" : "tma_probe";
    KernelMetadata metadata = metadataNamed(name.c_str(), 128);
    metadata.headDim = shape.D;
    metadata.kvTma = true;
    metadata.splitKv = split;
    TF_ASSERT_OK_AND_ASSIGN(std::unique_ptr<CudaKernel> kernel,
                            CudaKernel::load(tmaProbePtx(name, split), metadata));
    TF_ASSERT_OK(o.fill(0xAB));
    TF_ASSERT_OK(lse.fill(0));
    TF_ASSERT_OK(kernel->launch(stream.handle(), buffers, shape, strides, split ? 3 : 0));
    TF_ASSERT_OK(stream.synchronize());

    std::vector<int64_t> parameters(32);
    TF_ASSERT_OK(lse.download(parameters.data(), parameters.size() * 8));
    std::vector<int64_t> expected = {int64_t(q.address()), int64_t(k.address()),
                                     int64_t(v.address()), int64_t(o.address()),
                                     int64_t(lse.address()), shape.B, shape.H, shape.Hkv,
                                     shape.M, shape.N};
    for (int64_t stride : strides.toArray())
      expected.push_back(stride);
    for (int i = 0; i < launch_abi::kParameterCount; ++i)
      EXPECT_EQ(parameters[i], expected[i]) << "parameter " << i;
    if (split) {
      for (int i = 0; i < launch_abi::kSplitPointerCount; ++i)
        EXPECT_NE(parameters[launch_abi::kParameterCount + i], 0) << "split pointer " << i;
      EXPECT_EQ(parameters[launch_abi::kParameterCount + launch_abi::kSplitPointerCount], 3);
    }

    std::vector<uint8_t> out(outBytes);
    TF_ASSERT_OK(o.download(out.data(), out.size()));
    int64_t wrong = 0;
    for (int64_t b = 0; b < shape.B; ++b)
      for (int64_t h = 0; h < shape.H; ++h)
        for (int64_t x = 0; x < rowBlocks; ++x)
          for (int t = 0; t < 2; ++t)
            for (int panel = 0; panel < 2; ++panel)
              for (int64_t r = 0; r < 64; ++r)
                for (int64_t column = 0; column < 64; ++column) {
                  // SWIZZLE_128B: a row's 16-byte chunk j is at chunk j ^ (row mod 8).
                  size_t at = ((b * shape.H + h) * rowBlocks + x) * tileBytes +
                              (t * 2 + panel) * 8192 + r * 128 +
                              (((column / 8) ^ (r % 8)) * 16) + (column % 8) * 2;
                  uint16_t got = uint16_t(out[at] | out[at + 1] << 8);
                  int64_t n = x * 64 + r, d = panel * 64 + column;
                  uint16_t want = n < shape.N && d < shape.D ? value(t, b, h, n, d) : 0;
                  if (got != want && wrong++ < 5)
                    ADD_FAILURE() << (t ? "V" : "K") << "[" << b << "][" << h << "][" << n
                                  << "][" << d << "]: got " << got << ", want " << want;
                }
    EXPECT_EQ(wrong, 0) << "elements of the boxes that are wrong";
  }
}

TEST(CudaDriver, CompiledGqaRefusesSixHeadsAndWritesNothing) {
  TF_REQUIRE_GPU();
  // The issue's reproducer: kernels/gqa.mlir, compiled for 8 query and 2 key/value heads, used
  // to run with H = 6 and return wrong output.
  const char *dir = std::getenv("TILEFUSE_PTX_DIR");
  llvm::SmallString<256> ptxPath(dir ? dir : "");
  llvm::sys::path::append(ptxPath, "gqa.ptx");
  if (!dir || !llvm::sys::fs::exists(ptxPath))
    GTEST_SKIP() << "no gqa.ptx in TILEFUSE_PTX_DIR";
  TF_ASSERT_OK_AND_ASSIGN(std::unique_ptr<CudaKernel> kernel, CudaKernel::loadFiles(ptxPath));
  const KernelMetadata &metadata = kernel->metadata();
  AttentionShape shape{1, 6, 2, 128, 128, metadata.headDim};
  size_t elementBytes = ref::elementSize(metadata.dtype);
  size_t qBytes = shape.B * shape.H * shape.M * shape.D * elementBytes;
  size_t kvBytes = shape.B * shape.Hkv * shape.N * shape.D * elementBytes;
  TF_ASSERT_OK_AND_ASSIGN(DeviceBuffer q, DeviceBuffer::allocate(qBytes));
  TF_ASSERT_OK_AND_ASSIGN(DeviceBuffer k, DeviceBuffer::allocate(kvBytes));
  TF_ASSERT_OK_AND_ASSIGN(DeviceBuffer v, DeviceBuffer::allocate(kvBytes));
  TF_ASSERT_OK_AND_ASSIGN(DeviceBuffer o, DeviceBuffer::allocate(qBytes));
  TF_ASSERT_OK_AND_ASSIGN(DeviceBuffer lse,
                          DeviceBuffer::allocate(shape.B * shape.H * shape.M * sizeof(float)));
  TF_ASSERT_OK(q.fill(0));
  TF_ASSERT_OK(k.fill(0));
  TF_ASSERT_OK(v.fill(0));
  TF_ASSERT_OK(o.fill(0xFF));
  TF_ASSERT_OK(lse.fill(0xFF));
  TF_ASSERT_OK_AND_ASSIGN(Stream stream, Stream::create());
  llvm::Error refused = kernel->launch(
      stream.handle(), {q.address(), k.address(), v.address(), o.address(), lse.address()}, shape,
      AttentionStrides::contiguous(shape));
  ASSERT_TRUE(bool(refused));
  ErrorReport report = takeReport(std::move(refused));
  EXPECT_EQ(report.kind, ErrorKind::InvalidArgument);
  EXPECT_NE(report.message.find("Q dimension 1 (H) is 6 but the kernel declares 8"),
            std::string::npos)
      << report.message;
  TF_ASSERT_OK(stream.synchronize());
  std::vector<uint8_t> out(qBytes);
  TF_ASSERT_OK(o.download(out.data(), out.size()));
  EXPECT_TRUE(llvm::all_of(out, [](uint8_t b) { return b == 0xFF; }))
      << "nothing may be launched: O must keep its poison";
}

} // namespace

int main(int argc, char **argv) {
  testing::InitGoogleTest(&argc, argv);
  if (!gpuStatus().usable)
    std::printf("tilefuse-gpu-tests: %s\n",
                gpuStatus().unavailable
                    ? skipMessage().c_str()
                    : ("CUDA driver error: " + gpuStatus().message).c_str());
  registerKernelTests();
  return RUN_ALL_TESTS();
}
