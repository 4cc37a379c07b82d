//===- TileGPUHints.h - discardable attributes a tgpu pass leaves for the lowering -*- C++ -*-===//
//
// Decisions a GPU-level pass makes that only the NVVM lowering acts on, written on the op as a
// discardable attribute (like tile.kv_loop and tgpu.tile_loop): the lowering reads them from
// the IR and infers nothing.
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_DIALECT_TILEGPUHINTS_H
#define TILEFUSE_DIALECT_TILEGPUHINTS_H

#include "llvm/ADT/StringRef.h"

namespace tilefuse::tgpu {

/// On a tgpu.wgmma_wait (tgpu-overlap-softmax: the rotated key loop's wait for the pending
/// P·V): the code before the wait must run while that wgmma is in flight. ptxas schedules a
/// basic block freely and hoists such a wait above the softmax's exp2s (they feed the packs
/// after it), which leaves only the row max beside the P·V; the lowering puts a branch that
/// ptxas cannot fold (on %clock) just before the wait, ending the block there.
constexpr llvm::StringLiteral kWaitAfterPrecedingCodeAttr = "tgpu.wait_after_preceding_code";

} // namespace tilefuse::tgpu

#endif
