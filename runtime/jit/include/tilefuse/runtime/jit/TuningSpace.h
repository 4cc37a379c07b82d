//===- TuningSpace.h - the autotuner's configurations and resource model -*- C++ -*-===//
//
// The configurations the autotuner considers for a kernel: every combination of the TileConfig
// axes (block sizes, rows per warp, MMA kind, where Q lives, when copies issue), each checked
// for consistency (TileConfig::verify) and against a resource model of the chip before anything
// is compiled. A candidate that cannot fit is kept in the list, pruned, with the reason, so the
// tuner's table says why it was never timed.
//
// The resource model:
//   shared memory  what tgpu-allocate-shared-memory allocates: the K ring (stages), V, and Q when it lives in
//                  shared memory, each buffer rounded up to 1 KiB (the wgmma swizzle atom); the
//                  seed formula 4·Br·d + 4·Bc·d + 2·Br·Bc + 8·Br is reported beside it. Checked
//                  against the compiled kernel's shared_bytes in TuningSpaceTest.
//   registers      an estimate per thread: the O accumulator (rows_per_warp·d/32 f32), the
//                  scores (rows_per_warp·Bc/32 f32), Q when in registers (rows_per_warp·d/64
//                  packed pairs) and a fixed 32 for addresses, the running max and sum. Over 255
//                  per thread (ptxas' limit) it would spill; over the SM's register file per
//                  block it cannot launch. The driver's JIT report decides in the end: the tuner
//                  drops kernels that spill anyway.
//   threads        at most the chip's threads per block.
//   ctas_per_sm    the register budget (TileConfig::ctasPerSm) must be reachable: N CTAs' threads
//                  within the SM's 2048 and their shared memory within the SM's; a budget of
//                  255 or more registers is no budget (the same kernel as without it); one below
//                  the O accumulator and the scores alone (rows_per_warp·(d + Bc)/32) would
//                  only spill. ptxas decides the rest: a budget it cannot meet spills, and the
//                  tuner drops the kernel.
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_RUNTIME_JIT_TUNINGSPACE_H
#define TILEFUSE_RUNTIME_JIT_TUNINGSPACE_H

#include "tilefuse/runtime/TileConfig.h"

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tilefuse::runtime::jit {

/// What one block may use on a chip.
struct ChipLimits {
  int64_t sharedBytesPerBlock = 0; ///< opt-in dynamic shared memory per block
  int64_t threadsPerBlock = 1024;
  int64_t registersPerThread = 255;
  int64_t registersPerBlock = 65536;
  /// What the SM holds for all its CTAs at once (ctas_per_sm): shared memory (less the 1 KiB
  /// the driver reserves per CTA) and threads.
  int64_t sharedBytesPerSm = 0;
  int64_t reservedSharedBytesPerBlock = 1024;
  int64_t threadsPerSm = 2048;

  /// The limits of the chip's reference part: sm_90a (H100/H200: 227 KiB), sm_80 (A100:
  /// 163 KiB). Prefer the device's own numbers where there is one (the tuner asks the driver).
  static ChipLimits forChip(llvm::StringRef chip);
};

/// The model's numbers for one configuration.
struct ResourceEstimate {
  int64_t sharedBytes = 0;        ///< as tgpu-allocate-shared-memory lays the buffers out
  int64_t seedSharedBytes = 0;    ///< 4·Br·d + 4·Bc·d + 2·Br·Bc + 8·Br
  int64_t registersPerThread = 0; ///< estimated (see the file comment)
  int64_t threads = 0;
  /// Of `threads`, the warp-specialized kernel's producer warpgroup, which gives its registers
  /// to the consumers (24 each): the register estimate is the consumers'.
  int64_t producerThreads = 0;
};

/// The model for a complete configuration, head dimension and element size (2: bf16 / f16).
ResourceEstimate estimateResources(const TileConfig &config, int64_t headDim,
                                   int64_t elementBytes = 2);

/// The values each axis takes; the space is their product.
struct TuningAxes {
  std::vector<int64_t> blockM, blockN, rowsPerWarp;
  std::vector<MmaKind> mma;
  std::vector<QOperand> qOperand;
  std::vector<CopyIssue> copyIssue;
  std::vector<int64_t> stages;
  std::vector<bool> packGqa = {false};
  /// The register budget; nullopt: none (the compiler's choice).
  std::vector<std::optional<int64_t>> ctasPerSm = {std::nullopt};
  /// Warp specialization (TMA producer, wgmma consumers), always explicit: a candidate's
  /// configuration is what it says, never the head dimension's default.
  std::vector<bool> warpSpecialize = {false};
  /// The rotated key loop of a warp-specialized candidate (softmax_overlap); a candidate without
  /// warp specialization leaves it unset.
  std::vector<bool> softmaxOverlap = {false};

  /// Br 64/128/256, Bc 32/64/128/256, rows per warp 16/32, Q in registers or shared, both copy
  /// issues, 2 or 3 key ring stages; mma.sync, and wgmma on sm_90a; GQA packing off (the
  /// split-KV kernels, where it pays, ask for it); no register budget, or 2, 3 or 4 CTAs an SM;
  /// warp specialization off, and on sm_90a on too (the tuner turns it off for paged and split
  /// kernels), with its key loop rotated or not.
  static TuningAxes forChip(llvm::StringRef chip);

  /// Leaves warp specialization (and its rotated loop) off for the kernels it does not build:
  /// a paged cache's gathered keys have no TMA loads to specialize warps around, and a split
  /// kernel's merge has not run warp-specialized. (A packed varlen batch's keys are one tensor.)
  void withoutWarpRolesWhereUnsupported(bool pagedKv, bool splitKv);
};

struct Candidate {
  TileConfig config;
  ResourceEstimate estimate;
  bool pruned = false;
  std::string reason; ///< why it was pruned
  /// The default, or the default with one measured setting the other way (addDefaultCandidates):
  /// timed before the enumerated candidates, which a tuning budget may not reach.
  bool nearDefault = false;
};

/// Every combination of `axes`, in a fixed order; inconsistent combinations (TileConfig::verify:
/// wgmma with 32 rows per warp, Br not a multiple of rows per warp, ...) are left out, those the
/// resource model rules out are pruned with the reason.
std::vector<Candidate> enumerateSpace(int64_t headDim, llvm::StringRef chip,
                                      const ChipLimits &limits, const TuningAxes &axes,
                                      int64_t elementBytes = 2);

/// `config` with an unset row order read as the kernel's default one (`defaults`', which may be
/// descending: defaultTileConfig's rowBlocksUnequal): the enumerated candidates leave it unset
/// and compile with the default's.
TileConfig inDefaultRowOrder(TileConfig config, const TileConfig &defaults);

/// Adds to an enumerated `space` the default configuration `defaults` (the kernel compiled
/// without a request; an enumerated candidate that compiles to the same kernel is dropped, so
/// it is timed once, as the default) and the default with its grid's row blocks (a persistent
/// kernel's tile loop) in the other order: the same kernel in another launch order, which only
/// the timing tells apart. Ascending is spelled out there (row_order=ascending) where the
/// default is descending. A warp-specialized default is also timed with its persistence
/// toggled (persistent=true or false). Candidates, not axes: an axis would double the space.
void addDefaultCandidates(std::vector<Candidate> &space, const TileConfig &defaults,
                          int64_t headDim, llvm::StringRef chip);

/// The split counts the tuner times for a split-KV configuration on one grid besides the
/// launcher's choice `policySplits` (CudaKernel::chooseKeySplits, which the tuner times as
/// kvSplits = 0): no split (1), half and twice the policy's choice, and the policy's choice
/// itself, each within [1, min(keyBlocks, 128)] (a split of no key block would only pay the
/// merge; 128 is the policy's own bound), ascending, without duplicates. Four at most: each is
/// timed on every candidate configuration, and a decode tuning's budget is seconds. The sweep
/// of docs/perf.md (2026-11-30) found the policy's misses one halving or doubling away.
std::vector<int64_t> keySplitCandidates(int64_t policySplits, int64_t keyBlocks);
/// The same around chooseKeySplits(programs, slots, keyBlocks).
std::vector<int64_t> keySplitCandidates(int64_t programs, int64_t slots, int64_t keyBlocks);

} // namespace tilefuse::runtime::jit

#endif
