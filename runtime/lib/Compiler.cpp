//===- Compiler.cpp - DSL text to PTX, in process -------------------------===//
#include "tilefuse/runtime/Compiler.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "tilefuse/dialect/TileOps.h"
#include "tilefuse/passes/Passes.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;
using namespace tilefuse::runtime;

std::string CompiledKernel::metadataJson() const {
  llvm::json::Object o{{"name", name},         {"block_m", blockM},   {"block_n", blockN},
                       {"threads", threads},   {"head_dim", headDim}, {"dtype", dtype},
                       {"shared_bytes", sharedBytes}};
  std::string out;
  llvm::raw_string_ostream os(out);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(o)));
  return out;
}

llvm::Expected<CompiledKernel> tilefuse::runtime::compileToPTX(StringRef source,
                                                               StringRef bufferName,
                                                               const PtxCompileOptions &options) {
  auto fail = [](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
  };
  if (options.blockM <= 0 || options.blockM % 16 || options.blockM > 256)
    return fail("block-m must be a multiple of 16 up to 256 (16 rows per warp), got " +
                llvm::Twine(options.blockM));
  if (options.blockN <= 0 || options.blockN % 16)
    return fail("block-n must be a positive multiple of 16, got " + llvm::Twine(options.blockN));
  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerAllToLLVMIRTranslations(registry);
  registry.insert<tile::TileDialect>();
  MLIRContext ctx(registry);
  ctx.loadDialect<tile::TileDialect, func::FuncDialect>();

  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(source, bufferName),
                               llvm::SMLoc());
  std::string diagnostics;
  llvm::raw_string_ostream diagOS(diagnostics);
  SourceMgrDiagnosticHandler handler(sourceMgr, &ctx, diagOS);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &ctx);
  if (!module)
    return fail("cannot parse " + bufferName + ":\n" + diagnostics);

  if (options.headDim || !options.elementType.empty()) {
    PassManager spm(&ctx, ModuleOp::getOperationName());
    tilefuse::TileSpecializeOptions so;
    so.headDim = options.headDim;
    so.elementType = options.elementType;
    spm.addPass(tilefuse::createTileSpecialize(so));
    if (failed(spm.run(*module)))
      return fail("specializing " + bufferName + " failed:\n" + diagnostics);
  }

  CompiledKernel k;
  func::FuncOp kernel;
  for (auto fn : module->getOps<func::FuncOp>())
    if (!fn.isExternal()) {
      if (kernel)
        return fail(bufferName + ": expected one kernel function");
      kernel = fn;
    }
  if (!kernel || kernel.getNumArguments() != 5)
    return fail(bufferName + ": expected one kernel function taking (Q, K, V, O, LSE)");
  auto qTy = dyn_cast<MemRefType>(kernel.getArgumentTypes()[0]);
  if (!qTy || qTy.getRank() != 4 || qTy.isDynamicDim(3))
    return fail(bufferName + ": Q must be a rank-4 memref with a static head dimension");
  Type elt = qTy.getElementType();
  if (!elt.isBF16() && !elt.isF16())
    return fail(bufferName + ": the GPU path takes bf16 or f16 kernels");
  k.name = kernel.getSymName().str();
  k.dtype = elt.isBF16() ? "bf16" : "f16";
  k.headDim = qTy.getDimSize(3);
  k.blockM = options.blockM;
  k.blockN = options.blockN;
  k.threads = 32 * (options.blockM / 16);

  PassManager pm(&ctx, ModuleOp::getOperationName());
  tilefuse::GpuPipelineOptions gpo;
  gpo.blockM = options.blockM;
  gpo.blockN = options.blockN;
  gpo.chip = options.chip;
  gpo.features = options.features;
  tilefuse::buildTileToPTXPipeline(pm, gpo);
  if (failed(pm.run(*module)))
    return fail("compiling " + bufferName + " for " + options.chip + " failed:\n" + diagnostics);
  for (auto binary : module->getOps<gpu::BinaryOp>())
    for (Attribute a : binary.getObjects())
      if (auto obj = dyn_cast<gpu::ObjectAttr>(a)) {
        k.ptx = obj.getObject().getValue().str();
        return k;
      }
  return fail("compiling " + bufferName + ": the pipeline produced no PTX");
}
