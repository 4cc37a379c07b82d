// RUN: tilefuse-opt %s -split-input-file -verify-diagnostics -tgpu-insert-barriers \
// RUN:   | FileCheck %s --check-prefixes=CHECK,EAGER
// RUN: tilefuse-opt %s -split-input-file -verify-diagnostics \
// RUN:   -tgpu-insert-barriers=copy-issue=at-barrier | FileCheck %s --check-prefixes=CHECK,AT-BARRIER
// RUN: not tilefuse-opt %s -split-input-file -tgpu-insert-barriers=copy-issue=late -o /dev/null \
// RUN:   2>&1 | FileCheck %s --check-prefix=OPTION
// RUN: tilefuse-opt %kernels/causal.mlir --tile-front-end --tile-pipeline \
// RUN:   -tgpu-assign-layouts=mma=wgmma -tile-to-tgpu -tgpu-insert-barriers \
// RUN:   | FileCheck %s --check-prefix=CAUSAL

// tgpu-insert-barriers: each cp.async wait gets the number of younger groups that may stay in
// flight (or goes, when an earlier wait completed its group), and a barrier (after a proxy
// fence, for wgmma readers) that makes the copy visible to every thread; a copy into a buffer
// read since the last barrier gets a barrier first (eager) or moves after the next one
// (at-barrier); groups left in flight at the end of a block are waited for.

// OPTION: error: tgpu-insert-barriers: copy-issue must be eager or at-barrier, not 'late'

!view = memref<?x?x?x64xbf16>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
!qa = tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>
!ring = !tgpu.ring<2 x 64x64xbf16, #tgpu.shared<canonical_128b>>
!token = !nvgpu.device.async.token

// The prefetch loop (wgmma): the next key block is copied while this one is read.
// Eager: at the top of the body the previous iteration may still read the ring's other stage,
// so the prefetch waits for a barrier; the wait for this iteration's key block leaves the
// prefetch in flight (numGroups = 1). At-barrier: the prefetch moves after the barrier that
// follows the key block's wait (FA2's order), so that wait leaves nothing in flight.
// The value block's buffer has no readers since that barrier: no barrier before its copy.
// After the loop the last prefetch (the loop's token result) is completed before returning.
// CHECK-LABEL:   func.func @prefetch_loop
// CHECK:           scf.for {{.+}} iter_args({{.+}}, %[[KG:[^ ]+]] = %{{[^ ]+}}) -> (
// CHECK:             %[[K1:.+]] = tgpu.stage
// EAGER-NEXT:        gpu.barrier
// EAGER-NEXT:        %[[T1:.+]] = tgpu.async_copy {{.+}} into %[[K1]]
// EAGER-NEXT:        %[[G1:.+]] = nvgpu.device_async_create_group %[[T1]]
// EAGER-NEXT:        nvgpu.device_async_wait %[[KG]] {numGroups = 1 : i32}
// EAGER-NEXT:        nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// EAGER-NEXT:        gpu.barrier
// AT-BARRIER-NEXT:   nvgpu.device_async_wait %[[KG]] {numGroups = 0 : i32}
// AT-BARRIER-NEXT:   nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// AT-BARRIER-NEXT:   gpu.barrier
// AT-BARRIER-NEXT:   %[[T1:.+]] = tgpu.async_copy {{.+}} into %[[K1]]
// AT-BARRIER-NEXT:   %[[G1:.+]] = nvgpu.device_async_create_group %[[T1]]
// CHECK-NEXT:        tgpu.wgmma
// CHECK-NEXT:        tgpu.wgmma_wait
// CHECK-NEXT:        %[[TV:.+]] = tgpu.async_copy
// CHECK-NEXT:        %[[GV:.+]] = nvgpu.device_async_create_group %[[TV]]
// CHECK-NEXT:        tgpu.pack_operand_a
// CHECK-NEXT:        nvgpu.device_async_wait %[[GV]] {numGroups = 0 : i32}
// CHECK-NEXT:        nvvm.fence.proxy
// CHECK-NEXT:        gpu.barrier
// CHECK-NEXT:        tgpu.wgmma
// CHECK-NEXT:        tgpu.wgmma_wait
// CHECK-NEXT:        scf.yield {{.+}}, %[[K1]], %[[G1]] :
// CHECK-NEXT:      }
// CHECK-NEXT:      nvgpu.device_async_wait %{{.+}}#2 {numGroups = 0 : i32}
// CHECK-NEXT:      nvvm.fence.proxy
// CHECK-NEXT:      gpu.barrier
// CHECK-NEXT:      return
func.func @prefetch_loop(%k: !view, %v: !view, %qb: !qa, %zero: !acc, %b: index, %n: index,
                         %blocks: index) -> !acc {
  %ring = tgpu.alloc : !ring
  %vbuf = tgpu.alloc : !buf
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %k0 = tgpu.stage %ring[%c0] : !ring
  %t0 = tgpu.async_copy %k[%b, %b, %c0] bound %n into %k0 : !view, !buf
  %g0 = nvgpu.device_async_create_group %t0
  %r:3 = scf.for %j = %c0 to %blocks step %c1 iter_args(%acc = %zero, %kb = %k0, %kg = %g0)
      -> (!acc, !buf, !token) {
    %next = arith.addi %j, %c1 : index
    %s1 = arith.remui %next, %c2 : index
    %k1 = tgpu.stage %ring[%s1] : !ring
    %t1 = tgpu.async_copy %k[%b, %b, %next] bound %n into %k1 : !view, !buf
    %g1 = nvgpu.device_async_create_group %t1
    nvgpu.device_async_wait %kg
    %s:2 = tgpu.wgmma %qb, %kb transpose_rhs : !qa, !buf -> !acc, !qa
    %sw:2 = tgpu.wgmma_wait %s#0, %s#1 pending 0 : !acc, !qa
    %tv = tgpu.async_copy %v[%b, %b, %j] bound %n into %vbuf : !view, !buf
    %gv = nvgpu.device_async_create_group %tv
    %p = tgpu.pack_operand_a %sw#0 : !acc -> !qa
    nvgpu.device_async_wait %gv
    %o:2 = tgpu.wgmma %p, %vbuf acc %acc : !qa, !buf, !acc -> !acc, !qa
    %ow:2 = tgpu.wgmma_wait %o#0, %o#1 pending 0 : !acc, !qa
    scf.yield %ow#0, %k1, %g1 : !acc, !buf, !token
  }
  return %r#0 : !acc
}

// -----

!view = memref<?x?x?x64xbf16>
!acc = tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<chunk_xor>>

// mma.sync with Q in shared memory: Q was copied before K, so waiting for K completes Q too and
// Q's own wait goes. ldmatrix reads through the generic proxy: no fence. Refilling K after a
// tgpu.mma read it needs a barrier first (eager); at-barrier has no later barrier in the block
// to wait for, so the reader's wait issues it right after a barrier of its own.
// CHECK-LABEL:   func.func @shared_lhs
// CHECK:           %[[TQ:.+]] = tgpu.async_copy
// CHECK-NEXT:      %[[GQ:.+]] = nvgpu.device_async_create_group %[[TQ]]
// CHECK-NEXT:      %[[TK:.+]] = tgpu.async_copy
// CHECK-NEXT:      %[[GK:.+]] = nvgpu.device_async_create_group %[[TK]]
// CHECK-NEXT:      nvgpu.device_async_wait %[[GK]] {numGroups = 0 : i32}
// CHECK-NEXT:      gpu.barrier
// CHECK-NEXT:      %[[S:.+]] = tgpu.mma
// CHECK-NEXT:      gpu.barrier
// CHECK-NEXT:      %[[TK2:.+]] = tgpu.async_copy
// CHECK-NEXT:      %[[GK2:.+]] = nvgpu.device_async_create_group %[[TK2]]
// CHECK-NEXT:      nvgpu.device_async_wait %[[GK2]] {numGroups = 0 : i32}
// CHECK-NEXT:      gpu.barrier
// CHECK-NEXT:      tgpu.mma
// CHECK-NEXT:      return
func.func @shared_lhs(%q: !view, %k: !view, %b: index, %n: index, %n1: index) -> !acc {
  %qbuf = tgpu.alloc : !buf
  %kbuf = tgpu.alloc : !buf
  %tq = tgpu.async_copy %q[%b, %b, %b] bound %n into %qbuf : !view, !buf
  %gq = nvgpu.device_async_create_group %tq
  %tk = tgpu.async_copy %k[%b, %b, %b] bound %n into %kbuf : !view, !buf
  %gk = nvgpu.device_async_create_group %tk
  nvgpu.device_async_wait %gk
  nvgpu.device_async_wait %gq
  %s = tgpu.mma %qbuf, %kbuf transpose_rhs : !buf, !buf -> !acc
  %tk2 = tgpu.async_copy %k[%b, %b, %n1] bound %n into %kbuf : !view, !buf
  %gk2 = nvgpu.device_async_create_group %tk2
  nvgpu.device_async_wait %gk2
  %s2 = tgpu.mma %qbuf, %kbuf acc %s transpose_rhs : !buf, !buf, !acc -> !acc
  return %s2 : !acc
}

// -----

!view = memref<?x?x?x64xbf16>
!acc = tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>
!qa = tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<chunk_xor>>
!ring = !tgpu.ring<2 x 64x64xbf16, #tgpu.shared<chunk_xor>>
!token = !nvgpu.device.async.token

// A key block the loop may skip (pruning's holes): the branch that reads it waits for it; the
// branch that does not leaves its copy in flight, so the end of the body completes the carried
// group without a barrier (no one reads it; the next iteration's prefetch refills its stage
// after a barrier). A copy the branch issues and never reads is completed before the branch
// ends. Nothing uses wgmma: no fences.
// CHECK-LABEL:   func.func @skipped_block
// CHECK:           scf.for {{.+}} iter_args(%[[KB:[^ ]+]] = %{{[^ ]+}}, %[[KG:[^ ]+]] = %{{[^ ]+}}) -> (
// CHECK:             gpu.barrier
// CHECK-NEXT:        %[[T1:.+]] = tgpu.async_copy
// CHECK-NEXT:        %[[G1:.+]] = nvgpu.device_async_create_group %[[T1]]
// CHECK-NEXT:        scf.if
// CHECK-NEXT:          %[[TV:.+]] = tgpu.async_copy
// CHECK-NEXT:          %[[GV:.+]] = nvgpu.device_async_create_group %[[TV]]
// CHECK-NEXT:          nvgpu.device_async_wait %[[KG]] {numGroups = 2 : i32}
// CHECK-NEXT:          gpu.barrier
// CHECK-NEXT:          tgpu.mma
// CHECK-NEXT:          nvgpu.device_async_wait %[[GV]] {numGroups = 0 : i32}
// CHECK-NEXT:          gpu.barrier
// CHECK-NEXT:        }
// CHECK-NEXT:        nvgpu.device_async_wait %[[KG]] {numGroups = 1 : i32}
// CHECK-NEXT:        scf.yield %{{.+}}, %[[G1]] :
// CHECK-NEXT:      }
// CHECK-NEXT:      nvgpu.device_async_wait %{{.+}}#1 {numGroups = 0 : i32}
// CHECK-NEXT:      gpu.barrier
// CHECK-NEXT:      return
// CHECK-NOT:       nvvm.fence.proxy
func.func @skipped_block(%k: !view, %v: !view, %qa: !qa, %b: index, %n: index, %blocks: index,
                         %visit: i1) {
  %ring = tgpu.alloc : !ring
  %vbuf = tgpu.alloc : !buf
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %k0 = tgpu.stage %ring[%c0] : !ring
  %t0 = tgpu.async_copy %k[%b, %b, %c0] bound %n into %k0 : !view, !buf
  %g0 = nvgpu.device_async_create_group %t0
  %r:2 = scf.for %j = %c0 to %blocks step %c1 iter_args(%kb = %k0, %kg = %g0) -> (!buf, !token) {
    %k1 = tgpu.stage %ring[%c1] : !ring
    %t1 = tgpu.async_copy %k[%b, %b, %j] bound %n into %k1 : !view, !buf
    %g1 = nvgpu.device_async_create_group %t1
    scf.if %visit {
      %tv = tgpu.async_copy %v[%b, %b, %j] bound %n into %vbuf : !view, !buf
      %gv = nvgpu.device_async_create_group %tv
      nvgpu.device_async_wait %kg
      %s = tgpu.mma %qa, %kb transpose_rhs : !qa, !buf -> !acc
    }
    scf.yield %k1, %g1 : !buf, !token
  }
  return
}

// -----

!view = memref<?x?x?x64xbf16>
!acc = tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>
!qa = tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<chunk_xor>>

// A barrier already between a read and the overwrite orders them: no second one. A wait for a
// group that an earlier wait completed goes.
// CHECK-LABEL:   func.func @barrier_in_input
// CHECK:           tgpu.mma %
// CHECK-NEXT:      gpu.barrier
// CHECK-NEXT:      %[[T:.+]] = tgpu.async_copy
// CHECK-NEXT:      %[[G:.+]] = nvgpu.device_async_create_group %[[T]]
// CHECK-NEXT:      nvgpu.device_async_wait %[[G]] {numGroups = 0 : i32}
// CHECK-NEXT:      gpu.barrier
// CHECK-NEXT:      tgpu.mma %
// CHECK-NEXT:      tgpu.mma %
// CHECK-NEXT:      return
func.func @barrier_in_input(%k: !view, %qa: !qa, %b: index, %n: index) -> !acc {
  %kbuf = tgpu.alloc : !buf
  %s = tgpu.mma %qa, %kbuf transpose_rhs : !qa, !buf -> !acc
  gpu.barrier
  %t = tgpu.async_copy %k[%b, %b, %b] bound %n into %kbuf : !view, !buf
  %g = nvgpu.device_async_create_group %t
  nvgpu.device_async_wait %g
  %s1 = tgpu.mma %qa, %kbuf acc %s transpose_rhs : !qa, !buf, !acc -> !acc
  nvgpu.device_async_wait %g
  %s2 = tgpu.mma %qa, %kbuf acc %s1 transpose_rhs : !qa, !buf, !acc -> !acc
  return %s2 : !acc
}

// -----

!view = memref<?x?x?x64xbf16>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<chunk_xor>>

// Copies inside a region this pass cannot order are an error at the region's op.
func.func @unknown_region(%k: !view, %b: index, %n: index) {
  %kbuf = tgpu.alloc : !buf
  // expected-error @below {{'scf.execute_region' op tgpu-insert-barriers: copies or buffer reads inside an op whose regions it does not know how to order}}
  scf.execute_region {
    %t = tgpu.async_copy %k[%b, %b, %b] bound %n into %kbuf : !view, !buf
    %g = nvgpu.device_async_create_group %t
    nvgpu.device_async_wait %g
    scf.yield
  }
  return
}

// The bundled causal kernel (wgmma), through the front end, layouts and tile-to-tgpu: the
// schedule the first emitter (tile-to-nvvm, since replaced) produced, wait for wait and barrier for
// barrier: a barrier before the first key copy (the pruning scans' branches leave every
// buffer possibly read), the prefetch after a barrier at the top of each iteration, in each
// branch the key wait leaving the prefetch and the value copy in flight, the value wait
// leaving none, the carried group completed at the end of the body, the last prefetch before
// the program ends.
// CAUSAL-LABEL: func.func @causal
// CAUSAL:         scf.forall
// CAUSAL-NOT:       nvgpu.device_async_wait
// CAUSAL:           gpu.barrier
// CAUSAL-NEXT:      tgpu.async_copy
// CAUSAL-NEXT:      nvgpu.device_async_create_group
// CAUSAL-NEXT:      %[[LOOP:.+]]:5 = scf.for {{.+}}, %[[KG:[^ ]+]] = %{{[^ ]+}}) -> (
// CAUSAL:             gpu.barrier
// CAUSAL-NEXT:        tgpu.async_copy
// CAUSAL-NEXT:        nvgpu.device_async_create_group
// CAUSAL-NOT:         gpu.barrier
// CAUSAL:             scf.if
// CAUSAL-NEXT:          scf.if
// CAUSAL-NEXT:            tgpu.async_copy
// CAUSAL-NEXT:            %[[VG:.+]] = nvgpu.device_async_create_group
// CAUSAL-NEXT:            nvgpu.device_async_wait %[[KG]] {numGroups = 2 : i32}
// CAUSAL-NEXT:            nvvm.fence.proxy
// CAUSAL-NEXT:            gpu.barrier
// CAUSAL-NEXT:            tgpu.wgmma
// CAUSAL-NOT:             gpu.barrier
// CAUSAL:                 nvgpu.device_async_wait %[[VG]] {numGroups = 0 : i32}
// CAUSAL-NEXT:            nvvm.fence.proxy
// CAUSAL-NEXT:            gpu.barrier
// CAUSAL-NEXT:            tgpu.wgmma
// CAUSAL-NOT:             gpu.barrier
// CAUSAL:               } else {
// CAUSAL-NEXT:            tgpu.async_copy
// CAUSAL-NEXT:            %[[VG2:.+]] = nvgpu.device_async_create_group
// CAUSAL-NEXT:            nvgpu.device_async_wait %[[KG]] {numGroups = 2 : i32}
// CAUSAL-NEXT:            nvvm.fence.proxy
// CAUSAL-NEXT:            gpu.barrier
// CAUSAL-NEXT:            tgpu.wgmma
// CAUSAL-NOT:             gpu.barrier
// CAUSAL:                 nvgpu.device_async_wait %[[VG2]] {numGroups = 0 : i32}
// CAUSAL-NEXT:            nvvm.fence.proxy
// CAUSAL-NEXT:            gpu.barrier
// CAUSAL-NEXT:            tgpu.wgmma
// CAUSAL-NOT:           gpu.barrier
// CAUSAL:             nvgpu.device_async_wait %[[KG]] {numGroups = 1 : i32}
// CAUSAL-NEXT:        scf.yield
// CAUSAL-NEXT:      } {tile.kv_loop}
// CAUSAL-NOT:       gpu.barrier
// CAUSAL:           nvgpu.device_async_wait %[[LOOP]]#4 {numGroups = 0 : i32}
// CAUSAL-NEXT:      nvvm.fence.proxy
// CAUSAL-NEXT:      gpu.barrier
// CAUSAL-NEXT:    }

// -----

!view = memref<?x?x?x64xbf16>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<chunk_xor>>
!token = !nvgpu.device.async.token

// Two carried groups issued Q first before the loop but dO first in its body: the groups in
// flight at the top of the first iteration and of the others are in different orders.
func.func @carried_out_of_order(%q: !view, %do: !view, %b: index, %n: index, %blocks: index) {
  %qbuf = tgpu.alloc : !buf
  %dbuf = tgpu.alloc : !buf
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %tq = tgpu.async_copy %q[%b, %b, %c0] bound %n into %qbuf : !view, !buf
  %gq = nvgpu.device_async_create_group %tq
  %td = tgpu.async_copy %do[%b, %b, %c0] bound %n into %dbuf : !view, !buf
  %gd = nvgpu.device_async_create_group %td
  // expected-error @below {{the loop carries copy groups issued in one order before it and in another in its body}}
  %r:2 = scf.for %j = %c0 to %blocks step %c1 iter_args(%a = %gq, %d = %gd) -> (!token, !token) {
    %td1 = tgpu.async_copy %do[%b, %b, %j] bound %n into %dbuf : !view, !buf
    %gd1 = nvgpu.device_async_create_group %td1
    %tq1 = tgpu.async_copy %q[%b, %b, %j] bound %n into %qbuf : !view, !buf
    %gq1 = nvgpu.device_async_create_group %tq1
    scf.yield %gq1, %gd1 : !token, !token
  }
  return
}

// -----

!acc = tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<chunk_xor>>

// A register block written into a shared buffer (a backward's dS): a barrier before the mma
// that reads it (other warps wrote it), and before the next write, which follows the reads.
// CHECK-LABEL:   func.func @local_store
// CHECK:           tgpu.local_store
// CHECK-NEXT:      gpu.barrier
// CHECK-NEXT:      tgpu.mma
// CHECK-NEXT:      gpu.barrier
// CHECK-NEXT:      tgpu.local_store
// CHECK-NEXT:      gpu.barrier
// CHECK-NEXT:      tgpu.mma
func.func @local_store(%ds: !acc, %p: !acc, %staged: !buf, %q: !buf, %acc: !acc) -> (!acc, !acc) {
  tgpu.local_store %ds, %staged : !acc, !buf
  %dk = tgpu.mma %staged, %q acc %acc transpose_lhs : !buf, !buf, !acc -> !acc
  tgpu.local_store %p, %staged : !acc, !buf
  %dv = tgpu.mma %staged, %q acc %acc transpose_lhs : !buf, !buf, !acc -> !acc
  return %dk, %dv : !acc, !acc
}

// -----

!accw = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
!bufw = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>

// The same for a wgmma, which reads through the async proxy: each thread fences its st.shared
// into it before the barrier that publishes them. The wait of the first wgmma ends its reads of
// the buffer, so the next write waits for a barrier only.
// CHECK-LABEL:   func.func @local_store_wgmma
// CHECK:           tgpu.local_store
// CHECK-NEXT:      nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT:      gpu.barrier
// CHECK-NEXT:      tgpu.wgmma
// CHECK-NEXT:      tgpu.wgmma_wait
// CHECK-NEXT:      gpu.barrier
// CHECK-NEXT:      tgpu.local_store
// CHECK-NEXT:      nvvm.fence.proxy
// CHECK-NEXT:      gpu.barrier
// CHECK-NEXT:      tgpu.wgmma
func.func @local_store_wgmma(%ds: !accw, %p: !accw, %staged: !bufw, %q: !bufw, %acc: !accw) -> (!accw, !accw) {
  tgpu.local_store %ds, %staged : !accw, !bufw
  %dk0 = tgpu.wgmma %staged, %q acc %acc transpose_lhs : !bufw, !bufw, !accw -> !accw
  %dk = tgpu.wgmma_wait %dk0 pending 0 : !accw
  tgpu.local_store %p, %staged : !accw, !bufw
  %dv0 = tgpu.wgmma %staged, %q acc %acc transpose_lhs : !bufw, !bufw, !accw -> !accw
  %dv = tgpu.wgmma_wait %dv0 pending 0 : !accw
  return %dk, %dv : !accw, !accw
}

// -----

!view = memref<?x?x?x64xbf16>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>

// A warp-specialized kernel's consumers copy Q themselves (q=shared): their wait is ordered
// among them, a proxy fence and the consumers' named barrier (id 8, over their 128 threads),
// never the CTA's barrier, which the producer would not reach. After the CTA's barrier that
// precedes the partitions the copy needs none before it; in the next tile of a loop it does.
// CHECK-LABEL: func.func @consumer_copies
// CHECK:         gpu.barrier
// CHECK-NEXT:    tgpu.warp_specialize
// CHECK-NEXT:      tgpu.async_copy
// CHECK-NEXT:      nvgpu.device_async_create_group
// CHECK-NEXT:      nvgpu.device_async_wait %{{.+}} {numGroups = 0 : i32}
// CHECK-NEXT:      nvvm.fence.proxy
// CHECK-NEXT:      tgpu.named_barrier sync id 8 threads 128
// CHECK-NEXT:      tgpu.wgmma
// CHECK:           scf.for
// CHECK-NEXT:        tgpu.named_barrier sync id 8 threads 128
// CHECK-NEXT:        tgpu.async_copy
// CHECK:         partition warps 4 registers 24
// CHECK-NOT:       tgpu.named_barrier
func.func @consumer_copies(%q: !view, %k: !buf, %qbuf: !buf, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  gpu.barrier
  tgpu.warp_specialize partition warps 4 registers 240 {
    %t = tgpu.async_copy %q[%c0, %c0, %c0] bound %n into %qbuf {threads = 128 : i64} : !view, !buf
    %g = nvgpu.device_async_create_group %t
    nvgpu.device_async_wait %g
    %s = tgpu.wgmma %qbuf, %k transpose_rhs : !buf, !buf -> !acc
    %sw = tgpu.wgmma_wait %s pending 0 : !acc
    scf.for %i = %c0 to %n step %c1 {
      %t2 = tgpu.async_copy %q[%c0, %c0, %i] bound %n into %qbuf {threads = 128 : i64}
          : !view, !buf
      %g2 = nvgpu.device_async_create_group %t2
      nvgpu.device_async_wait %g2
      %s2 = tgpu.wgmma %qbuf, %k transpose_rhs : !buf, !buf -> !acc
      %sw2 = tgpu.wgmma_wait %s2 pending 0 : !acc
    }
  } partition warps 4 registers 24 {
  }
  return
}

