// row_sum_mma=true (tgpu-row-sum-on-tensor-cores, on request only): the kernel fills the ones
// once before its grid (every thread its words, then the async-proxy fence), each k-step of P·V
// is an m64n128k16 and an m64n8k16 of the same A registers (the sums, B K-major: transpose 0),
// and the epilogue reads all four copies of a thread's two row sums. Not at D = 256, whose
// accumulator has no room for 8 more columns (m64nN, N <= 256), nor without warp roles.
// RUN: rm -rf %t && mkdir -p %t
// RUN: tilefuse compile --kernel attention --head-dim 128 --seq-len 4096 \
// RUN:   --config row_sum_mma=true --emit ptx -o %t/d128.ptx
// RUN: FileCheck %s --input-file %t/d128.ptx
// RUN: FileCheck %s --check-prefix=CONFIG --input-file %t/d128.json
// RUN: tilefuse compile --kernel attention --head-dim 256 --config row_sum_mma=true --emit ptx \
// RUN:   -o %t/d256.ptx
// RUN: FileCheck %s --check-prefix=D256 --input-file %t/d256.ptx
// RUN: not tilefuse compile --kernel attention --head-dim 128 \
// RUN:   --config row_sum_mma=true,warp_specialize=false --emit ptx -o %t/x.ptx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=REFUSED

// CHECK:       FILL_[[ID:[0-9]+]]:
// CHECK:       st.shared.b32 [%fill_a], 1065369472;
// CHECK:       bra FILL_[[ID]];
// CHECK:       fence.proxy.async.shared::cta;
// CHECK:       wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.+}}, p, 1, 1, 1;
// CHECK-NEXT:  }
// CHECK:       wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}}, {{.+}}, p, 1, 1, 0;
// CHECK:       max.f32
// CHECK:       max.f32
// CONFIG: "tile_config": "{{.*}}warp_specialize=true{{.*}},row_sum_mma=true{{(,key_tail=64)?}}"
// D256-NOT: m64n8k16
// D256-NOT: FILL_
// REFUSED: row_sum_mma=true needs warp_specialize=true
