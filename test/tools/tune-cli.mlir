// tilefuse tune and tilefuse compile --tuned, on a machine without a GPU: the errors say why,
// --config's whole TileConfig reaches the sidecar, and the help lists the tune options.
// RUN: rm -rf %t && mkdir -p %t

// RUN: tilefuse tune --help | FileCheck %s --check-prefix=HELP
// HELP: tilefuse tune options:
// HELP-DAG: --seq=<long>
// HELP-DAG: --emit-dir=<string>
// HELP-DAG: --budget=<number>
// RUN: tilefuse compile --help | FileCheck %s --check-prefix=COMPILE-HELP
// COMPILE-HELP-DAG: --tuned
// COMPILE-HELP-DAG: --tuned-gpu=<string>

// RUN: env TILEFUSE_CACHE_DIR=%t/cache not tilefuse tune --kernel attention --arch sm_90a 2>&1 \
// RUN:   | FileCheck %s --check-prefix=NOGPU
// NOGPU: error: {{no driver|no GPU}}

// RUN: env TILEFUSE_CACHE_DIR=%t/cache not tilefuse compile --kernel causal --head-dim 128 \
// RUN:   --tuned --tuned-gpu "NVIDIA H200|sms=132|cc=9.0|driver=13000" --seq 5000 -o %t/x.ptx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=NOENTRY
// NOENTRY: error: --tuned: the tuning database ({{.*}}cache/tuning) has no entry for kernels/causal.mlir bf16 d128, seq bucket 8192, sm_90a, GPU NVIDIA H200|sms=132|cc=9.0|driver=13000, tilefuse {{.*}}; run `tilefuse tune` there first

// RUN: not tilefuse compile --kernel causal --tuned --tuned-gpu "H200" -o %t/x.ptx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BADGPU
// BADGPU: error: --tuned: GPU 'H200': needs four fields

// RUN: tilefuse compile --kernel causal --config Br=64,Bc=64,mma=sync,q=shared,copy_issue=at-barrier \
// RUN:   --emit ptx -o %t/shared.ptx
// RUN: FileCheck %s --check-prefix=CONFIG --input-file %t/shared.json
// (mma.sync at D = 64 takes two m16 tiles per warp unless told otherwise.)
// CONFIG: "tile_config": "Br=64,Bc=64,rows_per_warp=32,mma=sync,q=shared,copy_issue=at-barrier,stages=2,pack_gqa=false"

// A three-stage key ring: tgpu-pipeline reads stages from the module's configuration (the
// one-warpgroup kernel: at head dim 128 the default is warp-specialized).
// RUN: tilefuse compile --kernel attention --head-dim 128 --config stages=3,warp_specialize=false --emit ptx -o %t/ring3.ptx
// RUN: FileCheck %s --check-prefix=RING3 --input-file %t/ring3.json
// RING3: "shared_bytes": 65536
// RING3: "tile_config": "Br=64,Bc=64,rows_per_warp=16,mma=wgmma,q=registers,copy_issue=eager,stages=3,pack_gqa=false,warp_specialize=false"
// The warp-specialized default's rings: keys and values, three stages each, and their barriers
// (causal: Bc = 128 with Q in shared memory, one stage of its own; under a full mask d128 takes
// Bc = 176, whose three stages would not fit, below).
// RUN: tilefuse compile --kernel causal --head-dim 128 --config stages=3 --emit ptx -o %t/ws3.ptx
// RUN: FileCheck %s --check-prefix=WS3 --input-file %t/ws3.json
// WS3: "kv_tma": true
// WS3: "shared_bytes": 229488
// WS3: "threads": 384
// RUN: not tilefuse compile --kernel attention --head-dim 128 --config stages=3 --emit ptx \
// RUN:   -o %t/ws3-full.ptx 2>&1 | FileCheck %s --check-prefix=WS3-FULL
// WS3-FULL: kernels/attention.mlir:{{[0-9]+}}:{{[0-9]+}}: error: {{.*}} needs {{[0-9]+}} bytes of shared memory {{.*}} over the chip's 232448

// RUN: not tilefuse compile --kernel causal --config stages=6 -o %t/x 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BADSTAGES
// BADSTAGES: error: invalid kernel configuration: stages must be 2, 3 or 4, got 6

// RUN: not tilefuse compile --kernel causal --config mma=tensor -o %t/x 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BADMMA
// BADMMA: error: --config: mma must be sync or wgmma, not 'tensor'
