//===- Float64Reference.h - a kernel's float64 reference, compiled -*- C++ -*-===//
//
// Every kernel's float64 reference comes from its own DSL text: the written form evaluated
// naively in f64 by the tile-to-f64-reference lowering (no tiling, no online softmax, no block
// pruning). ReferenceKernel JIT-compiles it in process; compileReferenceObject compiles it ahead
// of time into an object for a shared library, for machines without the compiler (see
// reference::ReferenceLibrary in Reference.h, which also runs either on host arrays).
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_RUNTIME_FLOAT64REFERENCE_H
#define TILEFUSE_RUNTIME_FLOAT64REFERENCE_H

#include "tilefuse/runtime/HostView.h"
#include "tilefuse/runtime/cuda/CudaKernel.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <array>
#include <memory>
#include <string>
#include <vector>

namespace tilefuse::runtime {

struct ReferenceOptions {
  /// Specialization (tile-specialize) as the kernel under test was compiled: head dimension
  /// (0: as written) and variant parameters "NAME=VALUE". The storage type does not matter: the
  /// reference reads and writes f64.
  int64_t headDim = 0;
  std::vector<std::string> params;
  /// "host" or "baseline" (see CpuCompileOptions::cpuTarget).
  std::string cpuTarget = "host";
};

class ReferenceKernel {
public:
  /// Parses `source` (diagnostics name `bufferName`, file:line:col), specializes it, lowers its
  /// written form with tile-to-f64-reference and JIT-compiles the result.
  static llvm::Expected<std::unique_ptr<ReferenceKernel>>
  compile(llvm::StringRef source, llvm::StringRef bufferName, const ReferenceOptions &options);
  ~ReferenceKernel();

  /// Evaluates the reference on float64 host views (HostView::data points at doubles): Q, O are
  /// B x H x M x D, K, V are B x Hkv x N x D, LSE is B x H x M. Sizes the kernel declares
  /// statically (gqa's 8 and 2 heads, the head dimension) are checked, naming the tensor and
  /// dimension. Runs on every core.
  llvm::Error run(const HostView &q, const HostView &k, const HostView &v, const HostView &o,
                  const HostView &lse) const;

  llvm::StringRef name() const;
  /// The static head dimension the kernel declares for Q (after specialization).
  int64_t headDim() const;
  /// The sizes the kernel's signature fixes (the same record the launch metadata carries).
  const cuda::DeclaredSizes &declaredSizes() const;

private:
  struct Impl;
  explicit ReferenceKernel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

/// The backward of a kernel, derived from its own DSL text (tile-derive-backward: the
/// gradients dQ, dK, dV of a loss whose gradient with respect to O is dO) and evaluated naively
/// in float64 on whole tensors (tile-to-f64-tensor-reference). Single-threaded; for tests and
/// small problems.
class BackwardReferenceKernel {
public:
  /// Parses `source`, specializes it, derives its backward, lowers it and JIT-compiles it.
  /// Errors (a score_mod op without a derivative, ...) name bufferName:line:col.
  static llvm::Expected<std::unique_ptr<BackwardReferenceKernel>>
  compile(llvm::StringRef source, llvm::StringRef bufferName, const ReferenceOptions &options);
  ~BackwardReferenceKernel();

  /// On float64 host views: Q, O, dO, dQ are B x H x M x D; K, V, dK, dV are B x Hkv x N x D;
  /// LSE (the forward's logsumexp) is B x H x M. Writes dQ, dK and dV. Sizes the kernel declares
  /// are checked as ReferenceKernel::run checks them.
  llvm::Error run(const HostView &q, const HostView &k, const HostView &v, const HostView &o,
                  const HostView &dO, const HostView &lse, const HostView &dq,
                  const HostView &dk, const HostView &dv) const;

  /// The forward kernel's name (the backward is NAME_backward).
  llvm::StringRef name() const;
  const cuda::DeclaredSizes &declaredSizes() const;

private:
  struct Impl;
  explicit BackwardReferenceKernel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

/// The reference as an ELF object for the architecture's baseline CPU, position-independent,
/// defining the C entry point reference::referenceSymbol(<kernel name>); link it into a shared
/// library (`cc -shared x.o -lm`). `kernelName` receives the kernel's name.
llvm::Expected<std::string> compileReferenceObject(llvm::StringRef source,
                                                   llvm::StringRef bufferName,
                                                   const ReferenceOptions &options,
                                                   std::string *kernelName = nullptr);

/// The same for the derived backward: the object defines
/// `_mlir_ciface_<kernel name>_backward_reference(Q, K, V, O, dO, LSE, dQ, dK, dV)`, f64 memref
/// descriptors (rank 4, LSE rank 3), single-threaded (see BackwardReferenceKernel).
llvm::Expected<std::string> compileBackwardReferenceObject(llvm::StringRef source,
                                                           llvm::StringRef bufferName,
                                                           const ReferenceOptions &options,
                                                           std::string *kernelName = nullptr);

} // namespace tilefuse::runtime

#endif
