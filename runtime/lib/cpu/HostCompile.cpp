//===- HostCompile.cpp - what the CPU compilers share ---------------------===//
#include "HostCompile.h"

#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/Pass/PassManager.h"
#include "tilefuse/dialect/TileOps.h"
#include "tilefuse/passes/Passes.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"

#include <mutex>

using namespace mlir;

namespace tilefuse::runtime::cpu {

static llvm::Error makeError(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

llvm::Expected<CpuTarget> parseCpuTarget(llvm::StringRef name) {
  if (name == "host")
    return CpuTarget::Host;
  if (name == "baseline")
    return CpuTarget::Baseline;
  return makeError("CPU target must be 'host' or 'baseline', not '" + name + "'");
}

llvm::Expected<std::unique_ptr<llvm::TargetMachine>>
createHostTargetMachine(CpuTarget target, bool positionIndependent) {
  static std::once_flag nativeTargetOnce;
  std::call_once(nativeTargetOnce, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
  llvm::Expected<llvm::orc::JITTargetMachineBuilder> builder =
      target == CpuTarget::Host
          ? llvm::orc::JITTargetMachineBuilder::detectHost()
          : llvm::Expected<llvm::orc::JITTargetMachineBuilder>(
                llvm::orc::JITTargetMachineBuilder(llvm::Triple(llvm::sys::getProcessTriple())));
  if (!builder)
    return builder.takeError();
  if (target == CpuTarget::Baseline) {
    // No optional features: what every CPU of the architecture runs.
    builder->setCPU(builder->getTargetTriple().isX86() ? "x86-64" : "generic");
    builder->getFeatures() = llvm::SubtargetFeatures();
  }
  if (positionIndependent)
    builder->setRelocationModel(llvm::Reloc::PIC_);
  return builder->createTargetMachine();
}

llvm::Expected<std::unique_ptr<ExecutionEngine>> createHostJit(ModuleOp module,
                                                               llvm::StringRef target) {
  llvm::Expected<CpuTarget> cpu = parseCpuTarget(target);
  if (!cpu)
    return cpu.takeError();
  auto machine = createHostTargetMachine(*cpu, /*positionIndependent=*/false);
  if (!machine)
    return machine.takeError();
  ExecutionEngineOptions options;
  options.transformer = makeOptimizingTransformer(/*optLevel=*/2, /*sizeLevel=*/0, machine->get());
  return ExecutionEngine::create(module, options, std::move(*machine));
}

llvm::Error specialize(ModuleOp module, llvm::StringRef elementType, int64_t headDim,
                       llvm::ArrayRef<std::string> params, llvm::StringRef bufferName,
                       const std::string &diagnostics) {
  if (elementType.empty() && !headDim && params.empty())
    return llvm::Error::success();
  PassManager pm(module.getContext(), ModuleOp::getOperationName());
  TileSpecializeOptions options;
  options.elementType = elementType.str();
  options.headDim = headDim;
  options.params = llvm::to_vector(params);
  pm.addPass(createTileSpecialize(options));
  if (failed(pm.run(module)))
    return makeError("specializing " + bufferName + " failed:\n" + diagnostics);
  return llvm::Error::success();
}

llvm::Expected<func::FuncOp> findKernel(ModuleOp module, llvm::StringRef bufferName) {
  func::FuncOp kernel;
  for (auto fn : module.getOps<func::FuncOp>()) {
    if (fn.isExternal())
      continue;
    if (kernel)
      return makeError(bufferName + ": expected one kernel function, found @" +
                       kernel.getSymName() + " and @" + fn.getSymName());
    kernel = fn;
  }
  if (!kernel)
    return makeError(bufferName + ": no kernel function (func.func with a body)");
  return kernel;
}

llvm::Expected<HostSource> parseHostSource(llvm::StringRef source, llvm::StringRef bufferName,
                                           llvm::StringRef elementType, int64_t headDim,
                                           llvm::ArrayRef<std::string> params) {
  HostSource out;
  DialectRegistry registry;
  registerCompilerDialects(registry);
  out.context = std::make_unique<MLIRContext>(registry);
  out.context->loadDialect<tile::TileDialect, func::FuncDialect>();
  out.diagnosed = std::make_unique<DiagnosedSource>(*out.context, source, bufferName);
  out.module = out.diagnosed->parse();
  if (!out.module)
    return makeError("cannot parse " + bufferName + ":\n" + out.diagnostics());
  if (llvm::Error e =
          specialize(*out.module, elementType, headDim, params, bufferName, out.diagnostics()))
    return std::move(e);
  llvm::Expected<func::FuncOp> kernel = findKernel(*out.module, bufferName);
  if (!kernel)
    return kernel.takeError();
  out.kernel = *kernel;
  return out;
}

} // namespace tilefuse::runtime::cpu
