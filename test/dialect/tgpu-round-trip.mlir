// RUN: tilefuse-opt %s -split-input-file | tilefuse-opt -split-input-file | FileCheck %s
// RUN: tilefuse-opt %s -split-input-file --mlir-print-op-generic | tilefuse-opt -split-input-file | FileCheck %s

// Every attribute, type and op of the tgpu dialect prints in a form that parses back to the
// same thing. The pipeline does not produce this dialect yet (issue 9): this is hand-written
// IR of the shapes today's mma.sync and wgmma kernels use.

// CHECK-LABEL: func.func @register_layouts
// CHECK-SAME:    tensor<64x128xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>
// CHECK-SAME:    tensor<128x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 32>>
// CHECK-SAME:    tensor<128x64xi1, #tgpu.mma_acc<warps = 4, rows_per_warp = 32>>
// CHECK-SAME:    tensor<128x256xf32, #tgpu.wgmma_acc<warpgroups = 2>>
// CHECK-SAME:    tensor<64x128xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
// CHECK-SAME:    tensor<128x64xf16, #tgpu.operand_a<warps = 4, rows_per_warp = 32>>
// CHECK-SAME:    tensor<128xf32, #tgpu.acc_rows<#tgpu.mma_acc<warps = 4, rows_per_warp = 32>>>
// CHECK-SAME:    tensor<128xf32, #tgpu.acc_rows<#tgpu.wgmma_acc<warpgroups = 2>>>
func.func @register_layouts(
    %a: tensor<64x128xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>,
    %b: tensor<128x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 32>>,
    %m: tensor<128x64xi1, #tgpu.mma_acc<warps = 4, rows_per_warp = 32>>,
    %c: tensor<128x256xf32, #tgpu.wgmma_acc<warpgroups = 2>>,
    %q: tensor<64x128xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>,
    %p: tensor<128x64xf16, #tgpu.operand_a<warps = 4, rows_per_warp = 32>>,
    %r: tensor<128xf32, #tgpu.acc_rows<#tgpu.mma_acc<warps = 4, rows_per_warp = 32>>>,
    %s: tensor<128xf32, #tgpu.acc_rows<#tgpu.wgmma_acc<warpgroups = 2>>>) {
  return
}

// -----

// CHECK-LABEL: func.func @buffers_and_rings
// CHECK:         tgpu.alloc : !tgpu.buffer<64x128xbf16, #tgpu.shared<chunk_xor>>
// CHECK:         tgpu.alloc : !tgpu.buffer<16x24xf32, #tgpu.shared<none>>
// CHECK:         %[[R:.+]] = tgpu.alloc : !tgpu.ring<3 x 64x128xbf16, #tgpu.shared<canonical_128b>>
// CHECK:         tgpu.stage %[[R]][%{{.+}}] : <3 x 64x128xbf16, #tgpu.shared<canonical_128b>>
func.func @buffers_and_rings(%i: index) -> !tgpu.buffer<64x128xbf16, #tgpu.shared<canonical_128b>> {
  %b = tgpu.alloc : !tgpu.buffer<64x128xbf16, #tgpu.shared<chunk_xor>>
  %u = tgpu.alloc : !tgpu.buffer<16x24xf32, #tgpu.shared<none>>
  %ring = tgpu.alloc : !tgpu.ring<3 x 64x128xbf16, #tgpu.shared<canonical_128b>>
  %c3 = arith.constant 3 : index
  %s = arith.remui %i, %c3 : index
  %buf = tgpu.stage %ring[%s] : !tgpu.ring<3 x 64x128xbf16, #tgpu.shared<canonical_128b>>
  return %buf : !tgpu.buffer<64x128xbf16, #tgpu.shared<canonical_128b>>
}

// -----

// cp.async of a key block into one stage of a ring, in a commit group, then waited for
// (nvgpu's group and wait ops take the token).
// CHECK-LABEL: func.func @async_copy
// CHECK:         %[[T:.+]] = tgpu.async_copy %{{.+}}[%{{.+}}, %{{.+}}, %{{.+}}] bound %{{.+}} into %{{.+}} : memref<?x?x?x128xbf16>, <64x128xbf16, #tgpu.shared<chunk_xor>>
// CHECK:         %[[G:.+]] = nvgpu.device_async_create_group %[[T]]
// CHECK:         nvgpu.device_async_wait %[[G]] {numGroups = 0 : i32}
func.func @async_copy(%k: memref<?x?x?x128xbf16>, %b: index, %h: index, %n0: index, %n: index,
                      %i: index) {
  %ring = tgpu.alloc : !tgpu.ring<2 x 64x128xbf16, #tgpu.shared<chunk_xor>>
  %buf = tgpu.stage %ring[%i] : !tgpu.ring<2 x 64x128xbf16, #tgpu.shared<chunk_xor>>
  %t = tgpu.async_copy %k[%b, %h, %n0] bound %n into %buf
      : memref<?x?x?x128xbf16>, !tgpu.buffer<64x128xbf16, #tgpu.shared<chunk_xor>>
  %g = nvgpu.device_async_create_group %t
  nvgpu.device_async_wait %g {numGroups = 0 : i32}
  return
}

// -----

!map = !nvgpu.tensormap.descriptor<tensor = memref<1x1x64x64xbf16, 3>, swizzle = swizzle_128b,
                                   l2promo = none, oob = zero, interleave = none>
!bars = !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>
!buf = !tgpu.buffer<64x128xbf16, #tgpu.shared<canonical_128b>>

// A TMA load of a key block (two 128-byte panels) completing on mbarrier `stage`, with the
// mbarrier protocol of upstream nvgpu: init, arrive.expect_tx with the bytes, try_wait.parity.
// CHECK-LABEL: func.func @tma_load
// CHECK:         nvgpu.mbarrier.init
// CHECK:         nvgpu.mbarrier.arrive.expect_tx
// CHECK:         tgpu.tma_load %{{.+}}[%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}], %{{.+}}[%{{.+}}] into %{{.+}} : <tensor = memref<1x1x64x64xbf16, 3>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>, <memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>, <64x128xbf16, #tgpu.shared<canonical_128b>>
// CHECK:         nvgpu.mbarrier.try_wait.parity
func.func @tma_load(%map: !map, %row: index, %h: index, %b: index, %stage: index,
                    %phase: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %bytes = arith.constant 16384 : index
  %ticks = arith.constant 10000000 : index
  %bars = nvgpu.mbarrier.create -> !bars
  nvgpu.mbarrier.init %bars[%stage], %c1 : !bars
  %ring = tgpu.alloc : !tgpu.ring<2 x 64x128xbf16, #tgpu.shared<canonical_128b>>
  %buf = tgpu.stage %ring[%stage] : !tgpu.ring<2 x 64x128xbf16, #tgpu.shared<canonical_128b>>
  nvgpu.mbarrier.arrive.expect_tx %bars[%stage], %bytes : !bars
  tgpu.tma_load %map[%c0, %row, %h, %b], %bars[%stage] into %buf : !map, !bars, !buf
  nvgpu.mbarrier.try_wait.parity %bars[%stage], %phase, %ticks : !bars
  return
}

// -----

!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
!o = tensor<64x128xf32, #tgpu.wgmma_acc<warpgroups = 1>>
!q = tensor<64x128xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!p = tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!k = !tgpu.buffer<64x128xbf16, #tgpu.shared<canonical_128b>>

// S = Q K^T with Q in registers, then O += P V; each wgmma is waited for with the registers
// it reads and writes threaded through the wait.
// CHECK-LABEL: func.func @wgmma
// CHECK:         %[[S:[^ ,]+]], %[[SF:[^ ,]+]] = tgpu.wgmma %{{.+}}, %{{.+}} transpose_rhs : tensor<64x128xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>, <64x128xbf16, #tgpu.shared<canonical_128b>> -> tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
// CHECK:         tgpu.wgmma_wait %[[S]], %[[SF]] pending 0 : tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>, tensor<64x128xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
// CHECK:         %[[O:[^ ,]+]], %[[OF:[^ ,]+]] = tgpu.wgmma %{{.+}}, %{{.+}} acc %{{.+}} : tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>, <64x128xbf16, #tgpu.shared<canonical_128b>>, tensor<64x128xf32, #tgpu.wgmma_acc<warpgroups = 1>> -> tensor<64x128xf32, #tgpu.wgmma_acc<warpgroups = 1>>
// CHECK:         tgpu.wgmma_wait %[[O]], %[[OF]] pending 1
// CHECK:         tgpu.wgmma %{{.+}}, %{{.+}} : !tgpu.buffer<64x128xbf16, #tgpu.shared<canonical_128b>>, <128x128xbf16, #tgpu.shared<canonical_128b>> -> tensor<64x128xf32, #tgpu.wgmma_acc<warpgroups = 1>>
func.func @wgmma(%q: !q, %p: !p, %o: !o) -> (!acc, !o, !o) {
  %k = tgpu.alloc : !k
  %v = tgpu.alloc : !k
  %s, %qf = tgpu.wgmma %q, %k transpose_rhs : !q, !k -> !acc, !q
  %s1, %q1 = tgpu.wgmma_wait %s, %qf pending 0 : !acc, !q
  %o1, %pf = tgpu.wgmma %p, %v acc %o : !p, !k, !o -> !o, !p
  %o2, %p1 = tgpu.wgmma_wait %o1, %pf pending 1 : !o, !p
  // A shared lhs (64 x 128 against a 128 x 128 rhs).
  %x = tgpu.alloc : !tgpu.buffer<128x128xbf16, #tgpu.shared<canonical_128b>>
  %y = tgpu.wgmma %k, %x : !k, !tgpu.buffer<128x128xbf16, #tgpu.shared<canonical_128b>> -> !o
  %y1 = tgpu.wgmma_wait %y pending 0 : !o
  return %s1, %o2, %y1 : !acc, !o, !o
}

// -----

// CHECK-LABEL: func.func @named_barriers
// CHECK:         tgpu.named_barrier sync id 1 threads 256
// CHECK:         tgpu.named_barrier arrive id 15 threads 128
// CHECK:         tgpu.named_barrier sync id 1 threads 256 warpgroup own among 2 from 0
// CHECK:         tgpu.named_barrier arrive id 3 threads 256 warpgroup next among 3 from 1
func.func @named_barriers() {
  tgpu.named_barrier sync id 1 threads 256
  tgpu.named_barrier arrive id 15 threads 128
  tgpu.named_barrier sync id 1 threads 256 warpgroup own among 2 from 0
  tgpu.named_barrier arrive id 3 threads 256 warpgroup next among 3 from 1
  return
}

// -----

// A producer warpgroup with a small budget and two consumer warpgroups with large ones
// (FA3's 24 / 240 split): 4 * 32 * 24 + 8 * 32 * 240 = 64512 registers.
// CHECK-LABEL: func.func @warp_specialize
// CHECK:         tgpu.warp_specialize partition warps 4 registers 24 {
// CHECK:           tgpu.named_barrier arrive id 1 threads 384
// CHECK:         } partition warps 8 registers 240 {
// CHECK:           tgpu.named_barrier sync id 1 threads 384
// CHECK:         }
func.func @warp_specialize() {
  tgpu.warp_specialize
    partition warps 4 registers 24 {
      tgpu.named_barrier arrive id 1 threads 384
    }
    partition warps 8 registers 240 {
      tgpu.named_barrier sync id 1 threads 384
    }
  return
}

// -----

!map = !nvgpu.tensormap.descriptor<tensor = memref<1x1x64x64xbf16, 3>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
!buf = !tgpu.buffer<128x128xbf16, #tgpu.shared<canonical_128b>>

// A TMA store of the second warpgroup's 64 rows of an O tile (two 128-byte panels).
// CHECK-LABEL: func.func @tma_store
// CHECK:         tgpu.tma_store %{{.+}}[%c64] into %{{.+}}[%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}] : <128x128xbf16, #tgpu.shared<canonical_128b>>, <tensor = memref<1x1x64x64xbf16, 3>
func.func @tma_store(%map: !map, %row: index, %h: index, %b: index) {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %buf = tgpu.alloc : !buf
  tgpu.tma_store %buf[%c64] into %map[%c0, %row, %h, %b] : !buf, !map
  return
}

// -----

// mma.sync chains: Q from registers or a shared tile, P packed in place from the accumulator.
!accm = tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>
!qa = tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!tile = !tgpu.buffer<64x64xbf16, #tgpu.shared<chunk_xor>>
// CHECK-LABEL: func.func @mma_sync
// CHECK:         %[[S:.+]] = tgpu.mma %{{.+}}, %{{.+}} transpose_rhs : tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>, <64x64xbf16, #tgpu.shared<chunk_xor>> -> tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>
// CHECK:         %[[P:.+]] = tgpu.pack_operand_a %[[S]] : tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>> -> tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
// CHECK:         tgpu.mma %[[P]], %{{.+}} acc %{{.+}} : {{.+}} -> tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>
// CHECK:         tgpu.mma %{{.+}}, %{{.+}} transpose_rhs : !tgpu.buffer<64x64xbf16, #tgpu.shared<chunk_xor>>, <64x64xbf16, #tgpu.shared<chunk_xor>>
func.func @mma_sync(%q: !qa, %qs: !tile, %k: !tile, %v: !tile, %acc: !accm) -> (!accm, !accm) {
  %s = tgpu.mma %q, %k transpose_rhs : !qa, !tile -> !accm
  %p = tgpu.pack_operand_a %s : !accm -> !qa
  %o = tgpu.mma %p, %v acc %acc : !qa, !tile, !accm -> !accm
  %s2 = tgpu.mma %qs, %k transpose_rhs : !tile, !tile -> !accm
  return %o, %s2 : !accm, !accm
}

// -----

// A backward kernel's transposed products: dS written into a shared tile, read transposed.
!accb = tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>
!tileb = !tgpu.buffer<64x64xbf16, #tgpu.shared<chunk_xor>>
// CHECK-LABEL: func.func @transposed_lhs
// CHECK:         tgpu.local_store %{{.+}}, %[[B:.+]] : tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>, <64x64xbf16, #tgpu.shared<chunk_xor>>
// CHECK:         tgpu.mma %[[B]], %{{.+}} acc %{{.+}} transpose_lhs : !tgpu.buffer<64x64xbf16, #tgpu.shared<chunk_xor>>, <64x64xbf16, #tgpu.shared<chunk_xor>>, tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>> -> tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>
func.func @transposed_lhs(%ds: !accb, %buffer: !tileb, %q: !tileb, %acc: !accb) -> !accb {
  tgpu.local_store %ds, %buffer : !accb, !tileb
  %dk = tgpu.mma %buffer, %q acc %acc transpose_lhs : !tileb, !tileb, !accb -> !accb
  return %dk : !accb
}

// -----

// The same on the tensor cores of sm_90a: dS written into a canonical_128b tile, which the wgmma
// reads MN-major; S = Q K^T with Q read K-major from shared memory.
!accw = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
!tilew = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>
// CHECK-LABEL: func.func @transposed_lhs_wgmma
// CHECK:         tgpu.local_store %{{.+}}, %[[B:.+]] : tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>, <64x64xbf16, #tgpu.shared<canonical_128b>>
// CHECK:         tgpu.wgmma %[[B]], %{{.+}} acc %{{.+}} transpose_lhs : !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>, <64x64xbf16, #tgpu.shared<canonical_128b>>, tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>> -> tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
// CHECK:         tgpu.wgmma %{{.+}}, %{{.+}} transpose_rhs : !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>, <64x64xbf16, #tgpu.shared<canonical_128b>> -> tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
func.func @transposed_lhs_wgmma(%ds: !accw, %buffer: !tilew, %q: !tilew, %k: !tilew, %acc: !accw)
    -> (!accw, !accw) {
  tgpu.local_store %ds, %buffer : !accw, !tilew
  %dk = tgpu.wgmma %buffer, %q acc %acc transpose_lhs : !tilew, !tilew, !accw -> !accw
  %s = tgpu.wgmma %q, %k transpose_rhs : !tilew, !tilew -> !accw
  return %dk, %s : !accw, !accw
}

// -----

// A wgmma accumulator packs into the fragments of its warpgroup's four warps.
// CHECK-LABEL: func.func @pack_wgmma
// CHECK:         tgpu.pack_operand_a %{{.+}} : tensor<128x64xf32, #tgpu.wgmma_acc<warpgroups = 2>> -> tensor<128x64xf16, #tgpu.operand_a<warps = 8, rows_per_warp = 16>>
func.func @pack_wgmma(%p: tensor<128x64xf32, #tgpu.wgmma_acc<warpgroups = 2>>)
    -> tensor<128x64xf16, #tgpu.operand_a<warps = 8, rows_per_warp = 16>> {
  %a = tgpu.pack_operand_a %p : tensor<128x64xf32, #tgpu.wgmma_acc<warpgroups = 2>>
      -> tensor<128x64xf16, #tgpu.operand_a<warps = 8, rows_per_warp = 16>>
  return %a : tensor<128x64xf16, #tgpu.operand_a<warps = 8, rows_per_warp = 16>>
}

// -----

// A block's first columns and the inverse, zero columns on the right (tgpu-narrow-key-tail).
// CHECK-LABEL: func.func @columns
// CHECK:         %[[N:.+]] = tgpu.leading_columns %{{.+}} : tensor<128x176xf32, #tgpu.wgmma_acc<warpgroups = 2>> -> tensor<128x64xf32, #tgpu.wgmma_acc<warpgroups = 2>>
// CHECK:         tgpu.pad_columns %[[N]] : tensor<128x64xf32, #tgpu.wgmma_acc<warpgroups = 2>> -> tensor<128x176xf32, #tgpu.wgmma_acc<warpgroups = 2>>
func.func @columns(%s: tensor<128x176xf32, #tgpu.wgmma_acc<warpgroups = 2>>)
    -> tensor<128x176xf32, #tgpu.wgmma_acc<warpgroups = 2>> {
  %n = tgpu.leading_columns %s : tensor<128x176xf32, #tgpu.wgmma_acc<warpgroups = 2>>
      -> tensor<128x64xf32, #tgpu.wgmma_acc<warpgroups = 2>>
  %p = tgpu.pad_columns %n : tensor<128x64xf32, #tgpu.wgmma_acc<warpgroups = 2>>
      -> tensor<128x176xf32, #tgpu.wgmma_acc<warpgroups = 2>>
  return %p : tensor<128x176xf32, #tgpu.wgmma_acc<warpgroups = 2>>
}

// -----

// The warp-specialized kernel's pieces: an mbarrier group allocated like a buffer (8 bytes a
// barrier) and the tensor map of a kernel argument.
// CHECK-LABEL: func.func @tensor_map_and_barriers
// CHECK:         tgpu.alloc {offset = 8 : i64} : !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 4>
// CHECK:         tgpu.tensor_map %arg0 : memref<?x?x?x64xbf16> -> <tensor = memref<1x1x64x64xbf16, 3>
func.func @tensor_map_and_barriers(%k: memref<?x?x?x64xbf16>) {
  %bars = tgpu.alloc {offset = 8 : i64} : !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 4>
  %map = tgpu.tensor_map %k : memref<?x?x?x64xbf16> -> !nvgpu.tensormap.descriptor<tensor = memref<1x1x64x64xbf16, 3>, swizzle = swizzle_128b, l2promo = l2promo_256b, oob = zero, interleave = none>
  return
}

// -----

// The row sums on the tensor cores: the ones filled, the product with 8 more columns, split.
// CHECK-LABEL: func.func @row_sums
// CHECK:         tgpu.fill %{{.+}}, 1.000000e+00 : <8x64xbf16, #tgpu.shared<canonical_128b>>
// CHECK:         tgpu.wgmma %{{.+}}, %{{.+}} acc %{{.+}} row_sums(%{{.+}} : !tgpu.buffer<8x64xbf16, #tgpu.shared<canonical_128b>>) : tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>, <64x64xbf16, #tgpu.shared<canonical_128b>>, tensor<64x72xf32, #tgpu.wgmma_acc<warpgroups = 1>> -> tensor<64x72xf32, #tgpu.wgmma_acc<warpgroups = 1>>, tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
// CHECK:         tgpu.split_row_sums %{{.+}} : tensor<64x72xf32, #tgpu.wgmma_acc<warpgroups = 1>> -> tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>, tensor<64xf32, #tgpu.acc_rows<#tgpu.wgmma_acc<warpgroups = 1>>>
func.func @row_sums(%p: tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>,
                    %acc: tensor<64x72xf32, #tgpu.wgmma_acc<warpgroups = 1>>) {
  %v = tgpu.alloc : !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>
  %ones = tgpu.alloc : !tgpu.buffer<8x64xbf16, #tgpu.shared<canonical_128b>>
  tgpu.fill %ones, 1.0 : !tgpu.buffer<8x64xbf16, #tgpu.shared<canonical_128b>>
  %o, %pf = tgpu.wgmma %p, %v acc %acc row_sums(%ones : !tgpu.buffer<8x64xbf16, #tgpu.shared<canonical_128b>>)
      : tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>,
        !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>,
        tensor<64x72xf32, #tgpu.wgmma_acc<warpgroups = 1>>
        -> tensor<64x72xf32, #tgpu.wgmma_acc<warpgroups = 1>>,
           tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
  %w:2 = tgpu.wgmma_wait %o, %pf pending 0 : tensor<64x72xf32, #tgpu.wgmma_acc<warpgroups = 1>>, tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
  %out, %l = tgpu.split_row_sums %w#0 : tensor<64x72xf32, #tgpu.wgmma_acc<warpgroups = 1>>
      -> tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>,
         tensor<64xf32, #tgpu.acc_rows<#tgpu.wgmma_acc<warpgroups = 1>>>
  return
}
