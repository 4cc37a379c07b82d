//===- TileDialect.h - the tile dialect -------------------------*- C++ -*-===//
#ifndef TILEFUSE_DIALECT_TILEDIALECT_H
#define TILEFUSE_DIALECT_TILEDIALECT_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Dialect.h"

#include "tilefuse/dialect/TileDialect.h.inc"

#endif
