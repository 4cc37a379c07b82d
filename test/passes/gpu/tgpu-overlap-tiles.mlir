// RUN: tilefuse-opt %s -split-input-file -verify-diagnostics -tgpu-overlap-softmax="force=true" \
// RUN:   -tgpu-overlap-tiles="force=true hold-product-wait=true" | FileCheck %s
// RUN: tilefuse-opt %s -split-input-file -verify-diagnostics -tgpu-overlap-softmax="force=true" \
// RUN:   -tgpu-overlap-tiles="force=true" | FileCheck %s --check-prefix=UNHELD
// UNHELD-NOT: tgpu.wait_after_preceding_code
// RUN: tilefuse-opt %s -split-input-file -tgpu-overlap-softmax="force=true" \
// RUN:   -tgpu-overlap-tiles 2>&1 | FileCheck %s --check-prefix=OFF

// tgpu-overlap-tiles: a persistent consumer's tile boundary overlapped (after
// tgpu-overlap-softmax rotated its key loop). The first key block of each tile is peeled; where
// the previous tile left a P·V pending, the peeled block issues its Q·Kᵀ, then that P·V, waits
// for Q·Kᵀ alone, runs its softmax beside it, waits for it and runs the previous tile's
// epilogue. The tile loop carries the previous tile's state; the last tile's P·V and epilogue
// run after it.

!view = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
!rows = tensor<64xf32, #tgpu.acc_rows<#tgpu.wgmma_acc<warpgroups = 1>>>
!qa = tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>
!ring = !tgpu.ring<2 x 64x64xbf16, #tgpu.shared<canonical_128b>>
!bars = !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>

// Without overlap_tiles in the module's tile.config (and without force) only the key loop is
// rotated: the flush and the epilogue stay in the tile.
// OFF-LABEL: func.func @kernel
// OFF:         scf.for
// OFF:           } {tile.kv_loop}
// OFF-NEXT:      scf.if
// OFF:           tile.block_store
// OFF:         } {tgpu.tile_loop}

// The tile loop carries: awaits (false at first), the previous tile's l, O, pending flag,
// rescale factor and P (what its flush and epilogue read of its key loop), and the coordinates
// its store reads (placeholders until then).
// CHECK-LABEL: func.func @kernel
// CHECK:         %[[T:.+]]:11 = scf.for %{{.+}} = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[QN:[^ ]+]] = %{{[^ ]+}}, %[[KN:[^ ]+]] = %{{[^ ]+}}, %[[VN:[^ ]+]] = %{{[^ ]+}}, %[[AWAITS:[^ ]+]] = %false{{[_0-9]*}}, %[[PL:[^ ]+]] = %{{[^ ]+}}, %[[PO:[^ ]+]] = %{{[^ ]+}}, %[[PHAS:[^ ]+]] = %false{{[_0-9]*}}, %[[PALPHA:[^ ]+]] = %{{[^ ]+}}, %[[PP:[^ ]+]] = %{{[^ ]+}}, %[[PB:[^ ]+]] = %{{[^ ]+}}, %[[PH:[^ ]+]] = %{{[^ ]+}})
// CHECK:           %[[QSTAGE:.+]] = tgpu.stage
// The first key block peeled, where the range has one.
// CHECK:           %[[ANY:.+]] = arith.cmpi slt, %[[LO:[^,]+]], %[[HI:[^ ]+]] : index
// CHECK:           %[[FIRST:.+]]:8 = scf.if %[[ANY]] -> (
// CHECK:             scf.if %{{.+}} -> (
// The pending variant: the previous tile's rescale and V stage before this tile's Q·Kᵀ, its P·V
// issued right after it, then the wait for Q·Kᵀ alone.
// CHECK:               scf.if %[[PHAS]] -> (
// CHECK:                 %[[AB:.+]] = tile.broadcast %[[PALPHA]]
// CHECK:                 %[[OS:.+]] = arith.mulf %[[PO]], %[[AB]]
// CHECK:                 %[[VS:.+]] = arith.remui %[[VN]]
// CHECK:                 %[[VSTAGE:.+]] = tgpu.stage %{{.+}}[%[[VS]]]
// CHECK:                 nvgpu.mbarrier.try_wait.parity %{{.+}}[%[[VS]]]
// CHECK:                 %[[S:.+]] = tgpu.wgmma %[[QSTAGE]], %{{.+}} transpose_rhs
// CHECK-NEXT:            %[[PV:.+]], %[[PF:.+]] = tgpu.wgmma %[[PP]], %[[VSTAGE]] acc %[[OS]]
// CHECK-NEXT:            %[[SW:.+]] = tgpu.wgmma_wait %[[S]] pending 1
// The first softmax beside the previous tile's P·V, then its wait, the V release, the previous
// tile's epilogue at its own coordinates, then P packed.
// CHECK:                 tile.reduce max %[[SW]]
// CHECK:                 %[[E:.+]] = math.exp2
// CHECK:                 %[[PVW:.+]]:2 = tgpu.wgmma_wait %[[PV]], %[[PF]] pending 0 {tgpu.wait_after_preceding_code}
// CHECK-NEXT:            nvgpu.mbarrier.arrive %{{.+}}[%[[VS]]]
// CHECK:                 %[[LB:.+]] = tile.broadcast %[[PL]]
// CHECK-NEXT:            %[[ON:.+]] = arith.divf %[[PVW]]#0, %[[LB]]
// CHECK-NEXT:            tile.block_store %[[ON]], %{{.+}}[%[[PB]], %[[PH]], %{{.+}}]
// CHECK:                 %[[PNEW:.+]] = tgpu.pack_operand_a %[[E]]
// CHECK:                 scf.yield
// Nothing pending: the first block as it was, then the epilogue of a previous tile that had no
// block of work.
// CHECK:               } else {
// CHECK-NOT:             tgpu.wgmma {{.+}} acc
// CHECK:                 tgpu.wgmma_wait %{{.+}} pending 0
// CHECK:                 scf.if %[[AWAITS]] {
// CHECK-NEXT:              tile.broadcast %[[PL]]
// CHECK-NEXT:              arith.divf %[[PO]]
// CHECK-NEXT:              tile.block_store
// Where the mask skips the first block, or the range has none, the previous tile's flush and
// epilogue run in that branch (advancing the value counter it yields).
// CHECK:             } else {
// CHECK-NEXT:          %[[VSKIP:.+]] = scf.if %[[AWAITS]] -> (index) {
// CHECK-NEXT:            scf.if %[[PHAS]] -> (
// CHECK:                 tile.block_store
// CHECK:               scf.yield %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %[[VSKIP]], %false
// CHECK:           } else {
// CHECK-NEXT:        %[[VNONE:.+]] = scf.if %[[AWAITS]] -> (index) {
// CHECK:               tile.block_store
// CHECK:             scf.yield %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %[[VNONE]], %false
// The rest of the key loop, from its second block.
// CHECK:           %[[SECOND:.+]] = arith.addi %[[LO]], %{{.+}}
// CHECK-NEXT:      %[[KEYS:.+]]:8 = scf.for %{{.+}} = %[[SECOND]] to %[[HI]] step %{{.+}} iter_args(%{{.+}} = %[[FIRST]]#0, %{{.+}} = %[[FIRST]]#1, %{{.+}} = %[[FIRST]]#2, %{{.+}} = %[[FIRST]]#3, %{{.+}} = %[[FIRST]]#4, %{{.+}} = %[[FIRST]]#5, %{{.+}} = %[[FIRST]]#6, %{{.+}} = %[[FIRST]]#7)
// CHECK:           } {tile.kv_loop}
// The Q release (its wait for Q's fill, then the arrive) stays in its tile, right after the
// key loop; no flush or store follows.
// CHECK-NEXT:      nvgpu.mbarrier.try_wait.parity
// CHECK-NEXT:      nvgpu.mbarrier.arrive
// CHECK-NOT:       tile.block_store
// CHECK:           scf.yield %{{.+}}, %[[KEYS]]#3, %[[KEYS]]#4, %true{{[_0-9]*}}, %[[KEYS]]#1, %[[KEYS]]#2, %[[KEYS]]#5, %[[KEYS]]#6, %[[KEYS]]#7, %{{.+}}, %{{.+}} :
// CHECK:         } {tgpu.tile_loop}
// After the tile loop: the last tile's flush and epilogue.
// CHECK-NEXT:    scf.if %[[T]]#3 -> (index) {
// CHECK:           %[[LAST:.+]]:2 = scf.if %[[T]]#6 -> (
// CHECK:             tile.broadcast %[[T]]#7
// CHECK:             tgpu.wgmma %[[T]]#8, %{{.+}} acc
// CHECK:           } else {
// CHECK-NEXT:        scf.yield %[[T]]#5, %[[T]]#2
// CHECK:           %[[LLB:.+]] = tile.broadcast %[[T]]#4
// CHECK-NEXT:      %[[LON:.+]] = arith.divf %[[LAST]]#0, %[[LLB]]
// CHECK-NEXT:      tile.block_store %[[LON]], %{{.+}}[%[[T]]#9, %[[T]]#10, %{{.+}}]
// CHECK-NEXT:      scf.yield %[[LAST]]#1
func.func @kernel(%q: !view, %k: !view, %v: !view, %o: !view, %n: index, %count: index) {
  %qring = tgpu.alloc : !ring
  %kring = tgpu.alloc : !ring
  %vring = tgpu.alloc : !ring
  %qfull = tgpu.alloc : !bars
  %qempty = tgpu.alloc : !bars
  %kfull = tgpu.alloc : !bars
  %kempty = tgpu.alloc : !bars
  %vfull = tgpu.alloc : !bars
  %vempty = tgpu.alloc : !bars
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %false = arith.constant false
  %zero = arith.constant dense<0.0> : !acc
  %zrows = arith.constant dense<0.0> : !rows
  %ninf = arith.constant dense<0xFF800000> : !rows
  %H = memref.dim %q, %c1 : !view
  tgpu.warp_specialize partition warps 4 registers 240 {
    %t:3 = scf.for %i = %c0 to %count step %c1 iter_args(%qn = %c0, %kn0 = %c0, %vn0 = %c0)
        -> (index, index, index) {
      %b = arith.divui %i, %H : index
      %h = arith.remui %i, %H : index
      %qs = arith.remui %qn, %c2 : index
      %qstage = tgpu.stage %qring[%qs] : !ring
      %qn1 = arith.addi %qn, %c1 : index
      %res:5 = scf.for %j = %c0 to %n step %c1
          iter_args(%m = %ninf, %l = %zrows, %acc = %zero, %kn = %kn0, %vn = %vn0)
          -> (!rows, !rows, !acc, index, index) {
        %odd = arith.remui %j, %c2 : index
        %active = arith.cmpi ne, %odd, %c1 : index
        %next:5 = scf.if %active -> (!rows, !rows, !acc, index, index) {
          %ks = arith.remui %kn, %c2 : index
          %kstage = tgpu.stage %kring[%ks] : !ring
          nvgpu.mbarrier.try_wait.parity %kfull[%ks], %false, %c0 : !bars
          nvgpu.mbarrier.try_wait.parity %qfull[%qs], %false, %c0 : !bars
          %s = tgpu.wgmma %qstage, %kstage transpose_rhs : !buf, !buf -> !acc
          %sw = tgpu.wgmma_wait %s pending 0 : !acc
          %kt = nvgpu.mbarrier.arrive %kempty[%ks] : !bars -> !nvgpu.mbarrier.token
          %kn1 = arith.addi %kn, %c1 : index
          %mx = tile.reduce max %sw : !acc -> !rows
          %mnew = arith.maximumf %m, %mx : !rows
          %mb = tile.broadcast %mnew : !rows -> !acc
          %sd = arith.subf %sw, %mb : !acc
          %p = math.exp2 %sd : !acc
          %md = arith.subf %m, %mnew : !rows
          %alpha = math.exp2 %md : !rows
          %sum = tile.reduce sum %p : !acc -> !rows
          %ls = arith.mulf %l, %alpha : !rows
          %l1 = arith.addf %ls, %sum : !rows
          %ab = tile.broadcast %alpha : !rows -> !acc
          %os = arith.mulf %acc, %ab : !acc
          %pa = tgpu.pack_operand_a %p : !acc -> !qa
          %vs = arith.remui %vn, %c2 : index
          %vstage = tgpu.stage %vring[%vs] : !ring
          nvgpu.mbarrier.try_wait.parity %vfull[%vs], %false, %c0 : !bars
          %pv:2 = tgpu.wgmma %pa, %vstage acc %os : !qa, !buf, !acc -> !acc, !qa
          %pvw:2 = tgpu.wgmma_wait %pv#0, %pv#1 pending 0 : !acc, !qa
          %vt = nvgpu.mbarrier.arrive %vempty[%vs] : !bars -> !nvgpu.mbarrier.token
          %vn1 = arith.addi %vn, %c1 : index
          scf.yield %mnew, %l1, %pvw#0, %kn1, %vn1 : !rows, !rows, !acc, index, index
        } else {
          scf.yield %m, %l, %acc, %kn, %vn : !rows, !rows, !acc, index, index
        }
        scf.yield %next#0, %next#1, %next#2, %next#3, %next#4 : !rows, !rows, !acc, index, index
      } {tile.kv_loop}
      nvgpu.mbarrier.try_wait.parity %qfull[%qs], %false, %c0 : !bars
      %qt = nvgpu.mbarrier.arrive %qempty[%qs] : !bars -> !nvgpu.mbarrier.token
      %lb = tile.broadcast %res#1 : !rows -> !acc
      %on = arith.divf %res#2, %lb : !acc
      tile.block_store %on, %o[%b, %h, %c0] bound %n : !acc, !view
      scf.yield %qn1, %res#3, %res#4 : index, index, index
    } {tgpu.tile_loop}
  } partition warps 4 registers 24 {
  }
  return
}

// -----

!view = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
!qa = tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>
!ring = !tgpu.ring<2 x 64x64xbf16, #tgpu.shared<canonical_128b>>

// A tile loop whose key loop is not rotated (it runs no P·V: tgpu-overlap-softmax leaves it)
// has no pending P·V to move into the next tile: refused.
func.func @unrotated(%q: !view, %n: index, %count: index) {
  %kbuf = tgpu.alloc : !buf
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant dense<0.0> : !acc
  tgpu.warp_specialize partition warps 4 registers 240 {
    scf.for %i = %c0 to %count step %c1 {
      %qb = tile.block_load %q[%i, %c0, %c0] bound %n : !view -> !qa
      // expected-error @below {{cannot overlap the tile boundary (tgpu-overlap-tiles): no branch on the key loop's pending flag follows it (the key loop is not rotated: overlap_tiles=true needs softmax_overlap=true) (use overlap_tiles=false)}}
      %res = scf.for %j = %c0 to %n step %c1 iter_args(%acc = %zero) -> (!acc) {
        %s:2 = tgpu.wgmma %qb, %kbuf transpose_rhs : !qa, !buf -> !acc, !qa
        %sw:2 = tgpu.wgmma_wait %s#0, %s#1 pending 0 : !acc, !qa
        %sum = arith.addf %acc, %sw#0 : !acc
        scf.yield %sum : !acc
      } {tile.kv_loop}
      tile.block_store %res, %q[%i, %c0, %c0] bound %n : !acc, !view
    } {tgpu.tile_loop}
  } partition warps 4 registers 24 {
  }
  return
}
