//===- Passes.td - GPU-level scheduling passes (tgpu) ------*- tablegen -*-===//
//
// Level 5 of shared/DESIGN.md, one pass per file under passes/gpu/lib. They are registered
// (tilefuse-opt runs them) but no pipeline runs them yet: tile-to-ptx still lowers tiled tile IR
// with tile-to-nvvm, which decides layouts and shared offsets itself (issue 9 replaces it).
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_PASSES_GPU_TD
#define TILEFUSE_PASSES_GPU_TD

include "mlir/Pass/PassBase.td"

def TGPUAssignLayouts : Pass<"tgpu-assign-layouts", "mlir::func::FuncOp"> {
  let summary = "Gives every block tensor of tiled tile IR its tgpu layout encoding";
  let description = [{
    On tiled `tile` IR (the output of `--tile-front-end --tile-pipeline`), writes where each
    block lives into its type, decided from the roles the IR gives it, once, so that no later
    lowering infers it by following uses (tile-to-nvvm's `roleOf` does today):

    * `tile.block_dot` result and accumulator, `tile.reduce` operand, `tile.broadcast`
      result: the accumulator, `#tgpu.mma_acc<warps = Br / rows-per-warp, rows_per_warp>`
      (`mma=sync`) or `#tgpu.wgmma_acc<warpgroups = Br / 64>` (`mma=wgmma`);
    * `tile.reduce` result, `tile.broadcast` operand (the running max and sum, the
      reductions): `#tgpu.acc_rows<accumulator>`;
    * a 16-bit `tile.block_dot` lhs (Q): `#tgpu.operand_a` fragments in registers, or a shared
      tile with `q-operand=shared`; an f32 lhs (P) stays in the accumulator layout, which the
      dot turns into A fragments in place;
    * the `tile.block_dot` rhs (K, V): a shared tile, `#tgpu.shared<chunk_xor>` for mma.sync
      (ldmatrix) or `#tgpu.shared<canonical_128b>` for wgmma (descriptors).

    Every other op with blocks must work element by element (arith, math, `tile.block_mask`,
    `tile.block_score_mod`) and gives its blocks one layout; `scf.for`, `scf.if` and
    `scf.while` give a carried block, its init, yields and result one layout. A block whose
    class of values gets two different layouts, or none, or a layout the dialect's verifier
    rejects for its shape (e.g. a shared tile whose rows are not a multiple of 128 bytes), is
    a located error, as is a shared tile that an element-wise op would compute on.

    Not used by the GPU lowering yet: tile-to-ptx still runs tile-to-nvvm on unannotated IR.
  }];
  let options = [
    Option<"mma", "mma", "std::string", "\"sync\"",
           "Matrix instruction the layouts are for: `sync` (mma.sync m16n8k16, sm_80+) or "
           "`wgmma` (wgmma.mma_async m64nNk16, sm_90a; Br a multiple of 64)">,
    Option<"rowsPerWarp", "rows-per-warp", "int64_t", "16",
           "Rows of the program each warp owns with mma=sync: 16 or 32 (wgmma: 16)">,
    Option<"qOperand", "q-operand", "std::string", "\"registers\"",
           "Where a 16-bit dot lhs (Q) lives: `registers` (A fragments) or `shared`">
  ];
  let dependentDialects = ["tilefuse::tgpu::TGPUDialect"];
}

def TGPUAllocateSharedMemory : Pass<"tgpu-allocate-shared-memory", "mlir::ModuleOp"> {
  let summary = "Places each tgpu.alloc in the kernel's dynamic shared memory; records the "
                "CTA's shared bytes and threads on the module";
  let description = [{
    Every function with a body is a kernel. Each `tgpu.alloc` (a buffer, or a ring of
    `stages` buffers) gets its byte `offset` from the start of the kernel's dynamic shared
    memory, a multiple of its alignment (`BufferType::getAlignment`: 1024 bytes for
    `canonical_128b`, 16 otherwise).

    Buffers share bytes when their lifetimes do not overlap. A buffer lives from its
    `tgpu.alloc` to its last use, its `tgpu.stage` selections' uses included; a use inside a
    region (a loop body) keeps it alive over the whole op that holds the region, and a buffer
    allocated inside a `tgpu.warp_specialize` partition lives over the whole op (partitions run
    concurrently). Buffers are placed largest first, each at the lowest aligned offset that no
    placed buffer with an overlapping lifetime occupies (first fit). Program order is all this
    pass knows: bytes reused by a later buffer while some warps still read the earlier one
    must be ordered by a barrier, which the barrier-insertion pass is to add (it must compare
    byte ranges, not buffer values, as Triton's Membar does).

    A buffer that leaves the allocator's sight (passed to a block or region argument, a
    call, or returned) is an error at the use, as is a kernel over `max-shared-bytes`.

    Records, per kernel, `tilefuse.shared_bytes = {kernel = bytes}` (the end of its last
    buffer; the convention tile-to-nvvm writes and the runtime's compiler reads) and
    `tilefuse.threads = {kernel = threads}` on the module. The thread count is
    32 x the warps of its `tgpu.warp_specialize` partitions, or, without one, 32 x the warps
    of its register layouts, which must all agree.

    Not used by the GPU lowering yet (tile-to-nvvm places its own buffers).
  }];
  let options = [
    Option<"maxSharedBytes", "max-shared-bytes", "int64_t", "232448",
           "The chip's dynamic shared memory per CTA (opt-in limit): 232448 (227 KiB, sm_90) "
           "by default; 166912 (163 KiB) for sm_80">
  ];
}

#endif
