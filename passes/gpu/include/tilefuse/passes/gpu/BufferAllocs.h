//===- BufferAllocs.h - which allocations a shared buffer value may be -*- C++ -*-===//
//
// The GPU-level passes that reorder or order accesses to shared memory (tgpu-insert-barriers,
// tgpu-issue-wgmma-early) ask of two buffer values whether their bytes may be the same: a ring's
// stages are one allocation, and a loop or branch that carries a buffer may hand over any of the
// buffers that flow into it. This is that answer, in one place.
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_PASSES_GPU_BUFFERALLOCS_H
#define TILEFUSE_PASSES_GPU_BUFFERALLOCS_H

#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"

namespace tilefuse::tgpu {

/// The tgpu.alloc values whose bytes `buffer` may be: through a ring's stage (tgpu.stage), and
/// through the scf.for loops (their inits and yields) and scf.if branches (their yields) that
/// carry a buffer. Empty when any of them cannot be named (a function's argument, another op's
/// result): the caller must then assume any buffer.
llvm::SmallVector<mlir::Value> allocsOf(mlir::Value buffer);

/// Whether `a` and `b` may be the same bytes (allocsOf's answers meet, or one is unknown).
bool mayAlias(mlir::Value a, mlir::Value b);

} // namespace tilefuse::tgpu

#endif
