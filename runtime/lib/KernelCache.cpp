//===- KernelCache.cpp - compiled kernels in memory and on disk -----------===//
#include "tilefuse/runtime/KernelCache.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

#include <cstdlib>

using namespace tilefuse::runtime;

// 2: the metadata records the sizes the kernel declares ("declared_sizes"); a version-1 entry,
// without them, is rebuilt like any unreadable entry.
static constexpr llvm::StringLiteral entryMagic = "tilefuse-kernel-cache 2";
static constexpr llvm::StringLiteral entryExtension = ".kernel";

struct KernelCache::Slot {
  std::mutex mutex; ///< held while the kernel is looked up on disk or compiled
  std::shared_ptr<const std::vector<CompiledKernel>> kernels;
};

static std::string envValue(const char *name) {
  std::optional<std::string> value = llvm::sys::Process::GetEnv(name);
  return value ? *value : std::string();
}

static bool isTrue(llvm::StringRef value) {
  return !value.empty() && value != "0" && !value.equals_insensitive("false") &&
         !value.equals_insensitive("off") && !value.equals_insensitive("no");
}

std::string CacheConfig::defaultDirectory() {
  if (std::string dir = envValue("TILEFUSE_CACHE_DIR"); !dir.empty())
    return dir;
  llvm::SmallString<256> dir;
  // $XDG_CACHE_HOME, else $HOME/.cache.
  if (!llvm::sys::path::cache_directory(dir))
    return "";
  llvm::sys::path::append(dir, "tilefuse");
  return std::string(dir);
}

CacheConfig CacheConfig::fromEnvironment() {
  CacheConfig config;
  config.directory = defaultDirectory();
  config.dumpIRDirectory = envValue("TILEFUSE_DUMP_IR");
  config.dumpIRKernel = envValue("TILEFUSE_DUMP_IR_KERNEL");
  // Dumping implies compiling; with a kernel filter only that kernel bypasses the cache.
  config.alwaysCompile = isTrue(envValue("TILEFUSE_ALWAYS_COMPILE")) ||
                         (!config.dumpIRDirectory.empty() && config.dumpIRKernel.empty());
  return config;
}

llvm::StringRef tilefuse::runtime::cacheSourceName(CacheSource source) {
  switch (source) {
  case CacheSource::Memory:
    return "memory";
  case CacheSource::Disk:
    return "disk";
  case CacheSource::Compiled:
    return "compiled";
  }
  return "?";
}

KernelCache::KernelCache(CacheConfig config) : cfg(std::move(config)) {}

/// The key text of every input but the tile configuration (the tuning database's kernel
/// identity), or with it (the kernel cache's key).
static std::string keyText(llvm::StringRef header, llvm::StringRef source,
                           const PtxCompileOptions &options, const TileConfig *tiles) {
  // One "name=value" line per input; the source last, after its length, so no two different
  // inputs give the same text.
  std::string text;
  llvm::raw_string_ostream os(text);
  os << header << "\n"
     << "compiler=" << compilerVersion() << "\n"
     << "chip=" << options.chip << "\n"
     << "features=" << options.features << "\n";
  if (tiles)
    os << "tiles=" << tiles->print() << "\n";
 for (const std::string &param : options.params)
    os << "param=" << param << "\n";
  // A split-KV kernel has another signature: never the same entry as the unsplit one.
  if (options.splitKv)
    os << "split_kv=1\n";
  if (options.pagedKv)
    os << "paged_kv=1\n";
  if (options.pageSize)
    os << "page_size=" << options.pageSize << "\n";
  if (options.varlen)
    os << "varlen=1\n";
  // The short-sequence defaults may be another kernel (defaultTileConfig).
  if (options.shortSequences)
    os << "short_sequences=1\n";
  os << "head_dim=" << options.headDim << "\n"
     << "dtype=" << options.elementType << "\n"
     << "source_bytes=" << source.size() << "\n"
     << source;
  return text;
}

static std::string sha256Hex(llvm::StringRef text) {
  llvm::SHA256 sha;
  sha.update(text);
  std::array<uint8_t, 32> digest = sha.final();
  return llvm::toHex(digest, /*LowerCase=*/true);
}

std::string KernelCache::computeKey(llvm::StringRef source, const PtxCompileOptions &options) {
  // 2: the configuration is one TileConfig line (print() is canonical: unset fields left out).
  return sha256Hex(keyText("tilefuse-kernel-key 2", source, options, &options.tiles));
}

std::string KernelCache::computeBackwardKey(llvm::StringRef source,
                                           const PtxCompileOptions &options) {
  std::string text = keyText("tilefuse-backward-key 1", source, options, &options.tiles);
  text += options.deterministic ? "\ndeterministic=1" : "\ndeterministic=0";
  return sha256Hex(text);
}

std::string KernelCache::computeKernelIdentity(llvm::StringRef source,
                                               const PtxCompileOptions &options) {
  return sha256Hex(keyText("tilefuse-kernel-identity 1", source, options, nullptr));
}

std::string KernelCache::dumpDirectory(llvm::StringRef base, llvm::StringRef bufferName,
                                       llvm::StringRef key) {
  llvm::SmallString<256> dir(base);
  llvm::StringRef stem = llvm::sys::path::stem(bufferName);
  llvm::sys::path::append(dir, (stem.empty() ? "kernel" : stem) + "-" + key.take_front(12));
  return std::string(dir);
}

std::string KernelCache::entryPath(llvm::StringRef key) const {
  if (cfg.directory.empty())
    return "";
  llvm::SmallString<256> path(cfg.directory);
  llvm::sys::path::append(path, key + entryExtension);
  return std::string(path);
}

static std::string checksum(llvm::StringRef payload) {
  return llvm::utohexstr(llvm::xxh3_64bits(payload), /*LowerCase=*/true, /*Width=*/16);
}

std::string KernelCache::serializeEntry(llvm::StringRef key, const CompiledKernel &kernel) {
  return serializeEntry(key, llvm::ArrayRef<CompiledKernel>(kernel));
}

std::string KernelCache::serializeEntry(llvm::StringRef key,
                                        llvm::ArrayRef<CompiledKernel> kernels) {
  const CompiledKernel &kernel = kernels.front();
  std::string metadata = kernel.metadataJson();
  if (kernels.size() > 1) {
    std::vector<std::string> each;
    for (const CompiledKernel &k : kernels)
      each.push_back(k.metadataJson());
    metadata = "[" + llvm::join(each, ",") + "]";
  }
  std::string payload = metadata + kernel.ptx;
  std::string out;
  llvm::raw_string_ostream os(out);
  os << entryMagic << "\n"
     << "key " << key << "\n"
     << "metadata " << metadata.size() << "\n"
     << "ptx " << kernel.ptx.size() << "\n"
     << "xxh3 " << checksum(payload) << "\n"
     << "\n"
     << payload;
  return out;
}

llvm::Expected<CompiledKernel> KernelCache::parseEntry(llvm::StringRef key,
                                                       llvm::StringRef bytes) {
  auto kernels = parseEntries(key, bytes);
  if (!kernels)
    return kernels.takeError();
  if (kernels->size() != 1)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "the entry holds " + llvm::Twine(kernels->size()) +
                                       " kernels, not one");
  return std::move(kernels->front());
}

llvm::Expected<std::vector<CompiledKernel>>
KernelCache::parseEntries(llvm::StringRef key, llvm::StringRef bytes) {
  auto fail = [](const llvm::Twine &why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), why);
  };
  llvm::StringRef rest = bytes;
  auto line = [&]() {
    auto [head, tail] = rest.split('\n');
    rest = tail;
    return head;
  };
  auto field = [&](llvm::StringRef name, llvm::StringRef &value) -> bool {
    llvm::StringRef l = line();
    if (!l.consume_front(name) || !l.consume_front(" "))
      return false;
    value = l;
    return true;
  };
  if (line() != entryMagic)
    return fail("not a tilefuse cache entry (or another format version)");
  llvm::StringRef storedKey, metadataBytes, ptxBytes, sum;
  if (!field("key", storedKey) || !field("metadata", metadataBytes) || !field("ptx", ptxBytes) ||
      !field("xxh3", sum) || !line().empty())
    return fail("malformed header");
  if (storedKey != key)
    return fail("the entry is for key " + storedKey);
  uint64_t nMetadata = 0, nPtx = 0;
  if (metadataBytes.getAsInteger(10, nMetadata) || ptxBytes.getAsInteger(10, nPtx))
    return fail("malformed sizes");
  if (rest.size() != nMetadata + nPtx)
    return fail("the payload has " + llvm::Twine(rest.size()) + " bytes, the header says " +
                llvm::Twine(nMetadata + nPtx) + " (truncated?)");
  if (checksum(rest) != sum)
    return fail("checksum mismatch (corrupted)");
  llvm::StringRef metadata = rest.take_front(nMetadata);
  std::string ptx = rest.drop_front(nMetadata).str();
  std::vector<CompiledKernel> kernels;
  if (!metadata.starts_with("[")) {
    auto kernel = CompiledKernel::fromMetadataJson(metadata, ptx);
    if (!kernel)
      return kernel.takeError();
    kernels.push_back(std::move(*kernel));
    return kernels;
  }
  llvm::Expected<llvm::json::Value> value = llvm::json::parse(metadata);
  if (!value)
    return fail("metadata: " + llvm::toString(value.takeError()));
  const llvm::json::Array *array = value->getAsArray();
  if (!array || array->empty())
    return fail("metadata: an empty or malformed array");
  for (const llvm::json::Value &each : *array) {
    std::string text;
    llvm::raw_string_ostream os(text);
    os << each;
    auto kernel = CompiledKernel::fromMetadataJson(text, ptx);
    if (!kernel)
      return kernel.takeError();
    kernels.push_back(std::move(*kernel));
  }
  return kernels;
}

void KernelCache::noteBadEntry(const std::string &what) {
  std::lock_guard<std::mutex> lock(mutex);
  ++statistics.badEntries;
  statistics.lastDiskProblem = what;
}

void KernelCache::noteWriteFailure(const std::string &what) {
  std::lock_guard<std::mutex> lock(mutex);
  ++statistics.writeFailures;
  statistics.lastDiskProblem = what;
}

std::shared_ptr<const std::vector<CompiledKernel>> KernelCache::readEntry(llvm::StringRef key) {
  std::string path = entryPath(key);
  if (path.empty())
    return nullptr;
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return nullptr; // a miss (or unreadable: then the write below reports it)
  auto kernels = parseEntries(key, (*buffer)->getBuffer());
  if (!kernels) {
    // Never loaded: delete it, so the entry written after compiling replaces it (a concurrent
    // writer's fresh entry may go too; it is rebuilt on the next miss).
    noteBadEntry(path + ": " + llvm::toString(kernels.takeError()));
    (void)llvm::sys::fs::remove(path);
    return nullptr;
  }
  return std::make_shared<const std::vector<CompiledKernel>>(std::move(*kernels));
}

void KernelCache::writeEntry(llvm::StringRef key, llvm::ArrayRef<CompiledKernel> kernels) {
  std::string path = entryPath(key);
  if (path.empty())
    return;
  auto failed = [&](const llvm::Twine &why) {
    noteWriteFailure(("cannot write " + path + ": " + why).str());
  };
  if (std::error_code ec = llvm::sys::fs::create_directories(cfg.directory))
    return failed("creating the directory: " + ec.message());
  // A temporary file beside the entry, renamed over it once complete (LLVM's writeToOutput):
  // readers and other writers never see a partial entry.
  if (llvm::Error e = llvm::writeToOutput(path, [&](llvm::raw_ostream &os) {
        os << serializeEntry(key, kernels);
        return llvm::Error::success();
      }))
    return failed(llvm::toString(std::move(e)));
}

llvm::Expected<CacheResult> KernelCache::getOrCompile(llvm::StringRef source,
                                                      llvm::StringRef bufferName,
                                                      const PtxCompileOptions &options) {
  return getOrCompileKernels(
      computeKey(source, options), bufferName, options,
      [&](const PtxCompileOptions &o) -> llvm::Expected<std::vector<CompiledKernel>> {
        auto compiled = compileToPTX(source, bufferName, o);
        if (!compiled)
          return compiled.takeError();
        return std::vector<CompiledKernel>{std::move(*compiled)};
      });
}

llvm::Expected<CacheResult> KernelCache::getOrCompileBackward(llvm::StringRef source,
                                                              llvm::StringRef bufferName,
                                                              const PtxCompileOptions &options) {
  return getOrCompileKernels(computeBackwardKey(source, options), bufferName, options,
                             [&](const PtxCompileOptions &o) {
                               return compileBackwardToPTX(source, bufferName, o);
                             });
}

llvm::Expected<CacheResult> KernelCache::getOrCompileKernels(
    std::string key, llvm::StringRef bufferName, const PtxCompileOptions &options,
    llvm::function_ref<llvm::Expected<std::vector<CompiledKernel>>(const PtxCompileOptions &)>
        compile) {
  CacheResult result;
  result.key = std::move(key);
  // `kernel` shares the ownership of the entry's kernels and points at the first.
  auto found = [&](std::shared_ptr<const std::vector<CompiledKernel>> kernels,
                   CacheSource source) {
    result.kernel = std::shared_ptr<const CompiledKernel>(kernels, &kernels->front());
    result.kernels = std::move(kernels);
    result.source = source;
    return result;
  };
  std::shared_ptr<Slot> slot;
  {
    std::lock_guard<std::mutex> lock(mutex);
    std::shared_ptr<Slot> &s = slots[result.key];
    if (!s)
      s = std::make_shared<Slot>();
    slot = s;
  }
  // One lookup or compile per key at a time; the cache-wide mutex is not held meanwhile.
  std::lock_guard<std::mutex> slotLock(slot->mutex);
  if (slot->kernels) {
    std::lock_guard<std::mutex> lock(mutex);
    ++statistics.memoryHits;
    return found(slot->kernels, CacheSource::Memory);
  }
  bool dumpThis = !cfg.dumpIRDirectory.empty() &&
                  (cfg.dumpIRKernel.empty() || cfg.dumpIRKernel == bufferName ||
                   cfg.dumpIRKernel == llvm::sys::path::stem(bufferName));
  if (!cfg.alwaysCompile && !dumpThis)
    if (auto kernels = readEntry(result.key)) {
      std::lock_guard<std::mutex> lock(mutex);
      ++statistics.diskHits;
      slot->kernels = kernels;
      return found(std::move(kernels), CacheSource::Disk);
    }

  PtxCompileOptions compileOptions = options;
  if (dumpThis)
    compileOptions.dumpIRDirectory = dumpDirectory(cfg.dumpIRDirectory, bufferName, result.key);
  auto compiled = compile(compileOptions);
  if (!compiled)
    return compiled.takeError();
  auto kernels = std::make_shared<const std::vector<CompiledKernel>>(std::move(*compiled));
  writeEntry(result.key, *kernels);
  {
    std::lock_guard<std::mutex> lock(mutex);
    ++statistics.compiles;
    slot->kernels = kernels;
  }
  return found(std::move(kernels), CacheSource::Compiled);
}

void KernelCache::clearMemory() {
  std::lock_guard<std::mutex> lock(mutex);
  slots.clear();
}

CacheStats KernelCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex);
  return statistics;
}
