//===- ScoreRegionCost.h - registers a kernel's score and mask regions take -*- C++ -*-===//
//
// The kernel configuration's register model (defaultTileConfig, resolveTileConfig) counts what a
// plain kernel holds: O, Q, the scores and P. A written kernel's tile.score_mod and tile.mask
// regions add work per score element, whose temporaries compete with those for the consumer's
// registers (ALiBi's bias, softcap's tanh); this counts it from the IR, so variants that differ
// only in their DSL text are configured from that text.
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_PASSES_SCOREREGIONCOST_H
#define TILEFUSE_PASSES_SCOREREGIONCOST_H

#include "mlir/IR/Operation.h"

#include <cstdint>

namespace tilefuse {

/// Registers per consumer thread the register model adds for one op evaluated per score element
/// (calibrated with ptxas -v on sm_90a, docs/perf.md "region cost").
constexpr int64_t registersPerElementOp = 9;

/// The ops of the written form's tile.score_mod and tile.mask regions under `kernel` that run
/// once per score element: those depending on the score, or on both q_idx and kv_idx. Not
/// counted: what depends on q_idx alone (once per row), on kv_idx alone (once per column), on b,
/// h or captured values alone (once per program: the kernels this model configures hold one head
/// per program), index casts (no instruction), and compares and i1 logic (the mask's predicate,
/// which a plain masked kernel such as causal also evaluates and the model's defaults absorb).
int64_t perElementRegionOps(mlir::Operation *kernel);

/// perElementRegionOps(kernel) * registersPerElementOp: the regionRegisters argument of
/// defaultTileConfig and resolveTileConfig. 0 for a kernel without score or mask arithmetic.
int64_t scoreRegionRegisters(mlir::Operation *kernel);

/// Whether a tile.mask region under `kernel` keeps or drops elements by comparing q_idx with
/// kv_idx: its kept value depends on both (causal, prefix-LM, windows, chunks). Such masks give
/// row blocks different numbers of visited key blocks after block pruning (causal: row block r
/// visits r + 1), which is what the default row order (defaultTileConfig's rowBlocksUnequal)
/// is chosen for. A mask of q_idx alone, kv_idx alone or neither does not.
bool maskComparesRowsWithColumns(mlir::Operation *kernel);

} // namespace tilefuse

#endif
