//===- VarlenTest.cpp - packed variable-length batches on the CPU against float64 ===//
//
// tile-varlen makes any variant run on a packed batch (the THD layout of FlashAttention's
// varlen API): the sequences' rows one after another, found through cumulative offsets. Every
// bundled variant and the three test-only variants, compiled varlen and run on the CPU
// backend, against the float64 reference of the same DSL text on each sequence alone: ragged
// query and key lengths (M != N per sequence, a sequence without queries, one without keys,
// lengths that are and are not multiples of the block sizes). The rows no sequence owns are
// NaN in the inputs and must stay unwritten in the outputs.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include "tilefuse/kernels/Registry.h"

#include <gtest/gtest.h>

using namespace tilefuse;
using namespace tilefuse::runtime;

namespace {

struct VarlenCase {
  std::string kernel; ///< a bundled kernel, or test/variants/NAME with testOnly
  bool testOnly = false;
};

class VarlenCases : public testing::TestWithParam<VarlenCase> {};

/// Compiles `c`'s variant with `opts` (varlen set here), runs it on the packed `packing` (over
/// `paging`'s cache where given) at `splits` key splits, and checks it against float64 per
/// sequence: every element written, fully masked rows -inf, O to 8e-3, LSE to 1e-5.
void expectMatchesReference(const VarlenCase &c, CpuCompileOptions opts,
                            const test::Packing &packing, const test::Paging *paging,
                            int64_t splits, unsigned seed) {
  auto [text, fileName] = test::variantSource(c.kernel, c.testOnly);
  ASSERT_FALSE(text.empty());
  auto reference = test::compileReference(text, fileName);
  ASSERT_TRUE(reference);
  opts.varlen = true;
  opts.pagedKv = paging != nullptr;
  auto kernel = CpuKernel::compile(text, fileName, opts);
  ASSERT_TRUE(bool(kernel)) << llvm::toString(kernel.takeError());
  reference::Problem p;
  p.D = (*kernel)->headDim();
  test::variantHeads(c.kernel, c.testOnly, p);
  SCOPED_TRACE(testing::Message() << c.kernel << " Br=" << opts.blockM << " Bc=" << opts.blockN
                                  << " sequences=" << packing.queryLengths.size()
                                  << (paging ? " paged" : "") << " S=" << splits
                                  << (opts.packGqa ? " GQA-packed" : ""));
  test::RunResult r =
      test::runAgainstReference(**kernel, *reference, p, seed, splits, paging, &packing);
  EXPECT_TRUE(r.allWritten) << "NaN or poison in the output: a row of another sequence was "
                               "read, or an element was not written";
  EXPECT_TRUE(r.lseInfMatches) << "fully masked rows must have logsumexp -inf, others finite";
  EXPECT_LE(r.outError, 8e-3);
  EXPECT_LE(r.lseError, 1e-5);
}

TEST_P(VarlenCases, MatchesFloat64ReferencePerSequence) {
  struct Shape {
    int64_t blockM, blockN;
    std::vector<int64_t> queryLengths, keyLengths;
  };
  std::vector<Shape> shapes = {
      // Prefill: the same lengths for queries and keys, one longer than the others.
      {16, 16, {64, 3, 100, 17}, {64, 3, 100, 17}},
      // Queries and keys of different lengths; a sequence without queries.
      {16, 32, {1, 17, 0, 40}, {33, 17, 5, 100}},
      // A sequence without keys: its rows are fully masked.
      {32, 16, {5, 70}, {0, 20}},
  };
  unsigned seed = 5;
  for (const Shape &s : shapes) {
    CpuCompileOptions opts;
    opts.blockM = s.blockM;
    opts.blockN = s.blockN;
    expectMatchesReference(GetParam(), opts, {s.queryLengths, s.keyLengths}, nullptr, 1,
                           seed++);
  }
}

// The grid grouped (row_order=grouped): its (sequence, head) pairs in groups of a few (small
// group bytes: several groups, the last one short), each group's row blocks level by level
// from the longest sequence's last one down; row blocks past a sequence's end stay empty
// wherever they land.
TEST_P(VarlenCases, GroupedGridMatchesFloat64ReferencePerSequence) {
  CpuCompileOptions opts;
  opts.blockM = 16;
  opts.blockN = 16;
  opts.descendingRows = opts.groupedRows = true;
  // 7 row blocks of the longest sequence, 28 kB of K and V a pair at D = 64: 2 pairs a group.
  opts.rowGroupBytes = 60000;
  std::vector<int64_t> lengths = {64, 3, 100, 17, 0};
  expectMatchesReference(GetParam(), opts, {lengths, lengths}, nullptr, 1, 41);
}

// Row blocks aligned to each sequence's end (row_align=end): a sequence's first row block
// starts at its row 0 and stores only the rows its second does not; sequences shorter than a
// block, without rows, and a multiple of the block; split and GQA-packed too (the merge stores
// what its row block owns).
TEST_P(VarlenCases, EndAlignedRowsMatchFloat64ReferencePerSequence) {
  CpuCompileOptions opts;
  opts.blockM = 48;
  opts.blockN = 32;
  opts.alignRowsToEnd = true;
  std::vector<int64_t> lengths = {64, 3, 100, 0, 96, 17};
  expectMatchesReference(GetParam(), opts, {lengths, lengths}, nullptr, 1, 43);
  opts.splitKv = true;
  opts.packGqa = true;
  std::vector<int64_t> queryLengths = {3, 1, 0, 17, 1}, keyLengths = {500, 77, 30, 200, 0};
  expectMatchesReference(GetParam(), opts, {queryLengths, keyLengths}, nullptr, 3, 44);
}

// Over a paged cache (chunked prefill, prefill and decode in one batch): packed queries, each
// sequence's keys its lengths' rows of its pages (an odd page size, pages shuffled); a decode
// sequence (one query row over many keys), one without queries, one with fewer keys than
// queries.
TEST_P(VarlenCases, OverAPagedCacheMatchesFloat64ReferencePerSequence) {
  CpuCompileOptions opts;
  opts.blockM = 16;
  opts.blockN = 32;
  std::vector<int64_t> queryLengths = {40, 1, 0, 33}, keyLengths = {130, 77, 9, 20};
  test::Paging paging{/*pageSize=*/7, keyLengths};
  expectMatchesReference(GetParam(), opts, {queryLengths, keyLengths}, &paging, 1, 31);
}

// Split-KV and GQA packing (decode over ragged keys: FlashDecoding on a packed batch): packed
// queries, a few rows each, one sequence without queries and one without keys; the partials a
// padded batch's, the merge storing packed rows. Contiguous keys and a paged cache; split counts
// of 1, 3 and more than there are key blocks.
TEST_P(VarlenCases, SplitAndPackedMatchFloat64ReferencePerSequence) {
  std::vector<int64_t> queryLengths = {3, 1, 0, 17, 1}, keyLengths = {500, 77, 30, 200, 0};
  test::Paging paging{/*pageSize=*/16, keyLengths};
  for (bool paged : {false, true})
    for (int64_t splits : {1, 3, 40}) {
      CpuCompileOptions opts;
      opts.blockM = 16;
      opts.blockN = 16;
      opts.splitKv = true;
      opts.packGqa = splits != 3; // and unpacked once
      expectMatchesReference(GetParam(), opts, {queryLengths, keyLengths},
                             paged ? &paging : nullptr, splits, 7);
    }
}

// Ragged key lengths from 1 to 16k (decode and short prefill over long caches, as an inference
// batch mixes them): few query rows, so the float64 reference stays quick. Contiguous and
// paged (64-row pages), unsplit and split, with the default-sized blocks.
TEST_P(VarlenCases, LongRaggedKeysMatchFloat64ReferencePerSequence) {
  std::vector<int64_t> queryLengths = {2, 1, 0, 5, 1}, keyLengths = {16384, 1, 9000, 4097, 777};
  test::Paging paging{/*pageSize=*/64, keyLengths};
  for (bool paged : {false, true})
    for (bool split : {false, true}) {
      CpuCompileOptions opts;
      opts.blockM = 64;
      opts.blockN = 128;
      opts.splitKv = split;
      expectMatchesReference(GetParam(), opts, {queryLengths, keyLengths},
                             paged ? &paging : nullptr, split ? 16 : 1, 11);
    }
}

std::vector<VarlenCase> varlenCases() {
  std::vector<VarlenCase> cases;
  for (const char *k : {"attention", "causal", "sliding_window", "alibi", "softcap", "prefix_lm",
                        "gqa", "mqa"})
    cases.push_back({k, false});
  for (const char *k : {"chunked_local", "softcap_head_bias", "gqa_head_window"})
    cases.push_back({k, true});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllVariants, VarlenCases, testing::ValuesIn(varlenCases()),
                         [](const testing::TestParamInfo<VarlenCase> &info) {
                           return info.param.kernel;
                         });

/// In f32 storage nothing is rounded to 16 bits: the packed kernel matches float64 to 1e-5, so a
/// row or key taken from a neighbouring sequence cannot hide in the rounding.
TEST(VarlenF32, MatchesFloat64Tightly) {
  for (const char *name : {"causal", "softcap", "prefix_lm"}) {
    const kernels::KernelSource &src = *kernels::find(name);
    CpuCompileOptions opts;
    opts.elementType = "f32";
    opts.blockM = 16;
    opts.blockN = 32;
    opts.varlen = true;
    auto kernel = CpuKernel::compile(src.text, src.fileName, opts);
    ASSERT_TRUE(bool(kernel)) << llvm::toString(kernel.takeError());
    auto reference = test::compileReference(src.text, src.fileName);
    ASSERT_TRUE(reference);
    reference::Problem p;
    p.D = (*kernel)->headDim();
    p.H = 4;
    p.Hkv = 2;
    test::Packing packing{{33, 1, 90, 16}, {70, 5, 90, 0}};
    SCOPED_TRACE(name);
    test::RunResult r =
        test::runAgainstReference(**kernel, *reference, p, 21, 1, nullptr, &packing);
    EXPECT_TRUE(r.allWritten);
    EXPECT_TRUE(r.lseInfMatches);
    EXPECT_LE(r.outError, 1e-5);
    EXPECT_LE(r.lseError, 1e-6);
  }
}

/// Causal attention prunes per sequence: a sequence's key loop covers its own diagonal, not the
/// longest sequence's, and programs past a sequence's end run no key block.
TEST(VarlenPruning, KeyBlocksFollowEachSequence) {
  const kernels::KernelSource &src = *kernels::find("causal");
  CpuCompileOptions opts;
  opts.blockM = 16;
  opts.blockN = 16;
  opts.varlen = true;
  opts.instrument = true;
  auto kernel = CpuKernel::compile(src.text, src.fileName, opts);
  ASSERT_TRUE(bool(kernel)) << llvm::toString(kernel.takeError());
  auto reference = test::compileReference(src.text, src.fileName);
  ASSERT_TRUE(reference);
  reference::Problem p;
  p.D = (*kernel)->headDim();
  p.H = p.Hkv = 1;
  // Causal blocks per sequence of L rows (L a multiple of 16): L/16 row blocks, the r-th
  // visiting r + 1 key blocks. 64 rows: 1 + 2 + 3 + 4 = 10; 16 rows: 1; 32 rows: 3.
  test::Packing packing{{64, 16, 32}, {64, 16, 32}};
  test::RunResult r = test::runAgainstReference(**kernel, *reference, p, 1, 1, nullptr, &packing);
  EXPECT_LE(r.outError, 8e-3);
  EXPECT_EQ(r.counts.visited(), 14);
  EXPECT_EQ(r.counts.partial, 7) << "one diagonal block per row block";
}

/// Bad offsets and launches of the wrong form are errors, never reads out of bounds; a varlen
/// paged varlen kernel needs its query offsets, not its key offsets.
TEST(VarlenLaunch, BadOffsetsAndFormsAreErrors) {
  const kernels::KernelSource &src = *kernels::find("attention");
  CpuCompileOptions opts;
  opts.elementType = "f32";
  opts.varlen = true;
  auto packed = CpuKernel::compile(src.text, src.fileName, opts);
  ASSERT_TRUE(bool(packed)) << llvm::toString(packed.takeError());
  opts.varlen = false;
  auto padded = CpuKernel::compile(src.text, src.fileName, opts);
  ASSERT_TRUE(bool(padded)) << llvm::toString(padded.takeError());
  int64_t D = (*packed)->headDim(), tokens = 6, maxLength = 4;
  std::vector<float> q(tokens * D, 1.0f), o(tokens * D), lse(tokens);
  auto q4 = Varlen::tokens(q.data(), 2, 1, maxLength, D);
  auto o4 = Varlen::tokens(o.data(), 2, 1, maxLength, D);
  auto lse3 = Varlen::lse(lse.data(), 2, 1, maxLength, tokens);
  std::vector<int32_t> cu = {0, 2, 6};
  Varlen varlen = Varlen::of(cu.data(), cu.data(), tokens, tokens);
  auto expectError = [&](llvm::Error e, llvm::StringRef needle) {
    ASSERT_TRUE(bool(e)) << "expected an error with '" << needle.str() << "'";
    std::string message = llvm::toString(std::move(e));
    EXPECT_NE(message.find(needle.str()), std::string::npos) << message;
  };
  EXPECT_FALSE(bool((*packed)->run(q4, q4, q4, o4, lse3, nullptr, 1, nullptr, &varlen)));
  cu = {0, 3, 2};
  expectError((*packed)->run(q4, q4, q4, o4, lse3, nullptr, 1, nullptr, &varlen),
              "sequence 1 has -1 query rows (offsets 3 to 2)");
  cu = {0, 1, 6};
  expectError((*packed)->run(q4, q4, q4, o4, lse3, nullptr, 1, nullptr, &varlen),
              "sequence 1 has 5 query rows (offsets 1 to 6); the views' M bounds them at 4");
  cu = {0, 4, 8};
  expectError((*packed)->run(q4, q4, q4, o4, lse3, nullptr, 1, nullptr, &varlen),
              "the query sequences end at row 8, past the packed tensor's 6 rows");
  cu = {-1, 1, 4};
  expectError((*packed)->run(q4, q4, q4, o4, lse3, nullptr, 1, nullptr, &varlen),
              "the query sequence offsets start at -1");
  cu = {0, 2, 6};
  varlen.cuSeqlensK = nullptr;
  expectError((*packed)->run(q4, q4, q4, o4, lse3, nullptr, 1, nullptr, &varlen),
              "needs the queries' and the keys' sequence offsets");
  expectError((*packed)->run(q4, q4, q4, o4, lse3), "pass its sequence offsets");
  varlen.cuSeqlensK = cu.data();
  expectError((*padded)->run(q4, q4, q4, o4, lse3, nullptr, 1, nullptr, &varlen),
              "compile it with varlen");
  // Over a paged cache the key offsets are not read (null is fine), the query offsets are.
  opts.varlen = true;
  opts.pagedKv = true;
  auto pagedVarlen = CpuKernel::compile(src.text, src.fileName, opts);
  ASSERT_TRUE(bool(pagedVarlen)) << llvm::toString(pagedVarlen.takeError());
  varlen.cuSeqlensQ = nullptr;
  varlen.cuSeqlensK = nullptr;
  int32_t table[2] = {0, 1}, lengths[2] = {2, 4};
  PagedKV paged = PagedKV::of(table, 1, 1, lengths, 4, 2);
  std::vector<float> cacheRows(size_t(2 * 4 * D), 1.0f);
  HostView cache = HostView::contiguous(cacheRows.data(), {2, 1, 4, D});
  expectError((*pagedVarlen)->run(q4, cache, cache, o4, lse3, nullptr, 1, &paged, &varlen),
              "needs the queries' and the keys' sequence offsets");
  expectError((*pagedVarlen)->run(q4, cache, cache, o4, lse3, nullptr, 1, nullptr, &varlen),
              "pass its page table and lengths");
}

} // namespace
