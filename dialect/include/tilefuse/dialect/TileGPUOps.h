//===- TileGPUOps.h - tgpu dialect operations --------------------*- C++ -*-===//
#ifndef TILEFUSE_DIALECT_TILEGPUOPS_H
#define TILEFUSE_DIALECT_TILEGPUOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "tilefuse/dialect/TileGPUDialect.h"

#define GET_OP_CLASSES
#include "tilefuse/dialect/TileGPUOps.h.inc"

#endif
