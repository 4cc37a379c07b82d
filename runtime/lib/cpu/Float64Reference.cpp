//===- Float64Reference.cpp - a kernel's float64 reference, compiled ------===//
#include "tilefuse/runtime/Float64Reference.h"

#include "../DiagnosedSource.h"
#include "HostCompile.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "tilefuse/dialect/TileOps.h"
#include "tilefuse/passes/Passes.h"
#include "tilefuse/passes/Pipelines.h"
#include "tilefuse/runtime/Reference.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::runtime;

namespace {

llvm::Error makeError(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

/// The reference of one kernel in the LLVM dialect, with what the kernel declares.
struct LoweredReference {
  std::unique_ptr<MLIRContext> context;
  OwningOpRef<ModuleOp> module;
  std::string name;
  cuda::DeclaredSizes declared;
};

llvm::Expected<LoweredReference> lower(llvm::StringRef source, llvm::StringRef bufferName,
                                       const ReferenceOptions &options) {
  LoweredReference out;
  DialectRegistry registry;
  registerCompilerDialects(registry);
  out.context = std::make_unique<MLIRContext>(registry);
  out.context->loadDialect<tile::TileDialect, func::FuncDialect>();
  DiagnosedSource diagnosed(*out.context, source, bufferName);
  const std::string &diagnostics = diagnosed.diagnostics();
  out.module = diagnosed.parse();
  if (!out.module)
    return makeError("cannot parse " + bufferName + ":\n" + diagnostics);
  if (llvm::Error e = cpu::specialize(*out.module, /*elementType=*/"", options.headDim,
                                      options.params, bufferName, diagnostics))
    return std::move(e);
  llvm::Expected<func::FuncOp> kernel = cpu::findKernel(*out.module, bufferName);
  if (!kernel)
    return kernel.takeError();
  out.name = kernel->getSymName().str();
  auto argTypes = kernel->getArgumentTypes();
  if (argTypes.size() != cuda::abiTensorCount || kernel->getNumResults() != 0)
    return makeError(bufferName + ": kernel @" + out.name +
                     " must take (Q, K, V, O, LSE) memrefs and return nothing");
  for (auto [index, tensor] : llvm::enumerate(cuda::abiTensors())) {
    auto view = dyn_cast<MemRefType>(argTypes[index]);
    if (!view || view.getRank() != int64_t(tensor.dimensions.size()))
      return makeError(bufferName + ": argument " + tensor.name + " of @" + out.name +
                       " must be a rank-" + llvm::Twine(tensor.dimensions.size()) + " memref");
    for (auto [dim, size] : llvm::enumerate(view.getShape()))
      if (!ShapedType::isDynamic(size))
        out.declared.sizes[index][dim] = size;
  }

  PassManager pm(out.context.get(), ModuleOp::getOperationName());
  buildTileToF64ReferenceLLVMPipeline(pm);
  if (failed(pm.run(*out.module)))
    return makeError("compiling the float64 reference of " + bufferName + " failed:\n" +
                     diagnostics);
  return std::move(out);
}

} // namespace

struct ReferenceKernel::Impl {
  LoweredReference lowered;
  std::unique_ptr<ExecutionEngine> engine;
  reference::ReferenceEntry entry = nullptr;
};

ReferenceKernel::ReferenceKernel(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
ReferenceKernel::~ReferenceKernel() = default;
llvm::StringRef ReferenceKernel::name() const { return impl->lowered.name; }
int64_t ReferenceKernel::headDim() const { return impl->lowered.declared.sizes[0][3]; }
const cuda::DeclaredSizes &ReferenceKernel::declaredSizes() const {
  return impl->lowered.declared;
}

llvm::Expected<std::unique_ptr<ReferenceKernel>>
ReferenceKernel::compile(llvm::StringRef source, llvm::StringRef bufferName,
                         const ReferenceOptions &options) {
  auto impl = std::make_unique<Impl>();
  llvm::Expected<LoweredReference> lowered = lower(source, bufferName, options);
  if (!lowered)
    return lowered.takeError();
  impl->lowered = std::move(*lowered);
  auto engine = cpu::createHostJit(*impl->lowered.module, options.cpuTarget);
  if (!engine)
    return makeError("JIT compilation of the float64 reference of " + bufferName +
                     " failed: " + llvm::toString(engine.takeError()));
  auto symbol = (*engine)->lookup(reference::referenceSymbol(impl->lowered.name));
  if (!symbol)
    return makeError("JIT: float64 reference entry not found: " +
                     llvm::toString(symbol.takeError()));
  impl->entry = reinterpret_cast<reference::ReferenceEntry>(*symbol);
  impl->engine = std::move(*engine);
  return std::unique_ptr<ReferenceKernel>(new ReferenceKernel(std::move(impl)));
}

llvm::Error ReferenceKernel::run(const HostView &q, const HostView &k, const HostView &v,
                                 const HostView &o, const HostView &lse) const {
  // The same check, and message, as every GPU launch path.
  cuda::AttentionShape shape{q.sizes[0], q.sizes[1], k.sizes[1], q.sizes[2], k.sizes[2],
                             q.sizes[3]};
  if (llvm::Error e = cuda::checkDeclaredSizes(impl->lowered.declared, shape,
                                               "float64 reference of '" + impl->lowered.name +
                                                   "': "))
    return e;
  return reference::runReference(impl->entry, impl->lowered.name, q, k, v, o, lse);
}

llvm::Expected<std::string> tilefuse::runtime::compileReferenceObject(
    llvm::StringRef source, llvm::StringRef bufferName, const ReferenceOptions &options,
    std::string *kernelName) {
  llvm::Expected<LoweredReference> lowered = lower(source, bufferName, options);
  if (!lowered)
    return lowered.takeError();
  if (kernelName)
    *kernelName = lowered->name;
  // The machine that loads it may have another CPU: the baseline, position-independent.
  auto machine = cpu::createHostTargetMachine(cpu::CpuTarget::Baseline,
                                              /*positionIndependent=*/true);
  if (!machine)
    return machine.takeError();
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> module =
      translateModuleToLLVMIR(*lowered->module, llvmContext, lowered->name + "_reference");
  if (!module)
    return makeError("the float64 reference of " + bufferName + " did not translate to LLVM IR");
  ExecutionEngine::setupTargetTripleAndDataLayout(module.get(), machine->get());
  if (llvm::Error e = makeOptimizingTransformer(2, 0, machine->get())(module.get()))
    return std::move(e);
  llvm::SmallString<0> object;
  llvm::raw_svector_ostream os(object);
  llvm::legacy::PassManager codegen;
  if ((*machine)->addPassesToEmitFile(codegen, os, nullptr, llvm::CodeGenFileType::ObjectFile))
    return makeError("the host target cannot emit object files");
  codegen.run(*module);
  return std::string(object.str());
}
