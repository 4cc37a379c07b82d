// RUN: tilefuse-opt %s -split-input-file -verify-diagnostics -tgpu-allocate-shared-memory \
// RUN:   | FileCheck %s

// A register budget of N CTAs an SM (tile.config ctas_per_sm) must fit N CTAs' shared memory in
// the SM: the CTA limit (max-shared-bytes, 232448 on sm_90) plus the 1 KiB the driver reserves
// per CTA, 233472. Two CTAs of 128 KiB do not (2 x (131072 + 1024) > 233472): refused, naming
// how many would fit.
module attributes {tile.config = #tile.config<"ctas_per_sm=2">} {
// expected-error @below {{'func.func' op ctas_per_sm=2 asks for 2 CTAs an SM, but 2 x (131072 + 1024) bytes of shared memory exceed the SM's 233472: ask for at most 1, or for smaller tiles}}
func.func @budget(%acc: tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>) {
  %ring = tgpu.alloc : !tgpu.ring<2 x 128x128xf32, #tgpu.shared<chunk_xor>>
  return
}
}

// -----

// Three of 96 KiB do not either; two would.
module attributes {tile.config = #tile.config<"ctas_per_sm=3">} {
// expected-error @below {{ctas_per_sm=3 asks for 3 CTAs an SM, but 3 x (98304 + 1024) bytes of shared memory exceed the SM's 233472: ask for at most 2}}
func.func @three(%acc: tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>) {
  %ring = tgpu.alloc : !tgpu.ring<3 x 128x64xf32, #tgpu.shared<chunk_xor>>
  return
}
}

// -----

// Where they fit (2 x (65536 + 1024) <= 233472) the budget stands.
// CHECK: tilefuse.shared_bytes = {fits = 65536 : i64}
module attributes {tile.config = #tile.config<"ctas_per_sm=2">} {
func.func @fits(%acc: tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>) {
  %ring = tgpu.alloc : !tgpu.ring<1 x 128x128xf32, #tgpu.shared<chunk_xor>>
  return
}
}
