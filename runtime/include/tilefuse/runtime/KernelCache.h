//===- KernelCache.h - compiled kernels in memory and on disk ---*- C++ -*-===//
//
// compileToPTX behind two caches: a map in memory, then a directory shared by every process of
// the user (TILEFUSE_CACHE_DIR, default $XDG_CACHE_HOME/tilefuse or ~/.cache/tilefuse).
//
// Key: SHA-256 of the DSL text, every compile option (the tile configuration as TileConfig::print
// writes it, head dim, storage type, parameters), the target chip, the PTX features and compilerVersion() (which changes whenever the compiler's
// libraries are rebuilt differently). The buffer name (used only in diagnostics) is not part of
// it; the IR dump directory is not either.
//
// Entry: <dir>/<key>.kernel, a small text header then the payload:
//
//   tilefuse-kernel-cache 2
//   key <64 hex digits>
//   metadata <bytes>
//   ptx <bytes>
//   xxh3 <16 hex digits: xxh3_64bits of the payload>
//   <empty line>
//   <metadata JSON><PTX>
//
// The metadata is CompiledKernel::metadataJson(), declared sizes included (format 2; entries of
// format 1 lack them and are rebuilt).
//
// A file whose header, key, sizes or checksum do not match (truncated, corrupted, written by
// another format) is never loaded: it is deleted and the kernel compiled and written again.
// Writes go to a unique temporary file in the same directory, renamed over the entry, so readers
// see a whole old entry or a whole new one; processes compiling the same kernel at once each write
// a complete, identical entry and the last rename wins (no lock is needed).
//
// Environment (CacheConfig::fromEnvironment):
//   TILEFUSE_CACHE_DIR=<dir>     the disk cache's directory
//   TILEFUSE_ALWAYS_COMPILE=1    never read the disk cache: compile each kernel (once per cache
//                                object, which still remembers it in memory) and rewrite its entry
//   TILEFUSE_DUMP_IR=<dir>       dump the IR of every stage of each kernel compiled, into
//                                <dir>/<source file stem>-<first 12 digits of the key>/; implies
//                                ALWAYS_COMPILE, so a cached kernel is compiled (and dumped) again
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_RUNTIME_KERNELCACHE_H
#define TILEFUSE_RUNTIME_KERNELCACHE_H

#include "tilefuse/runtime/Compiler.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tilefuse::runtime {

struct CacheConfig {
  /// The disk cache's directory; empty: no disk cache.
  std::string directory;
  /// Skip the disk lookup (the result is still written there and kept in memory).
  bool alwaysCompile = false;
  /// See PtxCompileOptions::dumpIRDirectory; a subdirectory per kernel.
  std::string dumpIRDirectory;
  /// When not empty, only kernels whose file (or file stem: `causal` for kernels/causal.mlir)
  /// is this are dumped and compiled afresh (TILEFUSE_DUMP_IR_KERNEL).
  std::string dumpIRKernel;

  /// From TILEFUSE_CACHE_DIR / XDG_CACHE_HOME / HOME, TILEFUSE_ALWAYS_COMPILE and TILEFUSE_DUMP_IR.
  static CacheConfig fromEnvironment();
  /// TILEFUSE_CACHE_DIR, else $XDG_CACHE_HOME/tilefuse, else ~/.cache/tilefuse; empty when none
  /// of them is set.
  static std::string defaultDirectory();
};

/// Where a kernel came from.
enum class CacheSource { Memory, Disk, Compiled };
llvm::StringRef cacheSourceName(CacheSource source);

struct CacheResult {
  std::shared_ptr<const CompiledKernel> kernel;
  /// Every kernel of the entry: `kernel` alone, or a backward's three phases (kernel is the
  /// first), which share one PTX module.
  std::shared_ptr<const std::vector<CompiledKernel>> kernels;
  CacheSource source = CacheSource::Compiled;
  std::string key;
};

struct CacheStats {
  uint64_t memoryHits = 0, diskHits = 0, compiles = 0;
  /// Disk entries found truncated or corrupt (each deleted and rebuilt).
  uint64_t badEntries = 0;
  /// Disk entries that could not be written (the kernel is still returned).
  uint64_t writeFailures = 0;
  std::string lastDiskProblem; ///< what the last bad entry or failed write was
};

class KernelCache {
public:
  explicit KernelCache(CacheConfig config = CacheConfig::fromEnvironment());

  /// The kernel for `source` compiled with `options`: from memory, else from disk, else compiled
  /// (then written to disk). Thread-safe; concurrent calls for one key compile it once, calls
  /// for different keys compile concurrently. Compile errors are returned, never cached.
  llvm::Expected<CacheResult> getOrCompile(llvm::StringRef source, llvm::StringRef bufferName,
                                           const PtxCompileOptions &options);

  /// The key (64 hex digits) of `source` compiled with `options`.
  static std::string computeKey(llvm::StringRef source, const PtxCompileOptions &options);
  /// The key without the tile configuration (64 hex digits): which kernel, specialized and
  /// targeted how, whatever its configuration. The tuning database keys by it.
  static std::string computeKernelIdentity(llvm::StringRef source,
                                           const PtxCompileOptions &options);
  /// Where a kernel's IR dump goes under `base` (TILEFUSE_DUMP_IR):
  /// <base>/<stem of bufferName>-<first 12 digits of key>.
  static std::string dumpDirectory(llvm::StringRef base, llvm::StringRef bufferName,
                                   llvm::StringRef key);
  /// The entry file for `key` (empty without a disk cache).
  std::string entryPath(llvm::StringRef key) const;

  /// The entry's format, for tools and tests: serialize a kernel, and parse an entry back
  /// (errors say what is wrong with it).
  static std::string serializeEntry(llvm::StringRef key, const CompiledKernel &kernel);
  static llvm::Expected<CompiledKernel> parseEntry(llvm::StringRef key, llvm::StringRef bytes);
  /// The same for several kernels of one PTX module (a backward's phases): the metadata is the
  /// JSON array of theirs, the PTX stored once.
  static std::string serializeEntry(llvm::StringRef key, llvm::ArrayRef<CompiledKernel> kernels);
  static llvm::Expected<std::vector<CompiledKernel>> parseEntries(llvm::StringRef key,
                                                                  llvm::StringRef bytes);

  /// The derived backward of `source` (compileBackwardToPTX's three phases), cached as the
  /// forward kernels are: memory, then disk, under a key of its own (the options, including
  /// `deterministic`, marked as a backward's).
  llvm::Expected<CacheResult> getOrCompileBackward(llvm::StringRef source,
                                                   llvm::StringRef bufferName,
                                                   const PtxCompileOptions &options);
  static std::string computeBackwardKey(llvm::StringRef source, const PtxCompileOptions &options);

  /// Forgets the kernels held in memory (the next lookups go to disk).
  void clearMemory();
  CacheStats stats() const;
  const CacheConfig &config() const { return cfg; }

private:
  struct Slot;
  std::shared_ptr<const std::vector<CompiledKernel>> readEntry(llvm::StringRef key);
  void writeEntry(llvm::StringRef key, llvm::ArrayRef<CompiledKernel> kernels);
  /// getOrCompile and getOrCompileBackward: the slot of `key`, then the disk, then `compile`.
  llvm::Expected<CacheResult> getOrCompileKernels(
      std::string key, llvm::StringRef bufferName, const PtxCompileOptions &options,
      llvm::function_ref<llvm::Expected<std::vector<CompiledKernel>>(const PtxCompileOptions &)>
          compile);
  void noteBadEntry(const std::string &what);
  void noteWriteFailure(const std::string &what);

  CacheConfig cfg;
  mutable std::mutex mutex; ///< guards slots and statistics
  llvm::StringMap<std::shared_ptr<Slot>> slots;
  CacheStats statistics;
};

} // namespace tilefuse::runtime

#endif
