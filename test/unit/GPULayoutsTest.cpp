//===- GPULayoutsTest.cpp - the tgpu layouts against the PTX ISA ---------===//
//
// The layout arithmetic of dialect/lib/GPULayouts.cpp checked against definitions written
// here from the PTX ISA's fragment figures (mma.m16n8k16 A and C/D, wgmma m64nNk16 D) and the
// 128-byte swizzle's address-bit definition, plus the properties the lowerings rely on: every
// element held exactly once (or once per quad lane for row vectors), ownership inverting
// placement, swizzles permuting whole 16-byte chunks within a row (panel) and repeating every
// 8 rows.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/dialect/GPULayouts.h"
#include "tilefuse/dialect/TileGPUDialect.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

using namespace tilefuse::tgpu;

namespace {

// PTX ISA, "Matrix Fragments for mma.m16n8k16" (f16/bf16 A, f32 C/D) and "Register Fragments
// and Shared Memory Matrix Layouts" for wgmma m64nNk16 D. groupID = laneid >> 2,
// threadID_in_group = laneid % 4.
RowCol ptxMmaAccumulator(int64_t lane, int64_t i) { // c_i / d_i, i in [0, 4)
  int64_t groupID = lane >> 2, threadInGroup = lane % 4;
  return {i < 2 ? groupID : groupID + 8, threadInGroup * 2 + (i & 1)};
}
RowCol ptxMmaOperandA(int64_t lane, int64_t i) { // a_i, i in [0, 8), two per .b32 register
  int64_t groupID = lane >> 2, threadInGroup = lane % 4;
  int64_t row = (i < 2 || (i >= 4 && i < 6)) ? groupID : groupID + 8;
  int64_t col = threadInGroup * 2 + (i & 1) + (i >= 4 ? 8 : 0);
  return {row, col};
}
RowCol ptxWgmmaAccumulator(int64_t threadInWarpgroup, int64_t i) { // d_i, i in [0, N/2)
  int64_t warp = threadInWarpgroup / 32, lane = threadInWarpgroup % 32;
  int64_t groupID = lane >> 2, threadInGroup = lane % 4;
  return {16 * warp + groupID + 8 * ((i % 4) / 2), (i / 4) * 8 + threadInGroup * 2 + (i % 2)};
}

/// Every (thread, value) maps into the block; each element is held getReplication() times;
/// holdersOf lists exactly the pairs that hold an element.
void expectCoverage(const RegisterLayout &layout) {
  std::map<std::pair<int64_t, int64_t>, std::vector<ThreadValue>> held;
  for (int64_t t = 0; t < layout.getThreads(); ++t)
    for (int64_t v = 0; v < layout.getValuesPerThread(); ++v) {
      RowCol e = layout.elementOf(t, v);
      ASSERT_GE(e.row, 0);
      ASSERT_LT(e.row, layout.getRows());
      ASSERT_GE(e.col, 0);
      ASSERT_LT(e.col, layout.getCols());
      held[{e.row, e.col}].push_back({t, v});
    }
  ASSERT_EQ((int64_t)held.size(), layout.getRows() * layout.getCols());
  for (auto &[element, holders] : held) {
    ASSERT_EQ((int64_t)holders.size(), layout.getReplication());
    auto owners = layout.holdersOf({element.first, element.second});
    ASSERT_EQ(owners.size(), holders.size());
    for (size_t k = 0; k < owners.size(); ++k)
      EXPECT_EQ(owners[k], holders[k]) << element.first << "," << element.second;
  }
}

TEST(GPULayouts, MmaAccumulatorIsThePtxFragmentPerTile) {
  for (int64_t rowsPerWarp : {16, 32})
    for (int64_t warps : {1, 4, 8})
      for (int64_t cols : {8, 64, 128}) {
        auto layout = RegisterLayout::mmaAccumulator(warps, rowsPerWarp, cols);
        int64_t nTiles = cols / 8;
        ASSERT_EQ(layout.getValuesPerThread(), rowsPerWarp / 16 * nTiles * 4);
        for (int64_t t = 0; t < layout.getThreads(); ++t)
          for (int64_t v = 0; v < layout.getValuesPerThread(); ++v) {
            // Values are m-tile major, then n-tile, then the fragment's c_i.
            int64_t mTile = v / (nTiles * 4), nTile = v / 4 % nTiles, i = v % 4;
            RowCol inTile = ptxMmaAccumulator(t % 32, i);
            RowCol expected{t / 32 * rowsPerWarp + 16 * mTile + inTile.row,
                            8 * nTile + inTile.col};
            ASSERT_EQ(layout.elementOf(t, v), expected) << "thread " << t << " value " << v;
          }
        expectCoverage(layout);
      }
}

TEST(GPULayouts, OperandAIsThePtxFragmentPerTile) {
  for (int64_t rowsPerWarp : {16, 32})
    for (int64_t warps : {1, 4})
      for (int64_t cols : {16, 64, 128}) {
        auto layout = RegisterLayout::operandA(warps, rowsPerWarp, cols);
        int64_t kTiles = cols / 16;
        ASSERT_EQ(layout.getValuesPerThread(), rowsPerWarp / 16 * kTiles * 8);
        for (int64_t t = 0; t < layout.getThreads(); ++t)
          for (int64_t v = 0; v < layout.getValuesPerThread(); ++v) {
            // Fragments m-tile major, then k-tile; within one, a_0 .. a_7.
            int64_t fragment = v / 8, mTile = fragment / kTiles, kTile = fragment % kTiles;
            RowCol inTile = ptxMmaOperandA(t % 32, v % 8);
            RowCol expected{t / 32 * rowsPerWarp + 16 * mTile + inTile.row,
                            16 * kTile + inTile.col};
            ASSERT_EQ(layout.elementOf(t, v), expected) << "thread " << t << " value " << v;
          }
        expectCoverage(layout);
      }
}

TEST(GPULayouts, WgmmaAccumulatorIsThePtxFragmentPerWarpgroup) {
  for (int64_t warpgroups : {1, 2, 3})
    for (int64_t n : {8, 16, 64, 128, 256}) {
      auto layout = RegisterLayout::wgmmaAccumulator(warpgroups, n);
      ASSERT_EQ(layout.getThreads(), 128 * warpgroups);
      ASSERT_EQ(layout.getValuesPerThread(), n / 2);
      for (int64_t t = 0; t < layout.getThreads(); ++t)
        for (int64_t v = 0; v < n / 2; ++v) {
          RowCol inGroup = ptxWgmmaAccumulator(t % 128, v);
          RowCol expected{64 * (t / 128) + inGroup.row, inGroup.col};
          ASSERT_EQ(layout.elementOf(t, v), expected) << "thread " << t << " value " << v;
        }
      expectCoverage(layout);
    }
}

// wgmma's D fragment is mma.sync's with one m-tile per warp: a block moves between the two
// paths without a shuffle (the wgmma lowering relies on it for P and the row vectors).
TEST(GPULayouts, WgmmaAccumulatorEqualsMmaAccumulatorOfItsWarps) {
  for (int64_t warpgroups : {1, 2})
    for (int64_t n : {64, 128}) {
      auto wg = RegisterLayout::wgmmaAccumulator(warpgroups, n);
      auto mma = RegisterLayout::mmaAccumulator(4 * warpgroups, 16, n);
      for (int64_t t = 0; t < wg.getThreads(); ++t)
        for (int64_t v = 0; v < wg.getValuesPerThread(); ++v)
          ASSERT_EQ(wg.elementOf(t, v), mma.elementOf(t, v));
    }
}

// P (accumulator layout, columns = the contraction) is the A operand of P x V value by value.
TEST(GPULayouts, AccumulatorConvertsToOperandAInPlace) {
  for (int64_t rowsPerWarp : {16, 32})
    for (int64_t k : {16, 64, 128}) {
      auto acc = RegisterLayout::mmaAccumulator(4, rowsPerWarp, k);
      auto a = RegisterLayout::operandA(4, rowsPerWarp, k);
      ASSERT_EQ(acc.getValuesPerThread(), a.getValuesPerThread());
      for (int64_t t = 0; t < acc.getThreads(); ++t)
        for (int64_t v = 0; v < acc.getValuesPerThread(); ++v)
          ASSERT_EQ(acc.elementOf(t, v), a.elementOf(t, v)) << "thread " << t << " value " << v;
    }
}

// A row vector holds, in each thread, exactly the rows the thread holds in the accumulator,
// so a row reduction needs only the quad's shuffles and a broadcast none.
TEST(GPULayouts, AccumulatorRowsAreTheThreadsAccumulatorRows) {
  for (int64_t rowsPerWarp : {16, 32}) {
    auto rows = RegisterLayout::accumulatorRows(4, rowsPerWarp);
    auto acc = RegisterLayout::mmaAccumulator(4, rowsPerWarp, 64);
    ASSERT_EQ(rows.getReplication(), 4);
    for (int64_t t = 0; t < rows.getThreads(); ++t) {
      std::set<int64_t> fromRows, fromAcc;
      for (int64_t v = 0; v < rows.getValuesPerThread(); ++v) {
        EXPECT_EQ(rows.elementOf(t, v).col, 0);
        fromRows.insert(rows.elementOf(t, v).row);
      }
      for (int64_t v = 0; v < acc.getValuesPerThread(); ++v)
        fromAcc.insert(acc.elementOf(t, v).row);
      ASSERT_EQ(fromRows, fromAcc) << "thread " << t;
      ASSERT_EQ((int64_t)fromRows.size(), rows.getValuesPerThread());
    }
    expectCoverage(rows);
    // The holders of a row are the four lanes of one quad.
    auto holders = rows.holdersOf({9, 0});
    for (int64_t c = 0; c < 4; ++c)
      EXPECT_EQ(holders[c].thread, holders[0].thread + c);
  }
}

TEST(GPULayouts, RegisterLayoutErrors) {
  using Kind = RegisterLayout::Kind;
  EXPECT_EQ(registerLayoutError(Kind::MmaAccumulator, 4, 16, 64, 64, 32), "");
  EXPECT_NE(registerLayoutError(Kind::MmaAccumulator, 4, 24, 96, 64, 32), "");
  EXPECT_NE(registerLayoutError(Kind::MmaAccumulator, 4, 16, 128, 64, 32), "");
  EXPECT_NE(registerLayoutError(Kind::MmaAccumulator, 4, 16, 64, 12, 32), "");
  EXPECT_NE(registerLayoutError(Kind::MmaAccumulator, 33, 16, 528, 64, 32), "");
  EXPECT_NE(registerLayoutError(Kind::WgmmaAccumulator, 4, 16, 64, 264, 32), "");
  EXPECT_NE(registerLayoutError(Kind::OperandA, 4, 16, 64, 64, 32), "");
  EXPECT_NE(registerLayoutError(Kind::OperandA, 4, 16, 64, 40, 16), "");
}

//===----------------------------------------------------------------------===//
// Shared tiles
//===----------------------------------------------------------------------===//

/// Offsets of every element: a permutation of the tile's bytes at element granularity, each
/// 16-byte chunk kept contiguous and in order.
void expectChunkPermutation(const SharedTile &tile) {
  std::set<int64_t> offsets;
  int64_t perChunk = 16 / tile.elementBytes;
  for (int64_t r = 0; r < tile.rows; ++r)
    for (int64_t c = 0; c < tile.cols; ++c) {
      int64_t off = sharedByteOffset(tile, r, c);
      ASSERT_GE(off, 0);
      ASSERT_LT(off, tile.sizeInBytes());
      ASSERT_EQ(off % tile.elementBytes, 0);
      offsets.insert(off);
      int64_t chunkStart = c - c % perChunk;
      ASSERT_EQ(off, sharedByteOffset(tile, r, chunkStart) + (c - chunkStart) * tile.elementBytes);
      if (c == chunkStart) {
        ASSERT_EQ(off % 16, 0);
      }
    }
  ASSERT_EQ((int64_t)offsets.size(), tile.rows * tile.cols);
}

/// ldmatrix / the tensor cores read one 16-byte chunk column of 8 consecutive rows at a
/// time; a swizzle exists so that these 8 chunks fall in 8 different 16-byte bank groups.
void expectConflictFreeColumns(const SharedTile &tile) {
  for (int64_t r0 = 0; r0 + 8 <= tile.rows; r0 += 8)
    for (int64_t c = 0; c < tile.cols; c += 16 / tile.elementBytes) {
      std::set<int64_t> bankGroups;
      for (int64_t r = r0; r < r0 + 8; ++r)
        bankGroups.insert(sharedByteOffset(tile, r, c) / 16 % 8);
      ASSERT_EQ(bankGroups.size(), 8u) << "rows " << r0 << ".. column " << c;
    }
}

TEST(GPULayouts, ChunkXorPermutesChunksWithinEachRow) {
  // Rows short of a whole 128-byte group (head dims 16, 32, 96, 160 in bf16) are padded.
  for (int64_t cols : {16, 32, 64, 96, 128, 160, 256})
    for (int64_t rows : {8, 16, 64, 128}) {
      SharedTile tile{SharedSwizzle::ChunkXor, rows, cols, 2};
      ASSERT_EQ(sharedTileError(tile), "");
      expectChunkPermutation(tile);
      expectConflictFreeColumns(tile);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; c += 8) {
          int64_t off = sharedByteOffset(tile, r, c);
          // Row r stays in its padded bytes [r * pitch, (r + 1) * pitch), chunk c/8 at
          // c/8 ^ r%8.
          int64_t pitch = tile.paddedRowBytes();
          ASSERT_EQ(pitch % 128, 0);
          ASSERT_EQ(off / pitch, r);
          ASSERT_EQ(off % pitch / 16, (c / 8) ^ (r % 8));
          if (r + 8 < rows) { // the pattern repeats every 8 rows
            ASSERT_EQ(sharedByteOffset(tile, r + 8, c), off + 8 * pitch);
          }
        }
    }
}

TEST(GPULayouts, Canonical128BIsTheAddressBitSwizzleOfPanels) {
  for (int64_t elementBytes : {2, 4})
    // 64, 192 and 320 bytes: a last panel used in part (head dims 32, 96, 160 in bf16).
    for (int64_t rowBytes : {64, 128, 192, 256, 320, 512})
      for (int64_t rows : {8, 64, 128}) {
        int64_t cols = rowBytes / elementBytes;
        SharedTile tile{SharedSwizzle::Canonical128B, rows, cols, elementBytes};
        ASSERT_EQ(sharedTileError(tile), "");
        expectChunkPermutation(tile);
        expectConflictFreeColumns(tile);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < cols; ++c) {
            // Unswizzled: 128-byte panels of rows x 128 bytes; the hardware's 128B swizzle
            // xors address bits 4-6 with bits 7-9 (1024-byte aligned base).
            int64_t byte = c * elementBytes, panel = byte / 128;
            int64_t plain = panel * rows * 128 + r * 128 + byte % 128;
            int64_t swizzled = plain ^ ((plain >> 3) & 0x70);
            ASSERT_EQ(sharedByteOffset(tile, r, c), swizzled) << r << "," << c;
            if (r + 8 < rows) { // every 8 rows, 1024 bytes on
              ASSERT_EQ(sharedByteOffset(tile, r + 8, c), swizzled + 1024);
            }
          }
      }
}

TEST(GPULayouts, UnswizzledIsRowMajor) {
  SharedTile tile{SharedSwizzle::None, 16, 24, 2};
  ASSERT_EQ(sharedTileError(tile), "");
  for (int64_t r = 0; r < 16; ++r)
    for (int64_t c = 0; c < 24; ++c)
      ASSERT_EQ(sharedByteOffset(tile, r, c), r * 48 + c * 2);
}

TEST(GPULayouts, SharedTileErrors) {
  EXPECT_NE(sharedTileError({SharedSwizzle::ChunkXor, 64, 4, 2}), "");      // 8-byte rows
  EXPECT_NE(sharedTileError({SharedSwizzle::Canonical128B, 64, 12, 2}), ""); // 24-byte rows
  EXPECT_NE(sharedTileError({SharedSwizzle::Canonical128B, 12, 64, 2}), ""); // rows % 8
  // Padded rows: 64 x 96 bf16 (192 bytes a row) occupies 64 x 256 bytes swizzled.
  SharedTile padded{SharedSwizzle::Canonical128B, 64, 96, 2};
  EXPECT_EQ(padded.paddedRowBytes(), 256);
  EXPECT_EQ(padded.sizeInBytes(), 64 * 256);
  EXPECT_EQ(padded.rowPitchBytes(), 128);
  EXPECT_EQ((SharedTile{SharedSwizzle::None, 64, 96, 2}.sizeInBytes()), 64 * 192);
  EXPECT_NE(sharedTileError({SharedSwizzle::ChunkXor, 64, 8, 32}), "");     // 32-byte elements
  EXPECT_EQ(sharedAlignment(SharedSwizzle::Canonical128B), 1024);
}

// The attributes hand out the same arithmetic.
TEST(GPULayouts, AttributesUseTheLayoutArithmetic) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<TGPUDialect>();
  auto acc = MmaAccumulatorLayoutAttr::get(&ctx, 4, 32);
  auto viaInterface = mlir::cast<RegisterLayoutInterface>(mlir::Attribute(acc))
                          .getRegisterLayout({128, 64});
  auto direct = RegisterLayout::mmaAccumulator(4, 32, 64);
  for (int64_t v = 0; v < direct.getValuesPerThread(); ++v)
    EXPECT_EQ(viaInterface.elementOf(37, v), direct.elementOf(37, v));
  auto buffer = BufferType::get(&ctx, {64, 128}, mlir::BFloat16Type::get(&ctx),
                                SharedLayoutAttr::get(&ctx, SharedSwizzle::Canonical128B));
  EXPECT_EQ(buffer.getSizeInBytes(), 64 * 128 * 2);
  EXPECT_EQ(buffer.getAlignment(), 1024);
  EXPECT_EQ(sharedByteOffset(buffer.getSharedTile(), 1, 64), 64 * 128 + 128 + 16);
}

} // namespace
