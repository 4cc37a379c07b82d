//===- Float64Reference.cpp - a kernel's float64 reference, compiled ------===//
#include "tilefuse/runtime/Float64Reference.h"

#include "../DiagnosedSource.h"
#include "HostCompile.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "tilefuse/codegen/Passes.h"
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

/// Builds the passes that take kernel `name` (written form) to the LLVM dialect.
using ReferencePipeline = llvm::function_ref<void(OpPassManager &, llvm::StringRef name)>;

void buildForwardReferencePipeline(OpPassManager &pm, llvm::StringRef) {
  buildTileToF64ReferenceLLVMPipeline(pm);
}

/// Parses, specializes and checks the kernel, then runs `buildPipeline` on it.
llvm::Expected<LoweredReference>
lower(llvm::StringRef source, llvm::StringRef bufferName, const ReferenceOptions &options,
      ReferencePipeline buildPipeline = buildForwardReferencePipeline) {
  LoweredReference out;
  auto parsed =
      cpu::parseHostSource(source, bufferName, /*elementType=*/"", options.headDim, options.params);
  if (!parsed)
    return parsed.takeError();
  // The module before the context: moved in declaration order, destroyed in reverse.
  out.context = std::move(parsed->context);
  out.module = std::move(parsed->module);
  const std::string &diagnostics = parsed->diagnostics();
  func::FuncOp kernel = parsed->kernel;
  out.name = kernel.getSymName().str();
  auto argTypes = kernel.getArgumentTypes();
  if (argTypes.size() != cuda::abiTensorCount || kernel.getNumResults() != 0)
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
  buildPipeline(pm, out.name);
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

/// A lowered reference as a position-independent object for the baseline CPU.
static llvm::Expected<std::string> emitObject(LoweredReference &lowered,
                                              llvm::StringRef bufferName) {
  // The machine that loads it may have another CPU: the baseline, position-independent.
  auto machine = cpu::createHostTargetMachine(cpu::CpuTarget::Baseline,
                                              /*positionIndependent=*/true);
  if (!machine)
    return machine.takeError();
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> module =
      translateModuleToLLVMIR(*lowered.module, llvmContext, lowered.name + "_reference");
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

llvm::Expected<std::string> tilefuse::runtime::compileReferenceObject(
    llvm::StringRef source, llvm::StringRef bufferName, const ReferenceOptions &options,
    std::string *kernelName) {
  llvm::Expected<LoweredReference> lowered = lower(source, bufferName, options);
  if (!lowered)
    return lowered.takeError();
  if (kernelName)
    *kernelName = lowered->name;
  return emitObject(*lowered, bufferName);
}

//===----------------------------------------------------------------------===//
// The derived backward
//===----------------------------------------------------------------------===//

namespace {

/// The C entry point `_mlir_ciface_<kernel>_backward_reference`: Q, K, V, O, dO, LSE, dQ, dK, dV.
using BackwardEntry = void (*)(reference::MemRefDescriptor<4> *, reference::MemRefDescriptor<4> *,
                               reference::MemRefDescriptor<4> *, reference::MemRefDescriptor<4> *,
                               reference::MemRefDescriptor<4> *, reference::MemRefDescriptor<3> *,
                               reference::MemRefDescriptor<4> *, reference::MemRefDescriptor<4> *,
                               reference::MemRefDescriptor<4> *);

void buildBackwardReferencePipeline(OpPassManager &pm, llvm::StringRef name) {
  pm.addPass(createTileDeriveBackward());
  // Only the backward stays: the forward's whole-tensor reference would export
  // NAME_reference with another signature than the row reference's of the same name.
  pm.addPass(createSymbolPrivatizePass({(name + "_backward").str()}));
  pm.addPass(createSymbolDCEPass());
  pm.addPass(createTileToF64TensorReference());
  pm.addPass(createCanonicalizerPass());
  buildCpuLoopsToLLVMPipeline(pm);
}

template <int Rank> reference::MemRefDescriptor<Rank> describe(const HostView &view) {
  reference::MemRefDescriptor<Rank> d;
  d.allocated = d.aligned = static_cast<double *>(view.data);
  d.offset = 0;
  for (int i = 0; i < Rank; ++i) {
    d.sizes[i] = view.sizes[i];
    d.strides[i] = view.strides[i];
  }
  return d;
}

} // namespace

struct BackwardReferenceKernel::Impl {
  LoweredReference lowered;
  std::unique_ptr<ExecutionEngine> engine;
  BackwardEntry entry = nullptr;
};

BackwardReferenceKernel::BackwardReferenceKernel(std::unique_ptr<Impl> impl)
    : impl(std::move(impl)) {}
BackwardReferenceKernel::~BackwardReferenceKernel() = default;
llvm::StringRef BackwardReferenceKernel::name() const { return impl->lowered.name; }
const cuda::DeclaredSizes &BackwardReferenceKernel::declaredSizes() const {
  return impl->lowered.declared;
}

llvm::Expected<std::unique_ptr<BackwardReferenceKernel>>
BackwardReferenceKernel::compile(llvm::StringRef source, llvm::StringRef bufferName,
                                 const ReferenceOptions &options) {
  auto impl = std::make_unique<Impl>();
  llvm::Expected<LoweredReference> lowered =
      lower(source, bufferName, options, buildBackwardReferencePipeline);
  if (!lowered)
    return lowered.takeError();
  impl->lowered = std::move(*lowered);
  auto engine = cpu::createHostJit(*impl->lowered.module, options.cpuTarget);
  if (!engine)
    return makeError("JIT compilation of the float64 backward of " + bufferName +
                     " failed: " + llvm::toString(engine.takeError()));
  auto symbol =
      (*engine)->lookup(reference::referenceSymbol(impl->lowered.name + "_backward"));
  if (!symbol)
    return makeError("JIT: float64 backward entry not found: " +
                     llvm::toString(symbol.takeError()));
  impl->entry = reinterpret_cast<BackwardEntry>(*symbol);
  impl->engine = std::move(*engine);
  return std::unique_ptr<BackwardReferenceKernel>(new BackwardReferenceKernel(std::move(impl)));
}

llvm::Error BackwardReferenceKernel::run(const HostView &q, const HostView &k, const HostView &v,
                                         const HostView &o, const HostView &dO,
                                         const HostView &lse, const HostView &dq,
                                         const HostView &dk, const HostView &dv) const {
  std::string prefix = "float64 backward of '" + impl->lowered.name + "': ";
  cuda::AttentionShape shape{q.sizes[0], q.sizes[1], k.sizes[1], q.sizes[2], k.sizes[2],
                             q.sizes[3]};
  if (llvm::Error e = cuda::checkDeclaredSizes(impl->lowered.declared, shape, prefix))
    return e;
  struct Arg {
    const char *name;
    const HostView *view;
    const HostView *like; ///< must have the same sizes
    int rank;
  } args[] = {{"Q", &q, &q, 4},   {"K", &k, &k, 4},   {"V", &v, &v, 4},
              {"O", &o, &o, 4},   {"dO", &dO, &o, 4}, {"LSE", &lse, &lse, 3},
              {"dQ", &dq, &q, 4}, {"dK", &dk, &k, 4}, {"dV", &dv, &v, 4}};
  for (const Arg &arg : args) {
    if (!arg.view->data)
      return makeError(prefix + arg.name + " is null");
    if (arg.view->rank != arg.rank)
      return makeError(prefix + arg.name + " must have rank " + llvm::Twine(arg.rank));
    for (int d = 0; d < arg.rank; ++d) {
      if (arg.view->sizes[d] < 0 || arg.view->strides[d] < 0)
        return makeError(prefix + arg.name + ": negative size or stride in dimension " +
                         llvm::Twine(d));
      if (arg.view->sizes[d] != arg.like->sizes[d])
        return makeError(prefix + arg.name + " dimension " + llvm::Twine(d) +
                         " differs from the tensor it is the gradient of");
    }
  }
  int64_t B = q.sizes[0], H = q.sizes[1], M = q.sizes[2], Hkv = k.sizes[1], N = k.sizes[2];
  if (k.sizes[0] != B || v.sizes[0] != B || o.sizes[0] != B || lse.sizes[0] != B)
    return makeError(prefix + "Q, K, V, O and LSE must have the same batch size");
  if (Hkv == 0 || H % Hkv != 0)
    return makeError(prefix + "query heads (" + llvm::Twine(H) +
                     ") must be a multiple of key/value heads (" + llvm::Twine(Hkv) + ")");
  if (v.sizes[1] != Hkv || v.sizes[2] != N || k.sizes[3] != q.sizes[3])
    return makeError(prefix + "K and V must have the same heads and length, K Q's head dim");
  if (o.sizes[1] != H || o.sizes[2] != M || o.sizes[3] != v.sizes[3])
    return makeError(prefix + "O must be B x H x M x Dv");
  if (lse.sizes[1] != H || lse.sizes[2] != M)
    return makeError(prefix + "LSE must be B x H x M");
  auto q4 = describe<4>(q), k4 = describe<4>(k), v4 = describe<4>(v), o4 = describe<4>(o),
       do4 = describe<4>(dO), dq4 = describe<4>(dq), dk4 = describe<4>(dk),
       dv4 = describe<4>(dv);
  auto l3 = describe<3>(lse);
  impl->entry(&q4, &k4, &v4, &o4, &do4, &l3, &dq4, &dk4, &dv4);
  return llvm::Error::success();
}

llvm::Expected<std::string> tilefuse::runtime::compileBackwardReferenceObject(
    llvm::StringRef source, llvm::StringRef bufferName, const ReferenceOptions &options,
    std::string *kernelName) {
  llvm::Expected<LoweredReference> lowered =
      lower(source, bufferName, options, buildBackwardReferencePipeline);
  if (!lowered)
    return lowered.takeError();
  if (kernelName)
    *kernelName = lowered->name;
  return emitObject(*lowered, bufferName);
}
