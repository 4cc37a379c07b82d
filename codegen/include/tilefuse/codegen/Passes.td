//===- Passes.td - tilefuse code generation passes ---------*- tablegen -*-===//
#ifndef TILEFUSE_CODEGEN_PASSES_TD
#define TILEFUSE_CODEGEN_PASSES_TD

include "mlir/Pass/PassBase.td"

def TileToCpuLoops : Pass<"tile-to-cpu-loops", "mlir::ModuleOp"> {
  let summary = "CPU reference lowering: tiled tile IR to scf loops over memref buffers";
  let description = [{
    The program grid (scf.forall) becomes a sequential loop nest; every block value becomes a
    heap buffer (memref.alloc, freed later by MLIR's ownership-based buffer deallocation); block
    loads, stores, dots, reductions, broadcasts and elementwise arith/math on blocks become scalar
    loop nests; score and mask regions are inlined per element. `tile.block_event` becomes a call
    to `tilefuse_block_event(i32)`, which the CPU runner counts. The result is plain
    scf/memref/arith/math IR that upstream passes take to the LLVM dialect.
  }];
  let dependentDialects = ["mlir::scf::SCFDialect", "mlir::memref::MemRefDialect",
                           "mlir::arith::ArithDialect", "mlir::func::FuncDialect"];
}

def DefineConversionLibcalls : Pass<"tile-define-conversion-libcalls", "mlir::ModuleOp"> {
  let summary = "CPU: the module defines the 16-bit float conversions LLVM may call";
  let description = [{
    Adds weak definitions of `__truncsfbf2`, `__truncsfhf2` and `__extendhfsf2` (f32 <-> bf16 and
    f16), each one `arith.truncf` or `arith.extf` that the CPU pipeline's expansions then turn
    into integer arithmetic. Expanding the conversions in IR is not enough: LLVM's InstCombine
    turns a 16-bit value's bits that cross a branch (`load bfloat`, `bitcast`, `phi i16`) back
    into a `phi bfloat`, and x86 without AVX512-BF16 carries that phi as f32 and rounds it back
    with a call to `__truncsfbf2`, which a JIT'ing process (Debian 12's libgcc) may lack. With
    the definitions in the module every such call resolves to the module's own code, on any CPU.
    Weak, so that two reference objects linked together do not clash.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::func::FuncDialect",
                           "mlir::LLVM::LLVMDialect"];
}

def ExpandF16Conversions : Pass<"tile-expand-f16-conversions"> {
  let summary = "CPU: f16 <-> f32 conversions as integer arithmetic (no compiler-runtime calls)";
  let description = [{
    Rewrites `arith.extf` from f16 and `arith.truncf` to f16 (scalars and vectors) into integer
    and f32 arithmetic that gives the IEEE results (exact extension; truncation rounding to
    nearest even, with overflow to infinity, quiet NaNs and subnormals). Without it, LLVM lowers
    them on CPUs lacking half-precision conversion instructions (x86-64 without F16C) to
    __extendhfsf2 / __truncsfhf2, which the JIT'ing process may not have. The bf16 counterpart is
    upstream's `arith-expand{include-bf16}`.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect"];
}

def TileToF64Reference : Pass<"tile-to-f64-reference", "mlir::ModuleOp"> {
  let summary = "The float64 reference: a kernel's written form evaluated naively in f64";
  let description = [{
    Each kernel function @k (written form, level 1) becomes @k_reference: its views retyped to
    f64 with dynamic sizes and strides, plus (row_begin, row_end) selecting query rows of the
    B x H x M row space of its outputs. Every op is evaluated by its definition, one query row at
    a time, in f64: Q.K^T by full dot products, the score and mask regions per element with their
    f32 arithmetic promoted to f64, a two-pass softmax (row max, then exp and sum; rows with no
    kept score give zero probabilities and a logsumexp of -inf), P.V, the stores. No tiling, no
    online softmax, no block pruning: it shares none of the passes it checks. An op outside the
    written form, or one that has no f64 meaning, is an error at that op.
  }];
  let dependentDialects = ["mlir::scf::SCFDialect", "mlir::memref::MemRefDialect",
                           "mlir::arith::ArithDialect", "mlir::math::MathDialect",
                           "mlir::func::FuncDialect"];
}

def TileToF64TensorReference : Pass<"tile-to-f64-tensor-reference", "mlir::ModuleOp"> {
  let summary = "The float64 reference of any written form, evaluated whole tensor by tensor";
  let description = [{
    For written forms that are not row by row (a derived backward kernel reduces over query rows
    and query heads): each function @k becomes @k_reference with its views retyped to f64
    (dynamic sizes and strides) and a C interface; every tile op of the written form (load, dot
    with either operand transposed, scale, score_mod, score_mod_grad, mask, map, softmax,
    softmax_from_lse, row_reduce, sum_head_groups, store) fills an f64 buffer holding its whole
    result by the op's definition, regions per element with their f32 arithmetic promoted to
    f64. Single-threaded, O(B H M N) memory: a reference for tests, not a kernel. An op outside
    the written form, or one without an f64 meaning, is an error at that op.
  }];
  let dependentDialects = ["mlir::scf::SCFDialect", "mlir::memref::MemRefDialect",
                           "mlir::arith::ArithDialect", "mlir::math::MathDialect",
                           "mlir::func::FuncDialect"];
}

def ConvertTGPUToNVVM : Pass<"convert-tgpu-to-nvvm", "mlir::ModuleOp"> {
  let summary = "tgpu kernels (level 5) to a gpu.module of NVVM kernels, by conversion patterns";
  let description = [{
    Input: kernels whose blocks carry their register layouts (tgpu-assign-layouts), whose
    shared tiles are tgpu buffers filled by tgpu.async_copy (tile-to-tgpu) with waits and
    barriers placed (tgpu-insert-barriers) and offsets given (tgpu-allocate-shared-memory,
    which also recorded `tilefuse.threads` and `tilefuse.shared_bytes` on the module).

    Each kernel function becomes a gpu.func with the launch ABI in
    `gpu.module @tilefuse_kernels` carrying an #nvvm.target, and every op is converted by the
    patterns of its family, one file each under codegen/lib/nvvm (TGPUToNVVMPatterns.h lists
    them): a block becomes the values one thread holds in its layout, a buffer its shared
    address. exp2/log/tanh use the approximate NVVM intrinsics, never libdevice.
  }];
  let options = [
    Option<"chip", "chip", "std::string", "\"sm_90a\"", "Target chip (sm_80, sm_90a, ...)">,
    Option<"features", "features", "std::string", "\"+ptx80\"", "NVPTX features (PTX version)">
  ];
  let dependentDialects = ["mlir::gpu::GPUDialect", "mlir::NVVM::NVVMDialect",
                           "mlir::LLVM::LLVMDialect", "mlir::vector::VectorDialect",
                           "mlir::scf::SCFDialect", "mlir::arith::ArithDialect"];
}

def MarkGridConstants : Pass<"tilefuse-mark-grid-constants", "mlir::gpu::GPUModuleOp"> {
  let summary = "Kernel parameters passed by value become NVVM grid constants";
  let description = [{
    convert-tgpu-to-nvvm lists the tensor-map parameters of a kernel in its
    `tilefuse.grid_constants`; once convert-gpu-to-nvvm has made the kernels llvm.funcs (it
    keeps no `llvm.byval` of a gpu.func's arguments, and NVVM accepts `nvvm.grid_constant` on
    llvm.funcs only), this pass makes each a 128-byte `llvm.byval` grid constant, so that NVPTX
    keeps it in param space and TMA reads the map where the launch put it.
  }];
}

#endif
