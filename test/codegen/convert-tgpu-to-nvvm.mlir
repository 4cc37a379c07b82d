// RUN: tilefuse-opt %s -split-input-file -verify-diagnostics -convert-tgpu-to-nvvm | FileCheck %s
// RUN: not tilefuse-opt %s -split-input-file -convert-tgpu-to-nvvm=chip=sm_80 2>&1 \
// RUN:   | FileCheck %s --check-prefix=SM80

// SM80: error: 'tgpu.wgmma' op needs chip sm_90a (warpgroup MMAs), not sm_80: lay the kernel out for mma=sync

// convert-tgpu-to-nvvm on small hand-written tgpu kernels: each case exercises one pattern
// family (codegen/lib/nvvm/*ToNVVM.cpp). A kernel is a function of the five views (Q, K, V,
// O, LSE); the module records its thread count (tgpu-allocate-shared-memory writes it).

!qkv = memref<?x?x?x64xbf16>
!lse = memref<?x?x?xf32>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
!rows = tensor<64xf32, #tgpu.acc_rows<#tgpu.wgmma_acc<warpgroups = 1>>>
!qa = tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!tile = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>

// The launch ABI (five pointers, five sizes, fourteen strides), the grid as block ids, Q's
// fragments from global memory, a copy into a ring stage with its group and wait, a register-A
// wgmma and its wait, a row reduction, the stores.
// CHECK-LABEL: gpu.module @tilefuse_kernels
// CHECK:         llvm.mlir.global external @tilefuse_dynamic_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
// CHECK:         gpu.func @kernel(%{{.+}}: !llvm.ptr<1>, %{{.+}}: !llvm.ptr<1>, %{{.+}}: !llvm.ptr<1>, %{{.+}}: !llvm.ptr<1>, %{{.+}}: !llvm.ptr<1>, %{{.+}}: i64, %{{.+}}: i64, %{{.+}}: i64, %{{.+}}: i64, %{{.+}}: i64, %{{.+}}: i64, %{{.+}}: i64, %{{.+}}: i64, %{{.+}}: i64, %{{.+}}: i64, %{{.+}}: i64, %{{.+}}: i64, %{{.+}}: i64, %{{.+}}: i64, %{{.+}}: i64, %{{.+}}: i64, %{{.+}}: i64, %{{.+}}: i64, %{{.+}}: i64) kernel
// CHECK-SAME:      known_block_size = array<i32: 128, 1, 1>
// CHECK-SAME:      nvvm.maxntid = array<i32: 128, 1, 1>, nvvm.minctasm = 1 : i32
// CHECK-DAG:       gpu.block_id z
// CHECK-DAG:       gpu.block_id y
// CHECK-DAG:       gpu.block_id x
// CHECK-DAG:       llvm.mlir.addressof @tilefuse_dynamic_smem
// CHECK:           llvm.load {{.+}} {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK:           nvvm.cp.async.shared.global {{.+}}, 16, cache = cg, {{.+}} : !llvm.ptr<3>, !llvm.ptr<1>, i32
// CHECK:           nvvm.cp.async.commit.group
// CHECK:           nvvm.cp.async.wait.group 0
// CHECK:           wgmma.fence.sync.aligned;
// CHECK:           wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
// CHECK:           wgmma.commit_group.sync.aligned;
// CHECK:           wgmma.wait_group.sync.aligned 0;
// CHECK-COUNT-4:   gpu.shuffle  xor
// The O store (bf16, 8 tiles of 8 columns): where the view's base and strides allow 16-byte
// rows (checked once), each row slot's quad transposed by xor-shuffles (lanes c ^ 2, then
// c ^ 1) into one 16-byte store per four tiles; else the pairs' 4-byte stores.
// CHECK:           llvm.ptrtoint %{{.+}} : !llvm.ptr<1> to i64
// CHECK:           scf.if
// CHECK-COUNT-2:     gpu.shuffle  xor %{{.+}}, %c2_i32, %c32_i32 : i32
// CHECK-COUNT-2:     gpu.shuffle  xor %{{.+}}, %c1_i32, %c32_i32 : i32
// CHECK:             vector.from_elements {{.+}} : vector<4xi32>
// CHECK:             llvm.store {{.+}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>
// CHECK:           } else {
// CHECK-NOT:         vector<4xi32>
// CHECK:             llvm.store {{.+}} {alignment = 4 : i64} : i32, !llvm.ptr<1>
// CHECK:           llvm.store {{.+}} : f32, !llvm.ptr<1>
// CHECK:           gpu.return
module attributes {tilefuse.threads = {kernel = 128 : i64}} {
  func.func @kernel(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %ring = tgpu.alloc {offset = 0 : i64} : !tgpu.ring<2 x 64x64xbf16, #tgpu.shared<canonical_128b>>
    %m = memref.dim %Q, %c0 : !qkv
    scf.forall (%b, %h, %r) in (%m, %m, %m) {
      %q = tile.block_load %Q[%b, %h, %r] bound %m : !qkv -> !qa
      %buf = tgpu.stage %ring[%c1] : !tgpu.ring<2 x 64x64xbf16, #tgpu.shared<canonical_128b>>
      %t = tgpu.async_copy %K[%b, %h, %r] bound %m into %buf : !qkv, !tile
      %g = nvgpu.device_async_create_group %t
      nvgpu.device_async_wait %g {numGroups = 0 : i32}
      %s, %qf = tgpu.wgmma %q, %buf transpose_rhs : !qa, !tile -> !acc, !qa
      %s1, %q1 = tgpu.wgmma_wait %s, %qf pending 0 : !acc, !qa
      %mx = tile.reduce max %s1 : !acc -> !rows
      tile.block_store %s1, %O[%b, %h, %r] bound %m : !acc, !qkv
      tile.block_store %mx, %LSE[%b, %h, %r] bound %m : !rows, !lse
    } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
    return
  }
}

// -----

!qkv = memref<?x?x?x64xbf16>
!lse = memref<?x?x?xf32>
!table = memref<?x?xi32, strided<[?, 1]>>
!tile = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>

// A paged kernel (tile-paged-kv): the launch ABI's four paged parameters follow the 24 (the
// table, the lengths, the table's row stride and the page size); the sequence's length is one
// load; each copied row reads its page from the table (tile::pagedRow: row / page size, row mod
// page size), then its chunk at (page, head, row in page). The page size is given at launch:
// its round-up reciprocal (tile::pageDivisor: the shift ceil(log2 S) by halving steps, the
// multiplier m - 2^32 from one 64-bit division) is computed once at the kernel's entry, before
// the grid's indices, and each row's division is a multiply-high, an add and a shift, its
// remainder a multiply and a subtraction: no division by the page size in the copies.
// CHECK-LABEL: gpu.func @paged
// CHECK-SAME:    (%{{.+}}: !llvm.ptr<1>, %{{.+}}: !llvm.ptr<1>, %{{.+}}: !llvm.ptr<1>, %{{.+}}: !llvm.ptr<1>, %{{.+}}: !llvm.ptr<1>, {{.+}}: i64, %[[TABLE:[^:]+]]: !llvm.ptr<1>, %[[LENGTHS:[^:]+]]: !llvm.ptr<1>, %{{[^:]+}}: i64, %[[PAGE:[^:]+]]: i64) kernel
// CHECK:         %[[PAGE32:.+]] = llvm.trunc %[[PAGE]] : i64 to i32
// CHECK:         %[[SIZE:.+]] = arith.index_cast %[[PAGE32]] : i32 to index
// CHECK-NEXT:    %[[S:.+]] = arith.index_castui %[[SIZE]] : index to i32
// CHECK-COUNT-5: arith.cmpi uge
// CHECK:         %[[SHIFT:.+]] = arith.addi %{{.+}}, %{{[0-9]+}} : i32
// CHECK-NEXT:    %[[S64:.+]] = arith.extui %[[S]] : i32 to i64
// CHECK:         %[[M:.+]] = arith.divui %{{.+}}, %[[S64]] : i64
// CHECK-NEXT:    %[[MUL:.+]] = arith.trunci %[[M]] : i64 to i32
// CHECK:         gpu.block_id
// CHECK:         llvm.getelementptr %[[LENGTHS]]
// CHECK:         %[[LENGTH:.+]] = llvm.load %{{.+}} : !llvm.ptr<1> -> i32
// CHECK:         %[[N:.+]] = arith.index_castui %[[LENGTH]] : i32 to index
// CHECK:         %[[IN:.+]] = arith.cmpi ult, %{{.+}}, %[[N]] : index
// CHECK:         %[[ROW:.+]] = arith.select %[[IN]], %{{.+}}, %c0 : index
// CHECK-NEXT:    %[[ROW32:.+]] = arith.index_castui %[[ROW]] : index to i32
// CHECK-NEXT:    %{{.+}}, %[[HI:.+]] = arith.mului_extended %[[ROW32]], %[[MUL]] : i32
// CHECK-NEXT:    %[[SUM:.+]] = arith.addi %[[ROW32]], %[[HI]] : i32
// CHECK-NEXT:    %[[Q32:.+]] = arith.shrui %[[SUM]], %[[SHIFT]] : i32
// CHECK-NEXT:    %[[Q:.+]] = arith.index_castui %[[Q32]] : i32 to index
// CHECK-NEXT:    %[[QS:.+]] = arith.muli %[[Q]], %[[SIZE]] : index
// CHECK-NEXT:    arith.subi %[[ROW]], %[[QS]] : index
// CHECK-NOT:     arith.divui
// CHECK-NOT:     arith.remui
// CHECK:         llvm.getelementptr %[[TABLE]]
// CHECK:         llvm.load %{{.+}} : !llvm.ptr<1> -> i32
// CHECK-NOT:     arith.divui
// CHECK-NOT:     arith.remui
// CHECK:         nvvm.cp.async.shared.global
module attributes {tilefuse.threads = {paged = 128 : i64}} {
  func.func @paged(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse, %T: !table,
                   %L: memref<?xi32>) attributes {tile.paged_kv} {
    %c0 = arith.constant 0 : index
    %buffer = tgpu.alloc {offset = 0 : i64} : !tile
    %m = memref.dim %Q, %c0 : !qkv
    scf.forall (%b, %h, %r) in (%m, %m, %m) {
      %length = memref.load %L[%b] : memref<?xi32>
      %n = arith.index_castui %length : i32 to index
      %t = tgpu.async_copy %K[%b, %h, %r] bound %n pages %T into %buffer : !qkv, !tile, !table
      %g = nvgpu.device_async_create_group %t
      nvgpu.device_async_wait %g {numGroups = 0 : i32}
    } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
    return
  }
}

// -----

!qkv = memref<?x?x?x64xbf16>
!cache = memref<?x?x16x64xbf16>
!lse = memref<?x?x?xf32>
!table = memref<?x?xi32, strided<[?, 1]>>
!tile = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>

// A page size fixed at compile time (tile-paged-kv's page-size: the cache's type says 16) is
// divided by as a constant, which LLVM makes a shift: no reciprocal.
// CHECK-LABEL: gpu.func @paged_fixed
// CHECK-NOT:     arith.mului_extended
// CHECK:         %[[ROW:.+]] = arith.select %{{.+}}, %{{.+}}, %c0 : index
// CHECK-NEXT:    arith.divui %[[ROW]], %c16 : index
// CHECK:         arith.remui %[[ROW]], %c16 : index
// CHECK-NOT:     arith.mului_extended
// CHECK:         nvvm.cp.async.shared.global
module attributes {tilefuse.threads = {paged_fixed = 128 : i64}} {
  func.func @paged_fixed(%Q: !qkv, %K: !cache, %V: !cache, %O: !qkv, %LSE: !lse, %T: !table,
                         %L: memref<?xi32>) attributes {tile.paged_kv} {
    %c0 = arith.constant 0 : index
    %buffer = tgpu.alloc {offset = 0 : i64} : !tile
    %m = memref.dim %Q, %c0 : !qkv
    scf.forall (%b, %h, %r) in (%m, %m, %m) {
      %length = memref.load %L[%b] : memref<?xi32>
      %n = arith.index_castui %length : i32 to index
      %t = tgpu.async_copy %K[%b, %h, %r] bound %n pages %T into %buffer : !cache, !tile, !table
      %g = nvgpu.device_async_create_group %t
      nvgpu.device_async_wait %g {numGroups = 0 : i32}
    } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
    return
  }
}

// -----

!qkv = memref<?x?x?x64xbf16>
!cache = memref<?x?x128x64xbf16>
!lse = memref<?x?x?xf32>
!table = memref<?x?xi32, strided<[?, 1]>>
!tile = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>

// A key block whose first row is a multiple of 64 (row_alignment, tile-to-tgpu's) in pages of
// 128 rows lies in one page: one table read for the thread's 4 rows (the other i32 load is the
// sequence's length), and each row's place in the page is the block's plus its row.
// CHECK-LABEL: gpu.func @paged_one_page
// CHECK-COUNT-2: llvm.load %{{.+}} : !llvm.ptr<1> -> i32
// CHECK-NOT:     llvm.load %{{.+}} : !llvm.ptr<1> -> i32
// CHECK-NOT:     arith.divui
// CHECK-COUNT-4: nvvm.cp.async.shared.global
// CHECK-NOT:     llvm.load %{{.+}} : !llvm.ptr<1> -> i32
// CHECK:         gpu.return
module attributes {tilefuse.threads = {paged_one_page = 128 : i64}} {
  func.func @paged_one_page(%Q: !qkv, %K: !cache, %V: !cache, %O: !qkv, %LSE: !lse, %T: !table,
                            %L: memref<?xi32>) attributes {tile.paged_kv} {
    %c0 = arith.constant 0 : index
    %c64 = arith.constant 64 : index
    %buffer = tgpu.alloc {offset = 0 : i64} : !tile
    %m = memref.dim %Q, %c0 : !qkv
    scf.forall (%b, %h, %r) in (%m, %m, %m) {
      %length = memref.load %L[%b] : memref<?xi32>
      %n = arith.index_castui %length : i32 to index
      %row = arith.muli %r, %c64 : index
      %t = tgpu.async_copy %K[%b, %h, %row] bound %n pages %T into %buffer {row_alignment = 64 : i64} : !cache, !tile, !table
      %g = nvgpu.device_async_create_group %t
      nvgpu.device_async_wait %g {numGroups = 0 : i32}
    } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
    return
  }
}

// -----

!qkv = memref<?x?x?x64xbf16>
!cache = memref<?x?x32x64xbf16>
!lse = memref<?x?x?xf32>
!table = memref<?x?xi32, strided<[?, 1]>>
!tile = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>

// Pages of 32 rows under a 64-row alignment: a thread's rows r0 + 16 i (128 threads, 8 chunks
// a row) are in page 0 of the block for i = 0, 1 and page 1 for i = 2, 3: two table reads, not
// four; the second page's rows are 32 fewer into it.
// CHECK-LABEL: gpu.func @paged_page_runs
// CHECK-COUNT-3: llvm.load %{{.+}} : !llvm.ptr<1> -> i32
// CHECK-NOT:     llvm.load %{{.+}} : !llvm.ptr<1> -> i32
// CHECK:         arith.subi %{{.+}}, %c32 : index
// CHECK-COUNT-4: nvvm.cp.async.shared.global
// CHECK-NOT:     llvm.load %{{.+}} : !llvm.ptr<1> -> i32
// CHECK:         gpu.return
module attributes {tilefuse.threads = {paged_page_runs = 128 : i64}} {
  func.func @paged_page_runs(%Q: !qkv, %K: !cache, %V: !cache, %O: !qkv, %LSE: !lse, %T: !table,
                             %L: memref<?xi32>) attributes {tile.paged_kv} {
    %c0 = arith.constant 0 : index
    %c64 = arith.constant 64 : index
    %buffer = tgpu.alloc {offset = 0 : i64} : !tile
    %m = memref.dim %Q, %c0 : !qkv
    scf.forall (%b, %h, %r) in (%m, %m, %m) {
      %length = memref.load %L[%b] : memref<?xi32>
      %n = arith.index_castui %length : i32 to index
      %row = arith.muli %r, %c64 : index
      %t = tgpu.async_copy %K[%b, %h, %row] bound %n pages %T into %buffer {row_alignment = 64 : i64} : !cache, !tile, !table
      %g = nvgpu.device_async_create_group %t
      nvgpu.device_async_wait %g {numGroups = 0 : i32}
    } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
    return
  }
}

// -----

!qkv = memref<?x?x?x64xbf16>
!lse = memref<?x?x?xf32>
!tile = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>

// A varlen kernel (tile-varlen): the queries' and the keys' offsets follow the 24 parameters;
// each packed view's batch stride is its row stride (k_n, the 12th parameter: the batch index
// counts packed rows; k_b, the 14th, is not read), and the keys' offsets are read at the
// program's sequence. A register budget (ctas_per_sm) is the kernel's nvvm.minctasm.
// CHECK-LABEL: gpu.func @varlen
// CHECK-SAME:    %arg23: i64, %arg24: !llvm.ptr<1>, %arg25: !llvm.ptr<1>) kernel
// CHECK-SAME:    nvvm.minctasm = 3 : i32
// CHECK-NOT:     %arg13
// CHECK:         llvm.trunc %arg15 : i64 to i32
// CHECK-NOT:     %arg13
// CHECK:         llvm.trunc %arg15 : i64 to i32
// CHECK-NOT:     %arg13
// CHECK:         %[[AT:.+]] = llvm.getelementptr %arg25[%{{.+}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i32
// CHECK:         llvm.load %[[AT]] : !llvm.ptr<1> -> i32
// CHECK-NOT:     %arg13
// CHECK:         nvvm.cp.async.shared.global
module attributes {tilefuse.threads = {varlen = 128 : i64}, tile.config = #tile.config<"ctas_per_sm=3">} {
  func.func @varlen(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse, %cuq: memref<?xi32>,
                    %cuk: memref<?xi32>) attributes {tile.varlen} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %buffer = tgpu.alloc {offset = 0 : i64} : !tile
    %m = memref.dim %Q, %c1 : !qkv
    scf.forall (%b, %h, %r) in (%m, %m, %m) {
      %start = memref.load %cuk[%b] : memref<?xi32>
      %s = arith.index_castui %start : i32 to index
      %t = tgpu.async_copy %K[%s, %h, %r] bound %m into %buffer : !qkv, !tile
      %g = nvgpu.device_async_create_group %t
      nvgpu.device_async_wait %g {numGroups = 0 : i32}
    } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
    return
  }
}

// -----

!qkv = memref<?x?x?x64xbf16>
!lse = memref<?x?x?xf32>
!acc = tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>
!qa = tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!tile = !tgpu.buffer<64x64xbf16, #tgpu.shared<chunk_xor>>

// mma.sync: B fragments by ldmatrix (.trans for V), one mma.sync per n8 tile and k-step; P
// packed in place; a mask region inlined per value; exp2 as ex2.approx (no libdevice).
// CHECK-LABEL: gpu.func @sync
// CHECK:         nvvm.ldmatrix {{.+}} {eltType = #nvvm.ld_st_matrix_elt_type<b16>, layout = #nvvm.mma_layout<row>, num = 4 : i32, shape = #nvvm.ld_st_matrix_shape<m = 8, n = 8>}
// CHECK:         nvvm.mma.sync {{.+}} {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>, shape = #nvvm.shape<m = 16, n = 8, k = 16>}
// CHECK:         arith.cmpi ule
// CHECK:         llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"
// CHECK:         llvm.bitcast {{.+}} : vector<2xbf16> to i32
// CHECK:         nvvm.ldmatrix {{.+}} layout = #nvvm.mma_layout<col>
// CHECK:         nvvm.mma.sync
// CHECK:         gpu.return
module attributes {tilefuse.threads = {sync = 128 : i64}} {
  func.func @sync(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
    %c0 = arith.constant 0 : index
    %kb = tgpu.alloc {offset = 0 : i64} : !tile
    %vb = tgpu.alloc {offset = 8192 : i64} : !tile
    %m = memref.dim %Q, %c0 : !qkv
    scf.forall (%b, %h, %r) in (%m, %m, %m) {
      %q = tile.block_load %Q[%b, %h, %r] bound %m : !qkv -> !qa
      %s = tgpu.mma %q, %kb transpose_rhs : !qa, !tile -> !acc
      %sm = tile.block_mask %s at(%b, %h, %r, %c0) : !acc {
      ^bb0(%bi: index, %hi: index, %qi: index, %ki: index):
        %keep = arith.cmpi ule, %ki, %qi : index
        tile.yield %keep : i1
      }
      %p = math.exp2 %sm : !acc
      %pa = tgpu.pack_operand_a %p : !acc -> !qa
      %o = tgpu.mma %pa, %vb : !qa, !tile -> !acc
      tile.block_store %o, %O[%b, %h, %r] bound %m : !acc, !qkv
    } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
    return
  }
}

// -----

!qkv = memref<?x?x?x64xbf16>
!lse = memref<?x?x?xf32>

// Warp roles: each partition under a branch on the warp index, its register budget set by
// setmaxnreg (below the CTA's starting share of 65536 / 384 -> 168: decrease; above:
// increase); named barriers.
// CHECK-LABEL: gpu.func @roles
// CHECK:         arith.cmpi uge, %{{.+}}, %c0
// CHECK:         arith.cmpi ult, %{{.+}}, %c4
// CHECK:         scf.if
// CHECK-NEXT:      nvvm.setmaxregister  decrease 24
// CHECK:           nvvm.barrier.arrive id = %{{.+}} number_of_threads = %{{.+}}
// CHECK:         arith.cmpi ult, %{{.+}}, %c12
// CHECK:         scf.if
// CHECK-NEXT:      nvvm.setmaxregister  increase 240
// CHECK:           nvvm.barrier id = %{{.+}} number_of_threads = %{{.+}}
// Per-warpgroup barriers (the consumers' warpgroups 1 and 2 of the CTA), without a branch:
// own is 1 + w and next 1 + (w + 1) % 2, with w = tid.x / 128 - 1 (folded: tid.x >> 7, and
// (tid.x >> 7 == 2 ? 0 : tid.x >> 7) + 1).
// CHECK:           %[[TID:.+]] = nvvm.read.ptx.sreg.tid.x : i32
// CHECK-NEXT:      %[[OWN:.+]] = arith.shrui %[[TID]], %c7_i32 : i32
// CHECK-NEXT:      nvvm.barrier id = %[[OWN]] number_of_threads = %c256_i32
// CHECK-NEXT:      %[[TID2:.+]] = nvvm.read.ptx.sreg.tid.x : i32
// CHECK-NEXT:      %[[W:.+]] = arith.shrui %[[TID2]], %c7_i32 : i32
// CHECK-NEXT:      %[[WRAPS:.+]] = arith.cmpi eq, %[[W]], %c2_i32 : i32
// CHECK-NEXT:      %[[N:.+]] = arith.select %[[WRAPS]], %c0_i32, %[[W]] : i32
// CHECK-NEXT:      %[[NEXT:.+]] = arith.addi %[[N]], %c1_i32 : i32
// CHECK-NEXT:      nvvm.barrier.arrive id = %[[NEXT]] number_of_threads = %c256_i32
module attributes {tilefuse.threads = {roles = 384 : i64}} {
  func.func @roles(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
    tgpu.warp_specialize
      partition warps 4 registers 24 {
        tgpu.named_barrier arrive id 1 threads 384
      }
      partition warps 8 registers 240 {
        tgpu.named_barrier sync id 1 threads 384
        tgpu.named_barrier sync id 1 threads 256 warpgroup own among 2 from 1
        tgpu.named_barrier arrive id 1 threads 256 warpgroup next among 2 from 1
      }
    return
  }
}

// -----

!qkv = memref<?x?x?x64xbf16>
!lse = memref<?x?x?xf32>
!tile = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>

// The consumers' own copy (q=shared under warp specialization): `threads = 128` deals its 512
// chunks to the consumer warpgroup's 128 threads, four each, though the CTA has 256 (the
// producer's warps never reach it). Dealt over 256 threads, chunks 128..511 of every round
// past the first would be nobody's.
// CHECK-LABEL: gpu.func @consumer_copy
// CHECK-SAME:      known_block_size = array<i32: 256, 1, 1>
// CHECK:           arith.remui %{{.+}}, %c8 : index
// CHECK-COUNT-4:   nvvm.cp.async.shared.global
// CHECK-NOT:       nvvm.cp.async.shared.global
// CHECK:           nvvm.cp.async.commit.group
module attributes {tilefuse.threads = {consumer_copy = 256 : i64}} {
  func.func @consumer_copy(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
    %c0 = arith.constant 0 : index
    %buf = tgpu.alloc {offset = 0 : i64} : !tile
    %m = memref.dim %Q, %c0 : !qkv
    scf.forall (%b, %h, %r) in (%m, %m, %m) {
      tgpu.warp_specialize partition warps 4 registers 240 {
        %t = tgpu.async_copy %Q[%b, %h, %r] bound %m into %buf {threads = 128 : i64} : !qkv, !tile
        %g = nvgpu.device_async_create_group %t
        nvgpu.device_async_wait %g {numGroups = 0 : i32}
      } partition warps 4 registers 24 {
      }
    } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
    return
  }
}

// -----

!qkv = memref<?x?x?x64xbf16>
!lse = memref<?x?x?xf32>
!tile = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>

// A copy shared by more threads than the kernel has.
module attributes {tilefuse.threads = {too_many = 128 : i64}} {
  func.func @too_many(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
    %c0 = arith.constant 0 : index
    %buf = tgpu.alloc {offset = 0 : i64} : !tile
    %m = memref.dim %Q, %c0 : !qkv
    // expected-error @below {{is shared by 256 threads; the kernel has 128}}
    // expected-error @below {{failed to legalize operation 'tgpu.async_copy'}}
    %t = tgpu.async_copy %Q[%c0, %c0, %c0] bound %m into %buf {threads = 256 : i64} : !qkv, !tile
    return
  }
}

// -----

!qkv = memref<?x?x?x64xbf16>
!lse = memref<?x?x?xf32>

// A buffer must have been placed.
module attributes {tilefuse.threads = {unplaced = 128 : i64}} {
  func.func @unplaced(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
    // expected-error @below {{has no offset: run tgpu-allocate-shared-memory first}}
    // expected-error @below {{failed to legalize operation 'tgpu.alloc'}}
    %buf = tgpu.alloc : !tgpu.buffer<64x64xbf16, #tgpu.shared<chunk_xor>>
    return
  }
}

// -----

!qkv = memref<?x?x?x64xbf16>
!lse = memref<?x?x?xf32>

// The thread count comes from the module.
// expected-error @below {{the kernel's thread count is not recorded (tilefuse.threads): run tgpu-allocate-shared-memory first}}
func.func @no_threads(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
  return
}

// -----

// The views are the launch ABI's.
module attributes {tilefuse.threads = {two_views = 128 : i64}} {
  // expected-error @below {{a GPU kernel takes the views (Q, K, V, O, LSE) and returns nothing}}
  func.func @two_views(%Q: memref<?x?x?x64xbf16>, %K: memref<?x?x?x64xbf16>) {
    return
  }
}

// -----

!qkv = memref<?x?x?x64xbf16>
!lse = memref<?x?x?xf32>

// A persistent grid (tgpu-persistent): its program is blockIdx.x, the programs gridDim.x.
// CHECK-LABEL: gpu.func @persistent
// CHECK:         %[[PROGRAMS:.+]] = gpu.grid_dim x
// CHECK-NEXT:    %[[PROGRAM:.+]] = gpu.block_id x
// CHECK-NEXT:    scf.for %{{.+}} = %[[PROGRAM]] to %{{.+}} step %[[PROGRAMS]]
// CHECK-NEXT:      nvvm.barrier
module attributes {tilefuse.threads = {persistent = 128 : i64}} {
  func.func @persistent(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
    %c0 = arith.constant 0 : index
    %m = memref.dim %Q, %c0 : !qkv
    %programs = gpu.grid_dim x
    scf.forall (%p) in (%programs) {
      scf.for %t = %p to %m step %programs {
        tgpu.named_barrier sync id 1 threads 128
      }
    } {mapping = [#tile.grid<program>]}
    return
  }
}

// -----

!qkv = memref<?x?x?x64xbf16>
!lse = memref<?x?x?xf32>

// The grid is read by its mapping: an unmapped forall may have lost a unit dimension to
// canonicalization (one key/value head, packed), so it is not taken by position.
module attributes {tilefuse.threads = {unmapped = 128 : i64}} {
  func.func @unmapped(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
    %c0 = arith.constant 0 : index
    %m = memref.dim %Q, %c0 : !qkv
    // expected-error @below {{the GPU grid is (batch, head, row block[, key split]): a rank-3 or rank-4 scf.forall mapped to #tile.grid<batch, head, row_block[, split]>, or a persistent one (#tile.grid<program>), without outputs}}
    // expected-error @below {{failed to legalize operation 'scf.forall'}}
    scf.forall (%b, %r) in (%m, %m) {
    }
    return
  }
}

// -----

!qkv = memref<?x?x?x128xbf16>
!lse = memref<?x?x?xf32>
!tile = !tgpu.buffer<64x128xbf16, #tgpu.shared<canonical_128b>>
!bars = !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>
!map = !nvgpu.tensormap.descriptor<tensor = memref<1x1x64x64xbf16, 3>, swizzle = swizzle_128b, l2promo = l2promo_256b, oob = zero, interleave = none>

// TMA (TMAToNVVM.cpp): the tensor maps of K and V are the kernel's last two parameters, listed
// as grid constants for tilefuse-mark-grid-constants; a 128-column bf16 tile is two 128-byte
// panels, so two bulk tensor copies at columns 0 and 64 into bytes 0 and 8192 of the stage,
// both completing on the stage's barrier (8 bytes a barrier). The mbarrier ops address
// barrier `id` of their group. The partitions (WarpRolesToNVVM.cpp) move registers: 384
// threads start with 168 each; the consumers increase to 240, the producer decreases to 24.
// CHECK-LABEL: gpu.func @tma
// CHECK-SAME:      %{{.+}}: !llvm.ptr, %{{.+}}: !llvm.ptr) kernel
// CHECK-SAME:      tilefuse.grid_constants = array<i32: 24, 25>
// CHECK:           nvvm.mbarrier.init
// CHECK:           nvvm.setmaxregister  increase 240
// CHECK:           scf.while
// CHECK:             mbarrier.try_wait.parity.shared.b64 p
// CHECK:           nvvm.mbarrier.arrive
// CHECK:           nvvm.setmaxregister  decrease 24
// CHECK:           nvvm.mbarrier.arrive.expect_tx
// CHECK:           %[[D0:.+]] = llvm.addrspacecast %{{.+}} : !llvm.ptr<3> to !llvm.ptr<7>
// CHECK:           nvvm.cp.async.bulk.tensor.shared.cluster.global %[[D0]], %{{.+}}, %{{.+}}, box[%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}]
// CHECK:           %[[D1:.+]] = llvm.addrspacecast %{{.+}} : !llvm.ptr<3> to !llvm.ptr<7>
// CHECK:           nvvm.cp.async.bulk.tensor.shared.cluster.global %[[D1]]
// CHECK-NOT:       nvvm.cp.async.bulk.tensor
// CHECK:           gpu.return
module attributes {tilefuse.threads = {tma = 384 : i64}} {
  func.func @tma(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c256 = arith.constant 256 : index
    %c16384 = arith.constant 16384 : index
    %false = arith.constant false
    %ring = tgpu.alloc {offset = 0 : i64} : !tgpu.ring<2 x 64x128xbf16, #tgpu.shared<canonical_128b>>
    %full = tgpu.alloc {offset = 32768 : i64} : !bars
    %empty = tgpu.alloc {offset = 32784 : i64} : !bars
    %kmap = tgpu.tensor_map %K : !qkv -> !map
    %vmap = tgpu.tensor_map %V : !qkv -> !map
    %m = memref.dim %Q, %c0 : !qkv
    scf.forall (%b, %h, %r) in (%m, %m, %m) {
      nvgpu.mbarrier.init %full[%c1], %c1 : !bars
      tgpu.warp_specialize partition warps 8 registers 240 {
        nvgpu.mbarrier.try_wait.parity %full[%c1], %false, %c0 : !bars
        %t = nvgpu.mbarrier.arrive %empty[%c1] : !bars -> !nvgpu.mbarrier.token
      } partition warps 4 registers 24 {
        nvgpu.mbarrier.arrive.expect_tx %full[%c1], %c16384 : !bars
        %buf = tgpu.stage %ring[%c1] : !tgpu.ring<2 x 64x128xbf16, #tgpu.shared<canonical_128b>>
        tgpu.tma_load %kmap[%c0, %r, %h, %b], %full[%c1] into %buf : !map, !bars, !tile
      }
    } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
    return
  }
}

// -----

!qkv = memref<?x?x?x128xbf16>
!lse = memref<?x?x?xf32>
!tile = !tgpu.buffer<64x128xbf16, #tgpu.shared<canonical_128b>>
!bars = !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 1>
!map = !nvgpu.tensormap.descriptor<tensor = memref<1x1x64x64xbf16, 3>, swizzle = swizzle_128b, l2promo = l2promo_256b, oob = zero, interleave = none>

// A kernel whose producer loads Q with TMA takes three maps: K's, V's, then Q's (the launch
// ABI's q_map), all grid constants; Q's load reads the third.
// CHECK-LABEL: gpu.func @tma_query
// CHECK-SAME:      %{{.+}}: !llvm.ptr, %{{.+}}: !llvm.ptr, %[[QMAP:.+]]: !llvm.ptr) kernel
// CHECK-SAME:      tilefuse.grid_constants = array<i32: 24, 25, 26>
// CHECK:           nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.+}}, %[[QMAP]], %{{.+}}, box
module attributes {tilefuse.threads = {tma_query = 256 : i64}} {
  func.func @tma_query(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
    %c0 = arith.constant 0 : index
    %c16384 = arith.constant 16384 : index
    %false = arith.constant false
    %ring = tgpu.alloc {offset = 0 : i64} : !tgpu.ring<1 x 64x128xbf16, #tgpu.shared<canonical_128b>>
    %full = tgpu.alloc {offset = 16384 : i64} : !bars
    %qmap = tgpu.tensor_map %Q : !qkv -> !map
    %kmap = tgpu.tensor_map %K : !qkv -> !map
    %m = memref.dim %Q, %c0 : !qkv
    scf.forall (%b, %h, %r) in (%m, %m, %m) {
      tgpu.warp_specialize partition warps 4 registers 240 {
        nvgpu.mbarrier.try_wait.parity %full[%c0], %false, %c0 : !bars
      } partition warps 4 registers 24 {
        nvgpu.mbarrier.arrive.expect_tx %full[%c0], %c16384 : !bars
        %buf = tgpu.stage %ring[%c0] : !tgpu.ring<1 x 64x128xbf16, #tgpu.shared<canonical_128b>>
        tgpu.tma_load %qmap[%c0, %r, %h, %b], %full[%c0] into %buf : !map, !bars, !tile
        tgpu.tma_load %kmap[%c0, %r, %h, %b], %full[%c0] into %buf : !map, !bars, !tile
      }
    } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
    return
  }
}

// -----

!qkv = memref<?x?x?x64xbf16>
!lse = memref<?x?x?xf32>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
!tile = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>

// A backward kernel's products on sm_90a: S = Q K^T with A (Q) by a K-major descriptor
// (transpose-A 0); S written into a canonical_128b tile, 32-bit st.shared of column pairs; then
// a product reading that tile transposed, A by an MN-major descriptor (transpose-A 1) beside a
// B read MN-major (transpose-B 1): both operands by descriptor ("l,l").
// CHECK-LABEL: gpu.func @kernel
// CHECK:         wgmma.fence.sync.aligned;
// CHECK:         "{{.+}}}, $32, $33, p, 1, 1, 0, 0;{{.+}}", "{{(=f,)+}}l,l,n"
// CHECK-COUNT-3: }, $64, $65, p, 1, 1, 0, 0;
// CHECK:         wgmma.wait_group.sync.aligned 0;
// CHECK-COUNT-16: llvm.store {{.+}} {alignment = 4 : i64} : i32, !llvm.ptr<3>
// CHECK:         wgmma.fence.sync.aligned;
// CHECK-COUNT-4: }, $64, $65, p, 1, 1, 1, 1;
// CHECK:         wgmma.wait_group.sync.aligned 0;
module attributes {tilefuse.threads = {kernel = 128 : i64}} {
  func.func @kernel(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
    %c0 = arith.constant 0 : index
    %q = tgpu.alloc {offset = 0 : i64} : !tile
    %k = tgpu.alloc {offset = 8192 : i64} : !tile
    %p = tgpu.alloc {offset = 16384 : i64} : !tile
    %m = memref.dim %Q, %c0 : !qkv
    scf.forall (%b, %h, %r) in (%m, %m, %m) {
      %s = tgpu.wgmma %q, %k transpose_rhs : !tile, !tile -> !acc
      %s1 = tgpu.wgmma_wait %s pending 0 : !acc
      tgpu.local_store %s1, %p : !acc, !tile
      %d = tgpu.wgmma %p, %q acc %s1 transpose_lhs : !tile, !tile, !acc -> !acc
      %d1 = tgpu.wgmma_wait %d pending 0 : !acc
      tile.block_store %d1, %O[%b, %h, %r] bound %m : !acc, !qkv
    } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
    return
  }
}

// -----

!qkv = memref<?x?x?x64xbf16>
!lse = memref<?x?x?xf32>
!part = memref<?x?x?x64xf32>

// tile.split_arrive (tile-split-kv): the threadfence reduction. Without a barrier id the CTA
// meets at barrier 0; a warp-specialized kernel's consumers (barrier_id, threads) meet on their
// named barrier, for the CTA's sync and for the OR that tells every thread thread 0's count.
// (nvvm.barrier reduces on barrier 0 only: the named barrier's OR is LLVM's intrinsic.)
// CHECK-LABEL: gpu.func @split_arrive
// CHECK-DAG:     %[[THREADS:.+]] = arith.constant 128 : i32
// CHECK-DAG:     %[[ID:.+]] = arith.constant 9 : i32
// CHECK:         nvvm.memory.barrier
// CHECK-NEXT:    nvvm.barrier0
// CHECK:         llvm.atomicrmw add
// CHECK:         nvvm.barrier #nvvm.reduction<or> %{{.+}} -> i32
// CHECK:         nvvm.memory.barrier
// CHECK:         nvvm.memory.barrier
// CHECK-NEXT:    nvvm.barrier id = %[[ID]] number_of_threads = %[[THREADS]]
// CHECK:         llvm.atomicrmw add
// CHECK:         llvm.call_intrinsic "llvm.nvvm.barrier.cta.red.or.aligned.count"(%[[ID]], %[[THREADS]], %{{.+}}) : (i32, i32, i1) -> i1
// CHECK-NEXT:    nvvm.memory.barrier
module attributes {tilefuse.threads = {split_arrive = 128 : i64}, tile.config = #tile.config<"Br=64">} {
  func.func @split_arrive(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse, %OP: !part,
                          %LP: !lse, %C: memref<?x?x?xi32>, %S: index) attributes {tile.split_kv} {
    %c0 = arith.constant 0 : index
    %all = tile.split_arrive %C[%c0, %c0, %c0] count %S : memref<?x?x?xi32>
    %consumers = tile.split_arrive %C[%c0, %c0, %c0] count %S {barrier_id = 9 : i32, threads = 128 : i32} : memref<?x?x?xi32>
    return
  }
}

// -----

!qkv = memref<?x?x?x128xbf16>
!lse = memref<?x?x?xf32>
!tile = !tgpu.buffer<64x128xbf16, #tgpu.shared<canonical_128b>>
!out = !tgpu.buffer<128x128xbf16, #tgpu.shared<canonical_128b>>
!bars = !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 1>
!map = !nvgpu.tensormap.descriptor<tensor = memref<1x1x64x64xbf16, 3>, swizzle = swizzle_128b, l2promo = l2promo_256b, oob = zero, interleave = none>

// A kernel that also stores O with TMA takes four maps, O's last (the launch ABI's o_map); its
// store is one bulk tensor copy per 128-byte panel from the box's rows of each panel (rows 64 on
// of a 128-row buffer: bytes 64 x 128 into panel 0, 128 x 128 + 64 x 128 into panel 1), then
// one commit.
// CHECK-LABEL: gpu.func @tma_output
// CHECK-SAME:      %{{.+}}: !llvm.ptr, %{{.+}}: !llvm.ptr, %{{.+}}: !llvm.ptr, %[[OMAP:.+]]: !llvm.ptr) kernel
// CHECK-SAME:      tilefuse.grid_constants = array<i32: 24, 25, 26, 27>
// CHECK:           nvvm.cp.async.bulk.tensor.global.shared.cta %[[OMAP]], %{{.+}}, box[
// CHECK:           nvvm.cp.async.bulk.tensor.global.shared.cta %[[OMAP]], %{{.+}}, box[
// CHECK-NEXT:      nvvm.cp.async.bulk.commit.group
// CHECK:           nvvm.cp.async.bulk.wait_group 0 {read}
module attributes {tilefuse.threads = {tma_output = 256 : i64}} {
  func.func @tma_output(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
    %c0 = arith.constant 0 : index
    %c64 = arith.constant 64 : index
    %c16384 = arith.constant 16384 : index
    %false = arith.constant false
    %ring = tgpu.alloc {offset = 0 : i64} : !tgpu.ring<1 x 64x128xbf16, #tgpu.shared<canonical_128b>>
    %obuf = tgpu.alloc {offset = 16384 : i64} : !out
    %full = tgpu.alloc {offset = 49152 : i64} : !bars
    %qmap = tgpu.tensor_map %Q : !qkv -> !map
    %kmap = tgpu.tensor_map %K : !qkv -> !map
    %omap = tgpu.tensor_map %O : !qkv -> !map
    %m = memref.dim %Q, %c0 : !qkv
    scf.forall (%b, %h, %r) in (%m, %m, %m) {
      tgpu.warp_specialize partition warps 4 registers 240 {
        nvgpu.mbarrier.try_wait.parity %full[%c0], %false, %c0 : !bars
        tgpu.tma_store %obuf[%c64] into %omap[%c0, %r, %h, %b] : !out, !map
        nvvm.cp.async.bulk.wait_group 0 {read}
      } partition warps 4 registers 24 {
        nvgpu.mbarrier.arrive.expect_tx %full[%c0], %c16384 : !bars
        %buf = tgpu.stage %ring[%c0] : !tgpu.ring<1 x 64x128xbf16, #tgpu.shared<canonical_128b>>
        tgpu.tma_load %qmap[%c0, %r, %h, %b], %full[%c0] into %buf : !map, !bars, !tile
        tgpu.tma_load %kmap[%c0, %r, %h, %b], %full[%c0] into %buf : !map, !bars, !tile
      }
    } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
    return
  }
}

// -----

// A wait tgpu-overlap-softmax marked (tgpu.wait_after_preceding_code): a branch on %clock that
// ptxas cannot fold ends the basic block just before it, so ptxas keeps the code written
// before the wait (the softmax beside the pending P·V) before it. The branch is always taken:
// the fence it jumps over never runs. An unmarked wait has none.
!qkv = memref<?x?x?x64xbf16>
!lse = memref<?x?x?xf32>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
!qa = tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!tile = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>
// CHECK-LABEL: gpu.func @held_wait
// CHECK:         wgmma.commit_group.sync.aligned;
// CHECK:         llvm.inline_asm has_side_effects "{\0A\09.reg .pred %hold_p;
// CHECK-SAME:      mov.u32 %hold_c, %clock;\0A\09setp.ne.u32 %hold_p, %hold_c, -1;\0A\09@%hold_p bra HOLD_${:uid};
// CHECK-SAME:      membar.cta;\0A{{ *}}HOLD_${:uid}:\0A\09}\0A\09wgmma.wait_group.sync.aligned 0;"
// CHECK:         wgmma.commit_group.sync.aligned;
// CHECK-NOT:     %clock
// CHECK:         "wgmma.wait_group.sync.aligned 0;"
// CHECK:         gpu.return
module attributes {tilefuse.threads = {held_wait = 128 : i64}} {
  func.func @held_wait(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %ring = tgpu.alloc {offset = 0 : i64} : !tgpu.ring<2 x 64x64xbf16, #tgpu.shared<canonical_128b>>
    %m = memref.dim %Q, %c0 : !qkv
    scf.forall (%b, %h, %r) in (%m, %m, %m) {
      %q = tile.block_load %Q[%b, %h, %r] bound %m : !qkv -> !qa
      %buf = tgpu.stage %ring[%c1] : !tgpu.ring<2 x 64x64xbf16, #tgpu.shared<canonical_128b>>
      %s, %qf = tgpu.wgmma %q, %buf transpose_rhs : !qa, !tile -> !acc, !qa
      %s1, %q1 = tgpu.wgmma_wait %s, %qf pending 0 {tgpu.wait_after_preceding_code} : !acc, !qa
      %t, %tf = tgpu.wgmma %q1, %buf transpose_rhs : !qa, !tile -> !acc, !qa
      %t1, %t2 = tgpu.wgmma_wait %t, %tf pending 0 : !acc, !qa
      %sum = arith.addf %s1, %t1 : !acc
      tile.block_store %sum, %O[%b, %h, %r] bound %m : !acc, !qkv
    } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
    return
  }
}

// -----

// tgpu.leading_columns and tgpu.pad_columns move no data: an m64nN accumulator's thread holds
// columns 8j + 2c, 8j + 2c + 1 of rows g and g + 8 in values 4j .. 4j + 3, so the first 32
// columns are the first 16 of the 32 values of a 64-column block, and padding puts them back
// with zeros in values 16 .. 31: only the first 16 values leave the wgmma, and the rest of
// the stored block is zero.
!qkv = memref<?x?x?x64xbf16>
!lse = memref<?x?x?xf32>
!wide = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
!narrow = tensor<64x32xf32, #tgpu.wgmma_acc<warpgroups = 1>>
!qa = tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>
!tile = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>
// CHECK-LABEL: gpu.func @columns
// CHECK:         %[[ZERO:.+]] = arith.constant dense<0.000000e+00> : vector<2xbf16>
// CHECK:         %[[S:.+]] = llvm.inline_asm has_side_effects "wgmma.wait_group.sync.aligned 0;"
// CHECK:         llvm.extractvalue %[[S]][15]
// CHECK-NOT:     llvm.extractvalue %[[S]][16]
// CHECK:         llvm.bitcast %[[ZERO]] : vector<2xbf16> to i32
// CHECK:         gpu.return
module attributes {tilefuse.threads = {columns = 128 : i64}} {
  func.func @columns(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
    %c0 = arith.constant 0 : index
    %ring = tgpu.alloc {offset = 0 : i64} : !tgpu.ring<1 x 64x64xbf16, #tgpu.shared<canonical_128b>>
    %m = memref.dim %Q, %c0 : !qkv
    scf.forall (%b, %h, %r) in (%m, %m, %m) {
      %q = tile.block_load %Q[%b, %h, %r] bound %m : !qkv -> !qa
      %buf = tgpu.stage %ring[%c0] : !tgpu.ring<1 x 64x64xbf16, #tgpu.shared<canonical_128b>>
      %s, %qf = tgpu.wgmma %q, %buf transpose_rhs : !qa, !tile -> !wide, !qa
      %s1, %q1 = tgpu.wgmma_wait %s, %qf pending 0 : !wide, !qa
      %n = tgpu.leading_columns %s1 : !wide -> !narrow
      %p = tgpu.pad_columns %n : !narrow -> !wide
      tile.block_store %p, %O[%b, %h, %r] bound %m : !wide, !qkv
    } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
    return
  }
}
