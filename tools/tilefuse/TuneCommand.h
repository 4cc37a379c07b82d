//===- TuneCommand.h - `tilefuse tune` and `tilefuse compile --tuned` -----===//
//
// Kept apart from tilefuse.cpp: the subcommand, its options (category "tilefuse tune options")
// and the two options it adds to `tilefuse compile`.
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_TOOLS_TILEFUSE_TUNECOMMAND_H
#define TILEFUSE_TOOLS_TILEFUSE_TUNECOMMAND_H

#include "tilefuse/runtime/Compiler.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"

namespace tilefuse::tools {

/// `tilefuse tune`.
extern llvm::cl::SubCommand tuneCommand;
int tuneMain();

/// Makes --tuned, --tuned-gpu and --seq options of `compile` (call before parsing).
void addTunedOptionsTo(llvm::cl::SubCommand &compile);
/// With --tuned: sets `options.tiles` to the tuning database's configuration for the kernel,
/// the GPU (the current one, or --tuned-gpu) and --seq's bucket, under the tiles already set
/// (explicit settings win). 0, or an exit code after printing the error (no entry: says how to
/// make one).
/// Whether `compile --tuned` was given.
bool tunedConfigRequested();
int applyTunedConfig(llvm::StringRef text, llvm::StringRef bufferName,
                     runtime::PtxCompileOptions &options);

} // namespace tilefuse::tools

#endif
