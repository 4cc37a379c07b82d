//===- PagedKVTest.cpp - paged K/V caches on the CPU against float64 -------===//
//
// tile-paged-kv makes any variant read its keys and values through a page table, with a length
// per sequence. Every bundled variant and the three test-only variants, compiled paged and run
// on the CPU backend, against the float64 reference of the same DSL text on the contiguous keys
// and values each sequence owns: page sizes given at launch, 1, powers of two and odd ones (1,
// 2, 5, 16, 48, 127, 256: each row's division by the page size is the reciprocal's multiply and
// shift, tile::pageDivisor), ragged lengths (0 to 1000, one sequence empty), decode and
// prefill row counts, unsplit, split (S up to more than a sequence has key blocks) and split
// with GQA packing. The cache's other rows are NaN, so a row read past a sequence's length, or
// from a wrong page, shows in the output. The reciprocal's IR arithmetic itself is checked
// exact, folded, over page sizes up to 2^31 and rows up to 2^31 - 1.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include "tilefuse/dialect/TileOps.h"
#include "tilefuse/kernels/Registry.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Builders.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <random>

using namespace tilefuse;
using namespace tilefuse::runtime;

namespace {

struct PagedCase {
  std::string kernel; ///< a bundled kernel, or test/variants/NAME with testOnly
  bool testOnly = false;
  bool split = false;
  bool pack = false;
};

std::string caseName(const PagedCase &c) {
  return c.kernel + (c.split ? "_split" : "") + (c.pack ? "_packed" : "");
}

class PagedKVCases : public testing::TestWithParam<PagedCase> {};

TEST_P(PagedKVCases, MatchesFloat64Reference) {
  const PagedCase &c = GetParam();
  auto [text, fileName] = test::variantSource(c.kernel, c.testOnly);
  ASSERT_FALSE(text.empty());
  CpuCompileOptions opts;
  opts.blockM = 16;
  opts.blockN = 16;
  opts.pagedKv = true;
  opts.splitKv = c.split;
  opts.packGqa = c.pack;
  auto kernel = CpuKernel::compile(text, fileName, opts);
  ASSERT_TRUE(bool(kernel)) << llvm::toString(kernel.takeError());
  auto reference = test::compileReference(text, fileName);
  ASSERT_TRUE(reference);
  struct Shape {
    int64_t M, pageSize;
    std::vector<int64_t> lengths;
    int64_t splits;
  };
  std::vector<Shape> shapes = {
      {1, 16, {1000, 1, 0, 17}, 7},   {1, 5, {33, 300, 64, 2}, 3},  {1, 1, {40, 3, 19, 1}, 2},
      {1, 256, {700, 255, 257, 5}, 64}, {3, 48, {100, 49, 0, 300}, 5}, {40, 16, {50, 300, 7, 128}, 2},
      {1, 127, {600, 127, 128, 254}, 4}, {2, 2, {37, 2, 1, 64}, 3},
  };
  unsigned seed = 11;
  for (const Shape &s : shapes) {
    reference::Problem p;
    p.M = s.M;
    p.D = (*kernel)->headDim();
    bool fixedHeads = test::variantHeads(c.kernel, c.testOnly, p);
    test::Paging paging;
    paging.pageSize = s.pageSize;
    paging.lengths = s.lengths;
    p.B = int64_t(s.lengths.size());
    if (fixedHeads) { // 8 query heads: two sequences keep the run short
      paging.lengths.resize(2);
      p.B = 2;
    }
    int64_t splits = c.split ? s.splits : 1;
    SCOPED_TRACE(testing::Message() << caseName(c) << " M=" << s.M << " page=" << s.pageSize
                                    << " splits=" << splits);
    test::RunResult r = test::runAgainstReference(**kernel, *reference, p, seed++, splits, &paging);
    EXPECT_TRUE(r.allWritten) << "NaN or poison in the output: a row past a sequence's length "
                                 "or of a wrong page was read, or an element was not written";
    EXPECT_TRUE(r.lseInfMatches) << "fully masked rows must have logsumexp -inf, others finite";
    EXPECT_LE(r.outError, 8e-3);
    EXPECT_LE(r.lseError, 1e-5);
  }
}

std::vector<PagedCase> pagedCases() {
  std::vector<PagedCase> cases;
  for (const char *k : {"attention", "causal", "sliding_window", "alibi", "softcap", "prefix_lm",
                        "gqa", "mqa"})
    for (auto [split, pack] : {std::pair{false, false}, {true, false}, {true, true}})
      cases.push_back({k, false, split, pack});
  for (const char *k : {"chunked_local", "softcap_head_bias", "gqa_head_window"})
    for (auto [split, pack] : {std::pair{false, false}, {true, true}})
      cases.push_back({k, true, split, pack});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllVariants, PagedKVCases, testing::ValuesIn(pagedCases()),
                         [](const testing::TestParamInfo<PagedCase> &info) {
                           return caseName(info.param);
                         });

/// The IR of a page size given at launch (tile::pageDivisor, tile::pagedRow), folded on constant
/// operands by the arith ops' own folders, which define what the lowerings compute: the page
/// column and the row in the page equal row / S and row % S exactly for 1 <= S <= 2^31 and
/// rows below 2^31, at the edges of both ranges (S = 1, powers of two and their neighbours,
/// S near 2^31; rows near 2^31 - 1 and around multiples of S) and at random.
TEST(PagedKVPageDivisor, ReciprocalIsExactForRowsBelow2To31) {
  mlir::MLIRContext context;
  context.loadDialect<mlir::arith::ArithDialect>();
  mlir::OpBuilder b(&context);
  mlir::Location loc = b.getUnknownLoc();
  mlir::Block block;
  std::mt19937_64 random(13);
  constexpr uint64_t kRowLimit = uint64_t(1) << 31; // rows are below it
  std::vector<uint64_t> sizes;
  for (uint64_t s = 1; s <= 600; ++s)
    sizes.push_back(s);
  for (int k = 10; k <= 31; ++k)
    for (int64_t d : {-3, -1, 0, 1, 3})
      sizes.push_back((uint64_t(1) << k) + d);
  for (uint64_t s : {uint64_t(1000003), uint64_t(715827883), kRowLimit - 1, kRowLimit})
    sizes.push_back(s);
  for (int i = 0; i < 400; ++i)
    sizes.push_back(1 + random() % kRowLimit);
  auto constant = [&](uint64_t v) -> mlir::Value {
    return mlir::arith::ConstantIndexOp::create(b, loc, int64_t(v));
  };
  int checked = 0;
  for (uint64_t s : sizes) {
    if (s > kRowLimit)
      continue;
    block.clear();
    b.setInsertionPointToStart(&block);
    tilefuse::tile::PageDivisor divisor = tilefuse::tile::pageReciprocal(b, loc, constant(s));
    ASSERT_TRUE(divisor.multiplier && divisor.shift);
    ASSERT_TRUE(mlir::getConstantIntValue(divisor.multiplier)) << "S = " << s;
    std::vector<uint64_t> rows = {0, 1, s - 1, s, s + 1, kRowLimit - 1, kRowLimit - 2,
                                  (kRowLimit - 1) / s * s, (kRowLimit - 1) / s * s - 1};
    for (int i = 0; i < 24; ++i)
      rows.push_back(random() % kRowLimit);
    for (uint64_t row : rows) {
      if (row >= kRowLimit)
        continue;
      tilefuse::tile::PageAndRow at = tilefuse::tile::pagedRow(
          b, loc, constant(row), divisor,
          [](mlir::OpBuilder &, mlir::Location, mlir::Value column) { return column; });
      std::optional<int64_t> column = mlir::getConstantIntValue(at.page);
      std::optional<int64_t> rowInPage = mlir::getConstantIntValue(at.row);
      ASSERT_TRUE(column && rowInPage) << "S = " << s << ", row = " << row << ": not folded";
      ASSERT_EQ(uint64_t(*column), row / s) << "S = " << s << ", row = " << row;
      ASSERT_EQ(uint64_t(*rowInPage), row % s) << "S = " << s << ", row = " << row;
      ++checked;
    }
  }
  EXPECT_GT(checked, 30000);
  block.clear();
}

/// A page size fixed at compile time (the caches' types say it; the lowerings divide by a
/// constant): the same results, and a cache of another page size is refused.
TEST(PagedKVFixedPageSize, MatchesFloat64ReferenceAndChecksThePageSize) {
  for (const char *name : {"attention", "causal", "sliding_window"}) {
    const kernels::KernelSource &src = *kernels::find(name);
    CpuCompileOptions opts;
    opts.blockM = 16;
    opts.blockN = 32;
    opts.pagedKv = true;
    opts.pageSize = 16;
    opts.splitKv = true;
    opts.packGqa = true;
    auto kernel = CpuKernel::compile(src.text, src.fileName, opts);
    ASSERT_TRUE(bool(kernel)) << llvm::toString(kernel.takeError());
    auto reference = test::compileReference(src.text, src.fileName);
    ASSERT_TRUE(reference);
    reference::Problem p;
    p.M = 1;
    p.D = (*kernel)->headDim();
    p.H = 4;
    p.Hkv = 2;
    p.B = 4;
    test::Paging paging;
    paging.pageSize = 16;
    paging.lengths = {1000, 33, 0, 16};
    for (int64_t splits : {1, 5}) {
      SCOPED_TRACE(testing::Message() << name << " splits=" << splits);
      test::RunResult r = test::runAgainstReference(**kernel, *reference, p, 3, splits, &paging);
      EXPECT_TRUE(r.allWritten);
      EXPECT_TRUE(r.lseInfMatches);
      EXPECT_LE(r.outError, 8e-3);
      EXPECT_LE(r.lseError, 1e-5);
    }
    // Pages of 5 rows for a kernel compiled for 16.
    paging.pageSize = 5;
    testing::TestPartResultArray failures;
    {
      testing::ScopedFakeTestPartResultReporter reporter(
          testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
      (void)test::runAgainstReference(**kernel, *reference, p, 3, 1, &paging);
    }
    ASSERT_EQ(failures.size(), 1);
    EXPECT_NE(std::string(failures.GetTestPartResult(0).message())
                  .find("was compiled for pages of 16 rows, not 5"),
              std::string::npos)
        << failures.GetTestPartResult(0).message();
  }
}

/// A bad table, a length past the table's pages and a launch of the wrong form are errors,
/// never reads out of bounds.
TEST(PagedKVLaunch, BadTablesAndFormsAreErrors) {
  const kernels::KernelSource &src = *kernels::find("attention");
  CpuCompileOptions opts;
  opts.elementType = "f32";
  opts.pagedKv = true;
  auto paged = CpuKernel::compile(src.text, src.fileName, opts);
  ASSERT_TRUE(bool(paged)) << llvm::toString(paged.takeError());
  opts.pagedKv = false;
  auto contiguous = CpuKernel::compile(src.text, src.fileName, opts);
  ASSERT_TRUE(bool(contiguous)) << llvm::toString(contiguous.takeError());
  int64_t D = (*paged)->headDim(), pageSize = 4, pages = 3;
  std::vector<float> q(D, 1.0f), cache(pages * pageSize * D, 1.0f), o(D), lse(1);
  auto q4 = HostView::contiguous(q.data(), {1, 1, 1, D});
  auto o4 = HostView::contiguous(o.data(), {1, 1, 1, D});
  auto lse3 = HostView::contiguous(lse.data(), {1, 1, 1, 0}, 3);
  auto cache4 = HostView::contiguous(cache.data(), {pages, 1, pageSize, D});
  std::vector<int32_t> table = {2, 0}, lengths = {7};
  runtime::PagedKV kv;
  kv.pageTable = table.data();
  kv.pagesPerSequence = 2;
  kv.tableStride = 2;
  kv.kvLengths = lengths.data();
  auto expectError = [&](llvm::Error e, llvm::StringRef needle) {
    ASSERT_TRUE(bool(e)) << "expected an error with '" << needle.str() << "'";
    std::string message = llvm::toString(std::move(e));
    EXPECT_NE(message.find(needle.str()), std::string::npos) << message;
  };
  EXPECT_FALSE(bool((*paged)->run(q4, cache4, cache4, o4, lse3, nullptr, 1, &kv)));
  table[1] = 3;
  expectError((*paged)->run(q4, cache4, cache4, o4, lse3, nullptr, 1, &kv),
              "page table entry [0, 1] is 3, not a page of the cache");
  table[1] = 0;
  lengths[0] = 9;
  expectError((*paged)->run(q4, cache4, cache4, o4, lse3, nullptr, 1, &kv),
              "batch 0 has 9 key/value rows; its table row holds 2 pages of 4");
  lengths[0] = 7;
  expectError((*paged)->run(q4, cache4, cache4, o4, lse3), "pass its page table and lengths");
  expectError((*contiguous)->run(q4, cache4, cache4, o4, lse3, nullptr, 1, &kv),
              "compile it with pagedKv");
}

} // namespace
