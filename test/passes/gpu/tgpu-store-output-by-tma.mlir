// RUN: tilefuse-opt %s -split-input-file -verify-diagnostics \
// RUN:   -tgpu-store-output-by-tma="force=true" | FileCheck %s
// RUN: tilefuse-opt %s -split-input-file -tgpu-store-output-by-tma 2>&1 \
// RUN:   | FileCheck %s --check-prefix=OFF

// tgpu-store-output-by-tma: the consumers' store of O in a warp-specialized kernel whose producer
// loads Q with TMA goes through a shared buffer and one TMA store per consumer warpgroup.
// Without o_tma in the module's tile.config (and no force) the pass leaves the kernel alone.
// OFF-LABEL: func.func @one_tile
// OFF-NOT:   tgpu.tma_store
// OFF-LABEL: func.func @tile_loop
// OFF:       tgpu.tma_store

!view = memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!acc = tensor<128x128xf32, #tgpu.wgmma_acc<warpgroups = 2>>
!rows = tensor<128xf32, #tgpu.acc_rows<#tgpu.wgmma_acc<warpgroups = 2>>>
!qmap = !nvgpu.tensormap.descriptor<tensor = memref<1x1x128x64xbf16, 3>, swizzle = swizzle_128b, l2promo = l2promo_256b, oob = zero, interleave = none>

// One tile a CTA, two consumer warpgroups: each writes its 64 rows, meets its own barrier (10
// and 11), and its thread 0 stores rows 64 w of the buffer at row r0 + 64 w of O. No wait before
// the first write (nothing stored yet); the issuing threads wait for their stores at the end of
// the partition. The LSE store stays.
// CHECK-LABEL: func.func @one_tile
// CHECK-DAG:     %[[OBUF:.+]] = tgpu.alloc : !tgpu.buffer<128x128xbf16, #tgpu.shared<canonical_128b>>
// CHECK-DAG:     %[[OMAP:.+]] = tgpu.tensor_map %arg3 : {{.+}} -> <tensor = memref<1x1x64x64xbf16, 3>, swizzle = swizzle_128b
// CHECK:         tgpu.warp_specialize partition warps 8 registers 240 {
// CHECK-NOT:       nvvm.cp.async.bulk.wait_group
// CHECK-NOT:       tile.block_store %{{.+}}, %arg3
// CHECK:           tgpu.local_store %{{.+}}, %[[OBUF]] : tensor<128x128xf32, #tgpu.wgmma_acc<warpgroups = 2>>
// CHECK-NEXT:      nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT:      tgpu.named_barrier sync id 10 threads 128 warpgroup own among 2 from 0
// CHECK:           scf.if
// CHECK:             %[[TID:.+]] = gpu.thread_id x
// CHECK:             %[[WG:.+]] = arith.divui %[[TID]], %c128
// CHECK:             %[[FIRST:.+]] = arith.muli %[[WG]], %c64
// CHECK:             %[[ROW:.+]] = arith.addi %[[R0:.+]], %[[FIRST]]
// CHECK:             tgpu.tma_store %[[OBUF]][%[[FIRST]]] into %[[OMAP]][%{{.+}}, %[[ROW]], %{{.+}}, %{{.+}}]
// CHECK:           }
// CHECK:           tile.block_store %{{.+}}, %arg4
// CHECK:           scf.if
// CHECK-NEXT:        nvvm.cp.async.bulk.wait_group 0
// CHECK-NOT:         read
// CHECK:         } partition warps 4 registers 24 {
func.func @one_tile(%q: !view, %k: !view, %v: !view, %o: !view, %lse: !lse, %acc: !acc,
                    %l: !rows, %b: index, %h: index, %r0: index) {
  %c2 = arith.constant 2 : index
  %M = memref.dim %q, %c2 : !view
  %qmap = tgpu.tensor_map %q : !view -> !qmap
  tgpu.warp_specialize
    partition warps 8 registers 240 {
      tile.block_store %acc, %o[%b, %h, %r0] bound %M : !acc, !view
      tile.block_store %l, %lse[%b, %h, %r0] bound %M : !rows, !lse
    }
    partition warps 4 registers 24 {
    }
  return
}

// -----

!view = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
!qmap = !nvgpu.tensormap.descriptor<tensor = memref<1x1x64x64xbf16, 3>, swizzle = swizzle_128b, l2promo = l2promo_256b, oob = zero, interleave = none>

// A persistent tile loop (the module's tile.config asks for o_tma): before writing the buffer again, the issuing thread waits until its
// previous store has read it, and the warpgroup meets so nobody writes before that.
// CHECK-LABEL: func.func @tile_loop
// CHECK:         scf.for
// CHECK:           scf.if
// CHECK-NEXT:        nvvm.cp.async.bulk.wait_group 0 {read}
// CHECK:           tgpu.named_barrier sync id 10 threads 128 warpgroup own among 1 from 0
// CHECK-NEXT:      tgpu.local_store
// CHECK:           tgpu.tma_store
// CHECK:         }
// CHECK:         nvvm.cp.async.bulk.wait_group 0
// CHECK:       } partition warps 4 registers 24 {
module attributes {tile.config = #tile.config<"mma=wgmma,q=shared,warp_specialize=true,o_tma=true">} {
func.func @tile_loop(%q: !view, %k: !view, %v: !view, %o: !view, %lse: !lse, %acc: !acc,
                     %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %M = memref.dim %o, %c2 : !view
  %qmap = tgpu.tensor_map %q : !view -> !qmap
  tgpu.warp_specialize
    partition warps 4 registers 240 {
      scf.for %t = %c0 to %n step %c1 {
        tile.block_store %acc, %o[%c0, %c0, %t] bound %M : !acc, !view
      }
    }
    partition warps 4 registers 24 {
    }
  return
}
}

// -----

!view = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>

// Q not loaded by TMA: O's map would have no place in the launch ABI.
// expected-error @+1 {{the producer must load Q with TMA}}
func.func @no_query_map(%q: !view, %k: !view, %v: !view, %o: !view, %lse: !lse, %acc: !acc) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %M = memref.dim %o, %c2 : !view
  tgpu.warp_specialize
    partition warps 4 registers 240 {
      tile.block_store %acc, %o[%c0, %c0, %c0] bound %M : !acc, !view
    }
    partition warps 4 registers 24 {
    }
  return
}

// -----

!view = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
!qmap = !nvgpu.tensormap.descriptor<tensor = memref<1x1x64x64xbf16, 3>, swizzle = swizzle_128b, l2promo = l2promo_256b, oob = zero, interleave = none>

// Rows bounded by something other than M (a varlen sequence's length): the map cannot clip there.
func.func @other_bound(%q: !view, %k: !view, %v: !view, %o: !view, %lse: !lse, %acc: !acc,
                       %len: index) {
  %c0 = arith.constant 0 : index
  %qmap = tgpu.tensor_map %q : !view -> !qmap
  tgpu.warp_specialize
    partition warps 4 registers 240 {
      // expected-error @+1 {{bounded by M}}
      tile.block_store %acc, %o[%c0, %c0, %c0] bound %len : !acc, !view
    }
    partition warps 4 registers 24 {
    }
  return
}

// -----

!view = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>

// No warp roles: nothing issues the store for a warpgroup.
// expected-error @+1 {{needs the warp-specialized kernel}}
func.func @no_roles(%q: !view, %k: !view, %v: !view, %o: !view, %lse: !lse, %acc: !acc) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %M = memref.dim %o, %c2 : !view
  tile.block_store %acc, %o[%c0, %c0, %c0] bound %M : !acc, !view
  return
}
