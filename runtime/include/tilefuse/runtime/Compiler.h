//===- Compiler.h - DSL text to PTX, in process -----------------*- C++ -*-===//
//
// The GPU half of the JIT: parses a kernel, runs `tile-to-ptx` and returns the PTX with the
// metadata a launcher needs (the launch ABI is tilefuse/runtime/device/LaunchAbi.h).
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_RUNTIME_COMPILER_H
#define TILEFUSE_RUNTIME_COMPILER_H

#include "tilefuse/runtime/TileConfig.h"
#include "tilefuse/runtime/cuda/CudaKernel.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tilefuse::runtime {

struct PtxCompileOptions {
  /// The kernel configuration; unset fields take defaultTileConfig's values for the kernel's head
  /// dimension and the chip (resolveTileConfig).
  TileConfig tiles;
  int64_t headDim = 0;     ///< specialize to this head dimension (0: as written)
  std::string elementType; ///< specialize to bf16 / f16 (empty: as written)
  /// Variant parameters, "NAME=VALUE" (the kernel's `tile.param` constants).
  std::vector<std::string> params;
  std::string chip = "sm_90a";
  std::string features = "+ptx80";
  /// tile-split-kv: each row block's keys shared out over S programs and merged (split-KV
  /// decode); the kernel takes LaunchAbi.h's split parameters and CudaKernel::launch picks S.
  bool splitKv = false;
  /// tile-paged-kv: K and V are paged caches; the kernel takes LaunchAbi.h's paged parameters.
  bool pagedKv = false;
  /// With pagedKv: rows per page, fixed at compile time (0: any, given at launch).
  int64_t pageSize = 0;
  /// tile-varlen: the views are packed batches of variable-length sequences; the kernel takes
  /// LaunchAbi.h's varlen parameters. With pagedKv only the queries pack (chunked prefill over a
  /// paged cache). With splitKv (and pack_gqa) too: FlashDecoding on a packed batch.
  bool varlen = false;
  /// The defaults for sequences of at most kShortSequenceKeys keys (defaultTileConfig's
  /// `shortSequences`; isShortSequence of the kernel spec's seqLen): where the caller sets no
  /// configuration, the kernel for short sequences may differ from the long-sequence one. Any
  /// kernel runs at any length.
  bool shortSequences = false;
  /// compileBackwardToPTX: dQ by an ordered loop over key blocks (bitwise reproducible)
  /// instead of atomic adds into an f32 accumulator.
  bool deterministic = false;
  /// When not empty, the IR after each stage goes to files under this directory (the source,
  /// one file per pass in MLIR's IR file tree, the PTX and the metadata). Not part of what is
  /// compiled: the kernel cache leaves it out of its key.
  std::string dumpIRDirectory;
};

struct CompiledKernel {
  std::string name;  ///< the .entry symbol
  std::string ptx;
  std::string dtype; ///< bf16 or f16
  int64_t blockM = 0, blockN = 0, threads = 0, headDim = 0, sharedBytes = 0;
  /// The complete configuration it was compiled with (the sidecar's informational
  /// "tile_config"; launches need only the numbers above).
  TileConfig tiles;
  /// Compiled with split-KV (the sidecar's "split_kv": launches pass the split parameters).
  bool splitKv = false;
  /// Compiled with paged KV (the sidecar's "paged_kv": launches pass the paged parameters).
  bool pagedKv = false;
  /// Its fixed page size (the sidecar's "page_size"; 0: any).
  int64_t pageSize = 0;
  /// Compiled with varlen (the sidecar's "varlen": launches pass the sequence offsets).
  bool varlen = false;
  /// Reads K and V with TMA (warp_specialize; the sidecar's "kv_tma": launches pass the tensor
  /// maps of LaunchAbi.h).
  bool kvTma = false;
  /// Also loads Q with TMA (TileConfig::loadsQWithTma; the sidecar's "q_tma": launches pass
  /// LaunchAbi.h's q_map after K's and V's).
  bool qTma = false;
  /// Also stores O with TMA (TileConfig::storesOWithTma; the sidecar's "o_tma", only beside
  /// "q_tma": launches pass LaunchAbi.h's o_map after Q's).
  bool oTma = false;
  /// Persistent (TileConfig persistent; the sidecar's "persistent": launches start
  /// launch_abi::persistentPrograms CTAs).
  bool persistent = false;
  /// A derived backward's phase (the sidecar's "backward_phase", launch_abi::backwardPhaseName;
  /// empty for a forward kernel): the three phases share one PTX module.
  std::string backwardPhase;
  /// The backward's dQ by the ordered key loop (the sidecar's "deterministic").
  bool deterministic = false;
  /// Every static size of the kernel's signature (after specialization), checked at launch.
  cuda::DeclaredSizes declaredSizes;
  /// The JSON sidecar: {"name", "block_m", "block_n", "threads", "head_dim", "dtype",
  /// "shared_bytes", "declared_sizes", "tile_config"} (cuda::KernelMetadata parses it for launches).
  std::string metadataJson() const;
  /// The inverse of metadataJson(), with `ptx` as the code (the kernel cache stores both).
  static llvm::Expected<CompiledKernel> fromMetadataJson(llvm::StringRef json, std::string ptx);
};

/// Errors carry the diagnostics with file:line:col of `bufferName`. Thread-safe (every call has
/// its own MLIRContext). Honours MLIR's pass-manager and timing command-line options
/// (--mlir-print-ir-after-all, --mlir-timing, ...) when the program registered them
/// (registerCompilerCLOptions); a library user who did not gets none of them.
llvm::Expected<CompiledKernel> compileToPTX(llvm::StringRef source, llvm::StringRef bufferName,
                                            const PtxCompileOptions &options);

/// Registers MLIR's pass-manager options (--mlir-print-ir-*, --mlir-pass-statistics, ...) and the
/// default timing manager's (--mlir-timing, ...) with LLVM's command line, for tools that
/// compile through compileToPTX. Call before cl::ParseCommandLineOptions.
/// The derived backward of the kernel in `source` (tile-derive-backward, tiled in
/// FlashAttention-2's schedule) as three kernels of one PTX module, in launch order
/// (launch_abi::kBackwardPhases), each with the backward launch ABI, its own threads and shared
/// memory, and the forward's declared sizes. `options.tiles` may set Br and Bc (equal: the
/// key-block accumulators dK and dV share the warps' rows with the scores).
llvm::Expected<std::vector<CompiledKernel>>
compileBackwardToPTX(llvm::StringRef source, llvm::StringRef bufferName,
                     const PtxCompileOptions &options);

void registerCompilerCLOptions();

/// The chip tilefuse compiles for on a GPU of compute capability major.minor: sm_90a on 9.0,
/// sm_80 on 8.x; an error naming `deviceName` otherwise.
llvm::Expected<std::string> chipForComputeCapability(int major, int minor,
                                                     llvm::StringRef deviceName);

/// What produced a kernel: the project version, a build id (a hash of the compiler's own
/// libraries, so a rebuilt compiler never reuses an old one's output) and the LLVM version.
/// Part of every kernel cache key.
llvm::StringRef compilerVersion();

} // namespace tilefuse::runtime

#endif
