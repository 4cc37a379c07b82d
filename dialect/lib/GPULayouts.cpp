//===- GPULayouts.cpp - index arithmetic of the tgpu layouts ------------===//
//
// The layouts' formulas, written once (they began as those of the first GPU emitter, which
// convert-tgpu-to-nvvm replaced with the same output): the attributes' verifiers and the
// lowering's per-value offsets (codegen/lib/nvvm) call them.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/dialect/GPULayouts.h"

#include "llvm/Support/FormatVariadic.h"

#include <cassert>

using namespace tilefuse::tgpu;

RegisterLayout RegisterLayout::mmaAccumulator(int64_t warps, int64_t rowsPerWarp, int64_t cols) {
  return RegisterLayout(Kind::MmaAccumulator, warps, rowsPerWarp, cols);
}

RegisterLayout RegisterLayout::wgmmaAccumulator(int64_t warpgroups, int64_t cols) {
  return RegisterLayout(Kind::WgmmaAccumulator, 4 * warpgroups, 16, cols);
}

RegisterLayout RegisterLayout::operandA(int64_t warps, int64_t rowsPerWarp, int64_t cols) {
  return RegisterLayout(Kind::OperandA, warps, rowsPerWarp, cols);
}

RegisterLayout RegisterLayout::accumulatorRows(int64_t warps, int64_t rowsPerWarp) {
  return RegisterLayout(Kind::AccumulatorRows, warps, rowsPerWarp, 1);
}

int64_t RegisterLayout::getValuesPerThread() const {
  switch (kind) {
  case Kind::MmaAccumulator:
  case Kind::WgmmaAccumulator:
    return mTilesPerWarp() * (cols / 8) * 4; // four f32 per m16n8 tile
  case Kind::OperandA:
    return mTilesPerWarp() * (cols / 16) * 8; // four 32-bit registers per m16k16 fragment
  case Kind::AccumulatorRows:
    return mTilesPerWarp() * 2; // rows g and g + 8 of each m-tile
  }
  llvm_unreachable("register layout kind");
}

RowCol RegisterLayout::elementOf(int64_t thread, int64_t value) const {
  assert(thread >= 0 && thread < getThreads() && value >= 0 && value < getValuesPerThread());
  int64_t warp = thread / 32, lane = thread % 32, g = lane / 4, c = lane % 4;
  int64_t warpRow = warp * rowsPerWarp;
  switch (kind) {
  case Kind::MmaAccumulator:
  case Kind::WgmmaAccumulator: {
    int64_t perMTile = cols / 8 * 4;
    int64_t t = value / perMTile, j = value % perMTile / 4, r = value % 4;
    return {warpRow + 16 * t + g + 8 * (r / 2), 8 * j + 2 * c + r % 2};
  }
  case Kind::OperandA: {
    int64_t kTiles = cols / 16, fragment = value / 8, reg = value % 8 / 2;
    int64_t t = fragment / kTiles, kt = fragment % kTiles;
    return {warpRow + 16 * t + g + 8 * (reg % 2), 16 * kt + 8 * (reg / 2) + 2 * c + value % 2};
  }
  case Kind::AccumulatorRows:
    return {warpRow + 16 * (value / 2) + g + 8 * (value % 2), 0};
  }
  llvm_unreachable("register layout kind");
}

llvm::SmallVector<ThreadValue, 4> RegisterLayout::holdersOf(RowCol element) const {
  assert(element.row >= 0 && element.row < getRows() && element.col >= 0 &&
         element.col < cols);
  int64_t warp = element.row / rowsPerWarp, inWarp = element.row % rowsPerWarp;
  int64_t t = inWarp / 16, g = inWarp % 8, half = inWarp % 16 / 8; // half: rows g or g + 8
  int64_t quad = warp * 32 + 4 * g;                                // lane c = 0 of the row
  switch (kind) {
  case Kind::MmaAccumulator:
  case Kind::WgmmaAccumulator: {
    int64_t j = element.col / 8, inTile = element.col % 8;
    return {{quad + inTile / 2, t * (cols / 8 * 4) + 4 * j + 2 * half + inTile % 2}};
  }
  case Kind::OperandA: {
    int64_t kt = element.col / 16, inK = element.col % 16;
    int64_t reg = 2 * (inK / 8) + half;
    return {{quad + inK % 8 / 2, (t * (cols / 16) + kt) * 8 + 2 * reg + inK % 2}};
  }
  case Kind::AccumulatorRows: {
    llvm::SmallVector<ThreadValue, 4> holders;
    for (int64_t c = 0; c < 4; ++c)
      holders.push_back({quad + c, 2 * t + half});
    return holders;
  }
  }
  llvm_unreachable("register layout kind");
}

std::string tilefuse::tgpu::registerLayoutError(RegisterLayout::Kind kind, int64_t warps,
                                                int64_t rowsPerWarp, int64_t rows, int64_t cols,
                                                unsigned elementBits) {
  using Kind = RegisterLayout::Kind;
  if (rowsPerWarp != 16 && rowsPerWarp != 32)
    return llvm::formatv("rows per warp must be 16 or 32 (one or two m16 tiles), not {0}",
                         rowsPerWarp);
  if (warps < 1 || warps > 32)
    return llvm::formatv("a CTA has 1 to 32 warps, not {0}", warps);
  if (rows != warps * rowsPerWarp)
    return llvm::formatv("the layout covers {0} rows ({1} warps x {2}), the block has {3}",
                         warps * rowsPerWarp, warps, rowsPerWarp, rows);
  switch (kind) {
  case Kind::MmaAccumulator:
    if (cols % 8)
      return llvm::formatv("an m16n8 accumulator needs a multiple of 8 columns, not {0}", cols);
    break;
  case Kind::WgmmaAccumulator:
    if (cols % 8 || cols > 256)
      return llvm::formatv("an m64nN accumulator needs N a multiple of 8 up to 256, not {0}",
                           cols);
    break;
  case Kind::OperandA:
    if (elementBits != 16)
      return llvm::formatv("m16k16 A fragments hold 16-bit values, not {0}-bit", elementBits);
    if (cols % 16)
      return llvm::formatv("m16k16 A fragments need a multiple of 16 columns, not {0}", cols);
    // Each thread holds cols / 16 fragments of 4 registers per m-tile: past 256 columns that is
    // more than a thread has (and a lowering unrolled over them grows without bound).
    if (cols > 256)
      return llvm::formatv("m16k16 A fragments in registers cover at most 256 columns, not {0}",
                           cols);
    break;
  case Kind::AccumulatorRows:
    break;
  }
  return "";
}

std::string tilefuse::tgpu::sharedTileError(const SharedTile &tile) {
  if (tile.rows <= 0 || tile.cols <= 0)
    return llvm::formatv("a shared tile needs a positive static shape, not {0}x{1}", tile.rows,
                         tile.cols);
  if (tile.elementBytes <= 0)
    return "a shared tile holds whole bytes per element";
  if (tile.swizzle == SharedSwizzle::None)
    return "";
  // Both swizzles move 16-byte chunks: an element may not straddle one, and a row holds whole
  // chunks. The xor with row % 8 permutes groups of 8 chunks; a row short of a whole group is
  // padded (paddedRowBytes).
  if (16 % tile.elementBytes)
    return llvm::formatv("a swizzled tile moves 16-byte chunks; {0}-byte elements do not fit "
                         "them",
                         tile.elementBytes);
  if (tile.rowBytes() % 16)
    return llvm::formatv("{0} moves 16-byte chunks: rows must be a multiple of 16 bytes, not {1}",
                         stringifySharedSwizzle(tile.swizzle), tile.rowBytes());
  if (tile.swizzle == SharedSwizzle::Canonical128B && tile.rows % 8)
    return llvm::formatv("canonical_128b repeats every 8 rows (1024 bytes): rows must be a "
                         "multiple of 8, not {0}",
                         tile.rows);
  return "";
}

int64_t tilefuse::tgpu::sharedByteOffset(const SharedTile &tile, int64_t row, int64_t col) {
  assert(row >= 0 && row < tile.rows && col >= 0 && col < tile.cols);
  int64_t byte = col * tile.elementBytes, chunk = byte / 16, inChunk = byte % 16;
  switch (tile.swizzle) {
  case SharedSwizzle::None:
    return row * tile.rowBytes() + byte;
  case SharedSwizzle::ChunkXor:
    // The xor changes only the chunk's low 3 bits: the chunk stays in its 128-byte group.
    return row * tile.paddedRowBytes() + (chunk ^ (row % 8)) * 16 + inChunk;
  case SharedSwizzle::Canonical128B: {
    int64_t panel = chunk / 8;
    return panel * tile.rows * 128 + row * 128 + ((chunk % 8) ^ (row % 8)) * 16 + inChunk;
  }
  }
  llvm_unreachable("shared swizzle");
}

int64_t tilefuse::tgpu::sharedAlignment(SharedSwizzle swizzle) {
  switch (swizzle) {
  case SharedSwizzle::None:
    return 128; // a TMA destination without swizzle
  case SharedSwizzle::ChunkXor:
    return 16;
  case SharedSwizzle::Canonical128B:
    return 1024;
  }
  llvm_unreachable("shared swizzle");
}
