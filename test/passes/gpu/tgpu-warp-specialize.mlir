// RUN: tilefuse-opt %s -split-input-file -verify-diagnostics -tgpu-warp-specialize="force=true stages=3" \
// RUN:   | FileCheck %s
// RUN: tilefuse-opt %s -split-input-file -tgpu-warp-specialize | FileCheck %s --check-prefix=OFF

// tgpu-warp-specialize: the key and value buffers that cp.async fills become rings of TMA
// loads; the kernel becomes a consumer partition (its warps, waiting on `full` and releasing
// `empty`) and a producer warpgroup issuing the loads. Both count each ring's fills with a
// counter carried through the loops and branches that hold copies.

!view = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
!qa = tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>

// Without warp_specialize in the module's tile.config (and without force) nothing changes.
// OFF-LABEL: func.func @kernel
// OFF-NOT:     tgpu.warp_specialize
// OFF:         tgpu.async_copy

// The rings (3 stages), a full and an empty group each, and the tensor maps of K and V.
// CHECK-LABEL: func.func @kernel
// CHECK-DAG:     %[[KRING:.+]] = tgpu.alloc : !tgpu.ring<3 x 64x64xbf16, #tgpu.shared<canonical_128b>>
// CHECK-DAG:     %[[KMAP:.+]] = tgpu.tensor_map %arg1 : {{.+}} -> <tensor = memref<1x1x64x64xbf16, 3>, swizzle = swizzle_128b, l2promo = l2promo_256b, oob = zero, interleave = none>
// CHECK-DAG:     %[[VMAP:.+]] = tgpu.tensor_map %arg2
// CHECK:         scf.forall
// One thread initializes the barriers: full for one arrival, empty for the 128 consumers.
// CHECK:           scf.if
// CHECK:             nvgpu.mbarrier.init %[[KFULL:[0-9]+]]{{\[}}%{{.+}}], %c1
// CHECK:             nvgpu.mbarrier.init %[[KEMPTY:[0-9]+]]{{\[}}%{{.+}}], %c128
// CHECK:           gpu.barrier
// The consumers are the kernel's four warps, the producer one warpgroup after them.
// One consumer warpgroup keeps its launch share (248 of 256 threads' 65536 / 256, whole 8s);
// the producer keeps what they leave, at most 56.
// CHECK:           tgpu.warp_specialize partition warps 4 registers 248 {
// CHECK:             scf.for {{.+}} iter_args({{.+}}, %[[KN:.+]] = %{{.+}}, %[[VN:.+]] = %{{.+}}) -> (tensor<{{.+}}>, index, index)
// CHECK:               %[[KS:.+]] = arith.remui %[[KN]], %c3
// CHECK:               %[[KSTAGE:.+]] = tgpu.stage %[[KRING]][%[[KS]]]
// CHECK:               nvgpu.mbarrier.try_wait.parity %[[KFULL]][%[[KS]]]
// CHECK-NEXT:          %[[S:.+]], %{{.+}} = tgpu.wgmma %{{.+}}, %[[KSTAGE]] transpose_rhs
// CHECK-NEXT:          tgpu.wgmma_wait %[[S]]
// CHECK-NEXT:          nvgpu.mbarrier.arrive %[[KEMPTY]][%[[KS]]]
// The value block is read in both branches of a mask test, and only there: the counter is a
// result of the branch (every ring's counter goes through every carrier).
// CHECK:               scf.if %{{.+}} -> (tensor<{{.+}}>, index, index) {
// CHECK:                 nvgpu.mbarrier.try_wait.parity
// CHECK-NEXT:            tgpu.wgmma
// CHECK-NEXT:            tgpu.wgmma_wait
// CHECK-NEXT:            nvgpu.mbarrier.arrive
// CHECK:               } else {
// CHECK:                 nvgpu.mbarrier.try_wait.parity
// CHECK:               scf.yield {{.+}} : tensor<{{.+}}>, index, index
// CHECK-NOT:         tgpu.async_copy
// CHECK:             tile.block_store
// CHECK:           } partition warps 4 registers 56 {
// CHECK:             %[[TID:.+]] = gpu.thread_id{{ +}}x
// CHECK:             %[[LEADER:.+]] = arith.cmpi eq, %[[TID]], %c128
// CHECK:             scf.if %[[LEADER]] {
// CHECK:               scf.for {{.+}} iter_args(%[[PKN:.+]] = %{{.+}}, %[[PVN:.+]] = %{{.+}}) -> (index, index)
// CHECK:                 %[[PS:.+]] = arith.remui %[[PKN]], %c3
// CHECK:                 nvgpu.mbarrier.try_wait.parity %[[KEMPTY]][%[[PS]]]
// CHECK:                 nvgpu.mbarrier.arrive.expect_tx %[[KFULL]][%[[PS]]], %c8192
// CHECK-NEXT:            %[[DEST:.+]] = tgpu.stage %[[KRING]][%[[PS]]]
// CHECK-NEXT:            %[[COL:.+]] = arith.constant 0 : index
// CHECK-NEXT:            tgpu.tma_load %[[KMAP]][%[[COL]], %{{.+}}, %{{.+}}, %{{.+}}], %[[KFULL]][%[[PS]]] into %[[DEST]]
// CHECK:                 scf.if %{{.+}} -> (index, index) {
// CHECK:                   tgpu.tma_load %[[VMAP]]
// CHECK:                 } else {
// CHECK:                   tgpu.tma_load %[[VMAP]]
// CHECK-NOT:         tile.block_store
func.func @kernel(%q: !view, %k: !view, %v: !view, %o: !view, %lse: !lse) {
  %kbuf = tgpu.alloc : !buf
  %vbuf = tgpu.alloc : !buf
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %B = memref.dim %q, %c0 : !view
  %H = memref.dim %q, %c1 : !view
  %N = memref.dim %k, %c2 : !view
  %blocks = arith.ceildivui %N, %c64 : index
  %zero = arith.constant dense<0.0> : !acc
  scf.forall (%b, %h, %r) in (%B, %H, %c1) {
    %qb = tile.block_load %q[%b, %h, %c0] bound %N : !view -> !qa
    %out = scf.for %j = %c0 to %blocks step %c1 iter_args(%acc = %zero) -> (!acc) {
      %row = arith.muli %j, %c64 : index
      %tk = tgpu.async_copy %k[%b, %h, %row] bound %N into %kbuf : !view, !buf
      %gk = nvgpu.device_async_create_group %tk
      nvgpu.device_async_wait %gk
      %s:2 = tgpu.wgmma %qb, %kbuf transpose_rhs : !qa, !buf -> !acc, !qa
      %sw:2 = tgpu.wgmma_wait %s#0, %s#1 pending 0 : !acc, !qa
      %p = tgpu.pack_operand_a %sw#0 : !acc -> !qa
      %odd = arith.cmpi ne, %row, %c0 : index
      %next = scf.if %odd -> (!acc) {
        %tv = tgpu.async_copy %v[%b, %h, %row] bound %N into %vbuf : !view, !buf
        %gv = nvgpu.device_async_create_group %tv
        nvgpu.device_async_wait %gv
        %o1:2 = tgpu.wgmma %p, %vbuf acc %acc : !qa, !buf, !acc -> !acc, !qa
        %ow:2 = tgpu.wgmma_wait %o1#0, %o1#1 pending 0 : !acc, !qa
        scf.yield %ow#0 : !acc
      } else {
        %tv = tgpu.async_copy %v[%b, %h, %row] bound %N into %vbuf : !view, !buf
        %gv = nvgpu.device_async_create_group %tv
        nvgpu.device_async_wait %gv
        %o1:2 = tgpu.wgmma %p, %vbuf : !qa, !buf -> !acc, !qa
        %ow:2 = tgpu.wgmma_wait %o1#0, %o1#1 pending 0 : !acc, !qa
        scf.yield %ow#0 : !acc
      }
      scf.yield %next : !acc
    }
    tile.block_store %out, %o[%b, %h, %c0] bound %N : !acc, !view
  } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
  return
}

// -----

!view = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!acc = tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>
!qa = tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<chunk_xor>>

// mma.sync kernels keep their copies: TMA writes wgmma's swizzle.
func.func @sync_kernel(%q: !view, %k: !view, %v: !view, %o: !view, %lse: !lse) {
  %kbuf = tgpu.alloc : !buf
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %N = memref.dim %k, %c2 : !view
  scf.forall (%b, %h, %r) in (%c1, %c1, %c1) {
    // expected-error @+1 {{fills a buffer that is not canonical_128b}}
    %tk = tgpu.async_copy %k[%b, %h, %c0] bound %N into %kbuf : !view, !buf
    %gk = nvgpu.device_async_create_group %tk
    nvgpu.device_async_wait %gk
  } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
  return
}

// -----

!view = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>

// A copy bounded by something else than N: the tensor map's zeros start at N.
func.func @bound(%q: !view, %k: !view, %v: !view, %o: !view, %lse: !lse, %n: index) {
  %kbuf = tgpu.alloc : !buf
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.forall (%b, %h, %r) in (%c1, %c1, %c1) {
    // expected-error @+1 {{bounds its rows by something other than the view's length}}
    %tk = tgpu.async_copy %k[%b, %h, %c0] bound %n into %kbuf : !view, !buf
    %gk = nvgpu.device_async_create_group %tk
    nvgpu.device_async_wait %gk
  } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
  return
}

// -----

!view = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>

// A copy from another view than Q, K or V: the launch ABI has tensor maps for those only.
func.func @output(%q: !view, %k: !view, %v: !view, %o: !view, %lse: !lse) {
  %obuf = tgpu.alloc : !buf
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %M = memref.dim %o, %c2 : !view
  scf.forall (%b, %h, %r) in (%c1, %c1, %c1) {
    // expected-error @+1 {{copies from a view that is not the kernel's Q, K or V argument}}
    %to = tgpu.async_copy %o[%b, %h, %c0] bound %M into %obuf : !view, !buf
    %go = nvgpu.device_async_create_group %to
    nvgpu.device_async_wait %go
  } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
  return
}

// -----

!view = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
!qa = tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>

// Q in shared memory (q=shared): a ring of one stage that the producer fills with TMA (the
// launch ABI's q_map, boxes of the buffer's 64 rows) before the tile's keys. The consumers wait
// on its full barrier where they waited for their copy, every wgmma that read the buffer reads
// the stage, and after the key loop, the last op holding one of their waits, each consumer
// thread releases it, having waited for the fill first: where the key loop ran no block (a
// sliding window's rows past its band) nothing else waited, and the producer's next fill of Q
// must not arm the full barrier while this one's bytes are in flight. The producer fills Q after
// the tile's first K block (FlashAttention-3's order: that block loads while the consumers still
// hold the previous tile's Q): a flag bit of Q's fill counter (1 << 30), set where the copy was,
// says Q is owed; the first K fill pays it, and a tile without key blocks after its loops.
// CHECK-LABEL: func.func @shared_query
// CHECK-DAG:     %[[QRING:.+]] = tgpu.alloc : !tgpu.ring<1 x 64x64xbf16, #tgpu.shared<canonical_128b>>
// CHECK-DAG:     %[[QMAP:.+]] = tgpu.tensor_map %arg0 : {{.+}} -> <tensor = memref<1x1x64x64xbf16, 3>, swizzle = swizzle_128b
// CHECK-DAG:     %[[KMAP:.+]] = tgpu.tensor_map %arg1
// CHECK:         scf.if
// CHECK:           nvgpu.mbarrier.init %[[QFULL:[0-9]+]]{{\[}}%{{.+}}], %c1
// CHECK-NEXT:      nvgpu.mbarrier.init %[[QEMPTY:[0-9]+]]{{\[}}%{{.+}}], %c128
// CHECK-NOT:       nvgpu.mbarrier.init %[[QFULL]]
// CHECK:         tgpu.warp_specialize
// CHECK-NOT:       tgpu.async_copy
// CHECK:           %[[QS:.+]] = arith.remui %{{.+}}, %c1
// CHECK:           %[[QSTAGE:.+]] = tgpu.stage %[[QRING]][%[[QS]]]
// CHECK:           nvgpu.mbarrier.try_wait.parity %[[QFULL]][%[[QS]]]
// CHECK:           scf.for
// CHECK:             nvgpu.mbarrier.try_wait.parity
// CHECK:             tgpu.wgmma %[[QSTAGE]], %{{.+}} acc %{{.+}} transpose_rhs
// CHECK:             tgpu.wgmma_wait
// CHECK:           }
// CHECK-NEXT:      nvgpu.mbarrier.try_wait.parity %[[QFULL]][%[[QS]]]
// CHECK-NEXT:      nvgpu.mbarrier.arrive %[[QEMPTY]][%[[QS]]]
// CHECK-NEXT:      tile.block_store
// CHECK:         } partition warps 4 registers 56 {
// CHECK-NOT:       tgpu.async_copy
// CHECK-NOT:       tgpu.tma_load
// CHECK:           %[[OWEDN:.+]] = arith.ori %{{.+}}, %c1073741824
// CHECK:           %[[OWES:.+]]:2 = scf.for {{.+}} iter_args(%[[QN:.+]] = %[[OWEDN]], %{{.+}} = %{{.+}}) -> (index, index)
// CHECK:             tgpu.tma_load %[[KMAP]]
// CHECK:             %[[FLAG:.+]] = arith.andi %[[QN]], %c1073741824
// CHECK:             %[[PAY:.+]] = arith.cmpi ne, %[[FLAG]], %c0
// CHECK:             scf.if %[[PAY]] -> (index) {
// CHECK:               %[[PAID:.+]] = arith.xori %[[QN]], %c1073741824
// CHECK:               arith.remui %[[PAID]], %c1
// CHECK:               nvgpu.mbarrier.try_wait.parity %[[QEMPTY]]
// CHECK:               nvgpu.mbarrier.arrive.expect_tx %[[QFULL]][%{{.+}}], %c8192
// CHECK:               tgpu.tma_load %[[QMAP]][%{{.+}}, %c0{{.*}}, %{{.+}}, %{{.+}}], %[[QFULL]]
// CHECK:             } else {
// CHECK:               scf.yield %[[QN]] : index
// CHECK:           %[[LEFTFLAG:.+]] = arith.andi %[[OWES]]#0, %c1073741824
// CHECK:           %[[LEFT:.+]] = arith.cmpi ne, %[[LEFTFLAG]], %c0
// CHECK:           scf.if %[[LEFT]] -> (index) {
// CHECK:             nvgpu.mbarrier.try_wait.parity %[[QEMPTY]]
// CHECK:             tgpu.tma_load %[[QMAP]]
func.func @shared_query(%q: !view, %k: !view, %v: !view, %o: !view, %lse: !lse) {
  %qbuf = tgpu.alloc : !buf
  %kbuf = tgpu.alloc : !buf
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %M = memref.dim %q, %c2 : !view
  %N = memref.dim %k, %c2 : !view
  %blocks = arith.ceildivui %N, %c64 : index
  %zero = arith.constant dense<0.0> : !acc
  scf.forall (%b, %h, %r) in (%c1, %c1, %c1) {
    %tq = tgpu.async_copy %q[%b, %h, %c0] bound %M into %qbuf : !view, !buf
    %gq = nvgpu.device_async_create_group %tq
    nvgpu.device_async_wait %gq
    %out = scf.for %j = %c0 to %blocks step %c1 iter_args(%acc = %zero) -> (!acc) {
      %row = arith.muli %j, %c64 : index
      %tk = tgpu.async_copy %k[%b, %h, %row] bound %N into %kbuf : !view, !buf
      %gk = nvgpu.device_async_create_group %tk
      nvgpu.device_async_wait %gk
      %s = tgpu.wgmma %qbuf, %kbuf acc %acc transpose_rhs : !buf, !buf, !acc -> !acc
      %sw = tgpu.wgmma_wait %s pending 0 : !acc
      scf.yield %sw : !acc
    }
    tile.block_store %out, %o[%b, %h, %c0] bound %M : !acc, !view
  } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
  return
}

// -----

!view = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>

// Q in two stages (overlap_tiles=true): its fill never waits for this tile's release, so the
// producer keeps Q first, ahead of the tile's first K block.
// CHECK-LABEL: func.func @shared_query_two_stages
// CHECK-DAG:     %[[QRING:.+]] = tgpu.alloc : !tgpu.ring<2 x 64x64xbf16, #tgpu.shared<canonical_128b>>
// CHECK-DAG:     %[[QMAP:.+]] = tgpu.tensor_map %arg0
// CHECK-DAG:     %[[KMAP:.+]] = tgpu.tensor_map %arg1
// CHECK:         } partition warps 4 registers 56 {
// CHECK-NOT:       arith.ori
// CHECK:           tgpu.tma_load %[[QMAP]]
// CHECK:           scf.for
// CHECK:             tgpu.tma_load %[[KMAP]]
// CHECK-NOT:         tgpu.tma_load %[[QMAP]]
// CHECK:           }
module attributes {tile.config = #tile.config<"mma=wgmma,warp_specialize=true,softmax_overlap=true,persistent=true,overlap_tiles=true,q=shared">} {
  func.func @shared_query_two_stages(%q: !view, %k: !view, %v: !view, %o: !view, %lse: !lse) {
    %qbuf = tgpu.alloc : !buf
    %kbuf = tgpu.alloc : !buf
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c64 = arith.constant 64 : index
    %M = memref.dim %q, %c2 : !view
    %N = memref.dim %k, %c2 : !view
    %blocks = arith.ceildivui %N, %c64 : index
    %zero = arith.constant dense<0.0> : !acc
    scf.forall (%b, %h, %r) in (%c1, %c1, %c1) {
      %tq = tgpu.async_copy %q[%b, %h, %c0] bound %M into %qbuf : !view, !buf
      %gq = nvgpu.device_async_create_group %tq
      nvgpu.device_async_wait %gq
      %out = scf.for %j = %c0 to %blocks step %c1 iter_args(%acc = %zero) -> (!acc) {
        %row = arith.muli %j, %c64 : index
        %tk = tgpu.async_copy %k[%b, %h, %row] bound %N into %kbuf : !view, !buf
        %gk = nvgpu.device_async_create_group %tk
        nvgpu.device_async_wait %gk
        %s = tgpu.wgmma %qbuf, %kbuf acc %acc transpose_rhs : !buf, !buf, !acc -> !acc
        %sw = tgpu.wgmma_wait %s pending 0 : !acc
        scf.yield %sw : !acc
      }
      tile.block_store %out, %o[%b, %h, %c0] bound %M : !acc, !view
    } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
    return
  }
}

// -----

!view = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>

// q_tma=false (the ablation's kernel): a padded batch's Q stays the consumers' own copy, as on a
// packed batch; no q_map, and the producer issues nothing for Q.
// CHECK-LABEL: func.func @shared_query_copied
// CHECK-NOT:     tgpu.tensor_map %arg0
// CHECK:         tgpu.warp_specialize
// CHECK:           %[[TQ:.+]] = tgpu.async_copy %arg0{{.+}} into %[[QBUF:.+]] {threads = 128 : i64}
// CHECK-NEXT:      %[[GQ:.+]] = nvgpu.device_async_create_group %[[TQ]]
// CHECK-NEXT:      nvgpu.device_async_wait %[[GQ]]
// CHECK:           scf.for
// CHECK:             tgpu.wgmma %[[QBUF]], %{{.+}} acc %{{.+}} transpose_rhs
// CHECK:         } partition warps 4 registers 56 {
// CHECK-NOT:       tgpu.async_copy
// CHECK:           tgpu.tma_load
module attributes {tile.config = #tile.config<"q_tma=false">} {
func.func @shared_query_copied(%q: !view, %k: !view, %v: !view, %o: !view, %lse: !lse) {
  %qbuf = tgpu.alloc : !buf
  %kbuf = tgpu.alloc : !buf
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %M = memref.dim %q, %c2 : !view
  %N = memref.dim %k, %c2 : !view
  %blocks = arith.ceildivui %N, %c64 : index
  %zero = arith.constant dense<0.0> : !acc
  scf.forall (%b, %h, %r) in (%c1, %c1, %c1) {
    %tq = tgpu.async_copy %q[%b, %h, %c0] bound %M into %qbuf : !view, !buf
    %gq = nvgpu.device_async_create_group %tq
    nvgpu.device_async_wait %gq
    %out = scf.for %j = %c0 to %blocks step %c1 iter_args(%acc = %zero) -> (!acc) {
      %row = arith.muli %j, %c64 : index
      %tk = tgpu.async_copy %k[%b, %h, %row] bound %N into %kbuf : !view, !buf
      %gk = nvgpu.device_async_create_group %tk
      nvgpu.device_async_wait %gk
      %s = tgpu.wgmma %qbuf, %kbuf acc %acc transpose_rhs : !buf, !buf, !acc -> !acc
      %sw = tgpu.wgmma_wait %s pending 0 : !acc
      scf.yield %sw : !acc
    }
    tile.block_store %out, %o[%b, %h, %c0] bound %M : !acc, !view
  } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
  return
}
}

// -----

!view = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
!qa = tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>

// A split-KV kernel (tile-split-kv): each program's share of the keys is loaded by the
// producer; the consumers store the partial result and arrive at the row block's counter on a
// named barrier of their own (the producer never comes to the CTA's barrier), and the last
// CTA's consumers merge.
// CHECK-LABEL: func.func @split
// CHECK:         tgpu.warp_specialize partition warps 4 registers 248 {
// CHECK:           tile.block_store
// CHECK:           %[[LAST:.+]] = tile.split_arrive %{{.+}}[%{{.+}}, %{{.+}}, %{{.+}}] count %{{.+}} {barrier_id = 9 : i32, threads = 128 : i32}
// CHECK:           scf.if %[[LAST]]
// CHECK:         } partition warps 4 registers 56 {
// CHECK-NOT:       tile.split_arrive
// CHECK:           tgpu.tma_load
// CHECK-NOT:       tile.split_arrive
// CHECK:         }
func.func @split(%q: !view, %k: !view, %v: !view, %o: !view, %lse: !lse,
                 %opart: !view, %counters: memref<?x?x?xi32>, %S: index) attributes {tile.split_kv} {
  %kbuf = tgpu.alloc : !buf
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %B = memref.dim %q, %c0 : !view
  %H = memref.dim %q, %c1 : !view
  %N = memref.dim %k, %c2 : !view
  %blocks = arith.ceildivui %N, %c64 : index
  %share = arith.ceildivui %blocks, %S : index
  %zero = arith.constant dense<0.0> : !acc
  scf.forall (%b, %h, %x) in (%B, %H, %S) {
    %lo = arith.muli %x, %share : index
    %end = arith.addi %lo, %share : index
    %hi = arith.minui %end, %blocks : index
    %qb = tile.block_load %q[%b, %h, %c0] bound %N : !view -> !qa
    %out = scf.for %j = %lo to %hi step %c1 iter_args(%acc = %zero) -> (!acc) {
      %row = arith.muli %j, %c64 : index
      %tk = tgpu.async_copy %k[%b, %h, %row] bound %N into %kbuf : !view, !buf
      %gk = nvgpu.device_async_create_group %tk
      nvgpu.device_async_wait %gk
      %s:2 = tgpu.wgmma %qb, %kbuf transpose_rhs : !qa, !buf -> !acc, !qa
      %sw:2 = tgpu.wgmma_wait %s#0, %s#1 pending 0 : !acc, !qa
      scf.yield %sw#0 : !acc
    }
    %srow = arith.muli %x, %B : index
    %prow = arith.addi %srow, %b : index
    tile.block_store %out, %opart[%prow, %h, %c0] bound %N : !acc, !view
    %last = tile.split_arrive %counters[%b, %h, %c0] count %S : memref<?x?x?xi32>
    scf.if %last {
      tile.block_store %out, %o[%b, %h, %c0] bound %N : !acc, !view
    }
  } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
  return
}

// -----

!view = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
!qa = tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>

// A copy whose row derives from a carried float (consumer state, not a position the producer
// can carry as an integer): the producer, which runs the loop without the consumers' state,
// cannot compute it. (Carried integers it carries itself: @carried_position.)
func.func @carried_row(%q: !view, %k: !view, %v: !view, %o: !view, %lse: !lse) {
  %kbuf = tgpu.alloc : !buf
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %f0 = arith.constant 0.0 : f32
  %f64 = arith.constant 64.0 : f32
  %N = memref.dim %k, %c2 : !view
  scf.forall (%b, %h, %r) in (%c1, %c1, %c1) {
    %qb = tile.block_load %q[%b, %h, %c0] bound %N : !view -> !qa
    // expected-error @+1 {{carries a value that a copy's index or a branch around it depends on}}
    %end = scf.for %j = %c0 to %c2 step %c1 iter_args(%rowf = %f0) -> (f32) {
      %row32 = arith.fptoui %rowf : f32 to i32
      %row = arith.index_castui %row32 : i32 to index
      %tk = tgpu.async_copy %k[%b, %h, %row] bound %N into %kbuf : !view, !buf
      %gk = nvgpu.device_async_create_group %tk
      nvgpu.device_async_wait %gk
      %s:2 = tgpu.wgmma %qb, %kbuf transpose_rhs : !qa, !buf -> !acc, !qa
      %sw:2 = tgpu.wgmma_wait %s#0, %s#1 pending 0 : !acc, !qa
      %next = arith.addf %rowf, %f64 : f32
      scf.yield %next : f32
    }
  } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
  return
}

// -----

!view = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
!qa = tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>

// Varlen (a packed batch): the copies' batch index is the sequence's first row and their bound
// its length. The producer loads row r of the sequence at (column, r + N - len, head,
// start + len), so that rows past its end fall outside the map's N and read as zeros.
// CHECK-LABEL: func.func @packed
// CHECK:         %[[KMAP:.+]] = tgpu.tensor_map %arg1
// CHECK:         tgpu.warp_specialize
// CHECK:         } partition warps 4 registers 56 {
// CHECK:             %[[START:.+]] = arith.index_castui %{{.+}} : i32 to index
// CHECK:             %[[LEN:.+]] = arith.subi %{{.+}}, %[[START]] : index
// CHECK:             scf.for %[[J:.+]] = {{.+}} iter_args(
// CHECK:               %[[ROW:.+]] = arith.muli %[[J]], %c64
// CHECK:               %[[N:.+]] = memref.dim %arg1, %c2
// CHECK-NEXT:          %[[SHIFTED:.+]] = arith.addi %[[ROW]], %[[N]] : index
// CHECK-NEXT:          %[[A:.+]] = arith.subi %[[SHIFTED]], %[[LEN]] : index
// CHECK-NEXT:          %[[B:.+]] = arith.addi %[[START]], %[[LEN]] : index
// CHECK-NEXT:          %[[ZERO:.+]] = arith.constant 0 : index
// CHECK-NEXT:          tgpu.tma_load %[[KMAP]][%[[ZERO]], %[[A]], %{{.+}}, %[[B]]]
func.func @packed(%q: !view, %k: !view, %v: !view, %o: !view, %lse: !lse,
                  %cu_q: memref<?xi32>, %cu_k: memref<?xi32>) attributes {tile.varlen} {
  %kbuf = tgpu.alloc : !buf
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %seqs = memref.dim %cu_k, %c0 : memref<?xi32>
  %B = arith.subi %seqs, %c1 : index
  %H = memref.dim %q, %c1 : !view
  %zero = arith.constant dense<0.0> : !acc
  scf.forall (%b, %h, %r) in (%B, %H, %c1) {
    %first32 = memref.load %cu_k[%b] : memref<?xi32>
    %first = arith.index_castui %first32 : i32 to index
    %b1 = arith.addi %b, %c1 : index
    %end32 = memref.load %cu_k[%b1] : memref<?xi32>
    %end = arith.index_castui %end32 : i32 to index
    %n = arith.subi %end, %first : index
    %blocks = arith.ceildivui %n, %c64 : index
    %qb = tile.block_load %q[%first, %h, %c0] bound %n : !view -> !qa
    %out = scf.for %j = %c0 to %blocks step %c1 iter_args(%acc = %zero) -> (!acc) {
      %row = arith.muli %j, %c64 : index
      %tk = tgpu.async_copy %k[%first, %h, %row] bound %n into %kbuf : !view, !buf
      %gk = nvgpu.device_async_create_group %tk
      nvgpu.device_async_wait %gk
      %s:2 = tgpu.wgmma %qb, %kbuf transpose_rhs : !qa, !buf -> !acc, !qa
      %sw:2 = tgpu.wgmma_wait %s#0, %s#1 pending 0 : !acc, !qa
      scf.yield %sw#0 : !acc
    }
    tile.block_store %out, %o[%first, %h, %c0] bound %n : !acc, !view
  } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
  return
}

// -----

!view = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
!qa = tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>

// A loop-carried integer that steers the copies (a varlen tile list's count of the tiles before
// each sequence, tgpu-persistent): the producer carries it too, first among its loop's
// iter_args, from the same init and what the body yields for it, beside its fill counter.
// CHECK-LABEL: func.func @carried_position
// CHECK:         tgpu.warp_specialize
// CHECK:         } partition warps 4 registers 56 {
// CHECK:           %[[OUTER:.+]]:2 = scf.for %{{.+}} = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[BEFORE:.+]] = %[[INIT:.+]], %[[COUNT:.+]] = %{{.+}}) -> (index, index) {
// CHECK:             %[[INNER:.+]] = scf.for %[[T:.+]] = %[[BEFORE]] to %{{.+}} step %{{.+}} iter_args(%{{.+}} = %[[COUNT]]) -> (index) {
// CHECK:               tgpu.tma_load
// CHECK:             %[[AFTER:.+]] = arith.addi %[[BEFORE]], %{{.+}} : index
// CHECK:             scf.yield %[[AFTER]], %[[INNER]] : index, index
func.func @carried_position(%q: !view, %k: !view, %v: !view, %o: !view, %lse: !lse) {
  %kbuf = tgpu.alloc : !buf
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %n = memref.dim %k, %c2 : !view
  %blocks = arith.ceildivui %n, %c64 : index
  %zero = arith.constant dense<0.0> : !acc
  scf.forall (%p) in (%c1) {
    %qb = tile.block_load %q[%c0, %c0, %c0] bound %n : !view -> !qa
    %end = scf.for %s = %c0 to %c2 step %c1 iter_args(%before = %c0) -> (index) {
      scf.for %t = %before to %blocks step %c1 {
        %row = arith.muli %t, %c64 : index
        %tk = tgpu.async_copy %k[%s, %c0, %row] bound %n into %kbuf : !view, !buf
        %gk = nvgpu.device_async_create_group %tk
        nvgpu.device_async_wait %gk
        %sc:2 = tgpu.wgmma %qb, %kbuf transpose_rhs : !qa, !buf -> !acc, !qa
        %sw:2 = tgpu.wgmma_wait %sc#0, %sc#1 pending 0 : !acc, !qa
        tile.block_store %sw#0, %o[%s, %c0, %row] bound %n : !acc, !view
      }
      %after = arith.addi %before, %c1 : index
      scf.yield %after : index
    }
  } {mapping = [#tile.grid<program>]}
  return
}

// -----

!view = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>

// Q in shared memory on a packed batch: the producer loads it by TMA through the packed q_map
// as it loads K and V, row r of the sequence at (column, r + M - len, head, start + len), so
// that rows past the sequence's end read as zeros; a tile wholly past the end starts at row
// M - 1 instead (a box wholly outside the map faulted); the consumers wait for its fill before
// their first Q·Kᵀ and again before they release it.
// CHECK-LABEL: func.func @packed_shared_query
// CHECK:         %[[QMAP:.+]] = tgpu.tensor_map %arg0
// CHECK:         tgpu.warp_specialize
// CHECK-NOT:       tgpu.async_copy
// CHECK:           %[[QSTAGE:.+]] = tgpu.stage %[[QRING:.+]][%{{.+}}]
// CHECK:           nvgpu.mbarrier.try_wait.parity %[[QFULL:.+]][%{{.+}}], %{{.+}}, %{{.+}}
// CHECK:           scf.for
// CHECK:             tgpu.wgmma %[[QSTAGE]], %{{.+}} acc %{{.+}} transpose_rhs
// CHECK:           nvgpu.mbarrier.try_wait.parity %[[QFULL]]
// CHECK-NEXT:      nvgpu.mbarrier.arrive %[[QEMPTY:.+]][%{{.+}}]
// CHECK:         } partition warps 4 registers 56 {
// CHECK-NOT:       tgpu.async_copy
// CHECK:           %[[START:.+]] = arith.index_castui %{{.+}} : i32 to index
// CHECK:           %[[LEN:.+]] = arith.subi %{{.+}}, %[[START]] : index
// CHECK:           scf.for
// CHECK:             tgpu.tma_load
// CHECK:             nvgpu.mbarrier.try_wait.parity %[[QEMPTY]]
// CHECK:           nvgpu.mbarrier.arrive.expect_tx %[[QFULL]][%{{.+}}], %c8192
// CHECK:           %[[M:.+]] = memref.dim %arg0, %c2
// CHECK-NEXT:      %[[SHIFTED:.+]] = arith.addi %c0, %[[M]] : index
// CHECK-NEXT:      %[[A:.+]] = arith.subi %[[SHIFTED]], %[[LEN]] : index
// CHECK-NEXT:      %[[B:.+]] = arith.addi %[[START]], %[[LEN]] : index
// CHECK-NEXT:      %[[ONE:.+]] = arith.constant 1 : index
// CHECK-NEXT:      %[[LAST:.+]] = arith.subi %[[M]], %[[ONE]] : index
// CHECK-NEXT:      %[[AQ:.+]] = arith.minui %[[A]], %[[LAST]] : index
// CHECK-NEXT:      %[[ZERO:.+]] = arith.constant 0 : index
// CHECK-NEXT:      tgpu.tma_load %[[QMAP]][%[[ZERO]], %[[AQ]], %{{.+}}, %[[B]]], %[[QFULL]]
func.func @packed_shared_query(%q: !view, %k: !view, %v: !view, %o: !view, %lse: !lse,
                               %cu_q: memref<?xi32>, %cu_k: memref<?xi32>)
    attributes {tile.varlen} {
  %qbuf = tgpu.alloc : !buf
  %kbuf = tgpu.alloc : !buf
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %seqs = memref.dim %cu_k, %c0 : memref<?xi32>
  %B = arith.subi %seqs, %c1 : index
  %H = memref.dim %q, %c1 : !view
  %zero = arith.constant dense<0.0> : !acc
  scf.forall (%b, %h, %r) in (%B, %H, %c1) {
    %first32 = memref.load %cu_k[%b] : memref<?xi32>
    %first = arith.index_castui %first32 : i32 to index
    %b1 = arith.addi %b, %c1 : index
    %end32 = memref.load %cu_k[%b1] : memref<?xi32>
    %end = arith.index_castui %end32 : i32 to index
    %n = arith.subi %end, %first : index
    %blocks = arith.ceildivui %n, %c64 : index
    %tq = tgpu.async_copy %q[%first, %h, %c0] bound %n into %qbuf : !view, !buf
    %gq = nvgpu.device_async_create_group %tq
    nvgpu.device_async_wait %gq
    %out = scf.for %j = %c0 to %blocks step %c1 iter_args(%acc = %zero) -> (!acc) {
      %row = arith.muli %j, %c64 : index
      %tk = tgpu.async_copy %k[%first, %h, %row] bound %n into %kbuf : !view, !buf
      %gk = nvgpu.device_async_create_group %tk
      nvgpu.device_async_wait %gk
      %s = tgpu.wgmma %qbuf, %kbuf acc %acc transpose_rhs : !buf, !buf, !acc -> !acc
      %sw = tgpu.wgmma_wait %s pending 0 : !acc
      scf.yield %sw : !acc
    }
    tile.block_store %out, %o[%first, %h, %c0] bound %n : !acc, !view
  } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
  return
}

// -----

!view = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>

// A paged cache's pages are gathered row by row: no tensor map covers them.
// expected-error @+1 {{paged kernels gather their keys page by page}}
func.func @paged(%q: !view, %k: !view, %v: !view, %o: !view, %lse: !lse) attributes {tile.paged_kv} {
  return
}

// -----

!view = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!acc = tensor<128x64xf32, #tgpu.wgmma_acc<warpgroups = 2>>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>
!qbuf = !tgpu.buffer<128x64xbf16, #tgpu.shared<canonical_128b>>

// The register split of two consumer warpgroups (384 threads: 168 each at launch). One tile per
// CTA: the consumers take FA3's 240 and the producer keeps the 24 they leave.
// CHECK-LABEL: func.func @two_consumers
// CHECK:         tgpu.warp_specialize partition warps 8 registers 240 {
// CHECK:         } partition warps 4 registers 24 {
func.func @two_consumers(%q: !view, %k: !view, %v: !view, %o: !view, %lse: !lse) {
  %qbuf = tgpu.alloc : !qbuf
  %kbuf = tgpu.alloc : !buf
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %M = memref.dim %q, %c2 : !view
  %N = memref.dim %k, %c2 : !view
  %blocks = arith.ceildivui %N, %c64 : index
  %zero = arith.constant dense<0.0> : !acc
  scf.forall (%b, %h, %r) in (%c1, %c1, %c1) {
    %tq = tgpu.async_copy %q[%b, %h, %c0] bound %M into %qbuf : !view, !qbuf
    %gq = nvgpu.device_async_create_group %tq
    nvgpu.device_async_wait %gq
    %out = scf.for %j = %c0 to %blocks step %c1 iter_args(%acc = %zero) -> (!acc) {
      %row = arith.muli %j, %c64 : index
      %tk = tgpu.async_copy %k[%b, %h, %row] bound %N into %kbuf : !view, !buf
      %gk = nvgpu.device_async_create_group %tk
      nvgpu.device_async_wait %gk
      %s = tgpu.wgmma %qbuf, %kbuf acc %acc transpose_rhs : !qbuf, !buf, !acc -> !acc
      %sw = tgpu.wgmma_wait %s pending 0 : !acc
      scf.yield %sw : !acc
    }
    tile.block_store %out, %o[%b, %h, %c0] bound %M : !acc, !view
  } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
  return
}

// -----

!view = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!acc = tensor<128x64xf32, #tgpu.wgmma_acc<warpgroups = 2>>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>
!qbuf = !tgpu.buffer<128x64xbf16, #tgpu.shared<canonical_128b>>

// A persistent program (tgpu-persistent's tile loop): the producer carries the loop's state
// through its key loop and keeps at least 32 registers; the consumers take 232 and the
// producer the 40 they leave. Each tile's Q fill is owed (its counter's flag bit) until the
// tile's first K fill has gone out.
// CHECK-LABEL: func.func @two_consumers_persistent
// CHECK:         tgpu.warp_specialize partition warps 8 registers 232 {
// CHECK:           } {tgpu.tile_loop}
// CHECK:         } partition warps 4 registers 40 {
// CHECK:           scf.for
// CHECK-NOT:         tgpu.tma_load
// CHECK:             arith.ori %{{.+}}, %c1073741824
// CHECK-NOT:         tgpu.tma_load
// CHECK:             scf.for
// CHECK:               tgpu.tma_load
// CHECK:               scf.if
// CHECK:                 tgpu.tma_load
func.func @two_consumers_persistent(%q: !view, %k: !view, %v: !view, %o: !view, %lse: !lse) {
  %qbuf = tgpu.alloc : !qbuf
  %kbuf = tgpu.alloc : !buf
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %M = memref.dim %q, %c2 : !view
  %N = memref.dim %k, %c2 : !view
  %tiles = memref.dim %q, %c0 : !view
  %blocks = arith.ceildivui %N, %c64 : index
  %zero = arith.constant dense<0.0> : !acc
  %programs = gpu.grid_dim x
  scf.forall (%p) in (%programs) {
    scf.for %t = %p to %tiles step %programs {
      %tq = tgpu.async_copy %q[%t, %c0, %c0] bound %M into %qbuf : !view, !qbuf
      %gq = nvgpu.device_async_create_group %tq
      nvgpu.device_async_wait %gq
      %out = scf.for %j = %c0 to %blocks step %c1 iter_args(%acc = %zero) -> (!acc) {
        %row = arith.muli %j, %c64 : index
        %tk = tgpu.async_copy %k[%t, %c0, %row] bound %N into %kbuf : !view, !buf
        %gk = nvgpu.device_async_create_group %tk
        nvgpu.device_async_wait %gk
        %s = tgpu.wgmma %qbuf, %kbuf acc %acc transpose_rhs : !qbuf, !buf, !acc -> !acc
        %sw = tgpu.wgmma_wait %s pending 0 : !acc
        scf.yield %sw : !acc
      }
      tile.block_store %out, %o[%t, %c0, %c0] bound %M : !acc, !view
    } {tgpu.tile_loop}
  } {mapping = [#tile.grid<program>]}
  return
}

// -----

!view = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!acc = tensor<128x64xf32, #tgpu.wgmma_acc<warpgroups = 2>>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>
!qbuf = !tgpu.buffer<128x64xbf16, #tgpu.shared<canonical_128b>>

// A tile loop inside a loop over a packed batch's sequences (tgpu-persistent's varlen tile
// list): the producer carries the sequence loop's state too and keeps at least 48 registers;
// the consumers take 224 and the producer the 56 they leave.
// CHECK-LABEL: func.func @tile_loop_in_sequence_loop
// CHECK:         tgpu.warp_specialize partition warps 8 registers 224 {
// CHECK:         } partition warps 4 registers 56 {
func.func @tile_loop_in_sequence_loop(%q: !view, %k: !view, %v: !view, %o: !view, %lse: !lse) {
  %qbuf = tgpu.alloc : !qbuf
  %kbuf = tgpu.alloc : !buf
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %M = memref.dim %q, %c2 : !view
  %N = memref.dim %k, %c2 : !view
  %tiles = memref.dim %q, %c0 : !view
  %sequences = memref.dim %q, %c1 : !view
  %blocks = arith.ceildivui %N, %c64 : index
  %zero = arith.constant dense<0.0> : !acc
  %programs = gpu.grid_dim x
  scf.forall (%p) in (%programs) {
    scf.for %s = %c0 to %sequences step %c1 {
      scf.for %t = %p to %tiles step %programs {
        %tq = tgpu.async_copy %q[%t, %s, %c0] bound %M into %qbuf : !view, !qbuf
        %gq = nvgpu.device_async_create_group %tq
        nvgpu.device_async_wait %gq
        %out = scf.for %j = %c0 to %blocks step %c1 iter_args(%acc = %zero) -> (!acc) {
          %row = arith.muli %j, %c64 : index
          %tk = tgpu.async_copy %k[%t, %s, %row] bound %N into %kbuf : !view, !buf
          %gk = nvgpu.device_async_create_group %tk
          nvgpu.device_async_wait %gk
          %sc = tgpu.wgmma %qbuf, %kbuf acc %acc transpose_rhs : !qbuf, !buf, !acc -> !acc
          %sw = tgpu.wgmma_wait %sc pending 0 : !acc
          scf.yield %sw : !acc
        }
        tile.block_store %out, %o[%t, %s, %c0] bound %M : !acc, !view
      } {tgpu.tile_loop}
    }
  } {mapping = [#tile.grid<program>]}
  return
}

// -----

!view = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!acc = tensor<192x64xf32, #tgpu.wgmma_acc<warpgroups = 3>>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>
!qbuf = !tgpu.buffer<192x64xbf16, #tgpu.shared<canonical_128b>>

// Three consumer warpgroups (512 threads: 128 each at launch) take 160; the producer keeps the
// 32 they leave (FA3's split for three), and with them Q's fill first: deferred behind the first
// K block, Q's coordinates live through the key loop spilled (ptxas, chunked_local at d64).
// CHECK-LABEL: func.func @three_consumers
// CHECK:         tgpu.warp_specialize partition warps 12 registers 160 {
// CHECK:         } partition warps 4 registers 32 {
// CHECK-NOT:       c1073741824
// CHECK:           tgpu.tma_load
// CHECK:           scf.for
// CHECK:             tgpu.tma_load
func.func @three_consumers(%q: !view, %k: !view, %v: !view, %o: !view, %lse: !lse) {
  %qbuf = tgpu.alloc : !qbuf
  %kbuf = tgpu.alloc : !buf
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %M = memref.dim %q, %c2 : !view
  %N = memref.dim %k, %c2 : !view
  %blocks = arith.ceildivui %N, %c64 : index
  %zero = arith.constant dense<0.0> : !acc
  scf.forall (%b, %h, %r) in (%c1, %c1, %c1) {
    %tq = tgpu.async_copy %q[%b, %h, %c0] bound %M into %qbuf : !view, !qbuf
    %gq = nvgpu.device_async_create_group %tq
    nvgpu.device_async_wait %gq
    %out = scf.for %j = %c0 to %blocks step %c1 iter_args(%acc = %zero) -> (!acc) {
      %row = arith.muli %j, %c64 : index
      %tk = tgpu.async_copy %k[%b, %h, %row] bound %N into %kbuf : !view, !buf
      %gk = nvgpu.device_async_create_group %tk
      nvgpu.device_async_wait %gk
      %s = tgpu.wgmma %qbuf, %kbuf acc %acc transpose_rhs : !qbuf, !buf, !acc -> !acc
      %sw = tgpu.wgmma_wait %s pending 0 : !acc
      scf.yield %sw : !acc
    }
    tile.block_store %out, %o[%b, %h, %c0] bound %M : !acc, !view
  } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
  return
}
