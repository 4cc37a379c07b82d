//===- TuningSpace.cpp - the autotuner's configurations and resource model ===//
#include "tilefuse/runtime/jit/TuningSpace.h"

#include "tilefuse/runtime/cuda/CudaKernel.h"

#include "llvm/Support/MathExtras.h"

#include <algorithm>

using namespace tilefuse::runtime;
using namespace tilefuse::runtime::jit;

ChipLimits ChipLimits::forChip(llvm::StringRef chip) {
  ChipLimits limits;
  // cudaDevAttrMaxSharedMemoryPerBlockOptin of the H100/H200 and of the A100.
  limits.sharedBytesPerBlock = chip == "sm_90a" ? 232448 : 166912;
  // cudaDevAttrMaxSharedMemoryPerMultiprocessor: 228 KiB and 164 KiB.
  limits.sharedBytesPerSm = chip == "sm_90a" ? 233472 : 167936;
  return limits;
}

ResourceEstimate jit::estimateResources(const TileConfig &config, int64_t headDim,
                                        int64_t elementBytes) {
  ResourceEstimate e;
  int64_t br = config.blockM.value_or(0), bc = config.blockN.value_or(0);
  int64_t rows = config.rowsPerWarp.value_or(16), d = headDim;
  // tgpu-allocate-shared-memory's buffers: each aligned to 1 KiB (the 128-byte swizzle).
  auto buffer = [](int64_t bytes) { return int64_t(llvm::alignTo(bytes, 1024)); };
  int64_t keyBlock = buffer(bc * d * elementBytes);
  int64_t stages = config.stages.value_or(2);
  e.sharedBytes = stages * keyBlock /* the K ring */ + keyBlock /* V */;
  if (config.prefetchValues.value_or(false))
    e.sharedBytes = 2 * stages * keyBlock; // V in a ring as deep as K's

  // Warp-specialized: the values have a ring of their own, and each stage two mbarriers.
  if (config.warpSpecialize.value_or(false))
    e.sharedBytes = 2 * stages * keyBlock + 4 * stages * 8;
  if (config.qOperand == QOperand::Shared)
    e.sharedBytes += buffer(br * d * elementBytes);
  // Q loaded by the producer: its one stage's two mbarriers.
  if (config.loadsQWithTma())
    e.sharedBytes += 2 * 8;
  // Overlapped tile boundaries give Q a second stage (the next tile's, while this one's last
  // P·V is in flight) and its two mbarriers.
  if (config.overlapTiles.value_or(false) && config.qOperand == QOperand::Shared)
    e.sharedBytes += buffer(br * d * elementBytes) + 2 * 8;
  // P's row sums on the tensor cores: an 8 x 64 block of ones.
  if (config.sumsRowsOnTensorCores())
    e.sharedBytes += buffer(8 * 64 * elementBytes);
  e.seedSharedBytes = 4 * br * d + 4 * bc * d + 2 * br * bc + 8 * br;
  int64_t accumulator = rows * d / 32, scores = rows * bc / 32;
  int64_t query = config.qOperand == QOperand::Shared ? 0 : rows * d / 64;
  e.registersPerThread = accumulator + scores + query + 32;
  // The rotated loop keeps the pending block's P (bf16, half the scores' registers) beside them.
  if (config.softmaxOverlap.value_or(false))
    e.registersPerThread += scores / 2;
  e.threads = config.threads();
  e.producerThreads = config.producerThreads();
  return e;
}

TuningAxes TuningAxes::forChip(llvm::StringRef chip) {
  TuningAxes axes;
  // 192: three consumer warpgroups (FlashAttention-3's d64 tile), with Q in shared memory the
  // d64 kernel that measured 1.09x / 1.02x cuDNN at 16k and 0.80x / 0.63x at 1k (docs/perf.md,
  // sixteenth session), so a choice by sequence length, which the tuner's key has.
  axes.blockM = {64, 128, 192, 256};
  axes.blockN = {32, 64, 128, 256};
  axes.rowsPerWarp = {16, 32};
  axes.mma = {MmaKind::Sync};
  if (chip == "sm_90a")
    axes.mma.push_back(MmaKind::Wgmma);
  axes.qOperand = {QOperand::Registers, QOperand::Shared};
  axes.copyIssue = {CopyIssue::Eager, CopyIssue::AtBarrier};
  axes.stages = {2, 3};
  axes.ctasPerSm = {std::nullopt, 2, 3, 4};
  if (chip == "sm_90a") {
    axes.warpSpecialize = {false, true};
    axes.softmaxOverlap = {false, true};
  }
  return axes;
}

void TuningAxes::withoutWarpRolesWhereUnsupported(bool pagedKv, bool splitKv) {
  if (!pagedKv && !splitKv)
    return;
  warpSpecialize = {false};
  softmaxOverlap = {false};
}

/// Why `config`'s register budget (ctas_per_sm) is unreachable or no budget at all, or empty.
static std::string budgetReason(const TileConfig &config, const ResourceEstimate &e,
                                const ChipLimits &limits, int64_t headDim) {
  if (!config.ctasPerSm || e.threads <= 0)
    return "";
  int64_t ctas = *config.ctasPerSm;
  std::string name = "ctas_per_sm=" + std::to_string(ctas);
  if (ctas * e.threads > limits.threadsPerSm)
    return name + ": " + std::to_string(ctas) + " x " + std::to_string(e.threads) +
           " threads, over the SM's " + std::to_string(limits.threadsPerSm);
  int64_t shared = ctas * (e.sharedBytes + limits.reservedSharedBytesPerBlock);
  if (limits.sharedBytesPerSm > 0 && shared > limits.sharedBytesPerSm)
    return name + ": " + std::to_string(ctas) + " x " + std::to_string(e.sharedBytes) +
           " bytes of shared memory, over the SM's " + std::to_string(limits.sharedBytesPerSm);
  // ptxas allocates registers in units of 8 per thread.
  int64_t budget = limits.registersPerBlock / (ctas * e.threads) / 8 * 8;
  if (budget >= limits.registersPerThread)
    return name + ": leaves " + std::to_string(budget) + " registers per thread, no budget " +
           "below the hardware's " + std::to_string(limits.registersPerThread) +
           " (the same kernel as without it)";
  int64_t rows = config.rowsPerWarp.value_or(16);
  int64_t live = rows * (headDim + config.blockN.value_or(0)) / 32;
  if (live > budget)
    return name + ": " + std::to_string(budget) + " registers per thread, under the " +
           std::to_string(live) + " the O accumulator and the scores alone hold (it would spill)";
  return "";
}

/// Why `e` does not fit `limits`, or empty.
static std::string pruneReason(const ResourceEstimate &e, const ChipLimits &limits) {
  if (e.threads > limits.threadsPerBlock)
    return "threads: " + std::to_string(e.threads) + " per block, the chip allows " +
           std::to_string(limits.threadsPerBlock);
  if (e.sharedBytes > limits.sharedBytesPerBlock)
    return "shared memory: " + std::to_string(e.sharedBytes) + " bytes per block, the chip " +
           "allows " + std::to_string(limits.sharedBytesPerBlock);
  if (e.registersPerThread > limits.registersPerThread)
    return "registers: ~" + std::to_string(e.registersPerThread) + " per thread estimated, " +
           "over " + std::to_string(limits.registersPerThread) + " (it would spill)";
  // A producer warpgroup keeps its few registers (setmaxnreg); the consumers take the rest.
  int64_t consumers = e.threads - e.producerThreads;
  if (e.registersPerThread * consumers + TileConfig::kProducerRegisters * e.producerThreads >
      limits.registersPerBlock)
    return "registers: ~" + std::to_string(e.registersPerThread) + " x " +
           std::to_string(consumers) + " threads per block estimated, over the SM's " +
           std::to_string(limits.registersPerBlock);
  return "";
}

std::vector<Candidate> jit::enumerateSpace(int64_t headDim, llvm::StringRef chip,
                                           const ChipLimits &limits, const TuningAxes &axes,
                                           int64_t elementBytes) {
  std::vector<Candidate> space;
  auto add = [&](const TileConfig &config) {
    // Not a configuration at all (the compiler would refuse it): not listed.
    if (llvm::Error error = config.verify(chip)) {
      llvm::consumeError(std::move(error));
      return;
    }
    Candidate c;
    c.config = config;
    c.estimate = estimateResources(c.config, headDim, elementBytes);
    c.reason = pruneReason(c.estimate, limits);
    if (c.reason.empty())
      c.reason = budgetReason(c.config, c.estimate, limits, headDim);
    c.pruned = !c.reason.empty();
    space.push_back(std::move(c));
  };
  TileConfig config;
  for (int64_t br : axes.blockM)
    for (int64_t bc : axes.blockN)
      for (MmaKind mma : axes.mma)
        for (int64_t rows : axes.rowsPerWarp)
          for (QOperand q : axes.qOperand)
            for (CopyIssue copy : axes.copyIssue)
              for (int64_t stages : axes.stages)
                for (bool packGqa : axes.packGqa)
                  for (std::optional<int64_t> ctas : axes.ctasPerSm)
                    for (bool roles : axes.warpSpecialize)
                      for (bool overlap : axes.softmaxOverlap) {
                  // Without roles there is no rotated loop: one candidate, the field unset.
                  if (!roles && overlap != axes.softmaxOverlap.front())
                    continue;
                  config.blockM = br;
                  config.blockN = bc;
                  config.rowsPerWarp = rows;
                  config.mma = mma;
                  config.qOperand = q;
                  config.copyIssue = copy;
                  config.stages = stages;
                  config.packGqa = packGqa;
                  config.ctasPerSm = ctas;
                  config.warpSpecialize = roles;
                  config.softmaxOverlap = roles ? std::optional<bool>(overlap) : std::nullopt;
                  add(config);
                }
  return space;
}

std::vector<int64_t> jit::keySplitCandidates(int64_t policySplits, int64_t keyBlocks) {
  int64_t most = std::clamp<int64_t>(keyBlocks, 1, 128);
  std::vector<int64_t> splits;
  for (int64_t s : {int64_t(1), policySplits / 2, policySplits, 2 * policySplits})
    splits.push_back(std::clamp<int64_t>(s, 1, most));
  std::sort(splits.begin(), splits.end());
  splits.erase(std::unique(splits.begin(), splits.end()), splits.end());
  return splits;
}

std::vector<int64_t> jit::keySplitCandidates(int64_t programs, int64_t slots, int64_t keyBlocks) {
  return keySplitCandidates(cuda::CudaKernel::chooseKeySplits(programs, slots, keyBlocks),
                            keyBlocks);
}

TileConfig jit::inDefaultRowOrder(TileConfig config, const TileConfig &defaults) {
  if (!config.rowOrder)
    config.rowOrder = defaults.rowOrder;
  return config;
}

void jit::addDefaultCandidates(std::vector<Candidate> &space, const TileConfig &defaults,
                               int64_t headDim, llvm::StringRef chip) {
  llvm::erase_if(space, [&](const Candidate &c) {
    return c.config != defaults && inDefaultRowOrder(c.config, defaults) == defaults;
  });
  if (llvm::none_of(space, [&](const Candidate &c) { return c.config == defaults; })) {
    Candidate c;
    c.config = defaults;
    c.estimate = estimateResources(defaults, headDim);
    space.push_back(c);
  }
  for (Candidate &c : space)
    c.nearDefault |= c.config == defaults;
  // Whether `config` can take overlapped tile boundaries (tgpu-overlap-tiles): verify admits
  // them, and Q's second stage fits.
  auto overlapFits = [&](TileConfig config) {
    config.overlapTiles = true;
    config.pingpong.reset(); // (verify: the two do not go together)
    if (llvm::Error error = config.verify(chip)) {
      llvm::consumeError(std::move(error));
      return false;
    }
    return estimateResources(config, headDim).sharedBytes <=
           ChipLimits::forChip(chip).sharedBytesPerBlock;
  };
  // The default changed in one setting, where that still verifies.
  auto addVariant = [&](const TileConfig &config) {
    if (llvm::Error error = config.verify(chip)) {
      llvm::consumeError(std::move(error));
      return;
    }
    Candidate c;
    c.config = config;
    c.estimate = estimateResources(config, headDim);
    c.nearDefault = true;
    space.push_back(c);
  };
  TileConfig reversed = defaults;
  reversed.rowOrder = defaults.longestFirst() ? RowOrder::Ascending : RowOrder::Descending;
  addVariant(reversed);
  // A split default prefetching its value blocks (splitKvTileConfig), without: the enumerated
  // candidates leave the field to that default, so only this one waits for each value block
  // in its own iteration (two CTAs an SM at 96 KiB, against one at 128 KiB).
  if (defaults.prefetchValues == true) {
    TileConfig waited = defaults;
    waited.prefetchValues = false;
    addVariant(waited);
  }
  // A warp-specialized default with its persistence the other way: a persistent default gains
  // over the one-tile-per-CTA grid where tiles are short and can lose a little where they are
  // long, one-tile defaults the other way round (docs/perf.md, 2026-12-02); the length bucket in
  // the tuner's key lets each length take its side.
  if (defaults.warpSpecialize.value_or(false)) {
    TileConfig toggled = defaults;
    toggled.persistent = !defaults.persistent.value_or(false);
    // (Overlapped tile boundaries are a persistent kernel's; a one-tile grid has none.)
    if (!*toggled.persistent)
      toggled.overlapTiles.reset();
    // A one-tile grid deals no pairs: it runs the paired default's row blocks longest first.
    if (toggled.rowOrder == RowOrder::Paired)
      toggled.rowOrder = RowOrder::Descending;
    addVariant(toggled);
    // Ping-pong the other way (two or more consumer warpgroups; verify refuses one): on the
    // rotated loop it measured +2-4% at 1k keys from d128 and -2-4% on some 4k and 16k rows
    // (docs/perf.md, 2026-12-02 ablation), so the length bucket picks it.
    TileConfig pingponged = defaults;
    pingponged.pingpong = !defaults.pingpong.value_or(false);
    if (*pingponged.pingpong)
      pingponged.overlapTiles.reset(); // (verify: the two do not go together)
    addVariant(pingponged);
    // Overlapped tile boundaries the other way, for a persistent rotated default: the causal
    // d128 default's gain shrinks with the tiles' length (+6% at 1k, +0.5% at 16k; docs/perf.md,
    // 2026-12-06), so the length bucket picks; only where Q's second stage fits (not beside the
    // full mask's Bc = 176, nor from d192).
    if (overlapFits(defaults)) {
      TileConfig overlapped = defaults;
      overlapped.overlapTiles = !defaults.overlapTiles.value_or(false);
      if (*overlapped.overlapTiles)
        overlapped.pingpong.reset();
      addVariant(overlapped);
    }
    // A default holding Q in registers (d96, d128) with Q in shared memory, loaded by the
    // producer's TMA, and persistent: the next tile's Q loads while this one stores its output,
    // which measured +12% at d128 1k full, +6% at 1k causal and +3% at 4k causal, and lost 4-7%
    // at 16k (docs/perf.md, 2026-12-02, `persistqs`).
    if (defaults.qOperand == QOperand::Registers) {
      TileConfig sharedQuery = defaults;
      sharedQuery.qOperand = QOperand::Shared;
      sharedQuery.persistent = true;
      addVariant(sharedQuery);
    }
    // The other deal of a persistent longest-first default (a causal-like mask): paired (each
    // program's tiles two by two, row blocks i and R - 1 - i of one (batch, head), head by
    // head, K and V reused from L2) or serpentine (every pair's last row block before any
    // second-to-last one: a balance of 1.00 at 4k and 16k, where the twos quantize it to 0.97,
    // but K and V read from DRAM once per row block at 1k and 4k). The paired default measured
    // +33% at 1k and -1.7% at 16k against serpentine (causal d128, H100, docs/perf.md,
    // 2026-12-06), so the length bucket picks. A longest-first default with one tile a CTA gets
    // the paired form of its persistent toggle.
    if (defaults.rowOrder == RowOrder::Descending || defaults.rowOrder == RowOrder::Paired) {
      TileConfig otherDeal = defaults;
      otherDeal.persistent = true;
      otherDeal.rowOrder =
          defaults.rowOrder == RowOrder::Paired ? RowOrder::Descending : RowOrder::Paired;
      addVariant(otherDeal);
    }
    // The key block the default would take under the other kind of mask, where the two differ
    // (d128 with Q in shared memory: 176 for equal row blocks, 128 under a causal-like mask).
    // The causal default at Bc = 176 measured +4-5% from 8k keys and -5% at 1k (docs/perf.md,
    // twentieth session), so the length bucket picks. Only for a default at its tuned key block:
    // one that the regions' registers shrank would spill at the other.
    if (defaults.qOperand && defaults.blockN) {
      int64_t equalRows = warpSpecializedKeyBlock(headDim, *defaults.qOperand, false);
      int64_t unequalRows = warpSpecializedKeyBlock(headDim, *defaults.qOperand, true);
      if (equalRows != unequalRows &&
          (*defaults.blockN == equalRows || *defaults.blockN == unequalRows)) {
        // With overlapped tile boundaries where Q's second stage fits beside it (persistent
        // rotated defaults): the full mask's d128 default at Bc = 128 measured +2.6% at 1k
        // overlapped and -1.3% without (H100, docs/perf.md, 2026-12-06); Bc = 176 has no room.
        TileConfig otherKeyBlock = defaults;
        otherKeyBlock.blockN = *defaults.blockN == equalRows ? unequalRows : equalRows;
        otherKeyBlock.overlapTiles.reset();
        if (overlapFits(otherKeyBlock)) {
          otherKeyBlock.overlapTiles = true;
          otherKeyBlock.pingpong.reset();
        }
        addVariant(otherKeyBlock);
        // An overlapped default at the narrower key block (the causal d128 one, Bc = 128) also
        // at the widest key block below the other whose overlapped boundaries fit (Bc = 160:
        // Q's second stage beside it): +2.7% at 8k and +4.0% at 16k, -9% at 1k (H200,
        // docs/perf.md, thirty-fourth session), so the length bucket picks.
        if (defaults.overlapTiles == true && *defaults.blockN == std::min(equalRows, unequalRows))
          for (int64_t blockN = std::max(equalRows, unequalRows) - 16;
               blockN > *defaults.blockN; blockN -= 16) {
            TileConfig wider = defaults;
            wider.blockN = blockN;
            if (overlapFits(wider)) {
              addVariant(wider);
              break;
            }
          }
      }
    }
  }
}
