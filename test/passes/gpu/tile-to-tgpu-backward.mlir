// RUN: tilefuse-opt %kernels/causal.mlir --tile-specialize="config=Br=64,Bc=64,mma=sync" \
// RUN:   --tile-derive-backward=keep-forward=false --tile-tiling-backward \
// RUN:   --tile-outline-backward-phases --canonicalize -tgpu-assign-layouts -tile-to-tgpu \
// RUN:   | FileCheck %s
// RUN: tilefuse-opt %kernels/causal.mlir --tile-specialize="config=Br=64,Bc=64,mma=sync" \
// RUN:   --tile-derive-backward=keep-forward=false --tile-tiling-backward \
// RUN:   --tile-outline-backward-phases --canonicalize -tgpu-assign-layouts -tile-to-tgpu \
// RUN:   -tgpu-insert-barriers | FileCheck %s --check-prefix=BARRIERS
// RUN: tilefuse-opt %kernels/causal.mlir --tile-specialize="config=Br=64,Bc=64,mma=wgmma" \
// RUN:   --tile-derive-backward=keep-forward=false --tile-tiling-backward \
// RUN:   --tile-outline-backward-phases --canonicalize -tgpu-assign-layouts -tile-to-tgpu \
// RUN:   | FileCheck %s --check-prefix=WGMMA

// tile-to-tgpu on a backward kernel: the transposed lhs of dS^T Q and P^T dO (accumulators)
// are written into shared buffers of their own (tgpu.local_store), which the mma reads
// transposed; dQ += dS K packs dS in place as the forward packs P.
// tgpu-insert-barriers then orders each write before its reader (a barrier between them) and
// after the buffer's readers of the previous iteration.

// CHECK-LABEL: func.func @causal_backward_key_gradients
// CHECK-COUNT-6: tgpu.alloc : !tgpu.buffer<64x64xbf16, #tgpu.shared<chunk_xor>>
// CHECK:         scf.for
// CHECK:           tgpu.local_store %[[DSV:.+]], %[[DS:[^ ]+]] : tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>, <64x64xbf16, #tgpu.shared<chunk_xor>>
// CHECK-NEXT:      nvgpu.device_async_wait
// CHECK-NEXT:      tgpu.mma %[[DS]], %{{.+}} acc %{{.+}} transpose_lhs : !tgpu.buffer<64x64xbf16, #tgpu.shared<chunk_xor>>
// CHECK-NEXT:      tgpu.local_store %{{.+}}, %[[P:[^ ]+]] :
// CHECK-NEXT:      nvgpu.device_async_wait
// CHECK-NEXT:      tgpu.mma %[[P]], %{{.+}} acc %{{.+}} transpose_lhs
// CHECK-NEXT:      %[[PACKED:.+]] = tgpu.pack_operand_a %[[DSV]]
// CHECK-NEXT:      nvgpu.device_async_wait
// CHECK-NEXT:      tgpu.mma %[[PACKED]], %{{.+}} : tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>

// BARRIERS-LABEL: func.func @causal_backward_key_gradients
// BARRIERS:         tgpu.local_store
// BARRIERS-NEXT:    gpu.barrier
// BARRIERS-NEXT:    tgpu.mma {{.+}} transpose_lhs
// BARRIERS-NEXT:    tgpu.local_store
// BARRIERS-NEXT:    gpu.barrier
// BARRIERS-NEXT:    tgpu.mma {{.+}} transpose_lhs

// With mma=wgmma the staging buffers are canonical_128b, which the wgmma reads MN-major
// (transpose_lhs); Q is read from shared memory by descriptor.
// WGMMA-LABEL: func.func @causal_backward_key_gradients
// WGMMA-COUNT-6: tgpu.alloc : !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>
// WGMMA:         scf.for
// WGMMA:           tgpu.wgmma %{{.+}}, %{{.+}} transpose_rhs : !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>, <64x64xbf16, #tgpu.shared<canonical_128b>> -> tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
// WGMMA:           tgpu.local_store %[[DSV:.+]], %[[DS:[^ ]+]] : tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>, <64x64xbf16, #tgpu.shared<canonical_128b>>
// WGMMA:           tgpu.wgmma %[[DS]], %{{.+}} acc %{{.+}} transpose_lhs : !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>
// WGMMA:           tgpu.pack_operand_a %[[DSV]] : tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>> -> tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
