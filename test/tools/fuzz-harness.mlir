// RUN: rm -rf %t && not tilefuse-fuzz --seed 3 --runs 4 --crash-at 2 --reproducer-dir %t 2>&1 | FileCheck %s
// RUN: test -s %t/crash-fuzz-3-2.mlir

// tilefuse-fuzz's harness: a fault while an input runs (here a deliberate one, --crash-at) is
// caught, reported with its replay command, its input written as a reproducer, the other
// inputs still run, and the run fails.
// CHECK: CRASH on input 2 (seed 3, from {{.*}}; replay: --seed 3 --first 2 --runs 1), written to {{.*}}crash-fuzz-3-2.mlir
// CHECK: tilefuse-fuzz: 4 inputs (seed 3) in {{.*}} 1 crashes
