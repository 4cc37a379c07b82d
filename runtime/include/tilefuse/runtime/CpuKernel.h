//===- CpuKernel.h - attention kernels on the CPU reference backend -*- C++ -*-===//
//
// Compiles a tile DSL kernel through the `tile-to-cpu` pipeline and runs it in process with MLIR's
// ExecutionEngine. It is the reference backend: every variant runs on any machine, bit for bit the
// same algorithm (tiling, online softmax, block pruning) the GPU path runs.
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_RUNTIME_CPUKERNEL_H
#define TILEFUSE_RUNTIME_CPUKERNEL_H

#include "tilefuse/runtime/HostView.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <string>
#include <vector>

namespace tilefuse::runtime {

struct CpuCompileOptions {
  int64_t blockM = 64; ///< Br
  int64_t blockN = 64; ///< Bc
  /// Count visited blocks (full / partial) through tile.block_event.
  bool instrument = false;
  /// Specialization (tile-specialize): storage type bf16 / f16 / f32 (empty: as written), head
  /// dimension (0: as written) and variant parameters, "NAME=VALUE".
  std::string elementType;
  int64_t headDim = 0;
  std::vector<std::string> params;
  /// The CPU the JIT generates code for: "host" (this machine's, with every feature it has) or
  /// "baseline" (the architecture's baseline, e.g. x86-64 with SSE2 only). Results are the same;
  /// tests use "baseline" so no CPU feature of the test machine can hide a dependence on it.
  std::string cpuTarget = "host";
  /// Split-KV (tile-split-kv): every row block's keys are shared out over `kvSplits` programs
  /// (CpuKernel::run's argument) whose partial results are merged.
  bool splitKv = false;
  /// GQA packing (TileConfig pack_gqa): a program's rows are the packed rows of the query heads
  /// that share a key/value head.
  bool packGqa = false;
  /// Paged KV (tile-paged-kv): K and V are paged caches, addressed through CpuKernel::run's
  /// PagedKV.
  bool pagedKv = false;
  /// With pagedKv: rows per page, fixed at compile time (0: any).
  int64_t pageSize = 0;
  /// Varlen (tile-varlen): the views are packed batches of variable-length sequences,
  /// addressed through CpuKernel::run's Varlen; with pagedKv only the queries pack (the keys
  /// are the paged caches). With splitKv and packGqa too.
  bool varlen = false;
  /// The grid's row blocks last first (TileConfig row_order=descending, tile-order-row-blocks).
  bool descendingRows = false;
  /// The row blocks aligned to the rows' end (TileConfig row_align=end, tile-tiling).
  bool alignRowsToEnd = false;
  /// Its (batch, head) pairs in L2-sized groups, each level by level (row_order=grouped).
  bool groupedRows = false;
  /// The K and V bytes of one such group (tile-order-row-blocks' group-bytes; tests make it
  /// small to get several groups and a short last one). 0: the pass's default.
  int64_t rowGroupBytes = 0;
};

/// Key/value blocks that ran, by class (only with CpuCompileOptions::instrument).
struct BlockCounts {
  int64_t full = 0;
  int64_t partial = 0;
  int64_t visited() const { return full + partial; }
};

class CpuKernel {
public:
  /// Parses `source` (diagnostics name it `bufferName`, e.g. kernels/causal.mlir), runs the
  /// pipeline and JIT-compiles the result. Errors carry the diagnostics with file:line:col.
  static llvm::Expected<std::unique_ptr<CpuKernel>>
  compile(llvm::StringRef source, llvm::StringRef bufferName, const CpuCompileOptions &options);
  ~CpuKernel();

  /// Runs attention on host views: Q, O are B x H x M x D; K, V are B x Hkv x N x D; lse is
  /// B x H x M f32. Shapes and strides are checked against each other and the kernel's types.
  /// `kvSplits`: the key splits per row block of a split-KV kernel (CpuCompileOptions::splitKv;
  /// its workspace is allocated here); 1 for any other kernel. `paged`: a paged kernel's page
  /// table and lengths (CpuCompileOptions::pagedKv; K and V are then pages x Hkv x page size x
  /// D caches, and every table entry a sequence uses is checked against them); null for any
  /// other kernel. `varlen`: a varlen kernel's sequence offsets (CpuCompileOptions::varlen; the
  /// views are then packed batches, Varlen::tokens and Varlen::lse, and the offsets are checked
  /// against them); null for any other kernel.
  llvm::Error run(const HostView &q, const HostView &k, const HostView &v, const HostView &o,
                  const HostView &lse, BlockCounts *counts = nullptr, int64_t kvSplits = 1,
                  const PagedKV *paged = nullptr, const Varlen *varlen = nullptr) const;

  llvm::StringRef name() const;
  ElementType elementType() const;
  /// The static head dimension the kernel was written for.
  int64_t headDim() const;

private:
  struct Impl;
  explicit CpuKernel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

} // namespace tilefuse::runtime

#endif
