// RUN: tilefuse-opt %s -split-input-file -tgpu-row-sum-on-tensor-cores="force=true" \
// RUN:   | FileCheck %s
// RUN: tilefuse-opt %s -split-input-file -tgpu-row-sum-on-tensor-cores | FileCheck %s --check-prefix=OFF

// tgpu-row-sum-on-tensor-cores: the online softmax's l' = alpha·l + rowsum(P) as 8 more columns
// of P·V's accumulator. The product reads a block of ones (filled once, before the grid) after
// each k-step, O's carried type widens through the branches, l's update goes, and after the loop
// tgpu.split_row_sums gives the epilogue O and l.

!view = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
!rows = tensor<64xf32, #tgpu.acc_rows<#tgpu.wgmma_acc<warpgroups = 1>>>
!qa = tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>

// Without row_sum_mma in the module's tile.config (and without force) nothing changes.
// OFF-LABEL: func.func @kernel
// OFF-NOT:     row_sums
// OFF:         tile.reduce sum

// CHECK-LABEL: func.func @kernel
// CHECK:         %[[ONES:.+]] = tgpu.alloc : !tgpu.buffer<8x64xbf16, #tgpu.shared<canonical_128b>>
// CHECK:         tgpu.fill %[[ONES]], 1.000000e+00 : <8x64xbf16, #tgpu.shared<canonical_128b>>
// CHECK-NEXT:    scf.forall
// O starts at zero in all 72 columns.
// CHECK:           %[[ZERO:.+]] = arith.constant dense<0.000000e+00> : tensor<64x72xf32, #tgpu.wgmma_acc<warpgroups = 1>>
// CHECK:           %[[RES:.+]]:3 = scf.for {{.+}} iter_args(%[[M:[^ ]+]] = {{.+}}, %[[L:[^ ]+]] = {{.+}}, %[[O:[^ ]+]] = %[[ZERO]]) -> ({{.+}}, tensor<64x72xf32, #tgpu.wgmma_acc<warpgroups = 1>>)
// CHECK:             %[[NEXT:.+]]:3 = scf.if %{{.+}} -> ({{.+}}, tensor<64x72xf32, #tgpu.wgmma_acc<warpgroups = 1>>)
// CHECK-NOT:           tile.reduce sum
// CHECK:               %[[ALPHA:.+]] = math.exp2 %{{.+}} : tensor<64xf32
// CHECK:               %[[AB:.+]] = tile.broadcast %[[ALPHA]] : {{.+}} -> tensor<64x72xf32, #tgpu.wgmma_acc<warpgroups = 1>>
// CHECK:               %[[OS:.+]] = arith.mulf %[[O]], %[[AB]] : tensor<64x72xf32
// CHECK:               %[[PV:.+]], %[[PF:.+]] = tgpu.wgmma %{{.+}}, %{{.+}} acc %[[OS]] row_sums(%[[ONES]] : !tgpu.buffer<8x64xbf16, #tgpu.shared<canonical_128b>>) : {{.+}} -> tensor<64x72xf32, #tgpu.wgmma_acc<warpgroups = 1>>, tensor<64x64xbf16
// CHECK:               %[[PVW:.+]]:2 = tgpu.wgmma_wait %[[PV]], %[[PF]] pending 0 : tensor<64x72xf32
// The carried l passes through unchanged: its update is gone.
// CHECK:               scf.yield %{{.+}}, %[[L]], %[[PVW]]#0
// CHECK:             } else {
// CHECK:               scf.yield %[[M]], %[[L]], %[[O]]
// CHECK:           %[[OUT:.+]], %[[SUMS:.+]] = tgpu.split_row_sums %[[RES]]#2 : tensor<64x72xf32, #tgpu.wgmma_acc<warpgroups = 1>> -> tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>, tensor<64xf32, #tgpu.acc_rows<#tgpu.wgmma_acc<warpgroups = 1>>>
// CHECK:           %[[INV:.+]] = arith.divf %{{.+}}, %[[SUMS]]
// CHECK:           %[[IB:.+]] = tile.broadcast %[[INV]]
// CHECK:           %[[NORM:.+]] = arith.mulf %[[OUT]], %[[IB]]
// CHECK:           tile.block_store %[[NORM]]
// CHECK:           math.log %[[SUMS]]
func.func @kernel(%q: !view, %k: !view, %v: !view, %o: !view, %lse: !lse, %n: index) {
  %kbuf = tgpu.alloc : !buf
  %vbuf = tgpu.alloc : !buf
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %zero = arith.constant dense<0.0> : !acc
  %zrows = arith.constant dense<0.0> : !rows
  %ones = arith.constant dense<1.0> : !rows
  %ninf = arith.constant dense<0xFF800000> : !rows
  %B = memref.dim %q, %c0 : !view
  %H = memref.dim %q, %c1 : !view
  scf.forall (%b, %h, %r) in (%B, %H, %c1) {
    %qb = tile.block_load %q[%b, %h, %c0] bound %n : !view -> !qa
    %res:3 = scf.for %j = %c0 to %n step %c1
        iter_args(%m = %ninf, %l = %zrows, %acc = %zero) -> (!rows, !rows, !acc) {
      %odd = arith.remui %j, %c2 : index
      %active = arith.cmpi ne, %odd, %c1 : index
      %next:3 = scf.if %active -> (!rows, !rows, !acc) {
        %s:2 = tgpu.wgmma %qb, %kbuf transpose_rhs : !qa, !buf -> !acc, !qa
        %sw:2 = tgpu.wgmma_wait %s#0, %s#1 pending 0 : !acc, !qa
        %mx = tile.reduce max %sw#0 : !acc -> !rows
        %mnew = arith.maximumf %m, %mx : !rows
        %mb = tile.broadcast %mnew : !rows -> !acc
        %sd = arith.subf %sw#0, %mb : !acc
        %p = math.exp2 %sd : !acc
        %md = arith.subf %m, %mnew : !rows
        %alpha = math.exp2 %md : !rows
        %sum = tile.reduce sum %p : !acc -> !rows
        %ls = arith.mulf %l, %alpha : !rows
        %l1 = arith.addf %ls, %sum : !rows
        %ab = tile.broadcast %alpha : !rows -> !acc
        %os = arith.mulf %acc, %ab : !acc
        %pa = tgpu.pack_operand_a %p : !acc -> !qa
        %pv:2 = tgpu.wgmma %pa, %vbuf acc %os : !qa, !buf, !acc -> !acc, !qa
        %pvw:2 = tgpu.wgmma_wait %pv#0, %pv#1 pending 0 : !acc, !qa
        scf.yield %mnew, %l1, %pvw#0 : !rows, !rows, !acc
      } else {
        scf.yield %m, %l, %acc : !rows, !rows, !acc
      }
      scf.yield %next#0, %next#1, %next#2 : !rows, !rows, !acc
    } {tile.kv_loop}
    %inv = arith.divf %ones, %res#1 : !rows
    %ib = tile.broadcast %inv : !rows -> !acc
    %norm = arith.mulf %res#2, %ib : !acc
    tile.block_store %norm, %o[%b, %h, %c0] bound %n : !acc, !view
    %logl = math.log %res#1 : !rows
    %lsev = arith.addf %res#0, %logl : !rows
    tile.block_store %lsev, %lse[%b, %h, %c0] bound %n : !rows, !lse
  } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
  return
}

// -----

// A loop of another form is left as it is: here l is rescaled by another factor than O.
!view = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
!rows = tensor<64xf32, #tgpu.acc_rows<#tgpu.wgmma_acc<warpgroups = 1>>>
!qa = tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>

// CHECK-LABEL: func.func @other_form
// CHECK-NOT:     row_sums
// CHECK-NOT:     tgpu.fill
// CHECK:         tile.reduce sum
// CHECK-NOT:     tgpu.split_row_sums
func.func @other_form(%q: !view, %o: !view, %n: index, %beta: !rows) {
  %kbuf = tgpu.alloc : !buf
  %vbuf = tgpu.alloc : !buf
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant dense<0.0> : !acc
  %zrows = arith.constant dense<0.0> : !rows
  %B = memref.dim %q, %c0 : !view
  scf.forall (%b, %h, %r) in (%B, %c1, %c1) {
    %qb = tile.block_load %q[%b, %h, %c0] bound %n : !view -> !qa
    %res:2 = scf.for %j = %c0 to %n step %c1 iter_args(%l = %zrows, %acc = %zero)
        -> (!rows, !acc) {
      %s:2 = tgpu.wgmma %qb, %kbuf transpose_rhs : !qa, !buf -> !acc, !qa
      %sw:2 = tgpu.wgmma_wait %s#0, %s#1 pending 0 : !acc, !qa
      %p = math.exp2 %sw#0 : !acc
      %alpha = tile.reduce max %sw#0 : !acc -> !rows
      %sum = tile.reduce sum %p : !acc -> !rows
      %ls = arith.mulf %l, %beta : !rows
      %l1 = arith.addf %ls, %sum : !rows
      %ab = tile.broadcast %alpha : !rows -> !acc
      %os = arith.mulf %acc, %ab : !acc
      %pa = tgpu.pack_operand_a %p : !acc -> !qa
      %pv:2 = tgpu.wgmma %pa, %vbuf acc %os : !qa, !buf, !acc -> !acc, !qa
      %pvw:2 = tgpu.wgmma_wait %pv#0, %pv#1 pending 0 : !acc, !qa
      scf.yield %l1, %pvw#0 : !rows, !acc
    } {tile.kv_loop}
    %ib = tile.broadcast %res#0 : !rows -> !acc
    %norm = arith.mulf %res#1, %ib : !acc
    tile.block_store %norm, %o[%b, %h, %c0] bound %n : !acc, !view
  } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
  return
}
