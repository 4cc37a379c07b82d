// tilefuse compile --emit cubin|header, through the CUDA toolkit's ptxas (test/aot compiles the
// header with a C compiler and runs its host-side checks).
// REQUIRES: ptxas

// RUN: rm -rf %t && mkdir -p %t
// RUN: tilefuse compile --kernel causal --emit cubin -Xptxas=-v -o %t/causal.cubin 2>&1 \
// RUN:   | FileCheck %s --check-prefix=VERBOSE
// VERBOSE: Compiling entry function 'causal' for 'sm_90a'
// RUN: od -An -c -N4 %t/causal.cubin | FileCheck %s --check-prefix=ELF
// ELF: 177   E   L   F
// RUN: FileCheck %s --check-prefix=JSON --input-file %t/causal.json
// JSON: "name": "causal"

// RUN: tilefuse compile --kernel causal --head-dim 128 --dtype f16 --emit header \
// RUN:   --name causal_f16 -o %t/causal_f16.h
// RUN: FileCheck %s --check-prefix=HEADER --input-file %t/causal_f16.h
// HEADER: Kernel    causal from kernels/causal.mlir: f16 storage, head dim 128
// HEADER: Target    sm_90a cubin of {{[0-9]+}} bytes (ptxas, {{.*}})
// HEADER: #include <cuda.h>
// HEADER: #define CAUSAL_F16_ENTRY "causal"
// HEADER: #define CAUSAL_F16_HEAD_DIM 128
// HEADER: } causal_f16_cubin = {{[{][{]}}
// HEADER-NEXT: 0x7f,0x45,0x4c,0x46,
// HEADER: static inline const char *causal_f16_check(
// HEADER: static inline CUresult causal_f16_launch(CUstream stream, const void *q, const void *k,
// HEADER-NEXT: const void *v, void *o, float *lse, int64_t B, int64_t H,
// HEADER-NEXT: int64_t Hkv, int64_t M, int64_t N,
// HEADER-NEXT: const int64_t strides[14]) {

// RUN: not tilefuse compile --kernel causal --emit header --name 9lives -o %t/bad.h 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BADNAME
// BADNAME: error: --name '9lives' is not a C identifier
