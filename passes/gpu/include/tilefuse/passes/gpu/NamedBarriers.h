//===- NamedBarriers.h - the hardware barrier ids the GPU passes use -*- C++ -*-===//
//
// Barrier 0 is the CTA's (gpu.barrier). A warp-specialized kernel's partitions cannot meet
// there (the producer never arrives), so the passes that order warps within a partition use
// named barriers (tgpu.named_barrier), each id given out here once.
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_PASSES_GPU_NAMEDBARRIERS_H
#define TILEFUSE_PASSES_GPU_NAMEDBARRIERS_H

#include <cstdint>

namespace tilefuse::tgpu {

/// tgpu-pingpong's round-robin between the consumer warpgroups: warpgroup w syncs on
/// kPingPongFirstBarrier + w (at most 3 consumer warpgroups: ids 1 to 3).
inline constexpr int32_t kPingPongFirstBarrier = 1;

/// tgpu-insert-barriers' barrier over all consumer threads, around the copies the consumers
/// issue themselves (q=shared's Q).
inline constexpr int32_t kConsumersBarrier = 8;

/// A split-KV kernel's arrival at its row block (tile.split_arrive) in a warp-specialized
/// kernel: the consumer threads, which stored the partial result, meet there before one of them
/// counts the CTA (tgpu-warp-specialize writes it on the op).
inline constexpr int32_t kSplitArriveBarrier = 9;

/// tgpu-store-output-by-tma: consumer warpgroup w's threads meet on kOutputStoreFirstBarrier + w
/// around writing their rows of O into shared memory (at most 3 consumer warpgroups: 10 to 12).
inline constexpr int32_t kOutputStoreFirstBarrier = 10;

} // namespace tilefuse::tgpu

#endif
