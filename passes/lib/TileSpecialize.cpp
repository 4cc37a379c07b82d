//===- TileSpecialize.cpp - head dimension and storage type of a kernel ---===//
//
// A kernel is written once for one head dimension and storage type; this pass retypes it for
// others with MLIR's AttrTypeReplacer, so no text is edited and every op re-verifies. It also
// writes the kernel configuration on the module (tile.config), where the later passes read it.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/AttrTypeSubElements.h"
#include "tilefuse/dialect/KernelConfig.h"

namespace tilefuse {
#define GEN_PASS_DEF_TILESPECIALIZE
#include "tilefuse/passes/Passes.h.inc"
} // namespace tilefuse

using namespace mlir;
using namespace tilefuse;

namespace {

struct TileSpecializePass : public tilefuse::impl::TileSpecializeBase<TileSpecializePass> {
  using TileSpecializeBase::TileSpecializeBase;

  /// Gives each `arith.constant {tile.param = NAME}` the value that `params` sets for NAME.
  LogicalResult setParams(ModuleOp module) {
    llvm::StringMap<arith::ConstantOp> byName;
    module.walk([&](arith::ConstantOp c) {
      if (auto name = c->getAttrOfType<StringAttr>("tile.param"))
        byName[name.getValue()] = c;
    });
    // Diagnostics point at the kernel, not at the module's unknown location.
    Operation *anchor = module;
    for (auto fn : module.getOps<func::FuncOp>())
      if (!fn.isExternal()) {
        anchor = fn;
        break;
      }
    for (const std::string &setting : params) {
      auto [name, value] = StringRef(setting).split('=');
      name = name.trim();
      value = value.trim();
      auto it = byName.find(name);
      if (it == byName.end()) {
        std::string known;
        for (auto &entry : byName)
          known += (known.empty() ? "" : ", ") + entry.getKey().str();
        return anchor->emitError("tile-specialize: the kernel has no parameter '")
               << name << "' (it has: " << (known.empty() ? "none" : known) << ")";
      }
      arith::ConstantOp c = it->second;
      Type t = c.getType();
      TypedAttr attr;
      if (t.isIntOrIndex()) {
        int64_t v;
        if (value.getAsInteger(10, v))
          return c.emitError("tile-specialize: parameter '")
                 << name << "' is an integer, not '" << value << "'";
        attr = IntegerAttr::get(t, v);
      } else if (auto ft = dyn_cast<FloatType>(t)) {
        double v;
        if (value.getAsDouble(v))
          return c.emitError("tile-specialize: parameter '")
                 << name << "' is a number, not '" << value << "'";
        attr = FloatAttr::get(ft, v);
      } else {
        return c.emitError("tile-specialize: parameter '") << name << "' has type " << t
                                                          << ", not an integer or float";
      }
      c.setValueAttr(attr);
    }
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    // The options specialize the kernel's signature (its storage type and head dimension): a
    // bad one is reported at the kernel function, the module having no line of its own.
    Location optionsLoc = module.getLoc();
    for (auto fn : module.getOps<func::FuncOp>())
      if (!fn.isExternal()) {
        optionsLoc = fn.getLoc();
        break;
      }
    Type newElt;
    if (!elementType.empty()) {
      newElt = llvm::StringSwitch<Type>(elementType)
                   .Case("bf16", BFloat16Type::get(ctx))
                   .Case("f16", Float16Type::get(ctx))
                   .Case("f32", Float32Type::get(ctx))
                   .Default(Type());
      if (!newElt) {
        mlir::emitError(optionsLoc, "tile-specialize: element-type must be bf16, f16 or f32, "
                                    "not '")
            << elementType << "'";
        return signalPassFailure();
      }
    }
    if (headDim < 0 || (headDim != 0 && headDim % 16 != 0)) {
      mlir::emitError(optionsLoc, "tile-specialize: head-dim must be a positive multiple of 16, "
                                  "got ")
          << headDim.getValue();
      return signalPassFailure();
    }
    if (failed(setParams(module)))
      return signalPassFailure();
    if (!config.empty()) {
      llvm::Expected<TileConfig> parsed = TileConfig::parse(config);
      llvm::Error error = parsed ? parsed->verify() : parsed.takeError();
      if (error) {
        mlir::emitError(optionsLoc, "tile-specialize: config '")
            << config << "': " << llvm::toString(std::move(error));
        return signalPassFailure();
      }
      tile::writeModuleConfig(module, *parsed);
    }
    // The written head dimension and storage type are Q's: the first argument of each kernel.
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (fn.isExternal() || fn.getNumArguments() == 0)
        continue;
      auto q = dyn_cast<MemRefType>(fn.getArgumentTypes()[0]);
      if (!q || q.getRank() != 4 || q.isDynamicDim(3)) {
        fn.emitError("tile-specialize: Q must be a rank-4 view with a static head dimension");
        return signalPassFailure();
      }
      int64_t oldD = q.getDimSize(3);
      Type oldElt = q.getElementType();
      auto shape = [&](ArrayRef<int64_t> s) {
        SmallVector<int64_t> out(s);
        if (headDim && s.size() == 4 && s[3] == oldD)
          out[3] = headDim;
        return out;
      };
      auto elt = [&](Type t) { return newElt && t == oldElt ? newElt : t; };
      AttrTypeReplacer replacer;
      replacer.addReplacement([&](MemRefType t) -> Type {
        return MemRefType::get(shape(t.getShape()), elt(t.getElementType()), t.getLayout(),
                               t.getMemorySpace());
      });
      replacer.addReplacement([&](RankedTensorType t) -> Type {
        return RankedTensorType::get(shape(t.getShape()), elt(t.getElementType()),
                                     t.getEncoding());
      });
      replacer.recursivelyReplaceElementsIn(fn, /*replaceAttrs=*/true, /*replaceLocs=*/false,
                                            /*replaceTypes=*/true);
    }
    // A parameter value (a dimension index of -3) can make a checked kernel one that a later
    // pass cannot take: check the specialized form again.
    if (failed(tilefuse::checkWrittenForm(module)))
      return signalPassFailure();
  }
};

} // namespace
