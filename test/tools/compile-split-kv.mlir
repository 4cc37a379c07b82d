// Split-KV kernels through `tilefuse compile --split-kv` (tile-split-kv, then the GPU lowering):
// the launch ABI's split form (the 24 parameters, then o_part, lse_part, counters and S), the
// cross-CTA merge protocol (membar.gl, a CTA barrier, the atomic count, bar.red.or) and the merge's volatile loads
// of the partials; the sidecar says split_kv.
// RUN: rm -rf %t && mkdir -p %t
// RUN: tilefuse compile --kernel attention --head-dim 128 --split-kv --emit ptx -o %t/split.ptx
// RUN: FileCheck %s --input-file %t/split.ptx
// RUN: FileCheck %s --check-prefix=JSON --input-file %t/split.json
// CHECK:     .entry attention(
// CHECK:       .param .u64 attention_param_27{{$}}
// CHECK-NEXT:  )
// CHECK:     membar.gl;
// CHECK-NEXT: bar.sync 0;
// CHECK:     atom.global.add.u32
// CHECK:     bar.red.or.pred
// CHECK:     membar.gl;
// CHECK:     ld.volatile.global.v2.b32
// JSON: "split_kv": true

// The unsplit kernel keeps the 24 parameters and no split protocol (causal at head dim 64 for
// short sequences, the one-warpgroup kernel: its long-sequence form, attention there and every
// kernel at 128 are warp-specialized and take their two tensor maps after them).
// RUN: tilefuse compile --kernel causal --head-dim 64 --seq-len 1024 --emit ptx -o %t/whole.ptx
// RUN: FileCheck %s --check-prefix=WHOLE --input-file %t/whole.ptx
// WHOLE:     .param .u64 causal_param_23{{$}}
// WHOLE-NEXT: )
// WHOLE-NOT: atom.global
// (Causal at 128: the maps of K and V, then Q's, which its producer loads by TMA.)
// RUN: tilefuse compile --kernel causal --head-dim 128 --emit ptx -o %t/tma.ptx
// RUN: FileCheck %s --check-prefix=TMA --input-file %t/tma.ptx
// TMA:      .param .u64 causal_param_23,
// TMA-NEXT: .param .align 64 .b8 causal_param_24[128],
// TMA-NEXT: .param .align 64 .b8 causal_param_25[128],
// TMA-NEXT: .param .align 64 .b8 causal_param_26[128]
// TMA-NEXT: )
// Persistent (Q by TMA): the producer keeps 40 registers for its tile loop, the consumers 232.
// TMA:      setmaxnreg.inc.sync.aligned.u32 232
// TMA:      setmaxnreg.dec.sync.aligned.u32 40
// TMA:      cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// TMA-NOT:  cp.async.cg

// mma.sync (sm_80) lowers the same split.
// RUN: tilefuse compile --kernel causal --arch sm_80 --split-kv --emit ptx -o %t/sm80.ptx
// RUN: FileCheck %s --check-prefix=SM80 --input-file %t/sm80.ptx
// SM80: .target sm_80
// SM80: atom.global.add.u32

// --emit header of a split kernel: the launcher takes the workspace and the split count, packs
// the ABI's split parameters and multiplies the grid's x by the splits; the workspace layout
// and its initializer come with it.
// RUN: tilefuse compile --kernel attention --split-kv --emit header --name decode -o %t/decode.h
// RUN: FileCheck %s --check-prefix=HEADER --input-file %t/decode.h
// HEADER: #define DECODE_PACK_GQA 1
// HEADER: #define DECODE_SPLIT_KV 1
// HEADER: static inline decode_split_workspace_layout decode_split_workspace(int64_t splits,
// HEADER: static inline CUresult decode_split_workspace_init(CUdeviceptr workspace,
// HEADER: static inline CUresult decode_launch(
// HEADER:   const int64_t strides[14],
// HEADER-NEXT: CUdeviceptr workspace, int64_t splits) {
// HEADER:   void *parameters[28];
// HEADER:   parameters[24] = &split_pointers[0];
// HEADER:   parameters[27] = &splits;
// HEADER:   return cuLaunchKernel(function, rowBlocks * (unsigned)splits, heads,
