//===- ParseKernel.h - DSL text to a module, safely -------------*- C++ -*-===//
//
// Every entry that parses kernel text goes through parseKernel: MLIR's parser with the checks it
// needs before it can be given any text. MLIR 22's parser writes to freed memory while it reports
// a block label defined twice in one region (found by tilefuse-fuzz; docs/fuzzing.md), so that
// text is refused here, with the parser's own message at the second definition, and never
// reaches it.
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_DIALECT_PARSEKERNEL_H
#define TILEFUSE_DIALECT_PARSEKERNEL_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/SourceMgr.h"

namespace tilefuse {

/// Parses the main buffer of `sourceMgr`; null after a located error (emitted on the context).
mlir::OwningOpRef<mlir::ModuleOp> parseKernel(llvm::SourceMgr &sourceMgr,
                                              const mlir::ParserConfig &config);

/// The pre-parse check alone: a located error for each block label defined twice in one region.
mlir::LogicalResult checkBlockLabels(llvm::SourceMgr &sourceMgr, mlir::MLIRContext *ctx);

} // namespace tilefuse

#endif
