// RUN: tilefuse-opt %s --tile-specialize="config=block-n=32,mma=sync,Br=128" \
// RUN:   | FileCheck %s --check-prefix=WRITE
// RUN: tilefuse-opt %s --tile-specialize="config=Br=128,rows_per_warp=32" --tile-front-end \
// RUN:   --tile-pipeline -tgpu-assign-layouts | FileCheck %s --check-prefix=READ
// RUN: tilefuse-opt %s --tile-specialize="config=Br=128,rows_per_warp=32" \
// RUN:   --tile-front-end="block-m=32" --tile-pipeline -tgpu-assign-layouts="rows-per-warp=16" \
// RUN:   | FileCheck %s --check-prefix=READ
// RUN: tilefuse-opt %s --tile-to-ptx="config=Br=128 arch=sm_80" \
// RUN:   | FileCheck %s --check-prefix=PTX
// RUN: not tilefuse-opt %s --tile-specialize="config=Br=24" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BAD
// RUN: not tilefuse-opt %s --tile-specialize="config=Br=64,colour=red" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=UNKNOWN

// tile-specialize{config} writes the kernel configuration on the module, in its canonical text,
// replacing the one the module had. tile-tiling (Br) and tgpu-assign-layouts (rows per warp) read
// it there, and it wins over their options: 128 rows in warps of 32 rows are 4 warps (Br = 64
// from the options would give 64-row blocks, 16 rows per warp 8 warps).

// WRITE: module attributes {tile.config = #tile.config<"Br=128,Bc=32,mma=sync">}

// READ-LABEL: func.func @attention(
// READ:         tile.block_dot {{.+}} -> tensor<128x{{[0-9]+}}xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 32>>

// tile-to-ptx{config} writes it first (its leading tile-specialize), over the module's Br=64:
// 128 rows in 8 warps of 16.
// PTX: .maxntid 256, 1, 1

// BAD: error: tile-specialize: config 'Br=24': block-m must be a multiple of 16 up to 256
// UNKNOWN: error: tile-specialize: config 'Br=64,colour=red': unknown setting 'colour'

!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>
module attributes {tile.config = #tile.config<"Br=64">} {
  func.func @attention(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
    %q = tile.load %Q : !qkv -> !in
    %k = tile.load %K : !qkv -> !in
    %v = tile.load %V : !qkv -> !in
    %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
    %t = tile.scale %s : !scores
    %p, %lse = tile.softmax %t : !scores -> !scores, tensor<?x?x?xf32>
    %o = tile.dot %p, %v : !scores, !in -> tensor<?x?x?x64xf32>
    tile.store %o, %O : tensor<?x?x?x64xf32>, !qkv
    tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
    return
  }
}
