// RUN: tilefuse-opt %s -split-input-file -verify-diagnostics -tgpu-assign-layouts -o /dev/null
// RUN: not tilefuse-opt %s -split-input-file -tgpu-assign-layouts=mma=mfma -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=OPTION

// tgpu-assign-layouts: a block it cannot place is an error at the op that defines it or that
// asks two layouts of it; so is a kernel whose options or row counts no layout fits.

// OPTION: error: tgpu-assign-layouts: mma is sync or wgmma, not 'mfma'


!view = memref<?x?x?x32xbf16>

// A 64-byte row is not a whole group of eight swizzled chunks (the dialect's verifier says so;
// today's emitter rejects head dimension 32 for the same reason).
func.func @narrow_rows(%q: !view, %k: !view, %b: index, %n: index) -> tensor<64x64xf32> {
  %qb = tile.block_load %q[%b, %b, %b] bound %n : !view -> tensor<64x32xbf16>
  // expected-error @below {{'tile.block_load' op defines 'tensor<64x32xbf16>' as a shared tile in #tgpu.shared<}}
  %kb = tile.block_load %k[%b, %b, %b] bound %n : !view -> tensor<64x32xbf16>
  %s = tile.block_dot %qb, %kb transpose_rhs : tensor<64x32xbf16>, tensor<64x32xbf16> -> tensor<64x64xf32>
  return %s : tensor<64x64xf32>
}

// -----

!view = memref<?x?x?x64xbf16>

// One block in two roles: the lhs of one dot and the rhs of another.
func.func @two_roles(%q: !view, %b: index, %n: index) {
  %qb = tile.block_load %q[%b, %b, %b] bound %n : !view -> tensor<64x64xbf16>
  // expected-error @below {{'tile.block_dot' op needs a block in #tgpu.shared<chunk_xor>, but it is also in #tgpu.operand_a<warps = 4, rows_per_warp = 16>}}
  // expected-note @below {{which this op needs}}
  %s = tile.block_dot %qb, %qb transpose_rhs : tensor<64x64xbf16>, tensor<64x64xbf16> -> tensor<64x64xf32>
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

// A copy kernel: nothing says where the block lives.
func.func @unplaced(%q: !view, %o: !view, %s: tensor<64x64xf32>, %b: index, %n: index) {
  %r = tile.reduce max %s : tensor<64x64xf32> -> tensor<64xf32>
  // expected-error @below {{'tile.block_load' op defines a block that no tile.block_dot, tile.reduce or tile.broadcast places}}
  %qb = tile.block_load %q[%b, %b, %b] bound %n : !view -> tensor<64x64xbf16>
  tile.block_store %qb, %o[%b, %b, %b] bound %n : tensor<64x64xbf16>, !view
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
