//===- RuntimeApiTest.cpp - the embeddable runtime, ptxas search, AOT header ===//
//
// On the CPU: tilefuse::Runtime compiles kernels by name or DSL text (PTX only; with an explicit
// arch), reports errors as Status values with file:line:col, serves repeats from its cache, and
// launches report "unavailable" without a GPU. The ptxas search and the C header's text are
// checked here too; the header's C is compiled by the aot-header test (test/aot).
//
//===----------------------------------------------------------------------===//
#include "tilefuse/kernels/Registry.h"
#include "tilefuse/runtime/AotHeader.h"
#include "tilefuse/runtime/Ptxas.h"
#include "tilefuse/runtime/Tilefuse.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include "FileTestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <thread>

using namespace tilefuse;

namespace {

using test::listDir;
using test::readFile;
using test::writeFile;

/// A fresh directory, removed with the object.
struct TempDir : test::TempDir {
  TempDir() : test::TempDir("tilefuse-api-test") {}
};


RuntimeOptions optionsFor(const TempDir &dir) {
  RuntimeOptions o;
  o.cacheDirectory = dir.str();
  return o;
}

KernelSpec causalSpec() {
  KernelSpec spec;
  spec.kernel = "causal";
  spec.arch = "sm_90a";
  return spec;
}

} // namespace

TEST(RuntimeApi, GetsABundledKernelThenHitsTheCache) {
  TempDir dir;
  Runtime runtime(optionsFor(dir));
  std::shared_ptr<const Kernel> kernel;
  Status s = runtime.getKernel(causalSpec(), kernel);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_TRUE(kernel);
  EXPECT_EQ(kernel->name(), "causal");
  EXPECT_EQ(kernel->dtype(), "bf16");
  EXPECT_EQ(kernel->arch(), "sm_90a");
  EXPECT_EQ(kernel->headDim(), 64);
  // The sm_90a default for D = 64 under a causal mask, any length: three consumer warpgroups
  // and the producer.
  EXPECT_EQ(kernel->blockM(), 192);
  EXPECT_EQ(kernel->threads(), 512);
  EXPECT_EQ(kernel->origin(), "compiled");
  EXPECT_NE(kernel->ptx().find(".entry causal"), std::string::npos);
  EXPECT_NE(kernel->ptx().find("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16"),
            std::string::npos);
  EXPECT_NE(kernel->metadataJson().find("\"head_dim\": 64"), std::string::npos);

  // For sequences of up to 1024 keys: the one-warpgroup kernel, another cache entry.
  KernelSpec shortSpec = causalSpec();
  shortSpec.seqLen = 1024;
  std::shared_ptr<const Kernel> shortKernel;
  ASSERT_TRUE(runtime.getKernel(shortSpec, shortKernel).ok());
  EXPECT_EQ(shortKernel->blockM(), 64);
  EXPECT_EQ(shortKernel->threads(), 128);
  EXPECT_NE(shortKernel->cacheKey(), kernel->cacheKey());

  std::shared_ptr<const Kernel> again;
  ASSERT_TRUE(runtime.getKernel(causalSpec(), again).ok());
  EXPECT_EQ(again->origin(), "memory");
  EXPECT_EQ(again->cacheKey(), kernel->cacheKey());

  Runtime other(optionsFor(dir));
  ASSERT_TRUE(other.getKernel(causalSpec(), again).ok());
  EXPECT_EQ(again->origin(), "disk");
  EXPECT_EQ(again->ptx(), kernel->ptx());
  RuntimeStats stats = runtime.stats();
  EXPECT_EQ(stats.compiles, 2u); // the kernel and its short-sequence form
  EXPECT_EQ(stats.memoryHits, 1u);
  EXPECT_EQ(other.stats().diskHits, 1u);
}

TEST(RuntimeApi, SpecializesAndConfigures) {
  TempDir dir;
  Runtime runtime(optionsFor(dir));
  KernelSpec spec = causalSpec();
  spec.dtype = "f16";
  spec.headDim = 128;
  spec.blockM = 128;
  spec.blockN = 32;
  std::shared_ptr<const Kernel> kernel;
  Status s = runtime.getKernel(spec, kernel);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(kernel->dtype(), "f16");
  EXPECT_EQ(kernel->headDim(), 128);
  EXPECT_EQ(kernel->blockM(), 128);
  EXPECT_EQ(kernel->blockN(), 32);
  // Head dim 128 on sm_90a is warp-specialized by default: 8 consumer warps and a producer
  // warpgroup.
  EXPECT_EQ(kernel->threads(), 384);
  // (Short sequences: the one-warpgroup kernel, whose cp.async copies could read a paged cache.)
  KernelSpec plainSpec = causalSpec();
  plainSpec.seqLen = 1024;
  std::shared_ptr<const Kernel> plain;
  ASSERT_TRUE(runtime.getKernel(plainSpec, plain).ok());
  EXPECT_NE(plain->cacheKey(), kernel->cacheKey());
  // Split-KV is its own kernel: another cache entry, the split launch ABI in its metadata.
  KernelSpec splitSpec = causalSpec();
  splitSpec.splitKv = true;
  std::shared_ptr<const Kernel> split;
  s = runtime.getKernel(splitSpec, split);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_NE(split->cacheKey(), plain->cacheKey());
  EXPECT_NE(split->metadataJson().find("\"split_kv\": true"), std::string::npos);
  EXPECT_EQ(plain->metadataJson().find("split_kv"), std::string::npos);
  EXPECT_NE(split->ptx().find("atom.global.add"), std::string::npos);
  // Its defaults (splitKvTileConfig): GQA packing, which sets the grid, so the metadata says it.
  EXPECT_NE(split->metadataJson().find("\"pack_gqa\": true"), std::string::npos);
  EXPECT_NE(split->config().find("pack_gqa=true"), std::string::npos);
  // Split counts a launch may not take are refused before the driver is needed.
  int64_t dummy = 0;
  Status bad = split->launch(nullptr, &dummy, &dummy, &dummy, &dummy, nullptr,
                             {1, 1, 1, 1, 1, 128}, nullptr, -2);
  EXPECT_EQ(bad.code(), StatusCode::InvalidArgument);
  EXPECT_NE(bad.message().find("kvSplits -2"), std::string::npos) << bad.message();
  bad = plain->launch(nullptr, &dummy, &dummy, &dummy, &dummy, nullptr, {1, 1, 1, 1, 1, 128},
                      nullptr, 4);
  EXPECT_EQ(bad.code(), StatusCode::InvalidArgument);
  EXPECT_NE(bad.message().find("without split-KV"), std::string::npos) << bad.message();

  // Paged KV is its own kernel too (the paged launch ABI), split or not, and its launches are
  // checked against its form before the driver is needed.
  KernelSpec pagedSpec = splitSpec;
  pagedSpec.pagedKv = true;
  std::shared_ptr<const Kernel> paged;
  s = runtime.getKernel(pagedSpec, paged);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_NE(paged->cacheKey(), split->cacheKey());
  EXPECT_NE(paged->metadataJson().find("\"paged_kv\": true"), std::string::npos);
  EXPECT_EQ(split->metadataJson().find("paged_kv"), std::string::npos);
  bad = paged->launch(nullptr, &dummy, &dummy, &dummy, &dummy, nullptr, {1, 1, 1, 1, 1, 128});
  EXPECT_EQ(bad.code(), StatusCode::InvalidArgument);
  EXPECT_NE(bad.message().find("pass its page table"), std::string::npos) << bad.message();
  int32_t table[2] = {0, 1}, lengths[1] = {20};
  PagedKV kv;
  kv.pageTable = table;
  kv.kvLengths = lengths;
  kv.pagesPerSequence = kv.tableStride = 2;
  kv.pageSize = 16;
  kv.pages = 2;
  bad = paged->launch(nullptr, &dummy, &dummy, &dummy, &dummy, nullptr, {1, 1, 1, 1, 20, 128},
                      nullptr, 0, &kv);
  EXPECT_EQ(bad.code(), StatusCode::InvalidArgument);
  EXPECT_NE(bad.message().find("needs the strides"), std::string::npos) << bad.message();
  int64_t strides[14] = {128, 128, 128, 2048, 128, 128, 2048, 128, 128, 128, 128, 128, 1, 1};
  bad = paged->launch(nullptr, &dummy, &dummy, &dummy, &dummy, nullptr, {1, 1, 1, 1, 40, 128},
                      strides, 0, &kv);
  EXPECT_EQ(bad.code(), StatusCode::InvalidArgument);
  EXPECT_NE(bad.message().find("more than a table row's 2 pages of 16 rows"), std::string::npos)
      << bad.message();
  bad = plain->launch(nullptr, &dummy, &dummy, &dummy, &dummy, nullptr, {1, 1, 1, 1, 1, 128},
                      strides, 0, &kv);
  EXPECT_EQ(bad.code(), StatusCode::InvalidArgument);
  EXPECT_NE(bad.message().find("compile it with paged"), std::string::npos) << bad.message();

  // Varlen is its own kernel (the varlen launch ABI); it is refused split, and its launches
  // are checked against its form before the driver is needed.
  KernelSpec varlenSpec = causalSpec();
  varlenSpec.varlen = true;
  std::shared_ptr<const Kernel> varlen;
  s = runtime.getKernel(varlenSpec, varlen);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_NE(varlen->cacheKey(), plain->cacheKey());
  EXPECT_NE(varlen->metadataJson().find("\"varlen\": true"), std::string::npos);
  EXPECT_EQ(plain->metadataJson().find("varlen"), std::string::npos);
  // Split (FlashDecoding on a packed batch): its own kernel, GQA-packed as split kernels are.
  KernelSpec varlenSplit = varlenSpec;
  varlenSplit.splitKv = true;
  std::shared_ptr<const Kernel> varlenSplitKernel;
  s = runtime.getKernel(varlenSplit, varlenSplitKernel);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_NE(varlenSplitKernel->metadataJson().find("\"split_kv\": true"), std::string::npos);
  EXPECT_NE(varlenSplitKernel->metadataJson().find("\"varlen\": true"), std::string::npos);
  EXPECT_NE(varlenSplitKernel->cacheKey(), varlen->cacheKey());
  int32_t cu[3] = {0, 20, 50};
  Varlen packed = Varlen::of(cu, cu, 50, 50);
  bad = varlen->launch(nullptr, &dummy, &dummy, &dummy, &dummy, nullptr, {2, 1, 1, 30, 30, 128});
  EXPECT_EQ(bad.code(), StatusCode::InvalidArgument);
  EXPECT_NE(bad.message().find("pass its sequence offsets"), std::string::npos) << bad.message();
  bad = varlen->launch(nullptr, &dummy, &dummy, &dummy, &dummy, nullptr, {2, 1, 1, 30, 30, 128},
                       nullptr, 0, nullptr, &packed);
  EXPECT_EQ(bad.code(), StatusCode::InvalidArgument);
  EXPECT_NE(bad.message().find("varlen launch needs the strides"), std::string::npos)
      << bad.message();
  bad = plain->launch(nullptr, &dummy, &dummy, &dummy, &dummy, nullptr, {2, 1, 1, 30, 30, 128},
                      strides, 0, nullptr, &packed);
  EXPECT_EQ(bad.code(), StatusCode::InvalidArgument);
  EXPECT_NE(bad.message().find("compile it with varlen"), std::string::npos) << bad.message();
}

TEST(RuntimeApi, CompilesDslSource) {
  TempDir dir;
  Runtime runtime(optionsFor(dir));
  KernelSpec spec;
  spec.source = kernels::find("sliding_window")->text;
  spec.sourceName = "mine/window.mlir";
  spec.arch = "sm_90a";
  std::shared_ptr<const Kernel> kernel;
  Status s = runtime.getKernel(spec, kernel);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(kernel->name(), "sliding_window");
}

TEST(RuntimeApi, ErrorsAreStatusValues) {
  TempDir dir;
  Runtime runtime(optionsFor(dir));
  std::shared_ptr<const Kernel> kernel;
  auto expect = [&](const KernelSpec &spec, StatusCode code, const std::string &part) {
    Status s = runtime.getKernel(spec, kernel);
    EXPECT_EQ(s.code(), code) << s.message();
    EXPECT_NE(s.message().find(part), std::string::npos) << s.message();
    EXPECT_FALSE(kernel);
  };
  KernelSpec spec = causalSpec();
  spec.kernel = "no_such_kernel";
  expect(spec, StatusCode::InvalidArgument, "no bundled kernel named 'no_such_kernel'");
  spec = causalSpec();
  spec.kernel.clear();
  expect(spec, StatusCode::InvalidArgument, "no DSL source");
  spec = causalSpec();
  spec.blockM = 24;
  expect(spec, StatusCode::InvalidArgument, "block_m must be a multiple of 16");
  spec = causalSpec();
  spec.dtype = "f32";
  expect(spec, StatusCode::InvalidArgument, "dtype must be bf16 or f16");

  // A DSL error: the compiler's diagnostic, at file:line:col of the source as named.
  std::string text = kernels::find("causal")->text;
  size_t at = text.find("arith.cmpi ule");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 14, "arith.cmpi bogus");
  int line = 1 + std::count(text.begin(), text.begin() + at, '\n');
  spec = KernelSpec();
  spec.source = text;
  spec.sourceName = "user/causal_typo.mlir";
  spec.arch = "sm_90a";
  expect(spec, StatusCode::Compile, "user/causal_typo.mlir:" + std::to_string(line) + ":");
}

TEST(RuntimeApi, LaunchReportsUnavailableWithoutAGpu) {
  std::string why;
  if (cudaAvailable(&why))
    GTEST_SKIP() << "a GPU is here: the GPU tests cover launches";
  EXPECT_FALSE(why.empty());
  TempDir dir;
  Runtime runtime(optionsFor(dir));
  std::shared_ptr<const Kernel> kernel;
  ASSERT_TRUE(runtime.getKernel(causalSpec(), kernel).ok());
  // Valid arguments (arguments are checked first, GPU or not): never dereferenced.
  auto *fake = reinterpret_cast<void *>(uintptr_t(0x10000));
  Status s = kernel->launch(nullptr, fake, fake, fake, fake, static_cast<float *>(fake),
                            AttentionShape{1, 1, 1, 1, 1, 64});
  EXPECT_EQ(s.code(), StatusCode::Unavailable) << s.message();
  // Without an explicit arch and without a GPU, the default target.
  KernelSpec spec = causalSpec();
  spec.arch.clear();
  ASSERT_TRUE(runtime.getKernel(spec, kernel).ok());
  EXPECT_EQ(kernel->arch(), "sm_90a");
}

TEST(RuntimeApi, LaunchRefusesSizesTheKernelDoesNotDeclareBeforeTheDriver) {
  // kernels/gqa.mlir declares 8 query heads and 2 key/value heads. With H = 6 it used to run
  // and return wrong output; now the launch is refused, on any machine, before the driver.
  TempDir dir;
  Runtime runtime(optionsFor(dir));
  KernelSpec spec;
  spec.kernel = "gqa";
  spec.arch = "sm_90a";
  std::shared_ptr<const Kernel> kernel;
  Status got = runtime.getKernel(spec, kernel);
  ASSERT_TRUE(got.ok()) << got.message();
  EXPECT_NE(kernel->metadataJson().find("\"declared_sizes\""), std::string::npos)
      << kernel->metadataJson();
  auto *fake = reinterpret_cast<void *>(uintptr_t(0x10000)); // never dereferenced
  auto launch = [&](AttentionShape shape) {
    return kernel->launch(nullptr, fake, fake, fake, fake, static_cast<float *>(fake), shape);
  };
  struct {
    AttentionShape shape;
    const char *expected;
  } mismatches[] = {
      {{1, 6, 2, 128, 128, 64},
       "launch of 'gqa': Q dimension 1 (H) is 6 but the kernel declares 8"},
      {{1, 8, 4, 128, 128, 64}, "K dimension 1 (Hkv) is 4 but the kernel declares 2"},
      {{1, 8, 2, 128, 128, 128}, "Q dimension 3 (D) is 128 but the kernel declares 64"},
  };
  for (const auto &m : mismatches) {
    Status s = launch(m.shape);
    EXPECT_EQ(s.code(), StatusCode::InvalidArgument) << s.message();
    EXPECT_NE(s.message().find(m.expected), std::string::npos)
        << "message: " << s.message() << "\nexpected to contain: " << m.expected;
  }
  // As declared, only the GPU is missing (or, with one, the fake addresses would be launched).
  std::string why;
  if (!cudaAvailable(&why)) {
    Status s = launch({1, 8, 2, 128, 128, 64});
    EXPECT_EQ(s.code(), StatusCode::Unavailable) << s.message();
  }
}

/// tilefuse::referenceAttention: the kernel's float64 reference on strided host arrays (heads
/// interleaved, as PyTorch's B x S x H x D), against the same arrays made contiguous.
TEST(RuntimeApi, ReferenceAttentionOnStridedHostArrays) {
  KernelSpec spec;
  spec.kernel = "alibi";
  spec.headDim = 32;
  AttentionShape shape{2, 4, 2, 37, 51, 32};
  int64_t B = shape.B, H = shape.H, Hkv = shape.Hkv, M = shape.M, N = shape.N, D = shape.D;
  auto fill = [](std::vector<double> &v, double phase) {
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = std::sin(0.37 * double(i) + phase);
  };
  std::vector<double> q(B * H * M * D), k(B * Hkv * N * D), v(B * Hkv * N * D);
  fill(q, 0.1);
  fill(k, 0.7);
  fill(v, 1.3);
  std::vector<double> o(q.size()), lse(B * H * M);
  Status s = referenceAttention(spec, q.data(), k.data(), v.data(), o.data(), lse.data(), shape);
  ASSERT_TRUE(s.ok()) << s.message();

  // B x M x H x D storage (and LSE with padded rows), the same logical tensors.
  auto interleave = [](const std::vector<double> &x, int64_t b, int64_t h, int64_t l, int64_t d) {
    std::vector<double> y(x.size());
    for (int64_t i = 0; i < b; ++i)
      for (int64_t j = 0; j < h; ++j)
        for (int64_t r = 0; r < l; ++r)
          for (int64_t c = 0; c < d; ++c)
            y[((i * l + r) * h + j) * d + c] = x[((i * h + j) * l + r) * d + c];
    return y;
  };
  std::vector<double> qi = interleave(q, B, H, M, D), ki = interleave(k, B, Hkv, N, D),
                      vi = interleave(v, B, Hkv, N, D);
  std::vector<double> oi(o.size(), NAN), lsei(B * H * (M + 3), NAN);
  int64_t strides[14] = {M * H * D, D, H * D, N * Hkv * D, D, Hkv * D, N * Hkv * D, D,
                         Hkv * D, M * H * D, D, H * D, H * (M + 3), M + 3};
  s = referenceAttention(spec, qi.data(), ki.data(), vi.data(), oi.data(), lsei.data(), shape,
                         strides);
  ASSERT_TRUE(s.ok()) << s.message();
  std::vector<double> back = interleave(oi, B, M, H, D); // B x M x H -> B x H x M
  for (size_t i = 0; i < o.size(); ++i)
    ASSERT_EQ(back[i], o[i]) << i;
  for (int64_t bh = 0; bh < B * H; ++bh)
    for (int64_t r = 0; r < M; ++r)
      ASSERT_EQ(lsei[bh * (M + 3) + r], lse[bh * M + r]);
  EXPECT_TRUE(std::isnan(lsei[M])) << "padding between LSE rows is not written";

  spec.kernel = "gqa";
  spec.headDim = 0;
  s = referenceAttention(spec, q.data(), k.data(), v.data(), o.data(), lse.data(),
                         {1, 6, 2, 4, 4, 64});
  EXPECT_EQ(s.code(), StatusCode::InvalidArgument);
  EXPECT_NE(s.message().find("Q dimension 1 (H) is 6 but the kernel declares 8"),
            std::string::npos)
      << s.message();
}

TEST(RuntimeApi, ThreadsGetTheSameKernelCompiledOnce) {
  TempDir dir;
  Runtime runtime(optionsFor(dir));
  std::vector<std::shared_ptr<const Kernel>> kernels(6);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < kernels.size(); ++i)
    threads.emplace_back([&, i] {
      Status s = runtime.getKernel(causalSpec(), kernels[i]);
      EXPECT_TRUE(s.ok()) << s.message();
    });
  for (auto &t : threads)
    t.join();
  EXPECT_EQ(runtime.stats().compiles, 1u);
  for (auto &k : kernels)
    EXPECT_EQ(k->cacheKey(), kernels[0]->cacheKey());
}

//===----------------------------------------------------------------------===//
// ptxas search
//===----------------------------------------------------------------------===//

namespace {
/// An executable file at `path`.
void makeExecutable(const std::string &path) {
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    ASSERT_FALSE(ec);
    os << "#!/bin/sh\nexit 0\n";
  }
  llvm::sys::fs::setPermissions(path, llvm::sys::fs::all_read | llvm::sys::fs::all_exe |
                                          llvm::sys::fs::owner_write);
}
std::string errorOf(llvm::Expected<std::string> found) {
  if (found)
    return "found " + *found;
  return llvm::toString(found.takeError());
}
} // namespace

TEST(Ptxas, NotFoundAnywhereSaysWhatIsMissing) {
  runtime::PtxasSearch search; // PATH cleared, no CUDA_HOME / CUDA_PATH
  search.fallbackDirectories = {"/nonexistent/cuda/bin"};
  std::string message = errorOf(runtime::findPtxas(search));
  for (const char *part : {"no ptxas", "CUDA_HOME", "CUDA_PATH", "PATH (empty)",
                           "/nonexistent/cuda/bin", "TILEFUSE_PTXAS", "--emit cubin"})
    EXPECT_NE(message.find(part), std::string::npos) << part << " not in: " << message;
}

TEST(Ptxas, SearchOrder) {
  TempDir a, b, toolkit;
  std::string inA = a.str() + "/ptxas";
  makeExecutable(inA);
  llvm::sys::fs::create_directories(toolkit.str() + "/bin");
  std::string inToolkit = toolkit.str() + "/bin/ptxas";
  makeExecutable(inToolkit);

  runtime::PtxasSearch search;
  search.fallbackDirectories = {};
  search.path = b.str() + ":" + a.str();
  EXPECT_EQ(errorOf(runtime::findPtxas(search)), "found " + inA);
  // CUDA_HOME wins over PATH; an explicit file over everything.
  search.cudaHome = toolkit.str();
  EXPECT_EQ(errorOf(runtime::findPtxas(search)), "found " + inToolkit);
  search.explicitPath = inA;
  EXPECT_EQ(errorOf(runtime::findPtxas(search)), "found " + inA);
  // A chosen toolkit without ptxas is an error naming it, not a silent fallback to PATH.
  search.explicitPath.clear();
  search.cudaHome = b.str();
  std::string message = errorOf(runtime::findPtxas(search));
  EXPECT_NE(message.find("CUDA_HOME=" + b.str() + " has no bin/ptxas"), std::string::npos)
      << message;
  search.cudaHome.clear();
  search.cudaPath = b.str();
  message = errorOf(runtime::findPtxas(search));
  EXPECT_NE(message.find("CUDA_PATH="), std::string::npos) << message;
  search.cudaPath.clear();
  search.explicitPath = b.str() + "/missing";
  message = errorOf(runtime::findPtxas(search));
  EXPECT_NE(message.find("TILEFUSE_PTXAS"), std::string::npos) << message;
}

TEST(Ptxas, AssemblesWhereAToolkitIsInstalled) {
  auto ptxas = runtime::findPtxas();
  if (!ptxas) {
    std::string why = llvm::toString(ptxas.takeError());
    GTEST_SKIP() << why;
  }
  auto compiled = runtime::compileToPTX(kernels::find("causal")->text, "causal.mlir", {});
  ASSERT_TRUE(bool(compiled)) << llvm::toString(compiled.takeError());
  auto cubin = runtime::assembleCubin(*ptxas, compiled->ptx, "sm_90a");
  ASSERT_TRUE(bool(cubin)) << llvm::toString(cubin.takeError());
  EXPECT_EQ(cubin->substr(0, 4), "\x7f" "ELF");
  auto bad = runtime::assembleCubin(*ptxas, "this is not PTX", "sm_90a");
  ASSERT_FALSE(bool(bad));
  std::string message = llvm::toString(bad.takeError());
  EXPECT_NE(message.find("ptxas failed with exit code"), std::string::npos) << message;
}

//===----------------------------------------------------------------------===//
// AOT header text
//===----------------------------------------------------------------------===//

TEST(AotHeader, NamesTypesAndMetadata) {
  runtime::CompiledKernel k;
  k.name = "causal";
  k.dtype = "bf16";
  k.blockM = 64;
  k.blockN = 32;
  k.threads = 128;
  k.headDim = 128;
  k.sharedBytes = 0;
  k.declaredSizes.sizes[0] = {-1, 8, -1, 128}; // Q: H and D
  k.declaredSizes.sizes[1] = {-1, 2, -1, 128}; // K: Hkv and D
  runtime::AotHeaderOptions options;
  options.chip = "sm_90a";
  options.symbol = "causal_d128";
  options.sourceName = "kernels/causal.mlir";
  auto header = runtime::emitAotHeader(k, std::string("\x7f" "ELF\x01\x02", 6), options);
  ASSERT_TRUE(bool(header)) << llvm::toString(header.takeError());
  for (const char *part :
       {"CUresult causal_d128_launch(CUstream stream, const void *q, const void *k,",
        "const char *causal_d128_check(", "#define CAUSAL_D128_HEAD_DIM 128",
        "#define CAUSAL_D128_BLOCK_M 64", "#define CAUSAL_D128_THREADS 128",
        "#define CAUSAL_D128_ENTRY \"causal\"", "unsigned char bytes[6];",
        "0x7f,0x45,0x4c,0x46,0x01,0x02,", "#include <cuda.h>", "__atomic_compare_exchange_n",
        // The declared sizes, embedded and checked on the host with the ABI's names.
        "static const int64_t causal_d128_declared_sizes[5][4] = {\n"
        "  {-1, 8, -1, 128}, /* Q: B H M D */\n"
        "  {-1, 2, -1, 128}, /* K: B Hkv N D */\n"
        "  {-1, -1, -1, -1}, /* V: B Hkv N D */\n"
        "  {-1, -1, -1, -1}, /* O: B H M D */\n"
        "  {-1, -1, -1, -1}, /* LSE: B H M */\n"
        "};",
        "(causal_d128_declared_sizes: H = 8, D = 128, Hkv = 2)",
        "const int64_t given[5][4] = {{B, H, M, D}, {B, Hkv, N, D}, {B, Hkv, N, D}, "
        "{B, H, M, D}, {B, H, M, 0}};",
        "static const char *const tensors[5] = {\"Q\", \"K\", \"V\", \"O\", \"LSE\"};",
        "causal_d128_declared_size_mismatch_(t, i, given[t][i])"})
    EXPECT_NE(header->find(part), std::string::npos) << part;
  EXPECT_EQ(header->find("CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES"), std::string::npos)
      << "no opt-in below 48 KiB";
  EXPECT_EQ(header->find('@'), std::string::npos) << "a placeholder was left";

  k.sharedBytes = 100 * 1024;
  header = runtime::emitAotHeader(k, "x", options);
  ASSERT_TRUE(bool(header));
  EXPECT_NE(header->find("CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES"), std::string::npos);

  runtime::CompiledKernel inconsistent = k;
  inconsistent.declaredSizes.sizes[0][3] = 64;
  auto badHeadDim = runtime::emitAotHeader(inconsistent, "x", options);
  ASSERT_FALSE(bool(badHeadDim));
  EXPECT_NE(llvm::toString(badHeadDim.takeError()).find("declares head dim 64"), std::string::npos);

  options.symbol = "2bad";
  auto bad = runtime::emitAotHeader(k, "x", options);
  ASSERT_FALSE(bool(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("--name"), std::string::npos);
}

/// A TMA kernel (warp_specialize; "kv_tma"): its sidecar says so and reads back, and its
/// launcher encodes the tensor maps of k and v and passes them after every other parameter.
/// Without kv_tma, none of it.
TEST(AotHeader, TmaKernelsEncodeTheirTensorMaps) {
  runtime::CompiledKernel k;
  k.name = "attention";
  k.dtype = "bf16";
  k.blockM = 128;
  k.blockN = 128;
  k.threads = 384;
  k.headDim = 128;
  k.sharedBytes = 0;
  auto plain = runtime::emitAotHeader(k, "x", {});
  ASSERT_TRUE(bool(plain)) << llvm::toString(plain.takeError());
  EXPECT_EQ(plain->find("CUtensorMap"), std::string::npos);
  EXPECT_EQ(k.metadataJson().find("kv_tma"), std::string::npos);

  k.kvTma = true;
  std::string json = k.metadataJson();
  EXPECT_NE(json.find("\"kv_tma\": true"), std::string::npos) << json;
  auto back = runtime::CompiledKernel::fromMetadataJson(json, "");
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
  EXPECT_TRUE(back->kvTma);
  auto metadata = runtime::cuda::KernelMetadata::parse(json, "attention.json");
  ASSERT_TRUE(bool(metadata)) << llvm::toString(metadata.takeError());
  EXPECT_TRUE(metadata->kvTma);

  auto header = runtime::emitAotHeader(k, "x", {});
  ASSERT_TRUE(bool(header)) << llvm::toString(header.takeError());
  for (const char *part :
       {"#if CUDA_VERSION < 12000",
        "static inline CUresult attention_tensor_map_(CUtensorMap *map, const void *base,",
        "const cuuint64_t dims[4] = {ATTENTION_HEAD_DIM, (cuuint64_t)rows, (cuuint64_t)heads,\n"
        "                              (cuuint64_t)B};",
        "(cuuint64_t)strides[2] * ATTENTION_ELEMENT_BYTES,",
        "const cuuint32_t box[4] = {64, box_rows, 1, 1};",
        "return cuTensorMapEncodeTiled(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4,",
        "CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,",
        "CU_TENSOR_MAP_L2_PROMOTION_L2_256B,",
        "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE", "void *parameters[26];",
        "CUtensorMap maps[2] __attribute__((aligned(128)));",
        "const int64_t k_strides[3] = {s[3], s[3 + 1], s[3 + 2]};",
        "const int64_t v_strides[3] = {s[6], s[6 + 1], s[6 + 2]};",
        "result = attention_tensor_map_(&maps[0], k, B, Hkv, N, k_strides, ATTENTION_BLOCK_N);",
        "result = attention_tensor_map_(&maps[1], v, B, Hkv, N, v_strides, ATTENTION_BLOCK_N);",
        "parameters[24] = &maps[0];\n  parameters[25] = &maps[1];\n"})
    EXPECT_NE(header->find(part), std::string::npos) << part;
  EXPECT_EQ(header->find('@'), std::string::npos) << "a placeholder was left";
  EXPECT_EQ(header->find("q_strides"), std::string::npos);

  // Q loaded with TMA too ("q_tma"): a third map, Q's, with boxes of block_m rows, last.
  runtime::CompiledKernel query = k;
  query.qTma = true;
  json = query.metadataJson();
  EXPECT_NE(json.find("\"q_tma\": true"), std::string::npos) << json;
  back = runtime::CompiledKernel::fromMetadataJson(json, "");
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
  EXPECT_TRUE(back->qTma);
  metadata = runtime::cuda::KernelMetadata::parse(json, "attention.json");
  ASSERT_TRUE(bool(metadata)) << llvm::toString(metadata.takeError());
  EXPECT_TRUE(metadata->qTma);
  header = runtime::emitAotHeader(query, "x", {});
  ASSERT_TRUE(bool(header)) << llvm::toString(header.takeError());
  for (const char *part :
       {"void *parameters[27];", "CUtensorMap maps[3] __attribute__((aligned(128)));",
        "const int64_t q_strides[3] = {s[0], s[0 + 1], s[0 + 2]};",
        "result = attention_tensor_map_(&maps[2], q, B, H, M, q_strides, ATTENTION_BLOCK_M);",
        "parameters[26] = &maps[2];\n"})
    EXPECT_NE(header->find(part), std::string::npos) << part;
  // Packed (varlen), Q's map addresses the rows as K's and V's do: over a base M rows before q,
  // total_q + 1 batches of the row stride.
  runtime::CompiledKernel packedQuery = query;
  packedQuery.varlen = true;
  header = runtime::emitAotHeader(packedQuery, "x", {});
  ASSERT_TRUE(bool(header)) << llvm::toString(header.takeError());
  for (const char *part :
       {"const int64_t q_strides[3] = {s[0 + 2], s[0 + 1], s[0 + 2]};",
        "(uint64_t)(uintptr_t)q < (uint64_t)(M * s[0 + 2] * ATTENTION_ELEMENT_BYTES)",
        "result = attention_tensor_map_(&maps[2], (const char *)q - M * s[0 + 2] * "
        "ATTENTION_ELEMENT_BYTES, (total_q > 0 ? total_q : 0) + 1, H, M, q_strides, "
        "ATTENTION_BLOCK_M);"})
    EXPECT_NE(header->find(part), std::string::npos) << part << "\n" << *header;
  runtime::CompiledKernel packedOutput = packedQuery;
  packedOutput.oTma = true;
  auto refusedOutput = runtime::emitAotHeader(packedOutput, "x", {});
  ASSERT_FALSE(bool(refusedOutput));
  EXPECT_NE(llvm::toString(refusedOutput.takeError()).find("neither split nor varlen"),
            std::string::npos);

  // O stored with TMA too ("o_tma"): a fourth map, O's, over o with O's strides and boxes of
  // launch_abi::kOutputBoxRows rows, after Q's; only beside Q's, and not split.
  runtime::CompiledKernel output = query;
  output.oTma = true;
  json = output.metadataJson();
  EXPECT_NE(json.find("\"o_tma\": true"), std::string::npos) << json;
  EXPECT_EQ(query.metadataJson().find("o_tma"), std::string::npos);
  back = runtime::CompiledKernel::fromMetadataJson(json, "");
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
  EXPECT_TRUE(back->oTma && back->qTma);
  metadata = runtime::cuda::KernelMetadata::parse(json, "attention.json");
  ASSERT_TRUE(bool(metadata)) << llvm::toString(metadata.takeError());
  EXPECT_TRUE(metadata->oTma);
  header = runtime::emitAotHeader(output, "x", {});
  ASSERT_TRUE(bool(header)) << llvm::toString(header.takeError());
  for (const char *part :
       {"void *parameters[28];", "CUtensorMap maps[4] __attribute__((aligned(128)));",
        "the tensor maps of k and v (then q, then o), last.",
        "const int64_t o_strides[3] = {s[9], s[9 + 1], s[9 + 2]};",
        "result = attention_tensor_map_(&maps[3], o, B, H, M, o_strides, 64);",
        "parameters[26] = &maps[2];\n  parameters[27] = &maps[3];\n"})
    EXPECT_NE(header->find(part), std::string::npos) << part;
  EXPECT_EQ(header->find('@'), std::string::npos) << "a placeholder was left";
  runtime::CompiledKernel outputOnly = output;
  outputOnly.qTma = false;
  runtime::CompiledKernel splitOutput = output;
  splitOutput.splitKv = true;
  for (const runtime::CompiledKernel &bad : {outputOnly, splitOutput}) {
    auto refusedOutput = runtime::emitAotHeader(bad, "x", {});
    ASSERT_FALSE(bool(refusedOutput));
    EXPECT_NE(llvm::toString(refusedOutput.takeError()).find("stores O with TMA"),
              std::string::npos);
  }

  // Split: the maps after the split parameters; f16 maps for f16 kernels.
  k.splitKv = true;
  k.dtype = "f16";
  header = runtime::emitAotHeader(k, "x", {});
  ASSERT_TRUE(bool(header)) << llvm::toString(header.takeError());
  for (const char *part :
       {"void *parameters[30];", "parameters[27] = &splits;",
        "parameters[28] = &maps[0];\n  parameters[29] = &maps[1];\n",
        "CU_TENSOR_MAP_DATA_TYPE_FLOAT16"})
    EXPECT_NE(header->find(part), std::string::npos) << part;

  // Varlen: a packed row through two dimensions of the row stride, over a base N rows before
  // the tensor's (LaunchAbi.h).
  runtime::CompiledKernel packed = k;
  packed.splitKv = false;
  packed.varlen = true;
  header = runtime::emitAotHeader(packed, "x", {});
  ASSERT_TRUE(bool(header)) << llvm::toString(header.takeError());
  for (const char *part :
       {"const int64_t k_strides[3] = {s[3 + 2], s[3 + 1], s[3 + 2]};",
        "if ((uint64_t)(uintptr_t)k < (uint64_t)(N * s[3 + 2] * ATTENTION_ELEMENT_BYTES) ||",
        "result = attention_tensor_map_(&maps[0], (const char *)k - N * s[3 + 2] * "
        "ATTENTION_ELEMENT_BYTES, (total_k > 0 ? total_k : 0) + 1, Hkv, N, k_strides, "
        "ATTENTION_BLOCK_N);",
        "result = attention_tensor_map_(&maps[1], (const char *)v - N * s[6 + 2] * "
        "ATTENTION_ELEMENT_BYTES, (total_k > 0 ? total_k : 0) + 1, Hkv, N, v_strides, "
        "ATTENTION_BLOCK_N);"})
    EXPECT_NE(header->find(part), std::string::npos) << part;

  // What a tensor map cannot take is refused when the header is written.
  runtime::CompiledKernel paged = k;
  paged.pagedKv = true;
  auto refused = runtime::emitAotHeader(paged, "x", {});
  ASSERT_FALSE(bool(refused));
  EXPECT_NE(llvm::toString(refused.takeError()).find("a TMA kernel (warp_specialize) is not paged"),
            std::string::npos);
  runtime::CompiledKernel wide = k;
  wide.blockN = 512;
  refused = runtime::emitAotHeader(wide, "x", {});
  ASSERT_FALSE(bool(refused));
  EXPECT_NE(llvm::toString(refused.takeError()).find("block_n 512"), std::string::npos);
}

/// The backward's header (emitBackwardAotHeader): the three kernels of one module, each with the
/// launch metadata of its phase baked in, launched in order with the backward ABI's parameters;
/// the workspace the caller's. Phases out of order or disagreeing are refused.
TEST(AotHeader, BackwardLaunchesItsThreeKernels) {
  std::vector<runtime::CompiledKernel> phases;
  for (launch_abi::BackwardPhase phase : launch_abi::kBackwardPhases) {
    runtime::CompiledKernel k;
    k.backwardPhase = launch_abi::backwardPhaseName(phase);
    k.name = "causal_backward_" + k.backwardPhase;
    k.dtype = "bf16";
    k.blockM = 64;
    k.blockN = 32;
    k.threads = phase == launch_abi::BackwardPhase::KeyGradients ? 256 : 128;
    k.headDim = 64;
    k.sharedBytes = phase == launch_abi::BackwardPhase::KeyGradients ? 100 * 1024 : 0;
    k.declaredSizes.sizes[0] = {-1, 8, -1, 64}; // Q: H and D
    phases.push_back(k);
  }
  runtime::AotHeaderOptions options;
  options.chip = "sm_90a";
  auto header = runtime::emitBackwardAotHeader(phases, std::string("\x7f" "ELF", 4), options);
  ASSERT_TRUE(bool(header)) << llvm::toString(header.takeError());
  for (const char *part :
       {"#ifndef TILEFUSE_AOT_CAUSAL_BACKWARD_H", "#define CAUSAL_BACKWARD_FORWARD \"causal\"",
        "#define CAUSAL_BACKWARD_DETERMINISTIC 0", "#define CAUSAL_BACKWARD_PHASE_COUNT 3",
        "#define CAUSAL_BACKWARD_PREPROCESS_ENTRY \"causal_backward_preprocess\"",
        "#define CAUSAL_BACKWARD_KEY_GRADIENTS_THREADS 256",
        "#define CAUSAL_BACKWARD_KEY_GRADIENTS_SHARED_BYTES 102400",
        "#define CAUSAL_BACKWARD_QUERY_GRADIENTS_BLOCK_M 64",
        "#define CAUSAL_BACKWARD_QUERY_GRADIENTS_THREADS 128",
        // The grids: key_gradients over key blocks of block_n, the others over row blocks.
        "{CAUSAL_BACKWARD_PREPROCESS_ENTRY, 0, CAUSAL_BACKWARD_PREPROCESS_BLOCK_M,",
        "{CAUSAL_BACKWARD_KEY_GRADIENTS_ENTRY, 1, CAUSAL_BACKWARD_KEY_GRADIENTS_BLOCK_N,",
        "causal_backward_grid_(phase, B, H, Hkv, M, N, grid);",
        // Only the phase over 48 KiB opts in.
        "cuFuncSetAttribute(functions[1], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,\n"
        "                                CAUSAL_BACKWARD_KEY_GRADIENTS_SHARED_BYTES);",
        "static inline size_t causal_backward_workspace_bytes(int64_t B, int64_t H, int64_t M) {",
        "static inline CUresult causal_backward_launch(CUstream stream, const void *q,",
        "int64_t N, const int64_t strides[26],\n", "void *workspace) {", "void *parameters[47];",
        // The public stride order into the kernels': LSE's after dO's.
        "s[15] = strides[12]; /* lse_b */", "s[12] = strides[14]; /* do_b */",
        "pointers[10] = (CUdeviceptr)(uintptr_t)workspace + "
        "causal_backward_accumulator_offset_(B, H, M);",
        "(causal_backward_declared_sizes: H = 8, D = 64)",
        "return \"the q, o, d_o and d_q strides must be even",
        "if (workspace == NULL || (uintptr_t)workspace % 256 != 0)"})
    EXPECT_NE(header->find(part), std::string::npos) << part;
  EXPECT_EQ(header->find("functions[0], CU_FUNC_ATTRIBUTE"), std::string::npos);
  EXPECT_EQ(header->find('@'), std::string::npos) << "a placeholder was left";

  // Deterministic: no dQ accumulator; --name's prefix.
  std::vector<runtime::CompiledKernel> ordered = phases;
  for (runtime::CompiledKernel &k : ordered)
    k.deterministic = true;
  options.symbol = "attn";
  header = runtime::emitBackwardAotHeader(ordered, "x", options);
  ASSERT_TRUE(bool(header)) << llvm::toString(header.takeError());
  for (const char *part : {"#define ATTN_BACKWARD_DETERMINISTIC 1", "pointers[10] = 0;",
                           "return attn_backward_accumulator_offset_(B, H, M); /* no dQ "
                           "accumulator */",
                           "#define ATTN_BACKWARD_PREPROCESS_ENTRY \"causal_backward_preprocess\""})
    EXPECT_NE(header->find(part), std::string::npos) << part;

  auto refusal = [&](std::vector<runtime::CompiledKernel> bad) {
    auto result = runtime::emitBackwardAotHeader(bad, "x", {});
    EXPECT_FALSE(bool(result));
    return result ? std::string() : llvm::toString(result.takeError());
  };
  EXPECT_NE(refusal({phases[0], phases[1]}).find("has 3 kernels, not 2"), std::string::npos);
  EXPECT_NE(refusal({phases[0], phases[2], phases[1]}).find("where 'key_gradients' is launched"),
            std::string::npos);
  std::vector<runtime::CompiledKernel> mixed = phases;
  mixed[2].deterministic = true;
  EXPECT_NE(refusal(mixed).find("disagree"), std::string::npos);
  std::vector<runtime::CompiledKernel> renamed = phases;
  renamed[1].name = "other_backward_key_gradients";
  EXPECT_NE(refusal(renamed).find("not 'causal_backward_key_gradients'"), std::string::npos);
  std::vector<runtime::CompiledKernel> forward = phases;
  forward[0].name = "causal";
  EXPECT_NE(refusal(forward).find("is not named NAME_backward_preprocess"), std::string::npos);
  options.symbol = "2bad";
  auto badName = runtime::emitBackwardAotHeader(phases, "x", options);
  ASSERT_FALSE(bool(badName));
  EXPECT_NE(llvm::toString(badName.takeError()).find("--name"), std::string::npos);
}

/// The host pair (forward and derived backward on the CPU): compiled once per spec, the
/// deterministic flag a distinct pair; strided arrays give bit for bit what contiguous ones do;
/// both dQ schemes agree to f32 rounding; shapes the kernel does not declare are refused.
TEST(RuntimeApi, HostAttentionForwardAndBackward) {
  TempDir dir;
  Runtime runtime(optionsFor(dir));
  KernelSpec spec;
  spec.kernel = "causal";
  spec.dtype = "f32";
  spec.headDim = 16;
  spec.blockM = 16;
  spec.blockN = 32;
  std::shared_ptr<const HostAttention> atomic, again, ordered;
  Status s = runtime.getHostAttention(spec, atomic);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_TRUE(runtime.getHostAttention(spec, again).ok());
  EXPECT_EQ(atomic.get(), again.get());
  spec.deterministic = true;
  ASSERT_TRUE(runtime.getHostAttention(spec, ordered).ok());
  EXPECT_NE(atomic.get(), ordered.get());
  EXPECT_TRUE(ordered->deterministic());
  EXPECT_FALSE(atomic->deterministic());
  EXPECT_EQ(atomic->name(), "causal");
  EXPECT_EQ(atomic->dtype(), "f32");
  EXPECT_EQ(atomic->headDim(), 16);

  AttentionShape shape{2, 4, 2, 29, 41, 16};
  size_t nq = shape.B * shape.H * shape.M * shape.D, nk = shape.B * shape.Hkv * shape.N * shape.D;
  std::vector<float> q(nq), k(nk), v(nk), dO(nq), o(nq), lse(shape.B * shape.H * shape.M);
  for (size_t i = 0; i < nq; ++i) {
    q[i] = std::sin(0.37 * i);
    dO[i] = std::cos(0.11 * i);
  }
  for (size_t i = 0; i < nk; ++i) {
    k[i] = std::cos(0.23 * i);
    v[i] = std::sin(0.05 * i + 1);
  }
  ASSERT_TRUE(atomic->forward(q.data(), k.data(), v.data(), o.data(), lse.data(), shape).ok());
  std::vector<float> dq(nq), dk(nk), dv(nk), dq2(nq), dk2(nk), dv2(nk);
  s = atomic->backward(q.data(), k.data(), v.data(), o.data(), dO.data(), lse.data(), dq.data(),
                       dk.data(), dv.data(), shape);
  ASSERT_TRUE(s.ok()) << s.message();
  s = ordered->backward(q.data(), k.data(), v.data(), o.data(), dO.data(), lse.data(), dq2.data(),
                        dk2.data(), dv2.data(), shape);
  ASSERT_TRUE(s.ok()) << s.message();
  for (size_t i = 0; i < nq; ++i)
    ASSERT_NEAR(dq[i], dq2[i], 1e-5 * (1 + std::abs(dq[i]))) << i;
  EXPECT_EQ(dk, dk2); // the dK/dV grid is the same in both schemes
  EXPECT_EQ(dv, dv2);

  // dQ with padded rows: 26 strides; the padding is never written.
  const int64_t pitch = shape.D + 3;
  std::vector<float> dqPadded(shape.B * shape.H * shape.M * pitch, 7.0f);
  int64_t st[26] = {shape.H * shape.M * shape.D, shape.M * shape.D, shape.D,
                    shape.Hkv * shape.N * shape.D, shape.N * shape.D, shape.D,
                    shape.Hkv * shape.N * shape.D, shape.N * shape.D, shape.D,
                    shape.H * shape.M * shape.D, shape.M * shape.D, shape.D,
                    shape.H * shape.M, shape.M,
                    shape.H * shape.M * shape.D, shape.M * shape.D, shape.D,
                    shape.H * shape.M * pitch, shape.M * pitch, pitch,
                    shape.Hkv * shape.N * shape.D, shape.N * shape.D, shape.D,
                    shape.Hkv * shape.N * shape.D, shape.N * shape.D, shape.D};
  s = atomic->backward(q.data(), k.data(), v.data(), o.data(), dO.data(), lse.data(),
                       dqPadded.data(), dk2.data(), dv2.data(), shape, st);
  ASSERT_TRUE(s.ok()) << s.message();
  for (int64_t row = 0; row < shape.B * shape.H * shape.M; ++row)
    for (int64_t d = 0; d < pitch; ++d)
      ASSERT_EQ(dqPadded[row * pitch + d], d < shape.D ? dq[row * shape.D + d] : 7.0f);

  // gqa declares 8 query heads.
  spec.kernel = "gqa";
  std::shared_ptr<const HostAttention> gqa;
  ASSERT_TRUE(runtime.getHostAttention(spec, gqa).ok());
  s = gqa->backward(q.data(), k.data(), v.data(), o.data(), dO.data(), lse.data(), dq.data(),
                    dk.data(), dv.data(), shape);
  EXPECT_EQ(s.code(), StatusCode::InvalidArgument);
  EXPECT_NE(s.message().find("was written for 8"), std::string::npos) << s.message();
  spec.dtype = "f64";
  EXPECT_EQ(runtime.getHostAttention(spec, gqa).code(), StatusCode::InvalidArgument);
}

// The GPU backward through the public API: compiled once per spec (the deterministic one apart),
// three kernels in one module; arguments it does not take are InvalidArgument; without a GPU a
// launch is an error, not a crash.
TEST(RuntimeApi, GetsTheGpuBackward) {
  TempDir dir;
  Runtime runtime(optionsFor(dir));
  KernelSpec spec = causalSpec();
  std::shared_ptr<const Backward> backward, again, deterministic;
  Status s = runtime.getBackward(spec, backward);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(backward->name(), "causal");
  EXPECT_EQ(backward->dtype(), "bf16");
  EXPECT_FALSE(backward->deterministic());
  for (const char *phase : {"preprocess", "key_gradients", "query_gradients"})
    EXPECT_NE(backward->ptx().find(std::string(".entry causal_backward_") + phase),
              std::string::npos)
        << phase;
  ASSERT_TRUE(runtime.getBackward(spec, again).ok());
  EXPECT_EQ(again, backward);
  // Another runtime on the same directory: from the disk cache.
  Runtime other(optionsFor(dir));
  std::shared_ptr<const Backward> fromDisk;
  ASSERT_TRUE(other.getBackward(spec, fromDisk).ok());
  EXPECT_EQ(other.stats().diskHits, 1u);
  EXPECT_EQ(other.stats().compiles, 0u);
  EXPECT_EQ(fromDisk->ptx(), backward->ptx());
  spec.deterministic = true;
  ASSERT_TRUE(runtime.getBackward(spec, deterministic).ok());
  EXPECT_NE(deterministic, backward);
  EXPECT_TRUE(deterministic->deterministic());
  // Above head dim 64 on sm_90a the ordered dQ loop is the faster schedule, and the default:
  // the backward is deterministic without being asked.
  KernelSpec wide = causalSpec();
  wide.headDim = 128;
  std::shared_ptr<const Backward> ordered;
  ASSERT_TRUE(runtime.getBackward(wide, ordered).ok());
  EXPECT_TRUE(ordered->deterministic());

  KernelSpec split = causalSpec();
  split.splitKv = true;
  EXPECT_EQ(runtime.getBackward(split, again).code(), StatusCode::InvalidArgument);
  KernelSpec blocks = causalSpec();
  blocks.blockM = 64;
  blocks.blockN = 32;
  EXPECT_EQ(runtime.getBackward(blocks, again).code(), StatusCode::Compile);
  // The configuration: mma is the backward's; a forward-only field is named, not dropped.
  KernelSpec sync = causalSpec();
  sync.config = "mma=sync";
  std::shared_ptr<const Backward> withSync;
  ASSERT_TRUE(runtime.getBackward(sync, withSync).ok());
  EXPECT_NE(withSync, backward);
  EXPECT_EQ(withSync->ptx().find("wgmma"), std::string::npos);
  KernelSpec forwardOnly = causalSpec();
  forwardOnly.config = "stages=3";
  s = runtime.getBackward(forwardOnly, again);
  EXPECT_EQ(s.code(), StatusCode::Compile);
  EXPECT_NE(s.message().find("stages=3 configures the forward kernel"), std::string::npos)
      << s.message();
  forwardOnly.config = "Br=x";
  EXPECT_EQ(runtime.getBackward(forwardOnly, again).code(), StatusCode::InvalidArgument);
  if (!cudaAvailable()) {
    auto *fake = reinterpret_cast<void *>(uintptr_t(0x10000));
    s = backward->launch(nullptr, fake, fake, fake, fake, fake, static_cast<float *>(fake), fake,
                         fake, fake, AttentionShape{1, 1, 1, 64, 64, 64});
    EXPECT_EQ(s.code(), StatusCode::Unavailable) << s.message();
  }
}
