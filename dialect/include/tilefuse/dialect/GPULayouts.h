//===- GPULayouts.h - index arithmetic of the tgpu layouts ------*- C++ -*-===//
//
// The one place that knows where a block's elements live: for register layouts, which thread
// and which of its values holds (row, col); for shared tiles, at which byte offset. The tgpu
// attributes, their verifiers and (later) the lowerings to NVVM all call these functions, so
// a layout is defined once. test/unit/GPULayoutsTest.cpp checks them against the PTX ISA's
// fragment definitions.
//
// Lanes: g = lane / 4 (the "group", a row of an 8-row half of an m16 tile) and c = lane % 4
// (the thread in the quad, two adjacent columns each).
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_DIALECT_GPULAYOUTS_H
#define TILEFUSE_DIALECT_GPULAYOUTS_H

#include "tilefuse/dialect/TileGPUEnums.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>

namespace tilefuse::tgpu {

/// An mbarrier is one 64-bit word of shared memory (tgpu.alloc of an !nvgpu.mbarrier.group
/// places N of them, and their lowering addresses barrier i at 8·i bytes).
inline constexpr int64_t kMBarrierBytes = 8;

/// An element of a block: (row, col); for a vector (rank 1), col is 0.
struct RowCol {
  int64_t row = 0, col = 0;
  bool operator==(const RowCol &o) const { return row == o.row && col == o.col; }
  bool operator!=(const RowCol &o) const { return !(*this == o); }
};

/// A value of a thread: thread id in the CTA (0 .. threads-1), and its index among the
/// thread's values of the block (in the order a lowering keeps them, e.g. a vector's lanes).
struct ThreadValue {
  int64_t thread = 0, value = 0;
  bool operator==(const ThreadValue &o) const {
    return thread == o.thread && value == o.value;
  }
};

/// A block of `rows x cols` (or a vector of `rows`) spread over the registers of a CTA.
/// Construct with the named factories; their arguments must satisfy the constraints the
/// attributes verify (see TileGPUDialect.td), which `registerLayoutError` states.
class RegisterLayout {
public:
  enum class Kind { MmaAccumulator, WgmmaAccumulator, OperandA, AccumulatorRows };

  /// m16n8 accumulator: `warps` warps of `rowsPerWarp` (16 or 32) rows, `cols` columns.
  static RegisterLayout mmaAccumulator(int64_t warps, int64_t rowsPerWarp, int64_t cols);
  /// m64nN accumulator: `warpgroups` warpgroups of 64 rows, N = `cols`.
  static RegisterLayout wgmmaAccumulator(int64_t warpgroups, int64_t cols);
  /// m16k16 A fragments of 16-bit values: `warps` warps of `rowsPerWarp` rows, `cols` = K.
  static RegisterLayout operandA(int64_t warps, int64_t rowsPerWarp, int64_t cols);
  /// One value per row of an accumulator with `warps` warps of `rowsPerWarp` rows.
  static RegisterLayout accumulatorRows(int64_t warps, int64_t rowsPerWarp);

  Kind getKind() const { return kind; }
  int64_t getThreads() const { return 32 * warps; }
  int64_t getRows() const { return warps * rowsPerWarp; }
  /// Columns of the block; 1 for a row vector.
  int64_t getCols() const { return cols; }
  /// Values each thread holds (all threads hold the same number).
  int64_t getValuesPerThread() const;
  /// How many (thread, value) pairs hold each element: 1, or 4 for a row vector (a quad).
  int64_t getReplication() const { return kind == Kind::AccumulatorRows ? 4 : 1; }

  /// The element that value `value` of thread `thread` holds.
  RowCol elementOf(int64_t thread, int64_t value) const;
  /// Every (thread, value) holding `element`, in thread order (getReplication() of them).
  llvm::SmallVector<ThreadValue, 4> holdersOf(RowCol element) const;

private:
  RegisterLayout(Kind kind, int64_t warps, int64_t rowsPerWarp, int64_t cols)
      : kind(kind), warps(warps), rowsPerWarp(rowsPerWarp), cols(cols) {}
  int64_t mTilesPerWarp() const { return rowsPerWarp / 16; }

  Kind kind;
  int64_t warps, rowsPerWarp, cols;
};

/// Why a register layout of `kind` cannot lay out a block of `rows x cols` (cols = 1 for a
/// vector) with these parameters, or an empty string when it can. `elementBits` is the width
/// of the block's element type. The attributes' verifiers report this text.
std::string registerLayoutError(RegisterLayout::Kind kind, int64_t warps, int64_t rowsPerWarp,
                                int64_t rows, int64_t cols, unsigned elementBits);

/// A shared tile's geometry: `rows x cols` elements of `elementBytes` each, row-major.
struct SharedTile {
  SharedSwizzle swizzle = SharedSwizzle::None;
  int64_t rows = 0, cols = 0, elementBytes = 0;
  /// Bytes of a row's elements.
  int64_t rowBytes() const { return cols * elementBytes; }
  /// Bytes a row occupies: both swizzles permute groups of eight 16-byte chunks, so a swizzled
  /// row is padded to whole 128-byte groups (a head dimension of 32 or 96 in bf16), whose
  /// padding is never read or written.
  int64_t paddedRowBytes() const {
    return swizzle == SharedSwizzle::None ? rowBytes() : (rowBytes() + 127) / 128 * 128;
  }
  /// Bytes from a row's start to the next row's: its padded size, or 128 in canonical_128b,
  /// whose rows are 128-byte panel rows.
  int64_t rowPitchBytes() const {
    return swizzle == SharedSwizzle::Canonical128B ? 128 : paddedRowBytes();
  }
  int64_t sizeInBytes() const { return rows * paddedRowBytes(); }
};

/// Why `tile` cannot be laid out with its swizzle, or an empty string when it can.
std::string sharedTileError(const SharedTile &tile);

/// Byte offset of element (row, col) from the tile's base address.
int64_t sharedByteOffset(const SharedTile &tile, int64_t row, int64_t col);

/// The base alignment the swizzle needs: a 128-byte swizzle is computed from address bits
/// 4-9 by the tensor cores and TMA, so its tile starts on 1024 bytes; chunk-wise access
/// (cp.async, ldmatrix) needs 16.
int64_t sharedAlignment(SharedSwizzle swizzle);

} // namespace tilefuse::tgpu

#endif
