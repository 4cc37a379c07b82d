// RUN: tilefuse-opt %s -split-input-file -verify-diagnostics -tile-to-tgpu | FileCheck %s
// RUN: tilefuse-opt %kernels/causal.mlir --tile-front-end --tile-pipeline \
// RUN:   -tgpu-assign-layouts=mma=wgmma -tile-to-tgpu | FileCheck %s --check-prefix=CAUSAL

// tile-to-tgpu: each block that tgpu-assign-layouts put in shared memory becomes a buffer filled
// by a cp.async copy group (a ring of two stages when a loop carries it), its group's token
// travels with it, each reader waits for that group, and each tile.block_dot becomes the matrix
// op its accumulator layout names. The waits have no numGroups: tgpu-insert-barriers sets it.

!view = memref<?x?x?x64xbf16>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
!qa = tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!kv = tensor<64x64xbf16, #tgpu.shared<canonical_128b>>

// The shape of tile-pipeline's output with wgmma layouts: Q in registers, the key block
// prefetched (loaded before the loop, and in the body for the next iteration), the value block
// loaded in the body. Keys go to a ring, stage (row0 / 64) % 2; values to one buffer.
// CHECK-LABEL: func.func @prefetched_key
// CHECK-SAME:    (%[[Q:[^:]+]]: memref<?x?x?x64xbf16>, %[[K:[^:]+]]: memref<?x?x?x64xbf16>, %[[V:[^:]+]]: memref<?x?x?x64xbf16>
// CHECK:         %[[RING:.+]] = tgpu.alloc : !tgpu.ring<2 x 64x64xbf16, #tgpu.shared<canonical_128b>>
// CHECK-NEXT:    %[[ROWS:.+]] = arith.constant 64 : index
// CHECK-NEXT:    %[[STAGES:.+]] = arith.constant 2 : index
// CHECK-NEXT:    %[[VBUF:.+]] = tgpu.alloc : !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>
// CHECK:         %[[C0:.+]] = arith.constant 0 : index
// CHECK:         %[[QB:.+]] = tile.block_load %[[Q]]{{.+}} -> tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
// CHECK-NEXT:    %[[BLOCK0:.+]] = arith.divui %[[C0]], %[[ROWS]] : index
// CHECK-NEXT:    %[[STAGE0:.+]] = arith.remui %[[BLOCK0]], %[[STAGES]] : index
// CHECK-NEXT:    %[[K0:.+]] = tgpu.stage %[[RING]][%[[STAGE0]]]
// CHECK-NEXT:    %[[COPY0:.+]] = tgpu.async_copy %[[K]][%{{.+}}, %{{.+}}, %[[C0]]] bound %{{.+}} into %[[K0]]
// CHECK-NEXT:    %[[GROUP0:.+]] = nvgpu.device_async_create_group %[[COPY0]]
// CHECK-NEXT:    %[[LOOP:.+]]:3 = scf.for {{.+}} iter_args(%[[ACC:[^ ]+]] = %{{[^ ]+}}, %[[KB:[^ ]+]] = %[[K0]], %[[KG:[^ ]+]] = %[[GROUP0]])
// CHECK-SAME:      -> (tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>, !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>, !nvgpu.device.async.token)
// CHECK:           %[[N1:.+]] = arith.addi
// CHECK-NEXT:      %[[BLOCK1:.+]] = arith.divui %[[N1]], %[[ROWS]] : index
// CHECK-NEXT:      %[[STAGE1:.+]] = arith.remui %[[BLOCK1]], %[[STAGES]] : index
// CHECK-NEXT:      %[[K1:.+]] = tgpu.stage %[[RING]][%[[STAGE1]]]
// CHECK-NEXT:      %[[COPY1:.+]] = tgpu.async_copy %[[K]][%{{.+}}, %{{.+}}, %[[N1]]] bound %{{.+}} into %[[K1]]
// CHECK-NEXT:      %[[GROUP1:.+]] = nvgpu.device_async_create_group %[[COPY1]]
// CHECK-NEXT:      nvgpu.device_async_wait %[[KG]]{{$}}
// CHECK-NEXT:      %[[S:[^ ,]+]], %[[SF:[^ ,]+]] = tgpu.wgmma %[[QB]], %[[KB]] transpose_rhs
// CHECK-NEXT:      %[[SW:.+]]:2 = tgpu.wgmma_wait %[[S]], %[[SF]] pending 0
// CHECK-NEXT:      %[[P:.+]] = math.exp2 %[[SW]]#0
// CHECK-NEXT:      %[[VCOPY:.+]] = tgpu.async_copy %[[V]]{{.+}} into %[[VBUF]]
// CHECK-NEXT:      %[[VGROUP:.+]] = nvgpu.device_async_create_group %[[VCOPY]]
// CHECK-NEXT:      %[[PA:.+]] = tgpu.pack_operand_a %[[P]] : tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>> -> tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
// CHECK-NEXT:      nvgpu.device_async_wait %[[VGROUP]]{{$}}
// CHECK-NEXT:      %[[O:[^ ,]+]], %[[OF:[^ ,]+]] = tgpu.wgmma %[[PA]], %[[VBUF]] acc %[[ACC]]
// CHECK-NEXT:      %[[OW:.+]]:2 = tgpu.wgmma_wait %[[O]], %[[OF]] pending 0
// CHECK-NEXT:      scf.yield %[[OW]]#0, %[[K1]], %[[GROUP1]]
// CHECK-NEXT:    } {tile.kv_loop}
// CHECK-NEXT:    tile.block_store %[[LOOP]]#0
// CHECK-NOT:     tile.block_dot
func.func @prefetched_key(%q: !view, %k: !view, %v: !view, %o: !view, %b: index, %h: index,
                          %m0: index, %m: index, %n: index, %blocks: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant dense<0.0> : !acc
  %qb = tile.block_load %q[%b, %h, %m0] bound %m : !view -> !qa
  %k0 = tile.block_load %k[%b, %h, %c0] bound %n : !view -> !kv
  %r:2 = scf.for %j = %c0 to %blocks step %c1 iter_args(%acc = %zero, %kb = %k0) -> (!acc, !kv) {
    %n0 = arith.muli %j, %c64 : index
    %n1 = arith.addi %n0, %c64 : index
    %knext = tile.block_load %k[%b, %h, %n1] bound %n : !view -> !kv
    %s = tile.block_dot %qb, %kb transpose_rhs : !qa, !kv -> !acc
    %p = math.exp2 %s : !acc
    %vb = tile.block_load %v[%b, %h, %n0] bound %n : !view -> !kv
    %accnew = tile.block_dot %p, %vb acc %acc : !acc, !kv, !acc -> !acc
    scf.yield %accnew, %knext : !acc, !kv
  } {tile.kv_loop}
  tile.block_store %r#0, %o[%b, %h, %m0] bound %m : !acc, !view
  return
}

// -----

!view = memref<?x?x?x64xbf16>
!acc = tensor<64x64xf32, #tgpu.mma_acc<warps = 2, rows_per_warp = 32>>
!tile = tensor<64x64xbf16, #tgpu.shared<chunk_xor>>

// mma.sync with Q in shared memory (q-operand=shared, two m16 tiles per warp). Nothing is
// carried, so each view has one buffer: both branches' value blocks fill the same one. The dot
// waits for its rhs, then its shared lhs. P is packed for the warps' own rows.
// CHECK-LABEL: func.func @value_in_both_branches
// CHECK-SAME:    (%[[Q:[^:]+]]: memref<?x?x?x64xbf16>, %[[K:[^:]+]]: memref<?x?x?x64xbf16>, %[[V:[^:]+]]: memref<?x?x?x64xbf16>
// CHECK-NEXT:    %[[QBUF:.+]] = tgpu.alloc : !tgpu.buffer<64x64xbf16, #tgpu.shared<chunk_xor>>
// CHECK-NEXT:    %[[KBUF:.+]] = tgpu.alloc : !tgpu.buffer<64x64xbf16, #tgpu.shared<chunk_xor>>
// CHECK-NEXT:    %[[VBUF:.+]] = tgpu.alloc : !tgpu.buffer<64x64xbf16, #tgpu.shared<chunk_xor>>
// CHECK-NOT:     tgpu.alloc
// CHECK:         %[[QCOPY:.+]] = tgpu.async_copy %[[Q]]{{.+}} into %[[QBUF]]
// CHECK-NEXT:    %[[QG:.+]] = nvgpu.device_async_create_group %[[QCOPY]]
// CHECK-NEXT:    %[[KCOPY:.+]] = tgpu.async_copy %[[K]]{{.+}} into %[[KBUF]]
// CHECK-NEXT:    %[[KG:.+]] = nvgpu.device_async_create_group %[[KCOPY]]
// CHECK-NEXT:    nvgpu.device_async_wait %[[KG]]{{$}}
// CHECK-NEXT:    nvgpu.device_async_wait %[[QG]]{{$}}
// CHECK-NEXT:    %[[S:.+]] = tgpu.mma %[[QBUF]], %[[KBUF]] transpose_rhs : {{.+}} -> tensor<64x64xf32, #tgpu.mma_acc<warps = 2, rows_per_warp = 32>>
// CHECK-NEXT:    scf.if
// CHECK-NEXT:      %[[VCOPY:.+]] = tgpu.async_copy %[[V]]{{.+}} into %[[VBUF]]
// CHECK-NEXT:      %[[VG:.+]] = nvgpu.device_async_create_group %[[VCOPY]]
// CHECK-NEXT:      %[[PA:.+]] = tgpu.pack_operand_a %[[S]] : tensor<64x64xf32, #tgpu.mma_acc<warps = 2, rows_per_warp = 32>> -> tensor<64x64xbf16, #tgpu.operand_a<warps = 2, rows_per_warp = 32>>
// CHECK-NEXT:      nvgpu.device_async_wait %[[VG]]{{$}}
// CHECK-NEXT:      %[[O:.+]] = tgpu.mma %[[PA]], %[[VBUF]] :
// CHECK-NEXT:      scf.yield %[[O]]
// CHECK-NEXT:    } else {
// CHECK-NEXT:      %[[S2:.+]] = arith.mulf %[[S]], %[[S]]
// CHECK-NEXT:      %[[VCOPY2:.+]] = tgpu.async_copy %[[V]]{{.+}} into %[[VBUF]]
// CHECK-NEXT:      %[[VG2:.+]] = nvgpu.device_async_create_group %[[VCOPY2]]
// CHECK-NEXT:      %[[PA2:.+]] = tgpu.pack_operand_a %[[S2]]
// CHECK-NEXT:      nvgpu.device_async_wait %[[VG2]]{{$}}
// CHECK-NEXT:      %[[O2:.+]] = tgpu.mma %[[PA2]], %[[VBUF]] :
// CHECK-NEXT:      scf.yield %[[O2]]
func.func @value_in_both_branches(%q: !view, %k: !view, %v: !view, %b: index, %n: index,
                                  %full: i1) -> !acc {
  %qb = tile.block_load %q[%b, %b, %b] bound %n : !view -> !tile
  %kb = tile.block_load %k[%b, %b, %b] bound %n : !view -> !tile
  %s = tile.block_dot %qb, %kb transpose_rhs : !tile, !tile -> !acc
  %r = scf.if %full -> !acc {
    %vb = tile.block_load %v[%b, %b, %b] bound %n : !view -> !tile
    %o = tile.block_dot %s, %vb : !acc, !tile -> !acc
    scf.yield %o : !acc
  } else {
    %s2 = arith.mulf %s, %s : !acc
    %vb = tile.block_load %v[%b, %b, %b] bound %n : !view -> !tile
    %o = tile.block_dot %s2, %vb : !acc, !tile -> !acc
    scf.yield %o : !acc
  }
  return %r : !acc
}

// -----

!view = memref<?x?x?x64xbf16>
!acc = tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>
!qa = tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!tile = tensor<64x64xbf16, #tgpu.shared<chunk_xor>>

// A carried block that a branch refills or passes on unchanged: the branch's result carries the
// group of whichever block it yields (the new copy's, or the loop's token argument), and the
// loop carries that. Both loads are one ring's.
// CHECK-LABEL: func.func @carried_through_branch
// CHECK:         %[[RING:.+]] = tgpu.alloc : !tgpu.ring<2 x 64x64xbf16, #tgpu.shared<chunk_xor>>
// CHECK-NOT:     tgpu.alloc
// CHECK:         %[[K0:.+]] = tgpu.stage %[[RING]]
// CHECK:         %[[G0:.+]] = nvgpu.device_async_create_group
// CHECK:         scf.for {{.+}} iter_args(%[[ACC:[^ ]+]] = %{{[^ ]+}}, %[[KB:[^ ]+]] = %[[K0]], %[[KG:[^ ]+]] = %[[G0]])
// CHECK:           %[[NEXT:.+]]:2 = scf.if %{{.+}} -> (!tgpu.buffer<64x64xbf16, #tgpu.shared<chunk_xor>>, !nvgpu.device.async.token) {
// CHECK:             %[[K1:.+]] = tgpu.stage %[[RING]]
// CHECK-NEXT:        %[[COPY1:.+]] = tgpu.async_copy {{.+}} into %[[K1]]
// CHECK-NEXT:        %[[G1:.+]] = nvgpu.device_async_create_group %[[COPY1]]
// CHECK-NEXT:        scf.yield %[[K1]], %[[G1]]
// CHECK-NEXT:      } else {
// CHECK-NEXT:        scf.yield %[[KB]], %[[KG]]
// CHECK-NEXT:      }
// CHECK-NEXT:      nvgpu.device_async_wait %[[KG]]{{$}}
// CHECK-NEXT:      %[[S:.+]] = tgpu.mma %{{.+}}, %[[KB]] transpose_rhs
// CHECK-NEXT:      scf.yield %[[S]], %[[NEXT]]#0, %[[NEXT]]#1
func.func @carried_through_branch(%q: !view, %k: !view, %b: index, %n: index, %blocks: index,
                                  %refill: i1) -> !acc {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant dense<0.0> : !acc
  %qb = tile.block_load %q[%b, %b, %b] bound %n : !view -> !qa
  %k0 = tile.block_load %k[%b, %b, %c0] bound %n : !view -> !tile
  %r:2 = scf.for %j = %c0 to %blocks step %c1 iter_args(%acc = %zero, %kb = %k0) -> (!acc, !tile) {
    %next = scf.if %refill -> !tile {
      %n1 = arith.muli %j, %c64 : index
      %kn = tile.block_load %k[%b, %b, %n1] bound %n : !view -> !tile
      scf.yield %kn : !tile
    } else {
      scf.yield %kb : !tile
    }
    %s = tile.block_dot %qb, %kb transpose_rhs : !qa, !tile -> !acc
    scf.yield %s, %next : !acc, !tile
  }
  return %r#0 : !acc
}

// -----

!view = memref<?x?x?x64xbf16>

// Without layouts (tgpu-assign-layouts not run) nothing says where a block lives.
func.func @unannotated(%q: !view, %k: !view, %b: index, %n: index) {
  // expected-error @below {{'tile.block_load' op has a block without a layout ('tensor<64x64xbf16>'): run tgpu-assign-layouts first}}
  %kb = tile.block_load %k[%b, %b, %b] bound %n : !view -> tensor<64x64xbf16>
  return
}

// -----

!view = memref<?x?x?x64xbf16>
!tile = tensor<64x64xbf16, #tgpu.shared<chunk_xor>>

// A shared tile is read by dots only: storing one would need registers it does not have.
func.func @stored_shared_tile(%k: !view, %o: !view, %b: index, %n: index) {
  %kb = tile.block_load %k[%b, %b, %b] bound %n : !view -> !tile
  // expected-error @below {{'tile.block_store' op uses a block in shared memory ('tensor<64x64xbf16, #tgpu.shared<chunk_xor>>'); only tile.block_dot reads one, and only scf.for and scf.if carry one}}
  tile.block_store %kb, %o[%b, %b, %b] bound %n : !tile, !view
  return
}

// -----

!view = memref<?x?x?x64xbf16>
!tile = tensor<64x64xbf16, #tgpu.shared<chunk_xor>>

// Only scf.for and scf.if carry a shared tile (and its copy group) across iterations.
func.func @while_carried(%k: !view, %b: index, %n: index, %go: i1) {
  %kb = tile.block_load %k[%b, %b, %b] bound %n : !view -> !tile
  // expected-error @below {{'scf.while' op uses a block in shared memory}}
  %r = scf.while (%t = %kb) : (!tile) -> !tile {
    scf.condition(%go) %t : !tile
  } do {
  ^bb0(%t: !tile):
    scf.yield %t : !tile
  }
  return
}

// -----

!view = memref<?x?x?x64xbf16>
!acc = tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>
!qa = tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!tile = tensor<64x64xbf16, #tgpu.shared<chunk_xor>>

// Blocks of one view share a buffer: one loaded while an earlier one is still to be read would
// overwrite it.
func.func @overwritten_before_read(%k: !view, %qa: !qa, %b: index, %n: index, %n1: index) -> !acc {
  // expected-note @below {{the earlier load}}
  %k0 = tile.block_load %k[%b, %b, %b] bound %n : !view -> !tile
  // expected-error @below {{'tile.block_load' op fills the shared buffer of an earlier load of the same view, whose block is still read afterwards: it would be overwritten}}
  %k1 = tile.block_load %k[%b, %b, %n1] bound %n : !view -> !tile
  // expected-note @below {{read here}}
  %s0 = tile.block_dot %qa, %k0 transpose_rhs : !qa, !tile -> !acc
  %s1 = tile.block_dot %qa, %k1 acc %s0 transpose_rhs : !qa, !tile, !acc -> !acc
  return %s1 : !acc
}

// The bundled causal kernel (wgmma): one ring for the key blocks (the prefetch), one buffer for
// the value blocks of both branches; the loop carries the key group; each branch waits for
// the key group, then for its value group.
// CAUSAL-LABEL: func.func @causal
// CAUSAL:         %[[RING:.+]] = tgpu.alloc : !tgpu.ring<2 x 64x64xbf16, #tgpu.shared<canonical_128b>>
// CAUSAL:         %[[VBUF:.+]] = tgpu.alloc : !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>
// CAUSAL-NOT:     tgpu.alloc
// CAUSAL:         scf.forall
// CAUSAL:           %[[K0:.+]] = tgpu.stage %[[RING]]
// CAUSAL-NEXT:      %[[KC0:.+]] = tgpu.async_copy %{{.+}} into %[[K0]]
// CAUSAL-NEXT:      %[[KG0:.+]] = nvgpu.device_async_create_group %[[KC0]]
// CAUSAL-NEXT:      %[[LOOP:.+]]:5 = scf.for {{.+}}, %[[KB:[^ ]+]] = %[[K0]], %[[KG:[^ ]+]] = %[[KG0]])
// CAUSAL:             %[[K1:.+]] = tgpu.stage %[[RING]]
// CAUSAL-NEXT:        %[[KC1:.+]] = tgpu.async_copy %{{.+}} into %[[K1]]
// CAUSAL-NEXT:        %[[KG1:.+]] = nvgpu.device_async_create_group %[[KC1]]
// CAUSAL:             scf.if
// CAUSAL-NEXT:          scf.if
// CAUSAL-NEXT:            %[[VC:.+]] = tgpu.async_copy %{{.+}} into %[[VBUF]]
// CAUSAL-NEXT:            %[[VG:.+]] = nvgpu.device_async_create_group %[[VC]]
// CAUSAL-NEXT:            nvgpu.device_async_wait %[[KG]]{{$}}
// CAUSAL-NEXT:            tgpu.wgmma %{{.+}}, %[[KB]] transpose_rhs
// CAUSAL-NEXT:            tgpu.wgmma_wait
// CAUSAL:                 tgpu.pack_operand_a
// CAUSAL-NEXT:            nvgpu.device_async_wait %[[VG]]{{$}}
// CAUSAL-NEXT:            tgpu.wgmma %{{.+}}, %[[VBUF]] acc
// CAUSAL-NEXT:            tgpu.wgmma_wait
// CAUSAL:               } else {
// CAUSAL-NEXT:            %[[VC2:.+]] = tgpu.async_copy %{{.+}} into %[[VBUF]]
// CAUSAL-NEXT:            %[[VG2:.+]] = nvgpu.device_async_create_group %[[VC2]]
// CAUSAL-NEXT:            nvgpu.device_async_wait %[[KG]]{{$}}
// CAUSAL-NEXT:            tgpu.wgmma %{{.+}}, %[[KB]] transpose_rhs
// CAUSAL:                 nvgpu.device_async_wait %[[VG2]]{{$}}
// CAUSAL-NEXT:            tgpu.wgmma %{{.+}}, %[[VBUF]] acc
// CAUSAL:             scf.yield {{.+}}, %[[K1]], %[[KG1]] :
// CAUSAL-NEXT:      } {tile.kv_loop}
// CAUSAL-NOT:     tile.block_dot

// -----

!view = memref<?x?x?x64xbf16>
!cache = memref<?x?x16x64xbf16>
!table = memref<?x?xi32, strided<[?, 1]>>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
!qa = tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!kv = tensor<64x64xbf16, #tgpu.shared<canonical_128b>>

// A paged key block whose first row is its index times 64 (tile-tiling's key loop) is copied
// with row_alignment = 64, so that its lowering reads a page per page, not per row; a row of
// unknown alignment gets none.
// CHECK-LABEL: func.func @paged_row_alignment
// CHECK-SAME:    %[[K:[^:]+]]: memref<?x?x16x64xbf16>, %[[V:[^:]+]]: memref<?x?x16x64xbf16>
// CHECK:         tgpu.async_copy %[[K]]{{.+}} pages %{{.+}} into %{{.+}} {row_alignment = 64 : i64} :
// CHECK:         tgpu.async_copy %[[V]]{{.+}} pages %{{.+}} into %{{[a-z0-9_]+}} :
func.func @paged_row_alignment(%q: !view, %k: !cache, %v: !cache, %t: !table, %b: index,
                               %h: index, %j: index, %r: index, %n: index) -> (!acc, !acc) {
  %c64 = arith.constant 64 : index
  %qb = tile.block_load %q[%b, %h, %r] bound %n : !view -> !qa
  %row = arith.muli %j, %c64 : index
  %kb = tile.block_load %k[%b, %h, %row] bound %n pages %t : !cache, !table -> !kv
  %vb = tile.block_load %v[%b, %h, %r] bound %n pages %t : !cache, !table -> !kv
  %s = tile.block_dot %qb, %kb transpose_rhs : !qa, !kv -> !acc
  %u = tile.block_dot %qb, %vb transpose_rhs : !qa, !kv -> !acc
  return %s, %u : !acc, !acc
}
