//===- TileGPUOps.cpp - tgpu dialect operations --------------------------===//
//
// Verifiers: each message names the operand and the sizes or layouts that disagree, and why
// the hardware needs them to agree.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/dialect/TileGPUOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace tilefuse::tgpu;

#define GET_OP_CLASSES
#include "tilefuse/dialect/TileGPUOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Shared buffers and rings
//===----------------------------------------------------------------------===//

int64_t AllocOp::getSizeInBytes() {
  if (auto ring = dyn_cast<RingType>(getType()))
    return ring.getSizeInBytes();
  if (auto barriers = dyn_cast<mlir::nvgpu::MBarrierGroupType>(getType()))
    return kMBarrierBytes * barriers.getNumBarriers();
  return cast<BufferType>(getType()).getSizeInBytes();
}

int64_t AllocOp::getAlignment() {
  if (auto ring = dyn_cast<RingType>(getType()))
    return ring.getAlignment();
  if (isa<mlir::nvgpu::MBarrierGroupType>(getType()))
    return kMBarrierBytes;
  return cast<BufferType>(getType()).getAlignment();
}

LogicalResult AllocOp::verify() {
  std::optional<int64_t> offset = getOffset();
  if (offset && (*offset < 0 || *offset % getAlignment()))
    return emitOpError() << "offset " << *offset << " is not a non-negative multiple of "
                         << getAlignment() << " bytes, the alignment its swizzle needs";
  return success();
}

LogicalResult StageOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                        ValueRange operands, DictionaryAttr, OpaqueProperties,
                                        RegionRange, SmallVectorImpl<Type> &inferred) {
  auto ring = dyn_cast<RingType>(operands[0].getType());
  if (!ring)
    return failure();
  inferred.push_back(ring.getBuffer());
  return success();
}

LogicalResult StageOp::verify() {
  APInt index;
  int64_t stages = getRing().getType().getStages();
  if (matchPattern(getIndex(), m_ConstantInt(&index)) &&
      (index.getSExtValue() < 0 || index.getSExtValue() >= stages))
    return emitOpError() << "stage " << index.getSExtValue() << " is out of range for a ring of "
                         << stages << " stages";
  return success();
}

//===----------------------------------------------------------------------===//
// Asynchronous copies
//===----------------------------------------------------------------------===//

LogicalResult AsyncCopyOp::verify() {
  MemRefType view = getView().getType();
  BufferType buffer = getBuffer().getType();
  if ((int64_t)getIndices().size() != view.getRank() - 1)
    return emitOpError() << "expects " << view.getRank() - 1 << " indices for a rank-"
                         << view.getRank() << " view (the last is the first row), got "
                         << getIndices().size();
  if (view.getElementType() != buffer.getElementType())
    return emitOpError() << "copies " << view.getElementType() << " into a buffer of "
                         << buffer.getElementType() << " (cp.async does not convert)";
  int64_t cols = view.getShape().back();
  if (ShapedType::isDynamic(cols) || cols != buffer.getCols())
    return emitOpError() << "copies whole rows: the view's last dimension ("
                         << (ShapedType::isDynamic(cols) ? "?" : std::to_string(cols))
                         << ") must be the buffer's " << buffer.getCols() << " columns";
  if (buffer.getSharedTile().rowBytes() % 16)
    return emitOpError() << "cp.async moves 16-byte chunks; a row of "
                         << buffer.getSharedTile().rowBytes() << " bytes is not whole chunks";
  if (getPageTable() && view.getRank() != 4)
    return emitOpError("a paged copy reads a rank-4 cache at (batch, head, row)");
  if (std::optional<int64_t> threads = getThreads(); threads && *threads % 32)
    return emitOpError() << "is shared by whole warps: threads = " << *threads
                         << " is not a multiple of 32";
  // Inside warp-specialized partitions the CTA's other warps never reach the copy: it is the
  // first partition's (warps from 0, which `threads` counts from) and dealt to its threads
  // alone. Without `threads` its lowering would deal chunks to threads that never copy them.
  if (auto roles = (*this)->getParentOfType<WarpSpecializeOp>()) {
    unsigned partition = roles.partitionOf(*this);
    if (partition != 0)
      return emitOpError() << "is in warp-specialized partition " << partition
                           << "; cp.async copies belong to the first (the consumers'), whose "
                              "warps start at 0: a producer loads by TMA";
    int64_t partitionThreads = int64_t(roles.getPartitionWarps()[0]) * 32;
    if (getThreads() != partitionThreads)
      return emitOpError() << "in the first warp-specialized partition must be shared by its "
                           << partitionThreads << " threads (threads = " << partitionThreads
                           << "), not "
                           << (getThreads() ? std::to_string(*getThreads()) : "the CTA's");
  }
  return success();
}

unsigned WarpSpecializeOp::partitionOf(Operation *op) {
  Region *region = op->getParentRegion();
  while (region->getParentOp() != getOperation())
    region = region->getParentOp()->getParentRegion();
  return region->getRegionNumber();
}

int64_t WarpSpecializeOp::partitionFirstWarp(unsigned i) {
  int64_t first = 0;
  for (unsigned j = 0; j < i; ++j)
    first += getPartitionWarps()[j];
  return first;
}

int64_t WarpSpecializeOp::registersAtLaunch(int64_t threads, int64_t ctasPerSm) {
  int64_t perThread = 65536 / std::max<int64_t>(1, threads * std::max<int64_t>(1, ctasPerSm));
  return std::min<int64_t>(255, perThread) / 8 * 8;
}

LogicalResult TensorMapOp::verify() {
  auto argument = dyn_cast<BlockArgument>(getView());
  if (!argument || !isa<mlir::FunctionOpInterface>(argument.getOwner()->getParentOp()))
    return emitOpError("maps a kernel argument (the launcher encodes its tensor map), not a "
                       "value computed in the kernel");
  auto view = cast<MemRefType>(getView().getType());
  MemRefType box = getDescriptor().getType().getTensor();
  if (box.getRank() != view.getRank() || box.getElementType() != view.getElementType())
    return emitOpError() << "the descriptor's box " << box << " must have the rank and element "
                         << "type of the view " << view;
  return success();
}

namespace {
/// The checks a TMA transfer between a tensor map and a shared buffer shares, load or store:
/// one coordinate per box dimension, a 2-D box of the buffer's element type whose rows are
/// `boxRowsOf(buffer)` (a load fills the whole buffer; a store writes rows of it), and a swizzle
/// that writes (or reads) the buffer's layout panel by panel.
LogicalResult verifyTmaTransfer(Operation *op, mlir::nvgpu::TensorMapDescriptorType descriptor,
                                size_t coordinates, BufferType buffer, bool wholeBuffer) {
  MemRefType box = descriptor.getTensor();
  int64_t rank = box.getRank();
  if ((int64_t)coordinates != rank)
    return op->emitOpError() << "expects one coordinate per dimension of the descriptor's "
                             << rank << "-D box, got " << coordinates;
  if (rank < 2 || !box.hasStaticShape())
    return op->emitOpError() << "expects a static box of rank 2 or more, got " << box;
  if (llvm::any_of(box.getShape().drop_back(2), [](int64_t d) { return d != 1; }))
    return op->emitOpError() << "moves a 2-D tile: the box's leading dimensions must be 1, got "
                             << box;
  if (box.getElementType() != buffer.getElementType())
    return op->emitOpError() << "the box holds " << box.getElementType() << ", the buffer "
                             << buffer.getElementType();
  int64_t boxRows = box.getShape()[rank - 2], boxCols = box.getShape()[rank - 1];
  if (wholeBuffer && boxRows != buffer.getRows())
    return op->emitOpError() << "the box has " << boxRows << " rows, the buffer "
                             << buffer.getRows();
  // A store writes whole boxes of the buffer's rows; a canonical_128b panel's swizzle repeats
  // every 8 rows (1024 bytes), so a box that starts on a multiple of its rows starts aligned.
  if (!wholeBuffer && (boxRows > buffer.getRows() || buffer.getRows() % boxRows || boxRows % 8))
    return op->emitOpError() << "the box's " << boxRows << " rows must be a multiple of 8 that "
                             << "divides the buffer's " << buffer.getRows();
  int64_t elementBytes = buffer.getSharedTile().elementBytes;
  auto swizzle = descriptor.getSwizzle();
  switch (buffer.getLayout().getSwizzle()) {
  case SharedSwizzle::Canonical128B:
    if (swizzle != mlir::nvgpu::TensorMapSwizzleKind::SWIZZLE_128B)
      return op->emitOpError() << "a canonical_128b buffer is moved by a swizzle_128b tensor "
                                  "map, not "
                               << mlir::nvgpu::stringifyTensorMapSwizzleKind(swizzle);
    if (boxCols * elementBytes != 128)
      return op->emitOpError() << "with swizzle_128b the box is one 128-byte panel ("
                               << 128 / elementBytes << " columns), not " << boxCols
                               << " columns";
    break;
  case SharedSwizzle::None:
    if (swizzle != mlir::nvgpu::TensorMapSwizzleKind::SWIZZLE_NONE)
      return op->emitOpError() << "an unswizzled buffer is moved by a tensor map without "
                                  "swizzle, not "
                               << mlir::nvgpu::stringifyTensorMapSwizzleKind(swizzle);
    if (boxCols != buffer.getCols())
      return op->emitOpError() << "without swizzle the box is the whole buffer: " << boxCols
                               << " columns, the buffer " << buffer.getCols();
    break;
  case SharedSwizzle::ChunkXor:
    return op->emitOpError("TMA cannot move the chunk_xor layout (no tensor-map swizzle "
                           "matches it); use canonical_128b");
  }
  return success();
}
} // namespace

LogicalResult TmaLoadOp::verify() {
  if (failed(verifyTmaTransfer(*this, getDescriptor().getType(), getCoordinates().size(),
                               getBuffer().getType(), /*wholeBuffer=*/true)))
    return failure();
  APInt id;
  unsigned barriers = getBarriers().getType().getNumBarriers();
  if (matchPattern(getBarrierId(), m_ConstantInt(&id)) &&
      (id.getSExtValue() < 0 || id.getSExtValue() >= barriers))
    return emitOpError() << "mbarrier " << id.getSExtValue() << " is out of range for a group of "
                         << barriers;
  return success();
}

LogicalResult TmaStoreOp::verify() {
  BufferType buffer = getBuffer().getType();
  if (failed(verifyTmaTransfer(*this, getDescriptor().getType(), getCoordinates().size(), buffer,
                               /*wholeBuffer=*/false)))
    return failure();
  if (buffer.getLayout().getSwizzle() != SharedSwizzle::Canonical128B)
    return emitOpError("stores canonical_128b buffers (one transfer per 128-byte panel) only");
  MemRefType box = getDescriptor().getType().getTensor();
  int64_t boxRows = box.getShape()[box.getRank() - 2];
  APInt first;
  if (matchPattern(getFirstRow(), m_ConstantInt(&first)) &&
      (first.getSExtValue() < 0 || first.getSExtValue() % boxRows ||
       first.getSExtValue() + boxRows > buffer.getRows()))
    return emitOpError() << "first row " << first.getSExtValue() << " must be a multiple of the "
                         << "box's " << boxRows << " rows inside the buffer's "
                         << buffer.getRows();
  return success();
}

//===----------------------------------------------------------------------===//
// Warpgroup MMA
//===----------------------------------------------------------------------===//

static bool is16BitFloat(Type t) { return t.isBF16() || t.isF16(); }

/// What tgpu.wgmma and tgpu.mma check alike about the accumulator and the rhs: the
/// accumulator has the result's type; the rhs holds bf16 or f16, is laid out in `swizzle` (the
/// one its reader reads; `swizzleMessage` says so) and has the result's N (its rows when
/// transposed). Returns the contraction K.
static FailureOr<int64_t> verifyProductRhs(Operation *op, RankedTensorType result, Value acc,
                                           BufferType rhs, bool transposeRhs,
                                           SharedSwizzle swizzle, StringRef swizzleMessage) {
  if (acc && acc.getType() != result)
    return op->emitOpError() << "the accumulator's type " << acc.getType()
                             << " differs from the result's " << result;
  Type elt = rhs.getElementType();
  if (!is16BitFloat(elt))
    return op->emitOpError() << "multiplies bf16 or f16 operands, not " << elt;
  if (rhs.getLayout().getSwizzle() != swizzle)
    return op->emitOpError() << swizzleMessage
                             << stringifySharedSwizzle(rhs.getLayout().getSwizzle());
  int64_t n = result.getDimSize(1);
  int64_t rhsN = transposeRhs ? rhs.getRows() : rhs.getCols();
  if (rhsN != n)
    return op->emitOpError() << "the rhs has " << rhsN << " columns of the product ("
                             << (transposeRhs ? "rows, transposed" : "columns")
                             << "), the result " << n;
  return transposeRhs ? rhs.getCols() : rhs.getRows();
}

/// The lhs (rows x K, of `lhsElt`) agrees with the rhs's element type, the result's rows and K.
static LogicalResult verifyProductLhs(Operation *op, RankedTensorType result, Type lhsElt,
                                      Type rhsElt, int64_t lhsRows, int64_t lhsK, int64_t k) {
  int64_t m = result.getDimSize(0), n = result.getDimSize(1);
  if (lhsElt != rhsElt)
    return op->emitOpError() << "the lhs holds " << lhsElt << ", the rhs " << rhsElt;
  if (lhsRows != m || lhsK != k)
    return op->emitOpError() << "the lhs is " << lhsRows << "x" << lhsK << ", expected " << m
                             << "x" << k << " for a " << m << "x" << n
                             << " result and a contraction of " << k;
  return success();
}

LogicalResult WgmmaOp::verify() {
  auto result = cast<RankedTensorType>(getResult().getType());
  auto accLayout = dyn_cast_or_null<WgmmaAccumulatorLayoutAttr>(result.getEncoding());
  if (!accLayout || !result.getElementType().isF32())
    return emitOpError() << "the result must be an f32 block in #tgpu.wgmma_acc, got " << result;
  BufferType rhs = getRhs().getType();
  // With row sums the result has 8 columns more than the product: the rhs's are the first N.
  RankedTensorType product = result;
  if (BufferType ones = getRowSums() ? getRowSums().getType() : BufferType()) {
    if (result.getDimSize(1) <= kRowSumColumns)
      return emitOpError() << "with row sums the result has the product's columns and 8 more, "
                              "got "
                           << result;
    product = RankedTensorType::get({result.getDimSize(0), result.getDimSize(1) - kRowSumColumns},
                                    result.getElementType(), result.getEncoding());
    if (ones.getRows() != kRowSumColumns || ones.getCols() != 64 ||
        ones.getLayout().getSwizzle() != SharedSwizzle::Canonical128B ||
        ones.getElementType() != rhs.getElementType())
      return emitOpError() << "the row sums' ones must be an 8x64 canonical_128b buffer of the "
                              "rhs's element type ("
                           << rhs.getElementType() << "), got " << ones;
    if (isa<BufferType>(getLhs().getType()))
      return emitOpError("sums the rows of a register lhs (P), not of a shared one");
    if (getAcc() && getAcc().getType() != result)
      return emitOpError() << "the accumulator's type " << getAcc().getType()
                           << " differs from the result's " << result;
  }
  FailureOr<int64_t> k = verifyProductRhs(
      *this, product, getRowSums() ? Value() : getAcc(), rhs, getTransposeRhs(),
      SharedSwizzle::Canonical128B,
      "the rhs is read by a 128-byte-swizzle descriptor: its layout must be canonical_128b, not ");
  if (failed(k))
    return failure();
  // K is a multiple of 16 (k16 steps) by the lhs layouts: operand_a fragments are k16, and a
  // canonical_128b lhs has 128-byte rows.

  int64_t lhsRows, lhsK;
  Type lhsElt;
  if (auto shared = dyn_cast<BufferType>(getLhs().getType())) {
    if (shared.getLayout().getSwizzle() != SharedSwizzle::Canonical128B)
      return emitOpError() << "a shared lhs is read by a 128-byte-swizzle descriptor: its layout "
                              "must be canonical_128b, not "
                           << stringifySharedSwizzle(shared.getLayout().getSwizzle());
    // Transposed, the buffer is K x M: the descriptor reads it MN-major.
    lhsRows = getTransposeLhs() ? shared.getCols() : shared.getRows();
    lhsK = getTransposeLhs() ? shared.getRows() : shared.getCols();
    lhsElt = shared.getElementType();
  } else {
    if (getTransposeLhs())
      return emitOpError("a transposed lhs is read from a shared buffer (MN-major through its "
                         "descriptor), not from registers");
    auto lhs = cast<RankedTensorType>(getLhs().getType());
    auto aLayout = dyn_cast_or_null<OperandALayoutAttr>(lhs.getEncoding());
    if (!aLayout || aLayout.getRowsPerWarp() != 16 ||
        aLayout.getWarps() != 4 * accLayout.getWarpgroups())
      return emitOpError() << "a register lhs must be in #tgpu.operand_a<warps = "
                           << 4 * accLayout.getWarpgroups()
                           << ", rows_per_warp = 16> (the warpgroups' fragments), got " << lhs;
    lhsRows = lhs.getDimSize(0), lhsK = lhs.getDimSize(1), lhsElt = lhs.getElementType();
  }
  if (failed(verifyProductLhs(*this, product, lhsElt, rhs.getElementType(), lhsRows, lhsK, *k)))
    return failure();

  // A register lhs is in flight with the accumulators; a shared one is not a register.
  if (isa<BufferType>(getLhs().getType()) != !getLhsInFlight())
    return emitOpError() << (getLhsInFlight()
                                 ? "has no register lhs to keep in flight"
                                 : "keeps its register lhs in flight: it needs a second "
                                   "result, the registers the tensor cores read");
  if (getLhsInFlight() && getLhsInFlight().getType() != getLhs().getType())
    return emitOpError() << "the lhs in flight has type " << getLhsInFlight().getType()
                         << ", the lhs " << getLhs().getType();
  if (Value inFlight = getLhsInFlight())
    for (OpOperand &use : inFlight.getUses()) {
      Operation *user = use.getOwner();
      if (isa<WgmmaWaitOp>(user) || user->hasTrait<OpTrait::IsTerminator>())
        continue;
      return emitOpError() << "the lhs is in flight until a tgpu.wgmma_wait, but '"
                           << user->getName() << "' reads it";
    }

  // In flight until a wait: only another wgmma of the chain (as its accumulator), a wait, or
  // a terminator carrying it to the next iteration (a pipelined wait) may take it.
  for (OpOperand &use : getResult().getUses()) {
    Operation *user = use.getOwner();
    if (isa<WgmmaWaitOp>(user) || user->hasTrait<OpTrait::IsTerminator>())
      continue;
    if (auto next = dyn_cast<WgmmaOp>(user); next && next.getAcc() == use.get() &&
                                             use.getOperandNumber() == 2)
      continue;
    return emitOpError() << "the result is in flight until a tgpu.wgmma_wait, but '"
                         << user->getName() << "' reads it";
  }
  return success();
}

LogicalResult WgmmaWaitOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                            ValueRange operands, DictionaryAttr,
                                            OpaqueProperties, RegionRange,
                                            SmallVectorImpl<Type> &inferred) {
  llvm::append_range(inferred, operands.getTypes());
  return success();
}

LogicalResult WgmmaWaitOp::verify() {
  int64_t pending = getPendingAttr().getInt(); // signed: the getter reads it unsigned
  if (pending < 0)
    return emitOpError() << "pending groups must be 0 or more, not " << pending;
  bool anyAccumulator = false;
  for (auto [i, v] : llvm::enumerate(getValues())) {
    Attribute layout = cast<RankedTensorType>(v.getType()).getEncoding();
    anyAccumulator |= isa_and_nonnull<WgmmaAccumulatorLayoutAttr>(layout);
    if (!isa_and_nonnull<WgmmaAccumulatorLayoutAttr, OperandALayoutAttr>(layout))
      return emitOpError() << "guards wgmma accumulators (#tgpu.wgmma_acc) and register A "
                              "operands (#tgpu.operand_a); operand #"
                           << i << " is " << v.getType();
  }
  if (!anyAccumulator)
    return emitOpError("guards at least one accumulator (#tgpu.wgmma_acc)");
  return success();
}

//===----------------------------------------------------------------------===//
// mma.sync and register operands
//===----------------------------------------------------------------------===//

LogicalResult MmaOp::verify() {
  auto result = cast<RankedTensorType>(getResult().getType());
  auto accLayout = dyn_cast_or_null<MmaAccumulatorLayoutAttr>(result.getEncoding());
  if (!accLayout || !result.getElementType().isF32())
    return emitOpError() << "the result must be an f32 block in #tgpu.mma_acc, got " << result;
  BufferType rhs = getRhs().getType();
  FailureOr<int64_t> k =
      verifyProductRhs(*this, result, getAcc(), rhs, getTransposeRhs(), SharedSwizzle::ChunkXor,
                       "the rhs is read by ldmatrix from a chunk_xor tile, not ");
  if (failed(k))
    return failure();
  if (int64_t n = result.getDimSize(1); n % 16)
    return emitOpError() << "the result has " << n
                         << " columns; ldmatrix.x4 reads B two n8 tiles at a time, so they must "
                            "be a multiple of 16";
  if (*k % 16)
    return emitOpError() << "the contraction (" << *k << ") must be a multiple of 16 (k16 steps)";

  int64_t lhsRows, lhsK;
  Type lhsElt;
  if (auto shared = dyn_cast<BufferType>(getLhs().getType())) {
    if (shared.getLayout().getSwizzle() != SharedSwizzle::ChunkXor)
      return emitOpError() << "a shared lhs is read by ldmatrix from a chunk_xor tile, not "
                           << stringifySharedSwizzle(shared.getLayout().getSwizzle());
    // Transposed, the buffer is K x M: the product reads its columns as rows.
    lhsRows = getTransposeLhs() ? shared.getCols() : shared.getRows();
    lhsK = getTransposeLhs() ? shared.getRows() : shared.getCols();
    lhsElt = shared.getElementType();
  } else {
    if (getTransposeLhs())
      return emitOpError("a transposed lhs is read from a shared buffer (ldmatrix.trans), not "
                         "from registers");
    auto lhs = cast<RankedTensorType>(getLhs().getType());
    auto aLayout = dyn_cast_or_null<OperandALayoutAttr>(lhs.getEncoding());
    if (!aLayout || aLayout.getWarps() != accLayout.getWarps() ||
        aLayout.getRowsPerWarp() != accLayout.getRowsPerWarp())
      return emitOpError() << "a register lhs must be in #tgpu.operand_a<warps = "
                           << accLayout.getWarps()
                           << ", rows_per_warp = " << accLayout.getRowsPerWarp()
                           << "> (the result's warps), got " << lhs;
    lhsRows = lhs.getDimSize(0), lhsK = lhs.getDimSize(1), lhsElt = lhs.getElementType();
  }
  return verifyProductLhs(*this, result, lhsElt, rhs.getElementType(), lhsRows, lhsK, *k);
}

LogicalResult LocalStoreOp::verify() {
  auto value = cast<RankedTensorType>(getValue().getType());
  Attribute layout = value.getEncoding();
  bool wgmmaLayout = isa_and_nonnull<WgmmaAccumulatorLayoutAttr>(layout);
  if (!wgmmaLayout && !isa_and_nonnull<MmaAccumulatorLayoutAttr>(layout))
    return emitOpError() << "stores a block in #tgpu.mma_acc or #tgpu.wgmma_acc (pairs of "
                            "columns a thread), got "
                         << value;
  BufferType buffer = getBuffer().getType();
  if (buffer.getRows() != value.getDimSize(0) || buffer.getCols() != value.getDimSize(1))
    return emitOpError() << "stores a " << value.getDimSize(0) << "x" << value.getDimSize(1)
                         << " block into a " << buffer.getRows() << "x" << buffer.getCols()
                         << " buffer";
  // The tile its readers take: ldmatrix's (tgpu.mma) for an mma accumulator, the wgmma
  // descriptors' for a warpgroup one.
  SharedSwizzle swizzle = wgmmaLayout ? SharedSwizzle::Canonical128B : SharedSwizzle::ChunkXor;
  if (!is16BitFloat(buffer.getElementType()) || buffer.getLayout().getSwizzle() != swizzle)
    return emitOpError() << "writes a bf16 or f16 " << stringifySharedSwizzle(swizzle)
                         << " buffer (what "
                         << (wgmmaLayout ? "wgmma's descriptors read" : "ldmatrix reads")
                         << " from a " << (wgmmaLayout ? "#tgpu.wgmma_acc" : "#tgpu.mma_acc")
                         << " block), not " << buffer;
  return success();
}

LogicalResult PackOperandAOp::verify() {
  auto input = cast<RankedTensorType>(getInput().getType());
  auto result = cast<RankedTensorType>(getResult().getType());
  int64_t warps, rowsPerWarp;
  if (auto acc = dyn_cast_or_null<MmaAccumulatorLayoutAttr>(input.getEncoding())) {
    warps = acc.getWarps(), rowsPerWarp = acc.getRowsPerWarp();
  } else if (auto acc = dyn_cast_or_null<WgmmaAccumulatorLayoutAttr>(input.getEncoding())) {
    warps = 4 * acc.getWarpgroups(), rowsPerWarp = 16;
  } else {
    return emitOpError() << "packs an accumulator (#tgpu.mma_acc or #tgpu.wgmma_acc), got "
                         << input;
  }
  if (!input.getElementType().isF32())
    return emitOpError() << "packs f32 values, not " << input.getElementType();
  auto aLayout = dyn_cast_or_null<OperandALayoutAttr>(result.getEncoding());
  if (!aLayout || aLayout.getWarps() != warps || aLayout.getRowsPerWarp() != rowsPerWarp)
    return emitOpError() << "the result must be in #tgpu.operand_a<warps = " << warps
                         << ", rows_per_warp = " << rowsPerWarp
                         << ">, whose value slots are the input's, got " << result;
  if (!is16BitFloat(result.getElementType()))
    return emitOpError() << "the result holds bf16 or f16, not " << result.getElementType();
  if (result.getShape() != input.getShape())
    return emitOpError() << "the result's shape differs from the input's";
  return success();
}

/// tgpu.leading_columns and tgpu.pad_columns: `narrow` is the first columns of `wide`, both
/// in one accumulator encoding, of the same rows and element type.
static LogicalResult verifyColumnPrefix(Operation *op, RankedTensorType narrow,
                                        RankedTensorType wide) {
  if (!isa_and_nonnull<MmaAccumulatorLayoutAttr, WgmmaAccumulatorLayoutAttr>(wide.getEncoding()))
    return op->emitOpError() << "takes an accumulator (#tgpu.mma_acc or #tgpu.wgmma_acc), got "
                             << wide;
  if (narrow.getEncoding() != wide.getEncoding() ||
      narrow.getElementType() != wide.getElementType())
    return op->emitOpError() << "keeps the encoding and element type: " << narrow << " and "
                             << wide;
  if (narrow.getRank() != 2 || wide.getRank() != 2 ||
      narrow.getDimSize(0) != wide.getDimSize(0))
    return op->emitOpError() << "keeps the rows of a 2-D block: " << narrow << " and " << wide;
  if (narrow.getDimSize(1) >= wide.getDimSize(1))
    return op->emitOpError() << "the narrow block has fewer columns than the wide one: "
                             << narrow.getDimSize(1) << " against " << wide.getDimSize(1);
  return success();
}

LogicalResult LeadingColumnsOp::verify() {
  return verifyColumnPrefix(*this, cast<RankedTensorType>(getResult().getType()),
                            cast<RankedTensorType>(getInput().getType()));
}

LogicalResult PadColumnsOp::verify() {
  return verifyColumnPrefix(*this, cast<RankedTensorType>(getInput().getType()),
                            cast<RankedTensorType>(getResult().getType()));
}

LogicalResult SplitRowSumsOp::verify() {
  auto input = cast<RankedTensorType>(getInput().getType());
  auto product = cast<RankedTensorType>(getProduct().getType());
  auto sums = cast<RankedTensorType>(getSums().getType());
  auto layout = dyn_cast_or_null<WgmmaAccumulatorLayoutAttr>(input.getEncoding());
  if (!layout || !input.getElementType().isF32() || input.getDimSize(1) <= WgmmaOp::kRowSumColumns)
    return emitOpError() << "takes an f32 #tgpu.wgmma_acc accumulator with row sums (the "
                            "product's columns and 8 more), got "
                         << input;
  if (product.getEncoding() != input.getEncoding() || !product.getElementType().isF32() ||
      product.getDimSize(0) != input.getDimSize(0) ||
      product.getDimSize(1) != input.getDimSize(1) - WgmmaOp::kRowSumColumns)
    return emitOpError() << "the product must be the input's first "
                         << input.getDimSize(1) - WgmmaOp::kRowSumColumns << " columns in its layout, got " << product;
  auto rows = dyn_cast_or_null<AccumulatorRowsLayoutAttr>(sums.getEncoding());
  if (!rows || rows.getParent() != layout || sums.getRank() != 1 ||
      sums.getDimSize(0) != input.getDimSize(0))
    return emitOpError() << "the sums must be a row vector of " << input.getDimSize(0)
                         << " in #tgpu.acc_rows<" << layout << ">, got " << sums;
  return success();
}

LogicalResult FillOp::verify() {
  BufferType buffer = getBuffer().getType();
  if (!is16BitFloat(buffer.getElementType()))
    return emitOpError() << "fills a buffer of bf16 or f16 (pairs of them a 32-bit word), not "
                         << buffer.getElementType();
  if (buffer.getRows() * buffer.getCols() % 2)
    return emitOpError("fills whole 32-bit words: the buffer needs an even element count");
  return success();
}

//===----------------------------------------------------------------------===//
// Barriers and warp roles
//===----------------------------------------------------------------------===//

LogicalResult NamedBarrierOp::verify() {
  if (getId() < 1 || getId() > 15)
    return emitOpError() << "named barrier ids are 1 to 15 (0 is the CTA-wide barrier), not "
                         << getId();
  if (getThreads() < 32 || getThreads() > 1024 || getThreads() % 32)
    return emitOpError() << "a named barrier counts whole warps: threads must be a multiple of "
                            "32 in [32, 1024], not "
                         << getThreads();
  if (bool(getWarpgroup()) != bool(getWarpgroups()) ||
      bool(getWarpgroup()) != bool(getFirstWarpgroup()))
    return emitOpError("per-warpgroup barriers need the warpgroup choice, their count and the "
                       "first warpgroup");
  if (!getWarpgroup())
    return success();
  int64_t warpgroups = *getWarpgroups(), first = *getFirstWarpgroup();
  if (warpgroups < 1 || first < 0 || (first + warpgroups) * 4 > 32)
    return emitOpError() << "warpgroups " << first << " to " << first + warpgroups - 1
                         << " are not warpgroups of a CTA (at most 8)";
  if (getId() + warpgroups - 1 > 15)
    return emitOpError() << "uses barriers " << getId() << " to " << getId() + warpgroups - 1
                         << " for " << warpgroups << " warpgroups; ids end at 15";
  // Inside a partition, the warpgroups must be that partition's.
  if (auto roles = (*this)->getParentOfType<WarpSpecializeOp>()) {
    unsigned partition = roles.partitionOf(*this);
    if (roles.partitionFirstWarp(partition) != first * 4 ||
        roles.partitionWarpgroups(partition) != warpgroups)
      return emitOpError() << "names warpgroups " << first << " to " << first + warpgroups - 1
                           << ", not those of its partition";
  }
  return success();
}

ParseResult WarpSpecializeOp::parse(OpAsmParser &parser, OperationState &result) {
  SmallVector<int32_t> warps, registers;
  while (succeeded(parser.parseOptionalKeyword("partition"))) {
    int32_t w = 0, r = 0;
    auto region = std::make_unique<Region>();
    if (parser.parseKeyword("warps") || parser.parseInteger(w) ||
        parser.parseKeyword("registers") || parser.parseInteger(r) ||
        parser.parseRegion(*region, /*arguments=*/{}))
      return failure();
    if (region->empty())
      region->emplaceBlock();
    warps.push_back(w);
    registers.push_back(r);
    result.addRegion(std::move(region));
  }
  Builder b(parser.getContext());
  result.addAttribute(getPartitionWarpsAttrName(result.name), b.getDenseI32ArrayAttr(warps));
  result.addAttribute(getPartitionRegistersAttrName(result.name),
                      b.getDenseI32ArrayAttr(registers));
  return parser.parseOptionalAttrDict(result.attributes);
}

void WarpSpecializeOp::print(OpAsmPrinter &printer) {
  ArrayRef<int32_t> warps = getPartitionWarps(), registers = getPartitionRegisters();
  for (auto [i, region] : llvm::enumerate(getPartitions())) {
    printer << " partition warps " << (i < warps.size() ? warps[i] : 0) << " registers "
            << (i < registers.size() ? registers[i] : 0) << " ";
    printer.printRegion(region, /*printEntryBlockArgs=*/false);
  }
  printer.printOptionalAttrDict((*this)->getAttrs(),
                                {getPartitionWarpsAttrName(), getPartitionRegistersAttrName()});
}

LogicalResult WarpSpecializeOp::verify() {
  ArrayRef<int32_t> warps = getPartitionWarps(), registers = getPartitionRegisters();
  size_t partitions = getPartitions().size();
  if (partitions == 0)
    return emitOpError("needs at least one partition");
  if (warps.size() != partitions || registers.size() != partitions)
    return emitOpError() << "expects one warp count and one register budget per partition ("
                         << partitions << " partitions, " << warps.size() << " warp counts, "
                         << registers.size() << " budgets)";
  int64_t totalWarps = 0, totalRegisters = 0;
  for (size_t i = 0; i < partitions; ++i) {
    if (warps[i] < 4 || warps[i] % 4)
      return emitOpError() << "partition #" << i << " has " << warps[i]
                           << " warps; setmaxnreg sets a whole warpgroup's registers, so a "
                              "partition is a positive multiple of 4 warps";
    if (registers[i] < 24 || registers[i] > 256 || registers[i] % 8)
      return emitOpError() << "partition #" << i << "'s register budget " << registers[i]
                           << " is not what setmaxnreg takes (a multiple of 8 in [24, 256])";
    if (!getPartitions()[i].front().getArguments().empty())
      return emitOpError() << "partition #" << i << " takes no arguments";
    totalWarps += warps[i];
    totalRegisters += int64_t(warps[i]) * 32 * registers[i];
  }
  if (totalWarps > 32)
    return emitOpError() << "the partitions have " << totalWarps
                         << " warps; a CTA has at most 32 (1024 threads)";
  if (totalRegisters > 65536)
    return emitOpError() << "the partitions' budgets need " << totalRegisters
                         << " registers; an SM has 65536";
  return success();
}
