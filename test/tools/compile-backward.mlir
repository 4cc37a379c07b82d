// The derived backward through `tilefuse compile --backward` (tile-derive-backward,
// tile-tiling-backward, tile-outline-backward-phases, the GPU lowering): one PTX module with the
// three phases' kernels, each with the backward launch ABI's 47 parameters (LaunchAbi.h). On
// sm_90a (the default) the key_gradients kernel's products are warpgroup MMAs: S = Q K^T reads
// Q and K K-major by descriptor; P and dS are written into shared memory (st.shared), fenced
// into the async proxy and published by a barrier, and dV += P^T dO reads them MN-major
// (transpose-A 1) beside dO MN-major (transpose-B 1); dQ += dS K takes dS from registers; dQ
// is added into the f32 accumulator a pair of columns per red.global.add.v2.f32 (PTX 8.1,
// which the backward asks for). At head dim 64 the blocks are Br = Bc = 128, two warpgroups
// (S is m64n128 a warpgroup). With mma=sync: ldmatrix .trans and mma.sync; on sm_80 one
// element per atomic add. The sidecar lists the three phases in launch order.
// RUN: rm -rf %t && mkdir -p %t
// RUN: tilefuse compile --kernel causal --backward -o %t/causal.ptx
// RUN: FileCheck %s --input-file %t/causal.ptx
// RUN: FileCheck %s --check-prefix=JSON --input-file %t/causal.json
// CHECK:      .entry causal_backward_preprocess(
// CHECK:        .param .u64 causal_backward_preprocess_param_46{{$}}
// CHECK-NEXT:   )
// CHECK:      .entry causal_backward_key_gradients(
// CHECK:        .param .u64 causal_backward_key_gradients_param_46{{$}}
// CHECK-NEXT:   )
// CHECK:        wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{{.+}}}, %rd{{[0-9]+}}, %rd{{[0-9]+}}, p, 1, 1, 0, 0;
// CHECK:        st.shared.b32
// CHECK:        fence.proxy.async.shared::cta;
// CHECK-NEXT:   bar.sync 0;
// CHECK:        wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{{.+}}}, %rd{{[0-9]+}}, %rd{{[0-9]+}}, p, 1, 1, 1, 1;
// CHECK:        wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{{.+}}}, {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}}, %rd{{[0-9]+}}, p, 1, 1, 1;
// CHECK:        red.relaxed.gpu.global.add.v2.f32
// CHECK:      .entry causal_backward_query_gradients(
// CHECK-NOT:    atom.global
// CHECK-NOT:  atom.global.add.f32
// RUN: tilefuse compile --kernel causal --backward --mma sync -o %t/causal-sync.ptx
// RUN: FileCheck %s --check-prefix=SYNC --input-file %t/causal-sync.ptx
// SYNC:       .entry causal_backward_key_gradients(
// SYNC:         st.shared.b32
// SYNC:         bar.sync 0;
// SYNC:         ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
// SYNC:         mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// SYNC:         red.relaxed.gpu.global.add.v2.f32
// SYNC-NOT:     wgmma
// RUN: tilefuse compile --kernel causal --backward --arch sm_80 -o %t/causal80.ptx
// RUN: FileCheck %s --check-prefix=SM80 --input-file %t/causal80.ptx
// SM80:       .version 8.0
// SM80:       .entry causal_backward_key_gradients(
// SM80:         atom.global.add.f32
// SM80-NOT:     red.relaxed.gpu.global.add.v2.f32
// JSON:      "backward_phase": "preprocess"
// JSON:      "block_m": 128
// JSON:      "threads": 256
// JSON:      "backward_phase": "key_gradients"
// JSON:      "backward_phase": "query_gradients"

// Deterministic: the query_gradients kernel loops over key blocks (dQ += dS K, no atomics).
// RUN: tilefuse compile --kernel softcap --backward --deterministic --head-dim 128 -o %t/det.ptx
// RUN: FileCheck %s --check-prefix=DET --input-file %t/det.ptx
// RUN: FileCheck %s --check-prefix=DETJSON --input-file %t/det.json
// DET:      .entry softcap_backward_key_gradients(
// DET-NOT:    atom.global
// DET:      .entry softcap_backward_query_gradients(
// DET:        wgmma.mma_async.sync.aligned.m64n64k16
// DETJSON:   "deterministic": true

// Above head dim 64 on sm_90a the ordered dQ loop is the default (the faster schedule there):
// deterministic without being asked, no atomic adds.
// RUN: tilefuse compile --kernel causal --backward --head-dim 128 -o %t/d128.ptx
// RUN: FileCheck %s --check-prefix=D128 --input-file %t/d128.ptx
// RUN: FileCheck %s --check-prefix=DETJSON --input-file %t/d128.json
// D128:      .entry causal_backward_key_gradients(
// D128-NOT:    red.relaxed.gpu.global.add
// D128:      .entry causal_backward_query_gradients(
// D128:        wgmma.mma_async.sync.aligned.m64n64k16

// The backward's AOT header (compile-backward-header.mlir, which has ptxas) is written through
// ptxas like the forward's: without it, the error says where it looked.
// RUN: not tilefuse compile --kernel causal --backward --emit header --ptxas %t/no-ptxas \
// RUN:   -o %t/x.h 2>&1 | FileCheck %s --check-prefix=HEADER
// HEADER: error: no ptxas: {{.*}}no-ptxas, which is not an executable file

// What the backward does not take is an error.
// RUN: not tilefuse compile --kernel causal --backward --config Br=64,Bc=32 -o %t/x.ptx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=SHAPE
// SHAPE: error: invalid kernel configuration: the backward needs Br = Bc
// The forward's settings are named, not silently dropped (they would only key another cache
// entry for the same kernels); --tuned holds forward configurations.
// RUN: not tilefuse compile --kernel causal --backward --config stages=3,q=shared \
// RUN:   -o %t/x.ptx 2>&1 | FileCheck %s --check-prefix=FORWARDONLY
// FORWARDONLY: error: invalid kernel configuration: the backward's configuration takes Br, Bc, rows_per_warp, mma and row_order only; q=shared,stages=3 configures the forward kernel
// RUN: not tilefuse compile --kernel causal --backward --tuned -o %t/x.ptx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=TUNED
// TUNED: error: --tuned applies the tuning database's forward configurations; the backward is not tuned
// RUN: not tilefuse compile --kernel causal --backward --varlen -o %t/x.ptx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=VARLEN
// VARLEN: error: --backward runs on contiguous tensors
// RUN: not tilefuse compile --kernel causal --deterministic -o %t/x.ptx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=DETONLY
// DETONLY: error: --deterministic is an option of --backward
