// `tilefuse --help` lists tilefuse's subcommands and generic options, not the hundreds that the
// linked-in LLVM libraries register (targets, passes, debugging aids): those stay behind
// --help-hidden. Each subcommand's --help lists its own options by category and fits on a screen
// or two.

// RUN: %tilefuse --help | FileCheck %s --check-prefix=TOP
// RUN: %tilefuse --help | awk 'END { if (NR > 30) { print NR " lines"; exit 1 } }'
// TOP: USAGE: tilefuse [subcommand] [options]
// TOP-DAG: bench-compile - Time a cold compile to PTX
// TOP-DAG: compile       - Compile a kernel ahead of time to PTX, a cubin, a C header
// TOP-DAG: list          - List the bundled kernels
// TOP-DAG: run           - Compile a kernel and run it on random inputs (on the GPU where there is one, else on the CPU reference backend)
// TOP-DAG: tune          - Time a kernel's configurations on this GPU
// TOP: Generic Options:
// TOP: --help
// TOP-NOT: {{[Aa][Mm][Dd][Gg][Pp][Uu]|[Pp]olly|[Ww]eb[Aa]ssembly|--color|--debug|--print-}}

// RUN: %tilefuse --help-hidden | FileCheck %s --check-prefix=HIDDEN
// HIDDEN: --amdgpu-

// RUN: %tilefuse compile --help | FileCheck %s --check-prefix=COMPILE
// RUN: %tilefuse compile --help | awk 'END { if (NR > 90) { print NR " lines"; exit 1 } }'
// COMPILE: USAGE: tilefuse compile [options] [FILE.mlir]
// COMPILE: MLIR options (as in mlir-opt):
// COMPILE: --mlir-print-ir-after-all
// COMPILE: --mlir-timing
// COMPILE: tilefuse compile options:
// COMPILE: --arch=<string>
// COMPILE: --emit=<string>
// COMPILE: -o <OUT>
// COMPILE-NOT: {{[Aa][Mm][Dd][Gg][Pp][Uu]|--color|--debug}}

// RUN: %tilefuse run --help | FileCheck %s --check-prefix=RUNCMD
// RUN: %tilefuse run --help | awk 'END { if (NR > 40) { print NR " lines"; exit 1 } }'
// RUNCMD: SUBCOMMAND 'run': Compile a kernel and run it on random inputs (on the GPU where there is one, else on the CPU reference backend)
// RUNCMD: tilefuse run options:
// RUNCMD: --device=<string> - auto (the GPU where one exists), gpu or cpu
// RUNCMD: --file=<string>
// RUNCMD-NOT: {{[Aa][Mm][Dd][Gg][Pp][Uu]|--color|--mlir-}}

// RUN: %tilefuse bench-compile --help | FileCheck %s --check-prefix=BENCH
// BENCH: tilefuse bench-compile options:
// BENCH: --repeat=<int>
