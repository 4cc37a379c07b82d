//===- Registry.h - the attention variants shipped in kernels/ --*- C++ -*-===//
#ifndef TILEFUSE_KERNELS_REGISTRY_H
#define TILEFUSE_KERNELS_REGISTRY_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

namespace tilefuse::kernels {

struct KernelSource {
  const char *name;     ///< registry name, also the func.func symbol in the text
  const char *fileName; ///< kernels/<name>.mlir, used in diagnostics
  const char *text;     ///< the DSL text
};

/// Every kernel of kernels/, in a fixed order.
llvm::ArrayRef<KernelSource> all();
/// The kernel called `name`, or null.
const KernelSource *find(llvm::StringRef name);

} // namespace tilefuse::kernels

#endif
