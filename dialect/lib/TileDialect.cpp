//===- TileDialect.cpp - the tile dialect ---------------------------------===//
#include "tilefuse/dialect/TileDialect.h"

#include "mlir/IR/DialectImplementation.h"
#include "tilefuse/dialect/TileOps.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace tilefuse::tile;

#include "tilefuse/dialect/TileDialect.cpp.inc"
#include "tilefuse/dialect/TileEnums.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "tilefuse/dialect/TileAttrs.cpp.inc"

void TileDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "tilefuse/dialect/TileOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "tilefuse/dialect/TileAttrs.cpp.inc"
      >();
}
