//===- TileGPUEnums.h - enums of the tgpu dialect ---------------*- C++ -*-===//
// Separate from TileGPUDialect.h so that GPULayouts.h (plain arithmetic) can use SharedSwizzle.
#ifndef TILEFUSE_DIALECT_TILEGPUENUMS_H
#define TILEFUSE_DIALECT_TILEGPUENUMS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringRef.h"

#include "tilefuse/dialect/TileGPUEnums.h.inc"

#endif
