//===- Float64ReferenceTest.cpp - the reference derived from the DSL ------===//
//
// The float64 reference of a kernel is its own written form evaluated naively
// (tile-to-f64-reference). These tests check the reference itself against the tests' hand-written
// semantics (naiveAttention, independent of the DSL and the compiler), then use it on two
// variants that exist only in the tests (test/variants/), and check its AOT form (an object in a
// shared library, as the GPU tests load it) and its errors.
//
//===----------------------------------------------------------------------===//
#include "FileTestUtil.h"
#include "TestUtil.h"

#include "tilefuse/kernels/Registry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace tilefuse;
using namespace tilefuse::runtime;

namespace {

/// The tests' own statement of what each variant means.
test::Semantics semanticsOf(const std::string &name, int64_t H) {
  test::Semantics s;
  auto causal = [](int64_t, int64_t, int64_t q, int64_t kv) { return kv <= q; };
  if (name == "causal")
    s.mask = causal;
  else if (name == "sliding_window")
    s.mask = [](int64_t, int64_t, int64_t q, int64_t kv) { return kv + 100 >= q && kv <= q + 20; };
  else if (name == "prefix_lm")
    s.mask = [](int64_t, int64_t, int64_t q, int64_t kv) { return kv < 100 || kv <= q; };
  else if (name == "alibi") {
    s.mask = causal;
    s.scoreMod = [H](double x, int64_t, int64_t h, int64_t q, int64_t kv) {
      return x + std::exp2(-8.0 * double(h + 1) / double(H)) * double(kv - q);
    };
  } else if (name == "softcap") {
    s.scoreMod = [](double x, int64_t, int64_t, int64_t, int64_t) {
      return 30.0 * std::tanh(x / 30.0);
    };
  } else if (name == "chunked_local") {
    s.mask = [](int64_t, int64_t, int64_t q, int64_t kv) { return kv <= q && q / 384 == kv / 384; };
  } else if (name == "softcap_head_bias") {
    s.scoreMod = [](double x, int64_t, int64_t h, int64_t, int64_t) {
      // The constants are f32 in the DSL: 20 and -0.25 are exact.
      return 20.0 * std::tanh(x / 20.0) - 0.25 * double(h);
    };
  }
  return s;
}

struct Outputs {
  std::vector<double> o, lse;
};

/// Runs `reference` on random inputs of `p`; with `semantics`, also the naive attention.
void runBoth(const ReferenceKernel &reference, const test::Semantics *semantics,
             const reference::Problem &p, unsigned seed, Outputs &got, Outputs &want) {
  std::mt19937 rng(seed);
  auto draw = [&](size_t n) {
    auto f = reference::randomNormal(n, rng);
    return std::vector<double>(f.begin(), f.end());
  };
  std::vector<double> q = draw(p.B * p.H * p.M * p.D), k = draw(p.B * p.Hkv * p.N * p.D),
                      v = draw(p.B * p.Hkv * p.N * p.D);
  got.o.assign(q.size(), NAN);
  got.lse.assign(p.B * p.H * p.M, NAN);
  llvm::Error e = reference.run(HostView::contiguous(q.data(), {p.B, p.H, p.M, p.D}),
                                HostView::contiguous(k.data(), {p.B, p.Hkv, p.N, p.D}),
                                HostView::contiguous(v.data(), {p.B, p.Hkv, p.N, p.D}),
                                HostView::contiguous(got.o.data(), {p.B, p.H, p.M, p.D}),
                                HostView::contiguous(got.lse.data(), {p.B, p.H, p.M, 0}, 3));
  ASSERT_FALSE(static_cast<bool>(e)) << llvm::toString(std::move(e));
  if (semantics)
    test::naiveAttention(p, *semantics, q, k, v, want.o, want.lse);
}

/// max |a - b| / (1 + |b|), with -inf matching -inf only.
double maxError(const std::vector<double> &a, const std::vector<double> &b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isinf(b[i]) || std::isinf(a[i])) {
      if (a[i] != b[i])
        return INFINITY;
      continue;
    }
    worst = std::max(worst, std::abs(a[i] - b[i]) / (1 + std::abs(b[i])));
  }
  return worst;
}

class DerivedReference : public testing::TestWithParam<std::string> {};

/// The reference derived from each kernel's text agrees with the hand-written semantics to
/// float64 rounding, at lengths off any block size, M != N both ways, with fully masked rows
/// (sliding_window with M > N + 100).
TEST_P(DerivedReference, MatchesHandWrittenSemantics) {
  const std::string &name = GetParam();
  bool bundled = kernels::find(name) != nullptr;
  auto reference = bundled ? test::compileBundledReference(name)
                           : test::compileReference(test::readTestVariant(name), name + ".mlir");
  ASSERT_TRUE(reference);
  int64_t H = reference->declaredSizes().sizes[0][1];
  int64_t Hkv = reference->declaredSizes().sizes[1][1];
  for (auto [M, N] : {std::pair<int64_t, int64_t>{1, 1}, {37, 300}, {300, 37}, {777, 800}}) {
    reference::Problem p;
    p.B = 2;
    p.H = H > 0 ? H : 3;
    p.Hkv = Hkv > 0 ? Hkv : (name == "attention" ? 1 : p.H);
    p.M = M;
    p.N = N;
    p.D = reference->headDim();
    test::Semantics semantics = semanticsOf(name, p.H);
    Outputs got, want;
    runBoth(*reference, &semantics, p, unsigned(M * 31 + N), got, want);
    SCOPED_TRACE(testing::Message() << name << " M=" << M << " N=" << N);
    EXPECT_LE(maxError(got.o, want.o), 1e-12);
    EXPECT_LE(maxError(got.lse, want.lse), 1e-12);
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, DerivedReference,
                         testing::Values("attention", "causal", "sliding_window", "alibi",
                                         "softcap", "prefix_lm", "gqa", "mqa", "chunked_local",
                                         "softcap_head_bias"));

/// Fully masked rows: probabilities zero, so O = 0 and LSE = -inf (no NaN).
TEST(DerivedReferenceRows, FullyMaskedRowsAreZeroWithMinusInfinity) {
  auto reference = test::compileBundledReference("sliding_window");
  ASSERT_TRUE(reference);
  reference::Problem p{1, 2, 2, 300, 50, 64};
  Outputs got, want;
  runBoth(*reference, nullptr, p, 3, got, want);
  int64_t masked = 0;
  for (int64_t row = 0; row < p.B * p.H * p.M; ++row) {
    int64_t i = row % p.M;
    bool empty = i > p.N - 1 + 100; // the window reaches back 100 keys
    ASSERT_EQ(std::isinf(got.lse[row]), empty) << "row " << i;
    if (!empty)
      continue;
    ++masked;
    EXPECT_LT(got.lse[row], 0);
    for (int64_t d = 0; d < p.D; ++d)
      ASSERT_EQ(got.o[row * p.D + d], 0.0);
  }
  EXPECT_GT(masked, 0);
}

/// The kernel declares gqa's heads (8 and 2): another count is refused, naming the dimension.
TEST(DerivedReferenceRows, DeclaredSizesAreChecked) {
  auto reference = test::compileBundledReference("gqa");
  ASSERT_TRUE(reference);
  std::vector<double> q(6 * 5 * 64), kv(2 * 5 * 64), o(q.size()), lse(6 * 5);
  llvm::Error e = reference->run(HostView::contiguous(q.data(), {1, 6, 5, 64}),
                                 HostView::contiguous(kv.data(), {1, 2, 5, 64}),
                                 HostView::contiguous(kv.data(), {1, 2, 5, 64}),
                                 HostView::contiguous(o.data(), {1, 6, 5, 64}),
                                 HostView::contiguous(lse.data(), {1, 6, 5, 0}, 3));
  ASSERT_TRUE(static_cast<bool>(e));
  std::string message = llvm::toString(std::move(e));
  EXPECT_NE(message.find("Q dimension 1 (H) is 6 but the kernel declares 8"), std::string::npos)
      << message;
}

/// A kernel outside the written form gets a located error, not a reference.
TEST(DerivedReferenceRows, NoReferenceOutsideTheWrittenForm) {
  std::string text = kernels::find("softcap")->text;
  size_t at = text.find("%th = math.tanh %x : f32");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, std::string("%th = math.tanh %x : f32").size(),
               "%xi = arith.bitcast %x : f32 to i32\n    %th = arith.bitcast %xi : i32 to f32");
  auto reference = ReferenceKernel::compile(text, "bits.mlir", ReferenceOptions());
  ASSERT_FALSE(static_cast<bool>(reference));
  std::string message = llvm::toString(reference.takeError());
  EXPECT_NE(message.find("bits.mlir:"), std::string::npos) << message;
  EXPECT_NE(message.find("cannot be evaluated in f64"), std::string::npos) << message;
}

/// The test-only variants through the whole CPU backend (front end, tiling, online softmax,
/// pruning) against their derived reference, in every storage type and on the baseline CPU.
struct VariantCase {
  std::string variant, dtype, cpuTarget;
};

class TestOnlyVariant : public testing::TestWithParam<VariantCase> {};

TEST_P(TestOnlyVariant, CpuBackendMatchesDerivedReference) {
  const VariantCase &c = GetParam();
  std::string text = test::readTestVariant(c.variant);
  CpuCompileOptions opts;
  opts.blockM = 64;
  opts.blockN = 32;
  opts.elementType = c.dtype;
  opts.cpuTarget = c.cpuTarget;
  auto kernel = CpuKernel::compile(text, c.variant + ".mlir", opts);
  ASSERT_TRUE(static_cast<bool>(kernel)) << llvm::toString(kernel.takeError());
  auto reference = test::compileReference(text, c.variant + ".mlir");
  ASSERT_TRUE(reference);
  double bound = c.dtype == "f32" ? 5e-6 : c.dtype == "f16" ? 1e-3 : 8e-3;
  unsigned seed = 1;
  for (auto [M, N] : {std::pair<int64_t, int64_t>{1, 1}, {17, 17}, {1000, 1000}, {777, 401},
                      {100, 900}}) {
    reference::Problem p{2, 3, 3, M, N, (*kernel)->headDim()};
    test::RunResult r = test::runAgainstReference(**kernel, *reference, p, seed++);
    SCOPED_TRACE(testing::Message() << c.variant << " " << c.dtype << " M=" << M << " N=" << N);
    EXPECT_TRUE(r.allWritten);
    EXPECT_TRUE(r.lseInfMatches);
    EXPECT_LE(r.outError, bound);
    EXPECT_LE(r.lseError, 1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Variants, TestOnlyVariant,
    testing::Values(VariantCase{"chunked_local", "bf16", "host"},
                    VariantCase{"chunked_local", "f16", "baseline"},
                    VariantCase{"chunked_local", "f32", "host"},
                    VariantCase{"softcap_head_bias", "bf16", "baseline"},
                    VariantCase{"softcap_head_bias", "f16", "host"},
                    VariantCase{"softcap_head_bias", "f32", "baseline"}),
    [](const testing::TestParamInfo<VariantCase> &info) {
      return info.param.variant + "_" + info.param.dtype + "_" + info.param.cpuTarget;
    });

/// The ahead-of-time form, as the GPU tests use it: an object for the baseline CPU, linked into
/// a shared library by the system's C compiler, loaded without MLIR, gives what the JIT gives.
TEST(DerivedReferenceObject, SharedLibraryMatchesTheJit) {
  auto cc = llvm::sys::findProgramByName("cc");
  if (!cc)
    GTEST_SKIP() << "no C compiler (cc) to link the shared library";
  const kernels::KernelSource *src = kernels::find("alibi");
  ReferenceOptions options;
  options.headDim = 32;
  std::string name;
  auto object = compileReferenceObject(src->text, src->fileName, options, &name);
  ASSERT_TRUE(static_cast<bool>(object)) << llvm::toString(object.takeError());
  EXPECT_EQ(name, "alibi");

  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("tilefuse-reference", dir));
  std::string libraryPath =
      test::linkSharedLibrary(*cc, dir.str().str(), "alibi.reference", *object);
  ASSERT_FALSE(libraryPath.empty());
  auto library = reference::ReferenceLibrary::load(libraryPath, "alibi");
  ASSERT_TRUE(static_cast<bool>(library)) << llvm::toString(library.takeError());

  auto jit = test::compileReference(src->text, src->fileName, 32);
  ASSERT_TRUE(jit);
  reference::Problem p{1, 4, 4, 129, 200, 32};
  std::mt19937 rng(9);
  auto draw = [&](int64_t n) {
    auto f = reference::randomNormal(n, rng);
    return std::vector<double>(f.begin(), f.end());
  };
  std::vector<double> q = draw(p.B * p.H * p.M * p.D), k = draw(p.B * p.Hkv * p.N * p.D),
                      v = draw(p.B * p.Hkv * p.N * p.D);
  std::vector<double> o1(q.size()), o2(q.size()), l1(p.B * p.H * p.M), l2(l1.size());
  auto views = [&](std::vector<double> &o, std::vector<double> &l) {
    return std::array<HostView, 5>{HostView::contiguous(q.data(), {p.B, p.H, p.M, p.D}),
                                   HostView::contiguous(k.data(), {p.B, p.Hkv, p.N, p.D}),
                                   HostView::contiguous(v.data(), {p.B, p.Hkv, p.N, p.D}),
                                   HostView::contiguous(o.data(), {p.B, p.H, p.M, p.D}),
                                   HostView::contiguous(l.data(), {p.B, p.H, p.M, 0}, 3)};
  };
  auto a = views(o1, l1), b = views(o2, l2);
  llvm::Error e1 = (*library)->run(a[0], a[1], a[2], a[3], a[4]);
  ASSERT_FALSE(static_cast<bool>(e1)) << llvm::toString(std::move(e1));
  llvm::Error e2 = jit->run(b[0], b[1], b[2], b[3], b[4]);
  ASSERT_FALSE(static_cast<bool>(e2)) << llvm::toString(std::move(e2));
  EXPECT_LE(maxError(o1, o2), 1e-13);
  EXPECT_LE(maxError(l1, l2), 1e-13);

  // Another kernel's name: its entry point is not in this library.
  auto other = reference::ReferenceLibrary::load(libraryPath, "causal");
  ASSERT_FALSE(static_cast<bool>(other));
  std::string message = llvm::toString(other.takeError());
  EXPECT_NE(message.find("_mlir_ciface_causal_reference"), std::string::npos) << message;
  llvm::sys::fs::remove_directories(dir);
}

} // namespace
