//===- CudaBackwardKernel.h - the derived backward's launches ---*- C++ -*-===//
//
// The three kernels of a derived backward (compileBackwardToPTX: preprocess, key_gradients,
// query_gradients, one PTX module), loaded together and launched in order on one stream with
// the backward launch ABI (LaunchAbi.h): Q, K, V, O, dO and the forward's LSE in; dQ, dK and dV
// out. The launcher owns the f32 workspaces (D and the dQ accumulator), grown on demand and
// used in stream order.
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_RUNTIME_CUDA_CUDABACKWARDKERNEL_H
#define TILEFUSE_RUNTIME_CUDA_CUDABACKWARDKERNEL_H

#include "tilefuse/runtime/cuda/CudaKernel.h"

#include <array>
#include <memory>
#include <vector>

namespace tilefuse::runtime::cuda {

/// The backward's tensors (device pointers): the forward's inputs and outputs, the incoming
/// gradient dO, and the gradients it writes.
struct BackwardBuffers {
  DevicePtr q = 0, k = 0, v = 0, o = 0, dO = 0, lse = 0, dq = 0, dk = 0, dv = 0;
};

/// Element strides of the nine tensors, every dimension but the innermost (contiguous), in the
/// order of launch_abi::kBackwardTensors: dO and dQ like Q, dK and dV like K.
struct BackwardStrides {
  static constexpr int count =
      launch_abi::backwardFirstStride(launch_abi::kBackwardDeltaTensor);
  std::array<int64_t, count> values{};
  static BackwardStrides contiguous(const AttentionShape &shape);
  /// From the public APIs' order (HostAttention::backward, tilefuse_cuda_backward_launch):
  /// Kernel::launch's 14 (q, k, v, o, lse), then dO, dQ, dK and dV (3 each).
  static BackwardStrides fromPublicOrder(const int64_t *strides);
};

class CudaBackwardKernel {
public:
  /// Loads the module once and its three entries; `phases` are their sidecars, in launch order.
  static llvm::Expected<std::unique_ptr<CudaBackwardKernel>>
  load(llvm::StringRef ptx, std::vector<KernelMetadata> phases);
  /// Loads what `tilefuse compile --backward` wrote: the PTX and its sidecar, a JSON array of
  /// the phases' metadata in launch order (`jsonPath` empty: the PTX path with .json).
  static llvm::Expected<std::unique_ptr<CudaBackwardKernel>> loadFiles(llvm::StringRef ptxPath,
                                                                       llvm::StringRef jsonPath);
  /// The same from memory: PTX text and the sidecar's JSON text.
  static llvm::Expected<std::unique_ptr<CudaBackwardKernel>> loadData(llvm::StringRef ptx,
                                                                      llvm::StringRef json,
                                                                      llvm::StringRef origin);
  ~CudaBackwardKernel();
  CudaBackwardKernel(const CudaBackwardKernel &) = delete;
  CudaBackwardKernel &operator=(const CudaBackwardKernel &) = delete;

  /// Checks the launch (sizes, declared sizes, pointers, strides), then enqueues the three
  /// phases on `stream`. The forward's O and LSE must be those of the same inputs.
  llvm::Error launch(CUstream_st *stream, const BackwardBuffers &buffers,
                     const AttentionShape &shape, const BackwardStrides &strides) const;

  const std::vector<KernelMetadata> &phases() const;
  /// Registers and local (spill) bytes per thread of each phase, as the JIT reports them.
  int registersPerThread(size_t phase) const;
  int localBytesPerThread(size_t phase) const;

private:
  struct Impl;
  explicit CudaBackwardKernel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

} // namespace tilefuse::runtime::cuda

#endif
