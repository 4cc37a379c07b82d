//===- TuningDatabaseTest.cpp - the autotuner's database, and the GPU path -===//
#include "tilefuse/kernels/Registry.h"
#include "tilefuse/runtime/Compiler.h"
#include "tilefuse/runtime/Tilefuse.h"
#include "tilefuse/runtime/jit/Autotuner.h"
#include "tilefuse/runtime/jit/TuningDatabase.h"
#include "tilefuse/runtime/cuda/Driver.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include "FileTestUtil.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <set>
#include <thread>
#include <unistd.h> // environ

using namespace tilefuse;
using namespace tilefuse::runtime;
using namespace tilefuse::runtime::jit;

namespace {

using test::listDir;
using test::readFile;
using test::writeFile;

/// A fresh directory, removed with the object.
struct TempDir : test::TempDir {
  TempDir() : test::TempDir("tilefuse-tuning-test") {}
};


TuningKey sampleKey() {
  TuningKey key;
  key.kernelIdentity = std::string(64, 'a');
  key.dtype = "bf16";
  key.headDim = 128;
  key.seqBucket = sequenceBucket(3000);
  key.gpu.name = "NVIDIA H200";
  key.gpu.multiprocessors = 132;
  key.gpu.computeMajor = 9;
  key.gpu.computeMinor = 0;
  key.gpu.driverVersion = 13000;
  key.version = compilerVersion().str();
  return key;
}

TuningRecord sampleRecord(int64_t blockN = 128) {
  TuningRecord r;
  r.config = *TileConfig::parse("Br=64,Bc=" + std::to_string(blockN) +
                                ",rows_per_warp=16,mma=wgmma,q=registers,copy_issue=eager,stages=2,pack_gqa=false");
  r.medianMs = 1.25;
  r.defaultConfig = defaultTileConfig(128);
  r.defaultMs = 1.5;
  r.candidates = 120;
  r.timed = 40;
  r.tuningSeconds = 9.5;
  r.B = 4;
  r.H = 16;
  r.Hkv = 16;
  r.M = r.N = 4096;
  r.created = "2026-12-01T00:00:00Z";
  return r;
}

} // namespace

TEST(TuningDatabase, SequenceBuckets) {
  EXPECT_EQ(sequenceBucket(1), 512);
  EXPECT_EQ(sequenceBucket(512), 512);
  EXPECT_EQ(sequenceBucket(513), 1024);
  EXPECT_EQ(sequenceBucket(4096), 4096);
  EXPECT_EQ(sequenceBucket(3000), 4096);
  EXPECT_EQ(sequenceBucket(1 << 20), 65536);
}

TEST(TuningDatabase, GpuIdentityRoundTrip) {
  GpuIdentity gpu = sampleKey().gpu;
  EXPECT_EQ(gpu.text(), "NVIDIA H200|sms=132|cc=9.0|driver=13000");
  auto back = GpuIdentity::parse(gpu.text());
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
  EXPECT_EQ(back->text(), gpu.text());
  auto bad = GpuIdentity::parse("NVIDIA H200|sms=x|cc=9.0|driver=13000");
  ASSERT_FALSE(bool(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("bad sms="), std::string::npos);
}

TEST(TuningDatabase, StoreThenLookupInAnotherInstance) {
  TempDir dir;
  TuningKey key = sampleKey();
  {
    TuningDatabase db(dir.str());
    EXPECT_FALSE(db.lookup(key));
    ASSERT_FALSE(bool(db.store(key, sampleRecord())));
    EXPECT_EQ(db.stats().writes, 1u);
  }
  TuningDatabase again(dir.str()); // another process, in effect
  std::optional<TuningRecord> r = again.lookup(key);
  ASSERT_TRUE(r);
  TuningRecord want = sampleRecord();
  EXPECT_EQ(r->config, want.config);
  EXPECT_EQ(r->defaultConfig, want.defaultConfig);
  EXPECT_DOUBLE_EQ(r->medianMs, want.medianMs);
  EXPECT_DOUBLE_EQ(r->defaultMs, want.defaultMs);
  EXPECT_EQ(r->candidates, 120);
  EXPECT_EQ(r->M, 4096);
  EXPECT_EQ(r->created, want.created);
  EXPECT_EQ(again.stats().hits, 1u);
  // One file per key, under tuning/, named by the key's digest; no temporary left.
  EXPECT_EQ(listDir(dir.str() + "/tuning"), std::set<std::string>{key.digest() + ".json"});
  EXPECT_EQ(again.entryPath(key), dir.str() + "/tuning/" + key.digest() + ".json");
}

TEST(TuningDatabase, NoDirectoryHoldsNothing) {
  TuningDatabase db("");
  EXPECT_FALSE(bool(db.store(sampleKey(), sampleRecord())));
  EXPECT_FALSE(db.lookup(sampleKey()));
  EXPECT_EQ(db.entryPath(sampleKey()), "");
}

TEST(TuningDatabase, EveryKeyFieldChangesTheKey) {
  std::vector<TuningKey> keys(9, sampleKey());
  keys[1].kernelIdentity = std::string(64, 'b');
  keys[2].dtype = "f16";
  keys[3].headDim = 64;
  keys[4].seqBucket = 8192;
  keys[5].gpu.name = "NVIDIA H100 80GB HBM3";
  keys[6].gpu.multiprocessors = 114;
  keys[7].gpu.driverVersion = 12080;
  keys[8].version = "tilefuse 9.9.9";
  std::set<std::string> digests;
  for (const TuningKey &k : keys)
    digests.insert(k.digest());
  EXPECT_EQ(digests.size(), keys.size());
  TuningKey cc = sampleKey();
  cc.gpu.computeMinor = 1;
  EXPECT_NE(cc.digest(), sampleKey().digest());

  // And each is a miss for an entry stored under the original.
  TempDir dir;
  TuningDatabase db(dir.str());
  ASSERT_FALSE(bool(db.store(keys[0], sampleRecord())));
  EXPECT_TRUE(db.lookup(keys[0]));
  for (size_t i = 1; i < keys.size(); ++i)
    EXPECT_FALSE(db.lookup(keys[i])) << i;
  EXPECT_FALSE(db.lookup(cc));
  EXPECT_EQ(db.stats().badEntries, 0u);
}

TEST(TuningDatabase, KernelIdentityIgnoresTheConfigurationOnly) {
  const kernels::KernelSource &causal = *kernels::find("causal");
  auto compiled = compileToPTX(causal.text, causal.fileName, {});
  ASSERT_TRUE(bool(compiled)) << llvm::toString(compiled.takeError());
  GpuIdentity gpu = sampleKey().gpu;
  PtxCompileOptions asWritten, explicitTiles, explicitShape, other;
  explicitTiles.tiles = *TileConfig::parse("Br=128,mma=sync");
  explicitShape.headDim = compiled->headDim; // as written, spelled out: the same kernel
  explicitShape.elementType = compiled->dtype;
  other.params = {"x=1"};
  TuningKey base = tuningKeyFor(causal.text, asWritten, *compiled, 4096, gpu);
  EXPECT_EQ(tuningKeyFor(causal.text, explicitTiles, *compiled, 4096, gpu).digest(),
            base.digest());
  EXPECT_EQ(tuningKeyFor(causal.text, explicitShape, *compiled, 4000, gpu).digest(),
            base.digest());
  EXPECT_NE(tuningKeyFor(causal.text, other, *compiled, 4096, gpu).digest(), base.digest());
  // The short-sequence defaults follow the length, which the bucket already keys: one key for
  // a 1k bucket, whether the caller compiled its default for short sequences or not.
  PtxCompileOptions shortDefaults;
  shortDefaults.shortSequences = true;
  EXPECT_EQ(tuningKeyFor(causal.text, shortDefaults, *compiled, 1024, gpu).digest(),
            tuningKeyFor(causal.text, asWritten, *compiled, 1024, gpu).digest());
  EXPECT_NE(tuningKeyFor(causal.text, asWritten, *compiled, 8192, gpu).digest(), base.digest());
  EXPECT_NE(tuningKeyFor(std::string(causal.text) + " ", asWritten, *compiled, 4096, gpu).digest(),
            base.digest());
  EXPECT_EQ(base.dtype, "bf16");
  EXPECT_EQ(base.seqBucket, 4096);
}

TEST(TuningDatabase, TruncatedAndGarbageEntriesAreDeletedAndRebuilt) {
  TempDir dir;
  TuningKey key = sampleKey();
  std::string good = TuningDatabase::serializeEntry(key, sampleRecord());
  std::string body = good.substr(good.find('\n') + 1);
  std::string flipped = good;
  flipped[flipped.find("\"config\"") + 12] ^= 1; // one byte of the payload
  TuningKey otherKey = key;
  otherKey.headDim = 64;
  struct Case {
    const char *what;
    std::string bytes;
    const char *why;
  } cases[] = {
      {"truncated", good.substr(0, good.size() - 10), "truncated?"},
      {"empty", "", "not a tilefuse tuning entry"},
      {"garbage", "\x7f\x45\x4c\x46 not json at all\n", "not a tilefuse tuning entry"},
      {"JSON without the header", body, "not a tilefuse tuning entry"},
      {"flipped byte", flipped, "checksum mismatch"},
      {"another key's entry", TuningDatabase::serializeEntry(otherKey, sampleRecord()),
       "the entry is for key"},
  };
  for (const Case &c : cases) {
    TuningDatabase db(dir.str());
    ASSERT_FALSE(bool(db.store(key, sampleRecord())));
    writeFile(db.entryPath(key), c.bytes);
    EXPECT_FALSE(db.lookup(key)) << c.what;
    EXPECT_EQ(db.stats().badEntries, 1u) << c.what;
    EXPECT_NE(db.stats().lastProblem.find(c.why), std::string::npos)
        << c.what << ": " << db.stats().lastProblem;
    EXPECT_FALSE(llvm::sys::fs::exists(db.entryPath(key))) << c.what << ": not deleted";
    // Rebuilt: the next store is read back.
    ASSERT_FALSE(bool(db.store(key, sampleRecord(64))));
    std::optional<TuningRecord> r = db.lookup(key);
    ASSERT_TRUE(r) << c.what;
    EXPECT_EQ(*r->config.blockN, 64) << c.what;
  }
}

TEST(TuningDatabase, ParseRejectsIncompleteOrInvalidConfigurations) {
  TuningKey key = sampleKey();
  TuningRecord partial = sampleRecord();
  partial.config.copyIssue.reset();
  auto e = TuningDatabase::parseEntry(key, TuningDatabase::serializeEntry(key, partial));
  ASSERT_FALSE(bool(e));
  EXPECT_NE(llvm::toString(e.takeError()).find("not a complete configuration"),
            std::string::npos);
  TuningRecord invalid = sampleRecord();
  invalid.config.rowsPerWarp = 32; // wgmma with 32 rows per warp
  e = TuningDatabase::parseEntry(key, TuningDatabase::serializeEntry(key, invalid));
  ASSERT_FALSE(bool(e));
  EXPECT_NE(llvm::toString(e.takeError()).find("mma=wgmma needs"), std::string::npos);
}

TEST(TuningDatabase, UnwritableDirectoryIsAnErrorValue) {
  TempDir dir;
  std::string file = dir.str() + "/not-a-directory";
  writeFile(file, "x");
  TuningDatabase db(file);
  llvm::Error e = db.store(sampleKey(), sampleRecord());
  ASSERT_TRUE(bool(e));
  EXPECT_NE(llvm::toString(std::move(e)).find("cannot write"), std::string::npos);
  EXPECT_EQ(db.stats().writeFailures, 1u);
}

TEST(TuningDatabase, ThreadsWriteAndReadOneKey) {
  TempDir dir;
  TuningKey key = sampleKey();
  TuningDatabase db(dir.str());
  std::vector<std::thread> threads;
  std::atomic<int> badReads{0};
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        ASSERT_FALSE(bool(db.store(key, sampleRecord(t % 2 ? 64 : 128))));
        if (std::optional<TuningRecord> r = db.lookup(key))
          badReads += *r->config.blockN != 64 && *r->config.blockN != 128;
      }
    });
  for (std::thread &t : threads)
    t.join();
  EXPECT_EQ(badReads, 0);
  EXPECT_EQ(db.stats().badEntries, 0u) << db.stats().lastProblem;
  EXPECT_EQ(listDir(dir.str() + "/tuning").size(), 1u);
}

/// The child's side of ProcessesShareOneDatabase: stores and reads the shared key many times.
TEST(TuningDatabaseChild, WriteIntoSharedDirectory) {
  const char *dir = getenv("TILEFUSE_TEST_CHILD_TUNING_DIR");
  const char *start = getenv("TILEFUSE_TEST_CHILD_START");
  const char *index = getenv("TILEFUSE_TEST_CHILD_INDEX");
  if (!dir || !start || !index)
    GTEST_SKIP() << "runs as a child of TuningDatabase.ProcessesShareOneDatabase";
  for (int i = 0; i < 3000 && !llvm::sys::fs::exists(start); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  TuningDatabase db(dir);
  int bad = 0;
  for (int i = 0; i < 100; ++i) {
    ASSERT_FALSE(bool(db.store(sampleKey(), sampleRecord(std::atoi(index) % 2 ? 64 : 128))));
    std::optional<TuningRecord> r = db.lookup(sampleKey());
    bad += !r;
  }
  std::printf("child-misses=%d\n", bad);
  EXPECT_EQ(db.stats().badEntries, 0u) << db.stats().lastProblem;
}

TEST(TuningDatabase, ProcessesShareOneDatabase) {
  std::string self = llvm::sys::fs::getMainExecutable(nullptr, nullptr);
  ASSERT_FALSE(self.empty());
  TempDir dir, work;
  std::string start = work.str() + "/start";
  constexpr int children = 4;
  std::vector<llvm::sys::ProcessInfo> processes;
  std::vector<std::string> logs;
  for (int i = 0; i < children; ++i) {
    std::vector<std::string> envStrings;
    for (char **e = environ; *e; ++e)
      envStrings.push_back(*e);
    envStrings.push_back("TILEFUSE_TEST_CHILD_TUNING_DIR=" + dir.str());
    envStrings.push_back("TILEFUSE_TEST_CHILD_START=" + start);
    envStrings.push_back("TILEFUSE_TEST_CHILD_INDEX=" + std::to_string(i));
    std::vector<llvm::StringRef> env(envStrings.begin(), envStrings.end());
    logs.push_back(work.str() + "/child" + std::to_string(i) + ".log");
    std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(logs.back()),
                                                  llvm::StringRef(logs.back())};
    llvm::StringRef args[] = {self, "--gtest_filter=TuningDatabaseChild.*"};
    std::string error;
    bool failed = false;
    processes.push_back(llvm::sys::ExecuteNoWait(self, args, env, redirects, 0, &error, &failed));
    ASSERT_FALSE(failed) << error;
  }
  writeFile(start, "go");
  for (int i = 0; i < children; ++i) {
    std::string error;
    llvm::sys::ProcessInfo done =
        llvm::sys::Wait(processes[i], std::optional<unsigned>(120), &error);
    std::string log = readFile(logs[i]);
    EXPECT_EQ(done.ReturnCode, 0) << "child " << i << ": " << error << "\n" << log;
    // Every read found a whole entry: renames replace it, never remove it.
    EXPECT_NE(log.find("child-misses=0"), std::string::npos) << log;
  }
  EXPECT_EQ(listDir(dir.str() + "/tuning").size(), 1u);
  TuningDatabase db(dir.str());
  EXPECT_TRUE(db.lookup(sampleKey()));
  EXPECT_EQ(db.stats().badEntries, 0u);
}

//===----------------------------------------------------------------------===//
// The GPU side: tuning and timing (skips without a GPU)
//===----------------------------------------------------------------------===//

static std::string noGpuReason() {
  auto driver = cuda::Driver::get();
  if (driver)
    return "";
  std::string why = cuda::takeReport(driver.takeError()).message;
  return llvm::StringRef(why).starts_with("no GPU (") ? "skipped: " + why
                                                      : "skipped: no GPU (" + why + ")";
}

TEST(AutotunerGpu, TunesCausalAndTheRuntimeReusesTheDatabase) {
  if (std::string why = noGpuReason(); !why.empty()) {
    std::printf("%s\n", why.c_str());
    GTEST_SKIP() << why;
  }
  const kernels::KernelSource &causal = *kernels::find("causal");
  TuningProblem problem;
  problem.source = causal.text;
  problem.bufferName = causal.fileName;
  problem.seqLength = 1024;
  TuningOptions options;
  TuningAxes axes = TuningAxes::forChip("sm_90a"); // a small space: this is not a benchmark
  axes.blockM = {64, 128};
  axes.blockN = {64, 128};
  axes.copyIssue = {CopyIssue::Eager};
  axes.stages = {2};
  axes.ctasPerSm = {std::nullopt, 3};
  options.axes = axes;
  options.repetitions = 5;
  auto report = tune(problem, options);
  ASSERT_TRUE(bool(report)) << llvm::toString(report.takeError());
  EXPECT_TRUE(report->record.config.isComplete());
  EXPECT_GT(report->record.medianMs, 0);
  EXPECT_GT(report->record.defaultMs, 0);
  EXPECT_LE(report->record.medianMs, report->record.defaultMs);
  EXPECT_LT(report->totalSeconds, 15);
  int timed = 0;
  for (const CandidateReport &c : report->candidates) {
    if (c.outcome != CandidateOutcome::Timed && c.outcome != CandidateOutcome::Slow) {
      EXPECT_FALSE(c.reason.empty()) << c.config.print();
    }
    timed += c.medianMs > 0;
  }
  EXPECT_GE(timed, 2);
  // The default's grid reversed (row_order=descending) is one more candidate, timed like any.
  EXPECT_TRUE(llvm::any_of(report->candidates, [](const CandidateReport &c) {
    return c.config.rowOrder == RowOrder::Descending && c.medianMs > 0;
  }));

  // Stored, a runtime in Cached mode takes it without tuning.
  TempDir dir;
  TuningDatabase db(dir.str());
  ASSERT_FALSE(bool(db.store(report->key, report->record)));
  RuntimeOptions ro;
  ro.cacheDirectory = dir.str();
  ro.autotune = AutotuneMode::Cached;
  Runtime runtime(ro);
  KernelSpec spec;
  spec.kernel = "causal";
  spec.seqLen = 1000; // the same bucket
  std::shared_ptr<const Kernel> kernel;
  Status s = runtime.getKernel(spec, kernel);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(kernel->configSource(), "database");
  EXPECT_EQ(kernel->config(), report->record.config.print());
  EXPECT_EQ(runtime.stats().tunings, 0u);
}
