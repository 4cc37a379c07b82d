// RUN: tilefuse-opt %s -split-input-file -verify-diagnostics -tgpu-pingpong="force=true" \
// RUN:   | FileCheck %s
// RUN: tilefuse-opt %s -split-input-file -tgpu-pingpong 2>&1 | FileCheck %s --check-prefix=OFF

// tgpu-pingpong: the consumer warpgroups of a warp-specialized kernel issue their GEMMs in
// turn. A section (wgmma issues with no wait between them) starts with a sync on the
// warpgroup's own barrier and ends with an arrive on the next warpgroup's; the last warpgroup
// arrives once first, and warpgroup 0 syncs once at the end.

!view = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!acc = tensor<128x64xf32, #tgpu.wgmma_acc<warpgroups = 2>>
!qa = tensor<128x64xbf16, #tgpu.operand_a<warps = 8, rows_per_warp = 16>>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>

// Without pingpong in the module's tile.config (and without force) nothing changes.
// OFF-LABEL: func.func @kernel
// OFF-NOT:     tgpu.named_barrier

// CHECK-LABEL: func.func @kernel
// CHECK:         tgpu.warp_specialize partition warps 8 registers 240 {
// The last consumer warpgroup (1) lets warpgroup 0 go first.
// CHECK-NEXT:      %[[TID:.+]] = gpu.thread_id x
// CHECK-NEXT:      %[[C128:.+]] = arith.constant 128 : index
// CHECK-NEXT:      %[[WG:.+]] = arith.divui %[[TID]], %[[C128]]
// CHECK-NEXT:      %[[C1:.+]] = arith.constant 1 : index
// CHECK-NEXT:      %[[IS1:.+]] = arith.cmpi eq, %[[WG]], %[[C1]]
// CHECK-NEXT:      scf.if %[[IS1]] {
// CHECK-NEXT:        tgpu.named_barrier arrive id 1 threads 256 warpgroup next among 2 from 0
// CHECK-NEXT:      }
// CHECK:           scf.for
// A rotated body's section: Q·Kᵀ and the pending P·V, then the wait for Q·Kᵀ.
// CHECK:             tgpu.named_barrier sync id 1 threads 256 warpgroup own among 2 from 0
// CHECK-NEXT:        tgpu.wgmma {{.+}} transpose_rhs
// CHECK-NEXT:        tgpu.wgmma {{.+}} acc
// CHECK-NEXT:        tgpu.named_barrier arrive id 1 threads 256 warpgroup next among 2 from 0
// CHECK-NEXT:        tgpu.wgmma_wait {{.+}} pending 1
// CHECK:             tgpu.wgmma_wait {{.+}} pending 0
// The epilogue's P·V is a section of its own.
// CHECK:           tgpu.named_barrier sync id 1 threads 256 warpgroup own among 2 from 0
// CHECK-NEXT:      tgpu.wgmma
// CHECK-NEXT:      tgpu.named_barrier arrive id 1 threads 256 warpgroup next among 2 from 0
// CHECK-NEXT:      tgpu.wgmma_wait {{.+}} pending 0
// CHECK:           tile.block_store
// Warpgroup 0 takes the first arrival back.
// CHECK:           %[[IS0:.+]] = arith.cmpi eq, %{{.+}}, %c0{{.*}} : index
// CHECK-NEXT:      scf.if %[[IS0]] {
// CHECK-NEXT:        tgpu.named_barrier sync id 1 threads 256 warpgroup own among 2 from 0
// CHECK-NEXT:      }
// CHECK-NEXT:    } partition warps 4 registers 24 {
// CHECK-NOT:       tgpu.named_barrier
func.func @kernel(%q: !view, %n: index) {
  %kbuf = tgpu.alloc : !buf
  %vbuf = tgpu.alloc : !buf
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant dense<0.0> : !acc
  scf.forall (%b, %h, %r) in (%c1, %c1, %c1) {
    tgpu.warp_specialize partition warps 8 registers 240 {
      %qb = tile.block_load %q[%b, %h, %c0] bound %n : !view -> !qa
      %res:2 = scf.for %j = %c0 to %n step %c1 iter_args(%acc = %zero, %p = %qb) -> (!acc, !qa) {
        %s:2 = tgpu.wgmma %qb, %kbuf transpose_rhs : !qa, !buf -> !acc, !qa
        %o:2 = tgpu.wgmma %p, %vbuf acc %acc : !qa, !buf, !acc -> !acc, !qa
        %sw:2 = tgpu.wgmma_wait %s#0, %s#1 pending 1 : !acc, !qa
        %pn = tgpu.pack_operand_a %sw#0 : !acc -> !qa
        %ow:2 = tgpu.wgmma_wait %o#0, %o#1 pending 0 : !acc, !qa
        scf.yield %ow#0, %pn : !acc, !qa
      }
      %last:2 = tgpu.wgmma %res#1, %vbuf acc %res#0 : !qa, !buf, !acc -> !acc, !qa
      %lw:2 = tgpu.wgmma_wait %last#0, %last#1 pending 0 : !acc, !qa
      tile.block_store %lw#0, %q[%b, %h, %c0] bound %n : !acc, !view
    } partition warps 4 registers 24 {
    }
  } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
  return
}

// -----

!view = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
!qa = tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>

// One consumer warpgroup has no one to take turns with.
func.func @one_warpgroup(%q: !view, %n: index) {
  %kbuf = tgpu.alloc : !buf
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.forall (%b, %h, %r) in (%c1, %c1, %c1) {
    // expected-error @below {{pingpong: the consumers are one warpgroup, with no other to take turns with (it needs Br >= 128)}}
    tgpu.warp_specialize partition warps 4 registers 240 {
      %qb = tile.block_load %q[%b, %h, %c0] bound %n : !view -> !qa
      %s:2 = tgpu.wgmma %qb, %kbuf transpose_rhs : !qa, !buf -> !acc, !qa
      %sw:2 = tgpu.wgmma_wait %s#0, %s#1 pending 0 : !acc, !qa
      tile.block_store %sw#0, %q[%b, %h, %c0] bound %n : !acc, !view
    } partition warps 4 registers 24 {
    }
  } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
  return
}
