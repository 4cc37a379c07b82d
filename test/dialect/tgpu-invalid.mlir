// RUN: tilefuse-opt %s -split-input-file -verify-diagnostics

// One case per verifier message of the tgpu dialect (dialect/lib/TileGPUDialect.cpp,
// TileGPUOps.cpp, and the layout constraints of GPULayouts.cpp).

//===----------------------------------------------------------------------===//
// Register layouts
//===----------------------------------------------------------------------===//

// expected-error @+1 {{rows_per_warp must be 16 or 32 (one or two m16 tiles), not 24}}
func.func @rows_per_warp(%a: tensor<96x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 24>>)

// -----

// expected-error @+1 {{warps must be 1 to 32 (a CTA has at most 1024 threads), not 33}}
func.func @too_many_warps(%a: tensor<528x64xf32, #tgpu.operand_a<warps = 33, rows_per_warp = 16>>)

// -----

// expected-error @+1 {{#tgpu.mma_acc: the layout covers 64 rows (4 warps x 16), the block has 128}}
func.func @acc_rows(%a: tensor<128x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>)

// -----

// expected-error @+1 {{#tgpu.mma_acc: an m16n8 accumulator needs a multiple of 8 columns, not 12}}
func.func @acc_cols(%a: tensor<64x12xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>)

// -----

// expected-error @+1 {{#tgpu.mma_acc lays out rank-2 blocks, not rank 1}}
func.func @acc_rank(%a: tensor<64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>)

// -----

// expected-error @+1 {{#tgpu.mma_acc needs a static shape}}
func.func @acc_dynamic(%a: tensor<?x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>)

// -----

// expected-error @+1 {{warpgroups must be 1 to 8 (a CTA has at most 32 warps), not 9}}
func.func @warpgroups(%a: tensor<576x64xf32, #tgpu.wgmma_acc<warpgroups = 9>>)

// -----

// expected-error @+1 {{#tgpu.wgmma_acc: an m64nN accumulator needs N a multiple of 8 up to 256, not 264}}
func.func @wgmma_n(%a: tensor<64x264xf32, #tgpu.wgmma_acc<warpgroups = 1>>)

// -----

// expected-error @+1 {{#tgpu.wgmma_acc: the layout covers 128 rows (8 warps x 16), the block has 64}}
func.func @wgmma_rows(%a: tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 2>>)

// -----

// expected-error @+1 {{#tgpu.operand_a: m16k16 A fragments hold 16-bit values, not 32-bit}}
func.func @operand_a_f32(%a: tensor<64x64xf32, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>)

// -----

// expected-error @+1 {{#tgpu.operand_a: m16k16 A fragments need a multiple of 16 columns, not 40}}
func.func @operand_a_cols(%a: tensor<64x40xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>)

// -----

// expected-error @+1 {{#tgpu.acc_rows takes the rows of an accumulator layout (#tgpu.mma_acc or #tgpu.wgmma_acc), not #tgpu.operand_a<warps = 4, rows_per_warp = 16>}}
func.func @rows_parent(%a: tensor<64xf32, #tgpu.acc_rows<#tgpu.operand_a<warps = 4, rows_per_warp = 16>>>)

// -----

// expected-error @+1 {{#tgpu.acc_rows: the layout covers 64 rows (4 warps x 16), the block has 128}}
func.func @rows_size(%a: tensor<128xf32, #tgpu.acc_rows<#tgpu.mma_acc<warps = 4, rows_per_warp = 16>>>)

// -----

// expected-error @+1 {{#tgpu.acc_rows lays out rank-1 blocks, not rank 2}}
func.func @rows_rank(%a: tensor<64x8xf32, #tgpu.acc_rows<#tgpu.wgmma_acc<warpgroups = 1>>>)

// -----

//===----------------------------------------------------------------------===//
// Shared buffers and rings
//===----------------------------------------------------------------------===//

// expected-error @+1 {{a shared buffer is a 2-D tile, not rank 3}}
func.func @buffer_rank(%b: !tgpu.buffer<2x64x128xbf16, #tgpu.shared<none>>)

// -----

// expected-error @+1 {{a shared buffer holds integers or floats of whole bytes, not 'i1'}}
func.func @buffer_i1(%b: !tgpu.buffer<64x128xi1, #tgpu.shared<none>>)

// -----

// expected-error @+1 {{chunk_xor moves 16-byte chunks: rows must be a multiple of 16 bytes, not 8}}
func.func @chunk_xor_row_bytes(%b: !tgpu.buffer<64x4xbf16, #tgpu.shared<chunk_xor>>)

// -----

// expected-error @+1 {{canonical_128b moves 16-byte chunks: rows must be a multiple of 16 bytes, not 24}}
func.func @canonical_row_bytes(%b: !tgpu.buffer<64x12xbf16, #tgpu.shared<canonical_128b>>)

// -----

// expected-error @+1 {{canonical_128b repeats every 8 rows (1024 bytes): rows must be a multiple of 8, not 12}}
func.func @canonical_rows(%b: !tgpu.buffer<12x64xbf16, #tgpu.shared<canonical_128b>>)

// -----

// expected-error @+1 {{a swizzled tile moves 16-byte chunks; 32-byte elements do not fit them}}
func.func @wide_elements(%b: !tgpu.buffer<8x8xi256, #tgpu.shared<chunk_xor>>)

// -----

// expected-error @+1 {{expected a shared layout (#tgpu.shared<...>), got #tgpu.wgmma_acc<warpgroups = 1>}}
func.func @buffer_layout(%b: !tgpu.buffer<64x64xbf16, #tgpu.wgmma_acc<warpgroups = 1>>)

// -----

// expected-error @+1 {{a ring has at least one stage, not 0}}
func.func @ring_stages(%r: !tgpu.ring<0 x 64x128xbf16, #tgpu.shared<chunk_xor>>)

// -----

func.func @stage_range() {
  %ring = tgpu.alloc : !tgpu.ring<2 x 64x128xbf16, #tgpu.shared<chunk_xor>>
  %c2 = arith.constant 2 : index
  // expected-error @+1 {{'tgpu.stage' op stage 2 is out of range for a ring of 2 stages}}
  %b = tgpu.stage %ring[%c2] : !tgpu.ring<2 x 64x128xbf16, #tgpu.shared<chunk_xor>>
  return
}

// -----

//===----------------------------------------------------------------------===//
// tgpu.async_copy
//===----------------------------------------------------------------------===//

func.func @copy_indices(%k: memref<?x?x?x128xbf16>, %i: index, %n: index) {
  %buf = tgpu.alloc : !tgpu.buffer<64x128xbf16, #tgpu.shared<chunk_xor>>
  // expected-error @+1 {{'tgpu.async_copy' op expects 3 indices for a rank-4 view (the last is the first row), got 2}}
  %t = tgpu.async_copy %k[%i, %i] bound %n into %buf
      : memref<?x?x?x128xbf16>, !tgpu.buffer<64x128xbf16, #tgpu.shared<chunk_xor>>
  return
}

// -----

func.func @copy_element(%k: memref<?x?x?x128xf16>, %i: index, %n: index) {
  %buf = tgpu.alloc : !tgpu.buffer<64x128xbf16, #tgpu.shared<chunk_xor>>
  // expected-error @+1 {{'tgpu.async_copy' op copies 'f16' into a buffer of 'bf16' (cp.async does not convert)}}
  %t = tgpu.async_copy %k[%i, %i, %i] bound %n into %buf
      : memref<?x?x?x128xf16>, !tgpu.buffer<64x128xbf16, #tgpu.shared<chunk_xor>>
  return
}

// -----

func.func @copy_columns(%k: memref<?x?x?x64xbf16>, %i: index, %n: index) {
  %buf = tgpu.alloc : !tgpu.buffer<64x128xbf16, #tgpu.shared<chunk_xor>>
  // expected-error @+1 {{'tgpu.async_copy' op copies whole rows: the view's last dimension (64) must be the buffer's 128 columns}}
  %t = tgpu.async_copy %k[%i, %i, %i] bound %n into %buf
      : memref<?x?x?x64xbf16>, !tgpu.buffer<64x128xbf16, #tgpu.shared<chunk_xor>>
  return
}

// -----

func.func @copy_warps(%k: memref<?x?x?x64xbf16>, %i: index, %n: index) {
  %buf = tgpu.alloc : !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>
  // expected-error @+1 {{'tgpu.async_copy' op is shared by whole warps: threads = 100 is not a multiple of 32}}
  %t = tgpu.async_copy %k[%i, %i, %i] bound %n into %buf {threads = 100 : i64}
      : memref<?x?x?x64xbf16>, !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>
  return
}

// -----

// A copy inside warp-specialized partitions is the first partition's, shared by its threads.
func.func @copy_in_producer(%k: memref<?x?x?x64xbf16>, %i: index, %n: index) {
  %buf = tgpu.alloc : !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>
  tgpu.warp_specialize partition warps 8 registers 240 {
  } partition warps 4 registers 24 {
    // expected-error @+1 {{'tgpu.async_copy' op is in warp-specialized partition 1; cp.async copies belong to the first (the consumers'), whose warps start at 0: a producer loads by TMA}}
    %t = tgpu.async_copy %k[%i, %i, %i] bound %n into %buf {threads = 128 : i64}
        : memref<?x?x?x64xbf16>, !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>
  }
  return
}

// -----

func.func @copy_by_the_cta_in_consumers(%k: memref<?x?x?x64xbf16>, %i: index, %n: index) {
  %buf = tgpu.alloc : !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>
  tgpu.warp_specialize partition warps 8 registers 240 {
    scf.for %j = %i to %n step %i {
      // expected-error @+1 {{'tgpu.async_copy' op in the first warp-specialized partition must be shared by its 256 threads (threads = 256), not the CTA's}}
      %t = tgpu.async_copy %k[%i, %i, %j] bound %n into %buf
          : memref<?x?x?x64xbf16>, !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>
    }
  } partition warps 4 registers 24 {
  }
  return
}

// -----

func.func @copy_chunks(%k: memref<?x?x?x6xf32>, %i: index, %n: index) {
  %buf = tgpu.alloc : !tgpu.buffer<64x6xf32, #tgpu.shared<none>>
  // expected-error @+1 {{'tgpu.async_copy' op cp.async moves 16-byte chunks; a row of 24 bytes is not whole chunks}}
  %t = tgpu.async_copy %k[%i, %i, %i] bound %n into %buf
      : memref<?x?x?x6xf32>, !tgpu.buffer<64x6xf32, #tgpu.shared<none>>
  return
}

// -----

//===----------------------------------------------------------------------===//
// tgpu.tma_load
//===----------------------------------------------------------------------===//

!bars = !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>
!map = !nvgpu.tensormap.descriptor<tensor = memref<64x64xbf16, 3>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
!buf = !tgpu.buffer<64x128xbf16, #tgpu.shared<canonical_128b>>

func.func @tma_coordinates(%map: !map, %bars: !bars, %i: index) {
  %buf = tgpu.alloc : !buf
  // expected-error @+1 {{'tgpu.tma_load' op expects one coordinate per dimension of the descriptor's 2-D box, got 1}}
  tgpu.tma_load %map[%i], %bars[%i] into %buf : !map, !bars, !buf
  return
}

// -----

!bars = !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>
!map = !nvgpu.tensormap.descriptor<tensor = memref<2x64x64xbf16, 3>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
!buf = !tgpu.buffer<64x128xbf16, #tgpu.shared<canonical_128b>>

func.func @tma_leading(%map: !map, %bars: !bars, %i: index) {
  %buf = tgpu.alloc : !buf
  // expected-error @+1 {{'tgpu.tma_load' op moves a 2-D tile: the box's leading dimensions must be 1, got 'memref<2x64x64xbf16, 3>'}}
  tgpu.tma_load %map[%i, %i, %i], %bars[%i] into %buf : !map, !bars, !buf
  return
}

// -----

!bars = !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>
!map = !nvgpu.tensormap.descriptor<tensor = memref<64x64xf16, 3>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
!buf = !tgpu.buffer<64x128xbf16, #tgpu.shared<canonical_128b>>

func.func @tma_element(%map: !map, %bars: !bars, %i: index) {
  %buf = tgpu.alloc : !buf
  // expected-error @+1 {{'tgpu.tma_load' op the box holds 'f16', the buffer 'bf16'}}
  tgpu.tma_load %map[%i, %i], %bars[%i] into %buf : !map, !bars, !buf
  return
}

// -----

!bars = !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>
!map = !nvgpu.tensormap.descriptor<tensor = memref<128x64xbf16, 3>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
!buf = !tgpu.buffer<64x128xbf16, #tgpu.shared<canonical_128b>>

func.func @tma_rows(%map: !map, %bars: !bars, %i: index) {
  %buf = tgpu.alloc : !buf
  // expected-error @+1 {{'tgpu.tma_load' op the box has 128 rows, the buffer 64}}
  tgpu.tma_load %map[%i, %i], %bars[%i] into %buf : !map, !bars, !buf
  return
}

// -----

!bars = !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>
!map = !nvgpu.tensormap.descriptor<tensor = memref<64x64xbf16, 3>, swizzle = swizzle_64b, l2promo = none, oob = zero, interleave = none>
!buf = !tgpu.buffer<64x128xbf16, #tgpu.shared<canonical_128b>>

func.func @tma_swizzle(%map: !map, %bars: !bars, %i: index) {
  %buf = tgpu.alloc : !buf
  // expected-error @+1 {{'tgpu.tma_load' op a canonical_128b buffer is moved by a swizzle_128b tensor map, not swizzle_64b}}
  tgpu.tma_load %map[%i, %i], %bars[%i] into %buf : !map, !bars, !buf
  return
}

// -----

!bars = !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>
!map = !nvgpu.tensormap.descriptor<tensor = memref<64x128xbf16, 3>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
!buf = !tgpu.buffer<64x128xbf16, #tgpu.shared<canonical_128b>>

func.func @tma_panel(%map: !map, %bars: !bars, %i: index) {
  %buf = tgpu.alloc : !buf
  // expected-error @+1 {{'tgpu.tma_load' op with swizzle_128b the box is one 128-byte panel (64 columns), not 128 columns}}
  tgpu.tma_load %map[%i, %i], %bars[%i] into %buf : !map, !bars, !buf
  return
}

// -----

!bars = !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>
!map = !nvgpu.tensormap.descriptor<tensor = memref<64x64xbf16, 3>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<none>>

func.func @tma_unswizzled(%map: !map, %bars: !bars, %i: index) {
  %buf = tgpu.alloc : !buf
  // expected-error @+1 {{'tgpu.tma_load' op an unswizzled buffer is moved by a tensor map without swizzle, not swizzle_128b}}
  tgpu.tma_load %map[%i, %i], %bars[%i] into %buf : !map, !bars, !buf
  return
}

// -----

!bars = !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>
!map = !nvgpu.tensormap.descriptor<tensor = memref<64x32xbf16, 3>, swizzle = none, l2promo = none, oob = zero, interleave = none>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<none>>

func.func @tma_whole(%map: !map, %bars: !bars, %i: index) {
  %buf = tgpu.alloc : !buf
  // expected-error @+1 {{'tgpu.tma_load' op without swizzle the box is the whole buffer: 32 columns, the buffer 64}}
  tgpu.tma_load %map[%i, %i], %bars[%i] into %buf : !map, !bars, !buf
  return
}

// -----

!bars = !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>
!map = !nvgpu.tensormap.descriptor<tensor = memref<64x64xbf16, 3>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<chunk_xor>>

func.func @tma_chunk_xor(%map: !map, %bars: !bars, %i: index) {
  %buf = tgpu.alloc : !buf
  // expected-error @+1 {{'tgpu.tma_load' op TMA cannot move the chunk_xor layout (no tensor-map swizzle matches it); use canonical_128b}}
  tgpu.tma_load %map[%i, %i], %bars[%i] into %buf : !map, !bars, !buf
  return
}

// -----

!bars = !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>
!map = !nvgpu.tensormap.descriptor<tensor = memref<64x64xbf16, 3>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
!buf = !tgpu.buffer<64x128xbf16, #tgpu.shared<canonical_128b>>

func.func @tma_barrier(%map: !map, %bars: !bars, %i: index) {
  %buf = tgpu.alloc : !buf
  %c2 = arith.constant 2 : index
  // expected-error @+1 {{'tgpu.tma_load' op mbarrier 2 is out of range for a group of 2}}
  tgpu.tma_load %map[%i, %i], %bars[%c2] into %buf : !map, !bars, !buf
  return
}

// -----

//===----------------------------------------------------------------------===//
// tgpu.wgmma, tgpu.wgmma_wait
//===----------------------------------------------------------------------===//

!q = tensor<64x128xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!k = !tgpu.buffer<64x128xbf16, #tgpu.shared<canonical_128b>>

func.func @wgmma_result(%q: !q) {
  %k = tgpu.alloc : !k
  // expected-error @+1 {{'tgpu.wgmma' op the result must be an f32 block in #tgpu.wgmma_acc, got 'tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>'}}
  %s, %qf = tgpu.wgmma %q, %k transpose_rhs : !q, !k -> tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>, !q
  return
}

// -----

!q = tensor<64x128xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!k = !tgpu.buffer<64x128xbf16, #tgpu.shared<canonical_128b>>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>

func.func @wgmma_acc_type(%q: !q, %o: tensor<64x128xf32, #tgpu.wgmma_acc<warpgroups = 1>>) {
  %k = tgpu.alloc : !k
  // expected-error @+1 {{'tgpu.wgmma' op the accumulator's type 'tensor<64x128xf32, #tgpu.wgmma_acc<warpgroups = 1>>' differs from the result's 'tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>'}}
  %s, %qf = tgpu.wgmma %q, %k acc %o transpose_rhs : !q, !k, tensor<64x128xf32, #tgpu.wgmma_acc<warpgroups = 1>> -> !acc, !q
  return
}

// -----

!q = tensor<64x128xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>
!k = !tgpu.buffer<64x128xf32, #tgpu.shared<canonical_128b>>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>

func.func @wgmma_element(%q: !q) {
  %k = tgpu.alloc : !k
  // expected-error @+1 {{'tgpu.wgmma' op multiplies bf16 or f16 operands, not 'f32'}}
  %s, %qf = tgpu.wgmma %q, %k transpose_rhs : !q, !k -> !acc, !q
  return
}

// -----

!q = tensor<64x128xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!k = !tgpu.buffer<64x128xbf16, #tgpu.shared<chunk_xor>>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>

func.func @wgmma_rhs_layout(%q: !q) {
  %k = tgpu.alloc : !k
  // expected-error @+1 {{'tgpu.wgmma' op the rhs is read by a 128-byte-swizzle descriptor: its layout must be canonical_128b, not chunk_xor}}
  %s, %qf = tgpu.wgmma %q, %k transpose_rhs : !q, !k -> !acc, !q
  return
}

// -----

!q = tensor<64x128xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!k = !tgpu.buffer<64x128xbf16, #tgpu.shared<canonical_128b>>
!acc = tensor<64x128xf32, #tgpu.wgmma_acc<warpgroups = 1>>

func.func @wgmma_n(%q: !q) {
  %k = tgpu.alloc : !k
  // expected-error @+1 {{'tgpu.wgmma' op the rhs has 64 columns of the product (rows, transposed), the result 128}}
  %s, %qf = tgpu.wgmma %q, %k transpose_rhs : !q, !k -> !acc, !q
  return
}

// -----

!q = tensor<64x128xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!k = !tgpu.buffer<64x128xbf16, #tgpu.shared<canonical_128b>>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>

func.func @wgmma_lhs_not_in_flight(%q: !q) {
  %k = tgpu.alloc : !k
  // expected-error @+1 {{'tgpu.wgmma' op keeps its register lhs in flight: it needs a second result, the registers the tensor cores read}}
  %s = tgpu.wgmma %q, %k transpose_rhs : !q, !k -> !acc
  return
}

// -----

!q = tensor<64x128xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!k = !tgpu.buffer<64x128xbf16, #tgpu.shared<canonical_128b>>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>

func.func @wgmma_lhs_in_flight_read(%q: !q) -> !q {
  %k = tgpu.alloc : !k
  // expected-error @+1 {{'tgpu.wgmma' op the lhs is in flight until a tgpu.wgmma_wait, but 'arith.addf' reads it}}
  %s, %qf = tgpu.wgmma %q, %k transpose_rhs : !q, !k -> !acc, !q
  %s1 = tgpu.wgmma_wait %s pending 0 : !acc
  %r = arith.addf %qf, %qf : !q
  return %r : !q
}

// -----

!q = tensor<64x128xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!k = !tgpu.buffer<64x128xbf16, #tgpu.shared<canonical_128b>>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>

func.func @wgmma_shared_lhs_layout() {
  %q = tgpu.alloc : !tgpu.buffer<64x128xbf16, #tgpu.shared<chunk_xor>>
  %k = tgpu.alloc : !k
  // expected-error @+1 {{'tgpu.wgmma' op a shared lhs is read by a 128-byte-swizzle descriptor: its layout must be canonical_128b, not chunk_xor}}
  %s = tgpu.wgmma %q, %k transpose_rhs : !tgpu.buffer<64x128xbf16, #tgpu.shared<chunk_xor>>, !k -> !acc
  return
}

// -----

!q = tensor<128x128xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 32>>
!k = !tgpu.buffer<64x128xbf16, #tgpu.shared<canonical_128b>>
!acc = tensor<128x64xf32, #tgpu.wgmma_acc<warpgroups = 2>>

func.func @wgmma_lhs_layout(%q: !q) {
  %k = tgpu.alloc : !k
  // expected-error @+1 {{'tgpu.wgmma' op a register lhs must be in #tgpu.operand_a<warps = 8, rows_per_warp = 16> (the warpgroups' fragments), got 'tensor<128x128xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 32>>'}}
  %s, %qf = tgpu.wgmma %q, %k transpose_rhs : !q, !k -> !acc, !q
  return
}

// -----

!q = tensor<64x128xf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!k = !tgpu.buffer<64x128xbf16, #tgpu.shared<canonical_128b>>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>

func.func @wgmma_lhs_element(%q: !q) {
  %k = tgpu.alloc : !k
  // expected-error @+1 {{'tgpu.wgmma' op the lhs holds 'f16', the rhs 'bf16'}}
  %s, %qf = tgpu.wgmma %q, %k transpose_rhs : !q, !k -> !acc, !q
  return
}

// -----

!q = tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!k = !tgpu.buffer<64x128xbf16, #tgpu.shared<canonical_128b>>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>

func.func @wgmma_lhs_shape(%q: !q) {
  %k = tgpu.alloc : !k
  // expected-error @+1 {{'tgpu.wgmma' op the lhs is 64x64, expected 64x128 for a 64x64 result and a contraction of 128}}
  %s, %qf = tgpu.wgmma %q, %k transpose_rhs : !q, !k -> !acc, !q
  return
}

// -----

!q = tensor<64x128xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!k = !tgpu.buffer<64x128xbf16, #tgpu.shared<canonical_128b>>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>

func.func @wgmma_in_flight(%q: !q) -> !acc {
  %k = tgpu.alloc : !k
  // expected-error @+1 {{'tgpu.wgmma' op the result is in flight until a tgpu.wgmma_wait, but 'arith.addf' reads it}}
  %s, %qf = tgpu.wgmma %q, %k transpose_rhs : !q, !k -> !acc, !q
  %t = arith.addf %s, %s : !acc
  return %t : !acc
}

// -----

!q = tensor<64x128xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>

func.func @wait_pending(%s: tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>) {
  // expected-error @+1 {{'tgpu.wgmma_wait' op pending groups must be 0 or more, not -1}}
  %s1 = tgpu.wgmma_wait %s pending -1 : tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
  return
}

// -----

func.func @wait_layout(%s: tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>) {
  // expected-error @+1 {{'tgpu.wgmma_wait' op guards wgmma accumulators (#tgpu.wgmma_acc) and register A operands (#tgpu.operand_a); operand #0 is 'tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>'}}
  %s1 = tgpu.wgmma_wait %s pending 0 : tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>
  return
}

// -----

func.func @wait_no_accumulator(%q: tensor<64x128xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>) {
  // expected-error @+1 {{'tgpu.wgmma_wait' op guards at least one accumulator (#tgpu.wgmma_acc)}}
  %q1 = tgpu.wgmma_wait %q pending 0 : tensor<64x128xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Barriers and warp roles
//===----------------------------------------------------------------------===//

func.func @barrier_id() {
  // expected-error @+1 {{'tgpu.named_barrier' op named barrier ids are 1 to 15 (0 is the CTA-wide barrier), not 0}}
  tgpu.named_barrier sync id 0 threads 256
  return
}

// -----

func.func @barrier_threads() {
  // expected-error @+1 {{'tgpu.named_barrier' op a named barrier counts whole warps: threads must be a multiple of 32 in [32, 1024], not 100}}
  tgpu.named_barrier arrive id 2 threads 100
  return
}

// -----

func.func @barrier_per_warpgroup_ids() {
  // expected-error @+1 {{'tgpu.named_barrier' op uses barriers 14 to 16 for 3 warpgroups; ids end at 15}}
  tgpu.named_barrier sync id 14 threads 256 warpgroup own among 3 from 0
  return
}

// -----

// Per-warpgroup barriers inside a partition name that partition's warpgroups.
func.func @barrier_per_warpgroup_partition() {
  tgpu.warp_specialize
    partition warps 8 registers 240 {
      // expected-error @+1 {{'tgpu.named_barrier' op names warpgroups 1 to 2, not those of its partition}}
      tgpu.named_barrier sync id 1 threads 256 warpgroup own among 2 from 1
    }
    partition warps 4 registers 24 {
    }
  return
}

// -----

func.func @no_partitions() {
  // expected-error @+1 {{'tgpu.warp_specialize' op needs at least one partition}}
  tgpu.warp_specialize
  return
}

// -----

func.func @partition_counts() {
  // expected-error @+1 {{'tgpu.warp_specialize' op expects one warp count and one register budget per partition (1 partitions, 2 warp counts, 1 budgets)}}
  "tgpu.warp_specialize"() ({
  ^bb0:
  }) {partition_warps = array<i32: 4, 4>, partition_registers = array<i32: 24>} : () -> ()
  return
}

// -----

func.func @partition_warpgroups() {
  // expected-error @+1 {{'tgpu.warp_specialize' op partition #1 has 2 warps; setmaxnreg sets a whole warpgroup's registers, so a partition is a positive multiple of 4 warps}}
  tgpu.warp_specialize
    partition warps 4 registers 24 {
    }
    partition warps 2 registers 240 {
    }
  return
}

// -----

func.func @partition_registers() {
  // expected-error @+1 {{'tgpu.warp_specialize' op partition #0's register budget 20 is not what setmaxnreg takes (a multiple of 8 in [24, 256])}}
  tgpu.warp_specialize
    partition warps 4 registers 20 {
    }
  return
}

// -----

func.func @partition_registers_multiple() {
  // expected-error @+1 {{'tgpu.warp_specialize' op partition #0's register budget 100 is not what setmaxnreg takes (a multiple of 8 in [24, 256])}}
  tgpu.warp_specialize
    partition warps 4 registers 100 {
    }
  return
}

// -----

func.func @partition_arguments() {
  // expected-error @+1 {{'tgpu.warp_specialize' op partition #0 takes no arguments}}
  "tgpu.warp_specialize"() ({
  ^bb0(%x: index):
  }) {partition_warps = array<i32: 4>, partition_registers = array<i32: 24>} : () -> ()
  return
}

// -----

func.func @too_many_warps() {
  // expected-error @+1 {{'tgpu.warp_specialize' op the partitions have 36 warps; a CTA has at most 32 (1024 threads)}}
  tgpu.warp_specialize
    partition warps 4 registers 24 {
    }
    partition warps 32 registers 24 {
    }
  return
}

// -----

func.func @register_file() {
  // expected-error @+1 {{'tgpu.warp_specialize' op the partitions' budgets need 73728 registers; an SM has 65536}}
  tgpu.warp_specialize
    partition warps 4 registers 64 {
    }
    partition warps 8 registers 256 {
    }
  return
}

// -----

func.func @alloc_misaligned() {
  // expected-error @below {{'tgpu.alloc' op offset 512 is not a non-negative multiple of 1024 bytes, the alignment its swizzle needs}}
  %b = tgpu.alloc {offset = 512 : i64} : !tgpu.buffer<8x64xbf16, #tgpu.shared<canonical_128b>>
  return
}

//===----------------------------------------------------------------------===//
// mma.sync and register operands
//===----------------------------------------------------------------------===//

// -----

func.func @mma_rhs_swizzle(%q: tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>,
                           %k: !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>) {
  // expected-error @+1 {{the rhs is read by ldmatrix from a chunk_xor tile, not canonical_128b}}
  %s = tgpu.mma %q, %k transpose_rhs : tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>, !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>> -> tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>
  return
}

// -----

func.func @mma_lhs_warps(%q: tensor<64x64xbf16, #tgpu.operand_a<warps = 2, rows_per_warp = 32>>,
                         %k: !tgpu.buffer<64x64xbf16, #tgpu.shared<chunk_xor>>) {
  // expected-error @+1 {{a register lhs must be in #tgpu.operand_a<warps = 4, rows_per_warp = 16> (the result's warps)}}
  %s = tgpu.mma %q, %k transpose_rhs : tensor<64x64xbf16, #tgpu.operand_a<warps = 2, rows_per_warp = 32>>, !tgpu.buffer<64x64xbf16, #tgpu.shared<chunk_xor>> -> tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>
  return
}

// -----

func.func @mma_shape(%q: tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>,
                     %k: !tgpu.buffer<32x64xbf16, #tgpu.shared<chunk_xor>>) {
  // expected-error @+1 {{the rhs has 32 columns of the product (rows, transposed), the result 64}}
  %s = tgpu.mma %q, %k transpose_rhs : tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>, !tgpu.buffer<32x64xbf16, #tgpu.shared<chunk_xor>> -> tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>
  return
}

// -----

func.func @mma_result(%q: tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>,
                      %k: !tgpu.buffer<64x64xbf16, #tgpu.shared<chunk_xor>>) {
  // expected-error @+1 {{the result must be an f32 block in #tgpu.mma_acc}}
  %s = tgpu.mma %q, %k transpose_rhs : tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>, !tgpu.buffer<64x64xbf16, #tgpu.shared<chunk_xor>> -> tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
  return
}

// -----

func.func @pack_layout(%p: tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>) {
  // expected-error @+1 {{the result must be in #tgpu.operand_a<warps = 4, rows_per_warp = 16>, whose value slots are the input's}}
  %a = tgpu.pack_operand_a %p : tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>> -> tensor<64x64xbf16, #tgpu.operand_a<warps = 2, rows_per_warp = 32>>
  return
}

// -----

func.func @pack_input(%p: tensor<64x64xf32>) {
  // expected-error @+1 {{packs an accumulator (#tgpu.mma_acc or #tgpu.wgmma_acc)}}
  %a = tgpu.pack_operand_a %p : tensor<64x64xf32> -> tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
  return
}

// -----

func.func @tensor_map_of_a_computed_view(%k: memref<?x?x?x64xbf16>) {
  %c = memref.cast %k : memref<?x?x?x64xbf16> to memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
  // expected-error @+1 {{maps a kernel argument (the launcher encodes its tensor map), not a value computed in the kernel}}
  %map = tgpu.tensor_map %c : memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>> -> !nvgpu.tensormap.descriptor<tensor = memref<1x1x64x64xbf16, 3>, swizzle = swizzle_128b, l2promo = l2promo_256b, oob = zero, interleave = none>
  return
}

// -----

func.func @mbarrier_offset(%k: memref<?x?x?x64xbf16>) {
  // expected-error @+1 {{offset 4 is not a non-negative multiple of 8 bytes}}
  %bars = tgpu.alloc {offset = 4 : i64} : !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 4>
  return
}

// -----

func.func @mma_transposed_register_lhs(%q: tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>,
                                       %k: !tgpu.buffer<64x64xbf16, #tgpu.shared<chunk_xor>>) {
  // expected-error @+1 {{a transposed lhs is read from a shared buffer (ldmatrix.trans), not from registers}}
  %s = tgpu.mma %q, %k transpose_lhs : tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>, !tgpu.buffer<64x64xbf16, #tgpu.shared<chunk_xor>> -> tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>
  return
}

// -----

func.func @mma_transposed_lhs_shape(%p: !tgpu.buffer<32x64xbf16, #tgpu.shared<chunk_xor>>,
                                    %v: !tgpu.buffer<64x64xbf16, #tgpu.shared<chunk_xor>>) {
  // expected-error @+1 {{the lhs is 64x32, expected 64x64}}
  %s = tgpu.mma %p, %v transpose_lhs : !tgpu.buffer<32x64xbf16, #tgpu.shared<chunk_xor>>, !tgpu.buffer<64x64xbf16, #tgpu.shared<chunk_xor>> -> tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>
  return
}

// -----

func.func @local_store_layout(%x: tensor<64x64xf32>,
                              %b: !tgpu.buffer<64x64xbf16, #tgpu.shared<chunk_xor>>) {
  // expected-error @+1 {{stores a block in #tgpu.mma_acc or #tgpu.wgmma_acc (pairs of columns a thread)}}
  tgpu.local_store %x, %b : tensor<64x64xf32>, !tgpu.buffer<64x64xbf16, #tgpu.shared<chunk_xor>>
  return
}

// -----

func.func @local_store_wgmma_swizzle(%x: tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>,
                                     %b: !tgpu.buffer<64x64xbf16, #tgpu.shared<chunk_xor>>) {
  // expected-error @+1 {{writes a bf16 or f16 canonical_128b buffer (what wgmma's descriptors read from a #tgpu.wgmma_acc block)}}
  tgpu.local_store %x, %b : tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>, !tgpu.buffer<64x64xbf16, #tgpu.shared<chunk_xor>>
  return
}

// -----

func.func @wgmma_transposed_register_lhs(%a: tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>,
                                         %v: !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>) {
  // expected-error @+1 {{a transposed lhs is read from a shared buffer (MN-major through its descriptor), not from registers}}
  %s, %af = tgpu.wgmma %a, %v transpose_lhs : tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>, !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>> -> tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>, tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
  return
}

// -----

func.func @wgmma_transposed_lhs_shape(%p: !tgpu.buffer<64x128xbf16, #tgpu.shared<canonical_128b>>,
                                      %v: !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>) {
  // expected-error @+1 {{the lhs is 128x64, expected 64x64}}
  %s = tgpu.wgmma %p, %v transpose_lhs : !tgpu.buffer<64x128xbf16, #tgpu.shared<canonical_128b>>, !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>> -> tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
  return
}

// -----

func.func @local_store_shape(%x: tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>,
                             %b: !tgpu.buffer<64x32xbf16, #tgpu.shared<chunk_xor>>) {
  // expected-error @+1 {{stores a 64x64 block into a 64x32 buffer}}
  tgpu.local_store %x, %b : tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>, !tgpu.buffer<64x32xbf16, #tgpu.shared<chunk_xor>>
  return
}

// -----

func.func @local_store_swizzle(%x: tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>,
                               %b: !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>) {
  // expected-error @+1 {{writes a bf16 or f16 chunk_xor buffer (what ldmatrix reads from a #tgpu.mma_acc block)}}
  tgpu.local_store %x, %b : tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>, !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>
  return
}

// -----

// tgpu.tma_store
!map = !nvgpu.tensormap.descriptor<tensor = memref<1x1x64x64xbf16, 3>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
!buf = !tgpu.buffer<128x128xbf16, #tgpu.shared<canonical_128b>>
func.func @tma_store_row_outside(%map: !map, %i: index) {
  %c96 = arith.constant 96 : index
  %buf = tgpu.alloc : !buf
  // expected-error @+1 {{'tgpu.tma_store' op first row 96 must be a multiple of the box's 64 rows inside the buffer's 128}}
  tgpu.tma_store %buf[%c96] into %map[%i, %i, %i, %i] : !buf, !map
  return
}

// -----

!map = !nvgpu.tensormap.descriptor<tensor = memref<1x1x48x64xbf16, 3>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
!buf = !tgpu.buffer<128x128xbf16, #tgpu.shared<canonical_128b>>
func.func @tma_store_box_rows(%map: !map, %i: index) {
  %buf = tgpu.alloc : !buf
  // expected-error @+1 {{'tgpu.tma_store' op the box's 48 rows must be a multiple of 8 that divides the buffer's 128}}
  tgpu.tma_store %buf[%i] into %map[%i, %i, %i, %i] : !buf, !map
  return
}

// -----

func.func @row_sums_ones(%p: tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>,
                         %acc: tensor<64x72xf32, #tgpu.wgmma_acc<warpgroups = 1>>) {
  %v = tgpu.alloc : !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>
  %ones = tgpu.alloc : !tgpu.buffer<16x64xbf16, #tgpu.shared<canonical_128b>>
  // expected-error @+1 {{the row sums' ones must be an 8x64 canonical_128b buffer of the rhs's element type}}
  %o, %pf = tgpu.wgmma %p, %v acc %acc row_sums(%ones : !tgpu.buffer<16x64xbf16, #tgpu.shared<canonical_128b>>)
      : tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>,
        !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>,
        tensor<64x72xf32, #tgpu.wgmma_acc<warpgroups = 1>>
        -> tensor<64x72xf32, #tgpu.wgmma_acc<warpgroups = 1>>,
           tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
  return
}

// -----

func.func @row_sums_columns(%p: tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>,
                            %acc: tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>) {
  %v = tgpu.alloc : !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>
  %ones = tgpu.alloc : !tgpu.buffer<8x64xbf16, #tgpu.shared<canonical_128b>>
  // expected-error @+1 {{the rhs has 64 columns of the product (columns), the result 56}}
  %o, %pf = tgpu.wgmma %p, %v acc %acc row_sums(%ones : !tgpu.buffer<8x64xbf16, #tgpu.shared<canonical_128b>>)
      : tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>,
        !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>,
        tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
        -> tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>,
           tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
  return
}

// -----

func.func @split_row_sums_product(%acc: tensor<64x72xf32, #tgpu.wgmma_acc<warpgroups = 1>>) {
  // expected-error @+1 {{the product must be the input's first 64 columns in its layout}}
  %o, %l = tgpu.split_row_sums %acc : tensor<64x72xf32, #tgpu.wgmma_acc<warpgroups = 1>>
      -> tensor<64x72xf32, #tgpu.wgmma_acc<warpgroups = 1>>,
         tensor<64xf32, #tgpu.acc_rows<#tgpu.wgmma_acc<warpgroups = 1>>>
  return
}

// -----

func.func @split_row_sums_rows(%acc: tensor<64x72xf32, #tgpu.wgmma_acc<warpgroups = 1>>) {
  // expected-error @+1 {{the sums must be a row vector of 64 in #tgpu.acc_rows<#tgpu.wgmma_acc<warpgroups = 1>>}}
  %o, %l = tgpu.split_row_sums %acc : tensor<64x72xf32, #tgpu.wgmma_acc<warpgroups = 1>>
      -> tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>, tensor<64xf32>
  return
}

// -----

func.func @fill_f32() {
  %b = tgpu.alloc : !tgpu.buffer<8x64xf32, #tgpu.shared<canonical_128b>>
  // expected-error @+1 {{fills a buffer of bf16 or f16}}
  tgpu.fill %b, 1.0 : !tgpu.buffer<8x64xf32, #tgpu.shared<canonical_128b>>
  return
}

// -----

func.func @leading_columns_wider(%s: tensor<128x64xf32, #tgpu.wgmma_acc<warpgroups = 2>>) {
  // expected-error @+1 {{the narrow block has fewer columns than the wide one: 64 against 64}}
  %n = tgpu.leading_columns %s : tensor<128x64xf32, #tgpu.wgmma_acc<warpgroups = 2>> -> tensor<128x64xf32, #tgpu.wgmma_acc<warpgroups = 2>>
  return
}

// -----

func.func @leading_columns_layout(%s: tensor<128x176xf32, #tgpu.wgmma_acc<warpgroups = 2>>) {
  // expected-error @+1 {{keeps the encoding and element type}}
  %n = tgpu.leading_columns %s : tensor<128x176xf32, #tgpu.wgmma_acc<warpgroups = 2>> -> tensor<128x64xf32, #tgpu.mma_acc<warps = 8, rows_per_warp = 16>>
  return
}

// -----

func.func @pad_columns_not_accumulator(%p: tensor<64x32xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>) {
  // expected-error @+1 {{takes an accumulator (#tgpu.mma_acc or #tgpu.wgmma_acc)}}
  %w = tgpu.pad_columns %p : tensor<64x32xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>> -> tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
  return
}
