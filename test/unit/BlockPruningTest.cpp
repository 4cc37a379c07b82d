//===- BlockPruningTest.cpp - blocks visited equal the non-empty blocks ---===//
//
// With instrumentation, the CPU backend counts the key/value blocks that ran, split into full
// (no mask arithmetic) and partial (mask applied). A brute-force count over the test's own statement of each mask
// gives what they must be: every non-empty block visited exactly once, and exactly the blocks with
// some masked element (the key bound N included) applying the mask.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include "tilefuse/kernels/Registry.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace tilefuse;
using namespace tilefuse::runtime;

namespace {

struct Expected {
  int64_t full = 0, partial = 0, total = 0;
};

/// Classifies every (row block, column block) of one (b, h) by brute force. Rows run over the
/// whole block (the interval the pass evaluates); columns at or past N count as masked.
Expected bruteForce(const test::Semantics &v, int64_t M, int64_t N, int64_t br, int64_t bc,
                    int64_t programs) {
  Expected e;
  int64_t rowBlocks = (M + br - 1) / br, colBlocks = (N + bc - 1) / bc;
  for (int64_t rb = 0; rb < rowBlocks; ++rb)
    for (int64_t cb = 0; cb < colBlocks; ++cb) {
      int64_t kept = 0, all = br * bc;
      for (int64_t i = rb * br; i < (rb + 1) * br; ++i)
        for (int64_t j = cb * bc; j < (cb + 1) * bc; ++j)
          kept += (j < N && (!v.mask || v.mask(0, 0, i, j))) ? 1 : 0;
      e.total++;
      if (kept == all)
        e.full++;
      else if (kept > 0)
        e.partial++;
    }
  e.full *= programs;
  e.partial *= programs;
  e.total *= programs;
  return e;
}

/// The masks of the bundled kernels, as this test states them (to count blocks by brute force).
test::Semantics maskOf(const std::string &kernel) {
  test::Semantics s;
  if (kernel == "causal")
    s.mask = [](int64_t, int64_t, int64_t q, int64_t kv) { return kv <= q; };
  else if (kernel == "sliding_window")
    s.mask = [](int64_t, int64_t, int64_t q, int64_t kv) { return kv + 100 >= q && kv <= q + 20; };
  else if (kernel == "prefix_lm")
    s.mask = [](int64_t, int64_t, int64_t q, int64_t kv) { return kv < 100 || kv <= q; };
  return s;
}

struct PruneCase {
  std::string kernel;
  int64_t M, N, br, bc;
};

class BlockPruning : public testing::TestWithParam<PruneCase> {};

TEST_P(BlockPruning, VisitsExactlyTheNonEmptyBlocks) {
  const PruneCase &c = GetParam();
  auto kernel = test::compileBundled(c.kernel, "f32", c.br, c.bc, /*instrument=*/true);
  ASSERT_TRUE(kernel);
  reference::Problem p;
  p.B = 1;
  p.H = 2;
  p.Hkv = 2;
  p.M = c.M;
  p.N = c.N;
  p.D = kernel->headDim();
  auto reference = test::compileBundledReference(c.kernel);
  ASSERT_TRUE(reference);
  test::RunResult r = test::runAgainstReference(*kernel, *reference, p, 7);
  EXPECT_LE(r.outError, 5e-6);
  Expected e = bruteForce(maskOf(c.kernel), c.M, c.N, c.br, c.bc, p.B * p.H);
  EXPECT_EQ(r.counts.visited(), e.full + e.partial) << "of " << e.total << " blocks";
  EXPECT_EQ(r.counts.full, e.full) << "full blocks run without the mask";
  EXPECT_EQ(r.counts.partial, e.partial) << "only partial blocks apply the mask";
}

INSTANTIATE_TEST_SUITE_P(
    Masks, BlockPruning,
    testing::Values(PruneCase{"causal", 1024, 1024, 64, 64}, PruneCase{"causal", 1000, 1000, 64, 32},
                    PruneCase{"causal", 300, 1000, 32, 64}, PruneCase{"causal", 1000, 300, 128, 16},
                    PruneCase{"sliding_window", 1000, 1000, 64, 64},
                    PruneCase{"sliding_window", 777, 500, 32, 16},
                    PruneCase{"prefix_lm", 700, 700, 64, 64},
                    PruneCase{"attention", 257, 333, 64, 64}),
    [](const testing::TestParamInfo<PruneCase> &info) {
      const PruneCase &c = info.param;
      return c.kernel + "_M" + std::to_string(c.M) + "_N" + std::to_string(c.N) + "_Br" +
             std::to_string(c.br) + "_Bc" + std::to_string(c.bc);
    });

TEST(BlockPruning, CausalVisitsAboutHalf) {
  auto kernel = test::compileBundled("causal", "f32", 64, 64, /*instrument=*/true);
  ASSERT_TRUE(kernel);
  reference::Problem p;
  p.B = 1;
  p.H = 1;
  p.Hkv = 1;
  p.M = p.N = 2048;
  p.D = kernel->headDim();
  auto reference = test::compileBundledReference("causal");
  ASSERT_TRUE(reference);
  test::RunResult r = test::runAgainstReference(*kernel, *reference, p, 3);
  int64_t blocks = 32 * 32;
  EXPECT_EQ(r.counts.visited(), 32 * 33 / 2); // the lower triangle with its diagonal
  EXPECT_EQ(r.counts.partial, 32);            // only the diagonal pays for the mask
  EXPECT_LT(r.counts.visited(), blocks * 0.52);
}

/// A mask with a hole in the middle of each row's key range (a "dilated" pattern): keys below 100
/// and keys at least 400 past the query are kept. The pruned loop must skip the empty blocks in
/// between, not only trim the ends.
TEST(BlockPruning, SkipsEmptyBlocksInsideTheRange) {
  std::string text = kernels::find("attention")->text;
  std::string scale = "  %t = tile.scale %s : !scores\n";
  size_t pos = text.find(scale);
  ASSERT_NE(pos, std::string::npos);
  text.insert(pos + scale.size(), R"(  %c100 = arith.constant 100 : index
  %c400 = arith.constant 400 : index
  %holed = tile.mask %t : !scores {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %near = arith.cmpi ult, %kv, %c100 : index
    %far0 = arith.addi %qi, %c400 : index
    %far = arith.cmpi uge, %kv, %far0 : index
    %keep = arith.ori %near, %far : i1
    tile.yield %keep : i1
  }
)");
  size_t sm = text.find("tile.softmax %t");
  ASSERT_NE(sm, std::string::npos);
  text.replace(sm, std::string("tile.softmax %t").size(), "tile.softmax %holed");
  CpuCompileOptions opts;
  opts.blockM = 32;
  opts.blockN = 32;
  opts.instrument = true;
  opts.elementType = "f32";
  auto kernel = CpuKernel::compile(text, "holed.mlir", opts);
  ASSERT_TRUE(static_cast<bool>(kernel)) << llvm::toString(kernel.takeError());

  test::Semantics v;
  v.mask = [](int64_t, int64_t, int64_t q, int64_t kv) { return kv < 100 || kv >= q + 400; };
  reference::Problem p;
  p.B = 1;
  p.H = p.Hkv = 2;
  p.M = 300;
  p.N = 1000;
  auto reference = test::compileReference(text, "holed.mlir");
  ASSERT_TRUE(reference);
  test::RunResult r = test::runAgainstReference(**kernel, *reference, p, 11);
  EXPECT_TRUE(r.allWritten);
  EXPECT_LE(r.outError, 5e-6);
  EXPECT_LE(r.lseError, 1e-5);
  Expected want = bruteForce(v, p.M, p.N, 32, 32, p.B * p.H);
  const BlockCounts &counts = r.counts;
  EXPECT_EQ(counts.visited(), want.full + want.partial);
  EXPECT_EQ(counts.full, want.full);
  EXPECT_EQ(counts.partial, want.partial);
  EXPECT_LT(counts.visited(), want.total * 0.75) << "the hole must be skipped";
}

} // namespace

namespace {

/// Variant parameters reach the compiled kernel: a narrower window than the one written, checked
/// against the reference with that window, and pruned to the blocks it leaves.
TEST(VariantParams, SlidingWindowTakesItsWindowFromTheSpecialization) {
  const kernels::KernelSource *src = kernels::find("sliding_window");
  ASSERT_NE(src, nullptr);
  CpuCompileOptions opts;
  opts.blockM = opts.blockN = 32;
  opts.instrument = true;
  opts.params = {"window_left=37", "window_right=5"};
  opts.elementType = "f32";
  auto kernel = CpuKernel::compile(src->text, src->fileName, opts);
  ASSERT_TRUE(static_cast<bool>(kernel)) << llvm::toString(kernel.takeError());
  test::Semantics v;
  v.mask = [](int64_t, int64_t, int64_t q, int64_t kv) { return kv + 37 >= q && kv <= q + 5; };
  reference::Problem p;
  p.B = 1;
  p.H = p.Hkv = 2;
  p.M = 301;
  p.N = 277;
  // The reference is specialized the same way, from the same text.
  auto reference = test::compileReference(src->text, src->fileName, 0, opts.params);
  ASSERT_TRUE(reference);
  test::RunResult r = test::runAgainstReference(**kernel, *reference, p, 5);
  EXPECT_TRUE(r.allWritten);
  EXPECT_LE(r.outError, 5e-6);
  const BlockCounts &counts = r.counts;
  Expected want = bruteForce(v, p.M, p.N, 32, 32, p.B * p.H);
  EXPECT_EQ(counts.visited(), want.full + want.partial);
  EXPECT_EQ(counts.partial, want.partial);
}

TEST(VariantParams, UnknownParameterIsAnError) {
  CpuCompileOptions opts;
  opts.params = {"window=3"};
  auto kernel = CpuKernel::compile(kernels::find("sliding_window")->text,
                                   "kernels/sliding_window.mlir", opts);
  ASSERT_FALSE(static_cast<bool>(kernel));
  std::string err = llvm::toString(kernel.takeError());
  EXPECT_NE(err.find("kernels/sliding_window.mlir:"), std::string::npos) << err;
  EXPECT_NE(err.find("no parameter 'window'"), std::string::npos) << err;
}

} // namespace
