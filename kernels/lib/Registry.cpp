//===- Registry.cpp - the attention variants shipped in kernels/ ----------===//
#include "tilefuse/kernels/Registry.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

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

std::string withElementType(llvm::StringRef text, llvm::StringRef elementType) {
  // The kernels declare their storage type once, as the alias `!elt`; every view and tensor type
  // refers to it, so retyping the kernel is retyping that one line.
  llvm::SmallVector<llvm::StringRef> lines;
  text.split(lines, '\n');
  std::string out;
  bool found = false;
  for (llvm::StringRef line : lines) {
    if (line.trim().starts_with("!elt =")) {
      out += "!elt = " + elementType.str() + "\n";
      found = true;
    } else {
      out += line.str() + "\n";
    }
  }
  return found ? out : std::string();
}

} // namespace tilefuse::kernels
