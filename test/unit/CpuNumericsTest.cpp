//===- CpuNumericsTest.cpp - every variant against float64 on the CPU -----===//
//
// Every kernels/ variant, compiled through the whole front end (tiling, online softmax, block
// pruning) and run on the CPU reference backend, against its float64 reference (derived from the
// same DSL text, evaluated naively) on random inputs: lengths 1, 17 and 1000, M != N both ways, several Br x Bc pairs, bf16 / f16 / f32.
// Everything inside the kernel is f32, so the bound is set by rounding the output to the storage
// type once (f32: ~1e-7; f16: 2^-11; bf16: 2^-8), plus f32 accumulation.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include "tilefuse/kernels/Registry.h"

#include <gtest/gtest.h>

using namespace tilefuse;
using namespace tilefuse::runtime;

namespace {

struct Case {
  std::string kernel;
  std::string dtype;
  int64_t br, bc;
  /// The CPU the JIT targets (CpuCompileOptions::cpuTarget).
  std::string cpuTarget = "host";
};

std::string caseName(const testing::TestParamInfo<Case> &info) {
  return info.param.kernel + "_" + info.param.dtype + "_Br" + std::to_string(info.param.br) +
         "_Bc" + std::to_string(info.param.bc) +
         (info.param.cpuTarget == "host" ? "" : "_" + info.param.cpuTarget);
}

double outBound(const std::string &dtype) {
  return dtype == "f32" ? 5e-6 : dtype == "f16" ? 1e-3 : 8e-3;
}

class CpuNumerics : public testing::TestWithParam<Case> {};

TEST_P(CpuNumerics, MatchesFloat64Reference) {
  const Case &c = GetParam();
  auto kernel = test::compileBundled(c.kernel, c.dtype, c.br, c.bc, /*instrument=*/false,
                                     c.cpuTarget);
  ASSERT_TRUE(kernel);
  auto reference = test::compileBundledReference(c.kernel);
  ASSERT_TRUE(reference);
  bool fixedHeads = c.kernel == "gqa" || c.kernel == "mqa";
  struct Shape {
    int64_t M, N;
  };
  // 1 and 17: a single partial block; 1000: many blocks and a ragged tail; both M != N ways.
  std::vector<Shape> shapes = {{1, 1}, {17, 17}, {1, 17}, {17, 1}, {100, 257}, {257, 100}};
  if (c.dtype == "bf16" || c.dtype == "f32") {
    shapes.push_back({1000, 1000});
    shapes.push_back({17, 1000});
    shapes.push_back({1000, 17});
  }
  unsigned seed = 1;
  for (Shape s : shapes) {
    reference::Problem p;
    p.M = s.M;
    p.N = s.N;
    p.D = kernel->headDim();
    bool big = s.M * s.N >= 100000;
    if (fixedHeads) {
      p.B = 1;
      p.H = 8;
      p.Hkv = c.kernel == "gqa" ? 2 : 1;
      if (big) // keep the naive reference quick
        p.H = 8;
    } else {
      p.B = big ? 1 : 2;
      p.H = big ? 2 : 4;
      // The plain kernel has dynamic heads: exercise a GQA mapping at run time too.
      p.Hkv = c.kernel == "attention" ? p.H / 2 : p.H;
    }
    test::RunResult r = test::runAgainstReference(*kernel, *reference, p, seed++);
    SCOPED_TRACE(testing::Message() << c.kernel << " " << c.dtype << " M=" << s.M
                                    << " N=" << s.N << " H=" << p.H << " Hkv=" << p.Hkv);
    EXPECT_TRUE(r.allWritten) << "poison left in the output: some element was not written";
    EXPECT_TRUE(r.lseInfMatches) << "fully masked rows must have logsumexp -inf, others finite";
    EXPECT_LE(r.outError, outBound(c.dtype));
    EXPECT_LE(r.lseError, 1e-5);
  }
}

std::vector<Case> allCases() {
  std::vector<Case> cases;
  const char *kernels[] = {"attention", "causal", "sliding_window", "alibi",
                           "softcap",   "prefix_lm", "gqa",         "mqa"};
  for (const char *k : kernels) {
    cases.push_back({k, "bf16", 64, 64});
    cases.push_back({k, "f32", 32, 16});
    cases.push_back({k, "f16", 16, 128});
  }
  // The architecture's baseline CPU (x86-64: SSE2, no F16C or AVX512-BF16), so no feature of
  // the machine running the tests can hide a dependence on one: the 16-bit storage types, whose
  // conversions need those features or compiler-runtime calls unless expanded.
  for (const char *k : {"attention", "causal", "alibi", "softcap"}) {
    cases.push_back({k, "bf16", 64, 32, "baseline"});
    cases.push_back({k, "f16", 32, 64, "baseline"});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllVariants, CpuNumerics, testing::ValuesIn(allCases()), caseName);

/// Row blocks aligned to the rows' end (TileConfig row_align=end): the first row block starts
/// at row 0 and stores only the rows the second does not. Against float64 at lengths that are
/// and are not multiples of Br, M != N both ways; and it visits at most the key blocks the
/// start-aligned grid does (fewer under a causal mask where Br is not a multiple of Bc).
class EndAlignedRows : public testing::TestWithParam<std::string> {};

TEST_P(EndAlignedRows, MatchesFloat64ReferenceAndVisitsNoMoreBlocks) {
  const std::string &name = GetParam();
  const kernels::KernelSource *src = kernels::find(name);
  ASSERT_NE(src, nullptr);
  auto reference = test::compileBundledReference(name);
  ASSERT_TRUE(reference);
  auto compile = [&](bool alignEnd) {
    CpuCompileOptions opts;
    opts.blockM = 48;
    opts.blockN = 32;
    opts.instrument = true;
    opts.elementType = "bf16";
    opts.alignRowsToEnd = alignEnd;
    auto kernel = CpuKernel::compile(src->text, src->fileName, opts);
    EXPECT_TRUE(bool(kernel)) << llvm::toString(kernel.takeError());
    return kernel ? std::move(*kernel) : nullptr;
  };
  auto aligned = compile(true), started = compile(false);
  ASSERT_TRUE(aligned && started);
  bool fixedHeads = name == "gqa" || name == "mqa";
  unsigned seed = 11;
  for (auto [M, N] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {17, 17}, {48, 48}, {100, 100}, {200, 130}, {130, 200}, {289, 289}}) {
    reference::Problem p;
    p.M = M;
    p.N = N;
    p.D = aligned->headDim();
    p.B = 2;
    p.H = fixedHeads ? 8 : 4;
    p.Hkv = name == "gqa" ? 2 : name == "mqa" ? 1 : name == "attention" ? 2 : p.H;
    SCOPED_TRACE(testing::Message() << name << " M=" << M << " N=" << N);
    test::RunResult r = test::runAgainstReference(*aligned, *reference, p, seed);
    EXPECT_TRUE(r.allWritten) << "poison left in the output: some element was not written";
    EXPECT_TRUE(r.lseInfMatches) << "fully masked rows must have logsumexp -inf, others finite";
    EXPECT_LE(r.outError, 8e-3);
    EXPECT_LE(r.lseError, 1e-5);
    test::RunResult s = test::runAgainstReference(*started, *reference, p, seed++);
    EXPECT_LE(r.counts.visited(), s.counts.visited());
    // M = N = 100 (Br = 48, Bc = 32): start-aligned [0, 48), [48, 96), [96, 144) visit 2, 3
    // and 4 key blocks; end-aligned [0, 48) (clipped), [4, 52), [52, 100) 2, 2 and 4.
    if (name == "causal" && M == 100 && N == 100) {
      EXPECT_LT(r.counts.visited(), s.counts.visited());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, EndAlignedRows,
                         testing::Values("attention", "causal", "sliding_window", "prefix_lm",
                                         "alibi", "gqa"));

} // namespace
