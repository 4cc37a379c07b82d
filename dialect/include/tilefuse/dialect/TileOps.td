//===- TileOps.td - tile dialect operations ----------------*- tablegen -*-===//

#ifndef TILEFUSE_DIALECT_TILEOPS_TD
#define TILEFUSE_DIALECT_TILEOPS_TD

include "tilefuse/dialect/TileDialect.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

// Element types a kernel may read and write.
def Tile_StorageElement : AnyTypeOf<[BF16, F16, F32], "bf16, f16 or f32">;
def Tile_View : MemRefRankOf<[BF16, F16, F32], [3, 4]>;
def Tile_Tensor : RankedTensorOf<[BF16, F16, F32]>;
def Tile_F32Tensor : RankedTensorOf<[F32]>;
def Tile_Block2D : 2DTensorOf<[BF16, F16, F32]>;
def Tile_F32Block2D : 2DTensorOf<[F32]>;
def Tile_F32Block1D : 1DTensorOf<[F32]>;

//===----------------------------------------------------------------------===//
// Written form: whole-tensor ops over B x H x M x D views.
//===----------------------------------------------------------------------===//

def Tile_PageTable : MemRefRankOf<[I32], [2]>;
def Tile_KVLengths : MemRefRankOf<[I32], [1]>;
// A packed batch's cumulative sequence offsets (cu_seqlens): B + 1 contiguous i32, so the
// assembly never spells the type out.
def Tile_SequenceOffsets : Type<
    And<[IsMemRefTypePred, CPred<"::llvm::cast<::mlir::MemRefType>($_self).getRank() == 1">,
         CPred<"::llvm::cast<::mlir::MemRefType>($_self).isDynamicDim(0)">,
         CPred<"::llvm::cast<::mlir::MemRefType>($_self).getElementType().isInteger(32)">,
         CPred<"::llvm::cast<::mlir::MemRefType>($_self).getLayout().isIdentity()">]>,
    "memref<?xi32> (cumulative sequence offsets)", "::mlir::MemRefType">,
  BuildableType<"::mlir::MemRefType::get({::mlir::ShapedType::kDynamic}, "
                "$_builder.getI32Type())">;

def Tile_LoadOp : Tile_Op<"load", [AttrSizedOperandSegments]> {
  let summary = "reads a whole B x H x L x D strided view (or a B x H x M one) as a tensor";
  let description = [{
    A rank-4 view holds rows of a head (Q, K, V, O, dO); a rank-3 view holds one value per query
    row (a logsumexp, read back by a derived backward kernel).

    With `pages %table lengths %lens` the view is a paged key/value cache, P x Hkv x S x D
    (pages of S rows; vLLM's and FlashInfer's [pages, S, Hkv, D] is this with strides), and the
    result is B x Hkv x N x D: row n of batch b is row n mod S of page table[b, n div S], and
    batch b has lens[b] rows (N is their maximum; rows past lens[b] are not keys). The table is
    B x (pages per sequence), i32; lens is B, i32. tile-paged-kv writes K's and V's loads this
    way, so every variant runs on a paged cache (`tile::pagedRow` is the one definition of the
    map).

        %k = tile.load %Kc pages %table lengths %lens
            : memref<?x?x?x128xbf16>, memref<?x?xi32>, memref<?xi32> -> tensor<?x?x?x128xbf16>

    With `sequences %cu` the view is a packed batch of variable-length sequences (the THD
    layout: every sequence's rows one after another, as FlashAttention's varlen API takes
    them). Its batch stride is its row stride, so its batch index counts rows: element
    (t, h, i, d) is head h of packed row t + i, and its third dimension L bounds the
    sequences' lengths. The result is B x H x L x D for the B = (size of cu) - 1 sequences:
    row i of sequence b is element (cu[b], h, i, d) of the view, and sequence b has
    cu[b + 1] - cu[b] rows; rows past that are not queries (or keys). cu is B + 1 i32.
    tile-varlen writes every variant's loads and stores this way.

        %q = tile.load %Q sequences %cu : memref<?x?x?x128xbf16> -> tensor<?x?x?x128xbf16>
  }];
  let arguments = (ins Arg<Tile_View, "source view", [MemRead]>:$view,
                       Arg<Optional<Tile_PageTable>, "page table", [MemRead]>:$page_table,
                       Arg<Optional<Tile_KVLengths>, "rows per batch", [MemRead]>:$kv_lengths,
                       Arg<Optional<Tile_SequenceOffsets>, "cumulative sequence offsets",
                           [MemRead]>:$sequences);
  let results = (outs Tile_Tensor:$result);
  let builders = [
    OpBuilder<(ins "mlir::Type":$result, "mlir::Value":$view), [{
      build($_builder, $_state, result, view, mlir::Value(), mlir::Value(), mlir::Value());
    }]>,
    OpBuilder<(ins "mlir::Type":$result, "mlir::Value":$view, "mlir::Value":$page_table,
                   "mlir::Value":$kv_lengths), [{
      build($_builder, $_state, result, view, page_table, kv_lengths, mlir::Value());
    }]>
  ];
  let assemblyFormat = [{
    $view (`pages` $page_table^ `lengths` $kv_lengths)? (`sequences` $sequences^)? attr-dict
    `:` type($view) (`,` type($page_table)^ `,` type($kv_lengths))? `->` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    bool isPaged() { return static_cast<bool>(getPageTable()); }
  }];
}

def Tile_StoreOp : Tile_Op<"store"> {
  let summary = "writes a whole tensor to a strided view, converting to the view's element type";
  let description = [{
    With `sequences %cu` the view is a packed batch (see tile.load): row i of sequence b is
    element (cu[b], h, i) of the view, and rows at or past cu[b + 1] - cu[b] are not written.
  }];
  let arguments = (ins Tile_Tensor:$value, Arg<Tile_View, "target view", [MemWrite]>:$view,
                       Arg<Optional<Tile_SequenceOffsets>, "cumulative sequence offsets",
                           [MemRead]>:$sequences);
  let builders = [
    OpBuilder<(ins "mlir::Value":$value, "mlir::Value":$view), [{
      build($_builder, $_state, value, view, mlir::Value());
    }]>
  ];
  let assemblyFormat = [{
    $value `,` $view (`sequences` $sequences^)? attr-dict `:` type($value) `,` type($view)
  }];
  let hasVerifier = 1;
}

def Tile_DotOp : Tile_Op<"dot", [Pure]> {
  let summary = "batched per-head matrix product with GQA head mapping";
  let description = [{
    `lhs` is B x H x M x K (or B x H x K x M with `transpose_lhs`) and `rhs` is B x Hkv x K x N
    (or B x Hkv x N x K with `transpose_rhs`). H must be a multiple of Hkv: query head h reads
    key/value head h / (H / Hkv) (grouped-query attention; Hkv = 1 is multi-query attention).
    The result is B x H x M x N in f32 (f32 accumulation). `transpose_lhs` contracts over the
    rows of `lhs`, as a backward kernel does for dV = P^T dO and dK = dS^T Q.
  }];
  // transpose_lhs last: builders that pass transpose_rhs positionally keep their meaning.
  let arguments = (ins Tile_Tensor:$lhs, Tile_Tensor:$rhs, UnitAttr:$transpose_rhs,
                       UnitAttr:$transpose_lhs);
  let results = (outs Tile_F32Tensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`transpose_lhs` $transpose_lhs^)? (`transpose_rhs` $transpose_rhs^)? attr-dict
    `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Tile_ScaleOp : Tile_Op<"scale", [Pure, SameOperandsAndResultType]> {
  let summary = "multiplies every score by a constant (the softmax temperature)";
  let description = [{
    Without `by`, the factor is 1/sqrt(D) for the head dimension D of the attention the scores
    belong to (resolved by tile-tiling), so a kernel specialized to another head dimension keeps
    the usual temperature.
  }];
  let arguments = (ins Tile_F32Tensor:$input, OptionalAttr<F64Attr>:$factor);
  let results = (outs Tile_F32Tensor:$result);
  let assemblyFormat = "$input (`by` $factor^)? attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Tile_ScoreModOp : Tile_Op<"score_mod", [RecursiveMemoryEffects, SameOperandsAndResultType,
                                            SingleBlock]> {
  let summary = "applies a scalar function of (score, b, h, q_idx, kv_idx) to every score";
  let description = [{
    The body receives the score (f32) and its indices b, h, q_idx, kv_idx (index) and yields the
    new score. It may use values defined above (for example a memref.dim of a view).
  }];
  let arguments = (ins Tile_F32Tensor:$input);
  let results = (outs Tile_F32Tensor:$result);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$input attr-dict `:` type($input) $body";
  let hasRegionVerifier = 1;
}

def Tile_ScoreModGradOp : Tile_Op<"score_mod_grad", [RecursiveMemoryEffects,
                                                    SameOperandsAndResultType, SingleBlock]> {
  let summary = "a score_mod together with its derivative with respect to the score";
  let description = [{
    The form in which a derived (backward) kernel carries a score modifier f(s, b, h, q_idx,
    kv_idx): the body takes score_mod's arguments and yields f and df/ds, and the op gives both
    for every score. It is built from a `tile.score_mod` by the compiler (see
    tile-score-mod-derivative), never written by hand; the backward kernel recomputes the forward
    scores from `value` and scales dS by `derivative`, element by element.
  }];
  let arguments = (ins Tile_F32Tensor:$input);
  let results = (outs Tile_F32Tensor:$value, Tile_F32Tensor:$derivative);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$input attr-dict `:` type($input) $body";
  let hasRegionVerifier = 1;
}

def Tile_MaskOp : Tile_Op<"mask", [RecursiveMemoryEffects, SameOperandsAndResultType,
                                   SingleBlock]> {
  let summary = "keeps the scores where a predicate of (b, h, q_idx, kv_idx) holds, -inf elsewhere";
  let arguments = (ins Tile_F32Tensor:$input);
  let results = (outs Tile_F32Tensor:$result);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$input attr-dict `:` type($input) $body";
  let hasRegionVerifier = 1;
}

def Tile_SoftmaxOp : Tile_Op<"softmax", [Pure]> {
  let summary = "softmax over the key dimension, with the row logsumexp";
  let description = [{
    Rows whose scores are all -inf (fully masked) give zero probabilities and a logsumexp of -inf.
  }];
  let arguments = (ins Tile_F32Tensor:$input);
  let results = (outs Tile_F32Tensor:$probs, Tile_F32Tensor:$logsumexp);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($probs) `,` type($logsumexp)";
  let hasVerifier = 1;
}

def Tile_SoftmaxFromLseOp : Tile_Op<"softmax_from_lse", [Pure]> {
  let summary = "softmax probabilities recomputed from the scores and the row logsumexp";
  let description = [{
    p = exp(s - lse) per score, with lse the B x H x M logsumexp of the same scores (as
    tile.softmax returns it): a derived backward kernel recomputes P this way instead of storing
    it. Rows whose logsumexp is -inf (fully masked) give zero probabilities, never NaN.
  }];
  let arguments = (ins Tile_F32Tensor:$scores, Tile_F32Tensor:$logsumexp);
  let results = (outs Tile_F32Tensor:$probs);
  let assemblyFormat = [{
    $scores `,` $logsumexp attr-dict `:` type($scores) `,` type($logsumexp) `->` type($probs)
  }];
  let hasVerifier = 1;
}

def Tile_MapOp : Tile_Op<"map", [RecursiveMemoryEffects, SingleBlock]> {
  let summary = "applies a scalar function element by element to whole tensors";
  let description = [{
    The result has the shape of the operands of the highest rank (4: B x H x M x N, or 3:
    B x H x M), which must agree; a rank-3 operand beside rank-4 ones is a per-row value,
    repeated along the last dimension. The body takes one f32 per operand (bf16 and f16
    elements are extended, exactly) and yields the f32 result element. It may use values defined
    above.
  }];
  let arguments = (ins Variadic<Tile_Tensor>:$inputs);
  let results = (outs Tile_F32Tensor:$result);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$inputs attr-dict `:` type($inputs) `->` type($result) $body";
  let hasRegionVerifier = 1;
}

def Tile_RowReduceOp : Tile_Op<"row_reduce", [Pure]> {
  let summary = "reduces every row of a B x H x M x N tensor (sum or max) to B x H x M";
  let description = [{
    A row of length 0 gives 0 (sum) or -inf (max).
  }];
  let arguments = (ins Tile_ReduceKindAttr:$kind, Tile_F32Tensor:$input);
  let results = (outs Tile_F32Tensor:$result);
  let assemblyFormat = "$kind $input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Tile_SumHeadGroupsOp : Tile_Op<"sum_head_groups", [Pure]> {
  let summary = "sums the query heads of each grouped-query group: B x H x R x C to B x Hkv x R x C";
  let description = [{
    `kv_heads` is Hkv; H must be a multiple of it. Result head g is the sum of the input heads h
    with h / (H / Hkv) = g, the query heads that read key/value head g in tile.dot, so the
    gradient of a key or value tensor collects every query head that used it. Hkv = H copies.
  }];
  let arguments = (ins Tile_F32Tensor:$input, Index:$kv_heads);
  let results = (outs Tile_F32Tensor:$result);
  let assemblyFormat = [{
    $input `,` $kv_heads attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Tile_YieldOp : Tile_Op<"yield", [Pure, Terminator, ReturnLike,
    ParentOneOf<["ScoreModOp", "ScoreModGradOp", "MaskOp", "MapOp", "BlockScoreModOp",
                "BlockMaskOp", "BlockScoreModGradOp", "BlockMapOp"]>]> {
  let summary = "yields the value of a score, mask or map region";
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

//===----------------------------------------------------------------------===//
// Tiled form: block ops inside the program grid (scf.forall) and key/value loops (scf.for).
//===----------------------------------------------------------------------===//

def Tile_BlockLoadOp : Tile_Op<"block_load", [AttrSizedOperandSegments]> {
  let summary = "loads a block of rows of a view; rows at or past `bound` read as zero";
  let description = [{
    `indices` address the leading dimensions of `view`; the last index is the first row of the
    block. The block spans the result's row count from there, and every trailing dimension of the
    view in full. Rows at or beyond `bound` are not read and are zero in the result, so any
    sequence length works with any block size.

    With `packed %R` the block's rows run through the last two indexed dimensions (heads, then
    rows) together: block row i is row (r + i) mod R of head h + (r + i) div R, where h and r
    are the last two indices, and `bound` counts packed rows. Tiling packs the query heads that
    share a key/value head this way (TileConfig pack_gqa): G heads of R rows are one sequence of
    G·R rows (`tile::unpackRow` is the one definition of the map).

    With `pages %table` the view is a paged cache (P x H x S x D, see tile.load) and the indices
    are logical (batch, head, row): row n reads view[table[batch, n div S], head, n mod S]
    (`tile::pagedRow`). Rows at or past `bound` read no table entry.
  }];
  let arguments = (ins Arg<Tile_View, "source view", [MemRead]>:$view, Variadic<Index>:$indices,
                       Index:$bound, Optional<Index>:$head_rows,
                       Arg<Optional<Tile_PageTable>, "page table", [MemRead]>:$page_table);
  let results = (outs Tile_Tensor:$result);
  let builders = [
    OpBuilder<(ins "mlir::Type":$result, "mlir::Value":$view, "mlir::ValueRange":$indices,
                   "mlir::Value":$bound, CArg<"mlir::Value", "{}">:$head_rows), [{
      build($_builder, $_state, result, view, indices, bound, head_rows, mlir::Value());
    }]>
  ];
  let assemblyFormat = [{
    $view `[` $indices `]` `bound` $bound (`packed` $head_rows^)? (`pages` $page_table^)?
    attr-dict `:` type($view) (`,` type($page_table)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

def Tile_BlockStoreOp : Tile_Op<"block_store", [AttrSizedOperandSegments]> {
  let summary = "stores a block of rows to a view; rows at or past `bound` are not written";
  let description = [{
    The mirror of tile.block_load, `packed` included.
  }];
  let arguments = (ins Tile_Tensor:$value, Arg<Tile_View, "target view", [MemWrite]>:$view,
                       Variadic<Index>:$indices, Index:$bound, Optional<Index>:$head_rows);
  let builders = [
    OpBuilder<(ins "mlir::Value":$value, "mlir::Value":$view, "mlir::ValueRange":$indices,
                   "mlir::Value":$bound), [{
      build($_builder, $_state, value, view, indices, bound, mlir::Value());
    }]>
  ];
  let assemblyFormat = [{
    $value `,` $view `[` $indices `]` `bound` $bound (`packed` $head_rows^)? attr-dict `:`
    type($value) `,` type($view)
  }];
  let hasVerifier = 1;
}

def Tile_BlockDotOp : Tile_Op<"block_dot", [Pure]> {
  let summary = "block matrix product with f32 accumulation: acc + lhs x rhs (or lhs x rhs^T)";
  let description = [{
    `transpose_rhs` multiplies by rhs^T (the scores Q K^T); `transpose_lhs` by lhs^T, contracting
    over the rows of both operands (a backward kernel's dV += P^T dO and dK += dS^T Q). On the
    GPU a transposed operand is a choice of its shared-memory layout (wgmma's transpose bits),
    not a data movement.
  }];
  // transpose_lhs last: builders that pass transpose_rhs positionally keep their meaning.
  let arguments = (ins Tile_Block2D:$lhs, Tile_Block2D:$rhs, Optional<Tile_F32Block2D>:$acc,
                       UnitAttr:$transpose_rhs, UnitAttr:$transpose_lhs);
  let results = (outs Tile_F32Block2D:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`acc` $acc^)? (`transpose_lhs` $transpose_lhs^)?
    (`transpose_rhs` $transpose_rhs^)? attr-dict `:`
    type($lhs) `,` type($rhs) (`,` type($acc)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

class Tile_BlockRegionOp<string mnemonic> : Tile_Op<mnemonic, [RecursiveMemoryEffects,
    AllTypesMatch<["input", "result"]>, SingleBlock]> {
  let description = [{
    The region sees element (i, j) at (batch, head, row + i, col + j); with `packed %R` the rows
    are packed as tile.block_load's are: (batch, head + (row + i) div R, (row + i) mod R,
    col + j).
  }];
  let arguments = (ins Tile_F32Block2D:$input, Index:$batch, Index:$head, Index:$row,
                       Index:$col, Optional<Index>:$head_rows);
  let results = (outs Tile_F32Block2D:$result);
  let regions = (region SizedRegion<1>:$body);
  let builders = [
    OpBuilder<(ins "mlir::Type":$result, "mlir::Value":$input, "mlir::Value":$batch,
                   "mlir::Value":$head, "mlir::Value":$row, "mlir::Value":$col), [{
      build($_builder, $_state, result, input, batch, head, row, col, mlir::Value());
    }]>
  ];
  let assemblyFormat = [{
    $input `at` `(` $batch `,` $head `,` $row `,` $col `)` (`packed` $head_rows^)? attr-dict `:`
    type($input) $body
  }];
  let hasRegionVerifier = 1;
}

def Tile_BlockScoreModOp : Tile_BlockRegionOp<"block_score_mod"> {
  let summary = "score_mod on one block whose top-left element is (row, col)";
}

def Tile_BlockMaskOp : Tile_BlockRegionOp<"block_mask"> {
  let summary = "mask on one block whose top-left element is (row, col); -inf where false";
}

def Tile_BlockScoreModGradOp : Tile_Op<"block_score_mod_grad", [RecursiveMemoryEffects,
    AllTypesMatch<["input", "value", "derivative"]>, SingleBlock]> {
  let summary = "score_mod_grad on one block whose top-left element is (row, col): f and df/ds";
  let description = [{
    The tiled form of tile.score_mod_grad (a derived backward kernel's score modifier): the body
    takes (score, b, h, q_idx, kv_idx) and yields f and its derivative with respect to the
    score, for every element of the block.
  }];
  let arguments = (ins Tile_F32Block2D:$input, Index:$batch, Index:$head, Index:$row,
                       Index:$col);
  let results = (outs Tile_F32Block2D:$value, Tile_F32Block2D:$derivative);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $input `at` `(` $batch `,` $head `,` $row `,` $col `)` attr-dict `:` type($input) $body
  }];
  let hasRegionVerifier = 1;
}

def Tile_BlockMapOp : Tile_Op<"block_map", [RecursiveMemoryEffects, SingleBlock]> {
  let summary = "applies a scalar function element by element to blocks";
  let description = [{
    The tiled form of tile.map. Every operand has the result's rows x columns shape, or is a
    vector of its row count (a per-row value, repeated along the columns). The body takes one
    f32 per operand (bf16 and f16 elements are extended, exactly) and yields the f32 result
    element. It may use values defined above.
  }];
  let arguments = (ins Variadic<Tile_Tensor>:$inputs);
  let results = (outs Tile_F32Block2D:$result);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$inputs attr-dict `:` type($inputs) `->` type($result) $body";
  let hasRegionVerifier = 1;
}

def Tile_BlockAtomicAddOp : Tile_Op<"block_atomic_add"> {
  let summary = "adds a block of rows into an f32 view, atomically; rows at or past `bound` are "
                "not touched";
  let description = [{
    view[indices..., row0 + i, j] += value[i, j] for row0 + i < bound. Programs of a grid may
    add into the same rows concurrently: each element's addition is atomic, in no fixed order
    (so the rounding of the sum may differ between runs). A derived backward kernel accumulates
    dQ this way across key blocks when it is not deterministic.
  }];
  let arguments = (ins Tile_F32Block2D:$value,
                       Arg<MemRefRankOf<[F32], [4]>, "target view", [MemRead, MemWrite]>:$view,
                       Variadic<Index>:$indices, Index:$bound);
  let assemblyFormat = [{
    $value `,` $view `[` $indices `]` `bound` $bound attr-dict `:` type($value) `,` type($view)
  }];
  let hasVerifier = 1;
}

def Tile_ReduceOp : Tile_Op<"reduce", [Pure]> {
  let summary = "reduces each row of a block (max or sum) to a column vector";
  let arguments = (ins Tile_ReduceKindAttr:$kind, Tile_F32Block2D:$input);
  let results = (outs Tile_F32Block1D:$result);
  let assemblyFormat = "$kind $input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Tile_BroadcastOp : Tile_Op<"broadcast", [Pure]> {
  let summary = "repeats a per-row vector along the columns of a block";
  let arguments = (ins Tile_F32Block1D:$input);
  let results = (outs Tile_F32Block2D:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Tile_BlockEventOp : Tile_Op<"block_event", [MemoryEffects<[MemWrite]>]> {
  let summary = "instrumentation: counts a visited key/value block of the given class";
  let description = [{
    Inserted by tile-block-pruning when its `instrument` option is set; the CPU backend counts the
    events so tests can check how many blocks ran and how many applied the mask.
  }];
  let arguments = (ins Tile_BlockClassAttr:$kind);
  let assemblyFormat = "$kind attr-dict";
}

def Tile_SplitArriveOp : Tile_Op<"split_arrive"> {
  let summary = "counts a key split's arrival at its row block; true in the last to arrive";
  let description = [{
    Split-KV (tile-split-kv): `count` programs compute one row block, each over its share of the
    keys, and store a partial result. Each then arrives here, at the counter `indices` of
    `counters` (one per row block): the result is true in exactly one of them, the last to
    arrive, which sees every other program's stores made before it arrived and resets the
    counter to zero (so the counters are zero again for the next launch). That program merges
    the partial results.

    Without `barrier_id` every thread of the CTA arrives and the threads meet at the CTA's
    barrier. In a warp-specialized kernel (tgpu-warp-specialize) only the consumers compute
    the row block, and the producer never comes: there `threads` names the threads that arrive
    (the consumers, threads [0, threads), whole warps) and `barrier_id` the named barrier
    (1 to 15) they meet at.

        %last = tile.split_arrive %counters[%b, %h, %mb] count %S : memref<?x?x?xi32>
        %last = tile.split_arrive %counters[%b, %h, %mb] count %S
                  {barrier_id = 9 : i32, threads = 128 : i32} : memref<?x?x?xi32>
  }];
  let arguments = (ins Arg<MemRefRankOf<[I32], [3]>, "arrival counters",
                           [MemRead, MemWrite]>:$counters,
                       Variadic<Index>:$indices, Index:$count,
                       OptionalAttr<I32Attr>:$barrier_id, OptionalAttr<I32Attr>:$threads);
  let results = (outs I1:$last);
  let assemblyFormat = [{
    $counters `[` $indices `]` `count` $count attr-dict `:` type($counters)
  }];
  let hasVerifier = 1;
}

#endif // TILEFUSE_DIALECT_TILEOPS_TD
