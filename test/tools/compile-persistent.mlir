// The persistent kernel forms through the whole GPU pipeline to PTX, each deal of the tiles
// (paired by default under causal-like masks from head dim 128, serpentine, head by head) and
// overlap_tiles (a tile's last P·V and epilogue in the next tile) on the bundled kernels whose
// tiles differ (causal, a sliding window with rows past its band) and the full mask. The GPU
// tests run them (scripts/gpu-run.sh tests-persist, tests-head-dims); this catches a pass that
// stops accepting what an earlier one writes (tgpu-overlap-tiles refused the Q release's wait
// once, and only the GPU machine's build noticed).

// RUN: rm -rf %t && mkdir -p %t
// RUN: tilefuse compile --kernel sliding_window --head-dim 256 --emit ptx -o %t/window256.ptx
// RUN: FileCheck %s --check-prefix=PAIRED --input-file %t/window256.json
// RUN: FileCheck %s --check-prefix=PTX --input-file %t/window256.ptx
// RUN: tilefuse compile --kernel causal --head-dim 192 --emit ptx -o %t/causal192.ptx
// RUN: FileCheck %s --check-prefix=PAIRED --input-file %t/causal192.json
// RUN: tilefuse compile --kernel causal --head-dim 128 --config row_order=descending,persistent=true --emit ptx -o %t/serpentine.ptx
// RUN: FileCheck %s --check-prefix=SERPENTINE --input-file %t/serpentine.json
// RUN: tilefuse compile --kernel attention --head-dim 128 --emit ptx -o %t/attention128.ptx
// RUN: FileCheck %s --check-prefix=HEADMAJOR --input-file %t/attention128.json

// RUN: tilefuse compile --kernel causal --head-dim 128 --config overlap_tiles=true,block_n=128 --emit ptx -o %t/ot-causal128.ptx
// RUN: FileCheck %s --check-prefix=OVERLAP --input-file %t/ot-causal128.json
// RUN: FileCheck %s --check-prefix=PTX --input-file %t/ot-causal128.ptx
// RUN: tilefuse compile --kernel sliding_window --head-dim 128 --config overlap_tiles=true,block_n=128 --emit ptx -o %t/ot-window128.ptx
// RUN: FileCheck %s --check-prefix=OVERLAP --input-file %t/ot-window128.json
// RUN: tilefuse compile --kernel attention --head-dim 64 --config overlap_tiles=true,block_n=128,warp_specialize=true --emit ptx -o %t/ot-attention64.ptx
// RUN: FileCheck %s --check-prefix=OVERLAP --input-file %t/ot-attention64.json

// PAIRED: "persistent": true
// PAIRED: "tile_config": "{{.*}}warp_specialize=true{{.*}}persistent=true,row_order=paired{{(,overlap_tiles=true)?}}"
// SERPENTINE: "tile_config": "{{.*}}persistent=true,row_order=descending,overlap_tiles=true"
// HEADMAJOR: "persistent": true
// HEADMAJOR-NOT: row_order
// OVERLAP: "tile_config": "{{.*}}persistent=true{{.*}}overlap_tiles=true"

// PTX: .target sm_90a
// PTX: .entry
// PTX: mbarrier.try_wait.parity
// PTX: mbarrier.arrive
