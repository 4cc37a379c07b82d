//===- CpuBackwardKernel.h - a kernel and its derived backward on the CPU -*- C++ -*-===//
//
// The training pair of a DSL kernel on the CPU reference backend: the forward (O and the
// logsumexp) and the backward derived from the same text (tile-derive-backward), tiled in
// FlashAttention-2's backward schedule (tile-tiling-backward: preprocessing of D = rowsum(dO o O),
// dK and dV per key block over pruned query blocks, dQ atomically or in a deterministic ordered
// loop), compiled together through the `tile-to-cpu-backward` pipeline and run in process with
// MLIR's ExecutionEngine. The grids run one program after another on the calling thread.
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_RUNTIME_CPUBACKWARDKERNEL_H
#define TILEFUSE_RUNTIME_CPUBACKWARDKERNEL_H

#include "tilefuse/runtime/CpuKernel.h"

namespace tilefuse::runtime {

struct CpuBackwardOptions : CpuCompileOptions {
  /// dQ by an ordered loop over key blocks in the program that owns its rows (bitwise the same
  /// whatever order a GPU runs programs in) instead of atomic adds into an f32 accumulator.
  bool deterministic = false;
};

class CpuBackwardKernel {
public:
  /// Parses `source` (diagnostics name `bufferName`, file:line:col), specializes it, derives its
  /// backward, tiles and JIT-compiles both. A score_mod op without a derivative, or anything the
  /// backward does not model, is an error at its line.
  static llvm::Expected<std::unique_ptr<CpuBackwardKernel>>
  compile(llvm::StringRef source, llvm::StringRef bufferName, const CpuBackwardOptions &options);
  ~CpuBackwardKernel();

  /// The forward, as CpuKernel::run: Q, O are B x H x M x D; K, V are B x Hkv x N x D; LSE is
  /// B x H x M f32.
  llvm::Error forward(const HostView &q, const HostView &k, const HostView &v, const HostView &o,
                      const HostView &lse, BlockCounts *counts = nullptr) const;

  /// The gradients of a loss whose gradient with respect to O is dO: dQ (like Q), dK, dV (like
  /// K and V), in the kernel's storage type; O and LSE are the forward's. Shapes and strides are
  /// checked against each other and against the sizes the kernel declares. `counts` gets the
  /// blocks the dK/dV query loops (and the deterministic dQ key loops) visited.
  llvm::Error backward(const HostView &q, const HostView &k, const HostView &v,
                       const HostView &o, const HostView &dO, const HostView &lse,
                       const HostView &dq, const HostView &dk, const HostView &dv,
                       BlockCounts *counts = nullptr) const;

  llvm::StringRef name() const; ///< the forward's; the backward is NAME_backward
  ElementType elementType() const;
  int64_t headDim() const;
  bool deterministic() const;

private:
  struct Impl;
  explicit CpuBackwardKernel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

/// The tiled form of `source`'s derived backward (levels 2-4: tile-derive-backward,
/// tile-tiling-backward, tile-block-pruning, canonicalized) as MLIR text: the block program a
/// backend lowers (`tilefuse compile --backward --emit tiled`). Only NAME_backward is kept.
llvm::Expected<std::string> tiledBackwardIR(llvm::StringRef source, llvm::StringRef bufferName,
                                            const CpuBackwardOptions &options);

} // namespace tilefuse::runtime

#endif
