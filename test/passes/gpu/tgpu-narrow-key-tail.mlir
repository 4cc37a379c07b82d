// RUN: tilefuse-opt %s -split-input-file -tgpu-narrow-key-tail="width=32 explain=true" \
// RUN:   -verify-diagnostics | FileCheck %s
// RUN: tilefuse-opt %s -split-input-file -tgpu-narrow-key-tail | FileCheck %s --check-prefix=OFF

// tgpu-narrow-key-tail: the masked body's softmax branches on whether every key from column 32
// on is past the key bound (its key copy's first row + 32 >= bound); there it runs on the
// scores' first 32 columns and pads P back with zero columns for P·V. The GEMMs, the copies and
// the P·V stay where they were. Here S and O are both 64 x 64: which blocks are the scores' is
// read from the dataflow, not the types (alpha's broadcast to O's shape stays outside).

!view = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
!narrow = tensor<64x32xf32, #tgpu.wgmma_acc<warpgroups = 1>>
!rows = tensor<64xf32, #tgpu.acc_rows<#tgpu.wgmma_acc<warpgroups = 1>>>
!qa = tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>

// Without key_tail in the module's tile.config (and without width) nothing changes.
// OFF-LABEL: func.func @kernel
// OFF-NOT:     tgpu.leading_columns
// OFF-NOT:     tgpu.pad_columns

// CHECK-LABEL: func.func @kernel
// CHECK:         scf.for
// CHECK:           %[[KEY0:.+]] = arith.muli %{{.+}}, %c64
// The unmasked body keeps its softmax.
// CHECK:           %[[UNMASKED:.+]]:3 = scf.if
// CHECK-NOT:         tgpu.leading_columns
// CHECK:             tgpu.pack_operand_a
// CHECK:           } else {
// The masked body: its copy and Q·Kᵀ, then the branch.
// CHECK:             tgpu.async_copy %{{.+}}[%{{.+}}, %{{.+}}, %[[KEY0]]] bound %[[N:[^ ]+]] into
// CHECK:             %[[SW:.+]]:2 = tgpu.wgmma_wait
// CHECK:             %[[END:.+]] = arith.addi %[[KEY0]], %c32
// CHECK:             %[[TAIL:.+]] = arith.cmpi sge, %[[END]], %[[N]]
// The branch yields what the rest of the body reads: m, P (full width), alpha, l.
// CHECK:             %[[SM:.+]]:4 = scf.if %[[TAIL]] -> (tensor<64xf32, {{.+}}>, tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>, tensor<64xf32, {{.+}}>, tensor<64xf32, {{.+}}>) {
// CHECK:               %[[S32:.+]] = tgpu.leading_columns %[[SW]]#0 : tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>> -> tensor<64x32xf32, #tgpu.wgmma_acc<warpgroups = 1>>
// CHECK:               %[[MASKED:.+]] = tile.block_mask %[[S32]] at({{.+}}) : tensor<64x32xf32
// CHECK:               %[[MX:.+]] = tile.reduce max %[[MASKED]] : tensor<64x32xf32, {{.+}}> -> tensor<64xf32
// CHECK:               tile.broadcast %{{.+}} : tensor<64xf32, {{.+}}> -> tensor<64x32xf32
// CHECK:               %[[SCALE:.+]] = arith.constant dense<1.250000e-01> : tensor<64x32xf32
// CHECK:               arith.mulf %[[MASKED]], %[[SCALE]] : tensor<64x32xf32
// CHECK:               %[[P32:.+]] = math.exp2 %{{.+}} : tensor<64x32xf32
// CHECK:               tile.reduce sum %[[P32]] : tensor<64x32xf32
// CHECK:               %[[P:.+]] = tgpu.pad_columns %[[P32]] : tensor<64x32xf32, #tgpu.wgmma_acc<warpgroups = 1>> -> tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
// CHECK:               scf.yield %{{.+}}, %[[P]], %{{.+}}, %{{.+}}
// CHECK:             } else {
// CHECK-NOT:           tgpu.leading_columns
// CHECK:               tile.block_mask %[[SW]]#0
// CHECK:               scf.yield
// CHECK:             }
// alpha's broadcast to O's shape and O's rescale stay after the branch, reading its alpha.
// CHECK:             %[[AB:.+]] = tile.broadcast %[[SM]]#2 : tensor<64xf32, {{.+}}> -> tensor<64x64xf32
// CHECK:             %[[OS:.+]] = arith.mulf %{{.+}}, %[[AB]] : tensor<64x64xf32
// CHECK:             %[[PA:.+]] = tgpu.pack_operand_a %[[SM]]#1
// CHECK:             tgpu.wgmma %[[PA]], %{{.+}} acc %[[OS]]
// CHECK:             scf.yield %[[SM]]#0, %[[SM]]#3
func.func @kernel(%q: !view, %k: !view, %v: !view, %o: !view, %n: index, %blocks: index) {
  %kbuf = tgpu.alloc : !buf
  %vbuf = tgpu.alloc : !buf
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant dense<0.0> : !acc
  %scale = arith.constant dense<0.125> : !acc
  %zrows = arith.constant dense<0.0> : !rows
  %ninf = arith.constant dense<0xFF800000> : !rows
  %B = memref.dim %q, %c0 : !view
  %H = memref.dim %q, %c1 : !view
  scf.forall (%b, %h, %r) in (%B, %H, %c1) {
    %qb = tile.block_load %q[%b, %h, %c0] bound %n : !view -> !qa
    %res:3 = scf.for %j = %c0 to %blocks step %c1
        iter_args(%m = %ninf, %l = %zrows, %acc = %zero) -> (!rows, !rows, !acc) {
      %key0 = arith.muli %j, %c64 : index
      %end = arith.addi %key0, %c64 : index
      %full = arith.cmpi sle, %end, %n : index
      %next:3 = scf.if %full -> (!rows, !rows, !acc) {
        %kc = tgpu.async_copy %k[%b, %h, %key0] bound %n into %kbuf : !view, !buf
        %kg = nvgpu.device_async_create_group %kc
        nvgpu.device_async_wait %kg
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
        %vc = tgpu.async_copy %v[%b, %h, %key0] bound %n into %vbuf : !view, !buf
        %vg = nvgpu.device_async_create_group %vc
        nvgpu.device_async_wait %vg
        %pv:2 = tgpu.wgmma %pa, %vbuf acc %os : !qa, !buf, !acc -> !acc, !qa
        %pvw:2 = tgpu.wgmma_wait %pv#0, %pv#1 pending 0 : !acc, !qa
        scf.yield %mnew, %l1, %pvw#0 : !rows, !rows, !acc
      } else {
        %kc = tgpu.async_copy %k[%b, %h, %key0] bound %n into %kbuf : !view, !buf
        %kg = nvgpu.device_async_create_group %kc
        nvgpu.device_async_wait %kg
        %s:2 = tgpu.wgmma %qb, %kbuf transpose_rhs : !qa, !buf -> !acc, !qa
        %sw:2 = tgpu.wgmma_wait %s#0, %s#1 pending 0 : !acc, !qa
        %masked = tile.block_mask %sw#0 at(%b, %h, %c0, %key0) : !acc {
        ^bb0(%i: index, %hh: index, %row: index, %col: index):
          %in = arith.cmpi ult, %col, %n : index
          tile.yield %in : i1
        }
        %mx = tile.reduce max %masked : !acc -> !rows
        %mnew = arith.maximumf %m, %mx : !rows
        %mb = tile.broadcast %mnew : !rows -> !acc
        %scaled = arith.mulf %masked, %scale : !acc
        %sd = arith.subf %scaled, %mb : !acc
        %p = math.exp2 %sd : !acc
        %md = arith.subf %m, %mnew : !rows
        %alpha = math.exp2 %md : !rows
        %sum = tile.reduce sum %p : !acc -> !rows
        %ls = arith.mulf %l, %alpha : !rows
        %l1 = arith.addf %ls, %sum : !rows
        %ab = tile.broadcast %alpha : !rows -> !acc
        %os = arith.mulf %acc, %ab : !acc
        %pa = tgpu.pack_operand_a %p : !acc -> !qa
        %vc = tgpu.async_copy %v[%b, %h, %key0] bound %n into %vbuf : !view, !buf
        %vg = nvgpu.device_async_create_group %vc
        nvgpu.device_async_wait %vg
        %pv:2 = tgpu.wgmma %pa, %vbuf acc %os : !qa, !buf, !acc -> !acc, !qa
        %pvw:2 = tgpu.wgmma_wait %pv#0, %pv#1 pending 0 : !acc, !qa
        scf.yield %mnew, %l1, %pvw#0 : !rows, !rows, !acc
      }
      scf.yield %next#0, %next#1, %next#2 : !rows, !rows, !acc
    } {tile.kv_loop}
    tile.block_store %res#2, %o[%b, %h, %c0] bound %n : !acc, !view
  } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
  return
}

// -----

// A key block whose copy is not beside its Q·Kᵀ (a block prefetched in an earlier iteration,
// read from a carried buffer) keeps its softmax: where its keys start is not in the body.
!view = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
!rows = tensor<64xf32, #tgpu.acc_rows<#tgpu.wgmma_acc<warpgroups = 1>>>
!qa = tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>

// CHECK-LABEL: func.func @prefetched
// CHECK-NOT:     tgpu.leading_columns
func.func @prefetched(%q: !view, %o: !view, %n: index, %kbuf0: !buf) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zrows = arith.constant dense<0.0> : !rows
  %B = memref.dim %q, %c0 : !view
  scf.forall (%b, %h, %r) in (%B, %c1, %c1) {
    %qb = tile.block_load %q[%b, %h, %c0] bound %n : !view -> !qa
    %res:2 = scf.for %j = %c0 to %n step %c1 iter_args(%l = %zrows, %kbuf = %kbuf0)
        -> (!rows, !buf) {
      %s:2 = tgpu.wgmma %qb, %kbuf transpose_rhs : !qa, !buf -> !acc, !qa
      // expected-remark @below {{tgpu-narrow-key-tail: the softmax stays whole: the buffer Q·Kᵀ reads is not copied in this body (a prefetched key block)}}
      %sw:2 = tgpu.wgmma_wait %s#0, %s#1 pending 0 : !acc, !qa
      %masked = tile.block_mask %sw#0 at(%b, %h, %c0, %j) : !acc {
      ^bb0(%i: index, %hh: index, %row: index, %col: index):
        %in = arith.cmpi ult, %col, %n : index
        tile.yield %in : i1
      }
      %sum = tile.reduce sum %masked : !acc -> !rows
      %l1 = arith.addf %l, %sum : !rows
      scf.yield %l1, %kbuf : !rows, !buf
    } {tile.kv_loop}
    %ib = tile.broadcast %res#0 : !rows -> !acc
    tile.block_store %ib, %o[%b, %h, %c0] bound %n : !acc, !view
  } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
  return
}

// -----

// The masked scores leave the softmax for something other than P's packing (here they are
// stored): zero columns would be wrong there, so the body keeps its softmax.
!view = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
!rows = tensor<64xf32, #tgpu.acc_rows<#tgpu.wgmma_acc<warpgroups = 1>>>
!qa = tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>

// CHECK-LABEL: func.func @scores_stored
// CHECK-NOT:     tgpu.leading_columns
func.func @scores_stored(%q: !view, %k: !view, %o: !view, %n: index) {
  %kbuf = tgpu.alloc : !buf
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zrows = arith.constant dense<0.0> : !rows
  %B = memref.dim %q, %c0 : !view
  scf.forall (%b, %h, %r) in (%B, %c1, %c1) {
    %qb = tile.block_load %q[%b, %h, %c0] bound %n : !view -> !qa
    %res = scf.for %j = %c0 to %n step %c1 iter_args(%l = %zrows) -> (!rows) {
      %kc = tgpu.async_copy %k[%b, %h, %j] bound %n into %kbuf : !view, !buf
      %kg = nvgpu.device_async_create_group %kc
      nvgpu.device_async_wait %kg
      %s:2 = tgpu.wgmma %qb, %kbuf transpose_rhs : !qa, !buf -> !acc, !qa
      // expected-remark @below {{tgpu-narrow-key-tail: the softmax stays whole: 'tile.block_store' reads the scores' blocks}}
      %sw:2 = tgpu.wgmma_wait %s#0, %s#1 pending 0 : !acc, !qa
      %masked = tile.block_mask %sw#0 at(%b, %h, %c0, %j) : !acc {
      ^bb0(%i: index, %hh: index, %row: index, %col: index):
        %in = arith.cmpi ult, %col, %n : index
        tile.yield %in : i1
      }
      tile.block_store %masked, %o[%b, %h, %j] bound %n : !acc, !view
      %sum = tile.reduce sum %masked : !acc -> !rows
      %l1 = arith.addf %l, %sum : !rows
      scf.yield %l1 : !rows
    } {tile.kv_loop}
    %ib = tile.broadcast %res : !rows -> !acc
    tile.block_store %ib, %o[%b, %h, %c0] bound %n : !acc, !view
  } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
  return
}
