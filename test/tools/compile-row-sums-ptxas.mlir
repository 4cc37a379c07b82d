// REQUIRES: ptxas
// The kernels with P's row sums on the tensor cores (row_sum_mma=true), as ptxas assembles them:
// no spills, and no serialized wgmma pipeline. The first form (thirty-second session) left two
// of the four sum registers a thread unread, and ptxas then serialized every wgmma (C7511;
// 16-35% slower on an H100); tgpu.split_row_sums reads all four.
// RUN: rm -rf %t && mkdir -p %t
// RUN: tilefuse compile --kernel attention --head-dim 64 --config row_sum_mma=true \
// RUN:   --emit cubin --Xptxas=-v -o %t/a64.cubin 2>&1 | FileCheck %s
// RUN: tilefuse compile --kernel attention --head-dim 128 --config row_sum_mma=true \
// RUN:   --emit cubin --Xptxas=-v -o %t/a128.cubin 2>&1 | FileCheck %s
// RUN: tilefuse compile --kernel causal --head-dim 192 --config row_sum_mma=true \
// RUN:   --emit cubin --Xptxas=-v -o %t/c192.cubin 2>&1 | FileCheck %s
// CHECK-NOT: C7511
// CHECK: 0 bytes spill stores, 0 bytes spill loads
// CHECK-NOT: C7511
