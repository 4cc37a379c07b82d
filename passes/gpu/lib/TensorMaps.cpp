//===- TensorMaps.cpp - the launch ABI's tensor map type, in IR -----------===//
#include "tilefuse/passes/gpu/TensorMaps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "tilefuse/runtime/device/LaunchAbi.h"

using namespace mlir;

nvgpu::TensorMapDescriptorType tilefuse::tgpu::panelMapType(MLIRContext *ctx, int64_t boxRows,
                                                            Type element) {
  int elementBytes = int(element.getIntOrFloatBitWidth() / 8);
  auto box = MemRefType::get({1, 1, boxRows, launch_abi::tmaBoxColumns(elementBytes)}, element,
                             MemRefLayoutAttrInterface(),
                             IntegerAttr::get(IntegerType::get(ctx, 64), 3));
  return nvgpu::TensorMapDescriptorType::get(
      ctx, box, nvgpu::TensorMapSwizzleKind::SWIZZLE_128B,
      nvgpu::TensorMapL2PromoKind::L2PROMO_256B, nvgpu::TensorMapOOBKind::OOB_ZERO,
      nvgpu::TensorMapInterleaveKind::INTERLEAVE_NONE);
}
