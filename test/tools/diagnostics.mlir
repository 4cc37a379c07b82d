// RUN: not tilefuse-opt %s -o /dev/null 2>&1 | FileCheck %s
// RUN: not tilefuse-opt %s --tile-front-end -o /dev/null 2>&1 | FileCheck %s

// A kernel author's mistake is reported at the file:line:col of the op, with the sizes that
// disagree, and the tool exits non-zero (`not`) without running any pass: here P x V contracts
// over 64 keys of P but V has 32 rows.

!qkv = memref<2x4x64x64xbf16>
!v = memref<2x4x32x64xbf16>
!lse = memref<2x4x64xf32>

func.func @shape_mismatch(%Q: !qkv, %K: !qkv, %V: !v, %O: !qkv, %LSE: !lse) {
  %q = tile.load %Q : !qkv -> tensor<2x4x64x64xbf16>
  %k = tile.load %K : !qkv -> tensor<2x4x64x64xbf16>
  %v = tile.load %V : !v -> tensor<2x4x32x64xbf16>
  %s = tile.dot %q, %k transpose_rhs : tensor<2x4x64x64xbf16>, tensor<2x4x64x64xbf16> -> tensor<2x4x64x64xf32>
  %p, %lse = tile.softmax %s : tensor<2x4x64x64xf32> -> tensor<2x4x64x64xf32>, tensor<2x4x64xf32>
  // CHECK: diagnostics.mlir:[[@LINE+2]]:8: error: 'tile.dot' op contraction sizes differ: lhs has 64, rhs has 32
  // CHECK-NEXT: %o = tile.dot %p, %v
  %o = tile.dot %p, %v : tensor<2x4x64x64xf32>, tensor<2x4x32x64xbf16> -> tensor<2x4x64x64xf32>
  tile.store %o, %O : tensor<2x4x64x64xf32>, !qkv
  tile.store %lse, %LSE : tensor<2x4x64xf32>, !lse
  return
}
