//===- KeySplitTuningTest.cpp - the split count as an autotuner axis -----===//
//
// What the tuner times for a split-KV kernel (keySplitCandidates), how the tuning database
// stores the winner's split count (and reads entries without one), and which count a launch
// through the runtime API asks for (keySplitGrid, keySplitsForLaunch). No GPU needed.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/kernels/Registry.h"
#include "tilefuse/runtime/Compiler.h"
#include "tilefuse/runtime/cuda/CudaKernel.h"
#include "tilefuse/runtime/jit/Autotuner.h"
#include "tilefuse/runtime/jit/TuningDatabase.h"
#include "tilefuse/runtime/jit/TuningSpace.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/xxhash.h"

#include "FileTestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace tilefuse;
using namespace tilefuse::runtime;
using namespace tilefuse::runtime::jit;
using cuda::CudaKernel;

namespace {

using Splits = std::vector<int64_t>;

TuningKey splitKey() {
  TuningKey key;
  key.kernelIdentity = std::string(64, 'b');
  key.dtype = "bf16";
  key.headDim = 128;
  key.seqBucket = 4096;
  key.gpu.name = "NVIDIA H200";
  key.gpu.multiprocessors = 132;
  key.gpu.computeMajor = 9;
  key.gpu.computeMinor = 0;
  key.gpu.driverVersion = 13000;
  key.version = compilerVersion().str();
  return key;
}

TuningRecord splitRecord() {
  TuningRecord r;
  r.config = *TileConfig::parse("Br=64,Bc=128,rows_per_warp=16,mma=wgmma,q=registers,"
                                "copy_issue=eager,stages=2,pack_gqa=true");
  r.medianMs = 0.031;
  r.defaultConfig = defaultTileConfig(128);
  r.defaultMs = 0.034;
  r.candidates = 60;
  r.timed = 20;
  r.tuningSeconds = 4.5;
  r.B = 8;
  r.H = 32;
  r.Hkv = 8;
  r.M = 1;
  r.N = 4096;
  r.created = "2026-12-01T00:00:00Z";
  return r;
}

/// A whole entry around `body` (the header the database writes: its size and checksum).
std::string entryWithBody(const TuningKey &key, const std::string &body) {
  return "tilefuse-tuning 1 key=" + key.digest() + " bytes=" + std::to_string(body.size()) +
         " xxh3=" + llvm::utohexstr(llvm::xxh3_64bits(body), /*LowerCase=*/true, /*Width=*/16) +
         "\n" + body;
}

} // namespace

// The counts around the policy's choice on the grids LaunchAbi.KeySplitPolicy pins.
TEST(KeySplitTuning, CandidatesAroundThePolicy) {
  // Decode, B = 8, GQA 32/8 packed (64 programs) on an H200's 264 slots: the policy's 4.
  ASSERT_EQ(CudaKernel::chooseKeySplits(64, 264, 512), 4);
  EXPECT_EQ(keySplitCandidates(64, 264, 512), (Splits{1, 2, 4, 8}));
  // B = 1 (8 programs) at 32k keys of 128: 20.
  ASSERT_EQ(CudaKernel::chooseKeySplits(8, 264, 256), 20);
  EXPECT_EQ(keySplitCandidates(8, 264, 256), (Splits{1, 10, 20, 40}));
  // Three key blocks: the policy splits them all; twice that is still three.
  ASSERT_EQ(CudaKernel::chooseKeySplits(8, 264, 3), 3);
  EXPECT_EQ(keySplitCandidates(8, 264, 3), (Splits{1, 3}));
  // A grid that fills the GPU: unsplit by the policy, two splits tried besides.
  ASSERT_EQ(CudaKernel::chooseKeySplits(264, 264, 4096), 1);
  EXPECT_EQ(keySplitCandidates(264, 264, 4096), (Splits{1, 2}));
  // One key block: nothing to split.
  EXPECT_EQ(keySplitCandidates(64, 264, 1), (Splits{1}));
  // At the policy's bound of 128 splits, twice it stays 128.
  ASSERT_EQ(CudaKernel::chooseKeySplits(1, 1000, 100000), 128);
  EXPECT_EQ(keySplitCandidates(1, 1000, 100000), (Splits{1, 64, 128}));
  // Around a given choice, bounded by the key blocks.
  EXPECT_EQ(keySplitCandidates(/*policySplits=*/16, /*keyBlocks=*/24), (Splits{1, 8, 16, 24}));
  EXPECT_EQ(keySplitCandidates(/*policySplits=*/5, /*keyBlocks=*/3), (Splits{1, 2, 3}));
}

TEST(KeySplitTuning, CandidatesAreBoundedDistinctAndIncludeThePolicy) {
  for (int64_t programs : {1, 2, 8, 32, 64, 100, 264, 1000})
    for (int64_t slots : {1, 108, 264, 528})
      for (int64_t keyBlocks : {1, 2, 3, 7, 16, 32, 256, 1024, 100000}) {
        SCOPED_TRACE(testing::Message() << programs << " programs, " << slots << " slots, "
                                        << keyBlocks << " key blocks");
        Splits splits = keySplitCandidates(programs, slots, keyBlocks);
        int64_t policy = CudaKernel::chooseKeySplits(programs, slots, keyBlocks);
        EXPECT_EQ(splits, keySplitCandidates(programs, slots, keyBlocks)); // deterministic
        ASSERT_FALSE(splits.empty());
        EXPECT_LE(splits.size(), 4u);
        EXPECT_TRUE(std::is_sorted(splits.begin(), splits.end()));
        EXPECT_EQ(std::adjacent_find(splits.begin(), splits.end()), splits.end());
        EXPECT_EQ(splits.front(), 1);
        EXPECT_LE(splits.back(), std::min<int64_t>(keyBlocks, 128));
        EXPECT_NE(std::find(splits.begin(), splits.end(), policy), splits.end()) << policy;
      }
}

TEST(KeySplitTuning, DatabaseRoundTripsTheSplitCount) {
  TuningKey key = splitKey();
  TuningRecord record = splitRecord();
  record.keySplits = TunedKeySplits{/*kvSplits=*/8, /*programs=*/64, /*keyBlocks=*/32,
                                    /*policySplits=*/4};
  std::string entry = TuningDatabase::serializeEntry(key, record);
  EXPECT_NE(entry.find("\"key_splits\""), std::string::npos) << entry;
  auto parsed = TuningDatabase::parseEntry(key, entry);
  ASSERT_TRUE(bool(parsed)) << llvm::toString(parsed.takeError());
  ASSERT_TRUE(parsed->keySplits.has_value());
  EXPECT_EQ(parsed->keySplits->kvSplits, 8);
  EXPECT_EQ(parsed->keySplits->programs, 64);
  EXPECT_EQ(parsed->keySplits->keyBlocks, 32);
  EXPECT_EQ(parsed->keySplits->policySplits, 4);
  EXPECT_EQ(parsed->config, record.config);

  // Through the files too.
  test::TempDir dir("tilefuse-key-split-test");
  TuningDatabase database(dir.str());
  ASSERT_FALSE(bool(database.store(key, record)));
  std::optional<TuningRecord> found = TuningDatabase(dir.str()).lookup(key);
  ASSERT_TRUE(found.has_value());
  ASSERT_TRUE(found->keySplits.has_value());
  EXPECT_EQ(found->keySplits->kvSplits, 8);
  EXPECT_EQ(found->keySplits->programs, 64);

  // An unsplit record writes no split count.
  EXPECT_EQ(TuningDatabase::serializeEntry(key, splitRecord()).find("key_splits"),
            std::string::npos);
}

// An entry as the database wrote it before the split count existed: read, the count left to
// the launcher.
TEST(KeySplitTuning, OldEntryWithoutTheSplitCountLeavesItToTheLauncher) {
  TuningKey key = splitKey();
  std::string keyFields =
      R"({"compute_capability": "9.0", "driver": 13000, "dtype": "bf16", "gpu": "NVIDIA H200",)"
      R"( "head_dim": 128, "kernel": ")" +
      key.kernelIdentity + R"(", "seq_bucket": 4096, "sms": 132, "tilefuse": ")" + key.version +
      R"("})";
  std::string body = R"({"key": )" + keyFields +
                     R"(, "config": "Br=64,Bc=128,rows_per_warp=16,mma=wgmma,q=registers,)"
                     R"(copy_issue=eager,stages=2,pack_gqa=true", "median_ms": 0.031,)"
                     R"( "default_config": "", "default_ms": 0.034, "candidates": 60,)"
                     R"( "timed": 20, "tuning_seconds": 4.5, "shape": {"B": 8, "H": 32,)"
                     R"( "Hkv": 8, "M": 1, "N": 4096}, "created": "2026-11-01T00:00:00Z"})"
                     "\n";
  auto parsed = TuningDatabase::parseEntry(key, entryWithBody(key, body));
  ASSERT_TRUE(bool(parsed)) << llvm::toString(parsed.takeError());
  EXPECT_FALSE(parsed->keySplits.has_value());
  EXPECT_EQ(parsed->config.blockN, 128);
  EXPECT_EQ(parsed->B, 8);
  EXPECT_EQ(keySplitsForLaunch(0, parsed->keySplits, 64, 32), 0);

  // A split count that is not one is a bad entry (deleted and tuned again), not a count.
  std::string bad = body;
  bad.insert(bad.rfind('}'), R"(, "key_splits": {"kv_splits": 0, "programs": 64,)"
                             R"( "key_blocks": 32, "policy_splits": 4})");
  auto rejected = TuningDatabase::parseEntry(key, entryWithBody(key, bad));
  ASSERT_FALSE(bool(rejected));
  EXPECT_NE(llvm::toString(rejected.takeError()).find("kv_splits"), std::string::npos);
}

// The grid a launch is matched by: the programs the launcher's policy counts and the key blocks.
TEST(KeySplitTuning, LaunchGrid) {
  cuda::KernelMetadata metadata;
  metadata.blockM = 64;
  metadata.blockN = 128;
  metadata.splitKv = true;
  metadata.packGqa = true;
  cuda::AttentionShape decode{/*B=*/8, /*H=*/32, /*Hkv=*/8, /*M=*/1, /*N=*/4096, /*D=*/128};
  KeySplitGrid grid = keySplitGrid(metadata, decode);
  EXPECT_EQ(grid.programs, 64); // 8 batches x 8 KV heads x one block of 4 packed rows
  EXPECT_EQ(grid.keyBlocks, 32);
  decode.N = 4000;
  EXPECT_EQ(keySplitGrid(metadata, decode).keyBlocks, 32);
  metadata.packGqa = false;
  EXPECT_EQ(keySplitGrid(metadata, decode).programs, 256); // 8 x 32 heads x 1 row block
  decode.B = 16;
  decode.H = decode.Hkv = 16;
  EXPECT_EQ(keySplitGrid(metadata, decode).programs, 256);
}

// What Kernel::launch asks the launcher for: the caller's count, else the tuned one on its own
// grid, else the launcher's policy (0).
TEST(KeySplitTuning, LaunchUsesTheTunedCountOnItsGridOnly) {
  TunedKeySplits tuned{/*kvSplits=*/8, /*programs=*/64, /*keyBlocks=*/32, /*policySplits=*/4};
  std::optional<TunedKeySplits> entry = tuned;
  EXPECT_EQ(keySplitsForLaunch(0, entry, 64, 32), 8);
  // Key blocks of the same power-of-two bucket: (16, 32].
  EXPECT_EQ(keySplitsForLaunch(0, entry, 64, 17), 8);
  EXPECT_EQ(keySplitsForLaunch(0, entry, 64, 16), 0);
  EXPECT_EQ(keySplitsForLaunch(0, entry, 64, 33), 0);
  // Another batch or head count: another grid, the launcher's choice.
  EXPECT_EQ(keySplitsForLaunch(0, entry, 128, 32), 0);
  EXPECT_EQ(keySplitsForLaunch(0, entry, 8, 32), 0);
  // The caller's count wins; a bad one goes on to be refused by the launcher.
  EXPECT_EQ(keySplitsForLaunch(2, entry, 64, 32), 2);
  EXPECT_EQ(keySplitsForLaunch(1, entry, 64, 32), 1);
  EXPECT_EQ(keySplitsForLaunch(-1, entry, 64, 32), -1);
  // No tuned count.
  EXPECT_EQ(keySplitsForLaunch(0, std::nullopt, 64, 32), 0);
  EXPECT_EQ(keySplitsForLaunch(3, std::nullopt, 64, 32), 3);
  EXPECT_TRUE(tuned.appliesTo(64, 32));
  EXPECT_FALSE(tuned.appliesTo(63, 32));
}

namespace {

/// The tuner reads spills off the driver's JIT report: the most bytes one function stores or
/// loads. A persistent kernel's producer spill (8 bytes stored, 16 loaded: ptxas -v on the
/// d64 persistent attention kernel) is within what it tolerates; a spilling loop is not.
TEST(AutotunerSpills, ReadsTheJitReport) {
  EXPECT_EQ(jitLogSpillBytes(""), 0u);
  EXPECT_EQ(jitLogSpillBytes("ptxas info    : Function properties for attention\n"
                             "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"),
            0u);
  llvm::StringRef producer =
      "ptxas info    : Function properties for attention\n"
      "    8 bytes stack frame, 8 bytes spill stores, 16 bytes spill loads\n"
      "ptxas info    : Used 128 registers, used 1 barriers, 8 bytes cumulative stack size";
  EXPECT_EQ(jitLogSpillBytes(producer), 16u);
  EXPECT_LE(jitLogSpillBytes(producer), kTolerableSpillBytes);
  llvm::StringRef loop = "Function properties for a\n 0 bytes spill stores, 0 bytes spill loads\n"
                         "Function properties for b\n 284 bytes spill stores, 312 bytes spill "
                         "loads";
  EXPECT_EQ(jitLogSpillBytes(loop), 312u);
  EXPECT_GT(jitLogSpillBytes(loop), kTolerableSpillBytes);
}

} // namespace

namespace {

/// A default without warp roles (d64 causal) gets its warp-specialized persistent form as a tuner
/// candidate: the 192-row tile, Q in shared memory, persistent, its rows last first; a kernel
/// that cannot take warp roles (mma.sync's sm_80, a paged cache) gets none.
TEST(AutotunerCandidates, WarpSpecializedPersistentForm) {
  const kernels::KernelSource *causal = kernels::find("causal");
  ASSERT_NE(causal, nullptr);
  PtxCompileOptions options;
  options.headDim = 64;
  std::optional<CompiledKernel> kernel =
      warpSpecializedForm(causal->text, causal->fileName, options);
  ASSERT_TRUE(kernel.has_value());
  EXPECT_TRUE(kernel->persistent);
  const TileConfig *form = &kernel->tiles;
  EXPECT_EQ(form->warpSpecialize, true);
  EXPECT_EQ(form->persistent, true);
  EXPECT_EQ(form->blockM, 192);
  EXPECT_EQ(form->qOperand, QOperand::Shared);
  EXPECT_EQ(form->rowOrder, RowOrder::Paired); // persistent, so its longest-first tiles paired
  EXPECT_TRUE(form->isComplete());
  options.chip = "sm_80";
  EXPECT_FALSE(warpSpecializedForm(causal->text, causal->fileName, options));
  options.chip = "sm_90a";
  // A split (decode) kernel: warp roles over the default's packed row block, a three-stage
  // TMA ring, not persistent (tgpu-persistent refuses split kernels).
  options.splitKv = true;
  options.headDim = 128;
  options.tiles = splitKvTileConfig(128, "sm_90a");
  std::optional<CompiledKernel> split =
      warpSpecializedForm(causal->text, causal->fileName, options);
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(split->tiles.warpSpecialize, true);
  EXPECT_EQ(split->tiles.blockM, 64);
  EXPECT_EQ(split->tiles.stages, 3);
  EXPECT_EQ(split->tiles.packGqa, true);
  EXPECT_EQ(split->tiles.qOperand, QOperand::Registers);
  EXPECT_FALSE(split->persistent);
  EXPECT_TRUE(split->tiles.isComplete());
  // Paged kernels gather their keys page by page: no TMA, no warp roles.
  options.pagedKv = true;
  EXPECT_FALSE(warpSpecializedForm(causal->text, causal->fileName, options));
}

} // namespace
