// The CPU lowerings need no optional CPU feature and no compiler-runtime call: compiled for the
// x86-64 baseline (SSE2 only: no F16C, no AVX512-BF16), the only symbols the code imports are
// libc's and libm's. A bf16 value that crossed a branch, or an f16 conversion left to LLVM,
// would import __truncsfbf2, __extendhfsf2 or __truncsfhf2, which a process (Debian 12's libgcc)
// may lack.
//
// RUN: tilefuse-opt %kernels/softcap.mlir --tile-specialize=element-type=bf16 --tile-to-cpu \
// RUN:   | mlir-translate --mlir-to-llvmir \
// RUN:   | llc -O2 -mtriple=x86_64-unknown-linux-gnu -mcpu=x86-64 -filetype=obj -o %t.bf16.o
// RUN: llvm-nm --undefined-only --format=just-symbols %t.bf16.o \
// RUN:   | FileCheck %s --check-prefix=KERNEL --implicit-check-not=__
// RUN: tilefuse-opt %kernels/alibi.mlir --tile-specialize=element-type=f16 --tile-to-cpu \
// RUN:   | mlir-translate --mlir-to-llvmir \
// RUN:   | llc -O2 -mtriple=x86_64-unknown-linux-gnu -mcpu=x86-64 -filetype=obj -o %t.f16.o
// RUN: llvm-nm --undefined-only --format=just-symbols %t.f16.o \
// RUN:   | FileCheck %s --check-prefix=KERNEL --implicit-check-not=__
// The float64 reference too.
// RUN: tilefuse-opt %kernels/softcap.mlir --tile-to-f64-reference-llvm \
// RUN:   | mlir-translate --mlir-to-llvmir \
// RUN:   | llc -O2 -mtriple=x86_64-unknown-linux-gnu -mcpu=x86-64 -filetype=obj -o %t.ref.o
// RUN: llvm-nm --undefined-only --format=just-symbols %t.ref.o \
// RUN:   | FileCheck %s --check-prefix=REFERENCE --implicit-check-not=__

// KERNEL-DAG: free
// KERNEL-DAG: malloc
// KERNEL-DAG: exp2f

// REFERENCE-DAG: exp
// REFERENCE-DAG: log
// REFERENCE-DAG: tanh

// After LLVM's own IR optimizations too (the JIT's): InstCombine re-forms a guarded bf16 load's
// bits into a `phi bfloat`, which codegen rounds through __truncsfbf2 (split-KV over a packed
// batch did, on an AMD host); the module's weak definitions (tile-define-conversion-libcalls)
// leave nothing undefined.
// RUN: tilefuse-opt %kernels/gqa.mlir \
// RUN:   --pass-pipeline='builtin.module(tile-to-cpu{split-kv varlen})' \
// RUN:   | mlir-translate --mlir-to-llvmir \
// RUN:   | opt -O2 -mtriple=x86_64-unknown-linux-gnu -mcpu=x86-64 \
// RUN:   | llc -O2 -mtriple=x86_64-unknown-linux-gnu -mcpu=x86-64 -filetype=obj -o %t.split.o
// RUN: llvm-nm --undefined-only --format=just-symbols %t.split.o \
// RUN:   | FileCheck %s --check-prefix=KERNEL --implicit-check-not=__
// RUN: llvm-nm --defined-only --format=just-symbols %t.split.o \
// RUN:   | FileCheck %s --check-prefix=DEFINED
// DEFINED: __truncsfbf2
