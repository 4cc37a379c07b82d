//===- TileGPUOps.td - tgpu dialect operations -------------*- tablegen -*-===//
//
// Only what upstream lacks. Reused from `nvgpu`: the cp.async token and its groups
// (!nvgpu.device.async.token, nvgpu.device_async_create_group, nvgpu.device_async_wait),
// mbarriers (!nvgpu.mbarrier.group, nvgpu.mbarrier.init / arrive.expect_tx /
// try_wait.parity) and the TMA descriptor type (!nvgpu.tensormap.descriptor). nvgpu's own
// copy, TMA-load and warpgroup-MMA ops take memrefs and descriptor pairs; the ops here take
// !tgpu.buffer values (whose swizzle a memref cannot express) and register-A operands.
//
//===----------------------------------------------------------------------===//

#ifndef TILEFUSE_DIALECT_TILEGPUOPS_TD
#define TILEFUSE_DIALECT_TILEGPUOPS_TD

include "tilefuse/dialect/TileGPUDialect.td"
include "mlir/Dialect/NVGPU/IR/NVGPUTypes.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def TGPU_Buffer : Type<CPred<"::llvm::isa<::tilefuse::tgpu::BufferType>($_self)">,
                       "shared buffer", "::tilefuse::tgpu::BufferType">;
def TGPU_Ring : Type<CPred<"::llvm::isa<::tilefuse::tgpu::RingType>($_self)">,
                     "ring of shared buffers", "::tilefuse::tgpu::RingType">;
def TGPU_View : MemRefRankOf<[BF16, F16, F32], [3, 4]>;
def TGPU_Block : 2DTensorOf<[BF16, F16, F32]>;

//===----------------------------------------------------------------------===//
// Shared buffers and rings
//===----------------------------------------------------------------------===//

def TGPU_AllocOp : TGPU_Op<"alloc"> {
  let summary = "a shared buffer, ring or mbarrier group of the CTA";
  let description = [{
    Its byte `offset` in the kernel's dynamic shared memory is chosen by the shared-memory
    allocation pass (tgpu-allocate-shared-memory), which also records the CTA's shared bytes
    and threads on the module; before that pass the op has no offset. An offset is a
    multiple of the buffer's alignment (1024 bytes for `canonical_128b`). A ring's stage `i`
    starts at `offset + i * stride` (`RingType::getStageStrideInBytes`).

    ```mlir
    %ring = tgpu.alloc {offset = 0 : i64} : !tgpu.ring<2 x 64x128xbf16, #tgpu.shared<canonical_128b>>
    ```

    An `!nvgpu.mbarrier.group` of N barriers takes 8 bytes each, 8-byte aligned (the
    pipelines' full and empty barriers of tgpu-warp-specialize).
  }];
  let arguments = (ins OptionalAttr<I64Attr>:$offset);
  let results = (outs Res<AnyTypeOf<[TGPU_Buffer, TGPU_Ring, NVGPU_MBarrierGroup]>, "",
                          [MemAlloc]>:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Bytes the buffer or ring occupies, and the alignment of its start.
    int64_t getSizeInBytes();
    int64_t getAlignment();
  }];
}

def TGPU_StageOp : TGPU_Op<"stage", [Pure, DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "stage `index` of a ring";
  let description = [{
    A pipeline's producer and consumer select the stage `i % stages` of iteration `i`.
    A constant index must be in range.

    ```mlir
    %buf = tgpu.stage %ring[%i] : !tgpu.ring<2 x 64x128xbf16, #tgpu.shared<canonical_128b>>
    ```
  }];
  let arguments = (ins TGPU_Ring:$ring, Index:$index);
  let results = (outs TGPU_Buffer:$result);
  let assemblyFormat = "$ring `[` $index `]` attr-dict `:` type($ring)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Asynchronous copies
//===----------------------------------------------------------------------===//

def TGPU_AsyncCopyOp : TGPU_Op<"async_copy", [AttrSizedOperandSegments]> {
  let summary = "cp.async of a block of rows from a global view into a shared buffer";
  let description = [{
    The CTA's threads copy the buffer's rows of `view` starting at row `indices[-1]` (the other
    indices address the leading dimensions, as in `tile.block_load`), every column of the
    view's last dimension, in 16-byte chunks. Rows at or past `bound` are not read and are
    zero in the buffer. The copy is complete once a `nvgpu.device_async_wait` on a group
    (`nvgpu.device_async_create_group`) holding the returned token has returned; the waiting
    threads then see their own chunks, and the others' after a barrier. With `pages %table`
    the view is a paged cache and the indices are logical (batch, head, row), as in
    tile.block_load.

    With `threads` the copy is shared by the threads [0, threads) alone (whole warps): a
    copy inside the first partition of a tgpu.warp_specialize (the consumers' own copy of Q),
    whose other warps never reach it. Without it every thread of the CTA takes part.

    `row_alignment` A promises that the first row is a multiple of A (a key block's first row:
    tile-to-tgpu writes it for the paged copies of key blocks, whose rows it computes as the
    block index times the block's rows). A paged copy with a page size S fixed in the view's
    type then reads one table entry per page it touches rather than one per row: where S is a
    multiple of A and the block's rows at most A, the block lies in one page; where A is a
    multiple of S, each page starts a run of S rows of the block.

    ```mlir
    %t = tgpu.async_copy %k[%b, %h, %n0] bound %n into %buf
        : memref<?x?x?x128xbf16>, !tgpu.buffer<64x128xbf16, #tgpu.shared<chunk_xor>>
    %g = nvgpu.device_async_create_group %t
    nvgpu.device_async_wait %g {numGroups = 0 : i32}
    ```
  }];
  let arguments = (ins Arg<TGPU_View, "source view", [MemRead]>:$view, Variadic<Index>:$indices,
                       Index:$bound, Arg<TGPU_Buffer, "destination", [MemWrite]>:$buffer,
                       Arg<Optional<MemRefRankOf<[I32], [2]>>, "page table",
                           [MemRead]>:$page_table,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$threads,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$row_alignment);
  let results = (outs NVGPU_DeviceAsyncToken:$token);
  let assemblyFormat = [{
    $view `[` $indices `]` `bound` $bound (`pages` $page_table^)? `into` $buffer attr-dict `:`
    type($view) `,` type($buffer) (`,` type($page_table)^)?
  }];
  let hasVerifier = 1;
}

def TGPU_TensorMapOp : TGPU_Op<"tensor_map", [Pure]> {
  let summary = "the TMA tensor map of a kernel argument, encoded by the launcher";
  let description = [{
    The kernel's tensor map of `view`, one of its arguments: the launcher encodes it with
    cuTensorMapEncodeTiled as the launch ABI says (LaunchAbi.h, "TMA kernels") and passes it by
    value as a grid constant; the descriptor type records the box and swizzle it was encoded
    with. convert-tgpu-to-nvvm turns it into the address of that parameter.

    ```mlir
    %map = tgpu.tensor_map %K : memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>
        -> !nvgpu.tensormap.descriptor<tensor = memref<1x1x64x64xbf16, 3>,
           swizzle = swizzle_128b, l2promo = l2promo_256b, oob = zero, interleave = none>
    ```
  }];
  let arguments = (ins AnyMemRef:$view);
  let results = (outs NVGPU_TensorMapDescriptor:$descriptor);
  let assemblyFormat = "$view attr-dict `:` type($view) `->` type($descriptor)";
  let hasVerifier = 1;
}

def TGPU_TmaLoadOp : TGPU_Op<"tma_load"> {
  let summary = "a TMA load of a shared buffer, completing on an mbarrier";
  let description = [{
    Loads the buffer from the tensor map at `coordinates` (innermost first, as TMA counts
    them) and signals the completion of its bytes on mbarrier `barrier_id` of `barriers`,
    whose phase is armed with `nvgpu.mbarrier.arrive.expect_tx` for the buffer's size and
    awaited with `nvgpu.mbarrier.try_wait.parity`.

    The descriptor's box is one TMA transfer: for a buffer in `canonical_128b`, one 128-byte
    panel (the hardware's SWIZZLE_128B spans 128 bytes), so the op stands for one transfer per
    panel at column offsets of a panel's width; without a swizzle the box is the buffer. The
    box's leading dimensions beyond the last two must be 1.

    ```mlir
    tgpu.tma_load %map[%c0, %row, %h, %b], %bars[%stage] into %buf
        : !nvgpu.tensormap.descriptor<tensor = memref<1x1x64x64xbf16, 3>, swizzle = swizzle_128b,
          l2promo = none, oob = zero, interleave = none>,
          !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>,
          !tgpu.buffer<64x128xbf16, #tgpu.shared<canonical_128b>>
    ```
  }];
  let arguments = (ins NVGPU_TensorMapDescriptor:$descriptor, Variadic<Index>:$coordinates,
                       NVGPU_MBarrierGroup:$barriers, Index:$barrier_id,
                       Arg<TGPU_Buffer, "destination", [MemWrite]>:$buffer);
  let assemblyFormat = [{
    $descriptor `[` $coordinates `]` `,` $barriers `[` $barrier_id `]` `into` $buffer attr-dict
    `:` type($descriptor) `,` type($barriers) `,` type($buffer)
  }];
  let hasVerifier = 1;
}

def TGPU_TmaStoreOp : TGPU_Op<"tma_store"> {
  let summary = "a TMA store of a box of rows of a shared buffer, as one bulk async-group";
  let description = [{
    Stores rows `first_row` .. `first_row` + box rows of the buffer through the tensor map at
    `coordinates` (innermost first, as TMA counts them): one `cp.async.bulk.tensor` from
    shared::cta to global memory per 128-byte panel, committed together as one bulk
    async-group of the issuing thread. Elements the box puts outside the tensor's extents are
    not written (a last row block past M).

    One thread issues it. The buffer's rows must have been written, fenced into the async
    proxy (fence.proxy.async) and published by a barrier before it, and must not be written
    again before the issuing thread's `nvvm.cp.async.bulk.wait_group` (`read`) has seen the
    group's reads complete; tgpu-store-output-by-tma places all three.

    ```mlir
    tgpu.tma_store %obuf[%c64] into %map[%c0, %row, %h, %b]
        : !tgpu.buffer<128x128xbf16, #tgpu.shared<canonical_128b>>,
          !nvgpu.tensormap.descriptor<tensor = memref<1x1x64x64xbf16, 3>, swizzle = swizzle_128b,
          l2promo = none, oob = zero, interleave = none>
    ```
  }];
  let arguments = (ins Arg<TGPU_Buffer, "source", [MemRead]>:$buffer, Index:$first_row,
                       Arg<NVGPU_TensorMapDescriptor, "the global tensor it writes",
                           [MemWrite]>:$descriptor,
                       Variadic<Index>:$coordinates);
  let assemblyFormat = [{
    $buffer `[` $first_row `]` `into` $descriptor `[` $coordinates `]` attr-dict `:`
    type($buffer) `,` type($descriptor)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Warpgroup MMA
//===----------------------------------------------------------------------===//

def TGPU_WgmmaOp : TGPU_Op<"wgmma", [AttrSizedOperandSegments]> {
  let summary = "acc + A x B (or A x B^T) issued on the tensor cores, asynchronously";
  let description = [{
    One commit group of `wgmma.mma_async.m64nNk16` instructions, one per k-step of 16, each
    warpgroup computing its 64 rows. `lhs` (A) is either in registers (`#tgpu.operand_a`
    with 16 rows per warp) or a shared buffer in `canonical_128b`, M x K, or K x M with
    `transpose_lhs` (P or dS of a backward kernel, written by tgpu.local_store: the product is
    A^T x B, read MN-major through the descriptor); `rhs` (B) is a shared buffer in
    `canonical_128b`, K x N, or N x K with `transpose_rhs` (the K tile of Q K^T). Without
    `acc` the accumulators start at zero.

    The results are in flight: the accumulators, and with a register `lhs` the A registers
    the tensor cores read (`lhs_in_flight`, the lhs's value: the lowering hands the
    instructions a copy of the lhs's registers, and these are they). Both may be read only
    through `tgpu.wgmma_wait`, which keeps them until the group completes.

    ```mlir
    %s, %qf = tgpu.wgmma %q, %k transpose_rhs
        : tensor<64x128xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>,
          !tgpu.buffer<64x128xbf16, #tgpu.shared<canonical_128b>>
          -> tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>,
             tensor<64x128xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
    %s1, %q1 = tgpu.wgmma_wait %s, %qf pending 0
        : tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>,
          tensor<64x128xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
    ```

    With `row_sums %ones` (tgpu-row-sum-on-tensor-cores) the product also sums A's rows: the
    result has 8 columns more than B, and after each k-step's m64nNk16 an m64n8k16 multiplies
    the same A registers by `%ones`, an 8 x 64 buffer of ones (`tgpu.fill`), into those 8
    columns, each of which then holds the row sums of A (added to the accumulator's, as the
    product is). Both are in the op's one commit group, so the sums are rescaled, waited for
    and carried with the product; `tgpu.split_row_sums` takes them apart after the loop.
  }];
  let arguments = (ins AnyTypeOf<[TGPU_Block, TGPU_Buffer]>:$lhs, TGPU_Buffer:$rhs,
                       Optional<TGPU_Block>:$acc, Optional<TGPU_Buffer>:$row_sums,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs TGPU_Block:$result, Optional<TGPU_Block>:$lhs_in_flight);
  let assemblyFormat = [{
    $lhs `,` $rhs (`acc` $acc^)? (`row_sums` `(` $row_sums^ `:` type($row_sums) `)`)?
    (`transpose_lhs` $transpose_lhs^)?
    (`transpose_rhs` $transpose_rhs^)? attr-dict `:` type($lhs)
    `,` type($rhs) (`,` type($acc)^)? `->` type($result) (`,` type($lhs_in_flight)^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The columns `row_sums` adds to the result: one m64n8 tile.
    static constexpr int64_t kRowSumColumns = 8;
  }];
}

def TGPU_WgmmaWaitOp : TGPU_Op<"wgmma_wait", [DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "waits until at most `pending` wgmma groups are in flight";
  let description = [{
    `wgmma.wait_group pending`. The operands (at least one accumulator) are the registers the
    completed groups write (accumulators) or read (register A operands); the results are the
    same registers, now safe to read and overwrite. Threading them through the wait keeps
    every use after it, as upstream's NVGPU-to-NVVM lowering does with its accumulator
    structs.
  }];
  let arguments = (ins Variadic<TGPU_Block>:$values, I32Attr:$pending);
  let results = (outs Variadic<TGPU_Block>:$results);
  let assemblyFormat = "$values `pending` $pending attr-dict `:` type($values)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// mma.sync and register operands
//===----------------------------------------------------------------------===//

def TGPU_MmaOp : TGPU_Op<"mma"> {
  let summary = "acc + A x B (or A x B^T) with mma.sync m16n8k16, B read by ldmatrix";
  let description = [{
    A chain of `mma.sync.aligned.m16n8k16` instructions, synchronous: the result may be read
    at once. Each warp computes its rows of the `#tgpu.mma_acc` result. `lhs` (A) is either
    in registers (`#tgpu.operand_a` of the result's warps and rows per warp) or a shared
    buffer in `chunk_xor` (read with `ldmatrix`, one k-step at a time). `rhs` (B) is a shared
    buffer in `chunk_xor`, K x N, or N x K with `transpose_rhs` (the K tile of Q K^T), read
    with `ldmatrix` (`.trans` for K x N). With `transpose_lhs` the product is A^T x B: the lhs
    is a shared buffer K x M (P or dS of a backward kernel, written by tgpu.local_store), read
    with `ldmatrix.trans`. Without `acc` the accumulators start at zero.

    ```mlir
    %s = tgpu.mma %q, %k transpose_rhs
        : tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>,
          !tgpu.buffer<64x64xbf16, #tgpu.shared<chunk_xor>>
          -> tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>
    ```
  }];
  let arguments = (ins Arg<AnyTypeOf<[TGPU_Block, TGPU_Buffer]>, "", [MemRead]>:$lhs,
                       Arg<TGPU_Buffer, "", [MemRead]>:$rhs, Optional<TGPU_Block>:$acc,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs TGPU_Block:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`acc` $acc^)? (`transpose_lhs` $transpose_lhs^)?
    (`transpose_rhs` $transpose_rhs^)? attr-dict `:` type($lhs) `,` type($rhs)
    (`,` type($acc)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

def TGPU_LocalStoreOp : TGPU_Op<"local_store"> {
  let summary = "writes a register block into a shared buffer, rounded to its element type";
  let description = [{
    Each thread writes the elements its layout gives it (`#tgpu.mma_acc` or
    `#tgpu.wgmma_acc`: pairs of adjacent columns) into the buffer's swizzled tile, rounded to
    the buffer's 16-bit type: `chunk_xor` for ldmatrix (tgpu.mma), `canonical_128b` for
    wgmma's descriptors. This is how a block computed in registers becomes an operand that
    other warps read: P and dS of a backward kernel, which the products P^T dO and dS^T Q read
    transposed. A wgmma reads it through the async proxy, so the writes are fenced
    (fence.proxy.async) before the barrier that publishes them (tgpu-insert-barriers). The write is not
    visible to other threads until a barrier (tgpu-insert-barriers places it), and must wait for
    the buffer's earlier readers (the same pass).

    ```mlir
    tgpu.local_store %p, %buffer : tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>,
        !tgpu.buffer<64x64xbf16, #tgpu.shared<chunk_xor>>
    ```
  }];
  let arguments = (ins TGPU_Block:$value, Arg<TGPU_Buffer, "", [MemWrite]>:$buffer);
  let assemblyFormat = "$value `,` $buffer attr-dict `:` type($value) `,` type($buffer)";
  let hasVerifier = 1;
}

def TGPU_PackOperandAOp : TGPU_Op<"pack_operand_a", [Pure]> {
  let summary = "an f32 accumulator block as 16-bit A-operand fragments, in place";
  let description = [{
    Rounds each value of an f32 block in `#tgpu.mma_acc` or `#tgpu.wgmma_acc` to the
    result's 16-bit type and packs it as `#tgpu.operand_a` fragments of the same warps and
    rows per warp (a wgmma accumulator of `g` warpgroups: `4g` warps of 16 rows). The two
    layouts put every element in the same thread and value slot, so no data moves between
    threads: this is how P becomes the A operand of P x V.

    ```mlir
    %pa = tgpu.pack_operand_a %p : tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
        -> tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
    ```
  }];
  let arguments = (ins TGPU_Block:$input);
  let results = (outs TGPU_Block:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def TGPU_SplitRowSumsOp : TGPU_Op<"split_row_sums", [Pure]> {
  let summary = "a product's accumulator with row sums (`tgpu.wgmma ... row_sums`) taken apart";
  let description = [{
    The input is an M x (N + 8) `#tgpu.wgmma_acc` accumulator whose last 8 columns hold one
    row sum each (every column the same); the results are its first N columns and the row
    sums as a row vector. A thread holds each row's sum four times (two rows, two columns);
    the lowering reads all four (the larger of each pair), because a wgmma accumulator
    register that nothing reads makes ptxas serialize the wgmma pipeline (C7511; docs/perf.md,
    thirty-second session).

    ```mlir
    %o, %l = tgpu.split_row_sums %acc : tensor<128x136xf32, #tgpu.wgmma_acc<warpgroups = 2>>
        -> tensor<128x128xf32, #tgpu.wgmma_acc<warpgroups = 2>>,
           tensor<128xf32, #tgpu.acc_rows<#tgpu.wgmma_acc<warpgroups = 2>>>
    ```
  }];
  let arguments = (ins TGPU_Block:$input);
  let results = (outs TGPU_Block:$product, RankedTensorOf<[F32]>:$sums);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($product) `,` type($sums)";
  let hasVerifier = 1;
}

def TGPU_LeadingColumnsOp : TGPU_Op<"leading_columns", [Pure]> {
  let summary = "the first columns of an accumulator block, in place";
  let description = [{
    The result is the input's first N columns (N the result's column count, a multiple of 8)
    in the same accumulator layout (`#tgpu.mma_acc` or `#tgpu.wgmma_acc`, the same encoding):
    every element stays in its thread, so the lowering only drops the other values. A key
    block whose keys past the first N are all out of range runs its softmax on these columns
    (tgpu-narrow-key-tail).

    ```mlir
    %s64 = tgpu.leading_columns %s : tensor<128x176xf32, #tgpu.wgmma_acc<warpgroups = 2>>
        -> tensor<128x64xf32, #tgpu.wgmma_acc<warpgroups = 2>>
    ```
  }];
  let arguments = (ins TGPU_Block:$input);
  let results = (outs TGPU_Block:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def TGPU_PadColumnsOp : TGPU_Op<"pad_columns", [Pure]> {
  let summary = "an accumulator block widened by zero columns on the right, in place";
  let description = [{
    The inverse of `tgpu.leading_columns`: the result's first columns are the input's, the
    others zero, in the same accumulator layout. What a narrowed softmax hands to a P·V whose
    operand keeps the key block's width (tgpu-narrow-key-tail): zero probabilities add nothing.

    ```mlir
    %p = tgpu.pad_columns %p64 : tensor<128x64xf32, #tgpu.wgmma_acc<warpgroups = 2>>
        -> tensor<128x176xf32, #tgpu.wgmma_acc<warpgroups = 2>>
    ```
  }];
  let arguments = (ins TGPU_Block:$input);
  let results = (outs TGPU_Block:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def TGPU_FillOp : TGPU_Op<"fill"> {
  let summary = "every element of a shared buffer set to one value, by the whole CTA";
  let description = [{
    Each thread of the CTA writes its share of the buffer's 32-bit words (two 16-bit
    elements), then fences its writes for the async proxy (`fence.proxy.async.shared::cta`),
    so that a wgmma may read them after the next CTA-wide barrier. It goes where every thread
    runs, before the program grid (tgpu-row-sum-on-tensor-cores puts it there), whose warp
    roles start with that barrier (tgpu-warp-specialize): the constant operands of the tensor
    cores (the ones of `tgpu.wgmma ... row_sums`).

    ```mlir
    tgpu.fill %ones, 1.0 : !tgpu.buffer<8x64xbf16, #tgpu.shared<canonical_128b>>
    ```
  }];
  let arguments = (ins Arg<TGPU_Buffer, "", [MemWrite]>:$buffer, F32Attr:$value);
  let assemblyFormat = "$buffer `,` $value attr-dict `:` type($buffer)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Barriers and warp roles
//===----------------------------------------------------------------------===//

def TGPU_NamedBarrierOp : TGPU_Op<"named_barrier"> {
  let summary = "bar.sync / bar.arrive on a named barrier for `threads` threads";
  let description = [{
    Hardware barrier `id` (1 to 15; 0 is the CTA-wide `gpu.barrier`) completes when
    `threads` threads (whole warps) have arrived; `sync` also waits for it, `arrive` does not.
    Static ids and counts (where `nvvm.barrier` takes SSA values) let the verifier and the
    barrier-insertion pass reason about which partitions meet where.

    With `warpgroup own|next among N from F`, each of the N warpgroups F .. F + N - 1 of the
    CTA (a `tgpu.warp_specialize` partition's) uses a barrier of its own: warpgroup F + w on
    `id + w` (own) or on `id + (w + 1) % N` (next). That is a round-robin between the
    warpgroups (FlashAttention-3's warp scheduler barriers): each syncs on its own barrier and
    arrives on the next one's. The barriers `id` to `id + N - 1` must be valid ids. The
    warpgroups are spelled out (not read from the enclosing partition) because the lowering
    runs after the partitions became branches.

    ```mlir
    tgpu.named_barrier sync id 1 threads 256
    tgpu.named_barrier arrive id 1 threads 256 warpgroup next among 2 from 0
    ```
  }];
  let arguments = (ins TGPU_BarrierKind:$kind, I32Attr:$id, I32Attr:$threads,
                       OptionalAttr<TGPU_WarpgroupBarrier>:$warpgroup,
                       OptionalAttr<I32Attr>:$warpgroups, OptionalAttr<I32Attr>:$first_warpgroup);
  let assemblyFormat = [{
    $kind `id` $id `threads` $threads
    (`warpgroup` $warpgroup^ `among` $warpgroups `from` $first_warpgroup)? attr-dict
  }];
  let hasVerifier = 1;
}

def TGPU_WarpSpecializeOp : TGPU_Op<"warp_specialize", [RecursiveMemoryEffects, NoTerminator]> {
  let summary = "partitions of the CTA's warps, each running its own region";
  let description = [{
    Partition `i` runs its region on `partition_warps[i]` warps (consecutive warps, in
    partition order) after `setmaxnreg` sets their registers per thread to
    `partition_registers[i]`. setmaxnreg acts on whole warpgroups, so every partition is
    a multiple of 4 warps; budgets are multiples of 8 in [24, 256], the CTA has at most 32
    warps, and the budgets fit the SM's 64K registers. The regions may use values defined
    above; partitions communicate through shared buffers, mbarriers and named barriers.

    ```mlir
    tgpu.warp_specialize
      partition warps 4 registers 24 {
        ...
      }
      partition warps 8 registers 240 {
        ...
      }
    ```
  }];
  let arguments = (ins DenseI32ArrayAttr:$partition_warps,
                       DenseI32ArrayAttr:$partition_registers);
  let regions = (region VariadicRegion<SizedRegion<1>>:$partitions);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Registers a thread has at launch, before any setmaxnreg: the SM's 64K over the CTA's
    /// threads and the CTAs an SM must hold (ctas_per_sm), at most 255, in whole allocation
    /// units of 8. The partitions' budgets move registers within threads times this.
    static int64_t registersAtLaunch(int64_t threads, int64_t ctasPerSm);
    /// The partition (region index) holding `op`, which must be nested in this op.
    unsigned partitionOf(::mlir::Operation *op);
    /// The first warp of partition `i` and its warpgroups.
    int64_t partitionFirstWarp(unsigned i);
    int64_t partitionWarpgroups(unsigned i) { return getPartitionWarps()[i] / 4; }
  }];
}

#endif // TILEFUSE_DIALECT_TILEGPUOPS_TD
