//===- Compiler.h - DSL text to PTX, in process -----------------*- C++ -*-===//
//
// The GPU half of the JIT: parses a kernel, runs `tile-to-ptx` and returns the PTX with the
// metadata a launcher needs (the launch ABI is in runtime/include/tilefuse/tilefuse_cuda.h).
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_RUNTIME_COMPILER_H
#define TILEFUSE_RUNTIME_COMPILER_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace tilefuse::runtime {

struct PtxCompileOptions {
  int64_t blockM = 64; ///< Br (16 rows per warp)
  int64_t blockN = 64; ///< Bc
  int64_t headDim = 0;     ///< specialize to this head dimension (0: as written)
  std::string elementType; ///< specialize to bf16 / f16 (empty: as written)
  std::string chip = "sm_90a";
  std::string features = "+ptx80";
};

struct CompiledKernel {
  std::string name;  ///< the .entry symbol
  std::string ptx;
  std::string dtype; ///< bf16 or f16
  int64_t blockM = 0, blockN = 0, threads = 0, headDim = 0, sharedBytes = 0;
  /// The JSON sidecar: {"name", "block_m", "block_n", "threads", "head_dim", "dtype",
  /// "shared_bytes"}.
  std::string metadataJson() const;
};

/// Errors carry the diagnostics with file:line:col of `bufferName`.
llvm::Expected<CompiledKernel> compileToPTX(llvm::StringRef source, llvm::StringRef bufferName,
                                            const PtxCompileOptions &options);

} // namespace tilefuse::runtime

#endif
