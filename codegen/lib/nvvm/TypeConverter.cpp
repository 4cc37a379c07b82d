//===- TypeConverter.cpp - tgpu types to per-thread NVVM types, helpers ---===//
//
// The type converter of convert-tgpu-to-nvvm and the small builders its pattern files share
// (TGPUToNVVMPatterns.h says which file lowers what).
//
//===----------------------------------------------------------------------===//
#include "TGPUToNVVMPatterns.h"

#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "tilefuse/dialect/TileGPUDialect.h"

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::nvvm;

std::optional<tgpu::RegisterLayout> tilefuse::nvvm::registerLayoutOf(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return std::nullopt;
  auto layout = dyn_cast_or_null<tgpu::RegisterLayoutInterface>(tensor.getEncoding());
  if (!layout)
    return std::nullopt;
  return layout.getRegisterLayout(tensor.getShape());
}

TGPUToNVVMTypeConverter::TGPUToNVVMTypeConverter(MLIRContext *ctx) {
  addConversion([](Type t) { return t; });
  addConversion([ctx](RankedTensorType t) -> std::optional<Type> {
    std::optional<tgpu::RegisterLayout> layout = registerLayoutOf(t);
    if (!layout)
      return std::nullopt; // a block without a layout has no GPU form: the op is an error
    int64_t values = layout->getValuesPerThread();
    if (layout->getKind() == tgpu::RegisterLayout::Kind::OperandA)
      return VectorType::get({values / 2}, IntegerType::get(ctx, 32));
    return VectorType::get({values}, t.getElementType());
  });
  addConversion([ctx](tgpu::BufferType) -> Type { return LLVM::LLVMPointerType::get(ctx, 3); });
  addConversion([ctx](tgpu::RingType) -> Type { return LLVM::LLVMPointerType::get(ctx, 3); });
  addConversion([ctx](MemRefType t) -> Type {
    // 32-bit, the kernel's index width (the runtime checks that every element offset fits):
    // 64-bit fields would keep two registers per size and stride live across the key loop.
    auto i32 = IntegerType::get(ctx, 32);
    auto dims = LLVM::LLVMArrayType::get(i32, t.getRank());
    return LLVM::LLVMStructType::getLiteral(ctx,
                                            {LLVM::LLVMPointerType::get(ctx, 1), dims, dims});
  });
  addConversion(
      [ctx](nvgpu::DeviceAsyncTokenType) -> Type { return IntegerType::get(ctx, 32); });
  // An mbarrier group is its first barrier's shared address (tgpu.alloc); a tensor map is the
  // generic address of the kernel's grid-constant parameter holding it.
  addConversion(
      [ctx](nvgpu::MBarrierGroupType) -> Type { return LLVM::LLVMPointerType::get(ctx, 3); });
  addConversion(
      [ctx](nvgpu::TensorMapDescriptorType) -> Type { return LLVM::LLVMPointerType::get(ctx); });
  auto cast = [](OpBuilder &b, Type type, ValueRange inputs, Location loc) -> Value {
    return UnrealizedConversionCastOp::create(b, loc, type, inputs).getResult(0);
  };
  addSourceMaterialization(cast);
  addTargetMaterialization(cast);
}

ThreadCoordinates tilefuse::nvvm::threadCoordinates(OpBuilder &b, Operation *inKernel) {
  OpBuilder::InsertionGuard guard(b);
  auto kernel = inKernel->getParentOfType<gpu::GPUFuncOp>();
  assert(kernel && "thread coordinates outside a kernel");
  b.setInsertionPointToStart(&kernel.getBody().front());
  Location loc = kernel.getLoc();
  ThreadCoordinates t;
  t.tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  t.lane = arith::RemUIOp::create(b, loc, t.tid, indexConstant(b, loc, 32));
  t.warp = arith::DivUIOp::create(b, loc, t.tid, indexConstant(b, loc, 32));
  t.g = arith::DivUIOp::create(b, loc, t.lane, indexConstant(b, loc, 4));
  t.c = arith::RemUIOp::create(b, loc, t.lane, indexConstant(b, loc, 4));
  return t;
}

Value ThreadCoordinates::firstRow(OpBuilder &b, Location loc, int64_t rowsPerWarp) const {
  return addIndex(b, loc, mulIndex(b, loc, warp, indexConstant(b, loc, rowsPerWarp)), g);
}

Value tilefuse::nvvm::indexConstant(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

Value tilefuse::nvvm::i32Constant(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIntOp::create(b, loc, v, 32);
}

Value tilefuse::nvvm::addIndex(OpBuilder &b, Location loc, Value x, Value y) {
  return b.createOrFold<arith::AddIOp>(loc, x, y);
}

Value tilefuse::nvvm::mulIndex(OpBuilder &b, Location loc, Value x, Value y) {
  return b.createOrFold<arith::MulIOp>(loc, x, y);
}

Value tilefuse::nvvm::extractValue(OpBuilder &b, Location loc, Value vector, int64_t i) {
  return vector::ExtractOp::create(b, loc, vector, i);
}

Value tilefuse::nvvm::fromValues(OpBuilder &b, Location loc, Type elementType,
                                 ArrayRef<Value> values) {
  return vector::FromElementsOp::create(
      b, loc, VectorType::get({(int64_t)values.size()}, elementType), values);
}

Value tilefuse::nvvm::packPair(OpBuilder &b, Location loc, Value x, Value y, Type elementType) {
  Value pair = fromValues(b, loc, elementType,
                          {arith::TruncFOp::create(b, loc, elementType, x),
                           arith::TruncFOp::create(b, loc, elementType, y)});
  return LLVM::BitcastOp::create(b, loc, b.getI32Type(), pair);
}

KernelView KernelView::unpack(OpBuilder &b, Location loc, Value view, MemRefType type) {
  KernelView v;
  v.pointer = LLVM::ExtractValueOp::create(b, loc, view, 0);
  v.elementType = type.getElementType();
  for (int64_t d = 0; d < type.getRank(); ++d) {
    auto field = [&](int64_t f) -> Value {
      Value x = LLVM::ExtractValueOp::create(b, loc, view, ArrayRef<int64_t>{f, d});
      return arith::IndexCastOp::create(b, loc, b.getIndexType(), x);
    };
    v.sizes.push_back(field(1));
    v.strides.push_back(field(2));
  }
  return v;
}

Value KernelView::address(OpBuilder &b, Location loc, ValueRange indices) const {
  Value offset = indexConstant(b, loc, 0);
  for (auto [i, s] : llvm::zip(indices, strides))
    offset = addIndex(b, loc, offset, mulIndex(b, loc, i, s));
  Value offset64 = arith::IndexCastOp::create(b, loc, b.getI64Type(), offset);
  return LLVM::GEPOp::create(b, loc, pointer.getType(), elementType, pointer,
                             ValueRange{offset64});
}

Value KernelView::load(OpBuilder &b, Location loc, ValueRange indices) const {
  return LLVM::LoadOp::create(b, loc, elementType, address(b, loc, indices));
}

Value tilefuse::nvvm::rematerializedPerIteration(OpBuilder &b, Location loc, Value pointer,
                                                 Operation *op) {
  auto loop = op->getParentOfType<scf::ForOp>();
  if (!loop)
    return pointer;
  Type i32 = b.getI32Type();
  Value iv = arith::IndexCastOp::create(b, loc, i32, loop.getInductionVar());
  Value bits = LLVM::PtrToIntOp::create(b, loc, i32, pointer);
  Value moved = LLVM::InlineAsmOp::create(b, loc, i32, ValueRange{bits, iv}, "mov.b32 $0, $1;",
                                          "=r,r,r", /*has_side_effects=*/false,
                                          /*is_align_stack=*/false,
                                          LLVM::tailcallkind::TailCallKind::None,
                                          LLVM::AsmDialectAttr(), ArrayAttr())
                    .getResult(0);
  return LLVM::IntToPtrOp::create(b, loc, pointer.getType(), moved);
}

Value tilefuse::nvvm::sharedAddress(OpBuilder &b, Location loc, Value base, Value byteOffset) {
  Value offset64 = arith::IndexCastOp::create(b, loc, b.getI64Type(), byteOffset);
  return LLVM::GEPOp::create(b, loc, base.getType(), b.getI8Type(), base, ValueRange{offset64});
}

SmallVector<Value> tilefuse::nvvm::inlinePtx(OpBuilder &b, Location loc, TypeRange types,
                                             ValueRange operands, StringRef text,
                                             StringRef constraints) {
  if (types.empty()) {
    LLVM::InlineAsmOp::create(b, loc, TypeRange(), operands, text, constraints,
                              /*has_side_effects=*/true, /*is_align_stack=*/false,
                              LLVM::tailcallkind::TailCallKind::None, LLVM::AsmDialectAttr(),
                              ArrayAttr());
    return {};
  }
  auto st = LLVM::LLVMStructType::getLiteral(b.getContext(), SmallVector<Type>(types));
  Value res = LLVM::InlineAsmOp::create(b, loc, st, operands, text, constraints,
                                        /*has_side_effects=*/true, /*is_align_stack=*/false,
                                        LLVM::tailcallkind::TailCallKind::None,
                                        LLVM::AsmDialectAttr(), ArrayAttr())
                  .getResult(0);
  SmallVector<Value> out;
  for (size_t i = 0; i < types.size(); ++i)
    out.push_back(LLVM::ExtractValueOp::create(b, loc, res, i));
  return out;
}

Value tilefuse::nvvm::sharedChunkOffset(OpBuilder &b, Location loc, const tgpu::SharedTile &tile,
                                        Value row, Value chunk) {
  auto c = [&](int64_t v) { return indexConstant(b, loc, v); };
  switch (tile.swizzle) {
  case tgpu::SharedSwizzle::None:
    return addIndex(b, loc, mulIndex(b, loc, row, c(tile.rowBytes())),
                    mulIndex(b, loc, chunk, c(16)));
  case tgpu::SharedSwizzle::ChunkXor: {
    Value swizzled = arith::XOrIOp::create(b, loc, chunk, arith::AndIOp::create(b, loc, row, c(7)));
    return addIndex(b, loc, mulIndex(b, loc, row, c(tile.paddedRowBytes())),
                    mulIndex(b, loc, swizzled, c(16)));
  }
  case tgpu::SharedSwizzle::Canonical128B: {
    Value panel = arith::DivUIOp::create(b, loc, chunk, c(8));
    Value swizzled = arith::XOrIOp::create(b, loc, arith::RemUIOp::create(b, loc, chunk, c(8)),
                                           arith::AndIOp::create(b, loc, row, c(7)));
    return addIndex(b, loc,
                    addIndex(b, loc, mulIndex(b, loc, panel, c(tile.rows * 128)),
                             mulIndex(b, loc, row, c(128))),
                    mulIndex(b, loc, swizzled, c(16)));
  }
  }
  llvm_unreachable("shared swizzle");
}
