//===- DefineConversionLibcalls.cpp - the module's own 16-bit conversions -===//
//
// The CPU backend JITs for whatever CPU it runs on. ExpandF16Conversions and arith-expand turn
// every conversion the lowering writes into integer arithmetic, but LLVM may still emit calls
// of its own: InstCombine folds the bits of a guarded 16-bit load (`load bfloat`, `bitcast` to
// i16, `phi i16`; TileToCpuLoops' BlockLoadLowering) back into a `phi bfloat`, which x86 without
// AVX512-BF16 legalizes as f32 and rounds back through `__truncsfbf2` (seen on an AMD znver3
// host, split-KV over a packed batch). Such calls name compiler-runtime symbols that the
// JIT'ing process need not have, so the module defines them itself: each a function whose body
// is the conversion in arith, expanded by the same passes as the kernel's own.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/codegen/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/SymbolTable.h"

namespace tilefuse {
#define GEN_PASS_DEF_DEFINECONVERSIONLIBCALLS
#include "tilefuse/codegen/Passes.h.inc"
} // namespace tilefuse

using namespace mlir;

namespace {

struct DefineConversionLibcalls
    : tilefuse::impl::DefineConversionLibcallsBase<DefineConversionLibcalls> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointToEnd(module.getBody());
    Location loc = module.getLoc();
    Type f32 = b.getF32Type(), bf16 = b.getBF16Type(), f16 = b.getF16Type();
    struct Libcall {
      llvm::StringLiteral name;
      Type from, to;
    };
    for (const Libcall &call : {Libcall{"__truncsfbf2", f32, bf16},
                                Libcall{"__truncsfhf2", f32, f16},
                                Libcall{"__extendhfsf2", f16, f32}}) {
      if (SymbolTable::lookupSymbolIn(module, call.name))
        continue;
      auto fn = func::FuncOp::create(b, loc, call.name,
                                     b.getFunctionType({call.from}, {call.to}));
      // Weak: kept for the calls code generation adds after LLVM's IR passes, and no clash
      // between two modules that both define it.
      fn->setAttr("llvm.linkage",
                  LLVM::LinkageAttr::get(b.getContext(), LLVM::Linkage::Weak));
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(fn.addEntryBlock());
      Value x = fn.getArgument(0);
      Value y = call.to.getIntOrFloatBitWidth() < call.from.getIntOrFloatBitWidth()
                    ? arith::TruncFOp::create(b, loc, call.to, x).getResult()
                    : arith::ExtFOp::create(b, loc, call.to, x).getResult();
      func::ReturnOp::create(b, loc, y);
    }
  }
};

} // namespace
