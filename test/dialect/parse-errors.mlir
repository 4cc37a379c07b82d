// RUN: not tilefuse-opt %s -split-input-file -o /dev/null 2>&1 | FileCheck %s --implicit-check-not=error:

// Malformed written-form input: every case must be rejected with a diagnostic at the
// file:line:col of the offending token (-split-input-file keeps the original line numbers), and
// the tool must exit non-zero (`not`). No case may produce an error beyond the ones checked.

// An element type that does not exist, in a function signature and in an op's result type.
// CHECK: parse-errors.mlir:[[@LINE+1]]:49: error: expected non-function type
func.func @bad_element_type(%v: memref<?x?x?x64xbf17>) {
  return
}

// -----

func.func @bad_result_type(%v: memref<?x?x?x64xbf16>) {
  // CHECK: parse-errors.mlir:[[@LINE+1]]:64: error: expected non-function type
  %t = tile.load %v : memref<?x?x?x64xbf16> -> tensor<?x?x?x64xbf17>
  return
}

// -----

func.func @undefined_value(%s: tensor<?x?x?x?xf32>) {
  // CHECK: parse-errors.mlir:[[@LINE+1]]:19: error: use of undeclared SSA value name
  %t = tile.scale %undefined by 0.125 : tensor<?x?x?x?xf32>
  return
}

// -----

func.func @missing_by(%s: tensor<?x?x?x?xf32>) {
  // The factor is optional, but it needs its `by`.
  // CHECK: parse-errors.mlir:[[@LINE+1]]:21: error: expected ':'
  %t = tile.scale %s 0.125 : tensor<?x?x?x?xf32>
  return
}

// -----

func.func @missing_bound(%v: memref<?x?x?x64xbf16>, %i: index) {
  // CHECK: parse-errors.mlir:[[@LINE+1]]:39: error: custom op 'tile.block_load' expected 'bound'
  %b = tile.block_load %v[%i, %i, %i] : memref<?x?x?x64xbf16> -> tensor<32x64xbf16>
  return
}

// -----

func.func @unknown_op(%s: tensor<?x?x?x?xf32>) {
  // CHECK: parse-errors.mlir:[[@LINE+1]]:8: error: custom op 'tile.frobnicate' is unknown
  %t = tile.frobnicate %s : tensor<?x?x?x?xf32>
  return
}

// -----

// Reductions are max or sum; the parser lists the accepted keywords.
func.func @unknown_reduce_kind(%s: tensor<64x32xf32>) {
  // CHECK: parse-errors.mlir:[[@LINE+2]]:20: error: custom op 'tile.reduce' expected {{.*}}ReduceKind to be one of: max, sum
  // CHECK: parse-errors.mlir:[[@LINE+1]]:{{[0-9]+}}: error: custom op 'tile.reduce' failed to parse Tile_ReduceKindAttr
  %r = tile.reduce min %s : tensor<64x32xf32> -> tensor<64xf32>
  return
}
