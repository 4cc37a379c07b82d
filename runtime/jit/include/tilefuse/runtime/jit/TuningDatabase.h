//===- TuningDatabase.h - the autotuner's winners, on disk ------*- C++ -*-===//
//
// One file per key under <cache directory>/tuning/ (the kernel cache's directory,
// TILEFUSE_CACHE_DIR), named <key>.json, where the key is the SHA-256 of TuningKey::text():
//
//   tilefuse-tuning-key 1
//   kernel=<KernelCache::computeKernelIdentity: DSL text, parameters, chip, PTX features,
//          compiler version; no tile configuration>
//   dtype=bf16
//   head_dim=128
//   seq_bucket=4096
//   gpu=NVIDIA H200|sms=132|cc=9.0|driver=13000
//   tilefuse=<compilerVersion()>
//
// File: a header line, then a JSON object (llvm::json):
//
//   tilefuse-tuning 1 key=<64 hex> bytes=<n> xxh3=<16 hex of the JSON's bytes>
//   {"key": {...the fields above...}, "config": "Br=64,Bc=128,...", "median_ms": 1.23,
//    "default_config": "...", "default_ms": 1.31, "candidates": 120, "timed": 48,
//    "tuning_seconds": 9.8, "shape": {"B": .., "H": .., "Hkv": .., "M": .., "N": ..},
//    "created": "2026-12-01T10:00:00Z"}
//
// Reads check the header, the size, the checksum, the key (the file's and the fields') and that
// the configuration parses and is complete; anything else (truncated, garbage, another format)
// is deleted and reported as a miss, so the entry is tuned and written again. Writes go to a
// unique temporary file renamed over the entry: readers see a whole old entry or a whole new
// one, and several processes may write one key at once (the last rename wins; entries for one
// key are interchangeable).
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_RUNTIME_JIT_TUNINGDATABASE_H
#define TILEFUSE_RUNTIME_JIT_TUNINGDATABASE_H

#include "tilefuse/runtime/TileConfig.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

namespace tilefuse::runtime::jit {

/// The GPU a tuning result belongs to.
struct GpuIdentity {
  std::string name; ///< "NVIDIA H200"
  int multiprocessors = 0;
  int computeMajor = 0, computeMinor = 0;
  int driverVersion = 0; ///< cuDriverGetVersion, e.g. 13000

  /// "NVIDIA H200|sms=132|cc=9.0|driver=13000"
  std::string text() const;
  /// The inverse of text() (to name another machine's GPU, e.g. for `tilefuse compile --tuned`
  /// where the database was copied from the GPU machine).
  static llvm::Expected<GpuIdentity> parse(llvm::StringRef text);
  /// The current context's GPU (Driver::currentDevice); NoDriver / NoDevice errors without one.
  static llvm::Expected<GpuIdentity> current();
};

/// The sequence-length bucket a length falls in: the next power of two, at least 512 and at
/// most 65536 (lengths beyond tune as 65536). Both M and N pick it: max(M, N).
int64_t sequenceBucket(int64_t length);

struct TuningKey {
  std::string kernelIdentity; ///< KernelCache::computeKernelIdentity
  std::string dtype;          ///< bf16 or f16
  int64_t headDim = 0;
  int64_t seqBucket = 0; ///< sequenceBucket()
  GpuIdentity gpu;
  std::string version; ///< compilerVersion()

  /// The canonical text (see the file comment); its SHA-256 is the entry's name.
  std::string text() const;
  std::string digest() const;
};

/// A winner.
struct TuningRecord {
  TileConfig config; ///< complete
  double medianMs = 0;
  TileConfig defaultConfig;
  double defaultMs = 0; ///< 0: the default was not timed
  int64_t candidates = 0, timed = 0;
  double tuningSeconds = 0;
  int64_t B = 0, H = 0, Hkv = 0, M = 0, N = 0; ///< the problem it was timed on
  std::string created;                         ///< UTC, ISO 8601
};

struct TuningDatabaseStats {
  uint64_t hits = 0, misses = 0, writes = 0;
  uint64_t badEntries = 0;    ///< truncated or corrupt entries, deleted
  uint64_t writeFailures = 0; ///< entries that could not be written (the result still counts)
  std::string lastProblem;
};

class TuningDatabase {
public:
  /// `cacheDirectory`: the kernel cache's directory (entries go under its tuning/); empty: a
  /// database that holds nothing and writes nothing.
  explicit TuningDatabase(std::string cacheDirectory);

  /// The entry for `key`, or nullopt (no entry, or a bad one, which is deleted). Thread-safe.
  std::optional<TuningRecord> lookup(const TuningKey &key);
  /// Writes the entry (atomically). A failure is counted and returned; nothing else changes.
  llvm::Error store(const TuningKey &key, const TuningRecord &record);

  /// The entry's path ("" without a directory).
  std::string entryPath(const TuningKey &key) const;
  /// The format, for tools and tests.
  static std::string serializeEntry(const TuningKey &key, const TuningRecord &record);
  static llvm::Expected<TuningRecord> parseEntry(const TuningKey &key, llvm::StringRef bytes);

  TuningDatabaseStats stats() const;
  const std::string &directory() const { return dir; }

private:
  std::string dir; ///< <cache>/tuning, or empty
  mutable std::mutex mutex;
  TuningDatabaseStats statistics;
};

} // namespace tilefuse::runtime::jit

#endif
