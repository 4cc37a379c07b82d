//===- Compiler.h - DSL text to PTX, in process -----------------*- C++ -*-===//
//
// The GPU half of the JIT: parses a kernel, runs `tile-to-ptx` and returns the PTX with the
// metadata a launcher needs (the launch ABI is in tilefuse/runtime/cuda/CudaKernel.h).
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_RUNTIME_COMPILER_H
#define TILEFUSE_RUNTIME_COMPILER_H

#include "tilefuse/runtime/cuda/CudaKernel.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tilefuse::runtime {

/// The tile shape of a GPU kernel.
struct TileConfig {
  int64_t blockM = 64, blockN = 64, rowsPerWarp = 16;
  std::string qOperand = "registers"; ///< where Q lives: registers or shared
  std::string mma = "sync";           ///< matrix instruction: sync (mma.sync) or wgmma (sm_90a)
};

/// The tuned default for a head dimension and target chip (the seed of the per-GPU autotuner):
/// warpgroup MMAs (wgmma) on sm_90a, mma.sync elsewhere.
TileConfig defaultTileConfig(int64_t headDim, llvm::StringRef chip = "sm_90a");

struct PtxCompileOptions {
  int64_t blockM = 0; ///< Br (0: defaultTileConfig)
  int64_t blockN = 0; ///< Bc (0: defaultTileConfig)
  int64_t headDim = 0;     ///< specialize to this head dimension (0: as written)
  std::string elementType; ///< specialize to bf16 / f16 (empty: as written)
  /// Variant parameters, "NAME=VALUE" (the kernel's `tile.param` constants).
  std::vector<std::string> params;
  std::string chip = "sm_90a";
  std::string features = "+ptx80";
  std::string copyIssue = "eager"; ///< tile-to-nvvm's copy-issue: eager or at-barrier
  int64_t rowsPerWarp = 0;         ///< tile-to-nvvm's rows-per-warp: 16 or 32 (0: tuned)
  std::string qOperand;            ///< tile-to-nvvm's q-operand: registers or shared (empty: tuned)
  std::string mma;                 ///< tile-to-nvvm's mma: sync or wgmma (empty: tuned for chip)
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
  /// Every static size of the kernel's signature (after specialization), checked at launch.
  cuda::DeclaredSizes declaredSizes;
  /// The JSON sidecar: {"name", "block_m", "block_n", "threads", "head_dim", "dtype",
  /// "shared_bytes", "declared_sizes"} (cuda::KernelMetadata parses it for launches).
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
void registerCompilerCLOptions();

/// What produced a kernel: the project version, a build id (a hash of the compiler's own
/// libraries, so a rebuilt compiler never reuses an old one's output) and the LLVM version.
/// Part of every kernel cache key.
llvm::StringRef compilerVersion();

} // namespace tilefuse::runtime

#endif
