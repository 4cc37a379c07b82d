// tilefuse compile: its --help explains every option, it writes PTX with the launch metadata
// (declared sizes included), --config overrides the block sizes, MLIR's --mlir-* options work,
// TILEFUSE_DUMP_IR dumps each stage, a DSL error has file:line:col, and --emit cubin without any
// ptxas says what is missing.
// (The cubin and header outputs, which need ptxas, are in compile-cubin.mlir.)

// RUN: tilefuse compile --help | FileCheck %s --check-prefix=HELP
// HELP: SUBCOMMAND 'compile'
// HELP-DAG: header: a C99 header
// HELP-DAG: --mlir-print-ir-after-all
// HELP-DAG: --mlir-timing
// HELP-DAG: --Xptxas=<string>
// HELP-DAG: --arch=<string>
// HELP-DAG: --block-m=<long>
// HELP-DAG: --block-n=<long>
// HELP-DAG: --config=<string>
// HELP-DAG: --dtype=<string>
// HELP-DAG: --emit=<string>
// HELP-DAG: --head-dim=<long>
// HELP-DAG: --kernel=<string>
// HELP-DAG: --name=<string>
// HELP-DAG: -o <OUT>
// HELP-DAG: --ptx-features=<string>
// HELP-DAG: --ptxas=<string>

// RUN: rm -rf %t && mkdir -p %t
// RUN: tilefuse compile --kernel causal --config Br=128,Bc=32 --seq-len 1000 --emit ptx -o %t/causal.ptx
// RUN: FileCheck %s --check-prefix=PTX --input-file %t/causal.ptx
// RUN: FileCheck %s --check-prefix=JSON --input-file %t/causal.json
// PTX: .target sm_90a
// PTX: .visible .entry causal(
// PTX: wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16
// JSON-DAG: "block_m": 128
// JSON-DAG: "block_n": 32
// sm_90a takes wgmma (the tuned choice): 128 rows are two warpgroups of 4 warps. For sequences
// of up to 1024 keys (--seq-len) causal at d64 has no warp roles; the sidecar records the
// length's bucket, which bench.py matches rows against.
// JSON-DAG: "threads": 256
// JSON-DAG: "name": "causal"
// JSON-DAG: "shared_bytes": 12288
// JSON-DAG: "seq_bucket": 1024

// Any length (no --seq-len): the three-warpgroup tile, persistent and paired, its row blocks
// aligned to the rows' end; no seq_bucket.
// RUN: tilefuse compile --kernel causal --emit ptx -o %t/causal-long.ptx
// RUN: FileCheck %s --check-prefix=LONG --implicit-check-not=seq_bucket \
// RUN:   --input-file %t/causal-long.json
// LONG: "block_m": 192
// LONG: "tile_config": "Br=192,Bc=128,{{.*}},warp_specialize=true,softmax_overlap=true,persistent=true,row_order=paired,row_align=end"
// RUN: not tilefuse compile --kernel causal --seq-len -5 --emit ptx -o %t/bad.ptx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BAD-SEQ
// BAD-SEQ: error: --seq-len must be positive (or 0: any length), not -5

// The metadata records every static size of the signature (null: any), which launches check:
// gqa declares 8 query heads and 2 key/value heads.
// RUN: tilefuse compile --kernel gqa --emit ptx -o %t/gqa.ptx
// RUN: tr -d ' \n' < %t/gqa.json | FileCheck %s --check-prefix=GQA-JSON
// GQA-JSON: "declared_sizes":{"K":[null,2,null,64],"LSE":[null,8,null],"O":[null,8,null,64],"Q":[null,8,null,64],"V":[null,2,null,64]}
// RUN: tr -d ' \n' < %t/causal.json | FileCheck %s --check-prefix=CAUSAL-JSON
// CAUSAL-JSON: "declared_sizes":{"K":[null,null,null,64],"LSE":[null,null,null],"O":[null,null,null,64],"Q":[null,null,null,64],"V":[null,null,null,64]}

// --mma sync: D = 64 takes two m16 tiles per warp (the tuned rows-per-warp), 128 rows on 4 warps.
// RUN: tilefuse compile --kernel causal --config Br=128,Bc=32 --mma sync --emit ptx -o %t/sync.ptx
// RUN: FileCheck %s --check-prefix=SYNC --input-file %t/sync.ptx
// RUN: FileCheck %s --check-prefix=SYNC-JSON --input-file %t/sync.json
// SYNC: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// SYNC-NOT: wgmma
// SYNC-JSON: "threads": 128
// RUN: not tilefuse compile --kernel causal --mma wgmma --rows-per-warp 32 -o %t/x 2>&1 \
// RUN:   | FileCheck %s --check-prefix=WGMMA-RPW
// WGMMA-RPW: mma=wgmma needs chip=sm_90a, rows-per-warp=16

// RUN: tilefuse compile --kernel attention -o /dev/null --mlir-timing 2>&1 \
// RUN:   | FileCheck %s --check-prefix=TIMING
// TIMING: Execution time report
// TIMING-DAG: Parser
// TIMING-DAG: TileTiling
// TIMING-DAG: GpuModuleToBinaryPass
// RUN: tilefuse compile --kernel attention -o /dev/null --mlir-print-ir-after-all 2>&1 \
// RUN:   | FileCheck %s --check-prefix=IR
// IR: IR Dump After TileTiling (tile-tiling)
// IR: IR Dump After ConvertTGPUToNVVM (convert-tgpu-to-nvvm)
// One pass by its name: the compile pipeline's passes are registered with the CLI.
// RUN: tilefuse compile --kernel causal --head-dim 128 -o /dev/null \
// RUN:   --mlir-print-ir-after=tgpu-warp-specialize 2>&1 | FileCheck %s --check-prefix=ONE-PASS
// ONE-PASS: IR Dump After TGPUWarpSpecialize (tgpu-warp-specialize)
// ONE-PASS: tgpu.warp_specialize
// ONE-PASS-NOT: IR Dump After

// RUN: env TILEFUSE_DUMP_IR=%t/dump tilefuse compile --kernel causal --head-dim 128 -o /dev/null
// RUN: ls %t/dump/causal-* | FileCheck %s --check-prefix=DUMP
// DUMP-DAG: 0-source.mlir
// DUMP-DAG: 1-specialize
// DUMP-DAG: 2-tile-to-ptx
// DUMP-DAG: causal.ptx
// DUMP-DAG: causal.json

// RUN: not tilefuse compile --kernel causal --emit obj -o %t/x 2>&1 | FileCheck %s --check-prefix=EMIT
// EMIT: error: --emit must be ptx, cubin, header, reference or tiled, not 'obj'
// RUN: not tilefuse compile --kernel causal --config Br=64,Q=1 -o %t/x 2>&1 \
// RUN:   | FileCheck %s --check-prefix=CONFIG
// CONFIG: error: --config: unknown setting 'Q'
// RUN: not tilefuse compile --kernel causal --config Br=24 -o %t/x 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BLOCK
// BLOCK: block-m must be a multiple of 16
// Q by TMA (q_tma) needs a producer and Q in shared memory: d96's default holds Q in registers.
// RUN: not tilefuse compile --kernel causal --head-dim 96 --config q_tma=true -o %t/x 2>&1 \
// RUN:   | FileCheck %s --check-prefix=QTMA
// QTMA: error: invalid kernel configuration: q_tma=true needs warp_specialize=true and q=shared
// The d192 default loads Q by TMA and, its row blocks equal work, is persistent; q_tma=false
// takes both away (the consumers copy Q; persistence follows Q by TMA).
// RUN: tilefuse compile --kernel attention --head-dim 192 --emit ptx -o %t/q192.ptx
// RUN: FileCheck %s --check-prefix=Q192 --input-file %t/q192.json
// Q192-DAG: "kv_tma": true
// Q192-DAG: "q_tma": true
// Q192-DAG: "persistent": true
// RUN: tilefuse compile --kernel attention --head-dim 192 --config q_tma=false --emit ptx \
// RUN:   -o %t/noq192.ptx
// RUN: FileCheck %s --check-prefix=NOQ192 --input-file %t/noq192.json
// NOQ192: "kv_tma": true
// NOQ192-NOT: "q_tma"
// NOQ192-NOT: "persistent"
// RUN: not tilefuse compile --kernel nope -o %t/x 2>&1 | FileCheck %s --check-prefix=NAME
// NAME: error: no bundled kernel named 'nope'
// RUN: not tilefuse compile %s -o %t/x 2>&1 | FileCheck %s --check-prefix=DSL
// RUN: not tilefuse compile %s --emit cubin --ptxas /nonexistent/ptxas -o %t/x 2>&1 \
// RUN:   | FileCheck %s --check-prefix=NOPTXAS-EXPLICIT
// NOPTXAS-EXPLICIT: error: no ptxas: TILEFUSE_PTXAS (or --ptxas) names /nonexistent/ptxas
// With PATH cleared, a chosen toolkit that lacks ptxas is named (no other toolkit is used):
// RUN: not env PATH= CUDA_HOME=%t/no-toolkit %tilefuse compile --kernel causal --emit header \
// RUN:   -o %t/x.h 2>&1 | FileCheck %s --check-prefix=NOPTXAS -DDIR=%t
// NOPTXAS: error: no ptxas: CUDA_HOME=[[DIR]]/no-toolkit has no bin/ptxas
// RUN: not ls %t/x.h

// This file is also a kernel with a typo, reported where it is:
func.func @typo(%Q: memref<?x?x?x64xbf16>) {
  // DSL: compile-cli.mlir:[[@LINE+1]]:8: error: custom op 'tile.lod' is unknown
  %q = tile.lod %Q : memref<?x?x?x64xbf16> -> tensor<?x?x?x64xbf16>
  return
}

// Variant parameters: --param sets a kernel's tile.param constant; unknown names are an error
// that lists the kernel's parameters.
// RUN: tilefuse compile --kernel sliding_window --param window_left=7 --param window_right=3 \
// RUN:   -o %t/sw.ptx --mlir-print-ir-after-all 2>&1 | FileCheck %s --check-prefix=PARAM
// PARAM: IR Dump After TileSpecialize
// PARAM: arith.constant {tile.param = "window_left"} 7 : index
// PARAM: arith.constant {tile.param = "window_right"} 3 : index
// RUN: not tilefuse compile --kernel sliding_window --param window=7 -o %t/bad.ptx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BADPARAM
// BADPARAM: kernels/sliding_window.mlir:{{[0-9]+}}:{{[0-9]+}}: error: tile-specialize: the kernel has no parameter 'window' (it has: {{.*}}window_left

// A bad head dimension or storage type is reported at the kernel function the options
// specialize, without a dump of the IR; `run` takes --head-dim too.
// RUN: not tilefuse compile --kernel causal --head-dim 100 -o %t/bad.ptx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BADDIM
// BADDIM: kernels/causal.mlir:{{[0-9]+}}:1: error: tile-specialize: head-dim must be a positive multiple of 16, got 100
// BADDIM-NEXT: func.func @causal(
// BADDIM-NOT: see current operation
// RUN: not tilefuse compile --kernel causal --dtype f8 -o %t/bad.ptx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BADTYPE
// BADTYPE: kernels/causal.mlir:{{[0-9]+}}:1: error: tile-specialize: element-type must be bf16, f16 or f32, not 'f8'
// BADTYPE-NOT: see current operation
// RUN: tilefuse run --device cpu --kernel causal --head-dim 128 --M 70 --N 90 \
// RUN:   | FileCheck %s --check-prefix=RUNDIM
// RUNDIM: shape        B=2 H=8 Hkv=8 M=70 N=90 D=128
// RUNDIM: result       PASS
