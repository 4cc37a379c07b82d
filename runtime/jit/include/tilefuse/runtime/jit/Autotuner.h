//===- Autotuner.h - the best configuration of a kernel on this GPU -*- C++ -*-===//
//
// tune() times a kernel's configurations on the current GPU and returns the fastest:
//
//   1. the default configuration (defaultTileConfig) is compiled first: it resolves the kernel's
//      dtype and head dim, is the baseline, and its output the one every candidate must match;
//   2. the space (TuningSpace.h) is enumerated and pruned by the resource model, with reasons;
//   3. the rest compile to PTX in parallel threads, in process (compileToPTX), and are loaded by
//      the driver's JIT in the same threads; a candidate that fails to compile or load, or whose
//      JIT report shows local memory (spills), is dropped with the reason;
//   4. each survivor runs once and its output is compared with the default's (a configuration
//      that computes something else is dropped, never chosen); a launch that fails is dropped;
//   5. the survivors are timed with CUDA events, round-robin (the order rotated each round, so
//      drift falls on all alike): warm-up rounds, then repetitions, each launch after a write of
//      a buffer twice the L2 size (cold L2, as a model's layer sees it) and on the next of several
//      input sets (rotated); candidates over 1.5x the best of the first round, and over 1.3x the
//      best median after three timed rounds, are dropped; the winner has the lowest median.
//      Timing stops early (with at least three timed rounds) where another round would end past
//      the budget. A split-KV kernel's split count is an axis of the timing: each configuration
//      runs at the launcher's choice (kvSplits = 0) and at the other keySplitCandidates around
//      it (TuningSpace.h), each count checked and timed like a candidate of its own; the winner
//      is the fastest (configuration, count), and the record keeps the count with the grid it
//      was timed on (TunedKeySplits).
//
// The problem timed: M = N = the sequence bucket (sequenceBucket), D the kernel's head dim,
// B = max(1, 16384 / N), H = max(1, 2048 / D), Hkv = H; a split-KV kernel, made for decode, runs
// decode instead: M = 1, B = 8, H = max(1, 4096 / D), Hkv = max(1, H / 4) (GQA 32/8 at D = 128,
// the decode bench's shape), unless it is varlen too. The problem's batch, heads, KV heads and
// query rows replace these where given, and sizes the kernel's signature declares win over both. A
// varlen kernel runs a packed batch instead: sequences of the bucket's length, then 7/8, 6/8, ...
// 1/8 of it in turn, up to 16k tokens (bench.py's varlen mix; M = N = the bucket bounds them).
// Errors are values: no driver or GPU, a kernel that does not compile in its default configuration,
// or a CUDA context left unusable by a faulting candidate; everything else only drops candidates.
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_RUNTIME_JIT_AUTOTUNER_H
#define TILEFUSE_RUNTIME_JIT_AUTOTUNER_H

#include "tilefuse/runtime/Compiler.h"
#include "tilefuse/runtime/cuda/CudaKernel.h"
#include "tilefuse/runtime/jit/TuningDatabase.h"
#include "tilefuse/runtime/jit/TuningSpace.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tilefuse::runtime::jit {

struct TuningProblem {
  std::string source;
  std::string bufferName;
  /// The specialization and target (head dim, dtype, parameters, chip, PTX features); its tile
  /// configuration is ignored (the space's configurations replace it).
  PtxCompileOptions options;
  /// The sequence length the kernel will run at; picks the bucket (timed at N = the bucket,
  /// and M too unless the kernel is split-KV).
  int64_t seqLength = 4096;
  /// The batch, heads, KV heads and query rows to time at; 0: the file comment's rule.
  int64_t batch = 0, heads = 0, kvHeads = 0, queries = 0;
};

struct TuningProgress {
  llvm::StringRef phase; ///< "compile" or "time"
  size_t done = 0, total = 0;
};

struct TuningOptions {
  unsigned threads = 0; ///< compile threads; 0: every core
  int warmup = 2;       ///< untimed rounds
  int repetitions = 10; ///< timed rounds (at least 3)
  int rotations = 3;    ///< input sets launches cycle through
  double budgetSeconds = 15;
  /// The share of the budget after which no candidate starts compiling or loading. Candidates
  /// compile closest to the default configuration first (fewest settings changed), so a cold
  /// machine (the driver's JIT compiles each candidate's PTX once, about 0.3 s each on an H200,
  /// one module at a time; its cache makes later tunings fast) still times the default's
  /// neighbourhood within the budget. At most four loads wait on the driver at a time, so the
  /// loads under way at that point add about a second.
  double compileBudgetShare = 0.4;
  /// The space; empty: TuningAxes::forChip.
  std::optional<TuningAxes> axes;
  /// Called from the tuning thread (never concurrently) as candidates compile and rounds run.
  std::function<void(const TuningProgress &)> progress;
};

enum class CandidateOutcome {
  Pruned,       ///< the resource model ruled it out; never compiled
  CompileFailed,
  LoadFailed,   ///< the driver's JIT refused it
  Spilled,      ///< the JIT report shows more local memory than kTolerableSpillBytes
  LaunchFailed,
  WrongResult,  ///< its output differs from the default configuration's
  Slow,         ///< over 1.5x the best in the first round, or 1.3x after three timed rounds
  OverBudget,   ///< not compiled: the compile share of the time budget was spent
  Timed,
};
llvm::StringRef candidateOutcomeName(CandidateOutcome outcome);

/// The local memory a candidate may spill to and still be timed, bytes per thread: a value or
/// two kept in L1. The persistent kernels' producer warp, at 24 registers, keeps its tile index
/// or a 64-bit address there (4-8 bytes, ptxas -v), and measured faster than the one-tile-per-CTA
/// kernel with it (docs/perf.md, 2026-12-02). More is a kernel that spills in its loops, which
/// timing would only confirm at the cost of the budget.
constexpr uint64_t kTolerableSpillBytes = 16;

/// The most spill bytes one function of a driver JIT report (ptxas -v style: "N bytes spill
/// stores, M bytes spill loads") stores or loads; 0 where it shows none.
uint64_t jitLogSpillBytes(llvm::StringRef log);

/// One split count a split-KV configuration was timed at.
struct SplitTiming {
  int64_t kvSplits = 0;  ///< as launched: 0 is the launcher's choice
  int64_t splitsRun = 0; ///< what ran (the launcher's choice resolved)
  double medianMs = 0;   ///< 0: never timed
  std::string dropped;   ///< why it left the timing early (empty: timed to the end)
};

struct CandidateReport {
  TileConfig config;
  ResourceEstimate estimate;
  CandidateOutcome outcome = CandidateOutcome::Pruned;
  std::string reason;     ///< why it was dropped
  bool isDefault = false; ///< defaultTileConfig's configuration
  double medianMs = 0;    ///< of the rounds it was timed in (Timed, Slow)
  int registers = 0;      ///< per thread, from the driver (0: not loaded)
  int64_t sharedBytes = 0; ///< as compiled (0: not compiled)
  double compileMs = 0, loadMs = 0;
  /// A split-KV configuration's split counts, the launcher's choice first, and the count its
  /// medianMs was timed at (resolved).
  std::vector<SplitTiming> splits;
  int64_t kvSplits = 0;
};

struct TuningReport {
  TuningKey key;
  TuningRecord record; ///< the winner, as the database stores it
  std::vector<CandidateReport> candidates;
  std::shared_ptr<const CompiledKernel> best; ///< the winner's PTX and metadata
  double compileSeconds = 0, checkSeconds = 0, timingSeconds = 0, totalSeconds = 0;
  int rounds = 0;            ///< timed rounds run
  std::string budgetNote;    ///< set when the budget cut the timing short
};

/// The warp-specialized form of the kernel `source` compiles to under `options`, its tiles as
/// the compiler resolves them, or none where the kernel cannot take warp roles (sm_80, paged).
/// The tuner's candidate for a default without warp roles (addDefaultCandidates toggles the
/// rest):
/// - unsplit: `warp_specialize=true,persistent=true`, which has no persistence to toggle: at d64
///   under a causal mask it measured +9% at 4k and +15% at 16k over the default, -9% at 1k
///   (docs/perf.md, 2026-12-02);
/// - split-KV (decode; not persistent): the default's row block (a packed GQA group's rows) with
///   a TMA ring of three key blocks, +2% at 4k and -5% from 32k (B = 8, GQA 32/8, D = 128;
///   docs/perf.md, 2026-12-03), so the length bucket picks.
std::optional<CompiledKernel> warpSpecializedForm(llvm::StringRef source,
                                                  llvm::StringRef bufferName,
                                                  const PtxCompileOptions &options);

/// The tuning database's key for a kernel: the kernel identity of `options` with the dtype and
/// head dim `compiled` resolved (so "as written" and the written value key alike), the bucket of
/// `seqLength`, the GPU and compilerVersion().
TuningKey tuningKeyFor(llvm::StringRef source, const PtxCompileOptions &options,
                       const CompiledKernel &compiled, int64_t seqLength, const GpuIdentity &gpu);

/// The grid a split-KV launch of `metadata` on `shape` has, as the launcher's policy counts it
/// (CudaKernel::splitCountFor) and TunedKeySplits is keyed by: the programs (batch x heads, or
/// KV heads when GQA-packed, x row blocks) and the key blocks.
struct KeySplitGrid {
  int64_t programs = 0, keyBlocks = 0;
};
KeySplitGrid keySplitGrid(const cuda::KernelMetadata &metadata, const cuda::AttentionShape &shape);

/// Tunes `problem` on the current GPU (see the file comment). Does not touch the database.
llvm::Expected<TuningReport> tune(const TuningProblem &problem, const TuningOptions &options);

} // namespace tilefuse::runtime::jit

#endif
