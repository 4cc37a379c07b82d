//===- AotHeader.h - a C header with an embedded cubin and launcher -*- C++ -*-===//
//
// `tilefuse compile --emit header`: the kernel's cubin as a byte array and a typed launcher,
//
//   CUresult NAME_launch(CUstream stream, const void *q, const void *k, const void *v, void *o,
//                        float *lse, int64_t B, int64_t H, int64_t Hkv, int64_t M, int64_t N,
//                        const int64_t strides[14]);
//
// in plain C99 that needs only <cuda.h> and libcuda: it loads the module once (thread-safe),
// opts in to more than 48 KiB of dynamic shared memory when the kernel needs it, checks the
// arguments as CudaKernel's validateLaunch does and launches by the kernel ABI of
// tilefuse/runtime/cuda/CudaKernel.h. The generated text documents itself.
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_RUNTIME_AOTHEADER_H
#define TILEFUSE_RUNTIME_AOTHEADER_H

#include "tilefuse/runtime/Compiler.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>

namespace tilefuse::runtime {

struct AotHeaderOptions {
  /// The C prefix of every name in the header (NAME_launch, NAME_cubin, NAME_HEAD_DIM, ...);
  /// empty: the kernel's name.
  std::string symbol;
  std::string chip;       ///< the cubin's target, for the comment and NAME_CHIP
  std::string sourceName; ///< where the kernel came from, for the comment
  std::string assembler;  ///< e.g. ptxas's version, for the comment
};

/// True for names usable as the prefix (a C identifier that no reserved name starts with).
bool isValidHeaderSymbol(llvm::StringRef symbol);

/// The header's text; errors for a bad symbol or metadata the launcher cannot honour.
llvm::Expected<std::string> emitAotHeader(const CompiledKernel &kernel, llvm::StringRef cubin,
                                          const AotHeaderOptions &options);

} // namespace tilefuse::runtime

#endif
