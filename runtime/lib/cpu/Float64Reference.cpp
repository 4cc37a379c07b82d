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
  std::array<std::array<int64_t, 4>, 5> declared;
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
  static const char *const argNames[] = {"Q", "K", "V", "O", "LSE"};
  static const int ranks[] = {4, 4, 4, 4, 3};
  auto argTypes = kernel->getArgumentTypes();
  if (argTypes.size() != 5 || kernel->getNumResults() != 0)
    return makeError(bufferName + ": kernel @" + out.name +
                     " must take (Q, K, V, O, LSE) memrefs and return nothing");
  for (unsigned i = 0; i < 5; ++i) {
    auto view = dyn_cast<MemRefType>(argTypes[i]);
    if (!view || view.getRank() != ranks[i])
      return makeError(bufferName + ": argument " + argNames[i] + " of @" + out.name +
                       " must be a rank-" + llvm::Twine(ranks[i]) + " memref");
    out.declared[i].fill(-1);
    for (int d = 0; d < view.getRank(); ++d)
      if (!view.isDynamicDim(d))
        out.declared[i][d] = view.getDimSize(d);
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
int64_t ReferenceKernel::headDim() const { return impl->lowered.declared[0][3]; }
const std::array<std::array<int64_t, 4>, 5> &ReferenceKernel::declaredSizes() const {
  return impl->lowered.declared;
}

llvm::Expected<std::unique_ptr<ReferenceKernel>>
ReferenceKernel::compile(llvm::StringRef source, llvm::StringRef bufferName,
                         const ReferenceOptions &options) {
  llvm::Expected<cpu::CpuTarget> target = cpu::parseCpuTarget(options.cpuTarget);
  if (!target)
    return target.takeError();
  auto impl = std::make_unique<Impl>();
  llvm::Expected<LoweredReference> lowered = lower(source, bufferName, options);
  if (!lowered)
    return lowered.takeError();
  impl->lowered = std::move(*lowered);
  auto machine = cpu::createHostTargetMachine(*target, /*positionIndependent=*/false);
  if (!machine)
    return machine.takeError();
  ExecutionEngineOptions eeOptions;
  eeOptions.transformer =
      makeOptimizingTransformer(/*optLevel=*/2, /*sizeLevel=*/0, machine->get());
  auto engine = ExecutionEngine::create(*impl->lowered.module, eeOptions, std::move(*machine));
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
  static const char *const argNames[] = {"Q", "K", "V", "O", "LSE"};
  static const char *const dimNames[5][4] = {{"B", "H", "M", "D"},
                                             {"B", "Hkv", "N", "D"},
                                             {"B", "Hkv", "N", "D"},
                                             {"B", "H", "M", "D"},
                                             {"B", "H", "M", ""}};
  const HostView *views[] = {&q, &k, &v, &o, &lse};
  for (int i = 0; i < 5; ++i)
    for (int d = 0; d < views[i]->rank && d < 4; ++d) {
      int64_t declared = impl->lowered.declared[i][d];
      if (declared >= 0 && views[i]->sizes[d] != declared)
        return makeError("float64 reference of '" + impl->lowered.name + "': " + argNames[i] +
                         " dimension " + llvm::Twine(d) + " (" + dimNames[i][d] + ") is " +
                         llvm::Twine(views[i]->sizes[d]) + " but the kernel declares " +
                         llvm::Twine(declared));
    }
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
