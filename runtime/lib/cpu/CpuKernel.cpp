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
#include "tilefuse/runtime/device/LaunchAbi.h"
#include "llvm/Support/TargetSelect.h"

#include <array>
#include <mutex>
#include <utility>

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::runtime;

namespace {

llvm::Error makeError(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

/// Calls a kernel entry of `N` descriptor addresses, and (`Split`) the split count after them.
template <bool Split, size_t... I>
void callEntry(void *entry, const std::array<void *, sizeof...(I)> &arguments, int64_t splits,
               std::index_sequence<I...>) {
  if constexpr (Split) {
    using Fn = void (*)(decltype((void)I, static_cast<void *>(nullptr))..., int64_t);
    reinterpret_cast<Fn>(entry)(arguments[I]..., splits);
  } else {
    using Fn = void (*)(decltype((void)I, static_cast<void *>(nullptr))...);
    reinterpret_cast<Fn>(entry)(arguments[I]...);
  }
}

/// The entry's arguments in order: 5 views, [2 paged], [2 varlen], [3 split + the count].
void callEntry(void *entry, llvm::ArrayRef<void *> arguments, bool split, int64_t splits) {
  auto call = [&](auto count) {
    constexpr size_t n = decltype(count)::value;
    std::array<void *, n> fixed;
    std::copy(arguments.begin(), arguments.end(), fixed.begin());
    if (split)
      callEntry<true>(entry, fixed, splits, std::make_index_sequence<n>());
    else
      callEntry<false>(entry, fixed, splits, std::make_index_sequence<n>());
  };
  switch (arguments.size()) {
  case 5: return call(std::integral_constant<size_t, 5>());
  case 7: return call(std::integral_constant<size_t, 7>());
  case 8: return call(std::integral_constant<size_t, 8>());
  case 9: return call(std::integral_constant<size_t, 9>());
  case 10: return call(std::integral_constant<size_t, 10>());
  case 12: return call(std::integral_constant<size_t, 12>());
  }
  llvm_unreachable("a kernel entry takes 5, 7, 9 views (+3 split)");
}

} // namespace

struct CpuKernel::Impl {
  std::unique_ptr<MLIRContext> context;
  std::unique_ptr<ExecutionEngine> engine;
  std::string name;
  std::vector<cpu::ArgSpec> args;
  ElementType elt = ElementType::BF16;
  int64_t headDim = 0;
  using D4 = cpu::Descriptor<4>;
  using D3 = cpu::Descriptor<3>;
  using D2 = cpu::Descriptor<2>;
  using D1 = cpu::Descriptor<1>;
  /// The entry's C interface: (Q, K, V, O, LSE), then tile-paged-kv's page table and lengths,
  /// then tile-varlen's query and key offsets, then tile-split-kv's partial O and LSE, arrival
  /// counters and split count: every argument a descriptor's address but the count (callEntry).
  void *entry = nullptr;
  bool split = false, paged = false, varlen = false;
  int64_t pageSize = 0; ///< fixed at compile time (0: any)
  int64_t blockM = 64;
  bool packGqa = false;
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
  // A kernel written paged (or varlen) by hand takes the page table and lengths (the sequence
  // offsets) after the views; written both, the table and lengths, then the offsets.
  bool written = (options.pagedKv || options.varlen) &&
                 argTypes.size() == 5 + (options.pagedKv ? 2u : 0u) + (options.varlen ? 2u : 0u);
  if ((argTypes.size() != 5 && !written) || kernel.getNumResults() != 0)
    return makeError(bufferName + ": kernel @" + impl->name +
                     " must take (Q, K, V, O, LSE) memrefs" +
                     (options.pagedKv && options.varlen
                          ? " (and, written paged and varlen, the page table, lengths, query and "
                            "key offsets)"
                      : options.pagedKv ? " (and, written paged, the page table and lengths)"
                      : options.varlen  ? " (and, written varlen, the query and key offsets)"
                                        : "") +
                     " and return nothing");
  for (unsigned i = 0; i < 5; ++i) {
    auto spec = cpu::specOf(argTypes[i], kArgNames[i], kRanks[i], impl->name, bufferName);
    if (!spec)
      return spec.takeError();
    impl->args.push_back(*spec);
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
  feo.packGqa = options.packGqa;
  feo.pagedKv = options.pagedKv;
  feo.pageSize = options.pageSize;
  feo.varlen = options.varlen;
  feo.descendingRows = options.descendingRows;
  feo.alignRowsToEnd = options.alignRowsToEnd;
  feo.groupedRows = options.groupedRows;
  feo.rowGroupBytes = options.rowGroupBytes;
  impl->pageSize = options.pageSize;
  impl->blockM = options.blockM;
  impl->packGqa = options.packGqa;
  buildTileToCpuPipeline(pm, feo);
  if (failed(pm.run(*module)))
    return makeError("compiling " + bufferName + " failed:\n" + diagnostics);

  auto engine = cpu::createHostJit(*module, options.cpuTarget);
  if (!engine)
    return makeError("JIT compilation of " + bufferName +
                     " failed: " + llvm::toString(engine.takeError()) + "\n" + diagnostics);
  cpu::registerBlockEvents(**engine);
  auto sym = (*engine)->lookup("_mlir_ciface_" + impl->name);
  if (!sym)
    return makeError("JIT: kernel entry not found: " + llvm::toString(sym.takeError()));
  impl->entry = reinterpret_cast<void *>(*sym);
  impl->split = options.splitKv;
  impl->paged = options.pagedKv;
  impl->varlen = options.varlen;
  impl->engine = std::move(*engine);
  return std::unique_ptr<CpuKernel>(new CpuKernel(std::move(impl)));
}

llvm::Error CpuKernel::run(const HostView &q, const HostView &k, const HostView &v,
                           const HostView &o, const HostView &lse, BlockCounts *counts,
                           int64_t kvSplits, const PagedKV *paged, const Varlen *varlen) const {
  if (kvSplits < 1 || (!impl->split && kvSplits != 1))
    return makeError("kvSplits must be 1" + llvm::Twine(impl->split ? " or more" : "") +
                     " for kernel @" + impl->name + ", not " + llvm::Twine(kvSplits) +
                     (impl->split ? "" : " (compile it with splitKv to split the keys)"));
  if (impl->paged != (paged != nullptr))
    return makeError("kernel @" + impl->name +
                     (impl->paged ? " reads a paged K/V cache: pass its page table and lengths"
                                  : " reads contiguous K and V: compile it with pagedKv to pass "
                                    "a page table"));
  if (impl->varlen != (varlen != nullptr))
    return makeError("kernel @" + impl->name +
                     (impl->varlen ? " runs on a packed batch: pass its sequence offsets"
                                   : " runs on a padded batch: compile it with varlen to pass "
                                     "sequence offsets"));
  const HostView *views[] = {&q, &k, &v, &o, &lse};
  for (int i = 0; i < 5; ++i)
    if (llvm::Error e = cpu::checkView(impl->args[i], *views[i], impl->name))
      return e;
  if (llvm::Error e = paged    ? cpu::checkPagedShapes(q, k, v, o, lse, *paged)
                      : varlen ? llvm::Error::success()
                               : cpu::checkShapes(q, k, v, o, lse))
    return e;
  if (varlen)
    if (llvm::Error e = cpu::checkVarlenShapes(q, k, v, o, lse, *varlen, /*pagedKeys=*/paged))
      return e;
  if (paged && impl->pageSize && k.sizes[2] != impl->pageSize)
    return makeError("kernel @" + impl->name + " was compiled for pages of " +
                     llvm::Twine(impl->pageSize) + " rows, not " + llvm::Twine(k.sizes[2]));
  int64_t B = q.sizes[0], H = q.sizes[1], Hkv = k.sizes[1], M = q.sizes[2];
  cpu::Descriptor<4> d4[4];
  for (int i = 0; i < 4; ++i)
    d4[i] = cpu::describe<4>(*views[i]);
  cpu::Descriptor<3> d3 = cpu::describe<3>(lse);
  if (varlen) {
    // Packed batches (tile.load `sequences`): the batch index counts the packed rows, so the
    // batch stride is the row stride and the batch size the rows (the last offset). Paged,
    // K and V are the caches, not packed.
    int64_t keyRows = paged ? 0 : varlen->cuSeqlensK[B];
    int64_t rows[] = {varlen->cuSeqlensQ[B], keyRows, keyRows, varlen->cuSeqlensQ[B]};
    for (int i = 0; i < 4; ++i) {
      if (paged && (i == 1 || i == 2))
        continue;
      d4[i].sizes[0] = std::max<int64_t>(rows[i], 1);
      d4[i].strides[0] = d4[i].strides[2];
    }
    d3.sizes[0] = std::max<int64_t>(rows[0], 1);
    d3.strides[0] = d3.strides[2];
  }
  Impl::D2 table{};
  Impl::D1 lengths{};
  if (paged) {
    table.allocated = table.aligned = const_cast<int32_t *>(paged->pageTable);
    table.sizes[0] = B;
    table.sizes[1] = paged->pagesPerSequence;
    table.strides[0] = paged->tableStride;
    table.strides[1] = 1;
    lengths.allocated = lengths.aligned = const_cast<int32_t *>(paged->kvLengths);
    lengths.sizes[0] = B;
    lengths.strides[0] = 1;
  }
  cpu::CountBlockEvents counting(counts);
  std::vector<void *> arguments = {&d4[0], &d4[1], &d4[2], &d4[3], &d3};
  if (paged)
    arguments.insert(arguments.end(), {&table, &lengths});
  // A paged varlen kernel does not read the key offsets (they may be null).
  auto describeOffsets = [&](const int32_t *pointer) {
    Impl::D1 d{};
    d.allocated = d.aligned = const_cast<int32_t *>(pointer);
    d.sizes[0] = B + 1;
    d.strides[0] = 1;
    return d;
  };
  Impl::D1 offsets[2];
  if (varlen) {
    offsets[0] = describeOffsets(varlen->cuSeqlensQ);
    offsets[1] = describeOffsets(varlen->cuSeqlensK);
    arguments.insert(arguments.end(), {&offsets[0], &offsets[1]});
  }
  if (!impl->split) {
    callEntry(impl->entry, arguments, /*split=*/false, 0);
    return llvm::Error::success();
  }
  // The split workspace (tile-split-kv): partial O [S*B, H, M, Dv] and LSE [S*B, H, M] in f32,
  // contiguous, and one arrival counter per program of the grid, zero before the launch.
  int64_t S = kvSplits, Dv = o.sizes[3];
  launch_abi::Grid grid = launch_abi::programGrid(B, H, Hkv, M, impl->blockM, impl->packGqa);
  std::vector<float> outputPart(size_t(S * B * H * M * Dv)), lsePart(size_t(S * B * H * M));
  std::vector<int32_t> counters(size_t(grid.batch * grid.heads * grid.rowBlocks), 0);
  auto outputPartD = cpu::describe<4>(HostView::contiguous(outputPart.data(), {S * B, H, M, Dv}));
  auto lsePartD = cpu::describe<3>(HostView::contiguous(lsePart.data(), {S * B, H, M, 0}, 3));
  auto countersD = cpu::describe<3>(HostView::contiguous(
      counters.data(), {grid.batch, grid.heads, grid.rowBlocks, 0}, 3));
  arguments.insert(arguments.end(), {&outputPartD, &lsePartD, &countersD});
  callEntry(impl->entry, arguments, /*split=*/true, S);
  // The merging program of each row block resets its counter: a counter left over means a row
  // block that never merged.
  if (llvm::any_of(counters, [](int32_t c) { return c != 0; }))
    return makeError("split-KV: a row block's arrival counter was not reset by its merge");
  return llvm::Error::success();
}
