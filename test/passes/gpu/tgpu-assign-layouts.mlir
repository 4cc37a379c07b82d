// RUN: tilefuse-opt %s -tgpu-assign-layouts | FileCheck %s --check-prefix=SYNC
// RUN: tilefuse-opt %s -tgpu-assign-layouts="rows-per-warp=32 q-operand=shared" \
// RUN:   | FileCheck %s --check-prefix=RPW32
// RUN: tilefuse-opt %s -tgpu-assign-layouts=mma=wgmma | FileCheck %s --check-prefix=WGMMA
// RUN: tilefuse-opt %kernels/causal.mlir --tile-front-end --tile-pipeline \
// RUN:   -tgpu-assign-layouts=mma=wgmma | FileCheck %s --check-prefix=CAUSAL

// tgpu-assign-layouts writes each block's layout into its type, from its role: accumulators
// (block_dot results, reduced and broadcast blocks), their rows (reductions, the running max
// and sum), Q as A fragments (or a shared tile), K and V as shared tiles swizzled for the mma.
// Everything else takes the layout of the values it is computed with or carried as.

!view = memref<?x?x?x64xbf16>
!lse = memref<?x?x?xf32>

// A small tiled kernel (the shape of the tile-pipeline output, one program): Q loaded once,
// the key block carried through the loop (prefetched), the value block loaded in the loop.

// SYNC-LABEL: func.func @kernel
// SYNC:         arith.constant dense<0xFF800000> : tensor<64xf32, #tgpu.acc_rows<#tgpu.mma_acc<warps = 4, rows_per_warp = 16>>>
// SYNC:         arith.constant dense<0.000000e+00> : tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>
// SYNC:         tile.block_load {{.+}} -> tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
// SYNC:         tile.block_load {{.+}} -> tensor<64x64xbf16, #tgpu.shared<chunk_xor>>
// SYNC:         scf.for {{.+}} -> (tensor<64xf32, #tgpu.acc_rows<#tgpu.mma_acc<warps = 4, rows_per_warp = 16>>>, tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>, tensor<64x64xbf16, #tgpu.shared<chunk_xor>>)
// SYNC:           tile.block_load {{.+}} -> tensor<64x64xbf16, #tgpu.shared<chunk_xor>>
// SYNC:           tile.block_dot {{.+}} transpose_rhs : tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>, tensor<64x64xbf16, #tgpu.shared<chunk_xor>> -> tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>
// SYNC:           tile.block_mask {{.+}} : tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>
// SYNC:           tile.reduce max {{.+}} : tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>> -> tensor<64xf32, #tgpu.acc_rows<#tgpu.mma_acc<warps = 4, rows_per_warp = 16>>>
// SYNC:           arith.maximumf {{.+}} : tensor<64xf32, #tgpu.acc_rows<#tgpu.mma_acc<warps = 4, rows_per_warp = 16>>>
// SYNC:           tile.broadcast {{.+}} : tensor<64xf32, #tgpu.acc_rows<#tgpu.mma_acc<warps = 4, rows_per_warp = 16>>> -> tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>
// SYNC:           math.exp2 {{.+}} : tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>
// SYNC:           tile.block_load {{.+}} -> tensor<64x64xbf16, #tgpu.shared<chunk_xor>>
// SYNC:           tile.block_dot {{.+}} acc {{.+}} : tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>, tensor<64x64xbf16, #tgpu.shared<chunk_xor>>, tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>> -> tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>
// SYNC:           scf.yield
// SYNC:         tile.block_store {{.+}} : tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>, memref<?x?x?x64xbf16>
// SYNC:         tile.block_store {{.+}} : tensor<64xf32, #tgpu.acc_rows<#tgpu.mma_acc<warps = 4, rows_per_warp = 16>>>, memref<?x?x?xf32>

// Two m16 tiles per warp: 2 warps for 64 rows; Q in a shared tile.
// RPW32-LABEL: func.func @kernel
// RPW32:         tile.block_load {{.+}} -> tensor<64x64xbf16, #tgpu.shared<chunk_xor>>
// RPW32:         tile.block_dot {{.+}} transpose_rhs : tensor<64x64xbf16, #tgpu.shared<chunk_xor>>, tensor<64x64xbf16, #tgpu.shared<chunk_xor>> -> tensor<64x64xf32, #tgpu.mma_acc<warps = 2, rows_per_warp = 32>>
// RPW32:         tile.reduce max {{.+}} -> tensor<64xf32, #tgpu.acc_rows<#tgpu.mma_acc<warps = 2, rows_per_warp = 32>>>

// wgmma: one warpgroup's accumulator; K and V in the 128-byte swizzle its descriptors read.
// WGMMA-LABEL: func.func @kernel
// WGMMA:         tile.block_load {{.+}} -> tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
// WGMMA:         tile.block_dot {{.+}} transpose_rhs : tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>, tensor<64x64xbf16, #tgpu.shared<canonical_128b>> -> tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
// WGMMA:         tile.reduce max {{.+}} -> tensor<64xf32, #tgpu.acc_rows<#tgpu.wgmma_acc<warpgroups = 1>>>
// WGMMA:         tile.block_dot {{.+}} acc {{.+}} : tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>, tensor<64x64xbf16, #tgpu.shared<canonical_128b>>, tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>> -> tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
func.func @kernel(%q: !view, %k: !view, %v: !view, %o: !view, %lse: !lse, %b: index, %h: index,
                  %m0: index, %m: index, %n: index, %blocks: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %ninf = arith.constant dense<0xFF800000> : tensor<64xf32>
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %qb = tile.block_load %q[%b, %h, %m0] bound %m : !view -> tensor<64x64xbf16>
  %k0 = tile.block_load %k[%b, %h, %c0] bound %n : !view -> tensor<64x64xbf16>
  %r:3 = scf.for %j = %c0 to %blocks step %c1 iter_args(%mi = %ninf, %acc = %zero, %kb = %k0)
      -> (tensor<64xf32>, tensor<64x64xf32>, tensor<64x64xbf16>) {
    %n0 = arith.muli %j, %c64 : index
    %n1 = arith.addi %n0, %c64 : index
    %knext = tile.block_load %k[%b, %h, %n1] bound %n : !view -> tensor<64x64xbf16>
    %s = tile.block_dot %qb, %kb transpose_rhs : tensor<64x64xbf16>, tensor<64x64xbf16> -> tensor<64x64xf32>
    %sm = tile.block_mask %s at(%b, %h, %m0, %n0) : tensor<64x64xf32> {
    ^bb0(%bi: index, %hi: index, %qi: index, %ki: index):
      %in = arith.cmpi ult, %ki, %n : index
      tile.yield %in : i1
    }
    %rowmax = tile.reduce max %sm : tensor<64x64xf32> -> tensor<64xf32>
    %mnew = arith.maximumf %mi, %rowmax : tensor<64xf32>
    %mb = tile.broadcast %mnew : tensor<64xf32> -> tensor<64x64xf32>
    %d = arith.subf %sm, %mb : tensor<64x64xf32>
    %p = math.exp2 %d : tensor<64x64xf32>
    %vb = tile.block_load %v[%b, %h, %n0] bound %n : !view -> tensor<64x64xbf16>
    %accnew = tile.block_dot %p, %vb acc %acc : tensor<64x64xf32>, tensor<64x64xbf16>, tensor<64x64xf32> -> tensor<64x64xf32>
    scf.yield %mnew, %accnew, %knext : tensor<64xf32>, tensor<64x64xf32>, tensor<64x64xbf16>
  }
  tile.block_store %r#1, %o[%b, %h, %m0] bound %m : tensor<64x64xf32>, !view
  tile.block_store %r#0, %lse[%b, %h, %m0] bound %m : tensor<64xf32>, !lse
  return
}

// The bundled causal kernel through the front end and tile-pipeline, for wgmma.
// CAUSAL-LABEL: func.func @causal
// CAUSAL:         tile.block_load {{.+}} -> tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
// CAUSAL:         tile.block_load {{.+}} -> tensor<64x64xbf16, #tgpu.shared<canonical_128b>>
// CAUSAL:         scf.for
// CAUSAL:           tile.block_load {{.+}} -> tensor<64x64xbf16, #tgpu.shared<canonical_128b>>
// CAUSAL:           tile.block_dot {{.+}} -> tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
// CAUSAL:           tile.reduce max {{.+}} -> tensor<64xf32, #tgpu.acc_rows<#tgpu.wgmma_acc<warpgroups = 1>>>
// CAUSAL:         tile.block_store {{.+}} : tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
