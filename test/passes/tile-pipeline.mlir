// RUN: tilefuse-opt %kernels/causal.mlir --tile-front-end --tile-pipeline | FileCheck %s
// RUN: tilefuse-opt %kernels/attention.mlir --tile-front-end --tile-pipeline \
// RUN:   | FileCheck %s --check-prefix=PLAIN

// tile-pipeline carries the key block through the key/value loop: the first one is loaded before
// the loop, the next one at the top of each iteration; the value block is requested at the top
// of each branch, before the scores that do not need it.

// The printer names the kernel arguments %arg0..%arg4 (Q, K, V, O, LSE).
// CHECK-LABEL: func.func @causal(
// CHECK:       scf.forall
// CHECK:         %[[K0:.+]] = tile.block_load %arg1[{{.*}}] bound
// CHECK:         scf.for %[[J:.+]] = {{.*}} iter_args({{.*}}, %[[KCUR:.+]] = %[[K0]]) -> ({{.*}}, tensor<64x64xbf16>)
// CHECK:           %[[NEXTJ:.+]] = arith.addi %[[J]], %c1
// CHECK:           %[[NEXTROW:.+]] = arith.muli %[[NEXTJ]]
// CHECK:           %[[KNEXT:.+]] = tile.block_load %arg1[{{.*}}, %[[NEXTROW]]] bound
// CHECK:           scf.if
// CHECK:             scf.if
// CHECK-NEXT:          tile.block_load %arg2
// CHECK-NEXT:          tile.block_dot %{{.+}}, %[[KCUR]] transpose_rhs
// CHECK-NOT:           tile.block_load %arg1
// CHECK:             } else {
// CHECK-NEXT:          tile.block_load %arg2
// CHECK-NEXT:          tile.block_dot %{{.+}}, %[[KCUR]] transpose_rhs
// CHECK:           scf.yield {{.*}}, %[[KNEXT]] :

// PLAIN-LABEL: func.func @attention(
// PLAIN:         scf.for {{.*}} iter_args({{.*}}) -> ({{.*}}, tensor<64x64xbf16>)
// PLAIN-COUNT-2:   tile.block_dot %{{.+}}, %{{.+}} transpose_rhs
