//===- Tilefuse.h - the embeddable runtime: C++ API -------------*- C++ -*-===//
//
// Get an attention kernel by bundled name (kernels/, `tilefuse list`) or by DSL text, specialized
// (storage type, head dim) and configured (block sizes, target chip), and launch it on device
// pointers, shapes, strides and a CUDA stream:
//
//   tilefuse::KernelSpec spec;
//   spec.kernel = "causal";
//   spec.headDim = 128;
//   std::shared_ptr<const tilefuse::Kernel> kernel;
//   tilefuse::Status status = tilefuse::Runtime::global().getKernel(spec, kernel);
//   if (status.ok())
//     status = kernel->launch(stream, q, k, v, o, lse, {B, H, Hkv, M, N, 128});
//   if (!status.ok())
//     std::fprintf(stderr, "%s\n", status.message().c_str());
//
// Kernels compile in process (DSL -> PTX through MLIR/LLVM), go through the kernel cache (memory,
// then the disk directory TILEFUSE_CACHE_DIR; see tilefuse/runtime/KernelCache.h in the source
// tree for its format and environment variables) and are JIT-loaded by the CUDA driver
// (libcuda.so.1, opened at run time) on their first launch. Errors are values: a Status with a
// code and a message (DSL errors with file:line:col); nothing throws, aborts or exits.
// Everything is thread-safe.
//
// This header uses only the C++ standard library: it is the installed C++ interface of
// libtilefuse.so (find_package(tilefuse), target tilefuse::tilefuse). The C interface is
// tilefuse/tilefuse.h.
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_RUNTIME_TILEFUSE_H
#define TILEFUSE_RUNTIME_TILEFUSE_H

#include "tilefuse/runtime/HostView.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tilefuse {

/// The same values as tilefuse_status in tilefuse/tilefuse_status.h.
enum class StatusCode : int {
  Ok = 0,
  Unavailable = 1,     ///< no CUDA driver or no GPU
  InvalidArgument = 2, ///< bad kernel name, option, shape, stride or pointer; nothing launched
  Cuda = 3,            ///< a CUDA driver call failed
  Compile = 4,         ///< the DSL text did not compile (file:line:col in the message)
};

class Status {
public:
  Status() = default; ///< OK
  Status(StatusCode code, std::string message);
  bool ok() const { return statusCode == StatusCode::Ok; }
  StatusCode code() const { return statusCode; }
  const std::string &message() const { return text; }

private:
  StatusCode statusCode = StatusCode::Ok;
  std::string text;
};

/// Whether getKernel takes its tile configuration from the autotuner (RuntimeOptions::autotune,
/// TILEFUSE_AUTOTUNE=off|cached|on):
///   Off     the default configuration for the head dimension and chip (defaultTileConfig);
///   Cached  the tuning database's configuration when it has one for this kernel, dtype, head
///           dim, sequence bucket, GPU and tilefuse version (`tilefuse tune` writes it), else
///           the default;
///   On      as Cached, and on a miss the kernel is tuned there and then (up to ~15 s, once per
///           key: concurrent calls wait for one tuning, and the winner goes into the database
///           for every later process).
/// The database lives in the cache directory (<cacheDirectory>/tuning/). Without a GPU there is
/// nothing to tune for, and every mode gives the default. An explicit configuration in the spec
/// (blockM, blockN or config) is never replaced by a tuned one.
enum class AutotuneMode { Off, Cached, On };

/// Which kernel, specialized and configured how. Every field takes part in the cache key.
struct KernelSpec {
  /// A bundled kernel (attention, causal, sliding_window, alibi, softcap, prefix_lm, gqa, mqa),
  /// or empty to compile `source`.
  std::string kernel;
  /// DSL text (a module with one kernel function), when `kernel` is empty.
  std::string source;
  /// The file name diagnostics give for `source` (file:line:col).
  std::string sourceName = "<source>";
  /// Storage type of Q, K, V, O: "bf16" or "f16"; empty: as the kernel is written.
  std::string dtype;
  /// Head dimension D; 0: as the kernel is written.
  int64_t headDim = 0;
  /// Variant parameters, "NAME=VALUE" each: the constants the kernel marks with a tile.param
  /// name (sliding_window: window_left, window_right; prefix_lm: prefix; softcap: cap).
  std::vector<std::string> params;
  /// Rows of Q per program (a multiple of 16 up to 256) and keys per block; 0: the tuned default
  /// for the head dimension (compileToPTX's defaultTileConfig).
  int64_t blockM = 0, blockN = 0;
  /// Target chip: "sm_90a" or "sm_80"; empty: the current GPU's (sm_90a when there is none).
  std::string arch;
  /// NVPTX features (the PTX version); empty: "+ptx80".
  std::string ptxFeatures;
  /// The tile configuration as text, KEY=VALUE settings: Br, Bc, rows_per_warp (16 or 32), mma
  /// (sync or wgmma), q (registers or shared), copy_issue (eager or at-barrier), e.g.
  /// "Br=64,Bc=128,mma=wgmma"; settings left out take the default (or the tuned) value.
  /// blockM / blockN, when not 0, override its Br / Bc.
  std::string config;
  /// Autotuning for this kernel; empty: the runtime's (RuntimeOptions::autotune).
  std::optional<AutotuneMode> autotune;
  /// The sequence length (the larger of M and N) the kernel will mostly run at: picks the
  /// tuning database's bucket (the next power of two, 512 ... 65536; 0: 4096) and, without a
  /// configuration or a tuned one, the default's short-sequence form up to 1024 keys
  /// (isShortSequence: defaultTileConfig's `shortSequences`; 0: the long one). Any kernel runs
  /// at any length.
  int64_t seqLen = 0;
  /// The backward (HostAttention, getBackward): dQ accumulated across key blocks in a fixed
  /// order (bitwise the same on every run) instead of by atomic adds. Unset, the GPU backward
  /// takes the faster of the two: on sm_90a above head dim 64 that is the ordered one
  /// (Backward::deterministic() says which). The forward does not depend on it.
  bool deterministic = false;
  /// Split-KV (tile-split-kv): each row block's keys shared out over S CTAs, merged exactly;
  /// for decode and other grids too small for the GPU. Each launch picks S from the SM count
  /// and the shape. A separate kernel (its own cache entry) from the unsplit one.
  bool splitKv = false;
  /// Paged KV (tile-paged-kv): K and V are paged caches, read through a page table and a
  /// length per sequence (Kernel::launch's `paged`); any variant, split or not. Not tuned: it
  /// runs the default (or explicit) configuration.
  bool pagedKv = false;
  /// With pagedKv: rows per page, fixed at compile time (divisions by a constant per row copied:
  /// faster), or 0: any, given at each launch.
  int64_t pageSize = 0;
  /// Varlen (tile-varlen): packed batches of variable-length sequences, found through
  /// cumulative offsets (Kernel::launch's `varlen`; FlashAttention's varlen API). With pagedKv
  /// only the queries pack: chunked prefill over a paged cache, each sequence's keys its
  /// lengths' rows (FlashAttention's block_table with seqused_k). With splitKv (GQA-packed, as
  /// split kernels are): decode over ragged keys.
  bool varlen = false;
};

/// A paged key/value cache's page table and lengths (tilefuse/runtime/HostView.h; device
/// pointers for Kernel::launch).
using runtime::PagedKV;
/// A packed batch's sequence offsets (tilefuse/runtime/HostView.h; device pointers for
/// Kernel::launch).
using runtime::Varlen;

/// Sizes: Q and O are B x H x M x D, K and V are B x Hkv x N x D, LSE is B x H x M.
struct AttentionShape {
  int64_t B = 1, H = 1, Hkv = 1, M = 1, N = 1, D = 64;
};

/// A compiled kernel. Obtained from Runtime::getKernel; lives as long as any pointer to it.
class Kernel {
public:
  struct Impl;
  explicit Kernel(std::unique_ptr<Impl> impl);
  ~Kernel();
  Kernel(const Kernel &) = delete;
  Kernel &operator=(const Kernel &) = delete;

  /// Enqueues the kernel on `stream` (a CUstream; nullptr: the legacy default stream).
  /// q, o: B x H x M x D and k, v: B x Hkv x N x D device pointers in the kernel's dtype;
  /// lse: B x H x M floats. `strides`: 14 element strides in the order q_b, q_h, q_m, k_b, k_h,
  /// k_n, v_b, v_h, v_n, o_b, o_h, o_m, lse_b, lse_h (innermost dimensions contiguous), or
  /// nullptr for contiguous tensors. Checks shapes (including every size the kernel's signature
  /// fixes, e.g. gqa's H = 8 and Hkv = 2), strides and alignment first, before the CUDA driver
  /// is needed (InvalidArgument, nothing launched). The first launch loads the module into the CUDA
  /// context current on the calling thread (device 0's primary context when there is none);
  /// later launches must run in that context. Asynchronous; thread-safe.
  ///
  /// `kvSplits`: a split-KV kernel's key splits per row block (KernelSpec::splitKv); 0 lets the
  /// launcher choose from the GPU's size, the kernel's occupancy and the shape. An unsplit
  /// kernel takes 0 or 1; a negative count is InvalidArgument.
  ///
  /// `paged`: a paged kernel's page table and lengths (KernelSpec::pagedKv; null for any other
  /// kernel). k and v are then the caches, pages x Hkv x page size x D with the strides k_b,
  /// k_h, k_n of a page, a head and a row (vLLM's [pages, page size, Hkv, D]: page size·Hkv·D,
  /// D, Hkv·D; `strides` must be given), and N is an upper bound of the lengths. The table's
  /// entries must be pages of the caches (device memory: not checked).
  ///
  /// `varlen`: a varlen kernel's sequence offsets (KernelSpec::varlen; null for any other
  /// kernel). q, o and lse then hold varlen->totalQ packed query rows, k and v totalK key rows
  /// (THD: [tokens, heads, D], LSE [heads, tokens]; `strides` must be given, the batch strides
  /// are not read), B counts the sequences and M and N bound their lengths. The offsets must be
  /// non-decreasing and within the totals (device memory: not checked).
  Status launch(void *stream, const void *q, const void *k, const void *v, void *o, float *lse,
                const AttentionShape &shape, const int64_t *strides = nullptr,
                int64_t kvSplits = 0, const PagedKV *paged = nullptr,
                const Varlen *varlen = nullptr) const;

  const std::string &name() const;  ///< the kernel function (PTX .entry)
  const std::string &dtype() const; ///< "bf16" or "f16"
  const std::string &arch() const;  ///< the chip it was compiled for
  int64_t headDim() const;
  int64_t blockM() const;
  int64_t blockN() const;
  int64_t threads() const;
  const std::string &ptx() const;
  /// The launch metadata: {"name", "block_m", "block_n", "threads", "head_dim", "dtype",
  /// "shared_bytes", "declared_sizes"} (the sidecar of tilefuse/tilefuse_cuda.h's loader).
  std::string metadataJson() const;
  /// The cache key (64 hex digits).
  const std::string &cacheKey() const;
  /// Where getKernel found it: "memory", "disk" or "compiled".
  const std::string &origin() const;
  /// The complete tile configuration it was compiled with ("Br=64,Bc=128,rows_per_warp=16,...").
  std::string config() const;
  /// Where the configuration came from: "default", "explicit" (the spec's), "database" (the
  /// tuning database's entry) or "tuned" (tuned by this call).
  const std::string &configSource() const;

private:
  std::unique_ptr<Impl> impl;
};

/// A kernel and the backward derived from its DSL text, compiled together for the host CPU (the
/// reference backend: the tiled forward and the backward tiled in FlashAttention-2's schedule,
/// JIT-compiled in process; the grids run one program after another on the calling thread).
/// For training on machines without a GPU, tests, and checking a GPU's gradients. Obtained from
/// Runtime::getHostAttention; lives as long as any pointer to it; thread-safe.
///
/// Host arrays in the spec's dtype ("bf16" and "f16" elements are uint16_t bit patterns, "f32"
/// floats): q, o, dO, dq B x H x M x D; k, v, dk, dv B x Hkv x N x D; lse B x H x M floats.
class HostAttention {
public:
  struct Impl;
  explicit HostAttention(std::unique_ptr<Impl> impl);
  ~HostAttention();
  HostAttention(const HostAttention &) = delete;
  HostAttention &operator=(const HostAttention &) = delete;

  /// O and the logsumexp. `strides`: the 14 element strides of Kernel::launch, or nullptr for
  /// contiguous arrays.
  Status forward(const void *q, const void *k, const void *v, void *o, float *lse,
                 const AttentionShape &shape, const int64_t *strides = nullptr) const;
  /// dQ, dK and dV of a loss whose gradient with respect to O is dO; o and lse are the
  /// forward's. `strides`: 26 element strides, Kernel::launch's 14 (q, k, v, o, lse) then
  /// dO_b, dO_h, dO_m, dq_b, dq_h, dq_m, dk_b, dk_h, dk_n, dv_b, dv_h, dv_n (innermost
  /// dimensions contiguous), or nullptr for contiguous arrays. Rows whose scores are all masked
  /// get dq = 0 and add nothing to dk and dv.
  Status backward(const void *q, const void *k, const void *v, const void *o, const void *dO,
                  const float *lse, void *dq, void *dk, void *dv, const AttentionShape &shape,
                  const int64_t *strides = nullptr) const;

  const std::string &name() const;  ///< the forward kernel's (the backward is NAME_backward)
  const std::string &dtype() const; ///< "bf16", "f16" or "f32"
  int64_t headDim() const;
  bool deterministic() const;

private:
  std::unique_ptr<Impl> impl;
};

/// The backward derived from a kernel's DSL text, for the GPU: dQ, dK and dV in three kernels
/// (D = rowsum(dO o O); dK and dV per key block, dQ added atomically or, deterministic, by an
/// ordered loop; dQ converted), compiled to one PTX module and launched in order on one stream.
/// Obtained from Runtime::getBackward; lives as long as any pointer to it; thread-safe.
class Backward {
public:
  struct Impl;
  explicit Backward(std::unique_ptr<Impl> impl);
  ~Backward();
  Backward(const Backward &) = delete;
  Backward &operator=(const Backward &) = delete;

  /// Enqueues the backward on `stream` (a CUstream; nullptr: the legacy default stream): device
  /// pointers, q, o, dO, dq B x H x M x D and k, v, dk, dv B x Hkv x N x D in the kernel's
  /// dtype, lse B x H x M floats (o and lse the forward's, Kernel::launch, on the same inputs).
  /// `strides`: HostAttention::backward's 26, or nullptr for contiguous tensors. The f32
  /// workspaces (B·H·M, and B·H·M·D unless deterministic) are this object's, used in stream
  /// order. The first launch loads the module into the current CUDA context. Asynchronous.
  Status launch(void *stream, const void *q, const void *k, const void *v, const void *o,
                const void *dO, const float *lse, void *dq, void *dk, void *dv,
                const AttentionShape &shape, const int64_t *strides = nullptr) const;

  const std::string &name() const;  ///< the forward kernel's (phases NAME_backward_PHASE)
  const std::string &dtype() const; ///< "bf16" or "f16"
  const std::string &arch() const;
  int64_t headDim() const;
  bool deterministic() const;
  const std::string &ptx() const; ///< the module of the three kernels

private:
  std::unique_ptr<Impl> impl;
};

struct RuntimeOptions {
  /// The disk cache's directory; empty: no disk cache.
  std::string cacheDirectory;
  /// Do not read the disk cache (compile each kernel once per Runtime, and rewrite its entry).
  bool alwaysCompile = false;
  /// When not empty, the IR of every stage of each kernel compiled goes under it.
  std::string dumpIRDirectory;
  /// See AutotuneMode. The tuning database is <cacheDirectory>/tuning/ (none without a cache
  /// directory: then Cached is Off and On tunes once per Runtime).
  AutotuneMode autotune = AutotuneMode::Off;

  /// TILEFUSE_CACHE_DIR (default $XDG_CACHE_HOME/tilefuse or ~/.cache/tilefuse),
  /// TILEFUSE_ALWAYS_COMPILE=1, TILEFUSE_DUMP_IR=<dir> (which implies always compiling),
  /// TILEFUSE_AUTOTUNE=off|cached|on (default off; anything else is off, with a warning on
  /// stderr).
  static RuntimeOptions fromEnvironment();
};

struct RuntimeStats {
  uint64_t memoryHits = 0, diskHits = 0, compiles = 0;
  uint64_t badEntries = 0;    ///< truncated or corrupt disk entries, deleted and rebuilt
  uint64_t writeFailures = 0; ///< disk entries that could not be written
  /// The tuning database: entries used, kernels tuned, bad entries (deleted and tuned again).
  uint64_t tuningHits = 0, tunings = 0, tuningBadEntries = 0;
};

class Runtime {
public:
  /// The process's runtime, configured from the environment on first use; never destroyed.
  static Runtime &global();

  explicit Runtime(const RuntimeOptions &options = RuntimeOptions::fromEnvironment());
  ~Runtime();
  Runtime(const Runtime &) = delete;
  Runtime &operator=(const Runtime &) = delete;

  /// The kernel for `spec`: compiled once per key (concurrent calls wait for one compile), from
  /// memory or the disk cache after that. Compiles to PTX only; the CUDA driver loads it on the
  /// first launch, so this works on machines without a GPU (with an explicit arch).
  Status getKernel(const KernelSpec &spec, std::shared_ptr<const Kernel> &out);

  /// The host pair (forward and derived backward) for `spec`: its kernel or source, dtype
  /// ("bf16", "f16", "f32" or empty: as written), head dim, params, blockM / blockN (0: 64) and
  /// `deterministic`; arch, PTX features, config and autotuning do not apply. Compiled once per
  /// distinct spec for the life of this Runtime (concurrent calls wait for one compile). A
  /// score_mod op without a derivative is a Compile error at its file:line:col.
  Status getHostAttention(const KernelSpec &spec, std::shared_ptr<const HostAttention> &out);

  /// The GPU backward for `spec` (compileBackwardToPTX): its kernel or source, dtype, head dim,
  /// params, blockM / blockN (equal; 0: 64, or 128 with warpgroup MMAs at head dims up to 64),
  /// arch, PTX features, `deterministic`, and of `config` the settings Br, Bc, rows_per_warp,
  /// mma and row_order (the dQ grid's order; any other setting configures the forward kernel and is a Compile error naming
  /// it); autotuning does not apply yet. Compiled once per key, in memory and in the disk cache like
  /// the forward kernels (the three phases one entry). Works without a GPU (with an explicit
  /// arch); the driver is needed from the first launch.
  Status getBackward(const KernelSpec &spec, std::shared_ptr<const Backward> &out);

  RuntimeStats stats() const;
  const RuntimeOptions &options() const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

/// The float64 reference of `spec`'s kernel on host arrays, to check what a kernel computed: its
/// own written form (the DSL text) evaluated naively in float64 (no tiling, no online softmax,
/// no block pruning), specialized by `spec.headDim` and `spec.params` (the dtype, block sizes
/// and arch do not change it). q, o: B x H x M x D; k, v: B x Hkv x N x D; lse: B x H x M; all
/// doubles; `strides` as in Kernel::launch (nullptr: contiguous). Sizes the kernel's signature
/// fixes are checked (InvalidArgument); a kernel whose text has no float64 meaning is a Compile
/// error with file:line:col. Compiled once per kernel text and specialization, in process; runs
/// on every core. Rows whose scores are all masked give o = 0 and lse = -inf.
Status referenceAttention(const KernelSpec &spec, const double *q, const double *k,
                          const double *v, double *o, double *lse, const AttentionShape &shape,
                          const int64_t *strides = nullptr);

/// Whether a CUDA driver and a GPU are there; `why` gets the reason when not.
bool cudaAvailable(std::string *why = nullptr);

/// "tilefuse <version> build <id> LLVM <version>": the compiler's identity (in every cache key).
std::string version();

} // namespace tilefuse

#endif
