//===- DiagnosedSource.cpp - DSL text parsed with captured diagnostics ----===//
#include "DiagnosedSource.h"

#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "tilefuse/dialect/ParseKernel.h"
#include "tilefuse/dialect/TileOps.h"
#include "tilefuse/passes/Passes.h"

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
  // A user reads these: the DSL line is the location, not a dump of the IR it became.
  ctx.printOpOnDiagnostic(false);
  sourceMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(source, bufferName),
                               llvm::SMLoc());
}

OwningOpRef<ModuleOp> tilefuse::runtime::DiagnosedSource::parse() {
  OwningOpRef<ModuleOp> module = parseKernel(sourceMgr, ParserConfig(&ctx));
  // The front door: no pass (tile-specialize comes before the pipelines) sees unchecked input.
  if (module && failed(checkWrittenForm(*module)))
    return nullptr;
  return module;
}
