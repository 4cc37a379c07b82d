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
// `tilefuse compile --backward --emit header`: the cubin of a derived backward's three kernels
// (compileBackwardToPTX: preprocess, key_gradients, query_gradients, one module) and
//
//   size_t NAME_backward_workspace_bytes(int64_t B, int64_t H, int64_t M);
//   CUresult NAME_backward_launch(CUstream stream, const void *q, const void *k, const void *v,
//                                 const void *o, const void *d_o, const float *lse, void *d_q,
//                                 void *d_k, void *d_v, int64_t B, int64_t H, int64_t Hkv,
//                                 int64_t M, int64_t N, const int64_t strides[26],
//                                 void *workspace);
//
// in the same C99: the launch of CudaBackwardKernel (the backward launch ABI of LaunchAbi.h, the
// strides in HostAttention::backward's order), with the f32 workspaces the caller's.
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_RUNTIME_AOTHEADER_H
#define TILEFUSE_RUNTIME_AOTHEADER_H

#include "tilefuse/runtime/Compiler.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>

namespace tilefuse::runtime {

struct AotHeaderOptions {
  /// The C prefix of every name in the header (NAME_launch, NAME_cubin, NAME_HEAD_DIM, ...;
  /// a backward's are NAME_backward_launch, ...); empty: the (forward) kernel's name.
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

/// The backward's header: `phases` are compileBackwardToPTX's kernels NAME_backward_<phase> in
/// launch order, `cubin` their module assembled. Errors for a bad symbol, phases out of order or
/// disagreeing (storage, head dim, dQ schedule, declared sizes), or metadata the launcher cannot
/// honour.
llvm::Expected<std::string> emitBackwardAotHeader(llvm::ArrayRef<CompiledKernel> phases,
                                                  llvm::StringRef cubin,
                                                  const AotHeaderOptions &options);

} // namespace tilefuse::runtime

#endif
