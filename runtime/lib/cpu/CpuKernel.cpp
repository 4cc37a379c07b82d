//===- CpuKernel.cpp - attention kernels on the CPU reference backend -----===//
#include "tilefuse/runtime/CpuKernel.h"

#include "../DiagnosedSource.h"
#include "HostCompile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "tilefuse/codegen/Passes.h"
#include "tilefuse/dialect/TileOps.h"
#include "tilefuse/passes/Passes.h"
#include "tilefuse/passes/Pipelines.h"
#include "llvm/Support/TargetSelect.h"

#include <mutex>

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::runtime;

namespace {

thread_local BlockCounts *activeCounts = nullptr;

extern "C" void tilefuseCpuBlockEvent(int32_t kind) {
  if (!activeCounts)
    return;
  if (kind == static_cast<int32_t>(tile::BlockClass::Full))
    ++activeCounts->full;
  else
    ++activeCounts->partial;
}

/// One memref argument as the kernel declares it: static sizes (or -1) and static strides.
struct ArgSpec {
  std::string name;
  int rank = 0;
  std::array<int64_t, 4> sizes{-1, -1, -1, -1};
  std::array<int64_t, 4> strides{-1, -1, -1, -1};
  Type elementType;
};

/// The memref descriptor MLIR's C interface passes for a ranked memref.
template <int N> struct Descriptor {
  void *allocated;
  void *aligned;
  int64_t offset;
  int64_t sizes[N];
  int64_t strides[N];
};

llvm::Error makeError(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

} // namespace

struct CpuKernel::Impl {
  std::unique_ptr<MLIRContext> context;
  std::unique_ptr<ExecutionEngine> engine;
  std::string name;
  std::vector<ArgSpec> args;
  ElementType elt = ElementType::BF16;
  int64_t headDim = 0;
  using KernelFn = void (*)(Descriptor<4> *, Descriptor<4> *, Descriptor<4> *, Descriptor<4> *,
                            Descriptor<3> *);
  /// tile-split-kv's entry: the partial O and LSE, the arrival counters and the split count.
  using SplitKernelFn = void (*)(Descriptor<4> *, Descriptor<4> *, Descriptor<4> *,
                                 Descriptor<4> *, Descriptor<3> *, Descriptor<4> *,
                                 Descriptor<3> *, Descriptor<3> *, int64_t);
  KernelFn fn = nullptr;
  SplitKernelFn splitFn = nullptr;
  int64_t blockM = 64;
};

CpuKernel::CpuKernel(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
CpuKernel::~CpuKernel() = default;
llvm::StringRef CpuKernel::name() const { return impl->name; }
ElementType CpuKernel::elementType() const { return impl->elt; }
int64_t CpuKernel::headDim() const { return impl->headDim; }

llvm::Expected<std::unique_ptr<CpuKernel>>
CpuKernel::compile(llvm::StringRef source, llvm::StringRef bufferName,
                   const CpuCompileOptions &options) {
  auto impl = std::make_unique<Impl>();
  auto parsed = cpu::parseHostSource(source, bufferName, options.elementType, options.headDim,
                                     options.params);
  if (!parsed)
    return parsed.takeError();
  impl->context = std::move(parsed->context);
  MLIRContext &ctx = *impl->context;
  const std::string &diagnostics = parsed->diagnostics();
  OwningOpRef<ModuleOp> &module = parsed->module;
  func::FuncOp kernel = parsed->kernel;
  impl->name = kernel.getSymName().str();
  static const char *kArgNames[] = {"Q", "K", "V", "O", "LSE"};
  static const int kRanks[] = {4, 4, 4, 4, 3};
  auto argTypes = kernel.getArgumentTypes();
  if (argTypes.size() != 5 || kernel.getNumResults() != 0)
    return makeError(bufferName + ": kernel @" + impl->name +
                     " must take (Q, K, V, O, LSE) memrefs and return nothing");
  for (unsigned i = 0; i < 5; ++i) {
    auto mt = dyn_cast<MemRefType>(argTypes[i]);
    if (!mt || mt.getRank() != kRanks[i])
      return makeError(bufferName + ": argument " + kArgNames[i] + " of @" + impl->name +
                       " must be a rank-" + llvm::Twine(kRanks[i]) + " memref");
    ArgSpec spec;
    spec.name = kArgNames[i];
    spec.rank = mt.getRank();
    spec.elementType = mt.getElementType();
    SmallVector<int64_t> strides;
    int64_t offset;
    if (failed(mt.getStridesAndOffset(strides, offset)))
      return makeError(bufferName + ": argument " + spec.name + " has a non-strided layout");
    for (int d = 0; d < spec.rank; ++d) {
      spec.sizes[d] = mt.isDynamicDim(d) ? -1 : mt.getDimSize(d);
      spec.strides[d] = ShapedType::isDynamic(strides[d]) ? -1 : strides[d];
    }
    impl->args.push_back(spec);
  }
  Type elt = impl->args[0].elementType;
  impl->elt = elt.isBF16() ? ElementType::BF16 : elt.isF16() ? ElementType::F16 : ElementType::F32;
  for (int i : {1, 2, 3})
    if (impl->args[i].elementType != elt)
      return makeError(bufferName + ": Q, K, V and O must share one element type");
  if (!impl->args[4].elementType.isF32())
    return makeError(bufferName + ": LSE must be f32");
  impl->headDim = impl->args[0].sizes[3];
  kernel->setAttr("llvm.emit_c_interface", UnitAttr::get(&ctx));

  PassManager pm(&ctx, ModuleOp::getOperationName());
  FrontEndOptions feo;
  feo.blockM = options.blockM;
  feo.blockN = options.blockN;
  feo.instrument = options.instrument;
  feo.splitKv = options.splitKv;
  impl->blockM = options.blockM;
  buildTileToCpuPipeline(pm, feo);
  if (failed(pm.run(*module)))
    return makeError("compiling " + bufferName + " failed:\n" + diagnostics);

  auto engine = cpu::createHostJit(*module, options.cpuTarget);
  if (!engine)
    return makeError("JIT compilation of " + bufferName +
                     " failed: " + llvm::toString(engine.takeError()) + "\n" + diagnostics);
  (*engine)->registerSymbols([](llvm::orc::MangleAndInterner interner) {
    llvm::orc::SymbolMap map;
    map[interner(kBlockEventSymbol)] = {llvm::orc::ExecutorAddr::fromPtr(&tilefuseCpuBlockEvent),
                                        llvm::JITSymbolFlags::Exported};
    return map;
  });
  auto sym = (*engine)->lookup("_mlir_ciface_" + impl->name);
  if (!sym)
    return makeError("JIT: kernel entry not found: " + llvm::toString(sym.takeError()));
  if (options.splitKv)
    impl->splitFn = reinterpret_cast<Impl::SplitKernelFn>(*sym);
  else
    impl->fn = reinterpret_cast<Impl::KernelFn>(*sym);
  impl->engine = std::move(*engine);
  return std::unique_ptr<CpuKernel>(new CpuKernel(std::move(impl)));
}

llvm::Error CpuKernel::run(const HostView &q, const HostView &k, const HostView &v,
                           const HostView &o, const HostView &lse, BlockCounts *counts,
                           int64_t kvSplits) const {
  if (kvSplits < 1 || (!impl->splitFn && kvSplits != 1))
    return makeError("kvSplits must be 1" + llvm::Twine(impl->splitFn ? " or more" : "") +
                     " for kernel @" + impl->name + ", not " + llvm::Twine(kvSplits) +
                     (impl->splitFn ? "" : " (compile it with splitKv to split the keys)"));
  const HostView *views[] = {&q, &k, &v, &o, &lse};
  for (int i = 0; i < 5; ++i) {
    const ArgSpec &spec = impl->args[i];
    const HostView &view = *views[i];
    if (!view.data)
      return makeError(spec.name + " is null");
    if (view.rank != spec.rank)
      return makeError(spec.name + " must have rank " + llvm::Twine(spec.rank));
    for (int d = 0; d < spec.rank; ++d) {
      if (view.sizes[d] < 0 || view.strides[d] < 0)
        return makeError(spec.name + ": negative size or stride in dimension " + llvm::Twine(d));
      if (spec.sizes[d] >= 0 && view.sizes[d] != spec.sizes[d])
        return makeError(spec.name + ": dimension " + llvm::Twine(d) + " is " +
                         llvm::Twine(view.sizes[d]) + " but kernel @" + impl->name +
                         " was written for " + llvm::Twine(spec.sizes[d]));
      if (spec.strides[d] >= 0 && view.strides[d] != spec.strides[d])
        return makeError(spec.name + ": stride " + llvm::Twine(d) + " must be " +
                         llvm::Twine(spec.strides[d]));
    }
  }
  int64_t B = q.sizes[0], H = q.sizes[1], M = q.sizes[2], D = q.sizes[3];
  int64_t Hkv = k.sizes[1], N = k.sizes[2];
  if (k.sizes[0] != B || v.sizes[0] != B || o.sizes[0] != B || lse.sizes[0] != B)
    return makeError("Q, K, V, O and LSE must have the same batch size");
  if (Hkv == 0 || H % Hkv != 0)
    return makeError("query heads (" + llvm::Twine(H) +
                     ") must be a multiple of key/value heads (" + llvm::Twine(Hkv) + ")");
  if (v.sizes[1] != Hkv || v.sizes[2] != N)
    return makeError("K and V must have the same heads and length");
  if (k.sizes[3] != D)
    return makeError("K's head dimension must equal Q's");
  if (o.sizes[1] != H || o.sizes[2] != M || o.sizes[3] != v.sizes[3])
    return makeError("O must be B x H x M x Dv");
  if (lse.sizes[1] != H || lse.sizes[2] != M)
    return makeError("LSE must be B x H x M");

  Descriptor<4> d4[4];
  for (int i = 0; i < 4; ++i) {
    d4[i].allocated = d4[i].aligned = views[i]->data;
    d4[i].offset = 0;
    for (int d = 0; d < 4; ++d) {
      d4[i].sizes[d] = views[i]->sizes[d];
      d4[i].strides[d] = views[i]->strides[d];
    }
  }
  Descriptor<3> d3;
  d3.allocated = d3.aligned = lse.data;
  d3.offset = 0;
  for (int d = 0; d < 3; ++d) {
    d3.sizes[d] = lse.sizes[d];
    d3.strides[d] = lse.strides[d];
  }
  BlockCounts local;
  activeCounts = counts ? counts : &local;
  if (!impl->splitFn) {
    impl->fn(&d4[0], &d4[1], &d4[2], &d4[3], &d3);
    activeCounts = nullptr;
    return llvm::Error::success();
  }
  // The split workspace (tile-split-kv): partial O [S*B, H, M, Dv] and LSE [S*B, H, M] in f32,
  // contiguous, and one arrival counter per row block, zero before the launch.
  int64_t S = kvSplits, Dv = o.sizes[3], rowBlocks = (M + impl->blockM - 1) / impl->blockM;
  std::vector<float> outputPart(size_t(S * B * H * M * Dv)), lsePart(size_t(S * B * H * M));
  std::vector<int32_t> counters(size_t(B * H * rowBlocks), 0);
  auto contiguous = [](auto &d, void *data, std::initializer_list<int64_t> sizes) {
    d.allocated = d.aligned = data;
    d.offset = 0;
    int i = 0;
    for (int64_t size : sizes)
      d.sizes[i++] = size;
    int64_t stride = 1;
    for (int j = i - 1; j >= 0; --j) {
      d.strides[j] = stride;
      stride *= d.sizes[j];
    }
  };
  Descriptor<4> outputPartD;
  Descriptor<3> lsePartD, countersD;
  contiguous(outputPartD, outputPart.data(), {S * B, H, M, Dv});
  contiguous(lsePartD, lsePart.data(), {S * B, H, M});
  contiguous(countersD, counters.data(), {B, H, rowBlocks});
  impl->splitFn(&d4[0], &d4[1], &d4[2], &d4[3], &d3, &outputPartD, &lsePartD, &countersD, S);
  activeCounts = nullptr;
  // The merging program of each row block resets its counter: a counter left over means a row
  // block that never merged.
  if (llvm::any_of(counters, [](int32_t c) { return c != 0; }))
    return makeError("split-KV: a row block's arrival counter was not reset by its merge");
  return llvm::Error::success();
}
