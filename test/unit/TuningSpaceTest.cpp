//===- TuningSpaceTest.cpp - the autotuner's space and resource model -----===//
#include "tilefuse/kernels/Registry.h"
#include "tilefuse/runtime/Compiler.h"
#include "tilefuse/runtime/jit/TuningSpace.h"

#include <gtest/gtest.h>

#include <set>

using namespace tilefuse;
using namespace tilefuse::runtime;
using namespace tilefuse::runtime::jit;

TEST(TuningSpace, EveryCandidateIsCompleteConsistentAndDistinct) {
  for (llvm::StringRef chip : {"sm_90a", "sm_80"}) {
    std::vector<Candidate> space =
        enumerateSpace(128, chip, ChipLimits::forChip(chip), TuningAxes::forChip(chip));
    ASSERT_FALSE(space.empty());
    std::set<std::string> seen;
    bool anyWgmma = false;
    for (const Candidate &c : space) {
      EXPECT_TRUE(c.config.isComplete()) << c.config.print();
      llvm::Error e = c.config.verify(chip);
      EXPECT_FALSE(bool(e)) << c.config.print() << ": " << llvm::toString(std::move(e));
      EXPECT_TRUE(seen.insert(c.config.print()).second) << "twice: " << c.config.print();
      EXPECT_EQ(c.pruned, !c.reason.empty()) << c.config.print();
      anyWgmma |= c.config.mma == MmaKind::Wgmma;
    }
    EXPECT_EQ(anyWgmma, chip == "sm_90a");
    // The defaults are in the space, and fit.
    // (d128 causal: under a full mask the default's Bc = 176 is not on the axes, and
    // persistence is no axis: addDefaultCandidates adds the persistent default.)
    TileConfig defaults = defaultTileConfig(128, chip, KeyLayout::Tensors, 0,
                                            /*rowBlocksUnequal=*/true);
    defaults.rowOrder = std::nullopt;
    defaults.persistent = std::nullopt;
    defaults.overlapTiles = std::nullopt; // (a persistent kernel's, no axis either)
    // Candidates say whether they are warp-specialized; the default may leave it to the chip.
    defaults.warpSpecialize = defaults.warpSpecialize.value_or(false);
    auto it = llvm::find_if(space, [&](const Candidate &c) { return c.config == defaults; });
    ASSERT_NE(it, space.end()) << defaults.print();
    EXPECT_FALSE(it->pruned) << it->reason;
  }
}

TEST(TuningSpace, ResourceModelPrunesWithReasons) {
  TuningAxes axes;
  axes.blockM = {64, 256};
  axes.blockN = {64, 256};
  axes.rowsPerWarp = {16, 32};
  axes.mma = {MmaKind::Sync};
  axes.qOperand = {QOperand::Registers};
  axes.copyIssue = {CopyIssue::Eager};
  axes.stages = {2, 3};
  // A small shared memory: Bc = 256 at d = 128 needs 3 x 64 KiB of K and V buffers.
  ChipLimits limits = ChipLimits::forChip("sm_90a");
  limits.sharedBytesPerBlock = 100 * 1024;
  std::vector<Candidate> space = enumerateSpace(128, "sm_80", limits, axes);
  auto find = [&](llvm::StringRef text) -> const Candidate & {
    auto it = llvm::find_if(space, [&](const Candidate &c) { return c.config.print() == text; });
    EXPECT_NE(it, space.end()) << text.str();
    static Candidate none;
    return it == space.end() ? none : *it;
  };
  const char *tail = ",mma=sync,q=registers,copy_issue=eager,stages=2,pack_gqa=false,warp_specialize=false";
  const Candidate &small = find(std::string("Br=64,Bc=64,rows_per_warp=16") + tail);
  EXPECT_FALSE(small.pruned) << small.reason;
  EXPECT_EQ(small.estimate.sharedBytes, 3 * 64 * 128 * 2);
  // A third stage holds one more key block.
  const Candidate &deeper =
      find("Br=64,Bc=64,rows_per_warp=16,mma=sync,q=registers,copy_issue=eager,stages=3,"
           "pack_gqa=false,warp_specialize=false");
  EXPECT_FALSE(deeper.pruned) << deeper.reason;
  EXPECT_EQ(deeper.estimate.sharedBytes, 4 * 64 * 128 * 2);
  EXPECT_EQ(small.estimate.seedSharedBytes, 4 * 64 * 128 + 4 * 64 * 128 + 2 * 64 * 64 + 8 * 64);
  const Candidate &wide = find(std::string("Br=64,Bc=256,rows_per_warp=16") + tail);
  EXPECT_TRUE(wide.pruned);
  EXPECT_NE(wide.reason.find("shared memory: 196608 bytes per block, the chip allows 102400"),
            std::string::npos)
      << wide.reason;
  // 32 rows per warp with Q in registers at d = 128: the spill the defaults avoid.
  const Candidate &tall = find(std::string("Br=64,Bc=64,rows_per_warp=32") + tail);
  EXPECT_TRUE(tall.pruned);
  EXPECT_NE(tall.reason.find("registers: ~288 per thread estimated, over 255"),
            std::string::npos)
      << tall.reason;
  // Register file per block: 16 warps x ~192 registers.
  const Candidate &big = find(std::string("Br=256,Bc=64,rows_per_warp=16") + tail);
  EXPECT_TRUE(big.pruned);
  EXPECT_NE(big.reason.find("threads per block estimated, over the SM's 65536"),
            std::string::npos)
      << big.reason;
}

// The register budget (ctas_per_sm) is pruned where it cannot be reached or is no budget at all.
TEST(TuningSpace, RegisterBudgetPrunesWithReasons) {
  TuningAxes axes;
  axes.blockM = {64, 128};
  axes.blockN = {64, 128};
  axes.rowsPerWarp = {16};
  axes.mma = {MmaKind::Wgmma};
  axes.qOperand = {QOperand::Registers};
  axes.copyIssue = {CopyIssue::Eager};
  axes.stages = {2, 3};
  axes.ctasPerSm = {std::nullopt, 2, 3, 4};
  ChipLimits limits = ChipLimits::forChip("sm_90a");
  std::vector<Candidate> space = enumerateSpace(128, "sm_90a", limits, axes);
  EXPECT_EQ(space.size(), 2u * 2 * 2 * 4);
  auto find = [&](llvm::StringRef text) -> const Candidate & {
    auto it = llvm::find_if(space, [&](const Candidate &c) { return c.config.print() == text; });
    EXPECT_NE(it, space.end()) << text.str();
    static Candidate none;
    return it == space.end() ? none : *it;
  };
  const std::string base =
      "Br=64,Bc=64,rows_per_warp=16,mma=wgmma,q=registers,copy_issue=eager,stages=2,"
      "pack_gqa=false,warp_specialize=false";
  EXPECT_FALSE(find(base).pruned) << find(base).reason;
  // 128 threads: three CTAs leave 168 registers, four 128; both hold the 96 of O and the scores.
  EXPECT_FALSE(find(base + ",ctas_per_sm=3").pruned) << find(base + ",ctas_per_sm=3").reason;
  EXPECT_FALSE(find(base + ",ctas_per_sm=4").pruned) << find(base + ",ctas_per_sm=4").reason;
  // Two leave 256: no budget, the same kernel as without one.
  const Candidate &none = find(base + ",ctas_per_sm=2");
  EXPECT_TRUE(none.pruned);
  EXPECT_NE(none.reason.find("ctas_per_sm=2: leaves 256 registers per thread, no budget"),
            std::string::npos)
      << none.reason;
  // 256 threads at three CTAs: 80 registers, under the 96 of O (64) and 64 scores (32).
  const Candidate &spill = find(
      "Br=128,Bc=64,rows_per_warp=16,mma=wgmma,q=registers,copy_issue=eager,stages=2,"
      "pack_gqa=false,warp_specialize=false,ctas_per_sm=3");
  EXPECT_TRUE(spill.pruned);
  EXPECT_NE(spill.reason.find("ctas_per_sm=3: 80 registers per thread, under the 96"),
            std::string::npos)
      << spill.reason;
  // Bc = 128, three stages: 4 x 32 KiB of K and V per CTA; two CTAs do not fit 228 KiB.
  const Candidate &shared = find(
      "Br=64,Bc=128,rows_per_warp=16,mma=wgmma,q=registers,copy_issue=eager,stages=3,"
      "pack_gqa=false,warp_specialize=false,ctas_per_sm=2");
  EXPECT_TRUE(shared.pruned);
  EXPECT_NE(shared.reason.find("ctas_per_sm=2: 2 x 131072 bytes of shared memory, over the "
                               "SM's 233472"),
            std::string::npos)
      << shared.reason;
  // Threads: a smaller SM.
  limits.threadsPerSm = 256;
  std::vector<Candidate> small = enumerateSpace(128, "sm_90a", limits, axes);
  auto it = llvm::find_if(small, [&](const Candidate &c) {
    return c.config.print() == base + ",ctas_per_sm=3";
  });
  ASSERT_NE(it, small.end());
  EXPECT_NE(it->reason.find("ctas_per_sm=3: 3 x 128 threads, over the SM's 256"),
            std::string::npos)
      << it->reason;
}

// The rotated key loop is an axis of the warp-specialized candidates only (the others leave it
// unset), and its pending P costs registers in the model: at d192 with Bc = 128 the rotated
// candidate is pruned, the unrotated one is not (ptxas spills the first, docs/perf.md).
TEST(TuningSpace, SoftmaxOverlapAxis) {
  std::vector<Candidate> space = enumerateSpace(192, "sm_90a", ChipLimits::forChip("sm_90a"),
                                                TuningAxes::forChip("sm_90a"));
  bool rotated = false, unrotated = false;
  for (const Candidate &c : space) {
    if (!c.config.warpSpecialize.value_or(false)) {
      EXPECT_FALSE(c.config.softmaxOverlap) << c.config.print();
      continue;
    }
    ASSERT_TRUE(c.config.softmaxOverlap) << c.config.print();
    (*c.config.softmaxOverlap ? rotated : unrotated) = true;
  }
  EXPECT_TRUE(rotated && unrotated);
  auto find = [&](llvm::StringRef text) {
    return llvm::find_if(space, [&](const Candidate &c) { return c.config.print() == text; });
  };
  std::string wide = "Br=128,Bc=128,rows_per_warp=16,mma=wgmma,q=registers,copy_issue=eager,"
                     "stages=2,pack_gqa=false,warp_specialize=true,softmax_overlap=";
  auto on = find(wide + "true"), off = find(wide + "false");
  ASSERT_NE(on, space.end());
  ASSERT_NE(off, space.end());
  EXPECT_EQ(on->estimate.registersPerThread, off->estimate.registersPerThread + 128 / 4);
  EXPECT_TRUE(on->pruned) << on->estimate.registersPerThread;
  EXPECT_FALSE(off->pruned) << off->reason;
}

// FlashAttention-3's d64 tile, three consumer warpgroups over 192 rows with Q in shared memory
// (faster than the d64 default from 4k on the H200, slower at 1k), is in the space and fits;
// with Q in registers the model prunes it, as ptxas spills it.
TEST(TuningSpace, ThreeConsumerWarpgroupsAtD64) {
  std::vector<Candidate> space = enumerateSpace(64, "sm_90a", ChipLimits::forChip("sm_90a"),
                                                TuningAxes::forChip("sm_90a"));
  auto find = [&](llvm::StringRef text) {
    return llvm::find_if(space, [&](const Candidate &c) { return c.config.print() == text; });
  };
  std::string tile = "Br=192,Bc=128,rows_per_warp=16,mma=wgmma,q=";
  std::string rest = ",copy_issue=eager,stages=2,pack_gqa=false,warp_specialize=true,"
                     "softmax_overlap=true";
  auto shared = find(tile + "shared" + rest);
  ASSERT_NE(shared, space.end());
  EXPECT_FALSE(shared->pruned) << shared->reason;
  EXPECT_EQ(shared->estimate.threads, 512);
  auto registers = find(tile + "registers" + rest);
  ASSERT_NE(registers, space.end());
  EXPECT_TRUE(registers->pruned);
}

// The rotated loop stays an axis of the kernels that can be warp-specialized, padded or varlen
// (the tuner once cleared it for every kernel, outside the condition meant to hold it); paged
// and split kernels lose both.
TEST(TuningSpace, WarpRolesWhereSupported) {
  TuningAxes padded = TuningAxes::forChip("sm_90a");
  padded.withoutWarpRolesWhereUnsupported(false, false);
  EXPECT_EQ(padded.warpSpecialize, (std::vector<bool>{false, true}));
  EXPECT_EQ(padded.softmaxOverlap, (std::vector<bool>{false, true}));
  for (auto [paged, split] : {std::pair{true, false}, std::pair{false, true}}) {
    TuningAxes axes = TuningAxes::forChip("sm_90a");
    axes.withoutWarpRolesWhereUnsupported(paged, split);
    EXPECT_EQ(axes.warpSpecialize, std::vector<bool>{false});
    EXPECT_EQ(axes.softmaxOverlap, std::vector<bool>{false});
  }
}

// The shared-memory model is what tgpu-allocate-shared-memory allocates: checked against compiled kernels.
TEST(TuningSpace, SharedMemoryModelMatchesCompiledKernels) {
  const kernels::KernelSource &attention = *kernels::find("attention");
  for (const char *text : {"Br=64,Bc=128,rows_per_warp=16,mma=wgmma,q=registers,copy_issue=eager,"
                           "warp_specialize=false",
                           "Br=128,Bc=32,rows_per_warp=32,mma=sync,q=registers,copy_issue=eager",
                           "Br=64,Bc=64,rows_per_warp=16,mma=sync,q=shared,copy_issue=eager",
                           // a third key block in the ring (tgpu-pipeline)
                           "Br=64,Bc=64,rows_per_warp=16,mma=wgmma,q=registers,stages=3,"
                           "warp_specialize=false",
                           // warp-specialized: rings of keys and of values, two mbarriers a stage
                           "Br=128,Bc=128,rows_per_warp=16,mma=wgmma,q=registers,stages=2,"
                           "warp_specialize=true",
                           "Br=128,Bc=64,rows_per_warp=16,mma=wgmma,q=registers,stages=3,"
                           "warp_specialize=true",
                           // and Q in shared memory, which its consumers copy
                           "Br=128,Bc=64,rows_per_warp=16,mma=wgmma,q=shared,stages=2,"
                           "warp_specialize=true",
                           // d128's full-mask default: FA3's 128 x 176 tile, persistent
                           "Br=128,Bc=176,rows_per_warp=16,mma=wgmma,q=shared,stages=2,"
                           "warp_specialize=true,softmax_overlap=true,persistent=true",
                           "Br=128,Bc=32,rows_per_warp=32,mma=sync,q=shared,stages=4",
                           // the value blocks prefetched: a ring of two value buffers
                           "Br=64,Bc=128,rows_per_warp=16,mma=wgmma,q=registers,stages=2,"
                           "warp_specialize=false,prefetch_values=true",
                           "Br=64,Bc=64,rows_per_warp=16,mma=sync,q=registers,stages=2,"
                           "prefetch_values=true"}) {
    auto config = TileConfig::parse(text);
    ASSERT_TRUE(bool(config));
    for (int64_t d : {64, 128}) {
      PtxCompileOptions options;
      options.tiles = *config;
      options.headDim = d;
      auto k = compileToPTX(attention.text, attention.fileName, options);
      ASSERT_TRUE(bool(k)) << text << " d" << d << ": " << llvm::toString(k.takeError());
      EXPECT_EQ(estimateResources(*config, d).sharedBytes, k->sharedBytes) << text << " d" << d;
      EXPECT_EQ(estimateResources(*config, d).threads, k->threads) << text;
    }
  }
}

/// The default and the default in the other row order join the space once each: where the
/// default runs its row blocks last first (a causal-like mask), the enumerated candidate that
/// compiles to the same kernel (its row order unset) is dropped, and the other order is spelled
/// row_order=ascending; a persistent default's other order is its tile loop's other order.
TEST(TuningSpace, DefaultCandidatesInBothRowOrders) {
  for (bool unequalRows : {false, true}) {
    SCOPED_TRACE(unequalRows ? "mask comparing rows with columns" : "no such mask");
    std::vector<Candidate> space = enumerateSpace(
        128, "sm_90a", ChipLimits::forChip("sm_90a"), TuningAxes::forChip("sm_90a"));
    size_t enumerated = space.size();
    auto resolved = resolveTileConfig(TileConfig(), 128, "sm_90a", KeyLayout::Tensors, 0,
                                      unequalRows);
    ASSERT_TRUE(bool(resolved)) << llvm::toString(resolved.takeError());
    TileConfig defaults = *resolved;
    defaults.warpSpecialize = defaults.warpSpecialize.value_or(false);
    addDefaultCandidates(space, defaults, 128, "sm_90a");
    auto count = [&](const TileConfig &config) {
      return llvm::count_if(space, [&](const Candidate &c) { return c.config == config; });
    };
    TileConfig reversed = defaults;
    reversed.rowOrder = defaults.longestFirst() ? RowOrder::Ascending : RowOrder::Descending;
    EXPECT_EQ(count(defaults), 1);
    EXPECT_EQ(count(reversed), 1);
    EXPECT_EQ(reversed.rowOrder, unequalRows ? RowOrder::Ascending : RowOrder::Descending);
    // The default's kernel once: under its own spelling only.
    EXPECT_EQ(llvm::count_if(space,
                             [&](const Candidate &c) {
                               return inDefaultRowOrder(c.config, defaults) == defaults;
                             }),
              1);
    // The warp-specialized default with its persistence toggled, once; a one-tile grid runs
    // the paired default's row blocks longest first.
    TileConfig toggled = defaults;
    toggled.persistent = !defaults.persistent.value_or(false);
    if (toggled.rowOrder == RowOrder::Paired)
      toggled.rowOrder = RowOrder::Descending;
    toggled.overlapTiles.reset(); // (a one-tile grid has no tile boundaries to overlap)
    EXPECT_EQ(count(toggled), 1);
    // And with ping-pong toggled (two consumer warpgroups at d128), once, without overlapped
    // tile boundaries (verify: the two do not go together).
    TileConfig pingponged = defaults;
    pingponged.pingpong = !defaults.pingpong.value_or(false);
    pingponged.overlapTiles.reset();
    EXPECT_EQ(count(pingponged), 1);
    // The causal default overlaps its tile boundaries (Bc = 128: Q's second stage fits) and
    // gets the form without, once; the full mask's (Bc = 176) has no room for the second stage.
    EXPECT_EQ(defaults.overlapTiles, unequalRows ? std::optional<bool>(true) : std::nullopt);
    TileConfig overlapped = defaults;
    overlapped.overlapTiles = !defaults.overlapTiles.value_or(false);
    EXPECT_EQ(count(overlapped), unequalRows ? 1 : 0);
    // A persistent longest-first default (the causal one: paired) with its tiles dealt
    // serpentine instead, once; the ascending default has no such variant.
    TileConfig serpentine = defaults;
    serpentine.rowOrder = RowOrder::Descending;
    bool pairable = defaults.persistent == true && defaults.rowOrder == RowOrder::Paired;
    EXPECT_EQ(pairable, unequalRows);
    if (pairable) // (the full mask's serpentine is its reversed row order, above)
      EXPECT_EQ(count(serpentine), 1);
    // A default holding Q in registers would add its persistent form with Q in shared memory;
    // d128's defaults (full and causal) have Q there already, persistent.
    EXPECT_EQ(defaults.qOperand, QOperand::Shared);
    EXPECT_EQ(defaults.persistent, true);
    // And with the other mask's key block: 176 under a causal-like mask, 128 without one.
    // (The full mask's default at Bc = 128 with overlapped tile boundaries, which fit there.)
    // (Overlapped, without the full mask's default ping-pong: verify refuses the two together.)
    TileConfig otherKeyBlock = defaults;
    otherKeyBlock.blockN = unequalRows ? 176 : 128;
    otherKeyBlock.overlapTiles = unequalRows ? std::nullopt : std::optional<bool>(true);
    EXPECT_EQ(defaults.pingpong, unequalRows ? std::nullopt : std::optional<bool>(true));
    otherKeyBlock.pingpong.reset();
    EXPECT_EQ(defaults.blockN, unequalRows ? 128 : 176);
    EXPECT_EQ(count(otherKeyBlock), 1);
    // The overlapped causal default also at the widest key block whose overlapped boundaries
    // fit (Bc = 160: Q's second stage beside it; 176 has no room).
    TileConfig wider = defaults;
    wider.blockN = 160;
    EXPECT_EQ(count(wider), unequalRows ? 1 : 0);
    // The default (persistent, which is no axis: no enumerated candidate) joins, with its
    // other row order, its persistence toggled, ping-pong toggled, the other key block and,
    // under a causal-like mask, its tiles dealt serpentine, its tile boundaries not
    // overlapped and the wider overlapped key block.
    EXPECT_EQ(space.size(), enumerated + 5 + (pairable ? 3 : 0));
    // Those and the default are the ones the tuner times first.
    EXPECT_EQ(llvm::count_if(space, [](const Candidate &c) { return c.nearDefault; }),
              5 + (pairable ? 3 : 0));
    for (const TileConfig &near : {defaults, reversed, toggled, pingponged, otherKeyBlock})
      EXPECT_TRUE(llvm::any_of(space, [&](const Candidate &c) {
        return c.nearDefault && c.config == near;
      }));
  }
  // The d128 default with Q in registers (Bc = 128), made persistent.
  TileConfig persistent = defaultTileConfig(128, "sm_90a");
  persistent.qOperand = QOperand::Registers;
  persistent.blockN = 128;
  persistent.persistent = true;
  persistent.pingpong.reset(); // (the default of the Q-in-shared-memory Bc = 176 tile only)
  std::vector<Candidate> space;
  addDefaultCandidates(space, persistent, 128, "sm_90a");
  ASSERT_EQ(space.size(), 6u);
  EXPECT_EQ(space[0].config, persistent);
  EXPECT_EQ(space[1].config.rowOrder, RowOrder::Descending);
  EXPECT_EQ(space[1].config.persistent, true);
  EXPECT_EQ(space[2].config.persistent, false);
  EXPECT_EQ(space[2].config.rowOrder, persistent.rowOrder);
  EXPECT_EQ(space[3].config.pingpong, true);
  EXPECT_EQ(space[3].config.persistent, true);
  EXPECT_EQ(space[4].config.overlapTiles, true); // (Q in registers: no second Q stage)
  EXPECT_EQ(space[4].config.persistent, true);
  EXPECT_EQ(space[5].config.qOperand, QOperand::Shared);
  EXPECT_EQ(space[5].config.persistent, true);
  // One consumer warpgroup (Br = 64) has no ping-pong: verify refuses it.
  TileConfig narrow = persistent;
  narrow.blockM = 64;
  std::vector<Candidate> one;
  addDefaultCandidates(one, narrow, 128, "sm_90a");
  EXPECT_TRUE(llvm::none_of(one, [](const Candidate &c) { return c.config.pingpong == true; }));
  // A one-warpgroup default has no persistent form: two candidates.
  std::vector<Candidate> plain;
  addDefaultCandidates(plain, defaultTileConfig(128, "sm_90a", KeyLayout::Gathered), 128,
                       "sm_90a");
  EXPECT_EQ(plain.size(), 2u);
}

/// The causal default at d192 (persistent, its tiles paired) gets, timed first with it, the
/// serpentine deal and the one-tile grid longest first; a one-tile longest-first default gets
/// the paired persistent form.
TEST(TuningSpace, PairedCausalDefaultGetsSerpentineAndOneTileForms) {
  TileConfig defaults = defaultTileConfig(192, "sm_90a", KeyLayout::Tensors, 0,
                                          /*rowBlocksUnequal=*/true);
  ASSERT_EQ(defaults.warpSpecialize, true);
  ASSERT_EQ(defaults.rowOrder, RowOrder::Paired);
  ASSERT_EQ(defaults.persistent, true);
  std::vector<Candidate> space;
  addDefaultCandidates(space, defaults, 192, "sm_90a");
  TileConfig serpentine = defaults, oneTile = defaults;
  serpentine.rowOrder = RowOrder::Descending;
  oneTile.persistent = false;
  oneTile.rowOrder = RowOrder::Descending;
  for (const TileConfig &near : {serpentine, oneTile})
    EXPECT_EQ(llvm::count_if(space,
                             [&](const Candidate &c) {
                               return c.nearDefault && c.config == near;
                             }),
              1)
        << near.print();
  std::vector<Candidate> fromOneTile;
  addDefaultCandidates(fromOneTile, oneTile, 192, "sm_90a");
  for (const TileConfig &near : {serpentine, defaults})
    EXPECT_EQ(llvm::count_if(fromOneTile,
                             [&](const Candidate &c) {
                               return c.nearDefault && c.config == near;
                             }),
              1)
        << near.print();
}

/// A split default that prefetches its value blocks (splitKvTileConfig) gets the same kernel
/// waiting for each value block in its iteration as a neighbour, timed first with it.
TEST(TuningSpace, SplitDefaultWithoutPrefetchedValues) {
  auto defaults = resolveTileConfig(splitKvTileConfig(128, "sm_90a"), 128, "sm_90a",
                                    KeyLayout::Tensors);
  ASSERT_TRUE(bool(defaults)) << llvm::toString(defaults.takeError());
  ASSERT_EQ(defaults->prefetchValues, true);
  std::vector<Candidate> space;
  addDefaultCandidates(space, *defaults, 128, "sm_90a");
  TileConfig waited = *defaults;
  waited.prefetchValues = false;
  EXPECT_TRUE(llvm::any_of(space, [&](const Candidate &c) {
    return c.nearDefault && c.config == waited;
  }));
  EXPECT_EQ(estimateResources(*defaults, 128).sharedBytes,
            estimateResources(waited, 128).sharedBytes + 128 * 128 * 2);
}
