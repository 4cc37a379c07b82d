//===- Passes.td - tilefuse passes over the tile dialect ---*- tablegen -*-===//
//
// One pass per file under passes/lib; the order is named in passes/lib/Pipelines.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_PASSES_TD
#define TILEFUSE_PASSES_TD

include "mlir/Pass/PassBase.td"

def TileCheckWrittenForm : Pass<"tile-check-written-form", "mlir::ModuleOp"> {
  let summary = "Rejects written-form IR that verifies but that a pass or a folder cannot take";
  let description = [{
    The front door of every entry (the runtime parses with it, the pipelines start with it):
    checks what the op verifiers accept but later passes, upstream folders and canonicalization
    patterns assume, and reports each problem at its file:line:col, so that no input crashes the
    compiler. Today: a constant dimension index of `memref.dim` / `tensor.dim` must name a
    dimension of its operand (0 <= index < rank).
  }];
}

def TileSpecialize : Pass<"tile-specialize", "mlir::ModuleOp"> {
  let summary = "Specializes written-form kernels to a head dimension and a storage type";
  let description = [{
    Rewrites every type of the module: the storage element type of the views and loaded tensors
    (bf16 / f16 / f32) becomes `element-type`, and the static last dimension of every rank-4 view
    and tensor that equals the kernel's head dimension (Q's last dimension) becomes `head-dim`.
    Kernels keep their sequence lengths dynamic, so the head dimension is the only static last
    dimension they have. Variant parameters are the constants a kernel marks with a `tile.param`
    name (a window size, a soft cap); `params` sets them. Unset options keep what the kernel says.

    `config` (the kernel configuration's text, tilefuse/dialect/TileConfig.h) is written on the
    module as `tile.config = #tile.config<"...">` in its canonical form; the passes with a
    setting of it (tile-tiling, tgpu-assign-layouts, tgpu-insert-barriers) read it from there and it wins over their options
    (tilefuse/dialect/KernelConfig.h). A text that does not parse, or whose fields do not fit
    together, is an error at the module. The chip is not known here: convert-tgpu-to-nvvm checks it.
  }];
  let options = [
    Option<"headDim", "head-dim", "int64_t", "0", "New head dimension (0: keep)">,
    Option<"elementType", "element-type", "std::string", "\"\"",
           "New storage type: bf16, f16 or f32 (empty: keep)">,
    ListOption<"params", "params", "std::string",
               "Variant parameters, NAME=VALUE: the arith.constant marked {tile.param = NAME} "
               "takes VALUE (an integer or a float, as its type)">,
    Option<"config", "config", "std::string", "\"\"",
           "The kernel configuration, TileConfig's text (Br=64,Bc=128,rows_per_warp=16,"
           "mma=wgmma,q=registers,copy_issue=eager; fields may be left out): written on the "
           "module as tile.config, replacing any (empty: keep)">
  ];
}

def TilePagedKV : Pass<"tile-paged-kv", "mlir::func::FuncOp"> {
  let summary = "Makes a kernel read its keys and values from a paged cache";
  let description = [{
    Any variant, written for contiguous K and V, becomes its paged-KV form: the function gets
    two trailing arguments, the page table (B x pages per sequence, i32) and the key/value rows
    of each batch (B, i32), and every tile.load of a view that a tile.dot takes as its right
    operand (K in Q·Kᵀ, V in P·V) reads through them (tile.load `pages ... lengths ...`). K
    and V become caches of pages, P x Hkv x S x D (S rows a page, any S >= 1; vLLM's
    [pages, S, Hkv, D] layout is this with strides). Score and mask regions see the same
    logical key indices, so masks, pruning and split-KV work per sequence unchanged. A K or V
    view used by anything but its load (a memref.dim, whose meaning would change) is an error
    at that use. Runs on the written form, before tile-tiling; marks the function
    tile.paged_kv. With `page-size` the caches' page size is fixed (their types' third
    dimension): the lowerings then divide by a constant (a shift for powers of two). Without
    it (0: any) the page size is a launch parameter; the lowerings compute its round-up
    reciprocal once per kernel (tile::pageDivisor) and divide each row copied by a
    multiply-high, an add and a shift, not by a run-time division.
  }];
  let options = [
    Option<"pageSize", "page-size", "int64_t", "0",
           "Rows per page, fixed in the caches' types (0: any, given at launch)">
  ];
  let dependentDialects = ["mlir::memref::MemRefDialect"];
}

def TileVarlen : Pass<"tile-varlen", "mlir::func::FuncOp"> {
  let summary = "Makes a kernel run on a packed batch of variable-length sequences";
  let description = [{
    Any variant, written for a B x H x M x D batch, becomes its varlen form (FlashAttention's
    varlen API, the THD layout): the function gets two trailing arguments, the queries' and the
    keys' cumulative sequence offsets (cu_seqlens_q and cu_seqlens_k, B + 1 i32 each), and
    every tile.load and tile.store of a view reads or writes it as a packed batch
    (`sequences`): Q, O and LSE through the query offsets, K and V (what a tile.dot takes as
    its right operand) through the key offsets. A packed view's batch index counts rows (its
    batch stride is its row stride): row i of sequence b is element (cu[b], h, i), and the
    views' M and N bound the sequences' lengths. Score and mask regions see indices within
    each sequence, so masks and pruning work per sequence unchanged. A memref.dim of a view's
    batch or row dimension (whose meaning would change: packed rows, the longest sequence's
    length) is an error at that use. Over a paged cache (tile-paged-kv ran first: chunked
    prefill) only the queries pack; the key loads stay paged (each sequence's keys are its
    kv_lengths rows) and the key offsets are not read. Runs on the written form, before
    tile-tiling; marks the function tile.varlen.
  }];
  let dependentDialects = ["mlir::memref::MemRefDialect"];
}

def TileTiling : Pass<"tile-tiling", "mlir::func::FuncOp"> {
  let summary = "Rewrites written-form attention into a grid of programs over Br x Bc blocks";
  let description = [{
    Matches load -> dot(Q, K^T) -> [scale] -> [score_mod] -> [mask] -> softmax -> dot(P, V) ->
    store and produces one program per (batch, head, Br-row block of Q) inside an `scf.forall`.
    The softmax over the key dimension becomes the exact three-sweep tiled form (row max, row
    sum, normalized P x V), each sweep a loop over Bc-column blocks of K and V; the online-softmax
    pass later fuses the sweeps. Row and column blocks at the end of the sequences are masked
    (loads past the bound read zero, the key bound joins the mask region), so any M and N work.
    With GQA packing a program is instead a Br-row block of the G·M packed rows of the G query
    heads that share one key/value head (grid (batch, kv head, ceil(G·M / Br))), so each key
    block is read once per group. With row_align=end (TileConfig) the row blocks end at the
    rows' end: the first starts at row 0 and stores only the rows the second does not, so the
    partial block is the one a causal mask gives the fewest keys.
  }];
  let options = [
    Option<"blockM", "block-m", "int64_t", "64",
           "Br: rows of Q per program, where the module's tile.config sets no Br">,
    Option<"blockN", "block-n", "int64_t", "64",
           "Bc: columns of K/V per loop iteration, where the module's tile.config sets no Bc">,
    Option<"packGqa", "pack-gqa", "bool", "false",
           "Pack the query heads of a key/value head into one program's rows, where the "
           "module's tile.config sets no pack_gqa">,
    Option<"alignRowsToEnd", "row-align-end", "bool", "false",
           "Align the row blocks to the rows' end (the partial one first, clipped at row 0), "
           "where the module's tile.config sets no row_align">
  ];
  let dependentDialects = ["mlir::scf::SCFDialect", "mlir::arith::ArithDialect",
                           "mlir::math::MathDialect", "mlir::tensor::TensorDialect",
                           "mlir::memref::MemRefDialect"];
}

def TileOnlineSoftmax : Pass<"tile-online-softmax", "mlir::func::FuncOp"> {
  let summary = "Fuses the three softmax sweeps into one loop with a running max and sum";
  let description = [{
    Recognizes the max / sum / P x V sweeps emitted by tile-tiling over the same key/value range
    and rewrites them into one loop carrying the running row max m and row sum l in f32 (FA2's
    recurrence): scores are kept in base-2 units, with log2(e) folded into the softmax scale when
    nothing but masks sits between them, p = exp2(s - m), the accumulator is rescaled by
    exp2(m_old - m_new), and it is normalized by 1/l once after the loop. Fully masked rows keep
    m = -inf and l = 0 and produce a zero output and a logsumexp of -inf, never NaN.
  }];
  let dependentDialects = ["mlir::scf::SCFDialect", "mlir::arith::ArithDialect",
                           "mlir::math::MathDialect"];
}

def TileUnscaledRowMax : Pass<"tile-unscaled-row-max", "mlir::func::FuncOp"> {
  let summary = "Takes the online softmax's row max over unscaled scores (one FMA per score)";
  let description = [{
    For a positive constant softmax scale c, max(c s) = c max(s) and masking commutes with the
    scale, so the row max is taken over the unscaled (masked) scores and scaled once per row,
    and the exponent's argument s * c - m becomes one fused multiply-add per score instead of a
    multiply feeding both the max and a subtraction. Only a multiply by a positive constant
    directly before the max (through masks) moves; score modifiers before it stay.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect"];
}

def TileBlockPruning : Pass<"tile-block-pruning", "mlir::func::FuncOp"> {
  let summary = "Classifies key/value blocks as empty, full or partial from the mask region";
  let description = [{
    Evaluates each block_mask region over index intervals (the block's rows and columns) and emits
    that interval evaluation as IR. Key/value loops then start at the first and stop after the last
    block that may hold a kept score, skip empty blocks inside the range, and run full blocks
    through a copy of the body without any mask arithmetic; only partial blocks apply the mask.
    Ops the interval evaluator does not model make a block partial, never wrongly empty or full.
    A mask that a score modifier follows (block_score_mod, block_score_mod_grad) cannot empty a
    block, since f(-inf) may be finite; it still drops out of full blocks. A backward kernel's loops over query blocks (`tile.query_loop`) are pruned the same way:
    there the row interval follows the loop and the column interval is the program's.
  }];
  let options = [
    Option<"instrument", "instrument", "bool", "false",
           "Count visited full and partial blocks with tile.block_event (for tests)">
  ];
  let dependentDialects = ["mlir::scf::SCFDialect", "mlir::arith::ArithDialect"];
}

def TileSplitKV : Pass<"tile-split-kv", "mlir::func::FuncOp"> {
  let summary = "Splits each row block's key range across S programs and merges them exactly";
  let description = [{
    Split-KV (FlashDecoding), for grids too small to fill the GPU (decode: few query rows, long
    key/value sequences). The (batch, head, row block) grid gets a fourth dimension, the split s
    of S (a new trailing kernel argument); program s walks its equal share of the key blocks
    block pruning left, and stores its normalized partial O (f32) and LSE into workspace row
    s·B + b of two new arguments, O_part [S·B, H, M, D] and LSE_part [S·B, H, M]. It then arrives
    at its row block's counter (tile.split_arrive on a third argument, [B, H, ceil(M/Br)] i32,
    zero before the launch); the last to arrive merges the S partials (LSE = log Σ exp LSE_s,
    O = Σ exp(LSE_s - LSE) O_s) into O and LSE. Empty shares weigh nothing, so any S >= 1 gives
    the unsplit result up to rounding. Runs after tile-block-pruning, before tile-pipeline.
  }];
  let dependentDialects = ["mlir::scf::SCFDialect", "mlir::arith::ArithDialect",
                           "mlir::math::MathDialect", "mlir::memref::MemRefDialect"];
}

def TileOrderRowBlocks : Pass<"tile-order-row-blocks", "mlir::func::FuncOp"> {
  let summary = "Runs the forward grid's row blocks in descending order (row_order=descending|grouped)";
  let description = [{
    Where the module's tile.config says row_order=descending (or `force`), every forward grid
    (`scf.forall` mapped to #tile.grid<batch, head, row_block[, split]>) and the backward's
    query_gradients grid take row block R - 1 - x in the program whose row-block index is x:
    each use of the induction variable reads the reversed index instead. The backward's
    key_gradients grid (causal: longest first already) and preprocessing keep their order. The GPU starts CTAs in index order, so
    each head's last row blocks (under a causal mask the ones with the most key blocks) start
    first and the short ones fill the launch's tail. A row block past a varlen sequence's end
    stays empty whatever its program. Runs after tile-block-pruning and tile-split-kv (their
    ranges are the row block's, so they follow it).

    With row_order=grouped a forward one-tile-per-CTA grid (not split) is permuted further:
    its (batch, head) pairs are cut into groups whose K and V fit in `group-bytes`, and the
    launch runs each group's pairs level by level from their last row block down (under a
    causal mask the row blocks of one level cost the same in every pair), so the CTAs in
    flight share one group's K and V in L2 (FlashAttention-3's single-tile longest-first
    scheduler). The backward's dQ grid and split grids are only reversed.
  }];
  let options = [
    Option<"force", "force", "bool", "false",
           "Reverse even when the module's tile.config does not ask for it (lit tests)">,
    Option<"forceGrouped", "grouped", "bool", "false",
           "Group the (batch, head) pairs (row_order=grouped) even when the module's "
           "tile.config does not ask for it">,
    // Half the H100's and H200's 50 MiB L2: room for the Q and O traffic, and for the next
    // group's K and V where two groups overlap in flight.
    Option<"groupBytes", "group-bytes", "int64_t", "25 << 20",
           "The K and V bytes of one group of (batch, head) pairs (row_order=grouped)">
  ];
  let dependentDialects = ["mlir::arith::ArithDialect"];
}

def TileTilingBackward : Pass<"tile-tiling-backward", "mlir::func::FuncOp"> {
  let summary = "Tiles a backward written form into FlashAttention-2's backward schedule";
  let description = [{
    Rewrites a function holding a backward written form (the @k_backward that
    tile-derive-backward adds: tile.softmax_from_lse, tile.map, tile.row_reduce, tile.dot with
    transpose_lhs, tile.sum_head_groups) into three grids of block programs (`scf.forall`,
    marked `tile.backward_phase`):
      1. `preprocess` over (batch, head, Br-row block): each per-row reduction (D = rowsum(dO o
         O)) once per row into a B x H x M f32 workspace; the dQ accumulator zeroed (atomic
         mode);
      2. `key_gradients` over (batch, key/value head, Bc-key block): K and V blocks loaded once,
         a loop over the query heads of the group (GQA summed in the accumulators) and over
         query blocks (`tile.query_loop`, pruned by tile-block-pruning with the mask intervals
         the other way round) recomputing the scores through the forward's chain, P from the
         logsumexp, dP = dO V^T, dS; dV += P^T dO and dK += dS^T Q (`block_dot transpose_lhs`);
         without `deterministic`, dQ += dS K by `tile.block_atomic_add` into the f32 accumulator;
      3. `query_gradients` over (batch, head, Br-row block): the accumulator converted to dQ, or
         with `deterministic` a loop over key blocks (`tile.kv_loop`) recomputing dS and
         accumulating dQ += dS K in key-block order in the program that owns the rows, so dQ is
         bitwise the same whatever order programs run in.
    Workspaces are function-level `memref.alloc`s marked `tile.workspace`. The sequence bounds
    (q_idx < M, kv_idx < N) join the last mask before softmax_from_lse, so any M and N work. The
    block sizes come from the module's tile.config where it sets them. Anything the schedule
    does not model is an error at its op.
  }];
  let options = [
    Option<"blockM", "block-m", "int64_t", "64",
           "Br: rows of Q per block, where the module's tile.config sets no Br">,
    Option<"blockN", "block-n", "int64_t", "64",
           "Bc: keys per block, where the module's tile.config sets no Bc">,
    Option<"deterministic", "deterministic", "bool", "false",
           "dQ by an ordered loop over key blocks (bitwise reproducible) instead of atomic "
           "adds into an f32 accumulator">
  ];
  let dependentDialects = ["mlir::scf::SCFDialect", "mlir::arith::ArithDialect",
                           "mlir::math::MathDialect", "mlir::tensor::TensorDialect",
                           "mlir::memref::MemRefDialect"];
}

def TileOutlineBackwardPhases : Pass<"tile-outline-backward-phases", "mlir::ModuleOp"> {
  let summary = "Makes each grid of a tiled backward a kernel function of its own";
  let description = [{
    A GPU launches the three grids of a tiled backward (tile-tiling-backward: preprocess,
    key_gradients, query_gradients) one after the other, with the workspaces in memory its
    launcher owns. Each grid becomes a function @NAME_PHASE marked `tile.backward_phase`,
    whose arguments are the nine views (Q, K, V, O, dO, LSE, dQ, dK, dV) and then the two
    workspaces (D: B x H x M f32; the dQ accumulator: B x H x M x D f32, unread by a
    deterministic backward), the launch ABI's backward signature; the function with the grids
    is erased. A workspace the ABI does not provide is an error at its allocation.
  }];
  let dependentDialects = ["mlir::memref::MemRefDialect"];
}

def TilePipeline : Pass<"tile-pipeline", "mlir::func::FuncOp"> {
  let summary = "Schedules block loads of key/value loops as early as their operands allow";
  let description = [{
    Inside every block of a key/value loop, each tile.block_load moves up to just after the
    definition of its last operand, so the value block of an iteration is requested together with
    the key block, before the scores are computed. The GPU lowering turns block loads into
    asynchronous copies that are waited for at their first use, so the value load overlaps the
    score computation and the softmax. Loads only read, so the order of computation is unchanged.
  }];
}

def TileScoreModDerivative : Pass<"tile-score-mod-derivative", "mlir::func::FuncOp"> {
  let summary = "Replaces every score_mod by a score_mod_grad that also yields df/ds";
  let description = [{
    The first piece of the derived backward pass: the derivative of a kernel's score modifier
    f(s, b, h, q_idx, kv_idx) with respect to the score s, taken by the compiler from the
    forward text. Each `tile.score_mod` becomes a `tile.score_mod_grad` over the same scores whose
    body is a copy of f's ops followed, op by op, by their forward-mode tangents, and which
    yields (f, df/ds) per element; uses of the score_mod take its `value`. (The backward pass
    calls buildScoreModGrad itself; the pass exposes the step to lit tests and tilefuse-opt.)

    Why this form: the backward kernel needs, per score, f (to recompute P from the logsumexp)
    and f' (dS = P o (dP - D) o f'); one op giving both from one region evaluates f's ops once
    for both, stays a whole-tensor op of the written form, so that tiling turns it into a block
    op the way it does score_mod, and leaves the mask and its block pruning untouched (they are
    separate ops on the scores). Forward mode suits a region with one differentiated input and
    one output: one sweep, no tape.

    Rules (a value that does not depend on s, or that is an integer or i1, has derivative 0 and
    emits nothing): add, sub, mul, div, neg, fma; extf / truncf of the tangent; tanh, exp, exp2,
    expm1, log, log2, log1p; sqrt (+inf at 0), rsqrt; absf (sign(x), 0 at x = 0); powf of a score
    base with an exponent independent of s; select of the two tangents on the same condition;
    maximum / minimum / maxnum / minnum take the tangent of the operand the result equals, half of
    each on a tie (PyTorch's rule); cmpf, fptosi, fptoui and isnan / isinf / isfinite carry no
    gradient. Any other op that reads the score, an op with regions among them, is an error at
    the op ("'<op>' op cannot be differentiated ...", at its file:line:col); no IR changes then.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::math::MathDialect"];
}

def TileDeriveBackward : Pass<"tile-derive-backward", "mlir::ModuleOp"> {
  let summary = "Derives the backward written form (dQ, dK, dV) of every forward kernel";
  let description = [{
    For each written-form kernel @k(Q, K, V, O, LSE) (load, Q.K^T, scale / score_mod / mask,
    softmax, P.V, the stores of O and the logsumexp), adds @k_backward(Q, K, V, O, dO, LSE, dQ,
    dK, dV), the gradients of a loss whose gradient with respect to O is dO, in whole-tensor
    written form: the scores recomputed through the same chain, each score_mod replaced by its
    tile.score_mod_grad (see tile-score-mod-derivative); P = tile.softmax_from_lse (recomputed
    from the stored logsumexp, not stored); D = row_reduce sum (dO o O) once; dV = P^T dO;
    dP = dO V^T; dS = P o (dP - D); back through the chain (score_mod: o f', scale: * factor,
    an explicit `by`; mask: zero where masked); dQ = dS K, dK = dS^T Q; dK and dV summed over
    the query heads of each grouped-query group (tile.sum_head_groups). The forward kernel stays,
    unless keep-forward=false (a GPU build of the backward kernels alone).

    Errors, each at the op's file:line:col, and the pass fails: a score_mod op without a
    derivative rule, an op between the scores and the softmax other than scale / score_mod /
    mask, a tile op outside that attention, an implicit scale (1/sqrt(D)) with a dynamic head
    dimension.
  }];
  let options = [
    Option<"keepForward", "keep-forward", "bool", "true",
           "Keep each forward kernel beside its backward (false: the module holds the backward "
           "kernels only)">
  ];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::math::MathDialect",
                           "mlir::memref::MemRefDialect", "mlir::func::FuncDialect"];
}

#endif // TILEFUSE_PASSES_TD
