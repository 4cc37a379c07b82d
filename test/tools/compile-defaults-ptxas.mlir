// REQUIRES: ptxas
// The default kernels, as ptxas assembles them for sm_90a: no local-memory spills, and no
// serialized wgmma pipeline (C7511: ptxas then waits for every wgmma as it is issued, which
// measured 16-35% slower on an H100; docs/perf.md, thirty-second session). The SASS checks of
// scripts/gpu-run.sh sass run on the GPU machine; these run wherever ptxas is installed.
// RUN: rm -rf %t && mkdir -p %t
// RUN: tilefuse compile --kernel attention --head-dim 64 --emit cubin --Xptxas=-v \
// RUN:   -o %t/attention-d64.cubin 2>&1 | FileCheck %s
// RUN: tilefuse compile --kernel attention --head-dim 96 --emit cubin --Xptxas=-v \
// RUN:   -o %t/attention-d96.cubin 2>&1 | FileCheck %s
// RUN: tilefuse compile --kernel attention --head-dim 128 --emit cubin --Xptxas=-v \
// RUN:   -o %t/attention-d128.cubin 2>&1 | FileCheck %s
// RUN: tilefuse compile --kernel attention --head-dim 192 --emit cubin --Xptxas=-v \
// RUN:   -o %t/attention-d192.cubin 2>&1 | FileCheck %s
// RUN: tilefuse compile --kernel attention --head-dim 256 --emit cubin --Xptxas=-v \
// RUN:   -o %t/attention-d256.cubin 2>&1 | FileCheck %s
// RUN: tilefuse compile --kernel causal --head-dim 64 --emit cubin --Xptxas=-v \
// RUN:   -o %t/causal-d64.cubin 2>&1 | FileCheck %s
// RUN: tilefuse compile --kernel causal --head-dim 96 --emit cubin --Xptxas=-v \
// RUN:   -o %t/causal-d96.cubin 2>&1 | FileCheck %s
// RUN: tilefuse compile --kernel causal --head-dim 128 --emit cubin --Xptxas=-v \
// RUN:   -o %t/causal-d128.cubin 2>&1 | FileCheck %s
// RUN: tilefuse compile --kernel causal --head-dim 192 --emit cubin --Xptxas=-v \
// RUN:   -o %t/causal-d192.cubin 2>&1 | FileCheck %s
// RUN: tilefuse compile --kernel causal --head-dim 256 --emit cubin --Xptxas=-v \
// RUN:   -o %t/causal-d256.cubin 2>&1 | FileCheck %s
// RUN: tilefuse compile --kernel attention --seq-len 1024 --emit cubin --Xptxas=-v \
// RUN:   -o %t/attention-d64-short.cubin 2>&1 | FileCheck %s
// RUN: tilefuse compile --kernel attention --head-dim 128 --seq-len 1024 --emit cubin --Xptxas=-v \
// RUN:   -o %t/attention-d128-short.cubin 2>&1 | FileCheck %s
// RUN: tilefuse compile --kernel causal --seq-len 1024 --emit cubin --Xptxas=-v \
// RUN:   -o %t/causal-d64-short.cubin 2>&1 | FileCheck %s
// RUN: tilefuse compile --kernel causal --dtype f16 --emit cubin --Xptxas=-v \
// RUN:   -o %t/causal-f16.cubin 2>&1 | FileCheck %s
// The packed (varlen) d128 full-mask default: the persistent tile list, whose producer keeps
// the loop over the sequences in registers beside two consumer warpgroups.
// RUN: tilefuse compile --kernel attention --head-dim 128 --varlen --emit cubin --Xptxas=-v \
// RUN:   -o %t/attention-d128-varlen.cubin 2>&1 | FileCheck %s
// CHECK-NOT: C7511
// CHECK: 0 bytes spill stores, 0 bytes spill loads
// CHECK-NOT: C7511
