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
// A split-KV kernel's entry adds its tuned split count, with the grid it was timed on (see
// TunedKeySplits):
//
//    "key_splits": {"kv_splits": 8, "programs": 64, "key_blocks": 32, "policy_splits": 4}
//
// An entry without "key_splits" (every entry before it existed, and every unsplit kernel's)
// leaves the split count to the launcher; readers that predate it ignore the field, so the
// format stays version 1 in both directions.
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

/// A split-KV kernel's tuned split count. The best S depends on the grid (batch x heads, or KV
/// heads when GQA-packed, x row blocks) and on the key length, which the tuning key does not
/// hold (getKernel knows neither the batch nor the heads), so S is stored with the grid it was
/// timed on and used only for launches of that grid: the same programs, and key blocks in the
/// same power-of-two bucket as the timed ones (more than half of them, at most all); any other
/// launch gets the launcher's policy (CudaKernel::chooseKeySplits).
struct TunedKeySplits {
  int64_t kvSplits = 0;     ///< the fastest split count timed (>= 1)
  int64_t programs = 0;     ///< the timed grid's programs
  int64_t keyBlocks = 0;    ///< the timed key length's blocks (of the configuration's Bc)
  int64_t policySplits = 0; ///< the launcher's choice on that grid (for reports)

  /// Whether a launch of `launchPrograms` programs over `launchKeyBlocks` key blocks is the grid
  /// this was tuned on (see above).
  bool appliesTo(int64_t launchPrograms, int64_t launchKeyBlocks) const;
};

/// The split count a split-KV launch asks CudaKernel::launch for: the caller's when it asks for
/// one (anything but 0; a negative count is passed on, for the launcher to refuse), else the
/// tuned count where `tuned` applies to the launch's grid, else 0 (the launcher's policy).
int64_t keySplitsForLaunch(int64_t requested, const std::optional<TunedKeySplits> &tuned,
                           int64_t programs, int64_t keyBlocks);

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
  /// A split-KV kernel's tuned split count; none: the launcher chooses.
  std::optional<TunedKeySplits> keySplits;
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
