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

//===----------------------------------------------------------------------===//
// #tile.config and the tile.config module attribute
//===----------------------------------------------------------------------===//

Attribute ConfigAttr::parse(AsmParser &parser, Type) {
  std::string text;
  if (parser.parseLess())
    return {};
  SMLoc textLoc = parser.getCurrentLocation();
  if (parser.parseString(&text) || parser.parseGreater())
    return {};
  llvm::Expected<tilefuse::TileConfig> config = tilefuse::TileConfig::parse(text);
  if (!config) {
    parser.emitError(textLoc) << "#tile.config: " << llvm::toString(config.takeError());
    return {};
  }
  return ConfigAttr::getChecked([&] { return parser.emitError(textLoc); }, parser.getContext(),
                                *config);
}

void ConfigAttr::print(AsmPrinter &printer) const {
  printer << "<";
  printer.printString(getConfig().print());
  printer << ">";
}

LogicalResult ConfigAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 tilefuse::TileConfig config) {
  // The fields and how they combine; the chip is convert-tgpu-to-nvvm's to check.
  if (llvm::Error error = config.verify())
    return emitError() << "#tile.config: " << llvm::toString(std::move(error));
  return success();
}

LogicalResult TileDialect::verifyOperationAttribute(Operation *op, NamedAttribute attribute) {
  if (attribute.getName() != kConfigAttrName)
    return success(); // tile.param, tile.sweep, ...: the ops' and passes' own markers
  if (!isa<ModuleOp>(op))
    return op->emitError() << "'" << kConfigAttrName << "' belongs on a module";
  if (!isa<ConfigAttr>(attribute.getValue()))
    return op->emitError() << "'" << kConfigAttrName << "' must be a #tile.config, not "
                           << attribute.getValue();
  return success();
}

//===----------------------------------------------------------------------===//
// #tile.grid: a grid dimension as a device mapping of scf.forall
//===----------------------------------------------------------------------===//

int64_t GridDimAttr::getMappingId() const { return static_cast<int64_t>(getValue()); }
bool GridDimAttr::isLinearMapping() const { return false; }
int64_t GridDimAttr::getRelativeIndex() const { return getMappingId(); }

ArrayAttr tilefuse::tile::gridMapping(MLIRContext *context, bool split) {
  SmallVector<Attribute> dims;
  for (GridDim d : {GridDim::Batch, GridDim::Head, GridDim::RowBlock, GridDim::Split})
    if (d != GridDim::Split || split)
      dims.push_back(GridDimAttr::get(context, d));
  return ArrayAttr::get(context, dims);
}
