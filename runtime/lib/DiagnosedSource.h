//===- DiagnosedSource.h - DSL text parsed with captured diagnostics -*- C++ -*-===//
//
// Shared by the two compilers of the runtime (the CPU backend and compileToPTX): the context they
// need, and the kernel text in a SourceMgr whose diagnostics - from the parser and from every
// pass run afterwards - are captured as text with file:line:col, the source line and a caret,
// ready to go into an error value.
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_RUNTIME_DIAGNOSEDSOURCE_H
#define TILEFUSE_RUNTIME_DIAGNOSEDSOURCE_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace mlir {
class DialectRegistry;
}

namespace tilefuse::runtime {

/// Dialects, their extensions (NVVM target, bufferization models, ...) and the LLVM IR
/// translations the compilers use, plus the tile dialect.
void registerCompilerDialects(mlir::DialectRegistry &registry);

class DiagnosedSource {
public:
  /// Captures the diagnostics of `ctx` for as long as this object lives.
  DiagnosedSource(mlir::MLIRContext &ctx, llvm::StringRef text, llvm::StringRef bufferName);

  /// Parses the module and checks its written form (tilefuse::checkWrittenForm); null on an
  /// error (see diagnostics()).
  mlir::OwningOpRef<mlir::ModuleOp> parse();
  /// Everything reported so far.
  const std::string &diagnostics() const { return text; }

private:
  mlir::MLIRContext &ctx;
  llvm::SourceMgr sourceMgr;
  std::string text;
  llvm::raw_string_ostream os{text};
  mlir::SourceMgrDiagnosticHandler handler;
};

} // namespace tilefuse::runtime

#endif
