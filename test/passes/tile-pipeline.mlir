// RUN: tilefuse-opt %kernels/causal.mlir --tile-front-end --tile-pipeline | FileCheck %s
// RUN: tilefuse-opt %kernels/attention.mlir --tile-front-end --tile-pipeline \
// RUN:   | FileCheck %s --check-prefix=PLAIN
// RUN: tilefuse-opt %kernels/attention.mlir --tile-specialize="config=prefetch_values=true" \
// RUN:   --tile-front-end --tile-pipeline | FileCheck %s --check-prefix=VALUES
// RUN: tilefuse-opt %kernels/causal.mlir --tile-derive-backward=keep-forward=false \
// RUN:   --tile-tiling-backward --tile-block-pruning --canonicalize --tile-pipeline \
// RUN:   | FileCheck %s --check-prefix=BACKWARD

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

// prefetch_values: the value block (%arg2) is carried too, loaded before the loop after the
// first key block, and for the next iteration after the next key block; P·V reads the carried
// one.
// VALUES-LABEL: func.func @attention(
// VALUES:         %[[K0:.+]] = tile.block_load %arg1[
// VALUES:         %[[V0:.+]] = tile.block_load %arg2[
// VALUES:         scf.for %{{.+}} iter_args({{.*}}, %[[KCUR:[^ ]+]] = %[[K0]], %[[VCUR:[^ ]+]] = %[[V0]]) -> ({{.*}}, tensor<64x64xbf16>, tensor<64x64xbf16>)
// VALUES:           %[[KNEXT:.+]] = tile.block_load %arg1[
// VALUES:           %[[VNEXT:.+]] = tile.block_load %arg2[
// VALUES-NOT:       tile.block_load
// VALUES:           tile.block_dot %{{.+}}, %[[KCUR]] transpose_rhs
// VALUES:           tile.block_dot %{{.+}}, %[[VCUR]] acc
// VALUES:           scf.yield {{.*}}, %[[KNEXT]], %[[VNEXT]] :

// A backward's query loop (dK and dV of a key block) carries its query-side blocks, Q (%arg0)
// and dO (%arg4): both loaded before the loop and for the next iteration at its top, in the
// same order (so the copy groups in flight at the top of every iteration are in one order).
// BACKWARD-LABEL: func.func @causal_backward(
// BACKWARD:         %[[Q0:.+]] = tile.block_load %arg0[
// BACKWARD:         %[[DO0:.+]] = tile.block_load %arg4[
// BACKWARD:         scf.for %{{.+}} = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%{{.+}} = %{{.+}}, %{{.+}} = %{{.+}}, %{{.+}} = %[[Q0]], %{{.+}} = %[[DO0]]) -> (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xbf16>, tensor<64x64xbf16>)
// BACKWARD-NEXT:      arith.addi
// BACKWARD:           tile.block_load %arg0[
// BACKWARD:           tile.block_load %arg4[
// BACKWARD:         } {tile.query_loop}
