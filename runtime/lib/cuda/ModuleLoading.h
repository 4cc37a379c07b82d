//===- ModuleLoading.h - what both kernel launchers do to load --*- C++ -*-===//
//
// CudaKernel (one forward kernel a module) and CudaBackwardKernel (a backward's three phases in
// one module) load their PTX, find and check their entries, and release what they made in the
// context they made it in, the same way: here, once.
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_RUNTIME_CUDA_MODULELOADING_H
#define TILEFUSE_RUNTIME_CUDA_MODULELOADING_H

#include "DriverApi.h"

#include "tilefuse/runtime/cuda/CudaKernel.h"

#include <string>

namespace tilefuse::runtime::cuda::detail {

/// Frees what a launcher made in `context` (any may be null), from whatever thread drops the last
/// reference: `context` is made current for it (pushed and popped when another one is), the last
/// launch is waited for (it may still read the workspace), then the event, the workspace and
/// the module go. Nothing is freed when the context cannot be made current.
void releaseLoaded(CUcontext context, CUmodule module, CUdeviceptr workspace, CUevent lastLaunch);

/// Where a launcher loads: the calling thread's current context (the one its module, workspace
/// and launches belong to) and its device (limits, SM count).
struct LoadTarget {
  CUcontext context = nullptr;
  DeviceInfo device;
};
llvm::Expected<LoadTarget> currentLoadTarget();

/// `ptx` loaded by the driver's JIT into the current context. `what` names it in errors, which
/// carry the JIT's error log; the JIT's verbose info log goes to `infoLog`.
llvm::Expected<CUmodule> loadPtxModule(llvm::StringRef ptx, const std::string &what,
                                       std::string &infoLog);

/// An entry of `module`, checked against its sidecar: it can run `metadata.threads` threads, and
/// `device` holds its shared memory, opted in above 48 KiB.
struct LoadedFunction {
  CUfunction function = nullptr;
  int registers = 0, localBytes = 0;
};
llvm::Expected<LoadedFunction> loadFunction(CUmodule module, const KernelMetadata &metadata,
                                            const DeviceInfo &device);

} // namespace tilefuse::runtime::cuda::detail

#endif
