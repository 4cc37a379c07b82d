//===- Passes.td - tilefuse code generation passes ---------*- tablegen -*-===//
#ifndef TILEFUSE_CODEGEN_PASSES_TD
#define TILEFUSE_CODEGEN_PASSES_TD

include "mlir/Pass/PassBase.td"

def TileToCpuLoops : Pass<"tile-to-cpu-loops", "mlir::ModuleOp"> {
  let summary = "CPU reference lowering: tiled tile IR to scf loops over memref buffers";
  let description = [{
    The program grid (scf.forall) becomes a sequential loop nest; every block value becomes a
    heap buffer (memref.alloc, freed later by MLIR's ownership-based buffer deallocation); block
    loads, stores, dots, reductions, broadcasts and elementwise arith/math on blocks become scalar
    loop nests; score and mask regions are inlined per element. `tile.block_event` becomes a call
    to `tilefuse_block_event(i32)`, which the CPU runner counts. The result is plain
    scf/memref/arith/math IR that upstream passes take to the LLVM dialect.
  }];
  let dependentDialects = ["mlir::scf::SCFDialect", "mlir::memref::MemRefDialect",
                           "mlir::arith::ArithDialect", "mlir::func::FuncDialect"];
}

#endif
