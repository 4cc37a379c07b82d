// RUN: tilefuse-opt %s -split-input-file -verify-diagnostics -tgpu-assign-layouts -o /dev/null
// RUN: not tilefuse-opt %s -split-input-file -tgpu-assign-layouts=mma=mfma -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=OPTION

// tgpu-assign-layouts: a block it cannot place is an error at the op that defines it or that
// asks two layouts of it; so is a kernel whose options or row counts no layout fits.

// OPTION: error: tgpu-assign-layouts: mma must be sync or wgmma, not 'mfma'


!view = memref<?x?x?x8xbf16>

// A shared tile's rows are whole 16-byte chunks (a 64-byte row of head dimension 32 is padded
// to a 128-byte swizzle group, see GPULayouts.h); a block the swizzle cannot hold at all is an
// error at its load: here a K block whose contraction is not a multiple of 16 (the A fragments
// of the lhs reject it first).
func.func @narrow_rows(%q: !view, %k: !view, %b: index, %n: index) -> tensor<64x64xf32> {
  // expected-error @below {{'tile.block_load' op #tgpu.operand_a: m16k16 A fragments need a multiple of 16 columns, not 8}}
  %qb = tile.block_load %q[%b, %b, %b] bound %n : !view -> tensor<64x8xbf16>
  %kb = tile.block_load %k[%b, %b, %b] bound %n : !view -> tensor<64x8xbf16>
  %s = tile.block_dot %qb, %kb transpose_rhs : tensor<64x8xbf16>, tensor<64x8xbf16> -> tensor<64x64xf32>
  return %s : tensor<64x64xf32>
}

// -----

!view = memref<?x?x?x64xbf16>

// One class in two roles: Q (A fragments) and K (a shared tile) joined by a select.
func.func @two_roles(%q: !view, %k: !view, %b: index, %n: index, %c: i1) {
  %qb = tile.block_load %q[%b, %b, %b] bound %n : !view -> tensor<64x64xbf16>
  %kb = tile.block_load %k[%b, %b, %b] bound %n : !view -> tensor<64x64xbf16>
  %either = arith.select %c, %qb, %kb : tensor<64x64xbf16>
  // expected-error @below {{'tile.block_dot' op needs a block in #tgpu.shared<chunk_xor>, but it is also in #tgpu.operand_a<warps = 4, rows_per_warp = 16>}}
  // expected-note @below {{which this op needs}}
  %s = tile.block_dot %qb, %kb transpose_rhs : tensor<64x64xbf16>, tensor<64x64xbf16> -> tensor<64x64xf32>
  return
}

// -----

!view = memref<?x?x?x64xbf16>

// A shared tile is only read by a dot.
func.func @computes_on_shared(%q: !view, %k: !view, %b: index, %n: index) {
  %qb = tile.block_load %q[%b, %b, %b] bound %n : !view -> tensor<64x64xbf16>
  %kb = tile.block_load %k[%b, %b, %b] bound %n : !view -> tensor<64x64xbf16>
  // expected-error @below {{'arith.negf' op computes on a block in shared memory}}
  %kn = arith.negf %kb : tensor<64x64xbf16>
  %s = tile.block_dot %qb, %kn transpose_rhs : tensor<64x64xbf16>, tensor<64x64xbf16> -> tensor<64x64xf32>
  return
}

// -----

!view = memref<?x?x?x64xbf16>

// A copy kernel: no role places the block, so it is an accumulator (the backward's dQ
// conversion), whose rows must be whole warps.
// expected-error @below {{'func.func' op has accumulators of 60 rows, not a whole number of warps of rows-per-warp=16}}
func.func @unplaced(%q: !view, %o: !view, %b: index, %n: index) {
  %qb = tile.block_load %q[%b, %b, %b] bound %n : !view -> tensor<60x64xbf16>
  tile.block_store %qb, %o[%b, %b, %b] bound %n : tensor<60x64xbf16>, !view
  return
}

// -----

// Accumulators of one CTA have one row count.
func.func @rows_disagree(%s: tensor<64x64xf32>, %t: tensor<32x64xf32>) {
  // expected-note @below {{an accumulator of 64 rows}}
  %r = tile.reduce max %s : tensor<64x64xf32> -> tensor<64xf32>
  // expected-error @below {{'tile.reduce' op accumulates 32 rows, where the kernel's other accumulators have 64}}
  %u = tile.reduce max %t : tensor<32x64xf32> -> tensor<32xf32>
  return
}

// -----

// An op that is neither a role nor element-wise.
func.func @unknown_op(%s: tensor<64x64xf32>) {
  %r = tile.reduce max %s : tensor<64x64xf32> -> tensor<64xf32>
  // expected-error @below {{'tensor.empty' op has blocks, but tgpu-assign-layouts knows neither its role nor that it works element by element}}
  %e = tensor.empty() : tensor<64x64xf32>
  return
}

// -----

// Accumulator rows are whole warps of rows-per-warp.
// expected-error @below {{'func.func' op has accumulators of 40 rows, not a whole number of warps of rows-per-warp=16}}
func.func @partial_warp(%s: tensor<40x64xf32>) {
  %r = tile.reduce max %s : tensor<40x64xf32> -> tensor<40xf32>
  return
}
