// RUN: tilefuse-opt %s -split-input-file -tile-split-kv -verify-diagnostics | FileCheck %s

// A tiled program: (batch, head, row block) over key blocks [lo, hi), then the normalized O and
// the LSE stored. The split adds the grid dimension and the workspace arguments, shares the key
// blocks out, stores the partials at row s*B + b and merges in the last program to arrive.

// CHECK-LABEL: func.func @tiled
// CHECK-SAME:    %[[O:[^:]+]]: memref<?x?x?x16xf32>, %[[LSE:[^:]+]]: memref<?x?x?xf32>,
// CHECK-SAME:    %[[OP:[^:]+]]: memref<?x?x?x16xf32>, %[[LP:[^:]+]]: memref<?x?x?xf32>, %[[CNT:[^:]+]]: memref<?x?x?xi32>, %[[S:[^:]+]]: index)
// CHECK:         scf.forall (%[[B:.+]], %[[H:.+]], %[[MB:.+]], %[[SP:.+]]) in (%[[NB:.+]], %{{.+}}, %{{.+}}, %[[S]])
// CHECK:           %[[N:.+]] = arith.subi %[[HI:.+]], %[[LO:.+]] : index
// CHECK:           %[[CNTB:.+]] = arith.maxsi %[[N]], %{{.+}} : index
// CHECK:           %[[SHARE:.+]] = arith.ceildivui %[[CNTB]], %[[S]] : index
// CHECK:           %[[OFF:.+]] = arith.muli %[[SP]], %[[SHARE]] : index
// CHECK:           %[[START:.+]] = arith.addi %[[LO]], %[[OFF]] : index
// CHECK:           %[[SLO:.+]] = arith.minsi %[[START]], %[[HI]] : index
// CHECK:           %[[END:.+]] = arith.addi %[[SLO]], %[[SHARE]] : index
// CHECK:           %[[SHI:.+]] = arith.minsi %[[END]], %[[HI]] : index
// CHECK:           %[[R:.+]]:2 = scf.for %{{.+}} = %[[SLO]] to %[[SHI]]
// CHECK:           } {tile.kv_loop}
// CHECK:           %[[SB:.+]] = arith.muli %[[SP]], %[[NB]] : index
// CHECK:           %[[ROW:.+]] = arith.addi %[[SB]], %[[B]] : index
// CHECK:           tile.block_store %[[R]]#1, %[[OP]][%[[ROW]], %[[H]], %{{.+}}] bound %{{.+}} : tensor<16x16xf32>, memref<?x?x?x16xf32>
// CHECK:           tile.block_store %[[R]]#0, %[[LP]][%[[ROW]], %[[H]], %{{.+}}] bound %{{.+}} : tensor<16xf32>, memref<?x?x?xf32>
// CHECK:           %[[LAST:.+]] = tile.split_arrive %[[CNT]][%[[B]], %[[H]], %[[MB]]] count %[[S]]
// CHECK:           scf.if %[[LAST]] {
// The merge reads the partials four splits at a time (their loads in flight together), then
// the S mod 4 left over one by one.
// CHECK:             %[[C4:.+]] = arith.constant 4 : index
// CHECK:             %[[QUARTER:.+]] = arith.divui %[[S]], %[[C4]] : index
// CHECK:             %[[WHOLE:.+]] = arith.muli %[[QUARTER]], %[[C4]] : index
// CHECK:             %[[M4:.+]]:3 = scf.for %{{.+}} = %{{.+}} to %[[WHOLE]] step %[[C4]] iter_args
// CHECK-COUNT-4:       tile.block_load %[[LP]]
// CHECK-NOT:           math.exp
// CHECK:               arith.maximumf
// CHECK-COUNT-8:       math.exp
// CHECK:               scf.yield
// CHECK:             %[[M:.+]]:3 = scf.for %[[T:.+]] = %[[WHOLE]] to %[[S]] step %{{.+}} iter_args(%{{.+}} = %[[M4]]#0, %{{.+}} = %[[M4]]#1, %{{.+}} = %[[M4]]#2)
// CHECK:               %[[TB:.+]] = arith.muli %[[T]], %[[NB]] : index
// CHECK:               %[[TROW:.+]] = arith.addi %[[TB]], %[[B]] : index
// CHECK:               tile.block_load %[[LP]][%[[TROW]], %[[H]], %{{.+}}] {{.*}} -> tensor<16xf32>
// CHECK:               tile.block_load %[[OP]][%[[TROW]], %[[H]], %{{.+}}] {{.*}} -> tensor<16x16xf32>
// CHECK:               arith.maximumf
// CHECK-COUNT-2:       math.exp
// CHECK:               scf.yield
// CHECK:             %[[RS:.+]] = arith.divf %{{.+}}, %{{.+}} : tensor<16xf32>
// CHECK:             tile.broadcast %[[RS]]
// CHECK:             arith.mulf %[[M]]#2
// CHECK:             math.log %[[M]]#1
// CHECK:             tile.block_store %{{.+}}, %[[O]][%[[B]], %[[H]], %{{.+}}] bound
// CHECK:             tile.block_store %{{.+}}, %[[LSE]][%[[B]], %[[H]], %{{.+}}] bound
!v = memref<?x?x?x16xf32>
func.func @tiled(%Q: !v, %K: !v, %V: !v, %O: !v, %LSE: memref<?x?x?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c16 = arith.constant 16 : index
  %B = memref.dim %Q, %c0 : !v
  %H = memref.dim %Q, %c1 : !v
  %M = memref.dim %Q, %c2 : !v
  %N = memref.dim %K, %c2 : !v
  %rows = arith.ceildivui %M, %c16 : index
  %blocks = arith.ceildivui %N, %c16 : index
  %zero = arith.constant dense<0.0> : tensor<16xf32>
  %acc0 = arith.constant dense<0.0> : tensor<16x16xf32>
  scf.forall (%b, %h, %mb) in (%B, %H, %rows) {
    %row = arith.muli %mb, %c16 : index
    %lo = arith.muli %mb, %c0 : index
    %r:2 = scf.for %j = %lo to %blocks step %c1 iter_args(%l = %zero, %acc = %acc0)
        -> (tensor<16xf32>, tensor<16x16xf32>) {
      %col = arith.muli %j, %c16 : index
      %k = tile.block_load %K[%b, %h, %col] bound %N : !v -> tensor<16x16xf32>
      %s = tile.block_dot %k, %k transpose_rhs : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<16x16xf32>
      %a = arith.addf %acc, %s : tensor<16x16xf32>
      scf.yield %l, %a : tensor<16xf32>, tensor<16x16xf32>
    } {tile.kv_loop}
    tile.block_store %r#1, %O[%b, %h, %row] bound %M : tensor<16x16xf32>, !v
    tile.block_store %r#0, %LSE[%b, %h, %row] bound %M : tensor<16xf32>, memref<?x?x?xf32>
  }
  return
}

// -----

// expected-error @+1 {{tile-split-kv: expects one (batch, head, row block) scf.forall of a tiled kernel (run tile-tiling first)}}
func.func @untiled(%Q: memref<?x?x?x16xf32>) {
  return
}

// -----

!v = memref<?x?x?x16xf32>
func.func @no_key_loop(%O: !v, %M: index, %B: index) {
  %zero = arith.constant dense<0.0> : tensor<16x16xf32>
  // expected-error @+1 {{tile-split-kv: the program needs a key loop (tile.kv_loop) and the block stores of O and LSE after it}}
  scf.forall (%b, %h, %mb) in (%B, %B, %B) {
    tile.block_store %zero, %O[%b, %h, %mb] bound %M : tensor<16x16xf32>, !v
  }
  return
}
