//===- TileGPUDialect.h - the tgpu dialect: attributes and types -*- C++ -*-===//
#ifndef TILEFUSE_DIALECT_TILEGPUDIALECT_H
#define TILEFUSE_DIALECT_TILEGPUDIALECT_H

#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/TensorEncoding.h"
#include "tilefuse/dialect/GPULayouts.h"
#include "tilefuse/dialect/TileGPUEnums.h"

#include "tilefuse/dialect/TileGPUDialect.h.inc"
#include "tilefuse/dialect/TileGPUAttrInterfaces.h.inc"

#define GET_ATTRDEF_CLASSES
#include "tilefuse/dialect/TileGPUAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "tilefuse/dialect/TileGPUTypes.h.inc"

#endif
