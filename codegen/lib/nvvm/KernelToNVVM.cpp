//===- KernelToNVVM.cpp - kernel functions and the grid to NVVM -----------===//
//
// A kernel function (Q, K, V, O, LSE) becomes a gpu.func with the launch ABI's parameters
// (tilefuse/runtime/device/LaunchAbi.h, the one definition the runtime and the AOT launcher
// follow too): the tensors' base pointers, the sizes and the strides (in elements, innermost
// stride 1 implied), all 64-bit. Each view is rebuilt from them as the KernelView struct its
// converted type is; a dimension the ABI has no size for (D) is the type's static size. The program grid,
// scf.forall (batch, head, row block), maps to (blockIdx.z, blockIdx.y, blockIdx.x).
//
//===----------------------------------------------------------------------===//
#include "TGPUToNVVMPatterns.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "tilefuse/runtime/device/LaunchAbi.h"

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::nvvm;

namespace {

struct ForallToBlockIds : OpConversionPattern<scf::ForallOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(scf::ForallOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    if (op.getRank() != 3 || !op.getOutputs().empty())
      return op.emitOpError("the GPU grid is (batch, head, row block): a rank-3 scf.forall "
                            "without outputs");
    Location loc = op.getLoc();
    SmallVector<Value> ids = {gpu::BlockIdOp::create(rewriter, loc, gpu::Dimension::z),
                              gpu::BlockIdOp::create(rewriter, loc, gpu::Dimension::y),
                              gpu::BlockIdOp::create(rewriter, loc, gpu::Dimension::x)};
    Block *body = op.getBody();
    Operation *terminator = body->getTerminator();
    rewriter.eraseOp(terminator);
    rewriter.inlineBlockBefore(body, op, ids);
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

FailureOr<gpu::GPUFuncOp> tilefuse::nvvm::createKernelFunction(func::FuncOp fn,
                                                               gpu::GPUModuleOp gpuModule,
                                                               int64_t threads) {
  MLIRContext *ctx = fn.getContext();
  namespace abi = launch_abi;
  if (fn.getNumArguments() != abi::kTensorCount || !fn.getResultTypes().empty() ||
      !llvm::all_of(fn.getArgumentTypes(), [](Type t) { return isa<MemRefType>(t); }))
    return fn.emitError("a GPU kernel takes the views (Q, K, V, O, LSE) and returns nothing");
  for (auto [i, t] : llvm::enumerate(fn.getArgumentTypes())) {
    auto m = cast<MemRefType>(t);
    if (m.getRank() != abi::kTensors[i].rank)
      return fn.emitError() << "view #" << i << " (" << abi::kTensors[i].name << ") has rank "
                            << m.getRank() << ", the launch ABI's has "
                            << abi::kTensors[i].rank;
  }
  OpBuilder b = OpBuilder::atBlockEnd(gpuModule.getBody());
  Location loc = fn.getLoc();
  auto global = LLVM::LLVMPointerType::get(ctx, 1);
  SmallVector<Type> params(abi::kTensorCount, global);
  params.append(abi::kSizeCount + abi::kStrideCount, b.getI64Type());
  auto kernel = gpu::GPUFuncOp::create(b, loc, fn.getSymName(), b.getFunctionType(params, {}));
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  kernel.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({(int32_t)threads, 1, 1}));
  // setmaxnreg and the register budget need both (shared/DESIGN.md, toolchain facts).
  kernel->setAttr("nvvm.maxntid", b.getDenseI32ArrayAttr({(int32_t)threads, 1, 1}));
  kernel->setAttr("nvvm.minctasm", b.getI32IntegerAttr(1));

  Block &entry = kernel.getBody().front();
  b.setInsertionPointToStart(&entry);
  auto stride = [&](int s) { return entry.getArgument(abi::kFirstStride + s); };
  TGPUToNVVMTypeConverter converter(ctx);
  SmallVector<Value> views;
  for (auto [i, t] : llvm::enumerate(fn.getArgumentTypes())) {
    auto type = cast<MemRefType>(t);
    Type structType = converter.convertType(type);
    Value v = LLVM::PoisonOp::create(b, loc, structType);
    v = LLVM::InsertValueOp::create(b, loc, v, entry.getArgument(i), ArrayRef<int64_t>{0});
    const abi::Tensor &tensor = abi::kTensors[i];
    // Truncated once here: the parameters are 64-bit in the ABI, the kernel's index
    // arithmetic is 32-bit.
    auto narrow = [&](Value x) { return LLVM::TruncOp::create(b, loc, b.getI32Type(), x); };
    auto constant = [&](int64_t x) {
      return LLVM::ConstantOp::create(b, loc, b.getI32Type(), x).getResult();
    };
    for (int64_t d = 0; d < type.getRank(); ++d) {
      int sizeIndex = abi::sizeIndex(tensor.dimensions[d]);
      Value extent = sizeIndex >= 0 ? narrow(entry.getArgument(abi::kFirstSize + sizeIndex))
                                    : constant(type.getDimSize(d));
      // The innermost dimension is contiguous; the others take their stride parameters.
      Value step = d + 1 < type.getRank() ? narrow(stride(abi::firstStride(i) + d)) : constant(1);
      v = LLVM::InsertValueOp::create(b, loc, v, extent, ArrayRef<int64_t>{1, d});
      v = LLVM::InsertValueOp::create(b, loc, v, step, ArrayRef<int64_t>{2, d});
    }
    views.push_back(UnrealizedConversionCastOp::create(b, loc, type, v).getResult(0));
  }

  // Move the body: the function's entry block takes the rebuilt views as its arguments.
  Block &body = fn.getBody().front();
  if (!fn.getBody().hasOneBlock())
    return fn.emitError("a GPU kernel's body is one block (structured control flow)");
  for (auto [arg, view] : llvm::zip(body.getArguments(), views))
    arg.replaceAllUsesWith(view);
  Operation *ret = body.getTerminator();
  entry.getOperations().splice(entry.end(), body.getOperations(), body.begin(),
                               std::prev(body.end()));
  b.setInsertionPointToEnd(&entry);
  gpu::ReturnOp::create(b, ret->getLoc());
  return kernel;
}

void tilefuse::nvvm::populateKernelToNVVMPatterns(TGPUToNVVMTypeConverter &converter,
                                                  RewritePatternSet &patterns) {
  patterns.add<ForallToBlockIds>(converter, patterns.getContext());
}
