//===- CpuBackwardKernel.cpp - a kernel and its derived backward on the CPU ----===//
#include "tilefuse/runtime/CpuBackwardKernel.h"

#include "../DiagnosedSource.h"
#include "HostCompile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "tilefuse/codegen/Passes.h"
#include "tilefuse/dialect/TileOps.h"
#include "tilefuse/passes/Passes.h"
#include "tilefuse/passes/Pipelines.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::runtime;

namespace {

llvm::Error makeError(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

/// A gradient has the sizes of the tensor it is the gradient of.
llvm::Error checkSameSizes(const HostView &gradient, const HostView &of, llvm::StringRef name) {
  for (int d = 0; d < 4; ++d)
    if (gradient.sizes[d] != of.sizes[d])
      return makeError(name + " dimension " + llvm::Twine(d) + " is " +
                       llvm::Twine(gradient.sizes[d]) + ", not " + llvm::Twine(of.sizes[d]) +
                       " as the tensor it is the gradient of");
  return llvm::Error::success();
}

} // namespace

struct CpuBackwardKernel::Impl {
  std::unique_ptr<MLIRContext> context;
  std::unique_ptr<ExecutionEngine> engine;
  std::string name;
  bool deterministic = false;
  ElementType elt = ElementType::BF16;
  int64_t headDim = 0;
  /// Q, K, V, O, dO, LSE, dQ, dK, dV as the backward declares them (the forward's are the
  /// first four and LSE).
  std::vector<cpu::ArgSpec> args;
  using D4 = cpu::Descriptor<4>;
  using D3 = cpu::Descriptor<3>;
  using ForwardFn = void (*)(D4 *, D4 *, D4 *, D4 *, D3 *);
  using BackwardFn = void (*)(D4 *, D4 *, D4 *, D4 *, D4 *, D3 *, D4 *, D4 *, D4 *);
  ForwardFn forward = nullptr;
  BackwardFn backward = nullptr;
};

CpuBackwardKernel::CpuBackwardKernel(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
CpuBackwardKernel::~CpuBackwardKernel() = default;
llvm::StringRef CpuBackwardKernel::name() const { return impl->name; }
ElementType CpuBackwardKernel::elementType() const { return impl->elt; }
int64_t CpuBackwardKernel::headDim() const { return impl->headDim; }
bool CpuBackwardKernel::deterministic() const { return impl->deterministic; }

llvm::Expected<std::unique_ptr<CpuBackwardKernel>>
CpuBackwardKernel::compile(llvm::StringRef source, llvm::StringRef bufferName,
                           const CpuBackwardOptions &options) {
  if (options.blockM <= 0 || options.blockN <= 0)
    return makeError("block sizes must be positive (block-m " + llvm::Twine(options.blockM) +
                     ", block-n " + llvm::Twine(options.blockN) + ")");
  auto impl = std::make_unique<Impl>();
  impl->deterministic = options.deterministic;
  auto parsed = cpu::parseHostSource(source, bufferName, options.elementType, options.headDim,
                                     options.params);
  if (!parsed)
    return parsed.takeError();
  impl->context = std::move(parsed->context);
  MLIRContext &ctx = *impl->context;
  const std::string &diagnostics = parsed->diagnostics();
  OwningOpRef<ModuleOp> &module = parsed->module;
  func::FuncOp found = parsed->kernel;
  impl->name = found.getSymName().str();
  if (found.getNumArguments() != 5 || found.getNumResults() != 0)
    return makeError(bufferName + ": kernel @" + impl->name +
                     " must take (Q, K, V, O, LSE) memrefs and return nothing");

  // Derive first: the backward's C entry point is asked for on the function the pass adds.
  PassManager derive(&ctx, ModuleOp::getOperationName());
  derive.addPass(createTileCheckWrittenForm());
  derive.addPass(createTileDeriveBackward());
  if (failed(derive.run(*module)))
    return makeError("deriving the backward of " + bufferName + " failed:\n" + diagnostics);
  auto backwardFn = module->lookupSymbol<func::FuncOp>(impl->name + "_backward");
  if (!backwardFn)
    return makeError(bufferName + ": no backward was derived for @" + impl->name);

  static const char *kNames[] = {"Q", "K", "V", "O", "dO", "LSE", "dQ", "dK", "dV"};
  for (auto [i, type] : llvm::enumerate(backwardFn.getArgumentTypes())) {
    auto spec = cpu::specOf(type, kNames[i], i == 5 ? 3 : 4, impl->name + "_backward", bufferName);
    if (!spec)
      return spec.takeError();
    impl->args.push_back(*spec);
  }
  auto argTypes = backwardFn.getArgumentTypes();
  Type elt = cast<MemRefType>(argTypes[0]).getElementType();
  impl->elt = elt.isBF16() ? ElementType::BF16 : elt.isF16() ? ElementType::F16 : ElementType::F32;
  for (unsigned i : {1, 2, 3, 4, 6, 7, 8})
    if (cast<MemRefType>(argTypes[i]).getElementType() != elt)
      return makeError(bufferName + ": Q, K, V and O must share one element type");
  if (!cast<MemRefType>(argTypes[5]).getElementType().isF32())
    return makeError(bufferName + ": LSE must be f32");
  impl->headDim = impl->args[0].sizes[3];
  found->setAttr("llvm.emit_c_interface", UnitAttr::get(&ctx));
  backwardFn->setAttr("llvm.emit_c_interface", UnitAttr::get(&ctx));

  PassManager pm(&ctx, ModuleOp::getOperationName());
  BackwardPipelineOptions pipeline;
  pipeline.blockM = options.blockM;
  pipeline.blockN = options.blockN;
  pipeline.deterministic = options.deterministic;
  pipeline.instrument = options.instrument;
  pipeline.descendingRows = options.descendingRows;
  buildTileBackwardToCpuPipeline(pm, pipeline);
  if (failed(pm.run(*module)))
    return makeError("compiling the backward of " + bufferName + " failed:\n" + diagnostics);

  auto engine = cpu::createHostJit(*module, options.cpuTarget);
  if (!engine)
    return makeError("JIT compilation of the backward of " + bufferName +
                     " failed: " + llvm::toString(engine.takeError()) + "\n" + diagnostics);
  cpu::registerBlockEvents(**engine);
  auto forwardSym = (*engine)->lookup("_mlir_ciface_" + impl->name);
  if (!forwardSym)
    return makeError("JIT: kernel entry not found: " + llvm::toString(forwardSym.takeError()));
  auto backwardSym = (*engine)->lookup("_mlir_ciface_" + impl->name + "_backward");
  if (!backwardSym)
    return makeError("JIT: backward entry not found: " + llvm::toString(backwardSym.takeError()));
  impl->forward = reinterpret_cast<Impl::ForwardFn>(*forwardSym);
  impl->backward = reinterpret_cast<Impl::BackwardFn>(*backwardSym);
  impl->engine = std::move(*engine);
  return std::unique_ptr<CpuBackwardKernel>(new CpuBackwardKernel(std::move(impl)));
}

llvm::Error CpuBackwardKernel::forward(const HostView &q, const HostView &k, const HostView &v,
                                       const HostView &o, const HostView &lse,
                                       BlockCounts *counts) const {
  const HostView *views[] = {&q, &k, &v, &o, &lse};
  const int specIndex[] = {0, 1, 2, 3, 5};
  for (int i = 0; i < 5; ++i)
    if (llvm::Error e = cpu::checkView(impl->args[specIndex[i]], *views[i], impl->name))
      return e;
  if (llvm::Error e = cpu::checkShapes(q, k, v, o, lse))
    return e;
  auto dq = cpu::describe<4>(q), dk = cpu::describe<4>(k), dv = cpu::describe<4>(v), dout = cpu::describe<4>(o);
  auto dl = cpu::describe<3>(lse);
  cpu::CountBlockEvents counting(counts);
  impl->forward(&dq, &dk, &dv, &dout, &dl);
  return llvm::Error::success();
}

llvm::Error CpuBackwardKernel::backward(const HostView &q, const HostView &k, const HostView &v,
                                        const HostView &o, const HostView &dO,
                                        const HostView &lse, const HostView &dq,
                                        const HostView &dk, const HostView &dv,
                                        BlockCounts *counts) const {
  const HostView *views[] = {&q, &k, &v, &o, &dO, &lse, &dq, &dk, &dv};
  for (int i = 0; i < 9; ++i)
    if (llvm::Error e = cpu::checkView(impl->args[i], *views[i], impl->name))
      return e;
  if (llvm::Error e = cpu::checkShapes(q, k, v, o, lse))
    return e;
  for (auto [gradient, of, name] : {std::tuple<const HostView *, const HostView *, const char *>{
                                        &dO, &o, "dO"},
                                    {&dq, &q, "dQ"},
                                    {&dk, &k, "dK"},
                                    {&dv, &v, "dV"}})
    if (llvm::Error e = checkSameSizes(*gradient, *of, name))
      return e;
  Impl::D4 d4[8];
  const HostView *rank4[] = {&q, &k, &v, &o, &dO, &dq, &dk, &dv};
  for (int i = 0; i < 8; ++i)
    d4[i] = cpu::describe<4>(*rank4[i]);
  auto d3 = cpu::describe<3>(lse);
  cpu::CountBlockEvents counting(counts);
  impl->backward(&d4[0], &d4[1], &d4[2], &d4[3], &d4[4], &d3, &d4[5], &d4[6], &d4[7]);
  return llvm::Error::success();
}

llvm::Expected<std::string> tilefuse::runtime::tiledBackwardIR(llvm::StringRef source,
                                                              llvm::StringRef bufferName,
                                                              const CpuBackwardOptions &options) {
  if (options.blockM <= 0 || options.blockN <= 0)
    return makeError("block sizes must be positive (block-m " + llvm::Twine(options.blockM) +
                     ", block-n " + llvm::Twine(options.blockN) + ")");
  auto parsed = cpu::parseHostSource(source, bufferName, options.elementType, options.headDim,
                                     options.params);
  if (!parsed)
    return parsed.takeError();
  MLIRContext &ctx = *parsed->context;
  const std::string &diagnostics = parsed->diagnostics();
  OwningOpRef<ModuleOp> &module = parsed->module;
  std::string name = parsed->kernel.getSymName().str();
  PassManager pm(&ctx, ModuleOp::getOperationName());
  pm.addPass(createTileCheckWrittenForm());
  pm.addPass(createTileDeriveBackward());
  pm.addPass(createSymbolPrivatizePass({name + "_backward"}));
  pm.addPass(createSymbolDCEPass());
  TileTilingBackwardOptions tiling;
  tiling.blockM = options.blockM;
  tiling.blockN = options.blockN;
  tiling.deterministic = options.deterministic;
  pm.addNestedPass<func::FuncOp>(createTileTilingBackward(tiling));
  TileBlockPruningOptions pruning;
  pruning.instrument = options.instrument;
  pm.addNestedPass<func::FuncOp>(createTileBlockPruning(pruning));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  if (failed(pm.run(*module)))
    return makeError("tiling the backward of " + bufferName + " failed:\n" + diagnostics);
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os);
  return text;
}
