// Paged-KV kernels through `tilefuse compile --paged-kv` (tile-paged-kv, then the GPU lowering):
// the launch ABI's paged form (the 24 parameters, then page_table, kv_lengths, table_b and
// page_size; the split ones after those), the table reads of the copies, and the sidecar.
// RUN: rm -rf %t && mkdir -p %t
// RUN: tilefuse compile --kernel attention --paged-kv --emit ptx -o %t/paged.ptx
// RUN: FileCheck %s --input-file %t/paged.ptx
// RUN: FileCheck %s --check-prefix=JSON --input-file %t/paged.json
// CHECK:     .entry attention(
// CHECK:       .param .u64 attention_param_27{{$}}
// CHECK-NEXT:  )
// CHECK:     div.u32
// CHECK:     cp.async.cg.shared.global
// JSON: "paged_kv": true
// JSON-NOT: page_size

// Split and paged: 24 + 4 + 4 parameters. A fixed page size is in the sidecar, and the copies
// divide by it as a constant (16: shifts, no div.u32 by a parameter in the copies).
// RUN: tilefuse compile --kernel attention --head-dim 128 --paged-kv --split-kv --page-size 16 \
// RUN:   --emit ptx -o %t/split.ptx
// RUN: FileCheck %s --check-prefix=SPLIT --input-file %t/split.ptx
// RUN: FileCheck %s --check-prefix=SPLITJSON --input-file %t/split.json
// SPLIT:       .param .u64 attention_param_31{{$}}
// SPLIT-NEXT:  )
// SPLIT:       shr.u32 {{.+}}, 4;
// SPLITJSON: "page_size": 16
// SPLITJSON: "paged_kv": true
// SPLITJSON: "split_kv": true

// A page size without --paged-kv, and a kernel whose K length a mask reads, are errors.
// RUN: not tilefuse compile --kernel attention --page-size 16 --emit ptx -o %t/x.ptx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=NOPAGED
// NOPAGED: a page size is an option of paged KV
