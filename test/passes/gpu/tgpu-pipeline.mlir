// RUN: tilefuse-opt %s -split-input-file -allow-unregistered-dialect -tgpu-pipeline=stages=3 \
// RUN:   | FileCheck %s
// RUN: tilefuse-opt %s -split-input-file -allow-unregistered-dialect -tgpu-pipeline \
// RUN:   | FileCheck %s --check-prefix=TWO
// RUN: not tilefuse-opt %s -split-input-file -allow-unregistered-dialect -tgpu-pipeline=stages=1 \
// RUN:   2>&1 | FileCheck %s --check-prefix=ONE

// tgpu-pipeline: the key block a loop carries in a ring stage (tile-to-tgpu's form: copied one
// iteration ahead, its group's token carried beside it) is copied stages - 1 iterations ahead.
// "read" stands for the dot that reads the block after its wait.

!view = memref<?x?x?x64xbf16>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>
!ring = !tgpu.ring<2 x 64x64xbf16, #tgpu.shared<canonical_128b>>

// Three stages: the ring grows to three buffers (block b in stage b % 3); before the loop the
// copy of block lb (as before) and of block lb + 1 (the loop's chain cloned at iv = lb); the
// loop carries both pairs, reads the oldest, copies block iv + 2 (the chain at iv + 1), and
// shifts the pairs.
// CHECK-LABEL: func.func @keys
// CHECK:         %[[RING:.+]] = tgpu.alloc : !tgpu.ring<3 x 64x64xbf16, #tgpu.shared<canonical_128b>>
// CHECK:         %[[S0:.+]] = tgpu.stage %[[RING]]
// CHECK:         %[[C0:.+]] = tgpu.async_copy %{{.+}} into %[[S0]]
// CHECK:         %[[G0:.+]] = nvgpu.device_async_create_group %[[C0]]
// CHECK:         %[[FIRST:.+]] = arith.addi %[[LB:[^ ]+]], %{{.+}} : index
// CHECK:         %[[NEXT:.+]] = arith.addi %[[FIRST]], %c1
// CHECK:         %[[BLOCK1:.+]] = arith.remui %{{.+}}, %{{.+}} : index
// CHECK:         %[[S1:.+]] = tgpu.stage %[[RING]][%[[BLOCK1]]]
// CHECK:         %[[C1:.+]] = tgpu.async_copy %{{.+}} into %[[S1]]
// CHECK:         %[[G1:.+]] = nvgpu.device_async_create_group %[[C1]]
// CHECK:         scf.for %[[IV:.+]] = %[[LB]] to %{{.+}} step %{{.+}} iter_args(%[[B0:.+]] = %[[S0]], %[[T0:.+]] = %[[G0]], %[[B1:.+]] = %[[S1]], %[[T1:.+]] = %[[G1]])
// CHECK:           %[[AHEAD:.+]] = arith.addi %[[IV]], %{{.+}} : index
// CHECK:           %[[N2:.+]] = arith.addi %[[AHEAD]], %c1
// CHECK:           %[[S2:.+]] = tgpu.stage %[[RING]]
// CHECK:           %[[C2:.+]] = tgpu.async_copy %{{.+}} into %[[S2]]
// CHECK:           %[[G2:.+]] = nvgpu.device_async_create_group %[[C2]]
// CHECK:           nvgpu.device_async_wait %[[T0]]
// CHECK:           "read"(%[[B0]])
// CHECK:           scf.yield %[[B1]], %[[T1]], %[[S2]], %[[G2]]
// CHECK-NOT:     tgpu.async_copy

// Two stages (the default) leave tile-to-tgpu's form.
// TWO-LABEL: func.func @keys
// TWO:         tgpu.alloc : !tgpu.ring<2 x 64x64xbf16, #tgpu.shared<canonical_128b>>
// TWO:         scf.for {{.+}} iter_args(%{{.+}} = %{{.+}}, %{{.+}} = %{{.+}}) -> (!tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>, !nvgpu.device.async.token)

// ONE: error: tgpu-pipeline: stages must be 2 or more, not 1
func.func @keys(%k: !view, %b: index, %h: index, %n: index, %lb: index, %ub: index) {
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %ring = tgpu.alloc : !ring
  %rows = arith.constant 64 : index
  %stages = arith.constant 2 : index
  %n0 = arith.muli %lb, %c64 : index
  %blk0 = arith.divui %n0, %rows : index
  %st0 = arith.remui %blk0, %stages : index
  %s0 = tgpu.stage %ring[%st0] : !ring
  %c0 = tgpu.async_copy %k[%b, %h, %n0] bound %n into %s0 : !view, !buf
  %g0 = nvgpu.device_async_create_group %c0
  %r:2 = scf.for %i = %lb to %ub step %c1 iter_args(%kb = %s0, %kg = %g0)
      -> (!buf, !nvgpu.device.async.token) {
    %next = arith.addi %i, %c1 : index
    %n1 = arith.muli %next, %c64 : index
    %blk1 = arith.divui %n1, %rows : index
    %st1 = arith.remui %blk1, %stages : index
    %s1 = tgpu.stage %ring[%st1] : !ring
    %c1copy = tgpu.async_copy %k[%b, %h, %n1] bound %n into %s1 : !view, !buf
    %g1 = nvgpu.device_async_create_group %c1copy
    nvgpu.device_async_wait %kg
    "read"(%kb) : (!buf) -> ()
    scf.yield %s1, %g1 : !buf, !nvgpu.device.async.token
  }
  return
}

// -----

// prefetch_values: the key and the value block carried, each in a ring of its own. Both rings
// grow to three stages; before the loop block lb + 1's key and value copies follow block lb's
// in the same order (key first), and the loop copies block iv + 2's key then value, so the
// groups in flight at the top of each iteration are K(j), V(j), K(j + 1), V(j + 1).
!view = memref<?x?x?x64xbf16>
!buf = !tgpu.buffer<64x64xbf16, #tgpu.shared<canonical_128b>>
!ring = !tgpu.ring<2 x 64x64xbf16, #tgpu.shared<canonical_128b>>

// CHECK-LABEL: func.func @keys_and_values
// CHECK:         %[[KR:.+]] = tgpu.alloc : !tgpu.ring<3 x 64x64xbf16, #tgpu.shared<canonical_128b>>
// CHECK:         %[[VR:.+]] = tgpu.alloc : !tgpu.ring<3 x 64x64xbf16, #tgpu.shared<canonical_128b>>
// CHECK:         %[[K0:.+]] = tgpu.async_copy %{{.+}} into %[[KS0:[^ ]+]]
// CHECK:         %[[KG0:.+]] = nvgpu.device_async_create_group %[[K0]]
// CHECK:         %[[V0:.+]] = tgpu.async_copy %{{.+}} into %[[VS0:[^ ]+]]
// CHECK:         %[[VG0:.+]] = nvgpu.device_async_create_group %[[V0]]
// CHECK:         %[[KS1:.+]] = tgpu.stage %[[KR]]
// CHECK:         %[[K1:.+]] = tgpu.async_copy %[[KV:[^\[]+]][{{.+}}] bound %{{.+}} into %[[KS1]]
// CHECK:         %[[KG1:.+]] = nvgpu.device_async_create_group %[[K1]]
// CHECK:         %[[VS1:.+]] = tgpu.stage %[[VR]]
// CHECK:         %[[V1:.+]] = tgpu.async_copy %{{.+}} into %[[VS1]]
// CHECK:         %[[VG1:.+]] = nvgpu.device_async_create_group %[[V1]]
// CHECK:         scf.for %{{.+}} iter_args(%[[KB0:.+]] = %[[KS0]], %[[KT0:.+]] = %[[KG0]], %[[VB0:.+]] = %[[VS0]], %[[VT0:.+]] = %[[VG0]], %[[KB1:.+]] = %[[KS1]], %[[KT1:.+]] = %[[KG1]], %[[VB1:.+]] = %[[VS1]], %[[VT1:.+]] = %[[VG1]])
// CHECK:           %[[KS2:.+]] = tgpu.stage %[[KR]]
// CHECK:           %[[K2:.+]] = tgpu.async_copy %{{.+}} into %[[KS2]]
// CHECK:           %[[KG2:.+]] = nvgpu.device_async_create_group %[[K2]]
// CHECK:           %[[VS2:.+]] = tgpu.stage %[[VR]]
// CHECK:           %[[V2:.+]] = tgpu.async_copy %{{.+}} into %[[VS2]]
// CHECK:           %[[VG2:.+]] = nvgpu.device_async_create_group %[[V2]]
// CHECK:           nvgpu.device_async_wait %[[KT0]]
// CHECK:           "scores"(%[[KB0]])
// CHECK:           nvgpu.device_async_wait %[[VT0]]
// CHECK:           "values"(%[[VB0]])
// CHECK:           scf.yield %[[KB1]], %[[KT1]], %[[VB1]], %[[VT1]], %[[KS2]], %[[KG2]], %[[VS2]], %[[VG2]]
// CHECK-NOT:     tgpu.async_copy

// TWO-LABEL: func.func @keys_and_values
// TWO:         scf.for {{.+}} iter_args(%{{.+}} = %{{.+}}, %{{.+}} = %{{.+}}, %{{.+}} = %{{.+}}, %{{.+}} = %{{.+}}) ->
func.func @keys_and_values(%k: !view, %v: !view, %b: index, %h: index, %n: index, %lb: index,
                           %ub: index) {
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %kring = tgpu.alloc : !ring
  %vring = tgpu.alloc : !ring
  %rows = arith.constant 64 : index
  %stages = arith.constant 2 : index
  %n0 = arith.muli %lb, %c64 : index
  %blk0 = arith.divui %n0, %rows : index
  %st0 = arith.remui %blk0, %stages : index
  %ks0 = tgpu.stage %kring[%st0] : !ring
  %k0 = tgpu.async_copy %k[%b, %h, %n0] bound %n into %ks0 : !view, !buf
  %kg0 = nvgpu.device_async_create_group %k0
  %vs0 = tgpu.stage %vring[%st0] : !ring
  %v0 = tgpu.async_copy %v[%b, %h, %n0] bound %n into %vs0 : !view, !buf
  %vg0 = nvgpu.device_async_create_group %v0
  %r:4 = scf.for %i = %lb to %ub step %c1 iter_args(%kb = %ks0, %kg = %kg0, %vb = %vs0, %vg = %vg0)
      -> (!buf, !nvgpu.device.async.token, !buf, !nvgpu.device.async.token) {
    %next = arith.addi %i, %c1 : index
    %n1 = arith.muli %next, %c64 : index
    %blk1 = arith.divui %n1, %rows : index
    %st1 = arith.remui %blk1, %stages : index
    %ks1 = tgpu.stage %kring[%st1] : !ring
    %k1 = tgpu.async_copy %k[%b, %h, %n1] bound %n into %ks1 : !view, !buf
    %kg1 = nvgpu.device_async_create_group %k1
    %vs1 = tgpu.stage %vring[%st1] : !ring
    %v1 = tgpu.async_copy %v[%b, %h, %n1] bound %n into %vs1 : !view, !buf
    %vg1 = nvgpu.device_async_create_group %v1
    nvgpu.device_async_wait %kg
    "scores"(%kb) : (!buf) -> ()
    nvgpu.device_async_wait %vg
    "values"(%vb) : (!buf) -> ()
    scf.yield %ks1, %kg1, %vs1, %vg1 : !buf, !nvgpu.device.async.token, !buf, !nvgpu.device.async.token
  }
  return
}
