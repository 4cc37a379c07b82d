// RUN: tilefuse-opt %s -split-input-file -verify-diagnostics \
// RUN:   -tgpu-overlap-softmax="force=true hold-product-wait=true" | FileCheck %s
// RUN: tilefuse-opt %s -split-input-file -verify-diagnostics -tgpu-overlap-softmax="force=true" \
// RUN:   | FileCheck %s --check-prefix=UNHELD
// UNHELD-NOT: tgpu.wait_after_preceding_code
// RUN: tilefuse-opt %s -split-input-file -tgpu-overlap-softmax 2>&1 | FileCheck %s --check-prefix=OFF

// tgpu-overlap-softmax: the consumers' key loop of a warp-specialized kernel, rotated. Each key
// block issues Q·Kᵀ, then the P·V of the block before (its packed P and rescale factor carried
// by the loop), waits for Q·Kᵀ alone, runs its softmax beside that P·V, then waits for it. The
// first block with work has nothing pending; the last pending P·V runs after the loop.

!view = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
!rows = tensor<64xf32, #tgpu.acc_rows<#tgpu.wgmma_acc<warpgroups = 1>>>
!qa = tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>
!ring = !tgpu.ring<2 x 64x64xbf16, #tgpu.shared<canonical_128b>>
!bars = !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>

// Without softmax_overlap in the module's tile.config (and without force) nothing changes.
// OFF-LABEL: func.func @kernel
// OFF:         scf.for
// OFF-NOT:       pending 1

// The loop carries the flag (false at first), the pending rescale factor and the packed P
// (placeholders until the first block: never read).
// CHECK-LABEL: func.func @kernel
// CHECK:         tile.block_load
// CHECK-NEXT:    %[[NO:.+]] = arith.constant false
// CHECK-NEXT:    %[[ONE:.+]] = arith.constant dense<0.000000e+00> : tensor<64xf32
// CHECK-NEXT:    %[[NOP:.+]] = arith.constant dense<0.000000e+00> : tensor<64x64xbf16
// CHECK-NEXT:    %[[LOOP:.+]]:8 = scf.for {{.+}} iter_args(%[[M:[^ ]+]] = {{.+}}, %[[L:[^ ]+]] = {{.+}}, %[[O:[^ ]+]] = {{.+}}, %[[KN:[^ ]+]] = {{.+}}, %[[VN:[^ ]+]] = {{.+}}, %[[HAS:[^ ]+]] = %[[NO]], %[[ALPHA:[^ ]+]] = %[[ONE]], %[[P:[^ ]+]] = %[[NOP]])
// CHECK:           scf.if %{{.+}} -> ({{.+}}, i1, tensor<64xf32, {{.+}}>, tensor<64x64xbf16, {{.+}}>) {
// CHECK:             scf.if %[[HAS]] -> ({{.+}}, i1, tensor<64xf32, {{.+}}>, tensor<64x64xbf16, {{.+}}>) {
// Rotated: the pending P·V's rescale and value stage before Q·Kᵀ is issued, its wgmma after.
// CHECK:               %[[AB:.+]] = tile.broadcast %[[ALPHA]]
// CHECK:               %[[OS:.+]] = arith.mulf %[[O]], %[[AB]]
// CHECK:               %[[VS:.+]] = arith.remui %[[VN]]
// CHECK:               %[[VSTAGE:.+]] = tgpu.stage %{{.+}}[%[[VS]]]
// CHECK:               nvgpu.mbarrier.try_wait.parity %[[VFULL:.+]]{{\[}}%[[VS]]]
// CHECK:               nvgpu.mbarrier.try_wait.parity %[[KFULL:.+]]{{\[}}
// CHECK-NEXT:          %[[S:.+]], %[[QF:.+]] = tgpu.wgmma %{{.+}}, %{{.+}} transpose_rhs
// CHECK-NEXT:          %[[PV:.+]], %[[PF:.+]] = tgpu.wgmma %[[P]], %[[VSTAGE]] acc %[[OS]]
// CHECK-NEXT:          %[[SW:.+]]:2 = tgpu.wgmma_wait %[[S]], %[[QF]] pending 1
// CHECK-NEXT:          nvgpu.mbarrier.arrive %[[KEMPTY:.+]]{{\[}}
// The softmax of this block beside the P·V, then the wait for it, then P packed.
// CHECK:               tile.reduce max %[[SW]]#0
// CHECK:               %[[E:.+]] = math.exp2
// The pending P·V's wait is marked to stay below the softmax through ptxas (hold-product-wait).
// CHECK:               %[[PVW:.+]]:2 = tgpu.wgmma_wait %[[PV]], %[[PF]] pending 0 {tgpu.wait_after_preceding_code}
// CHECK-NEXT:          nvgpu.mbarrier.arrive %[[VEMPTY:.+]]{{\[}}%[[VS]]]
// CHECK:               %[[PNEW:.+]] = tgpu.pack_operand_a %[[E]]
// CHECK:               scf.yield %{{.+}}, %{{.+}}, %[[PVW]]#0, %{{.+}}, %{{.+}}, %true, %{{.+}}, %[[PNEW]]
// First: the block without a P·V; the output and the value counter pass through.
// CHECK:             } else {
// CHECK-NOT:           tgpu.wgmma {{.+}} acc
// CHECK:               tgpu.wgmma_wait %{{.+}}, %{{.+}} pending 0
// CHECK-NOT:           tgpu.wgmma {{.+}} acc
// CHECK:               scf.yield %{{.+}}, %{{.+}}, %[[O]], %{{.+}}, %[[VN]], %true
// CHECK:           } else {
// CHECK:             scf.yield %[[M]], %[[L]], %[[O]], %[[KN]], %[[VN]], %[[HAS]], %[[ALPHA]], %[[P]]
// The epilogue: the last pending P·V, and the store reads its result.
// CHECK:         %[[LAST:.+]]:2 = scf.if %[[LOOP]]#5 -> (tensor<64x64xf32, {{.+}}>, index) {
// CHECK:           tile.broadcast %[[LOOP]]#6
// CHECK:           tgpu.wgmma %[[LOOP]]#7
// CHECK:           tgpu.wgmma_wait {{.+}} pending 0 :
// CHECK:           nvgpu.mbarrier.arrive
// CHECK:         } else {
// CHECK:           scf.yield %[[LOOP]]#2, %[[LOOP]]#4
// CHECK:         tile.block_store %[[LAST]]#0
func.func @kernel(%q: !view, %k: !view, %v: !view, %o: !view, %n: index) {
  %kring = tgpu.alloc : !ring
  %vring = tgpu.alloc : !ring
  %kfull = tgpu.alloc : !bars
  %kempty = tgpu.alloc : !bars
  %vfull = tgpu.alloc : !bars
  %vempty = tgpu.alloc : !bars
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %false = arith.constant false
  %zero = arith.constant dense<0.0> : !acc
  %zrows = arith.constant dense<0.0> : !rows
  %ninf = arith.constant dense<0xFF800000> : !rows
  %B = memref.dim %q, %c0 : !view
  %H = memref.dim %q, %c1 : !view
  scf.forall (%b, %h, %r) in (%B, %H, %c1) {
    tgpu.warp_specialize partition warps 4 registers 240 {
      %qb = tile.block_load %q[%b, %h, %c0] bound %n : !view -> !qa
      %res:5 = scf.for %j = %c0 to %n step %c1
          iter_args(%m = %ninf, %l = %zrows, %acc = %zero, %kn = %c0, %vn = %c0)
          -> (!rows, !rows, !acc, index, index) {
        %odd = arith.remui %j, %c2 : index
        %active = arith.cmpi ne, %odd, %c1 : index
        %next:5 = scf.if %active -> (!rows, !rows, !acc, index, index) {
          %ks = arith.remui %kn, %c2 : index
          %kstage = tgpu.stage %kring[%ks] : !ring
          nvgpu.mbarrier.try_wait.parity %kfull[%ks], %false, %c0 : !bars
          %s:2 = tgpu.wgmma %qb, %kstage transpose_rhs : !qa, !buf -> !acc, !qa
          %sw:2 = tgpu.wgmma_wait %s#0, %s#1 pending 0 : !acc, !qa
          %kt = nvgpu.mbarrier.arrive %kempty[%ks] : !bars -> !nvgpu.mbarrier.token
          %kn1 = arith.addi %kn, %c1 : index
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
      }
      tile.block_store %res#2, %o[%b, %h, %c0] bound %n : !acc, !view
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

// A P·V whose B stage no fill counter picks (one buffer, no ring) is not rotated: there is no
// value stage to hold across the next block's Q·Kᵀ.
func.func @no_ring(%q: !view, %n: index) {
  %kbuf = tgpu.alloc : !buf
  %vbuf = tgpu.alloc : !buf
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant dense<0.0> : !acc
  scf.forall (%b, %h, %r) in (%c1, %c1, %c1) {
    tgpu.warp_specialize partition warps 4 registers 240 {
      %qb = tile.block_load %q[%b, %h, %c0] bound %n : !view -> !qa
      %res = scf.for %j = %c0 to %n step %c1 iter_args(%acc = %zero) -> (!acc) {
        %s:2 = tgpu.wgmma %qb, %kbuf transpose_rhs : !qa, !buf -> !acc, !qa
        %sw:2 = tgpu.wgmma_wait %s#0, %s#1 pending 0 : !acc, !qa
        %pa = tgpu.pack_operand_a %sw#0 : !acc -> !qa
        // expected-error @below {{cannot overlap the softmax with the P·V GEMM: its B stage is not chosen by a fill counter the loop carries (use softmax_overlap=false)}}
        %pv:2 = tgpu.wgmma %pa, %vbuf acc %acc : !qa, !buf, !acc -> !acc, !qa
        %pvw:2 = tgpu.wgmma_wait %pv#0, %pv#1 pending 0 : !acc, !qa
        scf.yield %pvw#0 : !acc
      }
      tile.block_store %res, %q[%b, %h, %c0] bound %n : !acc, !view
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
!ring = !tgpu.ring<2 x 64x64xbf16, #tgpu.shared<canonical_128b>>

// A key block's body with its own control flow between the GEMMs is refused where the branch
// holds a GEMM (a branch that only computes, as tgpu-narrow-key-tail's softmax, is accepted): a
// wgmma in flight would cross it.
func.func @branchy(%q: !view, %n: index, %flag: i1) {
  %kbuf = tgpu.alloc : !buf
  %vring = tgpu.alloc : !ring
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %zero = arith.constant dense<0.0> : !acc
  scf.forall (%b, %h, %r) in (%c1, %c1, %c1) {
    tgpu.warp_specialize partition warps 4 registers 240 {
      %qb = tile.block_load %q[%b, %h, %c0] bound %n : !view -> !qa
      %res:2 = scf.for %j = %c0 to %n step %c1 iter_args(%acc = %zero, %vn = %c0) -> (!acc, index) {
        %s:2 = tgpu.wgmma %qb, %kbuf transpose_rhs : !qa, !buf -> !acc, !qa
        %sw:2 = tgpu.wgmma_wait %s#0, %s#1 pending 0 : !acc, !qa
        // expected-error @below {{cannot overlap the softmax with the P·V GEMM: the key block's body is not straight-line code (use softmax_overlap=false)}}
        %t = scf.if %flag -> (!acc) {
          %s2:2 = tgpu.wgmma %qb, %kbuf transpose_rhs : !qa, !buf -> !acc, !qa
          %sw2:2 = tgpu.wgmma_wait %s2#0, %s2#1 pending 0 : !acc, !qa
          scf.yield %sw2#0 : !acc
        } else {
          scf.yield %zero : !acc
        }
        %pa = tgpu.pack_operand_a %t : !acc -> !qa
        %vs = arith.remui %vn, %c2 : index
        %vstage = tgpu.stage %vring[%vs] : !ring
        %pv:2 = tgpu.wgmma %pa, %vstage acc %acc : !qa, !buf, !acc -> !acc, !qa
        %pvw:2 = tgpu.wgmma_wait %pv#0, %pv#1 pending 0 : !acc, !qa
        %vn1 = arith.addi %vn, %c1 : index
        scf.yield %pvw#0, %vn1 : !acc, index
      }
      tile.block_store %res#0, %q[%b, %h, %c0] bound %n : !acc, !view
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
!ring = !tgpu.ring<2 x 64x64xbf16, #tgpu.shared<canonical_128b>>

// A branch that only computes (no GEMM, no wait, no memory effect: tgpu-narrow-key-tail's two
// forms of the softmax) is straight-line code to the rotation: it goes with the softmax, beside
// the pending P·V.
// CHECK-LABEL: func.func @compute_branch
// CHECK:         scf.for
// CHECK:           tgpu.wgmma %{{.+}}, %{{.+}} transpose_rhs
// CHECK-NEXT:      tgpu.wgmma %{{.+}}, %{{.+}} acc
// CHECK-NEXT:      tgpu.wgmma_wait %{{.+}}, %{{.+}} pending 1
// CHECK:           scf.if %{{.+}} -> (tensor<64x64xf32
// CHECK:             math.exp2
// CHECK:           } else {
// CHECK:           tgpu.wgmma_wait %{{.+}}, %{{.+}} pending 0
func.func @compute_branch(%q: !view, %n: index, %flag: i1) {
  %kbuf = tgpu.alloc : !buf
  %vring = tgpu.alloc : !ring
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %zero = arith.constant dense<0.0> : !acc
  scf.forall (%b, %h, %r) in (%c1, %c1, %c1) {
    tgpu.warp_specialize partition warps 4 registers 240 {
      %qb = tile.block_load %q[%b, %h, %c0] bound %n : !view -> !qa
      %res:2 = scf.for %j = %c0 to %n step %c1 iter_args(%acc = %zero, %vn = %c0) -> (!acc, index) {
        %s:2 = tgpu.wgmma %qb, %kbuf transpose_rhs : !qa, !buf -> !acc, !qa
        %sw:2 = tgpu.wgmma_wait %s#0, %s#1 pending 0 : !acc, !qa
        %t = scf.if %flag -> (!acc) {
          %e = math.exp2 %sw#0 : !acc
          scf.yield %e : !acc
        } else {
          scf.yield %zero : !acc
        }
        %pa = tgpu.pack_operand_a %t : !acc -> !qa
        %vs = arith.remui %vn, %c2 : index
        %vstage = tgpu.stage %vring[%vs] : !ring
        %pv:2 = tgpu.wgmma %pa, %vstage acc %acc : !qa, !buf, !acc -> !acc, !qa
        %pvw:2 = tgpu.wgmma_wait %pv#0, %pv#1 pending 0 : !acc, !qa
        %vn1 = arith.addi %vn, %c1 : index
        scf.yield %pvw#0, %vn1 : !acc, index
      }
      tile.block_store %res#0, %q[%b, %h, %c0] bound %n : !acc, !view
    } partition warps 4 registers 24 {
    }
  } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
  return
}
