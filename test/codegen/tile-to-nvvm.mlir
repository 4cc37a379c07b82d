// RUN: tilefuse-opt %kernels/causal.mlir --tile-front-end="block-m=32 block-n=64" \
// RUN:   --tile-pipeline --tile-to-nvvm | FileCheck %s
// RUN: tilefuse-opt %kernels/attention.mlir --tile-specialize="element-type=f16" \
// RUN:   --tile-front-end --tile-to-nvvm="chip=sm_80 features=+ptx80" | FileCheck %s --check-prefix=F16
// RUN: tilefuse-opt %kernels/attention.mlir --tile-front-end --tile-pipeline \
// RUN:   --tile-to-nvvm="copy-issue=at-barrier" | FileCheck %s --check-prefix=ATBARRIER
// RUN: not tilefuse-opt %kernels/attention.mlir --tile-front-end="block-m=24" --tile-to-nvvm \
// RUN:   2>&1 | FileCheck %s --check-prefix=BR
// RUN: tilefuse-opt %kernels/attention.mlir --tile-front-end="block-m=128" \
// RUN:   --tile-to-nvvm="rows-per-warp=32" | FileCheck %s --check-prefix=RPW32
// RUN: tilefuse-opt %kernels/attention.mlir --tile-front-end="block-m=128" --tile-pipeline \
// RUN:   --tile-to-nvvm="rows-per-warp=32 q-operand=shared" | FileCheck %s --check-prefix=QSHARED
// RUN: not tilefuse-opt %kernels/attention.mlir --tile-front-end --tile-to-nvvm="q-operand=global" \
// RUN:   2>&1 | FileCheck %s --check-prefix=QBAD
// RUN: tilefuse-opt %kernels/attention.mlir --tile-specialize="head-dim=128" \
// RUN:   --tile-front-end="block-m=128 block-n=64" --tile-pipeline --tile-to-nvvm="mma=wgmma" \
// RUN:   | FileCheck %s --check-prefix=WGMMA
// RUN: not tilefuse-opt %kernels/attention.mlir --tile-front-end \
// RUN:   --tile-to-nvvm="mma=wgmma chip=sm_80" 2>&1 | FileCheck %s --check-prefix=WGMMA-SM80
// RUN: tilefuse-opt %kernels/softcap.mlir --tile-to-ptx | FileCheck %s --check-prefix=PTX
// RUN: tilefuse-opt %kernels/causal.mlir --tile-to-ptx="arch=sm_80" | FileCheck %s --check-prefix=PTX80

// tile-to-nvvm: one gpu.func per kernel in a gpu.module carrying the NVVM target, with the
// launch ABI (5 pointers, then B H Hkv M N and 14 strides as i64), a CTA of 32 x Br/16 threads,
// m16n8k16 MMAs, ldmatrix (.trans for V) from shared tiles filled by cp.async, quad shuffles for
// the row reductions, and ex2/lg2.approx instead of math ops.

// Shared tiles (two key buffers, one value buffer, 64 x 64 bf16 each) are laid out in the dynamic
// shared memory; the module records its size for the launcher.
// CHECK:       module attributes {tilefuse.shared_bytes = {causal = 24576 : i64}}
// CHECK:       gpu.module @tilefuse_kernels [#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">]
// CHECK-NEXT:    llvm.mlir.global external @tilefuse_dynamic_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
// CHECK-NOT:     llvm.mlir.global
// CHECK:         gpu.func @causal(%{{.+}}: !llvm.ptr<1>, %{{.+}}: !llvm.ptr<1>, %{{.+}}: !llvm.ptr<1>, %{{.+}}: !llvm.ptr<1>, %{{.+}}: !llvm.ptr<1>, %{{.+}}: i64,
// CHECK-SAME:      kernel attributes {known_block_size = array<i32: 64, 1, 1>, nvvm.maxntid = array<i32: 64, 1, 1>, nvvm.minctasm = 1 : i32}
// CHECK-NOT:     math.
// CHECK-NOT:     tile.
// CHECK:           gpu.block_id  z
// CHECK:           nvvm.cp.async.shared.global {{.*}}, 16, cache = cg
// CHECK:           nvvm.cp.async.commit.group
// CHECK:           scf.for
// CHECK:             nvvm.cp.async.wait.group 2
// CHECK-NEXT:        gpu.barrier
// CHECK:             nvvm.ldmatrix {{.*}} {eltType = #nvvm.ld_st_matrix_elt_type<b16>, layout = #nvvm.mma_layout<row>, num = 4 : i32, shape = #nvvm.ld_st_matrix_shape<m = 8, n = 8>}
// CHECK:             nvvm.mma.sync A[{{.*}}]{{ +}}B[{{.*}}]{{ +}}C[{{.*}}]{{ +}}{layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>, shape = #nvvm.shape<m = 16, n = 8, k = 16>}
// CHECK:             gpu.shuffle  xor
// CHECK:             llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"
// CHECK:             nvvm.ldmatrix {{.*}}layout = #nvvm.mma_layout<col>
// CHECK-NOT:     math.

// f16 operands travel as vector<2xf16>; the target follows the option.
// F16:         gpu.module @tilefuse_kernels [#nvvm.target<O = 3, chip = "sm_80", features = "+ptx80">]
// F16:           nvvm.mma.sync A[{{.*}}]{{ +}}B[{{.*}}]{{ +}}C[{{.*}}]{{.*}}shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (vector<2xf16>, vector<2xf16>, f32)

// copy-issue=at-barrier: the copies requested while their buffers had readers start right after
// the barrier that follows the wait for the key block, before that block is read.
// ATBARRIER-LABEL: gpu.func @attention(
// ATBARRIER:         scf.for
// ATBARRIER:         nvvm.cp.async.wait.group 0
// ATBARRIER-NEXT:    gpu.barrier
// ATBARRIER-NOT:     nvvm.ldmatrix
// ATBARRIER:         nvvm.cp.async.shared.global
// ATBARRIER:         nvvm.ldmatrix

// rows-per-warp=32: Br = 128 takes 4 warps; every thread holds two m16 tiles (2 x 8 n-tiles x 4
// scores, 4 row statistics), and each ldmatrix'd fragment feeds one MMA per m-tile.
// RPW32-LABEL: gpu.func @attention(
// RPW32-SAME:    known_block_size = array<i32: 128, 1, 1>
// RPW32:         vector<64xf32>
// RPW32:         vector<4xf32>
// RPW32:         nvvm.ldmatrix
// RPW32-COUNT-4: nvvm.mma.sync
// RPW32-NOT:     nvvm.mma.sync
// RPW32:         nvvm.ldmatrix

// q-operand=shared: the Q block is copied once into shared memory (16 KiB at its offset 0, before
// the key buffers), and each k-step of Q K^T reads one A fragment per m-tile with ldmatrix from
// an address recomputed in the loop (the opaque move) so that constants fold into immediates.
// QSHARED:     module attributes {tilefuse.shared_bytes = {attention = 40960 : i64}}
// QSHARED:     gpu.func @attention(
// QSHARED:       nvvm.cp.async.shared.global
// QSHARED:       nvvm.cp.async.commit.group
// QSHARED:       nvvm.cp.async.shared.global
// QSHARED:       nvvm.cp.async.commit.group
// QSHARED:       scf.for
// QSHARED:         llvm.inline_asm "mov.b32 $0, $1;", "=r,r,r"
// QSHARED:         nvvm.ldmatrix
// QSHARED-NEXT:    llvm.extractvalue
// QSHARED:         nvvm.mma.sync
// QSHARED-NOT:   llvm.load

// mma=wgmma: Br = 128 is two warpgroups (256 threads). The K and V tiles (64 x 128 bf16, 16 KiB)
// sit 1024-byte aligned; the copies are made visible to the async proxy before the barrier;
// each dot is fence, one m64nNk16 per k-step (Q K^T: N = Bc = 64, 8 k-steps over D = 128, K
// K-major; P V: N = D = 128, 4 k-steps over Bc, V transposed), commit, wait.
// WGMMA:       module attributes {tilefuse.shared_bytes = {attention = 49152 : i64}}
// WGMMA:       gpu.func @attention(
// WGMMA-SAME:    known_block_size = array<i32: 256, 1, 1>
// WGMMA:         scf.for
// WGMMA:           nvvm.cp.async.wait.group
// WGMMA-NEXT:      llvm.inline_asm has_side_effects "fence.proxy.async.shared::cta;"
// WGMMA-NEXT:      gpu.barrier
// WGMMA:           "wgmma.fence.sync.aligned;"
// WGMMA-COUNT-8:   wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}} p, 1, 1, 0;
// WGMMA:           "wgmma.commit_group.sync.aligned;"
// WGMMA:           "wgmma.wait_group.sync.aligned 0;"
// WGMMA:           "wgmma.fence.sync.aligned;"
// WGMMA-COUNT-4:   wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}} p, 1, 1, 1;
// WGMMA:           "wgmma.wait_group.sync.aligned 0;"
// WGMMA-NOT:       nvvm.ldmatrix
// WGMMA-NOT:       nvvm.mma.sync

// WGMMA-SM80: error: tile-to-nvvm: mma=wgmma needs chip=sm_90a, rows-per-warp=16, q-operand=registers and Br a multiple of 64 (got chip=sm_80, rows-per-warp=16, q-operand=registers, Br=64)

// QBAD: error: tile-to-nvvm: q-operand must be registers or shared, not 'global'

// BR: error: tile-to-nvvm: Br must be a multiple of 16 (rows per warp) for at most 16 warps (got 24)

// tile-to-ptx ends in a gpu.binary holding PTX for sm_90a, free of libdevice calls.
// PTX:       gpu.binary @tilefuse_kernels
// PTX-SAME:    .target sm_90a
// PTX-SAME:    .extern .shared .align 1024 .b8 tilefuse_dynamic_smem[];
// PTX-SAME:    .visible .entry softcap(
// PTX-SAME:    mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// PTX-SAME:    ex2.approx.ftz.f32
// PTX-NOT:   __nv_

// PTX80:     .target sm_80
