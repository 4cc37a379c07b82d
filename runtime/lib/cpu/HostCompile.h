//===- HostCompile.h - what the CPU compilers share -------------*- C++ -*-===//
//
// The CPU backend (CpuKernel) and the float64 reference (ReferenceKernel, reference objects)
// both compile DSL text for the host: the same specialization, the same kernel lookup, and the
// same choice of CPU to generate code for.
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_RUNTIME_CPU_HOSTCOMPILE_H
#define TILEFUSE_RUNTIME_CPU_HOSTCOMPILE_H

#include "../DiagnosedSource.h"
#include "tilefuse/runtime/CpuKernel.h"
#include "tilefuse/runtime/HostView.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Target/TargetMachine.h"

#include <array>
#include <memory>
#include <string>

namespace tilefuse::runtime::cpu {

/// Which CPU generated host code targets.
enum class CpuTarget {
  Host,     ///< this machine's CPU with all its features (the JIT's default)
  Baseline, ///< the architecture's baseline (x86-64: SSE2, no AVX, F16C or AVX512-BF16)
};

/// Parses "host" / "baseline" (the spelling of CpuTarget in options and on the command line).
llvm::Expected<CpuTarget> parseCpuTarget(llvm::StringRef name);

/// A target machine for this process's architecture. Position-independent code for objects that
/// go into shared libraries.
llvm::Expected<std::unique_ptr<llvm::TargetMachine>>
createHostTargetMachine(CpuTarget target, bool positionIndependent);

/// An ExecutionEngine for `module` (LLVM dialect) on `target` ("host" or "baseline", the
/// spelling of CpuTarget), optimized at -O2.
llvm::Expected<std::unique_ptr<mlir::ExecutionEngine>> createHostJit(mlir::ModuleOp module,
                                                                     llvm::StringRef target);

/// Runs tile-specialize (storage type, head dimension, parameters) when any is set; errors carry
/// `diagnostics` (the DiagnosedSource's text, read after the pass ran).
llvm::Error specialize(mlir::ModuleOp module, llvm::StringRef elementType, int64_t headDim,
                       llvm::ArrayRef<std::string> params, llvm::StringRef bufferName,
                       const std::string &diagnostics);

/// The module's one kernel: its func.func with a body.
llvm::Expected<mlir::func::FuncOp> findKernel(mlir::ModuleOp module, llvm::StringRef bufferName);

/// What every host compile starts from: a context with the compiler's dialects, the DSL text
/// parsed with its diagnostics captured (`diagnosed` keeps collecting the later passes'),
/// specialized (specialize) and its one kernel (findKernel). Members are destroyed module
/// first, context last; a caller that keeps the context moves it out and lets the rest go.
struct HostSource {
  std::unique_ptr<mlir::MLIRContext> context;
  std::unique_ptr<DiagnosedSource> diagnosed;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::func::FuncOp kernel;

  const std::string &diagnostics() const { return diagnosed->diagnostics(); }
};
llvm::Expected<HostSource> parseHostSource(llvm::StringRef source, llvm::StringRef bufferName,
                                           llvm::StringRef elementType, int64_t headDim,
                                           llvm::ArrayRef<std::string> params);

/// One memref argument as a kernel declares it: static sizes and strides (-1: dynamic).
struct ArgSpec {
  std::string name;
  int rank = 0;
  std::array<int64_t, 4> sizes{-1, -1, -1, -1};
  std::array<int64_t, 4> strides{-1, -1, -1, -1};
  mlir::Type elementType;
};

/// Argument `name` of kernel @`kernel` (`type`, which must be a strided memref of `rank`).
llvm::Expected<ArgSpec> specOf(mlir::Type type, llvm::StringRef name, int rank,
                               llvm::StringRef kernel, llvm::StringRef bufferName);

/// A host view against what the kernel declares for it: rank, sizes and strides.
llvm::Error checkView(const ArgSpec &spec, const HostView &view, llvm::StringRef kernel);

/// The attention's shapes agree: Q, O B x H x M x D, K, V B x Hkv x N x D, LSE B x H x M, H a
/// multiple of Hkv.
llvm::Error checkShapes(const HostView &q, const HostView &k, const HostView &v,
                        const HostView &o, const HostView &lse);

/// The same for a paged K/V cache (PagedKV): K and V are pages x Hkv x page size x D, the table
/// has a row per batch, and every page a sequence's kvLengths rows use is a page of K and V.
llvm::Error checkPagedShapes(const HostView &q, const HostView &k, const HostView &v,
                             const HostView &o, const HostView &lse, const PagedKV &paged);

/// The same for a packed batch (Varlen): the views are B x H x L x D as checkShapes takes them,
/// and each sequence's offsets are non-decreasing, from at least 0, with at most L rows (M for
/// the queries, N for the keys), ending within the packed tensors' rows (totalQ, totalK).
/// `pagedKeys`: K and V are paged caches (checkPagedShapes checks them and the shapes), so only
/// the query offsets are checked and the key offsets may be null.
llvm::Error checkVarlenShapes(const HostView &q, const HostView &k, const HostView &v,
                              const HostView &o, const HostView &lse, const Varlen &varlen,
                              bool pagedKeys = false);

/// The memref descriptor of MLIR's C interface for a ranked memref.
template <int N> struct Descriptor {
  void *allocated;
  void *aligned;
  int64_t offset;
  int64_t sizes[N];
  int64_t strides[N];
};

template <int N> Descriptor<N> describe(const HostView &view) {
  Descriptor<N> d;
  d.allocated = d.aligned = view.data;
  d.offset = 0;
  for (int i = 0; i < N; ++i) {
    d.sizes[i] = view.sizes[i];
    d.strides[i] = view.strides[i];
  }
  return d;
}

/// Block events (tile.block_event, with tile-block-pruning's instrument option): the JIT'd code
/// calls kBlockEventSymbol, which this process defines once; `registerBlockEvents` gives it to
/// `engine`, and a CountBlockEvents object directs the calls on its thread to `counts` (or
/// nowhere) for as long as it lives.
void registerBlockEvents(mlir::ExecutionEngine &engine);
class CountBlockEvents {
public:
  explicit CountBlockEvents(BlockCounts *counts);
  ~CountBlockEvents();
  CountBlockEvents(const CountBlockEvents &) = delete;
  CountBlockEvents &operator=(const CountBlockEvents &) = delete;
};

} // namespace tilefuse::runtime::cpu

#endif
