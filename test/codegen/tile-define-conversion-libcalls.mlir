// RUN: tilefuse-opt %s -split-input-file --tile-define-conversion-libcalls | FileCheck %s

// An empty module gets the three conversions, weak, each its arith op (expanded later in the
// CPU pipeline).
// CHECK-LABEL: module
// CHECK: func.func @__truncsfbf2(%[[X:.*]]: f32) -> bf16 attributes {llvm.linkage = #llvm.linkage<weak>}
// CHECK-NEXT: arith.truncf %[[X]] : f32 to bf16
// CHECK: func.func @__truncsfhf2(%[[Y:.*]]: f32) -> f16
// CHECK-NEXT: arith.truncf %[[Y]] : f32 to f16
// CHECK: func.func @__extendhfsf2(%[[Z:.*]]: f16) -> f32
// CHECK-NEXT: arith.extf %[[Z]] : f16 to f32
module {
}

// -----

// A module that defines one already keeps its own.
// CHECK-LABEL: module
// CHECK: func.func @__truncsfbf2(%{{.*}}: f32) -> bf16 {
// CHECK-NEXT: arith.constant
// CHECK-NOT: func.func @__truncsfbf2
// CHECK: func.func @__truncsfhf2
module {
  func.func @__truncsfbf2(%x: f32) -> bf16 {
    %c = arith.constant 1.0 : bf16
    return %c : bf16
  }
}
