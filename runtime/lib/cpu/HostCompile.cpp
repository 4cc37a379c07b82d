//===- HostCompile.cpp - what the CPU compilers share ---------------------===//
#include "HostCompile.h"

#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/Pass/PassManager.h"
#include "tilefuse/codegen/Passes.h"
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

llvm::Expected<ArgSpec> specOf(Type type, llvm::StringRef name, int rank, llvm::StringRef kernel,
                               llvm::StringRef bufferName) {
  auto view = dyn_cast<MemRefType>(type);
  if (!view || view.getRank() != rank)
    return makeError(bufferName + ": argument " + name + " of @" + kernel + " must be a rank-" +
                     llvm::Twine(rank) + " memref");
  ArgSpec spec;
  spec.name = name.str();
  spec.rank = rank;
  spec.elementType = view.getElementType();
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(view.getStridesAndOffset(strides, offset)))
    return makeError(bufferName + ": argument " + name + " has a non-strided layout");
  for (int d = 0; d < rank; ++d) {
    spec.sizes[d] = view.isDynamicDim(d) ? -1 : view.getDimSize(d);
    spec.strides[d] = ShapedType::isDynamic(strides[d]) ? -1 : strides[d];
  }
  return spec;
}

llvm::Error checkView(const ArgSpec &spec, const HostView &view, llvm::StringRef kernel) {
  if (!view.data)
    return makeError(spec.name + " is null");
  if (view.rank != spec.rank)
    return makeError(spec.name + " must have rank " + llvm::Twine(spec.rank));
  for (int d = 0; d < spec.rank; ++d) {
    if (view.sizes[d] < 0 || view.strides[d] < 0)
      return makeError(spec.name + ": negative size or stride in dimension " + llvm::Twine(d));
    if (spec.sizes[d] >= 0 && view.sizes[d] != spec.sizes[d])
      return makeError(spec.name + ": dimension " + llvm::Twine(d) + " is " +
                       llvm::Twine(view.sizes[d]) + " but kernel @" + kernel +
                       " was written for " + llvm::Twine(spec.sizes[d]));
    if (spec.strides[d] >= 0 && view.strides[d] != spec.strides[d])
      return makeError(spec.name + ": stride " + llvm::Twine(d) + " must be " +
                       llvm::Twine(spec.strides[d]));
  }
  return llvm::Error::success();
}

/// What contiguous and paged launches share: O and LSE against Q, the head grouping, and K's
/// head dimension.
static llvm::Error checkQueryShapes(const HostView &q, const HostView &k, const HostView &v,
                                    const HostView &o, const HostView &lse) {
  int64_t B = q.sizes[0], H = q.sizes[1], M = q.sizes[2], Hkv = k.sizes[1];
  if (o.sizes[0] != B || lse.sizes[0] != B)
    return makeError("Q, O and LSE must have the same batch size");
  if (Hkv == 0 || H % Hkv != 0)
    return makeError("query heads (" + llvm::Twine(H) +
                     ") must be a multiple of key/value heads (" + llvm::Twine(Hkv) + ")");
  if (k.sizes[3] != q.sizes[3])
    return makeError("K's head dimension must equal Q's");
  if (o.sizes[1] != H || o.sizes[2] != M || o.sizes[3] != v.sizes[3])
    return makeError("O must be B x H x M x Dv");
  if (lse.sizes[1] != H || lse.sizes[2] != M)
    return makeError("LSE must be B x H x M");
  return llvm::Error::success();
}

llvm::Error checkShapes(const HostView &q, const HostView &k, const HostView &v,
                        const HostView &o, const HostView &lse) {
  int64_t B = q.sizes[0], Hkv = k.sizes[1], N = k.sizes[2];
  if (k.sizes[0] != B || v.sizes[0] != B)
    return makeError("Q, K, V, O and LSE must have the same batch size");
  if (v.sizes[1] != Hkv || v.sizes[2] != N)
    return makeError("K and V must have the same heads and length");
  return checkQueryShapes(q, k, v, o, lse);
}

llvm::Error checkPagedShapes(const HostView &q, const HostView &k, const HostView &v,
                             const HostView &o, const HostView &lse, const PagedKV &paged) {
  int64_t B = q.sizes[0], Hkv = k.sizes[1];
  int64_t pages = k.sizes[0], pageSize = k.sizes[2];
  if (v.sizes[0] != pages || v.sizes[1] != Hkv || v.sizes[2] != pageSize)
    return makeError("the K and V caches must have the same pages, heads and page size");
  if (pageSize < 1)
    return makeError("a paged cache's pages must hold at least one row");
  if (llvm::Error e = checkQueryShapes(q, k, v, o, lse))
    return e;
  if ((paged.pageSize && paged.pageSize != pageSize) || (paged.pages && paged.pages != pages))
    return makeError("the paged launch's page size and pages (" + llvm::Twine(paged.pageSize) +
                     ", " + llvm::Twine(paged.pages) + ") differ from the caches' (" +
                     llvm::Twine(pageSize) + ", " + llvm::Twine(pages) + ")");
  if (!paged.pageTable || !paged.kvLengths)
    return makeError("a paged launch needs the page table and the lengths");
  if (paged.pagesPerSequence < 0 || (B > 1 && paged.tableStride < paged.pagesPerSequence))
    return makeError("the page table's rows (stride " + llvm::Twine(paged.tableStride) +
                     ") must hold pagesPerSequence (" + llvm::Twine(paged.pagesPerSequence) +
                     ") entries");
  // Host memory: every entry a sequence reads is checked, so a bad table is an error here, not
  // a read out of bounds.
  for (int64_t b = 0; b < B; ++b) {
    int64_t length = paged.kvLengths[b];
    if (length < 0 || length > paged.pagesPerSequence * pageSize)
      return makeError("batch " + llvm::Twine(b) + " has " + llvm::Twine(length) +
                       " key/value rows; its table row holds " +
                       llvm::Twine(paged.pagesPerSequence) + " pages of " +
                       llvm::Twine(pageSize));
    for (int64_t i = 0; i * pageSize < length; ++i) {
      int64_t page = paged.pageTable[b * paged.tableStride + i];
      if (page < 0 || page >= pages)
        return makeError("page table entry [" + llvm::Twine(b) + ", " + llvm::Twine(i) +
                         "] is " + llvm::Twine(page) + ", not a page of the cache (0 to " +
                         llvm::Twine(pages - 1) + ")");
    }
  }
  return llvm::Error::success();
}

llvm::Error checkVarlenShapes(const HostView &q, const HostView &k, const HostView &v,
                              const HostView &o, const HostView &lse, const Varlen &varlen,
                              bool pagedKeys) {
  if (llvm::Error e = pagedKeys ? llvm::Error::success() : checkShapes(q, k, v, o, lse))
    return e;
  if (!varlen.cuSeqlensQ || (!pagedKeys && !varlen.cuSeqlensK))
    return makeError("a varlen launch needs the queries' and the keys' sequence offsets");
  // Host memory: the offsets are checked, so a bad one is an error here, not a read out of
  // bounds.
  int64_t B = q.sizes[0];
  // Paged, the keys are the caches' lengths (checkPagedShapes): only the queries' offsets.
  for (auto [offsets, name, limit, total, checked] :
       {std::tuple(varlen.cuSeqlensQ, "query", q.sizes[2], varlen.totalQ, true),
        std::tuple(varlen.cuSeqlensK, "key", k.sizes[2], varlen.totalK, !pagedKeys)}) {
    if (!checked)
      continue;
    if (offsets[B] > total)
      return makeError(llvm::Twine("the ") + name + " sequences end at row " +
                       llvm::Twine(offsets[B]) + ", past the packed tensor's " +
                       llvm::Twine(total) + " rows");
    if (offsets[0] < 0)
      return makeError(llvm::Twine("the ") + name + " sequence offsets start at " +
                       llvm::Twine(offsets[0]) + ", below 0");
    for (int64_t b = 0; b < B; ++b) {
      int64_t length = int64_t(offsets[b + 1]) - offsets[b];
      if (length < 0 || length > limit)
        return makeError(llvm::Twine("sequence ") + llvm::Twine(b) + " has " +
                         llvm::Twine(length) + " " + name + " rows (offsets " +
                         llvm::Twine(offsets[b]) + " to " + llvm::Twine(offsets[b + 1]) +
                         "); the views' " + (offsets == varlen.cuSeqlensQ ? "M" : "N") +
                         " bounds them at " + llvm::Twine(limit));
    }
  }
  return llvm::Error::success();
}

static thread_local BlockCounts *activeCounts = nullptr;

extern "C" void tilefuseCpuBlockEvent(int32_t kind) {
  if (!activeCounts)
    return;
  if (kind == static_cast<int32_t>(tile::BlockClass::Full))
    ++activeCounts->full;
  else
    ++activeCounts->partial;
}

void registerBlockEvents(ExecutionEngine &engine) {
  engine.registerSymbols([](llvm::orc::MangleAndInterner interner) {
    llvm::orc::SymbolMap map;
    map[interner(kBlockEventSymbol)] = {llvm::orc::ExecutorAddr::fromPtr(&tilefuseCpuBlockEvent),
                                        llvm::JITSymbolFlags::Exported};
    return map;
  });
}

CountBlockEvents::CountBlockEvents(BlockCounts *counts) { activeCounts = counts; }
CountBlockEvents::~CountBlockEvents() { activeCounts = nullptr; }

} // namespace tilefuse::runtime::cpu
