//===- CurrentGpu.h - the GPU the CLI's GPU commands run on -------*- C++ -*-===//
//
// `tilefuse run` on the GPU and `tilefuse tune` start from the same two facts: the current
// device (through the driver) and the chip tilefuse compiles for it.
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_TOOLS_TILEFUSE_CURRENTGPU_H
#define TILEFUSE_TOOLS_TILEFUSE_CURRENTGPU_H

#include "tilefuse/runtime/cuda/Driver.h"

#include "llvm/Support/Error.h"

#include <string>

namespace tilefuse::tools {

/// The current GPU and the chip tilefuse compiles for it (sm_90a on 9.0, sm_80 on 8.x).
struct CurrentGpu {
  runtime::cuda::DeviceInfo device;
  std::string chip;
};
llvm::Expected<CurrentGpu> currentGpu();

} // namespace tilefuse::tools

#endif
