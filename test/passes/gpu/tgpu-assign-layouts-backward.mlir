// RUN: tilefuse-opt %kernels/causal.mlir --tile-specialize="config=Br=64,Bc=64,mma=sync" \
// RUN:   --tile-derive-backward=keep-forward=false --tile-tiling-backward \
// RUN:   --tile-outline-backward-phases --canonicalize -tgpu-assign-layouts | FileCheck %s
// RUN: tilefuse-opt %kernels/causal.mlir --tile-specialize="config=Br=64,Bc=64,mma=wgmma" \
// RUN:   --tile-derive-backward=keep-forward=false --tile-tiling-backward \
// RUN:   --tile-outline-backward-phases --canonicalize -tgpu-assign-layouts \
// RUN:   | FileCheck %s --check-prefix=WGMMA

// The layouts of the derived backward's kernels (tile-outline-backward-phases' functions):
//   * preprocess: dO and O only feed D = rowsum(dO o O), so they are loaded as the accumulator
//     the product is (tile.block_map), 16-bit;
//   * key_gradients: Q and dO are the lhs of S = Q K^T and dP = dO V^T and the rhs of dK += dS^T Q
//     and dV += P^T dO, so both live in shared memory; the transposed lhs P and dS stay
//     accumulators (tile-to-tgpu writes them to shared memory); D, a vector operand of the
//     block_map dS = P o (dP - D), is the accumulator's rows;
//   * query_gradients: the dQ accumulator is only loaded and stored: no role places it, and it
//     is an accumulator.

// CHECK-LABEL: func.func @causal_backward_preprocess
// CHECK:         tile.block_load {{.+}} -> tensor<64x64xbf16, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>
// CHECK:         tile.block_map {{.+}} -> tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>
// CHECK:         tile.reduce sum {{.+}} -> tensor<64xf32, #tgpu.acc_rows<#tgpu.mma_acc<warps = 4, rows_per_warp = 16>>>
// CHECK-LABEL: func.func @causal_backward_key_gradients
// CHECK:         %[[K:.+]] = tile.block_load %arg1{{.+}} -> tensor<64x64xbf16, #tgpu.shared<chunk_xor>>
// CHECK:         %[[Q:.+]] = tile.block_load %arg0{{.+}} -> tensor<64x64xbf16, #tgpu.shared<chunk_xor>>
// CHECK:         tile.block_dot %[[Q]], %[[K]] transpose_rhs : tensor<64x64xbf16, #tgpu.shared<chunk_xor>>
// CHECK:         %[[DO:.+]] = tile.block_load %arg4{{.+}} -> tensor<64x64xbf16, #tgpu.shared<chunk_xor>>
// CHECK:         %[[D:.+]] = tile.block_load %arg9{{.+}} -> tensor<64xf32, #tgpu.acc_rows<#tgpu.mma_acc<warps = 4, rows_per_warp = 16>>>
// CHECK:         tile.block_map %{{.+}}, %{{.+}}, %[[D]] : tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>, tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>, tensor<64xf32, #tgpu.acc_rows<#tgpu.mma_acc<warps = 4, rows_per_warp = 16>>>
// CHECK:         tile.block_dot %{{.+}}, %[[Q]] acc %{{.+}} transpose_lhs : tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>, tensor<64x64xbf16, #tgpu.shared<chunk_xor>>
// CHECK:         tile.block_dot %{{.+}}, %[[DO]] acc %{{.+}} transpose_lhs
// CHECK:         tile.block_atomic_add %{{.+}} : tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>
// CHECK-LABEL: func.func @causal_backward_query_gradients
// CHECK:         tile.block_load %arg10{{.+}} -> tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>

// With mma=wgmma the same roles: one warpgroup's accumulator, the shared tiles in the
// descriptors' canonical_128b.
// WGMMA-LABEL: func.func @causal_backward_key_gradients
// WGMMA:         tile.block_dot %[[Q:.+]], %[[K:.+]] transpose_rhs : tensor<64x64xbf16, #tgpu.shared<canonical_128b>>, tensor<64x64xbf16, #tgpu.shared<canonical_128b>> -> tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
// WGMMA:         tile.block_load %arg9{{.+}} -> tensor<64xf32, #tgpu.acc_rows<#tgpu.wgmma_acc<warpgroups = 1>>>
// WGMMA:         tile.block_dot %{{.+}}, %[[Q]] acc %{{.+}} transpose_lhs : tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>, tensor<64x64xbf16, #tgpu.shared<canonical_128b>>
// WGMMA:         tile.block_atomic_add %{{.+}} : tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
