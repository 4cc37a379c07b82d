// RUN: tilefuse-opt %s -split-input-file -allow-unregistered-dialect -verify-diagnostics \
// RUN:   -tgpu-allocate-shared-memory | FileCheck %s

// tgpu-allocate-shared-memory: every tgpu.alloc gets a byte offset in the kernel's dynamic
// shared memory (aligned for its swizzle; bytes shared by buffers whose lifetimes do not
// overlap), and the module records each kernel's shared bytes and threads. "use" stands for
// any op that reads or writes a buffer in place.

!acc = tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>

// Three buffers live at once, placed largest first: the 2560-byte unswizzled tile at 0; the
// 128-byte-swizzled tile on the next 1024-byte boundary (3072, not 2560); the 256-byte tile
// in the gap at 2560. Threads: 4 warps of the accumulator layout.
// CHECK:       module attributes {tilefuse.shared_bytes = {alignment = 4096 : i64},
// CHECK-SAME:    tilefuse.threads = {alignment = 128 : i64}}
// CHECK-LABEL: func.func @alignment
// CHECK:         tgpu.alloc {offset = 0 : i64} : !tgpu.buffer<16x40xf32, #tgpu.shared<none>>
// CHECK:         tgpu.alloc {offset = 3072 : i64} : !tgpu.buffer<8x64xbf16, #tgpu.shared<canonical_128b>>
// CHECK:         tgpu.alloc {offset = 2560 : i64} : !tgpu.buffer<8x8xf32, #tgpu.shared<none>>
func.func @alignment(%acc: !acc) {
  %a = tgpu.alloc : !tgpu.buffer<16x40xf32, #tgpu.shared<none>>
  %b = tgpu.alloc : !tgpu.buffer<8x64xbf16, #tgpu.shared<canonical_128b>>
  %c = tgpu.alloc : !tgpu.buffer<8x8xf32, #tgpu.shared<none>>
  "use"(%a, %b, %c) : (!tgpu.buffer<16x40xf32, #tgpu.shared<none>>,
                       !tgpu.buffer<8x64xbf16, #tgpu.shared<canonical_128b>>,
                       !tgpu.buffer<8x8xf32, #tgpu.shared<none>>) -> ()
  return
}

// -----

!acc = tensor<128x64xf32, #tgpu.mma_acc<warps = 8, rows_per_warp = 16>>
!q = !tgpu.buffer<128x128xbf16, #tgpu.shared<chunk_xor>>
!kv = !tgpu.ring<2 x 64x128xbf16, #tgpu.shared<canonical_128b>>
!out = !tgpu.buffer<128x128xbf16, #tgpu.shared<canonical_128b>>

// Reuse: Q's tile is dead once its fragments are read, before the loop, so the key/value ring
// (two 16 KiB stages) takes its bytes; the ring is used inside the loop, so it lives over the
// whole loop, and is dead after it, so the output staging tile takes the same bytes again.
// CHECK:       tilefuse.shared_bytes = {reuse = 32768 : i64}
// CHECK-SAME:  tilefuse.threads = {reuse = 256 : i64}
// CHECK-LABEL: func.func @reuse
// CHECK:         tgpu.alloc {offset = 0 : i64} : !tgpu.buffer<128x128xbf16, #tgpu.shared<chunk_xor>>
// CHECK:         tgpu.alloc {offset = 0 : i64} : !tgpu.ring<2 x 64x128xbf16, #tgpu.shared<canonical_128b>>
// CHECK:         scf.for
// CHECK:         tgpu.alloc {offset = 0 : i64} : !tgpu.buffer<128x128xbf16, #tgpu.shared<canonical_128b>>
func.func @reuse(%acc: !acc, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %q = tgpu.alloc : !q
  "use"(%q) : (!q) -> ()
  %ring = tgpu.alloc : !kv
  scf.for %i = %c0 to %n step %c1 {
    %s = arith.remui %i, %c2 : index
    %buf = tgpu.stage %ring[%s] : !kv
    "use"(%buf) : (!tgpu.buffer<64x128xbf16, #tgpu.shared<canonical_128b>>) -> ()
  }
  %out = tgpu.alloc : !out
  "use"(%out) : (!out) -> ()
  return
}

// -----

!acc = tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>
!small = !tgpu.buffer<8x64xbf16, #tgpu.shared<chunk_xor>>
!big = !tgpu.buffer<64x64xbf16, #tgpu.shared<chunk_xor>>

// A buffer used at the top of a loop body stays live over the whole loop (the next iteration
// reads it again), so a buffer allocated later in the body may not take its bytes. Two
// buffers allocated one after the other in the body, the first dead before the second is
// allocated, share.
// CHECK:       tilefuse.shared_bytes = {loop = 9216 : i64}
// CHECK-LABEL: func.func @loop
// CHECK:         tgpu.alloc {offset = 8192 : i64} : !tgpu.buffer<8x64xbf16
// CHECK:         scf.for
// CHECK:           tgpu.alloc {offset = 0 : i64} : !tgpu.buffer<64x64xbf16
// CHECK:           tgpu.alloc {offset = 0 : i64} : !tgpu.buffer<64x64xbf16
func.func @loop(%acc: !acc, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %outer = tgpu.alloc : !small
  scf.for %i = %c0 to %n step %c1 {
    "use"(%outer) : (!small) -> ()
    %x = tgpu.alloc : !big
    "use"(%x) : (!big) -> ()
    %y = tgpu.alloc : !big
    "use"(%y) : (!big) -> ()
  }
  return
}

// -----

!stage = !tgpu.buffer<8x24xf32, #tgpu.shared<none>>
!ring = !tgpu.ring<3 x 8x24xf32, #tgpu.shared<none>>
!sw = !tgpu.ring<2 x 8x64xbf16, #tgpu.shared<canonical_128b>>

// Rings take stages x stride bytes (3 x 768). A stage selected from a ring keeps the ring
// alive: %other, allocated after the ring's last direct use but before the stage's use,
// overlaps it. Both are dead at the tgpu.warp_specialize, whose partitions run at once:
// their buffers share with the dead ones but not with each other, and the kernel's threads
// are the partitions' (4 + 8 warps).
// CHECK:       tilefuse.shared_bytes = {rings = 3328 : i64}
// CHECK-SAME:  tilefuse.threads = {rings = 384 : i64}
// CHECK-LABEL: func.func @rings
// CHECK:         tgpu.alloc {offset = 0 : i64} : !tgpu.ring<3 x 8x24xf32
// CHECK:         tgpu.alloc {offset = 2304 : i64} : !tgpu.buffer<8x64xbf16, #tgpu.shared<none>>
// CHECK:         tgpu.warp_specialize
// CHECK:           tgpu.alloc {offset = 0 : i64} : !tgpu.ring<2 x 8x64xbf16
// CHECK:           tgpu.alloc {offset = 2048 : i64} : !tgpu.buffer<8x64xbf16, #tgpu.shared<none>>
func.func @rings(%i: index) {
  %ring = tgpu.alloc : !ring
  %s = tgpu.stage %ring[%i] : !ring
  %other = tgpu.alloc : !tgpu.buffer<8x64xbf16, #tgpu.shared<none>>
  "use"(%other) : (!tgpu.buffer<8x64xbf16, #tgpu.shared<none>>) -> ()
  "use"(%s) : (!stage) -> ()
  tgpu.warp_specialize
    partition warps 4 registers 24 {
      %p = tgpu.alloc : !sw
      "use"(%p) : (!sw) -> ()
    }
    partition warps 8 registers 240 {
      %c = tgpu.alloc : !tgpu.buffer<8x64xbf16, #tgpu.shared<none>>
      "use"(%c) : (!tgpu.buffer<8x64xbf16, #tgpu.shared<none>>) -> ()
    }
  return
}

// -----

// A kernel without buffers needs no shared memory.
// CHECK:       tilefuse.shared_bytes = {empty = 0 : i64}
// CHECK-SAME:  tilefuse.threads = {empty = 64 : i64}
func.func @empty(%acc: tensor<32xf32, #tgpu.acc_rows<#tgpu.mma_acc<warps = 2, rows_per_warp = 16>>>) {
  return
}

// -----

!buf = !tgpu.buffer<8x64xbf16, #tgpu.shared<none>>

func.func @escapes(%c: i1, %acc: tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>) {
  %a = tgpu.alloc : !buf
  %b = tgpu.alloc : !buf
  // expected-error @below {{'arith.select' op takes shared buffer #1 beyond what tgpu-allocate-shared-memory follows}}
  %s = arith.select %c, %a, %b : !buf
  "use"(%s) : (!buf) -> ()
  return
}

// -----

!buf = !tgpu.buffer<8x64xbf16, #tgpu.shared<none>>

// expected-error @below {{'func.func' op has no register layout and no tgpu.warp_specialize: its thread count is unknown}}
func.func @no_threads() {
  %a = tgpu.alloc : !buf
  "use"(%a) : (!buf) -> ()
  return
}

// -----

func.func @threads_disagree(
    // expected-note @below {{the first block laid out for 128 threads}}
    %a: tensor<64x64xf32, #tgpu.mma_acc<warps = 4, rows_per_warp = 16>>,
    // expected-error @below {{a block laid out for 256 threads}}
    %b: tensor<128x64xf32, #tgpu.mma_acc<warps = 8, rows_per_warp = 16>>) {
  return
}
