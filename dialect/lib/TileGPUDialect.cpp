//===- TileGPUDialect.cpp - the tgpu dialect: attributes and types -------===//
#include "tilefuse/dialect/TileGPUDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "tilefuse/dialect/TileGPUOps.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace tilefuse::tgpu;

#include "tilefuse/dialect/TileGPUAttrInterfaces.cpp.inc"
#include "tilefuse/dialect/TileGPUDialect.cpp.inc"
#include "tilefuse/dialect/TileGPUEnums.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "tilefuse/dialect/TileGPUAttrs.cpp.inc"
#define GET_TYPEDEF_CLASSES
#include "tilefuse/dialect/TileGPUTypes.cpp.inc"

void TGPUDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "tilefuse/dialect/TileGPUOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "tilefuse/dialect/TileGPUAttrs.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "tilefuse/dialect/TileGPUTypes.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Register layouts
//===----------------------------------------------------------------------===//

static unsigned bitsOf(Type t) { return t.isIntOrFloat() ? t.getIntOrFloatBitWidth() : 0; }

/// The checks every register layout makes on the block it encodes: rank, a static shape, and
/// the layout arithmetic's own constraints (GPULayouts.cpp states them).
static LogicalResult verifyBlock(function_ref<InFlightDiagnostic()> emitError,
                                 StringRef layoutName, RegisterLayout::Kind kind, int64_t warps,
                                 int64_t rowsPerWarp, ArrayRef<int64_t> shape, Type elementType,
                                 int64_t rank) {
  if ((int64_t)shape.size() != rank)
    return emitError() << layoutName << " lays out rank-" << rank << " blocks, not rank "
                       << shape.size();
  if (ShapedType::isDynamicShape(shape))
    return emitError() << layoutName << " needs a static shape";
  int64_t cols = rank == 2 ? shape[1] : 1;
  std::string why =
      registerLayoutError(kind, warps, rowsPerWarp, shape[0], cols, bitsOf(elementType));
  if (!why.empty())
    return emitError() << layoutName << ": " << why;
  return success();
}

static LogicalResult verifyWarps(function_ref<InFlightDiagnostic()> emitError, int64_t warps,
                                 int64_t rowsPerWarp) {
  if (rowsPerWarp != 16 && rowsPerWarp != 32)
    return emitError() << "rows_per_warp must be 16 or 32 (one or two m16 tiles), not "
                       << rowsPerWarp;
  if (warps < 1 || warps > 32)
    return emitError() << "warps must be 1 to 32 (a CTA has at most 1024 threads), not "
                       << warps;
  return success();
}

LogicalResult MmaAccumulatorLayoutAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                               int64_t warps, int64_t rowsPerWarp) {
  return verifyWarps(emitError, warps, rowsPerWarp);
}

LogicalResult
MmaAccumulatorLayoutAttr::verifyEncoding(ArrayRef<int64_t> shape, Type elementType,
                                         function_ref<InFlightDiagnostic()> emitError) const {
  return verifyBlock(emitError, "#tgpu.mma_acc", RegisterLayout::Kind::MmaAccumulator,
                     getWarps(), getRowsPerWarp(), shape, elementType, 2);
}

RegisterLayout MmaAccumulatorLayoutAttr::getRegisterLayout(ArrayRef<int64_t> shape) const {
  return RegisterLayout::mmaAccumulator(getWarps(), getRowsPerWarp(), shape[1]);
}

LogicalResult WgmmaAccumulatorLayoutAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                                 int64_t warpgroups) {
  if (warpgroups < 1 || warpgroups > 8)
    return emitError() << "warpgroups must be 1 to 8 (a CTA has at most 32 warps), not "
                       << warpgroups;
  return success();
}

LogicalResult
WgmmaAccumulatorLayoutAttr::verifyEncoding(ArrayRef<int64_t> shape, Type elementType,
                                           function_ref<InFlightDiagnostic()> emitError) const {
  return verifyBlock(emitError, "#tgpu.wgmma_acc", RegisterLayout::Kind::WgmmaAccumulator,
                     4 * getWarpgroups(), 16, shape, elementType, 2);
}

RegisterLayout WgmmaAccumulatorLayoutAttr::getRegisterLayout(ArrayRef<int64_t> shape) const {
  return RegisterLayout::wgmmaAccumulator(getWarpgroups(), shape[1]);
}

LogicalResult OperandALayoutAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                         int64_t warps, int64_t rowsPerWarp) {
  return verifyWarps(emitError, warps, rowsPerWarp);
}

LogicalResult
OperandALayoutAttr::verifyEncoding(ArrayRef<int64_t> shape, Type elementType,
                                   function_ref<InFlightDiagnostic()> emitError) const {
  return verifyBlock(emitError, "#tgpu.operand_a", RegisterLayout::Kind::OperandA, getWarps(),
                     getRowsPerWarp(), shape, elementType, 2);
}

RegisterLayout OperandALayoutAttr::getRegisterLayout(ArrayRef<int64_t> shape) const {
  return RegisterLayout::operandA(getWarps(), getRowsPerWarp(), shape[1]);
}

/// Warps and rows per warp of an accumulator layout (verified to be one).
static std::pair<int64_t, int64_t> accumulatorWarps(Attribute accumulator) {
  if (auto wg = dyn_cast<WgmmaAccumulatorLayoutAttr>(accumulator))
    return {4 * wg.getWarpgroups(), 16};
  auto mma = cast<MmaAccumulatorLayoutAttr>(accumulator);
  return {mma.getWarps(), mma.getRowsPerWarp()};
}

LogicalResult AccumulatorRowsLayoutAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                                Attribute parent) {
  if (!isa<MmaAccumulatorLayoutAttr, WgmmaAccumulatorLayoutAttr>(parent))
    return emitError() << "#tgpu.acc_rows takes the rows of an accumulator layout "
                          "(#tgpu.mma_acc or #tgpu.wgmma_acc), not "
                       << parent;
  return success();
}

LogicalResult
AccumulatorRowsLayoutAttr::verifyEncoding(ArrayRef<int64_t> shape, Type elementType,
                                          function_ref<InFlightDiagnostic()> emitError) const {
  auto [warps, rowsPerWarp] = accumulatorWarps(getParent());
  return verifyBlock(emitError, "#tgpu.acc_rows", RegisterLayout::Kind::AccumulatorRows, warps,
                     rowsPerWarp, shape, elementType, 1);
}

RegisterLayout AccumulatorRowsLayoutAttr::getRegisterLayout(ArrayRef<int64_t> shape) const {
  auto [warps, rowsPerWarp] = accumulatorWarps(getParent());
  return RegisterLayout::accumulatorRows(warps, rowsPerWarp);
}

//===----------------------------------------------------------------------===//
// Shared buffers and rings
//===----------------------------------------------------------------------===//

/// `64x128xbf16, #tgpu.shared<...>`: the body of a buffer type, also a ring's stage.
static ParseResult parseBufferBody(AsmParser &parser, SmallVectorImpl<int64_t> &shape,
                                   Type &elementType, SharedLayoutAttr &layout) {
  if (parser.parseDimensionList(shape, /*allowDynamic=*/false, /*withTrailingX=*/true) ||
      parser.parseType(elementType) || parser.parseComma())
    return failure();
  SMLoc at = parser.getCurrentLocation();
  Attribute attr;
  if (parser.parseAttribute(attr))
    return failure();
  layout = dyn_cast<SharedLayoutAttr>(attr);
  if (!layout)
    return parser.emitError(at, "expected a shared layout (#tgpu.shared<...>), got ") << attr;
  return success();
}

static void printBufferBody(AsmPrinter &printer, BufferType buffer) {
  for (int64_t d : buffer.getShape())
    printer << d << "x";
  printer << buffer.getElementType() << ", ";
  printer.printAttribute(buffer.getLayout());
}

Type BufferType::parse(AsmParser &parser) {
  SMLoc at = parser.getCurrentLocation();
  SmallVector<int64_t> shape;
  Type elementType;
  SharedLayoutAttr layout;
  if (parser.parseLess() || parseBufferBody(parser, shape, elementType, layout) ||
      parser.parseGreater())
    return {};
  return parser.getChecked<BufferType>(at, parser.getContext(), shape, elementType, layout);
}

void BufferType::print(AsmPrinter &printer) const {
  printer << "<";
  printBufferBody(printer, *this);
  printer << ">";
}

LogicalResult BufferType::verify(function_ref<InFlightDiagnostic()> emitError,
                                 ArrayRef<int64_t> shape, Type elementType,
                                 SharedLayoutAttr layout) {
  if (shape.size() != 2)
    return emitError() << "a shared buffer is a 2-D tile, not rank " << shape.size();
  unsigned bits = bitsOf(elementType);
  if (bits == 0 || bits % 8)
    return emitError() << "a shared buffer holds integers or floats of whole bytes, not "
                       << elementType;
  std::string why = sharedTileError({layout.getSwizzle(), shape[0], shape[1], bits / 8});
  if (!why.empty())
    return emitError() << why;
  return success();
}

SharedTile BufferType::getSharedTile() const {
  return {getLayout().getSwizzle(), getRows(), getCols(),
          getElementType().getIntOrFloatBitWidth() / 8};
}

int64_t BufferType::getSizeInBytes() const { return getSharedTile().sizeInBytes(); }

int64_t BufferType::getAlignment() const { return sharedAlignment(getLayout().getSwizzle()); }

Type RingType::parse(AsmParser &parser) {
  SMLoc at = parser.getCurrentLocation();
  int64_t stages;
  SmallVector<int64_t> shape;
  Type elementType;
  SharedLayoutAttr layout;
  if (parser.parseLess() || parser.parseInteger(stages) || parser.parseKeyword("x"))
    return {};
  SMLoc bufferAt = parser.getCurrentLocation();
  if (parseBufferBody(parser, shape, elementType, layout) || parser.parseGreater())
    return {};
  auto buffer = parser.getChecked<BufferType>(bufferAt, parser.getContext(), shape,
                                              elementType, layout);
  if (!buffer)
    return {};
  return parser.getChecked<RingType>(at, parser.getContext(), stages, buffer);
}

void RingType::print(AsmPrinter &printer) const {
  printer << "<" << getStages() << " x ";
  printBufferBody(printer, getBuffer());
  printer << ">";
}

int64_t RingType::getStageStrideInBytes() const {
  return llvm::alignTo(getBuffer().getSizeInBytes(), getBuffer().getAlignment());
}

int64_t RingType::getSizeInBytes() const { return getStages() * getStageStrideInBytes(); }

LogicalResult RingType::verify(function_ref<InFlightDiagnostic()> emitError, int64_t stages,
                               BufferType buffer) {
  if (stages < 1)
    return emitError() << "a ring has at least one stage, not " << stages;
  return success();
}
