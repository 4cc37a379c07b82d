//===- Registry.cpp - the attention variants shipped in kernels/ ----------===//
#include "tilefuse/kernels/Registry.h"

#include "llvm/ADT/STLExtras.h"

namespace tilefuse::kernels {
namespace detail {
extern const KernelSource kSources[];
extern const size_t kNumSources;
} // namespace detail

llvm::ArrayRef<KernelSource> all() { return {detail::kSources, detail::kNumSources}; }

const KernelSource *find(llvm::StringRef name) {
  for (const KernelSource &k : all())
    if (name == k.name)
      return &k;
  return nullptr;
}

} // namespace tilefuse::kernels
