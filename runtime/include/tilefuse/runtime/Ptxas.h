//===- Ptxas.h - PTX to cubin through the CUDA toolkit's ptxas --*- C++ -*-===//
//
// Ahead-of-time compilation only (tilefuse compile --emit cubin|header): the runtime itself loads
// PTX through the driver's JIT and needs no toolkit.
//
// Where ptxas is looked for, in order:
//   1. TILEFUSE_PTXAS (or the CLI's --ptxas): that file, which must be executable;
//   2. $CUDA_HOME/bin, else $CUDA_PATH/bin: the first of the two that is set is the toolkit the
//      user chose, so it must have bin/ptxas (no other toolkit is used silently instead);
//   3. the directories of PATH;
//   4. /usr/local/cuda/bin, the toolkit's default install location.
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_RUNTIME_PTXAS_H
#define TILEFUSE_RUNTIME_PTXAS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace tilefuse::runtime {

/// The inputs of the search, so tests can give their own environment.
struct PtxasSearch {
  std::string explicitPath; ///< TILEFUSE_PTXAS or --ptxas
  std::string cudaHome;     ///< CUDA_HOME
  std::string cudaPath;     ///< CUDA_PATH
  std::string path;         ///< PATH
  std::vector<std::string> fallbackDirectories{"/usr/local/cuda/bin"};

  static PtxasSearch fromEnvironment();
};

/// The ptxas to run, or an error naming every place looked in and what to set.
llvm::Expected<std::string> findPtxas(const PtxasSearch &search = PtxasSearch::fromEnvironment());

/// `ptxas --version`'s last line (e.g. "Build cuda_13.0.r13.0/compiler.36424714_0"), or "".
std::string ptxasVersion(llvm::StringRef ptxas);

/// Assembles `ptx` for `chip` (-arch=<chip>) with `ptxas`; the cubin's bytes, or an error with
/// ptxas's messages. `log`, when given, gets what ptxas printed (e.g. for -v).
llvm::Expected<std::string> assembleCubin(llvm::StringRef ptxas, llvm::StringRef ptx,
                                          llvm::StringRef chip,
                                          llvm::ArrayRef<std::string> extraOptions = {},
                                          std::string *log = nullptr);

} // namespace tilefuse::runtime

#endif
