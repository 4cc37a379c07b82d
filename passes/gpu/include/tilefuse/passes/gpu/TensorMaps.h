//===- TensorMaps.h - the launch ABI's tensor map type, in IR -*- C++ -*-===//
//
// Every tensor map the GPU-level passes create (K, V and Q loads in tgpu-warp-specialize, the O
// store in tgpu-store-output-by-tma) is one the runtime encodes the same way (LaunchAbi.h): a
// box of some rows by one 128-byte panel of a [B, H, rows, D] view, 128-byte swizzle, 256-byte
// L2 promotion, zero fill out of bounds. Its IR type is built here, once.
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_PASSES_GPU_TENSORMAPS_H
#define TILEFUSE_PASSES_GPU_TENSORMAPS_H

#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"

namespace tilefuse::tgpu {

/// The descriptor type of a launch-ABI tensor map whose box is `boxRows` rows of one 128-byte
/// panel of `element`s (shared memory space 3, the box's leading batch and head extents 1).
mlir::nvgpu::TensorMapDescriptorType panelMapType(mlir::MLIRContext *ctx, int64_t boxRows,
                                                  mlir::Type element);

} // namespace tilefuse::tgpu

#endif
