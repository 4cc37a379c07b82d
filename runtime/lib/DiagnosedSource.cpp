//===- DiagnosedSource.cpp - DSL text parsed with captured diagnostics ----===//
#include "DiagnosedSource.h"

#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "tilefuse/dialect/TileOps.h"

using namespace mlir;

void tilefuse::runtime::registerCompilerDialects(DialectRegistry &registry) {
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerAllToLLVMIRTranslations(registry);
  registry.insert<tile::TileDialect>();
}

tilefuse::runtime::DiagnosedSource::DiagnosedSource(MLIRContext &ctx, llvm::StringRef source,
                                                    llvm::StringRef bufferName)
    : ctx(ctx), handler(sourceMgr, &ctx, os) {
  sourceMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(source, bufferName),
                               llvm::SMLoc());
}

OwningOpRef<ModuleOp> tilefuse::runtime::DiagnosedSource::parse() {
  return parseSourceFile<ModuleOp>(sourceMgr, &ctx);
}
