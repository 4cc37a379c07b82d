//===- Compiler.cpp - DSL text to PTX, in process -------------------------===//
#include "tilefuse/runtime/Compiler.h"

#include "DiagnosedSource.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "tilefuse/dialect/TileOps.h"
#include "tilefuse/passes/Passes.h"
#include "tilefuse/passes/Pipelines.h"
#include "tilefuse/passes/ScoreRegionCost.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

// From the generated BuildId.cpp (runtime/cmake/BuildId.cmake).
extern const char *const tilefuseBuildId;

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::runtime;

std::string CompiledKernel::metadataJson() const {
  llvm::json::Object o{{"name", name},         {"block_m", blockM},   {"block_n", blockN},
                       {"threads", threads},   {"head_dim", headDim}, {"dtype", dtype},
                       {"shared_bytes", sharedBytes},
                       {cuda::DeclaredSizes::jsonKey, declaredSizes.toJson()}};
  // Informational for readers (bench, tools); launches do not need it.
  if (!tiles.empty())
    o["tile_config"] = tiles.print();
  if (splitKv)
    o["split_kv"] = true;
  if (pagedKv)
    o["paged_kv"] = true;
  if (pageSize)
    o["page_size"] = pageSize;
  if (varlen)
    o["varlen"] = true;
  if (kvTma)
    o["kv_tma"] = true;
  if (qTma)
    o["q_tma"] = true;
  if (oTma)
    o["o_tma"] = true;
  if (persistent)
    o["persistent"] = true;
  if (!backwardPhase.empty())
    o["backward_phase"] = backwardPhase;
  if (deterministic)
    o["deterministic"] = true;
  // The grid depends on it (launch_abi::programGrid): a launch needs it, unlike tile_config.
  if (tiles.packGqa.value_or(false))
    o["pack_gqa"] = true;
  std::string out;
  llvm::raw_string_ostream os(out);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(o)));
  return out;
}

llvm::Expected<CompiledKernel> CompiledKernel::fromMetadataJson(llvm::StringRef json,
                                                               std::string ptx) {
  auto fail = [](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "kernel metadata: " + msg);
  };
  llvm::Expected<llvm::json::Value> value = llvm::json::parse(json);
  if (!value)
    return fail(llvm::toString(value.takeError()));
  const llvm::json::Object *o = value->getAsObject();
  if (!o)
    return fail("not a JSON object");
  CompiledKernel k;
  for (auto [key, field] : {std::pair{"name", &k.name}, std::pair{"dtype", &k.dtype}}) {
    std::optional<llvm::StringRef> v = o->getString(key);
    if (!v)
      return fail(llvm::Twine("missing string \"") + key + "\"");
    *field = v->str();
  }
  for (auto [key, field] : {std::pair{"block_m", &k.blockM}, std::pair{"block_n", &k.blockN},
                            std::pair{"threads", &k.threads}, std::pair{"head_dim", &k.headDim},
                            std::pair{"shared_bytes", &k.sharedBytes}}) {
    std::optional<int64_t> v = o->getInteger(key);
    if (!v)
      return fail(llvm::Twine("missing integer \"") + key + "\"");
    *field = *v;
  }
  const llvm::json::Value *declared = o->get(cuda::DeclaredSizes::jsonKey);
  if (!declared)
    return fail(llvm::Twine("missing \"") + cuda::DeclaredSizes::jsonKey + "\"");
  auto declaredSizes = cuda::DeclaredSizes::fromJson(*declared, "kernel metadata");
  if (!declaredSizes)
    return fail(cuda::takeReport(declaredSizes.takeError()).message);
  k.declaredSizes = *declaredSizes;
  if (std::optional<llvm::StringRef> text = o->getString("tile_config")) {
    auto tiles = TileConfig::parse(*text);
    if (!tiles)
      return fail("tile_config: " + llvm::toString(tiles.takeError()));
    k.tiles = *tiles;
  }
  k.splitKv = o->getBoolean("split_kv").value_or(false);
  k.pagedKv = o->getBoolean("paged_kv").value_or(false);
  k.pageSize = o->getInteger("page_size").value_or(0);
  k.varlen = o->getBoolean("varlen").value_or(false);
  k.kvTma = o->getBoolean("kv_tma").value_or(false);
  k.qTma = o->getBoolean("q_tma").value_or(false);
  k.oTma = o->getBoolean("o_tma").value_or(false);
  k.persistent = o->getBoolean("persistent").value_or(false);
  if (std::optional<llvm::StringRef> phase = o->getString("backward_phase"))
    k.backwardPhase = phase->str();
  k.deterministic = o->getBoolean("deterministic").value_or(false);
  k.ptx = std::move(ptx);
  return k;
}

llvm::Expected<std::string>
tilefuse::runtime::chipForComputeCapability(int major, int minor, llvm::StringRef deviceName) {
  if (major == 9 && minor == 0)
    return std::string("sm_90a");
  if (major == 8)
    return std::string("sm_80");
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "no tilefuse target for " + deviceName +
                                     " (compute capability " + llvm::Twine(major) + "." +
                                     llvm::Twine(minor) +
                                     "); tilefuse targets sm_90a (9.0) and sm_80 (8.x)");
}

void tilefuse::runtime::registerCompilerCLOptions() {
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
}

llvm::StringRef tilefuse::runtime::compilerVersion() {
  static const std::string version = std::string("tilefuse " TILEFUSE_VERSION " build ") +
                                     tilefuseBuildId + " LLVM " LLVM_VERSION_STRING;
  return version;
}

/// Writes `text` to `dir`/`name`; a dump is a debugging aid, so failures only warn.
static void dumpFile(llvm::StringRef dir, llvm::StringRef name, llvm::StringRef text) {
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, name);
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_Text);
  if (ec) {
    llvm::errs() << "tilefuse: cannot write IR dump " << path << ": " << ec.message() << "\n";
    return;
  }
  os << text;
}

/// The backward's configuration: FlashAttention-2's schedule, a warp per 16 rows; on sm_90a
/// its five products are warpgroup MMAs (Q and dO read from shared memory, P and dS written
/// there and read MN-major), elsewhere mma.sync. Br = Bc = 64, or, with warpgroup MMAs at head
/// dims up to 64, Br = Bc = 128: two warpgroups, half the dQ reductions and Q/dO copies per key
/// (1.18-1.24x FlashAttention-2 on the H200 where Br = Bc = 64 gave 0.93-1.02x, docs/perf.md);
/// at D = 128 its tiles would need 256 KiB of shared memory and 256 accumulator registers a
/// thread. The caller's Br, Bc and mma over it.
static llvm::Expected<TileConfig> backwardTileConfig(const TileConfig &requested,
                                                     llvm::StringRef chip, int64_t headDim) {
  // The backward's schedule reads five of the fields; the others configure the forward's
  // kernel (its Q operand, rings, warp roles, register budget). Taken silently they would
  // compile the same kernels under another cache key, so they are named instead.
  TileConfig forwardOnly = requested;
  forwardOnly.blockM = forwardOnly.blockN = forwardOnly.rowsPerWarp = std::nullopt;
  forwardOnly.mma = std::nullopt;
  // The dQ grid runs ascending or descending; grouped and paired order a forward kernel's
  // programs (its one-tile-per-CTA grid, its persistent tile loop).
  if (forwardOnly.rowOrder == RowOrder::Ascending || forwardOnly.rowOrder == RowOrder::Descending)
    forwardOnly.rowOrder = std::nullopt;
  if (!forwardOnly.empty())
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "the backward's configuration takes Br, Bc, rows_per_warp, mma and row_order only; " +
            forwardOnly.print() + " configures the forward kernel");
  TileConfig config;
  // The dQ grid's row blocks last first (tile-order-row-blocks).
  config.rowOrder = requested.rowOrder;
  config.rowsPerWarp = requested.rowsPerWarp.value_or(16);
  config.mma = requested.mma.value_or(chip == "sm_90a" ? MmaKind::Wgmma : MmaKind::Sync);
  config.blockM = requested.blockM ? requested.blockM : requested.blockN;
  config.blockN = requested.blockN ? requested.blockN : requested.blockM;
  if (!config.blockM)
    config.blockM = config.blockN =
        config.mma == MmaKind::Wgmma && headDim <= 64 && *config.rowsPerWarp == 16 ? 128 : 64;
  if (*config.blockM != *config.blockN)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "the backward needs Br = Bc (dK and dV accumulate key-block rows on the warps that hold "
        "the scores' query rows), not Br=" +
            llvm::Twine(*config.blockM) + ", Bc=" + llvm::Twine(*config.blockN));
  if (llvm::Error error = config.verify())
    return std::move(error);
  return config;
}

/// Whether the backward adds dQ by the ordered loop over key blocks (the deterministic
/// schedule: the query_gradients kernel recomputes S and dP and owns its dQ block) rather than
/// by atomic adds into the f32 accumulator: where asked, and with warpgroup MMAs at head dims
/// above 64, where it is the faster one. On the H200 at D = 128 (Br = Bc = 64) the atomic
/// backward ran at 0.96-1.01x FlashAttention-2, bound by the reductions' L2 traffic (67% of
/// L2 throughput in ncu), the ordered one at 1.23-1.28x (docs/perf.md). At D = 64 the atomic
/// one, with Br = Bc = 128 and half the reductions, is the faster (1.19-1.24x against
/// 1.04-1.08x).
static bool orderedQueryGradients(const TileConfig &tiles, int64_t headDim, bool requested) {
  return requested || (tiles.mma == MmaKind::Wgmma && headDim > 64);
}

/// compileToPTX and compileBackwardToPTX: the forward kernel, or the backward's three.
static llvm::Expected<std::vector<CompiledKernel>>
compileKernels(StringRef source, StringRef bufferName, const PtxCompileOptions &options,
               bool backward) {
  auto fail = [](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
  };
  // The settings one by one before anything is parsed; together once the head dim is known.
  // Located like the DSL's diagnostics are ("error: ..."), as the CLI prints both as they come.
  auto badConfig = [&](llvm::Error error) {
    return fail("error: invalid kernel configuration: " + llvm::toString(std::move(error)));
  };
  TileConfig alone;
  alone.blockM = options.tiles.blockM;
  alone.blockN = options.tiles.blockN;
  alone.rowsPerWarp = options.tiles.rowsPerWarp;
  alone.stages = options.tiles.stages;
  if (llvm::Error error = alone.verify())
    return badConfig(std::move(error));
  DialectRegistry registry;
  registerCompilerDialects(registry);
  // One kernel function per module: the context's thread pool would only cost its startup.
  MLIRContext ctx(registry, MLIRContext::Threading::DISABLED);
  ctx.loadDialect<tile::TileDialect, func::FuncDialect>();

  // --mlir-timing and friends, when the program registered them (registerCompilerCLOptions).
  DefaultTimingManager timing;
  applyDefaultTimingManagerCLOptions(timing);
  TimingScope rootTimer = timing.getRootScope();
  // Every pass manager gets the command-line options, and the IR dump when one is asked for.
  const std::string &dumpDir = options.dumpIRDirectory;
  if (!dumpDir.empty())
    if (std::error_code ec = llvm::sys::fs::create_directories(dumpDir))
      return fail("cannot create the IR dump directory " + dumpDir + ": " + ec.message());
  auto instrument = [&](PassManager &pm, llvm::StringRef stage) {
    (void)applyPassManagerCLOptions(pm); // fails only when the options are not registered
    if (!dumpDir.empty()) {
      llvm::SmallString<256> tree(dumpDir);
      llvm::sys::path::append(tree, stage);
      pm.enableIRPrintingToFileTree([](Pass *, Operation *) { return false; },
                                    [](Pass *, Operation *) { return true; },
                                    /*printModuleScope=*/true, /*printAfterOnlyOnChange=*/false,
                                    /*printAfterOnlyOnFailure=*/false, tree);
    }
    pm.enableTiming(rootTimer);
  };

  DiagnosedSource diagnosed(ctx, source, bufferName);
  const std::string &diagnostics = diagnosed.diagnostics();
  TimingScope parseTimer = rootTimer.nest("Parser");
  OwningOpRef<ModuleOp> module = diagnosed.parse();
  parseTimer.stop();
  if (!dumpDir.empty())
    dumpFile(dumpDir, "0-source.mlir", source);
  if (!module)
    return fail("cannot parse " + bufferName + ":\n" + diagnostics);

  if (options.headDim || !options.elementType.empty() || !options.params.empty()) {
    PassManager spm(&ctx, ModuleOp::getOperationName());
    tilefuse::TileSpecializeOptions so;
    so.headDim = options.headDim;
    so.elementType = options.elementType;
    so.params = llvm::to_vector(options.params);
    spm.addPass(tilefuse::createTileSpecialize(so));
    instrument(spm, "1-specialize");
    if (failed(spm.run(*module)))
      return fail("specializing " + bufferName + " failed:\n" + diagnostics);
  }

  CompiledKernel k;
  func::FuncOp kernel;
  for (auto fn : module->getOps<func::FuncOp>())
    if (!fn.isExternal()) {
      if (kernel)
        return fail(bufferName + ": expected one kernel function");
      kernel = fn;
    }
  // A kernel written paged (varlen) takes the page table and lengths (the sequence offsets)
  // after the views; one written both, the table and lengths, then the offsets.
  unsigned arguments = kernel ? kernel.getNumArguments() : 0;
  unsigned written = cuda::abiTensorCount + (options.pagedKv ? 2 : 0) + (options.varlen ? 2 : 0);
  if (!kernel || (arguments != cuda::abiTensorCount && arguments != written))
    return fail(bufferName + ": expected one kernel function taking (Q, K, V, O, LSE)" +
                (options.pagedKv && options.varlen
                     ? " (written paged and varlen: and the page table, lengths, query and key "
                       "offsets)"
                 : options.pagedKv ? " (written paged: and the page table and lengths)"
                 : options.varlen  ? " (written varlen: and the query and key offsets)"
                                   : ""));
  // Every static size of the signature goes into the launch metadata: a launch with other sizes
  // would compute wrong results, so every launch path checks them.
  for (auto [index, tensor] : llvm::enumerate(cuda::abiTensors())) {
    auto type = dyn_cast<MemRefType>(kernel.getArgumentTypes()[index]);
    if (!type || type.getRank() != int64_t(tensor.dimensions.size()))
      return fail(bufferName + ": " + tensor.name + " must be a rank-" +
                  llvm::Twine(tensor.dimensions.size()) + " memref");
    for (auto [dim, size] : llvm::enumerate(type.getShape())) {
      if (ShapedType::isDynamic(size))
        continue;
      // Paged, K's and V's first and third dimensions are the cache's pages and page size,
      // launch parameters that no signature fixes.
      if (options.pagedKv && tensor.dimensions[2] == cuda::SizeParameter::N &&
          (dim == 0 || dim == 2))
        return fail(bufferName + ": " + tensor.name + " is a paged cache: its dimension " +
                    llvm::Twine(dim) + " (" + (dim == 0 ? "pages" : "page size") +
                    ") is given at launch; declare it ?");
      if (size < 1)
        return fail(bufferName + ": " + tensor.name + " declares dimension " + llvm::Twine(dim) +
                    " (" + cuda::sizeParameterName(tensor.dimensions[dim]) + ") as " +
                    llvm::Twine(size) + "; sizes must be positive");
      k.declaredSizes.sizes[index][dim] = size;
    }
  }
  auto qTy = cast<MemRefType>(kernel.getArgumentTypes()[0]);
  if (qTy.isDynamicDim(3))
    return fail(bufferName + ": Q must be a rank-4 memref with a static head dimension");
  Type elt = qTy.getElementType();
  if (!elt.isBF16() && !elt.isF16())
    return fail(bufferName + ": the GPU path takes bf16 or f16 kernels");
  k.name = kernel.getSymName().str();
  k.dtype = elt.isBF16() ? "bf16" : "f16";
  k.headDim = qTy.getDimSize(3);
  if (backward && (options.splitKv || options.pagedKv || options.varlen))
    return fail(bufferName + ": the derived backward runs on contiguous tensors (no split-KV, "
                             "paged or varlen form yet)");
  if (backward) {
    auto tiles = backwardTileConfig(options.tiles, options.chip, k.headDim);
    if (!tiles)
      return badConfig(tiles.takeError());
    PassManager pm(&ctx, ModuleOp::getOperationName());
    tilefuse::GpuPipelineOptions gpo;
    gpo.config = tiles->print();
    gpo.chip = options.chip;
    // dQ's atomic adds are pairs (red.global.add.v2.f32) on sm_90 from PTX 8.1: the backward
    // asks for it where the default (PTX 8.0) is asked for.
    gpo.features = options.features == "+ptx80" && llvm::StringRef(options.chip).starts_with("sm_9")
                       ? std::string("+ptx81")
                       : options.features;
    gpo.backward = true;
    bool ordered = orderedQueryGradients(*tiles, k.headDim, options.deterministic);
    gpo.deterministic = ordered;
    tilefuse::buildTileToPTXPipeline(pm, gpo);
    instrument(pm, "2-tile-to-ptx");
    if (failed(pm.run(*module)))
      return fail("compiling the backward of " + bufferName + " for " + options.chip +
                  " failed:\n" + diagnostics);
    std::string ptx;
    for (auto binary : module->getOps<gpu::BinaryOp>())
      for (Attribute a : binary.getObjects())
        if (auto obj = dyn_cast<gpu::ObjectAttr>(a))
          ptx = obj.getObject().getValue().str();
    if (ptx.empty())
      return fail("compiling the backward of " + bufferName + ": the pipeline produced no PTX");
    auto sharedBytes = (*module)->getAttrOfType<DictionaryAttr>("tilefuse.shared_bytes");
    auto threads = (*module)->getAttrOfType<DictionaryAttr>("tilefuse.threads");
    std::vector<CompiledKernel> phases;
    for (launch_abi::BackwardPhase phase : launch_abi::kBackwardPhases) {
      CompiledKernel p = k;
      p.name = k.name + "_backward_" + launch_abi::backwardPhaseName(phase);
      p.backwardPhase = launch_abi::backwardPhaseName(phase);
      p.deterministic = ordered;
      p.tiles = *tiles;
      p.blockM = *tiles->blockM;
      p.blockN = *tiles->blockN;
      auto bytes = sharedBytes ? sharedBytes.getAs<IntegerAttr>(p.name) : IntegerAttr();
      auto count = threads ? threads.getAs<IntegerAttr>(p.name) : IntegerAttr();
      if (!bytes || !count)
        return fail("compiling the backward of " + bufferName +
                    ": the compiler recorded no shared memory size or threads for " + p.name);
      p.sharedBytes = bytes.getInt();
      p.threads = count.getInt();
      p.ptx = ptx;
      phases.push_back(std::move(p));
    }
    if (!dumpDir.empty())
      dumpFile(dumpDir, k.name + "_backward.ptx", ptx);
    return phases;
  }

  // Split-KV serves decode: its defaults (splitKvTileConfig) under what the caller set.
  TileConfig requested = options.splitKv
                             ? splitKvTileConfig(k.headDim, options.chip, options.tiles,
                                                 options.pagedKv ? KeyLayout::Gathered
                                                                 : KeyLayout::Tensors)
                             : options.tiles;
  // Paged caches are gathered row by row: no TMA loads, no warp roles. A packed batch's keys
  // are one tensor, which TMA loads as a padded batch's (its split form keeps the padded
  // defaults: the merge's registers were not measured under a budget).
  KeyLayout keys = options.pagedKv                       ? KeyLayout::Gathered
                   : options.varlen && !options.splitKv ? KeyLayout::PackedRows
                                                        : KeyLayout::Tensors;
  // The score and mask regions' registers (the written form, as specialized) shrink the default
  // key block where the register model says the kernel would spill; a mask comparing rows with
  // columns sets the default row order. Not for split-KV kernels: decode has one row block, and
  // reversed split grids have run on the CPU backend only.
  bool rowBlocksUnequal = !options.splitKv && tilefuse::maskComparesRowsWithColumns(kernel);
  auto resolved = resolveTileConfig(requested, k.headDim, options.chip, keys,
                                    tilefuse::scoreRegionRegisters(kernel), rowBlocksUnequal,
                                    options.shortSequences);
  if (!resolved)
    return badConfig(resolved.takeError());
  const TileConfig &tiles = *resolved;
  k.tiles = tiles;
  k.blockM = *tiles.blockM;
  k.blockN = *tiles.blockN;
  k.threads = tiles.threads();
  k.kvTma = tiles.warpSpecialize.value_or(false);
  k.qTma = tiles.loadsQWithTma();
  k.oTma = tiles.storesOWithTma(options.varlen, options.splitKv);
  k.persistent = tiles.persistent.value_or(false);

  PassManager pm(&ctx, ModuleOp::getOperationName());
  // The configuration travels as its text: the pipeline's tile-specialize writes it on the
  // module (tile.config), where every pass that has a setting of it reads it.
  tilefuse::GpuPipelineOptions gpo;
  gpo.config = tiles.print();
  gpo.chip = options.chip;
  gpo.features = options.features;
  gpo.splitKv = options.splitKv;
  k.splitKv = options.splitKv;
  gpo.pagedKv = options.pagedKv;
  k.pagedKv = options.pagedKv;
  if (options.pageSize && !options.pagedKv)
    return fail(bufferName + ": a page size is an option of paged KV");
  if (options.pageSize < 0)
    return fail(bufferName + ": the page size must be positive (or 0: any)");
  gpo.pageSize = options.pageSize;
  k.pageSize = options.pageSize;
  gpo.varlen = options.varlen;
  k.varlen = options.varlen;
  tilefuse::buildTileToPTXPipeline(pm, gpo);
  instrument(pm, "2-tile-to-ptx");
  if (failed(pm.run(*module)))
    return fail("compiling " + bufferName + " for " + options.chip + " failed:\n" + diagnostics);
  // tgpu-allocate-shared-memory records each kernel's dynamic shared memory on the module.
  auto sharedBytes = (*module)->getAttrOfType<DictionaryAttr>("tilefuse.shared_bytes");
  auto kernelBytes = sharedBytes ? sharedBytes.getAs<IntegerAttr>(k.name) : IntegerAttr();
  if (!kernelBytes)
    return fail("compiling " + bufferName + ": the compiler recorded no shared memory size for " +
                k.name);
  k.sharedBytes = kernelBytes.getInt();
  for (auto binary : module->getOps<gpu::BinaryOp>())
    for (Attribute a : binary.getObjects())
      if (auto obj = dyn_cast<gpu::ObjectAttr>(a)) {
        k.ptx = obj.getObject().getValue().str();
        if (!dumpDir.empty()) {
          dumpFile(dumpDir, k.name + ".ptx", k.ptx);
          dumpFile(dumpDir, k.name + ".json", k.metadataJson() + "\n");
        }
        return std::vector<CompiledKernel>{std::move(k)};
      }
  return fail("compiling " + bufferName + ": the pipeline produced no PTX");
}

llvm::Expected<CompiledKernel> tilefuse::runtime::compileToPTX(StringRef source,
                                                               StringRef bufferName,
                                                               const PtxCompileOptions &options) {
  auto kernels = compileKernels(source, bufferName, options, /*backward=*/false);
  if (!kernels)
    return kernels.takeError();
  return std::move(kernels->front());
}

llvm::Expected<std::vector<CompiledKernel>>
tilefuse::runtime::compileBackwardToPTX(StringRef source, StringRef bufferName,
                                        const PtxCompileOptions &options) {
  return compileKernels(source, bufferName, options, /*backward=*/true);
}
