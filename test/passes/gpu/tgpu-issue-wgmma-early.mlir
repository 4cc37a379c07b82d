// RUN: tilefuse-opt %s -split-input-file -tgpu-issue-wgmma-early | FileCheck %s

!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>

// A backward body as tile-to-tgpu writes it: each product waited for at once, each staged lhs
// written right before its product, dK += dS^T Q before dV += P^T dO. After the pass: dP is
// issued beside S (S's wait leaves it in flight: pending 1); P is staged as soon as it exists
// and dV issued right after, ahead of dK, and in flight while dS is computed and dK issued;
// a wait moves down only (to the first use of its results or the next issue).
// CHECK-LABEL: func.func @backward_body
// CHECK:         %[[Q:.+]] = tgpu.alloc
// CHECK-NEXT:    %[[K:.+]] = tgpu.alloc
// CHECK-NEXT:    %[[V:.+]] = tgpu.alloc
// CHECK-NEXT:    %[[DO:.+]] = tgpu.alloc
// CHECK-NEXT:    %[[DSB:.+]] = tgpu.alloc
// CHECK-NEXT:    %[[PB:.+]] = tgpu.alloc
// CHECK-NEXT:    %[[S:.+]] = tgpu.wgmma %[[Q]], %[[K]] transpose_rhs
// CHECK-NEXT:    %[[DP:.+]] = tgpu.wgmma %[[DO]], %[[V]] transpose_rhs
// CHECK-NEXT:    %[[S1:.+]] = tgpu.wgmma_wait %[[S]] pending 1
// CHECK-NEXT:    %[[P:.+]] = math.exp %[[S1]]
// CHECK-NEXT:    tgpu.local_store %[[P]], %[[PB]]
// CHECK-NEXT:    %[[DV:.+]] = tgpu.wgmma %[[PB]], %[[DO]] acc %arg1 transpose_lhs
// CHECK-NEXT:    %[[DP1:.+]] = tgpu.wgmma_wait %[[DP]] pending 1
// CHECK-NEXT:    %[[DS:.+]] = arith.mulf %[[P]], %[[DP1]]
// CHECK-NEXT:    tgpu.local_store %[[DS]], %[[DSB]]
// CHECK-NEXT:    %[[DK:.+]] = tgpu.wgmma %[[DSB]], %[[Q]] acc %arg0 transpose_lhs
// CHECK-NEXT:    %[[DV1:.+]] = tgpu.wgmma_wait %[[DV]] pending 1
// CHECK-NEXT:    %[[DK1:.+]] = tgpu.wgmma_wait %[[DK]] pending 0
// CHECK-NEXT:    return %[[DK1]], %[[DV1]]
func.func @backward_body(%dkacc: !acc, %dvacc: !acc) -> (!acc, !acc) {
  %q = tgpu.alloc : !buf
  %k = tgpu.alloc : !buf
  %v = tgpu.alloc : !buf
  %do = tgpu.alloc : !buf
  %dsbuf = tgpu.alloc : !buf
  %pbuf = tgpu.alloc : !buf
  %s = tgpu.wgmma %q, %k transpose_rhs : !buf, !buf -> !acc
  %s1 = tgpu.wgmma_wait %s pending 0 : !acc
  %p = math.exp %s1 : !acc
  %dp = tgpu.wgmma %do, %v transpose_rhs : !buf, !buf -> !acc
  %dp1 = tgpu.wgmma_wait %dp pending 0 : !acc
  %ds = arith.mulf %p, %dp1 : !acc
  tgpu.local_store %ds, %dsbuf : !acc, !buf
  %dk = tgpu.wgmma %dsbuf, %q acc %dkacc transpose_lhs : !buf, !buf, !acc -> !acc
  %dk1 = tgpu.wgmma_wait %dk pending 0 : !acc
  tgpu.local_store %p, %pbuf : !acc, !buf
  %dv = tgpu.wgmma %pbuf, %do acc %dvacc transpose_lhs : !buf, !buf, !acc -> !acc
  %dv1 = tgpu.wgmma_wait %dv pending 0 : !acc
  return %dk1, %dv1 : !acc, !acc
}

// -----

!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>

// What stops a move: a store is not hoisted above the wait of a product that reads its buffer
// (the tensor cores read it until then), a product not above a store into a buffer it reads,
// a wait not below a store into a buffer its product reads, nothing across a region op.
// CHECK-LABEL: func.func @hazards
// CHECK:         %[[A:.+]] = tgpu.wgmma %[[ST:.+]], %[[OT:[^ ]+]] transpose_lhs
// CHECK-NEXT:    %[[A1:.+]] = tgpu.wgmma_wait %[[A]] pending 0
// CHECK-NEXT:    tgpu.local_store %arg0, %[[ST]]
// CHECK-NEXT:    %[[B:.+]] = tgpu.wgmma %[[ST]], %[[OT]] transpose_lhs
// CHECK-NEXT:    scf.if
// CHECK:         }
// CHECK-NEXT:    %[[B1:.+]] = tgpu.wgmma_wait %[[B]] pending 0
func.func @hazards(%x: !acc, %c: i1) -> (!acc, !acc) {
  %staged = tgpu.alloc : !buf
  %other = tgpu.alloc : !buf
  %a = tgpu.wgmma %staged, %other transpose_lhs : !buf, !buf -> !acc
  %a1 = tgpu.wgmma_wait %a pending 0 : !acc
  tgpu.local_store %x, %staged : !acc, !buf
  %b = tgpu.wgmma %staged, %other transpose_lhs : !buf, !buf -> !acc
  scf.if %c {
    gpu.barrier
  }
  %b1 = tgpu.wgmma_wait %b pending 0 : !acc
  return %a1, %b1 : !acc, !acc
}
