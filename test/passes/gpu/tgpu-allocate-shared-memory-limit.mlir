// RUN: tilefuse-opt %s -tgpu-allocate-shared-memory | FileCheck %s
// RUN: tilefuse-opt %s -verify-diagnostics \
// RUN:   -tgpu-allocate-shared-memory="max-shared-bytes=166912" -o /dev/null

// The chip's limit is an option: a kernel of three 64 KiB stages (196608 bytes) fits an sm_90
// CTA (227 KiB, the default) but not an sm_80 one (163 KiB).

// CHECK: tilefuse.shared_bytes = {big = 196608 : i64}
// expected-error @below {{'func.func' op needs 196608 bytes of shared memory for 1 buffers, over the chip's 166912 (max-shared-bytes)}}
func.func @big(%acc: tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>) {
  %ring = tgpu.alloc : !tgpu.ring<3 x 128x128xf32, #tgpu.shared<chunk_xor>>
  return
}
