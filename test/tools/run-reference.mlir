// `tilefuse run` checks any kernel against the float64 reference derived from its own text: a
// user's --file variant exactly like a bundled one, with the sizes its signature declares.
//
// RUN: tilefuse run --device cpu --file %S/../variants/chunked_local.mlir --M 500 --N 450 \
// RUN:   | FileCheck %s --check-prefix=USER
// USER: kernel       chunked_local ({{.*}}chunked_local.mlir), bf16 on the CPU reference backend
// USER: error        O {{.*}} vs float64
// USER: result       PASS
//
// gqa declares 8 query and 2 key/value heads: run takes them from its signature.
// RUN: tilefuse run --device cpu --kernel gqa --H 3 --dtype f16 | FileCheck %s --check-prefix=GQA
// GQA: shape        B=2 H=8 Hkv=2
// GQA: result       PASS
//
// A kernel whose written form has no f64 meaning gets no reference: a located error, exit 1.
// RUN: sed 's/%%th = math.tanh %%x : f32/%%i = arith.bitcast %%x : f32 to i32\n    %%th = arith.bitcast %%i : i32 to f32/' \
// RUN:   %kernels/softcap.mlir > %t.bad.mlir
// RUN: not tilefuse run --device cpu --file %t.bad.mlir 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: bad.mlir:{{[0-9]+}}:{{[0-9]+}}: error: 'arith.bitcast' op cannot be evaluated in f64
//
// --emit reference: an object for the baseline CPU exporting the reference's C entry point.
// RUN: tilefuse compile --kernel causal --head-dim 128 --emit reference -o %t.causal.o
// RUN: llvm-nm --defined-only --format=just-symbols %t.causal.o | FileCheck %s --check-prefix=OBJ
// OBJ: _mlir_ciface_causal_reference
// RUN: llvm-readobj --file-headers %t.causal.o | FileCheck %s --check-prefix=ELF
// ELF: Type: Relocatable
// ELF: Machine: EM_X86_64
//
// --emit reference --backward: the derived backward's float64 reference instead, and only it
// (the forward's whole-tensor evaluation is dropped: it would export NAME_reference with another
// signature than the row reference's).
// RUN: tilefuse compile --kernel softcap --head-dim 32 --emit reference --backward -o %t.softcap.o
// RUN: llvm-nm --defined-only --format=just-symbols %t.softcap.o | FileCheck %s --check-prefix=BWD
// BWD-NOT: _mlir_ciface_softcap_reference
// BWD: _mlir_ciface_softcap_backward_reference
// BWD-NOT: _mlir_ciface_softcap_reference
//
// An op the derivation cannot differentiate: a located error, exit 1.
// RUN: sed 's/%%th = math.tanh %%x : f32/%%th = arith.remf %%x, %%cap : f32/' \
// RUN:   %kernels/softcap.mlir > %t.rem.mlir
// RUN: not tilefuse compile %t.rem.mlir --emit reference --backward -o %t.rem.o 2>&1 \
// RUN:   | FileCheck %s --check-prefix=REM
// REM: rem.mlir:20:11: error: 'arith.remf' op cannot be differentiated with respect to the score
//
// Every row order on the CPU backend: grouped and paired run their row blocks descending
// there (the grouping is the GPU launch's; the pairing a persistent tile loop's).
// RUN: tilefuse run --device cpu --kernel causal --B 1 --H 2 --M 77 --N 77 --block-m 16 \
// RUN:   --block-n 16 --row-order paired | FileCheck %s --check-prefix=PAIRED
// PAIRED: result       PASS
// RUN: tilefuse run --device cpu --kernel causal --B 1 --H 2 --M 77 --N 77 --block-m 16 \
// RUN:   --block-n 16 --row-order grouped | FileCheck %s --check-prefix=PAIRED
//
// On sm_90a the paired order is the persistent causal kernel's tile loop, in its metadata.
// RUN: tilefuse compile --kernel causal --head-dim 128 --arch sm_90a --config row_order=paired \
// RUN:   --emit ptx -o %t.paired.ptx
// RUN: FileCheck %s --check-prefix=PAIRED-JSON < %t.paired.json
// PAIRED-JSON: "persistent": true
// PAIRED-JSON: "tile_config": "{{.*}}persistent=true,row_order=paired{{(,overlap_tiles=true)?}}"
// RUN: not tilefuse compile --kernel causal --head-dim 128 --arch sm_90a \
// RUN:   --config row_order=paired,persistent=false --emit ptx -o %t.bad.ptx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=PAIRED-ONE-TILE
// PAIRED-ONE-TILE: row_order=paired orders a persistent kernel's tile loop (persistent=true)
