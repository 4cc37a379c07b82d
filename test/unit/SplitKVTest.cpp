//===- SplitKVTest.cpp - split-KV kernels on the CPU against float64 -------===//
//
// tile-split-kv shares each row block's key blocks out over S programs and merges their partial
// results. Every bundled variant and both test-only variants, compiled with the split and run on
// the CPU backend, against the float64 reference derived from the same DSL text: decode shapes
// (one query row, long keys), odd lengths, M != N both ways, and split counts from 1 to more than
// the row block has key blocks (empty shares). The merge is exact up to f32 rounding, so the
// bounds are the unsplit kernel's.
//
// The same cases with GQA packing (pack_gqa: a program's rows are the packed rows of the query
// heads sharing a key/value head), split and unsplit, and a test-only variant whose score and
// mask depend on the query head (gqa_head_window), so a packed block spans heads that differ.
// And a few with the row blocks last first (row_order=descending), whose programs take row
// block R - 1 - x, and grouped (row_order=grouped), whose programs are permuted over heads and
// row blocks: small groups (a few pairs, the last one short) so that every shape has several.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include "tilefuse/kernels/Registry.h"

#include <gtest/gtest.h>

using namespace tilefuse;
using namespace tilefuse::runtime;

namespace {

struct SplitCase {
  std::string kernel; ///< a bundled kernel, or test/variants/NAME with testOnly
  bool testOnly = false;
  std::string dtype = "bf16";
  bool pack = false;  ///< GQA packing
  bool split = true;  ///< tile-split-kv (else the splits of every shape are 1)
  bool descending = false; ///< row_order=descending (tile-order-row-blocks)
  bool grouped = false;    ///< row_order=grouped (tile-order-row-blocks)
};

std::unique_ptr<CpuKernel> compileSplit(const SplitCase &c, int64_t br, int64_t bc,
                                        std::string *text, std::string *fileName) {
  test::VariantSource source = test::variantSource(c.kernel, c.testOnly);
  if (source.text.empty())
    return nullptr;
  *text = source.text;
  *fileName = source.fileName;
  CpuCompileOptions opts;
  opts.blockM = br;
  opts.blockN = bc;
  opts.elementType = c.dtype;
  opts.splitKv = c.split;
  opts.packGqa = c.pack;
  opts.descendingRows = c.descending || c.grouped;
  opts.groupedRows = c.grouped;
  // 100 kB: at D = 64, Br = 16, M = 100 (7 row blocks, 28 kB of K and V a pair) groups of 3
  // pairs, M = 1000 one pair a group, M = 1 every pair in one group.
  opts.rowGroupBytes = 100000;
  auto k = CpuKernel::compile(*text, *fileName, opts);
  if (!k) {
    ADD_FAILURE() << llvm::toString(k.takeError());
    return nullptr;
  }
  return std::move(*k);
}

class SplitKV : public testing::TestWithParam<SplitCase> {};

TEST_P(SplitKV, MatchesFloat64Reference) {
  const SplitCase &c = GetParam();
  std::string text, fileName;
  // Small key blocks so that a few hundred keys make many blocks to share out.
  auto kernel = compileSplit(c, /*br=*/16, /*bc=*/16, &text, &fileName);
  ASSERT_TRUE(kernel);
  auto reference = test::compileReference(text, fileName);
  ASSERT_TRUE(reference);
  struct Shape {
    int64_t M, N, splits;
  };
  // Decode (M = 1) with 1 to 63 key blocks; more splits than blocks (empty shares); prefill
  // shapes with several row blocks; M > N, where causal-style masks leave whole rows masked.
  std::vector<Shape> shapes = {{1, 1, 1},    {1, 1, 4},     {1, 17, 3},  {1, 1000, 7},
                               {1, 1000, 64}, {3, 777, 5},  {17, 400, 2}, {100, 257, 3},
                               {257, 100, 4}, {40, 1000, 1}, {1000, 17, 3}};
  unsigned seed = 1;
  for (Shape s : shapes) {
    reference::Problem p;
    p.M = s.M;
    p.N = s.N;
    p.D = kernel->headDim();
    // 8 query heads where the kernel declares them: one sequence keeps the run short.
    p.B = test::variantHeads(c.kernel, c.testOnly, p) ? 1 : 2;
    int64_t splits = c.split ? s.splits : 1;
    test::RunResult r = test::runAgainstReference(*kernel, *reference, p, seed++, splits);
    SCOPED_TRACE(testing::Message() << c.kernel << " " << c.dtype << (c.pack ? " packed" : "")
                                    << (c.descending ? " descending" : "")
                                    << (c.grouped ? " grouped" : "")
                                    << " M=" << s.M << " N=" << s.N << " splits=" << splits);
    EXPECT_TRUE(r.allWritten) << "poison left in the output: some element was not written";
    EXPECT_TRUE(r.lseInfMatches) << "fully masked rows must have logsumexp -inf, others finite";
    EXPECT_LE(r.outError, c.dtype == "f32" ? 5e-6 : 8e-3);
    EXPECT_LE(r.lseError, 1e-5);
  }
}

std::vector<SplitCase> splitCases() {
  std::vector<SplitCase> cases;
  for (const char *k : {"attention", "causal", "sliding_window", "alibi", "softcap", "prefix_lm",
                        "gqa", "mqa"})
    cases.push_back({k});
  cases.push_back({"attention", false, "f32"});
  cases.push_back({"causal", false, "f16"});
  cases.push_back({"chunked_local", true});
  cases.push_back({"softcap_head_bias", true});
  cases.push_back({"gqa_head_window", true});
  // GQA packing, split and not.
  for (const char *k : {"attention", "causal", "sliding_window", "alibi", "softcap", "prefix_lm",
                        "gqa", "mqa"})
    cases.push_back({k, false, "bf16", /*pack=*/true});
  cases.push_back({"attention", false, "f32", /*pack=*/true});
  cases.push_back({"chunked_local", true, "bf16", /*pack=*/true});
  cases.push_back({"softcap_head_bias", true, "bf16", /*pack=*/true});
  cases.push_back({"gqa_head_window", true, "bf16", /*pack=*/true});
  for (const char *k : {"gqa", "mqa", "causal"})
    cases.push_back({k, false, "bf16", /*pack=*/true, /*split=*/false});
  cases.push_back({"gqa_head_window", true, "bf16", /*pack=*/true, /*split=*/false});
  // The row blocks last first (row_order=descending), split and not, packed and not: the
  // masks whose key ranges follow the row block.
  for (const char *k : {"causal", "prefix_lm", "sliding_window"})
    for (bool split : {true, false})
      cases.push_back({k, false, "bf16", /*pack=*/false, split, /*descending=*/true});
  cases.push_back({"chunked_local", true, "bf16", /*pack=*/false, /*split=*/false,
                   /*descending=*/true});
  cases.push_back({"gqa_head_window", true, "bf16", /*pack=*/true, /*split=*/true,
                   /*descending=*/true});
  // Grouped (one tile a CTA; a split grid is only reversed): every pair's rows still written
  // once, whatever group and level its programs land in.
  for (const char *k : {"causal", "prefix_lm", "sliding_window", "gqa", "attention"})
    cases.push_back({k, false, "bf16", /*pack=*/false, /*split=*/false, /*descending=*/false,
                     /*grouped=*/true});
  cases.push_back({"chunked_local", true, "bf16", /*pack=*/false, /*split=*/false,
                   /*descending=*/false, /*grouped=*/true});
  cases.push_back({"gqa_head_window", true, "bf16", /*pack=*/true, /*split=*/false,
                   /*descending=*/false, /*grouped=*/true});
  cases.push_back({"causal", false, "bf16", /*pack=*/false, /*split=*/true,
                   /*descending=*/false, /*grouped=*/true});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllVariants, SplitKV, testing::ValuesIn(splitCases()),
                         [](const testing::TestParamInfo<SplitCase> &info) {
                           return info.param.kernel + "_" + info.param.dtype +
                                  (info.param.pack ? "_packed" : "") +
                                  (info.param.split ? "" : "_unsplit") +
                                  (info.param.descending ? "_descending" : "") +
                                  (info.param.grouped ? "_grouped" : "");
                         });

/// In f32 the split and the unsplit kernel differ only by the merge's rounding.
TEST(SplitKVMerge, AgreesWithTheUnsplitKernel) {
  const kernels::KernelSource &src = *kernels::find("causal");
  CpuCompileOptions opts;
  opts.blockM = 16;
  opts.blockN = 16;
  opts.elementType = "f32";
  auto whole = CpuKernel::compile(src.text, src.fileName, opts);
  ASSERT_TRUE(bool(whole)) << llvm::toString(whole.takeError());
  opts.splitKv = true;
  auto split = CpuKernel::compile(src.text, src.fileName, opts);
  ASSERT_TRUE(bool(split)) << llvm::toString(split.takeError());
  int64_t B = 2, H = 2, M = 50, N = 300, D = (*whole)->headDim();
  std::mt19937 rng(7);
  auto q = reference::randomNormal(B * H * M * D, rng), k = reference::randomNormal(B * H * N * D, rng),
       v = reference::randomNormal(B * H * N * D, rng);
  std::vector<float> qf(q.begin(), q.end()), kf(k.begin(), k.end()), vf(v.begin(), v.end());
  auto run = [&](const CpuKernel &kernel, int64_t splits, std::vector<float> &o,
                 std::vector<float> &lse) {
    o.assign(B * H * M * D, NAN);
    lse.assign(B * H * M, NAN);
    llvm::Error e = kernel.run(HostView::contiguous(qf.data(), {B, H, M, D}),
                               HostView::contiguous(kf.data(), {B, H, N, D}),
                               HostView::contiguous(vf.data(), {B, H, N, D}),
                               HostView::contiguous(o.data(), {B, H, M, D}),
                               HostView::contiguous(lse.data(), {B, H, M, 0}, 3), nullptr, splits);
    EXPECT_FALSE(bool(e)) << llvm::toString(std::move(e));
  };
  std::vector<float> o1, l1, o2, l2;
  run(**whole, 1, o1, l1);
  for (int64_t splits : {1, 2, 5, 19, 40}) {
    run(**split, splits, o2, l2);
    for (size_t i = 0; i < o1.size(); ++i)
      ASSERT_NEAR(o2[i], o1[i], 2e-6) << "splits=" << splits << " element " << i;
    for (size_t i = 0; i < l1.size(); ++i)
      ASSERT_NEAR(l2[i], l1[i], 2e-6) << "splits=" << splits << " row " << i;
  }
}

TEST(SplitKVMerge, BadSplitCountsAreErrors) {
  const kernels::KernelSource &src = *kernels::find("attention");
  CpuCompileOptions opts;
  opts.elementType = "f32";
  auto whole = CpuKernel::compile(src.text, src.fileName, opts);
  ASSERT_TRUE(bool(whole)) << llvm::toString(whole.takeError());
  opts.splitKv = true;
  auto split = CpuKernel::compile(src.text, src.fileName, opts);
  ASSERT_TRUE(bool(split)) << llvm::toString(split.takeError());
  int64_t D = (*whole)->headDim();
  std::vector<float> x(D, 1.0f), o(D), lse(1);
  auto view = [&](float *data) { return HostView::contiguous(data, {1, 1, 1, D}); };
  auto lseView = HostView::contiguous(lse.data(), {1, 1, 1, 0}, 3);
  llvm::Error e = (*whole)->run(view(x.data()), view(x.data()), view(x.data()), view(o.data()),
                                lseView, nullptr, 2);
  ASSERT_TRUE(bool(e));
  EXPECT_NE(llvm::toString(std::move(e)).find("compile it with splitKv"), std::string::npos);
  e = (*split)->run(view(x.data()), view(x.data()), view(x.data()), view(o.data()), lseView,
                    nullptr, 0);
  ASSERT_TRUE(bool(e));
  EXPECT_NE(llvm::toString(std::move(e)).find("kvSplits must be 1 or more"), std::string::npos);
}

} // namespace
