//===- Passes.td - GPU-level scheduling passes (tgpu) ------*- tablegen -*-===//
//
// Level 5 of shared/DESIGN.md, one pass per file under passes/gpu/lib. They are registered
// (tilefuse-opt runs them); tile-to-ptx runs them in this order after tile-pipeline, then
// convert-tgpu-to-nvvm (codegen/). The configuration (mma, rows per warp, where Q lives, copy
// issue) is the module's `tile.config` where it sets a field, else the pass's option.
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
    lowering infers it by following uses (as the emitter tile-to-nvvm's `roleOf` did):

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

    The module's `tile.config` (mma, rows_per_warp, q) wins over the options.
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
    buffer; the convention the runtime's compiler reads) and
    `tilefuse.threads = {kernel = threads}` on the module. The thread count is
    32 x the warps of its `tgpu.warp_specialize` partitions, or, without one, 32 x the warps
    of its register layouts, which must all agree.

  }];
  let options = [
    Option<"maxSharedBytes", "max-shared-bytes", "int64_t", "232448",
           "The chip's dynamic shared memory per CTA (opt-in limit): 232448 (227 KiB, sm_90) "
           "by default; 166912 (163 KiB) for sm_80">
  ];
}

def TileToTGPU : Pass<"tile-to-tgpu", "mlir::func::FuncOp"> {
  let summary = "Layout-annotated tiled tile IR to tgpu IR: shared blocks become buffers "
                "filled by cp.async groups, dots become tgpu.wgmma / tgpu.mma";
  let description = [{
    Starts from the output of `tgpu-assign-layouts` and reads every decision from the types
    (the layout encodings), never from a block's uses:

    * a `tile.block_load` of a `#tgpu.shared<S>` block becomes, at the load,
      `tgpu.async_copy %view[%indices] bound %bound into %buf` and
      `nvgpu.device_async_create_group` on its token; the block's value is replaced by the
      buffer `!tgpu.buffer<RxCxT, #tgpu.shared<S>>`, and the `scf.for` iter_args, yields and
      results and the `scf.if` results carrying it take the buffer type;
    * buffers are `tgpu.alloc` ops at the top of the function. A block carried by an `scf.for`
      (tile-pipeline's key prefetch: the init loaded before the loop, the next block loaded in
      the body and yielded) gets a ring `!tgpu.ring<2 x ...>`, each of its loads copying into
      `tgpu.stage %ring[(row0 / R) % 2]` (row0 the load's last index, R the block's rows), so
      consecutive blocks alternate stages. Every other shared load gets one buffer per
      (source view, block type): the value blocks of both branches of the causal kernel share
      one;
    * the copy group's token (`!nvgpu.device.async.token`) is carried next to each carried
      buffer (an extra iter_arg, yield and result), so every reader names the group that
      filled what it reads;
    * before each reader of a buffer (the rhs of a dot, then a shared lhs) goes
      `nvgpu.device_async_wait %group`, without `numGroups`: `tgpu-insert-barriers` decides
      how many groups may stay in flight and which barriers and fences make the copy visible;
    * `tile.block_dot` with a `#tgpu.wgmma_acc` result becomes `tgpu.wgmma` and a
      `tgpu.wgmma_wait ... pending 0` that guards the result and a register lhs (the dot's
      uses take the wait's result); with `#tgpu.mma_acc`, `tgpu.mma`. An f32 lhs (P) is packed
      into `#tgpu.operand_a` fragments of the rhs's element type first
      (`tgpu.pack_operand_a`).

    Everything else (register loads, stores, reductions, broadcasts, masks, score regions,
    arith/math, scf) is left as it is. A block without a layout (tgpu-assign-layouts not run)
    and a shared block used by anything but a dot, an `scf.for` or the `scf.yield` of an
    `scf.for` / `scf.if` are located errors, as is a load into a (view, type) buffer while a
    block loaded into it earlier in the same block still has readers after it (it would be
    overwritten; tile-pipeline never produces this).
  }];
  let dependentDialects = ["tilefuse::tgpu::TGPUDialect", "mlir::nvgpu::NVGPUDialect",
                           "mlir::arith::ArithDialect", "mlir::scf::SCFDialect"];
}

def TGPUPipeline : Pass<"tgpu-pipeline", "mlir::func::FuncOp"> {
  let summary = "Deepens a loop's ring of copies to `stages` stages (software pipelining)";
  let description = [{
    On the output of tile-to-tgpu, before tgpu-insert-barriers: a loop that carries a block
    in a ring stage (the key block tile-pipeline loads one iteration ahead, with its copy
    group's token) gets `stages - 1` blocks in flight instead of one. Before the loop, copies
    of the next `stages - 2` blocks follow the first; in the loop, iteration j reads the oldest
    carried block as before and copies block j + stages - 1 (the loop's copy chain cloned with
    its induction variable advanced); the carried (buffer, token) pairs shift by one per
    iteration; the ring gets `stages` buffers, block b in stage b % stages. The reads and
    their waits do not move; tgpu-insert-barriers then counts the groups in flight for each
    wait. `stages = 2` (the default) leaves the IR as tile-to-tgpu built it.
  }];
  let options = [
    Option<"stages", "stages", "int64_t", "2",
           "Ring stages: copies run stages - 1 blocks ahead of the block read (2 or more)">
  ];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::scf::SCFDialect"];
}

def TGPURowSumOnTensorCores : Pass<"tgpu-row-sum-on-tensor-cores", "mlir::func::FuncOp"> {
  let summary = "Computes the online softmax's row sums on the tensor cores, as 8 more columns "
                "of P·V";
  let description = [{
    row_sum_mma=true in the module's tile.config, or the `force` option. On tile-to-tgpu's
    output: in each key loop (`tile.kv_loop`) whose every P·V (`tgpu.wgmma` of
    `tgpu.pack_operand_a %p` into alpha·O) sits beside l's update alpha·l + `tile.reduce sum
    %p` (same alpha), the product takes `row_sums %ones` and 8 more accumulator columns, which
    the wgmma fills with the rows' sums of P (an m64n8k16 a k-step against a block of ones that
    `tgpu.fill` writes once, before the warp roles split); O's carried type widens through the
    loop's branches, l's update goes, and after the loop `tgpu.split_row_sums` gives the
    epilogue O and l. A loop of another form is left as it is. Runs before tgpu-pipeline and
    tgpu-warp-specialize, so every later pass sees one P·V and one accumulator.
  }];
  let options = [
    Option<"force", "force", "bool", "false",
           "Rewrite even when the module's tile.config does not ask for it (lit tests)">
  ];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::scf::SCFDialect"];
}

def TGPUNarrowKeyTail : Pass<"tgpu-narrow-key-tail", "mlir::func::FuncOp"> {
  let summary = "Runs a partial last key block's softmax on its first N columns";
  let description = [{
    key_tail=N in the module's tile.config, or the `width` option. On tile-to-tgpu's output:
    in each key loop (`tile.kv_loop`), the masked body's softmax (the scores' forward slice up
    to P's tgpu.pack_operand_a) becomes an scf.if on `key0 + N >= bound` (the key block's copy's
    first row and bound): where every key from column N on is past the bound, the mask and
    softmax run on `tgpu.leading_columns` of the scores and P goes to P·V through
    `tgpu.pad_columns` (zero columns); elsewhere they run as before. The GEMMs, copies and
    P·V do not move. A body whose softmax this cannot narrow (an unknown op on the scores'
    blocks, a prefetched key block) is left as it is. Runs before tgpu-pipeline and
    tgpu-warp-specialize.
  }];
  let options = [
    Option<"width", "width", "int64_t", "0",
           "Narrow to this many columns whatever the module's tile.config says (lit tests)">,
    Option<"explain", "explain", "bool", "false",
           "A remark on each masked body left whole, saying why (lit tests)">
  ];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::scf::SCFDialect"];
}

def TGPUPersistent : Pass<"tgpu-persistent", "mlir::func::FuncOp"> {
  let summary = "Persistent programs: a one-dimensional grid whose programs loop over the tiles";
  let description = [{
    FlashAttention-3's persistent kernel with a static tile scheduler (persistent=true in the
    module's tile.config, or the `force` option): the program grid (batch, head, row block)
    becomes `scf.forall` over `gpu.grid_dim x` programs (`#tile.grid<program>`, as many as the
    launcher starts: LaunchAbi.h), each running an `scf.for` (`tgpu.tile_loop`) over the tiles
    of B·H·R in the kernel's row order: ascending, a head's row blocks together (program,
    program + programs, ...); descending, longest first, every (batch, head)'s last row block
    (under a causal mask the longest) before any second-to-last, dealt serpentine; paired, each
    pair's row blocks i and R - 1 - i (together R + 1 key blocks under a causal mask) to one
    program, head by head. Runs before tgpu-warp-specialize, which then carries its rings and
    fill counters through the tile loop.
  }];
  let options = [
    Option<"force", "force", "bool", "false",
           "Loop over tiles even when the module's tile.config does not ask for it (lit tests)">,
    Option<"rowOrder", "row-order", "std::string", "\"\"",
           "The tile order where the module's tile.config sets none: a row_order value "
           "(ascending, descending or paired; lit tests)">
  ];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::scf::SCFDialect",
                           "mlir::gpu::GPUDialect"];
}

def TGPUWarpSpecialize : Pass<"tgpu-warp-specialize", "mlir::func::FuncOp"> {
  let summary = "Splits the CTA into a TMA producer warpgroup and wgmma consumer warpgroups";
  let description = [{
    FlashAttention-3's roles (warp_specialize=true in the module's tile.config, or the
    `force` option): the shared buffers that tile-to-tgpu fills by cp.async from K and V become
    rings of `stages` stages with a `full` and an `empty` mbarrier per stage; the kernel's warps
    become the consumer partition of a tgpu.warp_specialize, waiting on `full` where they waited
    for a copy and arriving on `empty` once the wgmma that read a stage has completed; a
    producer warpgroup after them runs the kernel's control flow down to the copies and issues
    each as a TMA load (tgpu.tensor_map of the K or V argument, tgpu.tma_load) once its stage is
    empty. Both number the fills of each ring with a counter carried through the loops and
    branches holding copies, so they agree on every stage and phase. setmaxnreg moves registers
    from the producer (24) to the consumers (up to 240). Runs on tile-to-tgpu's IR without
    tile-pipeline's prefetch, before tgpu-insert-barriers.
  }];
  let options = [
    Option<"stages", "stages", "int64_t", "2",
           "Stages of each ring (the module's tile.config wins)">,
    Option<"force", "force", "bool", "false",
           "Specialize even when the module's tile.config does not ask for it (lit tests)">
  ];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::scf::SCFDialect",
                           "mlir::gpu::GPUDialect", "mlir::nvgpu::NVGPUDialect"];
}

def TGPUOverlapSoftmax : Pass<"tgpu-overlap-softmax", "mlir::func::FuncOp"> {
  let summary = "Rotates a warp-specialized key loop so the softmax of block j overlaps the "
                "P·V GEMM of block j - 1";
  let description = [{
    FlashAttention-3's intra-warpgroup overlap (softmax_overlap, on by default where
    warp_specialize=true, or the `force` option), on the consumers of tgpu-warp-specialize:
    each key block's body issues Q·Kᵀ, then the P·V GEMM of the block before (the pending
    block, whose packed P and rescale factor the loop carries), waits for Q·Kᵀ alone
    (`pending 1`), runs its softmax while the tensor cores compute P·V, then waits for that and
    releases its V stage. A flag the loop carries marks whether a block is pending: the first
    body with work runs unrotated without a P·V, and after the loop the last pending P·V runs.
    The P·V part of a body is what depends on the loop's output accumulator or on the counter
    of the V ring, plus the broadcasts only it reads. Runs after tgpu-warp-specialize, before
    tgpu-insert-barriers.
  }];
  let options = [
    Option<"force", "force", "bool", "false",
           "Rotate even when the module's tile.config does not ask for it (lit tests)">,
    Option<"holdProductWait", "hold-product-wait", "bool", "false",
           "Mark the pending P·V's wait (tgpu.wait_after_preceding_code) so that ptxas keeps "
           "it below the softmax; off: ptxas hoists it above the exps, and measured faster">
  ];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::scf::SCFDialect"];
}

def TGPUOverlapTiles : Pass<"tgpu-overlap-tiles", "mlir::func::FuncOp"> {
  let summary = "Runs a persistent consumer's last P·V and epilogue of each tile inside the "
                "next tile's first key block";
  let description = [{
    The tile boundary of a persistent, warp-specialized kernel whose key loop
    tgpu-overlap-softmax rotated (overlap_tiles=true, or the `force` option): the first key
    block of each tile is peeled off the key loop, and where the previous tile left a P·V
    pending it issues this tile's first Q·Kᵀ, then that P·V, waits for Q·Kᵀ alone
    (`pending 1`), runs the first softmax beside the P·V, then waits for it and runs the
    previous tile's epilogue (O · 1/l and the stores). The tile loop carries the previous tile's
    pending state, accumulator, row statistics and the coordinates its epilogue stores at;
    after the tile loop the last tile's P·V and epilogue run. The Q ring has two stages under
    overlap_tiles (tgpu-warp-specialize), so the next tile's Q is loaded while this one runs.
    Runs right after tgpu-overlap-softmax.
  }];
  let options = [
    Option<"force", "force", "bool", "false",
           "Overlap even when the module's tile.config does not ask for it (lit tests)">,
    Option<"holdProductWait", "hold-product-wait", "bool", "false",
           "Mark the previous tile's P·V wait to stay below the softmax through ptxas "
           "(as tgpu-overlap-softmax's option)">
  ];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::scf::SCFDialect"];
}

def TGPUPingPong : Pass<"tgpu-pingpong", "mlir::func::FuncOp"> {
  let summary = "Makes a warp-specialized kernel's consumer warpgroups issue their GEMMs in turn";
  let description = [{
    FlashAttention-3's ping-pong (pingpong=true in the module's tile.config, or the `force`
    option): every run of tgpu.wgmma issues in a block with no tgpu.wgmma_wait between them is
    a section; before it a consumer warpgroup syncs on its own named barrier, after it it
    arrives on the next warpgroup's (`tgpu.named_barrier ... warpgroup own|next`, ids 1 to N).
    The last warpgroup arrives once before the first section, and warpgroup 0 syncs once after
    the last, so every barrier sees as many arrivals as syncs. Runs after
    tgpu-overlap-softmax, whose rotated loop keeps each section inside one iteration.
  }];
  let options = [
    Option<"force", "force", "bool", "false",
           "Alternate even when the module's tile.config does not ask for it (lit tests)">
  ];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::scf::SCFDialect",
                           "mlir::gpu::GPUDialect"];
}

def TGPUIssueWgmmaEarly : Pass<"tgpu-issue-wgmma-early", "mlir::func::FuncOp"> {
  let summary = "Issues each warpgroup MMA as early as its operands allow and waits for it as "
                "late as its results allow";
  let description = [{
    On tile-to-tgpu's output, where each `tgpu.wgmma` is waited for at once (`pending 0`) and
    each `tgpu.local_store` sits right before the product that reads it. Within each block
    (never across a region op, a barrier or a terminator): a `tgpu.local_store` moves up to
    just after its operands, past nothing that reads or writes a buffer it may alias; a
    `tgpu.wgmma` moves up, with the `nvgpu.device_async_wait`s right before it, to just after
    the last op it depends on (an operand's definition, a write of a buffer it reads), the
    products issued in the order of those points (the kernel's among equals); a
    `tgpu.wgmma_wait` moves down to just before the first op that uses its results, writes a
    buffer its wgmmas read, or issues another wgmma (the accumulators in flight cost
    registers). Each wait's `pending` becomes the wgmma groups issued between the newest one
    it completes and it. In a backward kernel: dP = dO V^T is issued beside S = Q K^T, and
    dV += P^T dO as soon as P is staged, in flight while dS is computed. Runs before
    tgpu-insert-barriers, which places the barriers and proxy fences of the new order.
  }];
}

def TGPUInsertBarriers : Pass<"tgpu-insert-barriers", "mlir::func::FuncOp"> {
  let summary = "Completes the cp.async waits (numGroups) and inserts the barriers and proxy "
                "fences the shared buffers need";
  let description = [{
    The copy schedule of tile-to-nvvm's emitter (its pendingTiles / dirtyBuffers state
    machine), made explicit on tgpu IR. Each block is walked in program order with the copy
    groups in flight (oldest first) and the buffers (`tgpu.alloc` values; a ring counts as
    one) read since the last barrier:

    * a `tgpu.async_copy` into a buffer with readers since the last barrier would overwrite
      what some warp may still read: a `gpu.barrier` goes before it (`copy-issue=eager`);
    * `nvgpu.device_async_wait %g`: if %g is no longer in flight, the wait is erased (an
      earlier wait completed it); else its `numGroups` is set to the groups issued after %g,
      which stay in flight, and it is followed by `nvvm.fence.proxy` (kind async.shared,
      space cta) when it guards a `tgpu.wgmma` (the tensor cores read through the async
      proxy what cp.async wrote through the generic one) and by a `gpu.barrier` (the copy
      of each thread becomes visible to all). Every read before it is done then;
    * after a `tgpu.wgmma_wait` (for the wgmma chains it completes) and after a `tgpu.mma`,
      the buffers the chain read have readers;
    * `scf.for`: at the top of the body each carried token replaces its init in the list (it
      is the newest group); after the loop the loop's token result stands where the init
      stood. `scf.if`, `scf.while`: every region starts from the groups in flight before
      the op (and, in a while loop, with every buffer read: each region also runs after the
      other). After any of them, and at the top of a loop body, every buffer may have
      readers; a token an `scf.if` yields is in flight after it;
    * before a block's terminator, each group issued in the block and not yielded gets a
      wait (with barrier, and the fence when the kernel has wgmma readers), and the carried
      group of a loop body (its token argument: normally waited for already, but a skipped
      key block leaves it in flight while the next iteration refills its stage) a wait
      without barrier.

    With `copy-issue=at-barrier`, a copy into a buffer with readers is not preceded by a
    barrier of its own: it moves to right after the next barrier this pass inserts in the same
    block (copies that are not yielded first, so that waiting for them leaves the carried one
    in flight). If the block reaches a region op or its terminator first, a barrier is
    inserted there and the copies follow it. (tile-to-nvvm cloned such copies into both
    branches of an `scf.if`, to issue them at each branch's first barrier; this pass does not
    move copies into regions.) The module's `tile.config` (copy_issue) wins over the option.
  }];
  let options = [
    Option<"copyIssue", "copy-issue", "std::string", "\"eager\"",
           "Where a copy into a buffer that warps may still read is issued: `eager` (at its "
           "place, after a barrier of its own) or `at-barrier` (after the next barrier)">
  ];
  let dependentDialects = ["mlir::gpu::GPUDialect", "mlir::NVVM::NVVMDialect"];
}

def TGPUStoreOutputByTma : Pass<"tgpu-store-output-by-tma", "mlir::func::FuncOp"> {
  let summary = "Stores a warp-specialized kernel's O through shared memory by TMA";
  let description = [{
    FlashAttention-3's epilogue (o_tma=true in the module's tile.config, or the `force`
    option): the consumers' `tile.block_store` of O becomes, per consumer warpgroup, a named
    barrier of its own, a `tgpu.local_store` of its rows into a `canonical_128b` buffer, a proxy
    fence, the barrier again, and one thread's `tgpu.tma_store` of the warpgroup's 64 rows
    through the launch ABI's o_map (a `tgpu.tensor_map` of the O argument). In a loop (the
    persistent tile loop) the issuing thread first waits until its previous store has read the
    buffer (`nvvm.cp.async.bulk.wait_group 0 {read}`); at the end of the consumers' partition it
    waits for its stores. Needs a padded batch's kernel whose producer loads Q with TMA (O's map
    follows Q's); split, paged and varlen kernels are refused. Runs after tgpu-insert-barriers,
    whose walk never sees the buffer.
  }];
  let options = [
    Option<"force", "force", "bool", "false",
           "Rewrite even when the module's tile.config does not ask for it (lit tests)">
  ];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::scf::SCFDialect",
                           "mlir::gpu::GPUDialect", "mlir::nvgpu::NVGPUDialect",
                           "mlir::NVVM::NVVMDialect"];
}

#endif
