// `tilefuse run --backward`: the forward, then the backward derived from the same text, both
// tiled and run on the CPU reference backend; dQ, dK and dV against the float64 backward.
//
// RUN: tilefuse run --backward --device cpu --kernel causal --B 1 --H 2 --M 37 --N 53 \
// RUN:   --block-m 16 --block-n 32 | FileCheck %s --check-prefix=CAUSAL
// CAUSAL: kernel       causal (kernels/causal.mlir), bf16, forward and derived backward on the CPU reference backend
// CAUSAL: shape        B=1 H=2 Hkv=2 M=37 N=53 D=64  Br=16 Bc=32  dQ atomic
// The causal mask prunes the query blocks of each key block: 4 of 6 per head.
// CAUSAL: blocks       backward 8 visited of 12 ({{[0-9]+}} full, {{[0-9]+}} partial)
// CAUSAL: error        dQ {{.*}} vs float64
// CAUSAL: result       PASS
//
// A user's --file variant, f32, the deterministic dQ loop (which visits blocks too).
// RUN: tilefuse run --backward --deterministic --device cpu --dtype f32 \
// RUN:   --file %S/../variants/softcap_head_bias.mlir --B 1 --H 2 --M 45 --N 29 \
// RUN:   | FileCheck %s --check-prefix=USER
// USER: kernel       softcap_head_bias ({{.*}}softcap_head_bias.mlir), f32, forward and derived backward
// USER: dQ deterministic (ordered key loop)
// USER: result       PASS
//
// The grids' row blocks last first (--row-order descending): the forward's and the dQ grid's.
// RUN: tilefuse run --backward --deterministic --device cpu --kernel prefix_lm --B 1 --H 2 \
// RUN:   --M 77 --N 61 --block-m 16 --block-n 16 --row-order descending \
// RUN:   | FileCheck %s --check-prefix=DESC
// DESC: result       PASS
// RUN: not tilefuse run --backward --device cpu --row-order sideways 2>&1 \
// RUN:   | FileCheck %s --check-prefix=ORDER
// ORDER: error: --row-order: row_order must be ascending, descending, grouped or paired, not 'sideways'
// --config configures the GPU kernel (checked like compile's); the CPU backend takes its block
// sizes and row order, and says so; --block-m given explicitly wins.
// RUN: tilefuse run --backward --device cpu --kernel causal --B 1 --H 2 --M 37 --N 53 \
// RUN:   --config Br=32,Bc=16,mma=wgmma,q=shared --block-m 16 | FileCheck %s --check-prefix=CONFIG
// CONFIG: config       --config Br=32,Bc=16,mma=wgmma,q=shared: the CPU reference backend takes its Br, Bc and row_order; the other settings configure GPU code
// CONFIG: shape        B=1 H=2 Hkv=2 M=37 N=53 D=64  Br=16 Bc=16
// CONFIG: result       PASS
// RUN: not tilefuse run --device cpu --config colour=red 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BADCONFIG
// BADCONFIG: error: --config: unknown setting 'colour'
//
// gqa declares 8 query and 2 key/value heads: dK and dV sum over each group of 4.
// RUN: tilefuse run --backward --device cpu --kernel gqa --dtype f16 --M 40 --N 70 \
// RUN:   | FileCheck %s --check-prefix=GQA
// GQA: shape        B=2 H=8 Hkv=2
// GQA: result       PASS
//
// On the GPU the derived backward runs where there is one (scripts/gpu-backward-tests.sh on the
// H200); here there is none, and --device gpu says so. --deterministic belongs to --backward.
// RUN: not tilefuse run --backward --device gpu 2>&1 | FileCheck %s --check-prefix=GPU
// GPU: error: no driver
// RUN: not tilefuse run --deterministic --device cpu 2>&1 | FileCheck %s --check-prefix=DETONLY
// DETONLY: error: --deterministic is an option of --backward
//
// A score_mod op without a derivative: the error at its line, exit 1.
// RUN: sed 's/%%th = math.tanh %%x : f32/%%th = arith.remf %%x, %%cap : f32/' \
// RUN:   %kernels/softcap.mlir > %t.remf.mlir
// RUN: not tilefuse run --backward --device cpu --file %t.remf.mlir 2>&1 \
// RUN:   | FileCheck %s --check-prefix=REMF
// REMF: remf.mlir:{{[0-9]+}}:{{[0-9]+}}: error: 'arith.remf' op cannot be differentiated
//
// `tilefuse compile --backward --emit tiled`: the tiled form, three grids; the dK/dV loop over
// query blocks is pruned (its scans are scf.while loops); dQ by atomic adds, or by the ordered
// key loop with --deterministic.
// RUN: tilefuse compile --kernel causal --head-dim 32 --block-m 32 --block-n 16 --backward \
// RUN:   --emit tiled | FileCheck %s --check-prefix=TILED
// TILED: func.func @causal_backward(
// TILED-NOT: func.func @causal(
// TILED: memref.alloc({{.*}}) {tile.workspace = "dq_accumulator"} : memref<?x?x?x32xf32>
// TILED: tile.backward_phase = "preprocess"
// TILED: scf.while
// TILED: tile.block_dot {{.*}} transpose_lhs : tensor<32x16xf32>, tensor<32x32xbf16>, tensor<16x32xf32> -> tensor<16x32xf32>
// TILED: tile.block_atomic_add
// TILED: tile.query_loop
// TILED: tile.backward_phase = "key_gradients"
// TILED: tile.backward_phase = "query_gradients"
// RUN: tilefuse compile --kernel causal --backward --deterministic --emit tiled \
// RUN:   | FileCheck %s --check-prefix=DET --implicit-check-not=tile.block_atomic_add
// DET: tile.query_loop
// DET: tile.kv_loop
// DET: tile.backward_phase = "query_gradients"
// RUN: not tilefuse compile --kernel causal --emit tiled 2>&1 | FileCheck %s --check-prefix=NOBWD
// NOBWD: error: --emit tiled is the tiled form of the derived backward: give --backward
// RUN: not tilefuse compile --kernel causal --deterministic --emit ptx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=DETPTX
// DETPTX: error: --deterministic is an option of --backward
