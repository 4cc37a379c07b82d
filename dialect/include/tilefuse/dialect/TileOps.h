//===- TileOps.h - tile dialect operations ----------------------*- C++ -*-===//
#ifndef TILEFUSE_DIALECT_TILEOPS_H
#define TILEFUSE_DIALECT_TILEOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "tilefuse/dialect/TileConfig.h"
#include "tilefuse/dialect/TileDialect.h"

#include "tilefuse/dialect/TileEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "tilefuse/dialect/TileAttrs.h.inc"

#define GET_OP_CLASSES
#include "tilefuse/dialect/TileOps.h.inc"

#endif
