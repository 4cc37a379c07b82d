// Varlen kernels through `tilefuse compile --varlen` (tile-varlen, then the GPU lowering): the
// launch ABI's varlen form (the 24 parameters, then cu_seqlens_q and cu_seqlens_k), and the
// sidecar; the register budget (ctas_per_sm=3) in the PTX and the sidecar, the default of a
// d64 kernel whose regions take no registers; warp-specialized (TMA) at d128.
// RUN: rm -rf %t && mkdir -p %t
// RUN: tilefuse compile --kernel causal --varlen --emit ptx -o %t/varlen.ptx
// RUN: FileCheck %s --input-file %t/varlen.ptx
// RUN: FileCheck %s --check-prefix=JSON --input-file %t/varlen.json
// CHECK:     .entry causal(
// CHECK:       causal_param_25{{$}}
// CHECK-NEXT:  )
// CHECK:     .minnctapersm 3
// CHECK:     cp.async.cg.shared.global
// JSON: ctas_per_sm=3
// JSON: "varlen": true

// alibi's score region takes registers: no budget.
// RUN: tilefuse compile --kernel alibi --varlen --emit ptx -o %t/alibi.ptx
// RUN: FileCheck %s --check-prefix=ALIBI --input-file %t/alibi.json
// ALIBI-NOT: ctas_per_sm
// ALIBI: "varlen": true

// At d128 the padded default: a TMA producer and two consumer warpgroups.
// RUN: tilefuse compile --kernel causal --head-dim 128 --varlen --emit ptx -o %t/ws.ptx
// RUN: FileCheck %s --check-prefix=WS --input-file %t/ws.ptx
// RUN: FileCheck %s --check-prefix=WSJSON --input-file %t/ws.json
// WS: cp.async.bulk.tensor
// WSJSON: "kv_tma": true
// WSJSON: warp_specialize=true

// Q in shared memory, asked for: the producer loads Q too, through the packed q_map (the last
// parameter, after K's and V's), so no cp.async is left; persistent on request, over a tile list
// of each sequence's own row blocks (a loop over the sequences, tgpu-persistent), without
// overlapped tile boundaries (tgpu-overlap-tiles refuses a tile loop inside another loop).
// RUN: tilefuse compile --kernel causal --head-dim 128 --varlen \
// RUN:   --config mma=wgmma,warp_specialize=true,q=shared,persistent=true --emit ptx -o %t/wsq.ptx
// RUN: FileCheck %s --check-prefix=WSQ --input-file %t/wsq.ptx
// RUN: FileCheck %s --check-prefix=WSQJSON --input-file %t/wsq.json
// WSQ:      .entry causal(
// WSQ:        .param .align 64 .b8 causal_param_28[128]
// WSQ-NEXT:  )
// WSQ:       mov.b64 %[[QMAP:rd[0-9]+]], causal_param_28;
// WSQ-NOT:   cp.async.cg.shared.global
// WSQ:       cp.async.bulk.tensor.4d
// WSQ-NOT:   cp.async.cg.shared.global
// WSQJSON: "q_tma": true
// WSQJSON: q=shared
// WSQJSON: persistent=true"
// WSQJSON: "varlen": true

// RUN: not tilefuse compile --kernel causal --head-dim 128 --varlen \
// RUN:   --config mma=wgmma,warp_specialize=true,q=shared,persistent=true,overlap_tiles=true \
// RUN:   --emit ptx -o %t/wsqot.ptx 2>&1 | FileCheck %s --check-prefix=WSQOT
// WSQOT: error: 'scf.for' op tgpu-overlap-tiles: the tile loop runs inside another loop
// RUN: not tilefuse compile --kernel causal --head-dim 128 --varlen \
// RUN:   --config mma=wgmma,warp_specialize=true,q=shared,persistent=true,row_order=paired \
// RUN:   --emit ptx -o %t/wsqpaired.ptx 2>&1 | FileCheck %s --check-prefix=WSQPAIRED
// WSQPAIRED: error: persistent: a varlen kernel's tile list runs each sequence's row blocks in ascending or descending order (row_order=ascending or descending), not paired
// Descending, each sequence's row blocks run last first.
// RUN: tilefuse compile --kernel causal --head-dim 128 --varlen \
// RUN:   --config mma=wgmma,warp_specialize=true,q=shared,persistent=true,row_order=descending \
// RUN:   --emit ptx -o %t/wsqdesc.ptx
// RUN: FileCheck %s --check-prefix=WSQDESC --input-file %t/wsqdesc.json
// WSQDESC: persistent=true,row_order=descending"

// RUN: tilefuse compile --kernel attention --head-dim 128 --varlen \
// RUN:   --config ctas_per_sm=3,warp_specialize=false --emit ptx -o %t/budget.ptx
// RUN: FileCheck %s --check-prefix=BUDGET --input-file %t/budget.ptx
// RUN: FileCheck %s --check-prefix=BUDGETJSON --input-file %t/budget.json
// BUDGET: .minnctapersm 3
// BUDGETJSON: ctas_per_sm=3
// BUDGETJSON: "varlen": true

// Split-KV: the varlen offsets (24, 25), then o_part, lse_part, counters and S (26-29).
// RUN: tilefuse compile --kernel attention --varlen --split-kv --emit ptx -o %t/split.ptx
// RUN: FileCheck %s --check-prefix=SPLIT --input-file %t/split.ptx
// RUN: FileCheck %s --check-prefix=SPLITJSON --input-file %t/split.json
// SPLIT:     .entry attention(
// SPLIT:       attention_param_29{{$}}
// SPLIT-NEXT:  )
// SPLITJSON: "split_kv": true
// SPLITJSON: pack_gqa=true
// SPLITJSON: "varlen": true
// RUN: tilefuse compile --kernel attention --varlen --split-kv --emit header -o %t/split.h
// RUN: FileCheck %s --check-prefix=SPLITHEADER --input-file %t/split.h
// SPLITHEADER: parameters[24] = &varlen_pointers[0];
// SPLITHEADER: parameters[25] = &varlen_pointers[1];
// SPLITHEADER: parameters[26] = &split_pointers[0];
// SPLITHEADER: parameters[29] = &splits;

// Over a paged cache (chunked prefill): the paged parameters (24-27), then the offsets (28,
// 29); the sidecar says both.
// RUN: tilefuse compile --kernel causal --varlen --paged-kv --emit ptx -o %t/paged.ptx
// RUN: FileCheck %s --check-prefix=PAGED --input-file %t/paged.ptx
// RUN: FileCheck %s --check-prefix=PAGEDJSON --input-file %t/paged.json
// PAGED:     .entry causal(
// PAGED:       causal_param_29{{$}}
// PAGED-NEXT:  )
// PAGEDJSON: "paged_kv": true
// PAGEDJSON: "varlen": true
// RUN: tilefuse compile --kernel causal --varlen --paged-kv --emit header -o %t/pagedvarlen.h
// RUN: FileCheck %s --check-prefix=PAGEDHEADER --input-file %t/pagedvarlen.h
// PAGEDHEADER: Varlen over the paged cache (chunked prefill)
// PAGEDHEADER: return "cu_seqlens_q must be non-NULL and 4-byte aligned";
// PAGEDHEADER: s[0] = s[9] = s[12] = 0;
// PAGEDHEADER: parameters[27] = &paged_sizes[1];
// PAGEDHEADER: parameters[28] = &varlen_pointers[0];
// PAGEDHEADER: parameters[29] = &varlen_pointers[1];

// The AOT header's launcher takes the offsets and the packed tensors' rows.
// RUN: tilefuse compile --kernel attention --varlen --emit header -o %t/varlen.h
// RUN: FileCheck %s --check-prefix=HEADER --input-file %t/varlen.h
// HEADER:      Varlen: the tensors are packed batches
// HEADER:      static inline const char *attention_check(
// HEADER:        const int32_t *cu_seqlens_q, const int32_t *cu_seqlens_k,
// HEADER-NEXT:   int64_t total_q, int64_t total_k) {
// HEADER:        return "cu_seqlens_q and cu_seqlens_k must be non-NULL and 4-byte aligned";
// HEADER:        parameters[24] = &varlen_pointers[0];
// HEADER:        parameters[25] = &varlen_pointers[1];
// RUN: not tilefuse compile --kernel attention --varlen --config ctas_per_sm=9 --emit ptx \
// RUN:   -o %t/x.ptx 2>&1 | FileCheck %s --check-prefix=BADBUDGET
// BADBUDGET: ctas_per_sm must be 1 to 4, got 9
