//===- KernelCacheTest.cpp - the kernel cache, on the CPU -----------------===//
//
// The cache holds PTX, so none of this needs a GPU: hits after a miss (memory, then disk), keys
// that change with every option, truncated and corrupted entries rebuilt (never loaded),
// TILEFUSE_ALWAYS_COMPILE, the IR dump, the declared sizes in the metadata (format 2; format-1
// entries rebuilt), concurrent threads compiling once, and several processes
// (this binary, re-run) compiling the same kernel into one directory at once.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/kernels/Registry.h"
#include "tilefuse/runtime/KernelCache.h"

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
#include <fstream>
#include <set>
#include <thread>

#include <unistd.h> // environ

using namespace tilefuse;
using namespace tilefuse::runtime;

namespace {

using test::listDir;
using test::readFile;
using test::writeFile;

/// A fresh directory, removed with the object.
struct TempDir : test::TempDir {
  TempDir() : test::TempDir("tilefuse-cache-test") {}
};


const kernels::KernelSource &causal() { return *kernels::find("causal"); }

CacheConfig configFor(const TempDir &dir) {
  CacheConfig config;
  config.directory = dir.str();
  return config;
}

CacheResult getOrCompile(KernelCache &cache, const PtxCompileOptions &options = {}) {
  auto result = cache.getOrCompile(causal().text, causal().fileName, options);
  if (!result) {
    ADD_FAILURE() << llvm::toString(result.takeError());
    return {};
  }
  return std::move(*result);
}

} // namespace

TEST(KernelCache, HitAfterMissInMemoryThenOnDisk) {
  TempDir dir;
  KernelCache cache(configFor(dir));
  CacheResult miss = getOrCompile(cache);
  ASSERT_TRUE(miss.kernel);
  EXPECT_EQ(miss.source, CacheSource::Compiled);
  EXPECT_EQ(miss.key.size(), 64u);
  EXPECT_TRUE(llvm::sys::fs::exists(cache.entryPath(miss.key)));

  CacheResult memory = getOrCompile(cache);
  EXPECT_EQ(memory.source, CacheSource::Memory);
  EXPECT_EQ(memory.kernel, miss.kernel); // the same object

  KernelCache another(configFor(dir)); // a new process, in effect
  CacheResult disk = getOrCompile(another);
  ASSERT_TRUE(disk.kernel);
  EXPECT_EQ(disk.source, CacheSource::Disk);
  EXPECT_EQ(disk.key, miss.key);
  EXPECT_EQ(disk.kernel->ptx, miss.kernel->ptx);
  EXPECT_EQ(disk.kernel->metadataJson(), miss.kernel->metadataJson());
  EXPECT_EQ(getOrCompile(another).source, CacheSource::Memory);

  CacheStats s = cache.stats(), t = another.stats();
  EXPECT_EQ(s.compiles, 1u);
  EXPECT_EQ(s.memoryHits, 1u);
  EXPECT_EQ(t.diskHits, 1u);
  EXPECT_EQ(t.compiles, 0u);
  EXPECT_EQ(s.badEntries + t.badEntries + s.writeFailures + t.writeFailures, 0u);
}

TEST(KernelCache, KeyChangesWithEveryOption) {
  PtxCompileOptions base;
  std::string text = causal().text;
  std::vector<std::pair<std::string, std::string>> keys;
  auto add = [&](const std::string &what, const PtxCompileOptions &o, const std::string &src) {
    keys.push_back({what, KernelCache::computeKey(src, o)});
  };
  add("base", base, text);
  PtxCompileOptions o = base;
  o.tiles.blockM = 128;
  add("block_m", o, text);
  o = base;
  o.tiles.blockN = 32;
  add("block_n", o, text);
  o = base;
  o.headDim = 128;
  add("head_dim", o, text);
  o = base;
  o.elementType = "f16";
  add("dtype", o, text);
  o = base;
  o.chip = "sm_80";
  add("chip", o, text);
  o = base;
  o.features = "+ptx86";
  add("features", o, text);
  o = base;
  o.tiles.copyIssue = CopyIssue::AtBarrier;
  add("copy_issue", o, text);
  o = base;
  o.tiles.mma = MmaKind::Sync;
  add("mma", o, text);
  o = base;
  o.tiles.rowsPerWarp = 32;
  add("rows_per_warp", o, text);
  o = base;
  o.tiles.qOperand = QOperand::Shared;
  add("q_operand", o, text);
  o = base;
  o.params = {"window_left=7"};
  add("params", o, text);
  o = base;
  o.shortSequences = true; // the short-sequence defaults may be another kernel
  add("short_sequences", o, text);
  add("source", base, text + " ");
  std::set<std::string> distinct;
  for (auto &[what, key] : keys) {
    EXPECT_EQ(key.size(), 64u) << what;
    EXPECT_TRUE(distinct.insert(key).second) << what << " does not change the key";
  }
  // Deterministic, and blind to what does not change the output.
  EXPECT_EQ(KernelCache::computeKey(text, base), keys[0].second);
  o = base;
  o.dumpIRDirectory = "/tmp/x";
  EXPECT_EQ(KernelCache::computeKey(text, o), keys[0].second);
  // The compiler's identity (version, build id of its libraries, LLVM) is in every key.
  EXPECT_NE(compilerVersion().find(" build "), llvm::StringRef::npos) << compilerVersion().str();
}

TEST(KernelCache, EntryFormatRoundTripsAndRejectsDamage) {
  TempDir dir;
  KernelCache cache(configFor(dir));
  CacheResult r = getOrCompile(cache);
  ASSERT_TRUE(r.kernel);
  std::string entry = readFile(cache.entryPath(r.key));
  EXPECT_EQ(entry, KernelCache::serializeEntry(r.key, *r.kernel));
  auto back = KernelCache::parseEntry(r.key, entry);
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
  EXPECT_EQ(back->ptx, r.kernel->ptx);

  auto rejected = [&](llvm::StringRef key, llvm::StringRef bytes, llvm::StringRef why) {
    auto parsed = KernelCache::parseEntry(key, bytes);
    if (parsed) {
      ADD_FAILURE() << "accepted an entry that is " << why.str();
      return;
    }
    std::string message = llvm::toString(parsed.takeError());
    EXPECT_NE(message.find(why.str()), std::string::npos) << message;
  };
  rejected(r.key, llvm::StringRef(entry).drop_back(1), "truncated");
  rejected(r.key, llvm::StringRef(entry).take_front(40), "malformed header");
  rejected(r.key, "", "not a tilefuse cache entry");
  rejected(std::string(64, '0'), entry, "the entry is for key");
  std::string flipped = entry;
  flipped[flipped.size() - 100] ^= 0x20;
  rejected(r.key, flipped, "checksum mismatch");
  rejected(r.key, entry + "x", "truncated?"); // sizes disagree either way
}

/// Damages the entry on disk, then checks that a new cache detects it, never returns it,
/// deletes and rebuilds it.
static void expectRebuilt(llvm::function_ref<std::string(const std::string &)> damage) {
  TempDir dir;
  std::string key, good;
  {
    KernelCache cache(configFor(dir));
    CacheResult r = getOrCompile(cache);
    key = r.key;
    good = readFile(cache.entryPath(key));
  }
  KernelCache cache(configFor(dir));
  std::string path = cache.entryPath(key);
  writeFile(path, damage(good));
  CacheResult r = getOrCompile(cache);
  ASSERT_TRUE(r.kernel);
  EXPECT_EQ(r.source, CacheSource::Compiled) << "a damaged entry was loaded";
  CacheStats s = cache.stats();
  EXPECT_EQ(s.badEntries, 1u);
  EXPECT_NE(s.lastDiskProblem.find(path), std::string::npos) << s.lastDiskProblem;
  // Rewritten whole: the next process gets it from disk.
  EXPECT_EQ(readFile(path), good);
  KernelCache later(configFor(dir));
  EXPECT_EQ(getOrCompile(later).source, CacheSource::Disk);
}

/// kernels/gqa.mlir's declared sizes: 8 query heads, 2 key/value heads, head dim 64.
static cuda::DeclaredSizes gqaDeclaredSizes() {
  cuda::DeclaredSizes declared;
  declared.sizes[0] = declared.sizes[3] = {-1, 8, -1, 64}; // Q, O
  declared.sizes[1] = declared.sizes[2] = {-1, 2, -1, 64}; // K, V
  declared.sizes[4] = {-1, 8, -1, -1};                     // LSE
  return declared;
}

TEST(KernelCache, CachedKernelsKeepTheirDeclaredSizes) {
  const kernels::KernelSource &gqa = *kernels::find("gqa");
  TempDir dir;
  KernelCache cache(configFor(dir));
  auto compiled = cache.getOrCompile(gqa.text, gqa.fileName, {});
  ASSERT_TRUE(bool(compiled)) << llvm::toString(compiled.takeError());
  EXPECT_EQ(compiled->kernel->declaredSizes, gqaDeclaredSizes());

  KernelCache another(configFor(dir)); // a new process, in effect
  auto cached = another.getOrCompile(gqa.text, gqa.fileName, {});
  ASSERT_TRUE(bool(cached)) << llvm::toString(cached.takeError());
  EXPECT_EQ(cached->source, CacheSource::Disk);
  EXPECT_EQ(cached->kernel->declaredSizes, gqaDeclaredSizes());
  // What a launch is checked against: the sidecar of the cached kernel, parsed as a launcher does.
  auto metadata = cuda::KernelMetadata::parse(cached->kernel->metadataJson(), "gqa");
  ASSERT_TRUE(bool(metadata)) << cuda::takeReport(metadata.takeError()).message;
  EXPECT_EQ(metadata->declaredSizes, gqaDeclaredSizes());
}

TEST(KernelCache, MetadataRoundTripsWithDeclaredSizes) {
  CompiledKernel k;
  k.name = "gqa";
  k.dtype = "bf16";
  k.blockM = 64;
  k.blockN = 128;
  k.threads = 128;
  k.headDim = 64;
  k.sharedBytes = 49152;
  k.declaredSizes = gqaDeclaredSizes();
  std::string json = k.metadataJson();
  EXPECT_NE(json.find("\"declared_sizes\""), std::string::npos) << json;
  auto back = CompiledKernel::fromMetadataJson(json, "ptx");
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
  EXPECT_EQ(back->declaredSizes, k.declaredSizes);
  EXPECT_EQ(back->metadataJson(), json);
  EXPECT_EQ(back->ptx, "ptx");

  // Metadata from before the declared sizes (a cache entry of format 1) is refused.
  std::string old = R"({"name": "gqa", "block_m": 64, "block_n": 128, "threads": 128,
    "head_dim": 64, "dtype": "bf16", "shared_bytes": 49152})";
  auto refused = CompiledKernel::fromMetadataJson(old, "");
  ASSERT_FALSE(bool(refused));
  EXPECT_NE(llvm::toString(refused.takeError()).find("missing \"declared_sizes\""),
            std::string::npos);
}

TEST(KernelCache, EntryOfTheFormerFormatIsRebuilt) {
  // Format 1 had no declared sizes; its entries are rebuilt, never loaded.
  expectRebuilt([](const std::string &good) {
    std::string old = good;
    llvm::StringRef magic = "tilefuse-kernel-cache 2\n";
    EXPECT_TRUE(llvm::StringRef(old).starts_with(magic));
    return old.replace(0, magic.size(), "tilefuse-kernel-cache 1\n");
  });
}

TEST(KernelCache, TruncatedEntryIsRebuilt) {
  expectRebuilt([](const std::string &good) { return good.substr(0, good.size() / 2); });
  expectRebuilt([](const std::string &) { return std::string(); });
}

TEST(KernelCache, CorruptedEntryIsRebuilt) {
  // One bit of the PTX.
  expectRebuilt([](const std::string &good) {
    std::string bad = good;
    bad[bad.size() - 7] ^= 0x01;
    return bad;
  });
  // The header's checksum.
  expectRebuilt([](const std::string &good) {
    std::string bad = good;
    size_t at = bad.find("xxh3 ") + 5;
    bad[at] = bad[at] == '0' ? '1' : '0';
    return bad;
  });
  // Garbage of the right length.
  expectRebuilt([](const std::string &good) { return std::string(good.size(), '\x5a'); });
}

TEST(KernelCache, AlwaysCompileBypassesTheDiskCache) {
  TempDir dir;
  {
    KernelCache cache(configFor(dir));
    getOrCompile(cache);
  }
  CacheConfig config = configFor(dir);
  config.alwaysCompile = true;
  KernelCache cache(config);
  CacheResult r = getOrCompile(cache);
  EXPECT_EQ(r.source, CacheSource::Compiled);
  EXPECT_EQ(cache.stats().diskHits, 0u);
  // Within one cache object a kernel still compiles once.
  EXPECT_EQ(getOrCompile(cache).source, CacheSource::Memory);
  // The entry it rewrote is whole.
  EXPECT_TRUE(bool(KernelCache::parseEntry(r.key, readFile(cache.entryPath(r.key)))));
}

TEST(KernelCache, ConfigFromEnvironment) {
  auto restore = [](const char *name, const char *old) {
    if (old)
      setenv(name, old, 1);
    else
      unsetenv(name);
  };
  const char *names[] = {"TILEFUSE_CACHE_DIR", "XDG_CACHE_HOME", "TILEFUSE_ALWAYS_COMPILE",
                         "TILEFUSE_DUMP_IR"};
  std::vector<std::string> saved;
  std::vector<bool> had;
  for (const char *n : names) {
    const char *v = getenv(n);
    had.push_back(v != nullptr);
    saved.push_back(v ? v : "");
  }
  unsetenv("TILEFUSE_CACHE_DIR");
  unsetenv("TILEFUSE_ALWAYS_COMPILE");
  unsetenv("TILEFUSE_DUMP_IR");
  setenv("XDG_CACHE_HOME", "/xdg/cache", 1);
  CacheConfig c = CacheConfig::fromEnvironment();
  EXPECT_EQ(c.directory, "/xdg/cache/tilefuse");
  EXPECT_FALSE(c.alwaysCompile);
  EXPECT_TRUE(c.dumpIRDirectory.empty());

  setenv("TILEFUSE_CACHE_DIR", "/my/cache", 1);
  setenv("TILEFUSE_ALWAYS_COMPILE", "1", 1);
  c = CacheConfig::fromEnvironment();
  EXPECT_EQ(c.directory, "/my/cache");
  EXPECT_TRUE(c.alwaysCompile);
  setenv("TILEFUSE_ALWAYS_COMPILE", "0", 1);
  EXPECT_FALSE(CacheConfig::fromEnvironment().alwaysCompile);
  setenv("TILEFUSE_DUMP_IR", "/dump", 1);
  c = CacheConfig::fromEnvironment();
  EXPECT_EQ(c.dumpIRDirectory, "/dump");
  EXPECT_TRUE(c.alwaysCompile) << "a dump needs a compile";

  for (size_t i = 0; i < std::size(names); ++i)
    restore(names[i], had[i] ? saved[i].c_str() : nullptr);
}

TEST(KernelCache, DumpKernelFilterDumpsOnlyThatKernel) {
  TempDir dir, dump;
  CacheConfig config = configFor(dir);
  config.dumpIRDirectory = dump.str();
  config.dumpIRKernel = "attention"; // not causal
  KernelCache cache(config);
  CacheResult r = getOrCompile(cache, PtxCompileOptions());
  ASSERT_TRUE(r.kernel);
  EXPECT_TRUE(listDir(dump.str()).empty()) << "causal was dumped, but the filter names attention";
  TempDir dump2;
  config.dumpIRDirectory = dump2.str();
  config.dumpIRKernel = "causal";
  KernelCache cache2(config);
  CacheResult r2 = getOrCompile(cache2, PtxCompileOptions());
  ASSERT_TRUE(r2.kernel);
  EXPECT_EQ(r2.source, CacheSource::Compiled) << "the kernel to dump is compiled, not read";
  EXPECT_FALSE(listDir(dump2.str()).empty());
}

TEST(KernelCache, DumpsTheIRAfterEachStage) {
  TempDir dir, dump;
  CacheConfig config = configFor(dir);
  config.dumpIRDirectory = dump.str();
  config.alwaysCompile = true;
  KernelCache cache(config);
  PtxCompileOptions options;
  options.headDim = 128; // so the specialization stage runs too
  CacheResult r = getOrCompile(cache, options);
  ASSERT_TRUE(r.kernel);
  std::string kernelDir =
      KernelCache::dumpDirectory(dump.str(), causal().fileName, r.key);
  EXPECT_EQ(llvm::sys::path::filename(kernelDir).str(), "causal-" + r.key.substr(0, 12));
  std::set<std::string> top = listDir(kernelDir);
  for (const char *expected :
       {"0-source.mlir", "1-specialize", "2-tile-to-ptx", "causal.ptx", "causal.json"})
    EXPECT_TRUE(top.count(expected)) << expected << " missing in " << kernelDir;
  EXPECT_EQ(readFile(kernelDir + "/causal.ptx"), r.kernel->ptx);
  // One file per pass of the pipeline, somewhere in the tree.
  std::set<std::string> passes;
  std::error_code ec;
  for (llvm::sys::fs::recursive_directory_iterator it(kernelDir + "/2-tile-to-ptx", ec), end;
       it != end && !ec; it.increment(ec))
    passes.insert(llvm::sys::path::filename(it->path()).str());
  for (const char *pass : {"tile-tiling", "tile-online-softmax", "tile-block-pruning",
                           "convert-tgpu-to-nvvm", "gpu-module-to-binary"}) {
    bool found = false;
    for (const std::string &file : passes)
      found |= file.find(pass) != std::string::npos;
    EXPECT_TRUE(found) << "no dump after " << pass;
  }
}

TEST(KernelCache, ConcurrentThreadsCompileOnce) {
  TempDir dir;
  KernelCache cache(configFor(dir));
  std::vector<std::thread> threads;
  std::vector<CacheResult> results(8);
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] { results[i] = getOrCompile(cache); });
  for (auto &t : threads)
    t.join();
  for (const CacheResult &r : results)
    EXPECT_EQ(r.kernel, results[0].kernel);
  CacheStats s = cache.stats();
  EXPECT_EQ(s.compiles, 1u);
  EXPECT_EQ(s.memoryHits, 7u);
}

TEST(KernelCache, DifferentKernelsCompileConcurrently) {
  TempDir dir;
  KernelCache cache(configFor(dir));
  std::vector<std::thread> threads;
  std::vector<std::string> names = {"attention", "causal", "sliding_window", "alibi"};
  std::vector<std::string> ptx(names.size());
  for (size_t i = 0; i < names.size(); ++i)
    threads.emplace_back([&, i] {
      const kernels::KernelSource *k = kernels::find(names[i]);
      auto r = cache.getOrCompile(k->text, k->fileName, {});
      if (r)
        ptx[i] = r->kernel->ptx;
      else
        ADD_FAILURE() << llvm::toString(r.takeError());
    });
  for (auto &t : threads)
    t.join();
  for (size_t i = 0; i < names.size(); ++i) {
    const kernels::KernelSource *k = kernels::find(names[i]);
    auto alone = compileToPTX(k->text, k->fileName, {});
    ASSERT_TRUE(bool(alone)) << llvm::toString(alone.takeError());
    EXPECT_EQ(ptx[i], alone->ptx) << names[i] << ": compiled concurrently, differs";
  }
  EXPECT_EQ(cache.stats().compiles, names.size());
}

TEST(KernelCache, CompileErrorsAreReturnedNotCached) {
  TempDir dir;
  KernelCache cache(configFor(dir));
  std::string broken = std::string(causal().text);
  size_t at = broken.find("tile.softmax");
  ASSERT_NE(at, std::string::npos);
  broken.replace(at, 12, "tile.softmux");
  for (int i = 0; i < 2; ++i) {
    auto r = cache.getOrCompile(broken, "my/broken.mlir", {});
    ASSERT_FALSE(bool(r));
    std::string message = llvm::toString(r.takeError());
    EXPECT_NE(message.find("my/broken.mlir:"), std::string::npos) << message;
  }
  EXPECT_EQ(cache.stats().compiles, 0u);
  EXPECT_TRUE(listDir(dir.str()).empty());
}

TEST(KernelCache, UnwritableDirectoryStillCompiles) {
  TempDir dir;
  std::string file = dir.str() + "/not-a-directory";
  writeFile(file, "x");
  CacheConfig config;
  config.directory = file + "/cache"; // below a regular file: cannot be created
  KernelCache cache(config);
  CacheResult r = getOrCompile(cache);
  ASSERT_TRUE(r.kernel);
  EXPECT_EQ(cache.stats().writeFailures, 1u);
  EXPECT_NE(cache.stats().lastDiskProblem.find("cannot write"), std::string::npos);
}

//===----------------------------------------------------------------------===//
// Several processes, one directory
//===----------------------------------------------------------------------===//

/// The child's side: runs only when the parent test re-runs this binary with
/// TILEFUSE_TEST_CHILD_CACHE_DIR set. Waits for the start file, so all children compile at
/// once, then compiles into the shared directory; prints where the kernel came from.
TEST(KernelCacheChild, CompileIntoSharedDirectory) {
  const char *dir = getenv("TILEFUSE_TEST_CHILD_CACHE_DIR");
  const char *start = getenv("TILEFUSE_TEST_CHILD_START");
  if (!dir || !start)
    GTEST_SKIP() << "runs as a child of KernelCache.ProcessesShareOneDirectory";
  for (int i = 0; i < 3000 && !llvm::sys::fs::exists(start); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CacheConfig config;
  config.directory = dir;
  KernelCache cache(config);
  CacheResult r = getOrCompile(cache);
  ASSERT_TRUE(r.kernel);
  std::printf("child-source=%s\n", cacheSourceName(r.source).str().c_str());
  EXPECT_EQ(cache.stats().badEntries, 0u) << cache.stats().lastDiskProblem;
  EXPECT_EQ(cache.stats().writeFailures, 0u) << cache.stats().lastDiskProblem;
}

TEST(KernelCache, ProcessesShareOneDirectory) {
  std::string self = llvm::sys::fs::getMainExecutable(nullptr, nullptr);
  ASSERT_FALSE(self.empty());
  TempDir dir, work;
  std::string start = work.str() + "/start";
  constexpr int children = 4;
  std::vector<llvm::sys::ProcessInfo> processes;
  std::vector<std::string> logs;
  // The children's environment: ours plus the two variables.
  std::vector<std::string> envStrings;
  for (char **e = environ; *e; ++e)
    envStrings.push_back(*e);
  envStrings.push_back("TILEFUSE_TEST_CHILD_CACHE_DIR=" + dir.str());
  envStrings.push_back("TILEFUSE_TEST_CHILD_START=" + start);
  std::vector<llvm::StringRef> env(envStrings.begin(), envStrings.end());
  for (int i = 0; i < children; ++i) {
    logs.push_back(work.str() + "/child" + std::to_string(i) + ".log");
    std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(logs.back()),
                                                  llvm::StringRef(logs.back())};
    llvm::StringRef args[] = {self, "--gtest_filter=KernelCacheChild.*"};
    std::string error;
    bool failed = false;
    processes.push_back(
        llvm::sys::ExecuteNoWait(self, args, env, redirects, 0, &error, &failed));
    ASSERT_FALSE(failed) << error;
  }
  writeFile(start, "go"); // all children compile from here on, together
  int compiled = 0;
  for (int i = 0; i < children; ++i) {
    std::string error;
    llvm::sys::ProcessInfo done =
        llvm::sys::Wait(processes[i], /*SecondsToWait=*/std::optional<unsigned>(120), &error);
    std::string log = readFile(logs[i]);
    EXPECT_EQ(done.ReturnCode, 0) << "child " << i << ": " << error << "\n" << log;
    EXPECT_NE(log.find("child-source="), std::string::npos) << log;
    compiled += log.find("child-source=compiled") != std::string::npos;
  }
  std::printf("%d of %d processes compiled the kernel (the others read the entry)\n", compiled,
              children);
  EXPECT_GE(compiled, 1);

  // One entry, whole and valid; no temporary file left behind.
  std::set<std::string> files = listDir(dir.str());
  ASSERT_EQ(files.size(), 1u) << "files: " << [&] {
    std::string all;
    for (auto &f : files)
      all += f + " ";
    return all;
  }();
  std::string key = KernelCache::computeKey(causal().text, {});
  EXPECT_EQ(*files.begin(), key + ".kernel");
  auto entry = KernelCache::parseEntry(key, readFile(dir.str() + "/" + *files.begin()));
  ASSERT_TRUE(bool(entry)) << llvm::toString(entry.takeError());
  auto fresh = compileToPTX(causal().text, causal().fileName, {});
  ASSERT_TRUE(bool(fresh));
  EXPECT_EQ(entry->ptx, fresh->ptx);
}

// A derived backward is one entry of three kernels (one PTX module): compiled, then from
// memory, then from disk in another cache, each phase's metadata back as written; the
// deterministic backward and the forward have keys of their own; a damaged entry is rebuilt.
TEST(KernelCache, BackwardIsOneEntryOfItsThreePhases) {
  TempDir dir;
  KernelCache cache(configFor(dir));
  PtxCompileOptions options;
  auto compiled = cache.getOrCompileBackward(causal().text, causal().fileName, options);
  ASSERT_TRUE(bool(compiled)) << llvm::toString(compiled.takeError());
  EXPECT_EQ(compiled->source, CacheSource::Compiled);
  ASSERT_EQ(compiled->kernels->size(), 3u);
  EXPECT_EQ(compiled->kernel.get(), &compiled->kernels->front());
  EXPECT_EQ(compiled->kernels->at(1).backwardPhase, "key_gradients");
  EXPECT_NE(compiled->key, KernelCache::computeKey(causal().text, options));
  auto memory = cache.getOrCompileBackward(causal().text, causal().fileName, options);
  ASSERT_TRUE(bool(memory));
  EXPECT_EQ(memory->source, CacheSource::Memory);

  KernelCache another(configFor(dir));
  auto disk = another.getOrCompileBackward(causal().text, causal().fileName, options);
  ASSERT_TRUE(bool(disk)) << llvm::toString(disk.takeError());
  EXPECT_EQ(disk->source, CacheSource::Disk);
  ASSERT_EQ(disk->kernels->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(disk->kernels->at(i).metadataJson(), compiled->kernels->at(i).metadataJson());
    EXPECT_EQ(disk->kernels->at(i).ptx, compiled->kernels->front().ptx);
  }
  // One kernel's reader refuses the entry of three.
  std::string entry = readFile(cache.entryPath(compiled->key));
  auto one = KernelCache::parseEntry(compiled->key, entry);
  ASSERT_FALSE(bool(one));
  EXPECT_NE(llvm::toString(one.takeError()).find("holds 3 kernels"), std::string::npos);

  PtxCompileOptions deterministic;
  deterministic.deterministic = true;
  EXPECT_NE(KernelCache::computeBackwardKey(causal().text, deterministic), compiled->key);

  // Damaged on disk: detected, deleted and compiled again.
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(cache.entryPath(compiled->key), ec);
    ASSERT_FALSE(ec);
    os << llvm::StringRef(entry).drop_back(10);
  }
  KernelCache third(configFor(dir));
  auto rebuilt = third.getOrCompileBackward(causal().text, causal().fileName, options);
  ASSERT_TRUE(bool(rebuilt)) << llvm::toString(rebuilt.takeError());
  EXPECT_EQ(rebuilt->source, CacheSource::Compiled);
  EXPECT_EQ(third.stats().badEntries, 1u);
}
