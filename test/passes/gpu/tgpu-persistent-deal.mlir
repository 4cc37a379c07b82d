// REQUIRES: mlir-runner
// The deals of tgpu-persistent, executed on the CPU: the function runs a grid of B x H x R
// tiles whose body counts its visits of (batch, head, row block), through the pass, then
// checks that every tile ran exactly once and prints the fewest and the most visits ("1, 1")
// and the most key blocks one program ran under a causal mask (row block r of the body costs
// R - r: tile-order-row-blocks has reversed it). gpu.grid_dim, the launch's program count, has
// no CPU lowering, so the RUN lines put a constant in its place, and the body's program
// (gpu.block_id x, the persistent forall's %arg0 in this function without arguments) that
// forall's index; the forall then runs its programs one after another.
//
// DEFINE: %{order} = paired
// DEFINE: %{grid} = -e s/DEAL_B/2/ -e s/DEAL_H/3/ -e s/DEAL_R/5/
// DEFINE: %{programs} = 7
// DEFINE: %{deal} = sed %{grid} %s \
// DEFINE:   | tilefuse-opt -tgpu-persistent="force=true row-order=%{order}" \
// DEFINE:   | sed -e 's/gpu.grid_dim  *x/arith.constant %{programs} : index/' \
// DEFINE:         -e 's/gpu.block_id  *x/arith.maxui %arg0, %arg0 : index/' \
// DEFINE:   | tilefuse-opt --scf-forall-to-for --convert-scf-to-cf --expand-strided-metadata \
// DEFINE:       --finalize-memref-to-llvm --convert-arith-to-llvm --convert-index-to-llvm \
// DEFINE:       --convert-cf-to-llvm --convert-func-to-llvm --reconcile-unrealized-casts \
// DEFINE:   | mlir-runner -e deal -entry-point-result=void -shared-libs=%mlir_c_runner_utils
//
// 2 x 3 pairs of 5 row blocks (R odd, 30 tiles, 15 twos): with 7 programs the twos go 3, 2, 2,
// ..., each two R + 1 = 6 key blocks, so the most is 18; with 1 every tile; with 64 a two each.
// RUN: %{deal} | FileCheck %s --check-prefix=PAIRED-ODD-7
// PAIRED-ODD-7: 1, 1, 18
// REDEFINE: %{programs} = 1
// RUN: %{deal} | FileCheck %s --check-prefix=ALL
// ALL: 1, 1, 90
// REDEFINE: %{programs} = 64
// RUN: %{deal} | FileCheck %s --check-prefix=PAIRED-ODD-64
// PAIRED-ODD-64: 1, 1, 6
//
// 1 x 3 pairs of 5 (15 tiles, the last two a single): 4 programs take twos 2, 2, 2, 2 (the
// fourth's second two the single, 5 key blocks: 6 + 5 = 11); at most 12.
// REDEFINE: %{grid} = -e s/DEAL_B/1/ -e s/DEAL_H/3/ -e s/DEAL_R/5/
// REDEFINE: %{programs} = 4
// RUN: %{deal} | FileCheck %s --check-prefix=PAIRED-SINGLE
// PAIRED-SINGLE: 1, 1, 12
//
// 3 x 2 pairs of 8 (R even, 48 tiles): 5 programs, 24 twos of 9 key blocks, 5 twos the most.
// REDEFINE: %{grid} = -e s/DEAL_B/3/ -e s/DEAL_H/2/ -e s/DEAL_R/8/
// REDEFINE: %{programs} = 5
// RUN: %{deal} | FileCheck %s --check-prefix=PAIRED-EVEN
// PAIRED-EVEN: 1, 1, 45
//
// The other orders' deals over the same grids, every tile once.
// REDEFINE: %{order} = descending
// RUN: %{deal} | FileCheck %s --check-prefix=ONCE
// REDEFINE: %{order} = ascending
// RUN: %{deal} | FileCheck %s --check-prefix=ONCE
// REDEFINE: %{grid} = -e s/DEAL_B/2/ -e s/DEAL_H/3/ -e s/DEAL_R/5/
// REDEFINE: %{programs} = 7
// RUN: %{deal} | FileCheck %s --check-prefix=ONCE
// REDEFINE: %{order} = descending
// RUN: %{deal} | FileCheck %s --check-prefix=ONCE
// ONCE: 1, 1, {{[0-9]+}}

// The runner's printers: external, so tgpu-persistent leaves them alone; the deal function is
// all inline for the same reason (the pass takes every defined function for a kernel).
func.func private @printI64(i64)
func.func private @printComma()
func.func private @printNewline()

// B x H pairs of R row blocks (the RUN lines substitute DEAL_B, DEAL_H and DEAL_R).
func.func @deal() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %B = arith.constant DEAL_B : index
  %H = arith.constant DEAL_H : index
  %R = arith.constant DEAL_R : index
  %zero = arith.constant 0 : i64
  %one = arith.constant 1 : i64
  %big = arith.constant 1000000 : i64
  %visits = memref.alloc(%B, %H, %R) : memref<?x?x?xi64>
  %work = memref.alloc() : memref<64xi64>
  scf.for %b = %c0 to %B step %c1 {
    scf.for %h = %c0 to %H step %c1 {
      scf.for %r = %c0 to %R step %c1 {
        memref.store %zero, %visits[%b, %h, %r] : memref<?x?x?xi64>
      }
    }
  }
  scf.for %p = %c0 to %c64 step %c1 {
    memref.store %zero, %work[%p] : memref<64xi64>
  }
  // The grid: a visit of tile (b, h, r) by program p, whose row block r has R - r key blocks.
  scf.forall (%b, %h, %r) in (%B, %H, %R) {
    %p = gpu.block_id x
    %v = memref.load %visits[%b, %h, %r] : memref<?x?x?xi64>
    %v1 = arith.addi %v, %one : i64
    memref.store %v1, %visits[%b, %h, %r] : memref<?x?x?xi64>
    %blocks = arith.subi %R, %r : index
    %blocks64 = arith.index_cast %blocks : index to i64
    %w = memref.load %work[%p] : memref<64xi64>
    %w1 = arith.addi %w, %blocks64 : i64
    memref.store %w1, %work[%p] : memref<64xi64>
  } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
  // "fewest visits, most visits, most key blocks of a program"
  %fewest, %most = scf.for %b = %c0 to %B step %c1 iter_args(%lo0 = %big, %hi0 = %zero) -> (i64, i64) {
    %lo1, %hi1 = scf.for %h = %c0 to %H step %c1 iter_args(%lo2 = %lo0, %hi2 = %hi0) -> (i64, i64) {
      %lo3, %hi3 = scf.for %r = %c0 to %R step %c1 iter_args(%lo4 = %lo2, %hi4 = %hi2) -> (i64, i64) {
        %v = memref.load %visits[%b, %h, %r] : memref<?x?x?xi64>
        %lo5 = arith.minsi %lo4, %v : i64
        %hi5 = arith.maxsi %hi4, %v : i64
        scf.yield %lo5, %hi5 : i64, i64
      }
      scf.yield %lo3, %hi3 : i64, i64
    }
    scf.yield %lo1, %hi1 : i64, i64
  }
  %heaviest = scf.for %p = %c0 to %c64 step %c1 iter_args(%m = %zero) -> (i64) {
    %w = memref.load %work[%p] : memref<64xi64>
    %m1 = arith.maxsi %m, %w : i64
    scf.yield %m1 : i64
  }
  func.call @printI64(%fewest) : (i64) -> ()
  func.call @printComma() : () -> ()
  func.call @printI64(%most) : (i64) -> ()
  func.call @printComma() : () -> ()
  func.call @printI64(%heaviest) : (i64) -> ()
  func.call @printNewline() : () -> ()
  memref.dealloc %visits : memref<?x?x?xi64>
  memref.dealloc %work : memref<64xi64>
  return
}
