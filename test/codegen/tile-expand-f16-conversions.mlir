// RUN: tilefuse-opt %s --tile-expand-f16-conversions | FileCheck %s

// f16 <-> f32 conversions become integer and f32 arithmetic; other conversions stay.
// (Their values are checked exhaustively against the C compiler's _Float16 in
// test/unit/ExpandF16ConversionsTest.cpp.)

// CHECK-LABEL: func.func @extend(
// CHECK-NOT:     arith.extf
// CHECK:         arith.bitcast %{{.+}} : f16 to i16
// CHECK:         arith.mulf
// CHECK:         arith.select
// CHECK:         return
func.func @extend(%x: f16) -> f32 {
  %y = arith.extf %x : f16 to f32
  return %y : f32
}

// To f64: through the exact f32.
// CHECK-LABEL: func.func @extend_f64(
// CHECK:         arith.bitcast %{{.+}} : f16 to i16
// CHECK:         arith.extf %{{.+}} : f32 to f64
func.func @extend_f64(%x: f16) -> f64 {
  %y = arith.extf %x : f16 to f64
  return %y : f64
}

// CHECK-LABEL: func.func @truncate(
// CHECK-NOT:     arith.truncf
// CHECK:         arith.addf
// CHECK:         arith.trunci %{{.+}} : i32 to i16
// CHECK:         arith.bitcast %{{.+}} : i16 to f16
func.func @truncate(%x: f32) -> f16 {
  %y = arith.truncf %x : f32 to f16
  return %y : f16
}

// Vectors element by element; bf16 is not this pass's (arith-expand's).
// CHECK-LABEL: func.func @vector_and_bf16(
// CHECK:         arith.bitcast %{{.+}} : vector<4xf16> to vector<4xi16>
// CHECK:         arith.truncf %{{.+}} : f32 to bf16
func.func @vector_and_bf16(%v: vector<4xf16>, %x: f32) -> (vector<4xf32>, bf16) {
  %y = arith.extf %v : vector<4xf16> to vector<4xf32>
  %b = arith.truncf %x : f32 to bf16
  return %y, %b : vector<4xf32>, bf16
}
