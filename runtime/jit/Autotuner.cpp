//===- Autotuner.cpp - the best configuration of a kernel on this GPU -----===//
#include "tilefuse/runtime/jit/Autotuner.h"

#include "tilefuse/runtime/KernelCache.h"
#include "tilefuse/runtime/Reference.h"
#include "tilefuse/runtime/cuda/CudaKernel.h"
#include "tilefuse/runtime/cuda/Driver.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/Threading.h"

#include <algorithm>
#include <condition_variable>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <mutex>
#include <optional>
#include <random>

using namespace tilefuse;
using namespace tilefuse::runtime;
using namespace tilefuse::runtime::jit;
namespace cu = tilefuse::runtime::cuda;

using Clock = std::chrono::steady_clock;
namespace {
/// At most `limit` driver loads at a time (C++17 has no counting semaphore).
class LoadGate {
public:
  explicit LoadGate(int limit) : limit(limit) {}
  /// Holds one of the gate's places for its lifetime.
  class Pass {
  public:
    explicit Pass(LoadGate &gate) : gate(gate) {
      std::unique_lock<std::mutex> lock(gate.mutex);
      gate.free.wait(lock, [&] { return gate.running < gate.limit; });
      ++gate.running;
    }
    ~Pass() {
      std::lock_guard<std::mutex> lock(gate.mutex);
      --gate.running;
      gate.free.notify_one();
    }

  private:
    LoadGate &gate;
  };

private:
  std::mutex mutex;
  std::condition_variable free;
  int running = 0;
  const int limit;
};
} // namespace

static double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

llvm::StringRef jit::candidateOutcomeName(CandidateOutcome outcome) {
  switch (outcome) {
  case CandidateOutcome::Pruned:
    return "pruned";
  case CandidateOutcome::CompileFailed:
    return "compile failed";
  case CandidateOutcome::LoadFailed:
    return "load failed";
  case CandidateOutcome::Spilled:
    return "spills";
  case CandidateOutcome::LaunchFailed:
    return "launch failed";
  case CandidateOutcome::WrongResult:
    return "wrong result";
  case CandidateOutcome::Slow:
    return "slow";
  case CandidateOutcome::OverBudget:
    return "over budget";
  case CandidateOutcome::Timed:
    return "timed";
  }
  return "?";
}

KeySplitGrid jit::keySplitGrid(const cu::KernelMetadata &metadata,
                               const cu::AttentionShape &shape) {
  launch_abi::Grid grid =
      launch_abi::programGrid(shape.B, shape.H, shape.Hkv, shape.M,
                              std::max<int64_t>(metadata.blockM, 1), metadata.packGqa);
  int64_t blockN = std::max<int64_t>(metadata.blockN, 1);
  return {grid.batch * grid.heads * grid.rowBlocks, (shape.N + blockN - 1) / blockN};
}

TuningKey jit::tuningKeyFor(llvm::StringRef source, const PtxCompileOptions &options,
                            const CompiledKernel &compiled, int64_t seqLength,
                            const GpuIdentity &gpu) {
  PtxCompileOptions identity = options;
  identity.tiles = TileConfig();
  identity.dumpIRDirectory.clear();
  // The sequence bucket below tells the lengths apart (the defaults' short sequences with it).
  identity.shortSequences = false;
  identity.elementType = compiled.dtype;
  identity.headDim = compiled.headDim;
  TuningKey key;
  key.kernelIdentity = KernelCache::computeKernelIdentity(source, identity);
  key.dtype = compiled.dtype;
  key.headDim = compiled.headDim;
  key.seqBucket = sequenceBucket(seqLength);
  key.gpu = gpu;
  key.version = compilerVersion().str();
  return key;
}

std::optional<CompiledKernel> jit::warpSpecializedForm(llvm::StringRef source,
                                                      llvm::StringRef bufferName,
                                                      const PtxCompileOptions &options) {
  PtxCompileOptions form = options;
  form.tiles = TileConfig();
  form.tiles.warpSpecialize = true;
  if (options.splitKv) {
    form.tiles.blockM = options.tiles.blockM.value_or(64);
    form.tiles.stages = 3;
  } else {
    form.tiles.persistent = true;
  }
  form.dumpIRDirectory.clear();
  auto kernel = compileToPTX(source, bufferName, form);
  if (!kernel) {
    llvm::consumeError(kernel.takeError()); // a kernel that cannot take warp roles
    return std::nullopt;
  }
  return std::move(*kernel);
}

uint64_t jit::jitLogSpillBytes(llvm::StringRef log) {
  uint64_t most = 0;
  size_t at = 0;
  while ((at = log.find(" bytes spill ", at)) != llvm::StringRef::npos) {
    llvm::StringRef before = log.take_front(at).rtrim();
    size_t digits = before.size();
    while (digits && std::isdigit(static_cast<unsigned char>(before[digits - 1])))
      --digits;
    unsigned long long n = 0;
    if (!before.drop_front(digits).getAsInteger(10, n))
      most = std::max<uint64_t>(most, n);
    at += 1;
  }
  return most;
}

namespace {

/// One split count of a candidate, checked and timed as a candidate of its own; an unsplit
/// kernel's candidate has one, kvSplits = 0.
struct SplitRun {
  int64_t kvSplits = 0;  ///< as launched (0: the launcher's choice)
  int64_t splitsRun = 0; ///< what runs (the launcher's choice resolved)
  std::vector<double> times;
  CandidateOutcome outcome = CandidateOutcome::Timed;
  std::string dropped; ///< why it left (empty: still timed)
  bool alive() const { return dropped.empty(); }
};

/// One candidate on its way through the tuner.
struct Slot {
  CandidateReport report;
  std::shared_ptr<const CompiledKernel> compiled;
  std::unique_ptr<cu::CudaKernel> kernel;
  std::vector<SplitRun> runs; ///< set once it loaded
  bool alive() const { return kernel && report.outcome == CandidateOutcome::Timed; }

  /// Drops `run` from the timing; the candidate goes with its last run, for that run's reason.
  void drop(SplitRun &run, CandidateOutcome outcome, std::string why) {
    run.outcome = outcome;
    run.dropped = std::move(why);
    if (llvm::any_of(runs, [](const SplitRun &r) { return r.alive(); }))
      return;
    report.outcome = outcome;
    report.reason =
        runs.size() > 1 ? "S=" + std::to_string(run.splitsRun) + ": " + run.dropped : run.dropped;
  }
};

/// The device buffers of the timed problem: `rotations` input and output sets and the L2 flush.
/// A varlen kernel's problem is a packed batch (THD) with its sequence offsets.
struct Workspace {
  cu::AttentionShape shape;
  cu::AttentionStrides strides;
  std::vector<cu::DeviceBuffer> q, k, v, o, lse;
  cu::DeviceBuffer flush;
  size_t oBytes = 0;
  std::optional<Varlen> varlen;
  cu::DeviceBuffer sequenceOffsets;

  cu::AttentionBuffers buffers(size_t set) const {
    return {q[set].address(), k[set].address(), v[set].address(), o[set].address(),
            lse[set].address()};
  }
  llvm::Error launch(const cu::CudaKernel &kernel, const cu::Stream &stream, size_t set,
                     int64_t kvSplits) const {
    return kernel.launch(stream.handle(), buffers(set), shape, strides, kvSplits,
                         /*paged=*/nullptr, varlen ? &*varlen : nullptr);
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

} // namespace

/// M = N = bucket, B = 16k tokens / N, H = 2048 / D; a split-KV kernel's decode: M = 1, B = 8,
/// H = 4096 / D, Hkv = H / 4 (a packed batch's sequences are as long as M: a varlen one keeps
/// M = N). The problem's sizes where given; the kernel's declared ones win.
static cu::AttentionShape problemShape(const CompiledKernel &k, const TuningProblem &problem,
                                       int64_t bucket) {
  cu::AttentionShape s;
  s.N = bucket;
  s.D = k.headDim;
  if (k.splitKv && !k.varlen) {
    s.M = 1;
    s.B = 8;
    s.H = std::max<int64_t>(1, 4096 / k.headDim);
    s.Hkv = std::max<int64_t>(1, s.H / 4);
  } else {
    s.M = bucket;
    s.B = std::max<int64_t>(1, 16384 / bucket);
    s.H = std::max<int64_t>(1, 2048 / k.headDim);
    s.Hkv = s.H;
  }
  auto given = [](int64_t size, int64_t &out) {
    if (size > 0)
      out = size;
  };
  given(problem.batch, s.B);
  given(problem.heads, s.H);
  given(problem.queries, s.M);
  // Heads given without KV heads: as many (plain attention); KV heads alone keep the heads.
  if (problem.heads > 0 && problem.kvHeads <= 0)
    s.Hkv = s.H;
  given(problem.kvHeads, s.Hkv);
  const auto &declared = k.declaredSizes.sizes;
  auto fixed = [&](int tensor, int dim, int64_t &size) {
    if (declared[tensor][dim] != cu::DeclaredSizes::dynamic)
      size = declared[tensor][dim];
  };
  fixed(0, 0, s.B);
  fixed(0, 1, s.H);
  fixed(0, 2, s.M);
  fixed(1, 1, s.Hkv);
  fixed(1, 2, s.N);
  return s;
}

/// A varlen problem's sequence lengths: the bucket, then bucket·7/8, 6/8, ... 1/8 in turn (the
/// mix bench.py's varlen rows run), up to at least 16k tokens and three sequences.
static std::vector<int64_t> varlenLengths(int64_t bucket) {
  std::vector<int64_t> lengths;
  int64_t tokens = 0;
  for (int64_t i = 0; tokens < 16384 || lengths.size() < 3; ++i) {
    int64_t eighths = 8 - i % 8;
    lengths.push_back(std::max<int64_t>(1, bucket * eighths / 8));
    tokens += lengths.back();
  }
  return lengths;
}

static llvm::Expected<Workspace> allocateWorkspace(const CompiledKernel &k,
                                                   cu::AttentionShape s, int rotations,
                                                   int64_t l2Bytes) {
  Workspace w;
  ElementType et = k.dtype == "f16" ? ElementType::F16 : ElementType::BF16;
  // Rows of Q (and O) and of K and V over every batch entry: padded, B·M and B·N; packed, the
  // sequences' lengths (M = N = the longest).
  int64_t queryRows = s.B * s.M, keyRows = s.B * s.N;
  if (k.varlen) {
    std::vector<int64_t> lengths = varlenLengths(s.M);
    std::vector<int32_t> offsets = {0};
    for (int64_t length : lengths)
      offsets.push_back(offsets.back() + int32_t(length));
    s.B = int64_t(lengths.size());
    queryRows = keyRows = offsets.back();
    auto device = cu::DeviceBuffer::allocate(offsets.size() * sizeof(int32_t));
    if (!device)
      return device.takeError();
    if (llvm::Error e = device->upload(offsets.data(), offsets.size() * sizeof(int32_t)))
      return std::move(e);
    w.sequenceOffsets = std::move(*device);
    auto *cu = reinterpret_cast<const int32_t *>(w.sequenceOffsets.address());
    w.varlen = Varlen::of(cu, cu, queryRows, keyRows);
    // THD: [tokens, heads, D]; LSE [H, tokens]; the batch strides are not read.
    w.strides.qH = w.strides.oH = w.strides.kH = w.strides.vH = s.D;
    w.strides.qM = w.strides.oM = s.H * s.D;
    w.strides.kN = w.strides.vN = s.Hkv * s.D;
    w.strides.lseH = queryRows;
  } else {
    w.strides = cu::AttentionStrides::contiguous(s);
  }
  w.shape = s;
  size_t qElems = queryRows * s.H * s.D, kElems = keyRows * s.Hkv * s.D;
  w.oBytes = qElems * 2;
  // One random host pattern, uploaded at a different offset per tensor and set: distinct inputs
  // without drawing hundreds of millions of normals (or even copying them) per buffer.
  constexpr size_t tableSize = 1 << 16, slack = 64;
  std::mt19937 rng(2026);
  std::vector<char> table(tableSize * 2);
  (void)reference::storeAs(et, reference::randomNormal(tableSize, rng), table.data());
  std::vector<char> pattern((std::max(qElems, kElems) + slack) * 2);
  for (size_t i = 0; i < pattern.size() / 2; ++i)
    std::memcpy(&pattern[2 * i], &table[2 * ((i * 7919) % tableSize)], 2);
  auto filled = [&](size_t elements, size_t start) -> llvm::Expected<cu::DeviceBuffer> {
    auto buffer = cu::DeviceBuffer::allocate(elements * 2);
    if (!buffer)
      return buffer.takeError();
    if (llvm::Error e = buffer->upload(pattern.data() + 2 * (start % slack), elements * 2))
      return std::move(e);
    return std::move(*buffer);
  };
  for (int set = 0; set < rotations; ++set) {
    auto q = filled(qElems, 3 * set + 1), kb = filled(kElems, 3 * set + 2),
         v = filled(kElems, 3 * set + 3); // offsets below `slack`: every tensor differs
    if (!q)
      return q.takeError();
    if (!kb)
      return kb.takeError();
    if (!v)
      return v.takeError();
    auto o = cu::DeviceBuffer::allocate(w.oBytes);
    if (!o)
      return o.takeError();
    auto lse = cu::DeviceBuffer::allocate(queryRows * s.H * sizeof(float));
    if (!lse)
      return lse.takeError();
    w.q.push_back(std::move(*q));
    w.k.push_back(std::move(*kb));
    w.v.push_back(std::move(*v));
    w.o.push_back(std::move(*o));
    w.lse.push_back(std::move(*lse));
  }
  // Twice the L2 (at least 64 MiB): written before every timed launch, it evicts everything.
  auto flush = cu::DeviceBuffer::allocate(std::max<int64_t>(2 * l2Bytes, 64 << 20));
  if (!flush)
    return flush.takeError();
  w.flush = std::move(*flush);
  return w;
}

/// A sample of O (its first and last 512 Ki elements) as doubles, after `kernel` ran on set 0.
static llvm::Expected<std::vector<double>> runAndSample(const cu::CudaKernel &kernel, Workspace &w,
                                                        const cu::Stream &stream, ElementType et,
                                                        int64_t kvSplits = 0) {
  // NaN: an element it does not write fails the check. On the launch's stream: a plain memset
  // runs on the legacy stream, which a non-blocking stream does not wait for.
  if (llvm::Error e = w.o[0].fillAsync(0xFF, stream))
    return std::move(e);
  if (llvm::Error e = w.launch(kernel, stream, 0, kvSplits))
    return std::move(e);
  if (llvm::Error e = stream.synchronize())
    return std::move(e);
  size_t elements = w.oBytes / 2, part = std::min<size_t>(elements, 1 << 19);
  std::vector<char> bytes(2 * part * 2);
  if (llvm::Error e = w.o[0].download(bytes.data(), part * 2))
    return std::move(e);
  if (llvm::Error e = w.o[0].download(bytes.data() + part * 2, part * 2, (elements - part) * 2))
    return std::move(e);
  return reference::loadAs(et, bytes.data(), 2 * part);
}

/// max |got - want| / max |want|, NaN anywhere: infinity.
static double relativeDifference(const std::vector<double> &got, const std::vector<double> &want) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) != std::isnan(want[i]))
      return INFINITY;
    if (std::isnan(got[i]))
      continue;
    diff = std::max(diff, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return scale == 0 ? diff : diff / scale;
}

static std::string utcNow() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

llvm::Expected<TuningReport> jit::tune(const TuningProblem &problem,
                                       const TuningOptions &options) {
  auto t0 = Clock::now();
  auto fail = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  auto progress = [&](llvm::StringRef phase, size_t done, size_t total) {
    if (options.progress)
      options.progress(TuningProgress{phase, done, total});
  };
  auto driver = cu::Driver::get();
  if (!driver)
    return driver.takeError();
  auto context = driver->currentContext();
  if (!context)
    return context.takeError();
  auto device = driver->currentDevice();
  if (!device)
    return device.takeError();
  auto gpu = GpuIdentity::current();
  if (!gpu)
    return gpu.takeError();

  // 1. The default configuration: the kernel's dtype and head dim, the baseline.
  PtxCompileOptions base = problem.options;
  base.tiles = TileConfig();
  base.dumpIRDirectory.clear();
  // The default the runtime would run at this length (its short-sequence kernel, maybe).
  base.shortSequences = isShortSequence(problem.seqLength);
  auto defaultKernel = compileToPTX(problem.source, problem.bufferName, base);
  if (!defaultKernel)
    return defaultKernel.takeError();
  TuningReport report;
  report.key = tuningKeyFor(problem.source, problem.options, *defaultKernel, problem.seqLength,
                            *gpu);
  int64_t headDim = defaultKernel->headDim;
  ElementType et = defaultKernel->dtype == "f16" ? ElementType::F16 : ElementType::BF16;

  // 2. The space, pruned by the resource model with the device's own shared-memory limit.
  ChipLimits limits = ChipLimits::forChip(base.chip);
  if (device->maxSharedBytesPerBlockOptin > 0)
    limits.sharedBytesPerBlock = device->maxSharedBytesPerBlockOptin;
  TuningAxes axes = options.axes ? *options.axes : TuningAxes::forChip(base.chip);
  axes.withoutWarpRolesWhereUnsupported(base.pagedKv, base.splitKv);
  // A split (decode) kernel packs a key/value head's query heads into one tile by default
  // (splitKvTileConfig); its candidates do too, or the split axis would meet only the unpacked
  // grids, where the launcher's policy leaves one or two splits to try.
  if (base.splitKv && !options.axes)
    axes.packGqa = {true};
  std::vector<Candidate> space = enumerateSpace(headDim, base.chip, limits, axes);
  TileConfig defaultTiles = defaultKernel->tiles;
  addDefaultCandidates(space, defaultTiles, headDim, base.chip);
  // A default without warp roles has no persistence to toggle: its warp-specialized form
  // (persistent, or a split kernel's TMA ring) joins the space, compiled once (here, to learn
  // its configuration). The split space enumerates no warp roles (withoutWarpRolesWhere-
  // Unsupported keeps its size), so only this candidate has them.
  std::optional<CompiledKernel> rolesForm;
  if (!defaultTiles.warpSpecialize.value_or(false) &&
      (llvm::is_contained(axes.warpSpecialize, true) || (base.splitKv && !base.pagedKv))) {
    rolesForm = warpSpecializedForm(problem.source, problem.bufferName, base);
    if (rolesForm && llvm::none_of(space, [&](const Candidate &c) {
          return c.config == rolesForm->tiles;
        })) {
      Candidate c;
      c.config = rolesForm->tiles;
      c.estimate = estimateResources(c.config, headDim);
      c.nearDefault = true;
      space.push_back(c);
    }
  }
  std::vector<Slot> slots(space.size());
  for (auto [slot, candidate] : llvm::zip(slots, space)) {
    slot.report.config = candidate.config;
    slot.report.estimate = candidate.estimate;
    slot.report.isDefault = candidate.config == defaultTiles;
    slot.report.outcome = candidate.pruned ? CandidateOutcome::Pruned : CandidateOutcome::Timed;
    slot.report.reason = candidate.reason;
    // The default is what runs untuned: it is the baseline and the check's reference even where
    // the model expects it to spill (head dim 256 at Br = 64), so it is always timed.
    if (slot.report.isDefault && candidate.pruned) {
      slot.report.outcome = CandidateOutcome::Timed;
      slot.report.reason = "timed as the baseline although the model says " + candidate.reason;
    }
  }

  // 3. Compile and load in parallel (compileToPTX has its own MLIRContext per call; the driver
  //    is thread-safe); every worker uses the caller's context.
  auto tCompile = Clock::now();
  {
    size_t total = llvm::count_if(slots, [](const Slot &s) {
      return s.report.outcome != CandidateOutcome::Pruned;
    });
    size_t done = 0;
    std::mutex mutex;
    std::condition_variable finished;
    llvm::DefaultThreadPool pool(llvm::hardware_concurrency(options.threads));
    CUctx_st *ctx = *context;
    // Closest to the default first: the settings a candidate changes from it.
    auto changes = [&](const TileConfig &c) {
      const TileConfig &d = defaultTiles;
      return int(c.blockM != d.blockM) + int(c.blockN != d.blockN) +
             int(c.rowsPerWarp != d.rowsPerWarp) + int(c.mma != d.mma) +
             int(c.qOperand != d.qOperand) + int(c.copyIssue != d.copyIssue) +
             int(c.stages != d.stages) + int(c.ctasPerSm != d.ctasPerSm) +
             int(inDefaultRowOrder(c, d).longestFirst() != d.longestFirst());
    };
    // The default and its measured neighbours (Candidate::nearDefault) before all of them.
    std::vector<Slot *> order;
    llvm::DenseSet<const Slot *> near;
    for (auto [slot, candidate] : llvm::zip(slots, space)) {
      if (slot.report.outcome == CandidateOutcome::Pruned)
        continue;
      order.push_back(&slot);
      if (candidate.nearDefault)
        near.insert(&slot);
    }
    llvm::stable_sort(order, [&](const Slot *a, const Slot *b) {
      return std::pair(!near.contains(a), changes(a->report.config)) <
             std::pair(!near.contains(b), changes(b->report.config));
    });
    double compileBudget = options.budgetSeconds * options.compileBudgetShare;
    LoadGate loadGate(/*limit=*/4);
    for (Slot *next : order) {
      Slot &slot = *next;
      pool.async([&, ctx] {
        CandidateReport &r = slot.report;
        auto drop = [&](CandidateOutcome outcome, std::string why) {
          r.outcome = outcome;
          r.reason = std::move(why);
        };
        auto overBudget = [&] {
          if (r.isDefault || secondsSince(t0) <= compileBudget)
            return false;
          drop(CandidateOutcome::OverBudget,
               llvm::formatv("not compiled: {0:f1} s of the {1} s budget went to compiling "
                             "(closest to the default first); the driver's JIT cache makes the "
                             "next tuning on this machine faster",
                             secondsSince(t0), options.budgetSeconds)
                   .str());
          std::lock_guard<std::mutex> lock(mutex);
          ++done;
          finished.notify_one();
          return true;
        };
        if (overBudget())
          return;
        PtxCompileOptions o = base;
        o.tiles = r.config;
        auto start = Clock::now();
        // The default and its warp-specialized form are compiled already.
        auto compiled = r.isDefault ? llvm::Expected<CompiledKernel>(*defaultKernel)
                        : rolesForm && r.config == rolesForm->tiles
                            ? llvm::Expected<CompiledKernel>(*rolesForm)
                            : compileToPTX(problem.source, problem.bufferName, o);
        r.compileMs = 1e3 * secondsSince(start);
        // Checked again before the driver's JIT, which takes most of the time and runs one
        // module at a time: a load started late would run past the budget.
        if (compiled && overBudget())
          return;
        if (!compiled) {
          std::string why = llvm::toString(compiled.takeError());
          drop(CandidateOutcome::CompileFailed, llvm::StringRef(why).split('\n').first.str());
        } else {
          r.sharedBytes = compiled->sharedBytes;
          slot.compiled = std::make_shared<const CompiledKernel>(std::move(*compiled));
          auto metadata =
              cu::KernelMetadata::parse(slot.compiled->metadataJson(), problem.bufferName);
          start = Clock::now();
          llvm::Error current = driver->setCurrentContext(ctx);
          if (!metadata || current) {
            std::string why = metadata ? llvm::toString(std::move(current))
                                       : llvm::toString(metadata.takeError());
            llvm::consumeError(std::move(current));
            drop(CandidateOutcome::LoadFailed, why);
          } else if (slot.compiled->sharedBytes > limits.sharedBytesPerBlock) {
            drop(CandidateOutcome::LoadFailed,
                 "shared memory: compiled to " + std::to_string(slot.compiled->sharedBytes) +
                     " bytes, the device allows " + std::to_string(limits.sharedBytesPerBlock));
          } else {
            // A few loads at a time: the driver's JIT runs one module at a time, so more waiting
            // loads would only run past the budget; the budget is checked once a load may start.
            LoadGate::Pass pass(loadGate);
            if (overBudget())
              return;
            auto kernel = cu::CudaKernel::load(slot.compiled->ptx, *metadata);
            if (!kernel) {
              std::string why = cu::takeReport(kernel.takeError()).message;
              drop(CandidateOutcome::LoadFailed, llvm::StringRef(why).split('\n').first.str());
            } else {
              r.loadMs = 1e3 * secondsSince(start);
              r.registers = (*kernel)->registersPerThread();
              uint64_t spilled = std::max<uint64_t>((*kernel)->localBytesPerThread(),
                                                    jitLogSpillBytes((*kernel)->jitLog()));
              bool spills = spilled > kTolerableSpillBytes;
              if (spilled && !spills)
                r.reason = "spills " + std::to_string(spilled) +
                           " bytes of local memory per thread, within the " +
                           std::to_string(kTolerableSpillBytes) + " tolerated";
              if (spills && r.isDefault) {
                // Kept: the baseline (see above); the table says it spills.
                r.reason = "spills " + std::to_string((*kernel)->localBytesPerThread()) +
                           " bytes of local memory per thread; timed as the baseline";
                slot.kernel = std::move(*kernel);
              } else if (spills)
                drop(CandidateOutcome::Spilled,
                     "spills: " + std::to_string((*kernel)->localBytesPerThread()) +
                         " bytes of local memory per thread (" + std::to_string(r.registers) +
                         " registers)");
              else
                slot.kernel = std::move(*kernel);
            }
          }
        }
        std::lock_guard<std::mutex> lock(mutex);
        ++done;
        finished.notify_one();
      });
    }
    // Progress from this thread only, as candidates finish.
    for (size_t reported = 0; reported < total;) {
      std::unique_lock<std::mutex> lock(mutex);
      finished.wait(lock, [&] { return done > reported; });
      reported = done;
      lock.unlock();
      progress("compile", reported, total);
    }
    pool.wait();
  }
  report.compileSeconds = secondsSince(tCompile);

  Slot *defaultSlot = nullptr;
  for (Slot &slot : slots)
    if (slot.report.isDefault)
      defaultSlot = &slot;
  if (!defaultSlot || !defaultSlot->kernel)
    return fail("the default configuration " + defaultTiles.print() +
                " did not load: " + (defaultSlot ? defaultSlot->report.reason : "(missing)"));

  // 4. Each survivor once, checked against the default's output; a split kernel's survivors
  //    then at each of their split counts too.
  auto tCheck = Clock::now();
  cu::AttentionShape shape = problemShape(*defaultKernel, problem, report.key.seqBucket);
  int rotations = std::max(1, options.rotations);
  auto workspace = allocateWorkspace(*defaultKernel, shape, rotations, device->l2CacheBytes);
  if (!workspace)
    return workspace.takeError();
  auto stream = cu::Stream::create();
  if (!stream)
    return stream.takeError();
  auto expected = runAndSample(*defaultSlot->kernel, *workspace, *stream, et);
  if (!expected)
    return fail("the default configuration failed to run: " +
                llvm::toString(expected.takeError()));
  // The launcher's choice first (the baseline's), then the other counts around it.
  for (Slot &slot : slots) {
    if (!slot.alive())
      continue;
    int64_t policy = slot.kernel->splitCountFor(workspace->shape);
    slot.runs.push_back(SplitRun{/*kvSplits=*/0, /*splitsRun=*/policy});
    if (!base.splitKv)
      continue;
    KeySplitGrid grid = keySplitGrid(slot.kernel->metadata(), workspace->shape);
    for (int64_t splits : keySplitCandidates(policy, grid.keyBlocks))
      if (splits != policy)
        slot.runs.push_back(SplitRun{splits, splits});
  }
  double tolerance = et == ElementType::BF16 ? 2e-2 : 5e-3;
  for (Slot &slot : slots) {
    if (!slot.alive())
      continue;
    // A candidate wrong at the launcher's choice goes whole: that is how it runs on grids it
    // was not tuned on. One wrong at another count loses that count only.
    auto drop = [&](SplitRun &run, CandidateOutcome outcome, std::string why) {
      if (&run != &slot.runs.front())
        return slot.drop(run, outcome, std::move(why));
      for (SplitRun &other : llvm::drop_begin(slot.runs))
        other.dropped = "not checked: the launcher's choice failed";
      slot.drop(run, outcome, std::move(why));
    };
    for (SplitRun &run : slot.runs) {
      if (!slot.alive())
        break;
      if (&slot == defaultSlot && &run == &slot.runs.front())
        continue; // the reference itself
      auto got = runAndSample(*slot.kernel, *workspace, *stream, et, run.kvSplits);
      if (!got) {
        std::string why = cu::takeReport(got.takeError()).message;
        drop(run, CandidateOutcome::LaunchFailed, llvm::StringRef(why).split('\n').first.str());
        // A fault poisons the context for everything after it: find out now, and say which.
        if (!runAndSample(*defaultSlot->kernel, *workspace, *stream, et))
          return fail("candidate " + slot.report.config.print() + " at kvSplits " +
                      std::to_string(run.kvSplits) + " left the CUDA context unusable: " + why);
        continue;
      }
      double diff = relativeDifference(*got, *expected);
      if (!(diff <= tolerance))
        drop(run, CandidateOutcome::WrongResult,
             llvm::formatv("output differs from the default configuration's by {0:e2} "
                           "(max relative; bound {1:e0})",
                           diff, tolerance)
                 .str());
    }
  }
  report.checkSeconds = secondsSince(tCheck);

  // 5. Round-robin timing of every (candidate, split count) still in.
  auto tTime = Clock::now();
  struct Entry {
    Slot *slot;
    SplitRun *run;
    bool alive() const { return slot->alive() && run->alive(); }
    /// The untuned baseline: the default configuration at the launcher's choice.
    bool isBaseline() const { return slot->report.isDefault && run == &slot->runs.front(); }
  };
  std::vector<Entry> alive;
  for (Slot &slot : slots)
    if (slot.alive())
      for (SplitRun &run : slot.runs)
        if (run.alive())
          alive.push_back({&slot, &run});
  int repetitions = std::max(3, options.repetitions), warmup = std::max(0, options.warmup);
  std::vector<cu::Event> starts, stops;
  for (size_t i = 0; i < alive.size(); ++i) {
    auto start = cu::Event::create(), stop = cu::Event::create();
    if (!start)
      return start.takeError();
    if (!stop)
      return stop.takeError();
    starts.push_back(std::move(*start));
    stops.push_back(std::move(*stop));
  }
  int totalRounds = warmup + repetitions;
  // Drops the entries over `factor` times the best of `times` (one per entry).
  auto dropSlow = [&](const std::vector<double> &times, double factor, llvm::StringRef when) {
    double best = INFINITY;
    for (size_t i = 0; i < alive.size(); ++i)
      if (alive[i].alive())
        best = std::min(best, times[i]);
    for (size_t i = 0; i < alive.size(); ++i)
      if (alive[i].alive() && !alive[i].isBaseline() && times[i] > factor * best)
        alive[i].slot->drop(*alive[i].run, CandidateOutcome::Slow,
                            llvm::formatv("{0:f2}x the best {1}", times[i] / best, when).str());
  };
  double lastRoundSeconds = 0;
  for (int round = 0; round < totalRounds; ++round) {
    auto roundStart = Clock::now();
    size_t set = round % rotations;
    std::vector<size_t> order;
    for (size_t i = 0; i < alive.size(); ++i)
      if (alive[i].alive())
        order.push_back(i);
    if (order.empty())
      break;
    std::rotate(order.begin(), order.begin() + round % order.size(), order.end());
    std::vector<double> roundMs(alive.size(), INFINITY);
    for (size_t i : order) {
      Slot &slot = *alive[i].slot;
      SplitRun &run = *alive[i].run;
      if (llvm::Error e = workspace->flush.fillAsync(uint8_t(round), *stream))
        return std::move(e);
      if (llvm::Error e = starts[i].record(*stream))
        return std::move(e);
      if (llvm::Error e = workspace->launch(*slot.kernel, *stream, set, run.kvSplits)) {
        slot.drop(run, CandidateOutcome::LaunchFailed, cu::takeReport(std::move(e)).message);
        continue;
      }
      if (llvm::Error e = stops[i].record(*stream))
        return std::move(e);
      // Reading each pair right away keeps one pair of events per entry; the wait costs
      // nothing the GPU would have spent otherwise (the next launch needs the flush first).
      if (llvm::Error e = stops[i].synchronize())
        return fail("while timing " + slot.report.config.print() + ": " +
                    llvm::toString(std::move(e)));
      auto ms = cu::Event::elapsedMilliseconds(starts[i], stops[i]);
      if (!ms)
        return ms.takeError();
      roundMs[i] = *ms;
      if (round >= warmup)
        run.times.push_back(*ms);
    }
    lastRoundSeconds = secondsSince(roundStart);
    // The first round already tells the far-off entries apart (the check ran each once, so
    // nothing in it is a first launch): they leave before the rounds that decide.
    if (round == 0)
      dropSlow(roundMs, 1.5, "in the first round");
    if (round < warmup)
      continue;
    int timedRounds = round - warmup + 1;
    report.rounds = timedRounds;
    progress("time", timedRounds, repetitions);
    if (timedRounds == 3) {
      std::vector<double> medians(alive.size(), INFINITY);
      for (size_t i = 0; i < alive.size(); ++i)
        if (alive[i].alive())
          medians[i] = median(alive[i].run->times);
      dropSlow(medians, 1.3, "after 3 rounds");
    }
    // Another round would end past the budget (the last one's time foretells the next's, give
    // or take a quarter: rounds of one size differed by that much on the H200).
    if (timedRounds >= 3 && timedRounds < repetitions &&
        secondsSince(t0) + 1.25 * lastRoundSeconds > options.budgetSeconds) {
      report.budgetNote = llvm::formatv("the {0} s budget was spent after {1} of {2} rounds",
                                        options.budgetSeconds, timedRounds, repetitions)
                              .str();
      break;
    }
  }
  report.timingSeconds = secondsSince(tTime);

  // Each candidate at its fastest count (among those still in, if any is), the winner the
  // fastest of all.
  Slot *best = nullptr;
  for (Slot &slot : slots) {
    const SplitRun *fastest = nullptr;
    for (const SplitRun &run : slot.runs) {
      if (run.times.empty())
        continue;
      bool better = !fastest || (run.alive() && !fastest->alive()) ||
                    (run.alive() == fastest->alive() && median(run.times) < median(fastest->times));
      if (better)
        fastest = &run;
    }
    if (fastest) {
      slot.report.medianMs = median(fastest->times);
      slot.report.kvSplits = fastest->splitsRun;
    }
    if (base.splitKv)
      for (const SplitRun &run : slot.runs)
        slot.report.splits.push_back(
            {run.kvSplits, run.splitsRun, run.times.empty() ? 0 : median(run.times), run.dropped});
    if (slot.alive() && fastest && fastest->alive() &&
        (!best || slot.report.medianMs < best->report.medianMs))
      best = &slot;
  }
  if (!best)
    return fail("no configuration could be timed");
  report.best = best->compiled;
  TuningRecord &record = report.record;
  record.config = best->report.config;
  record.medianMs = best->report.medianMs;
  record.defaultConfig = defaultTiles;
  record.defaultMs = defaultSlot->runs.empty() || defaultSlot->runs.front().times.empty()
                         ? 0
                         : median(defaultSlot->runs.front().times);
  record.candidates = slots.size();
  record.timed = llvm::count_if(slots, [](const Slot &s) {
    return llvm::any_of(s.runs, [](const SplitRun &r) { return !r.times.empty(); });
  });
  record.B = workspace->shape.B;
  record.H = workspace->shape.H;
  record.Hkv = workspace->shape.Hkv;
  record.M = workspace->shape.M;
  record.N = workspace->shape.N;
  if (base.splitKv) {
    KeySplitGrid grid = keySplitGrid(best->kernel->metadata(), workspace->shape);
    TunedKeySplits splits;
    splits.kvSplits = best->report.kvSplits;
    splits.programs = grid.programs;
    splits.keyBlocks = grid.keyBlocks;
    splits.policySplits = best->runs.front().splitsRun;
    record.keySplits = splits;
  }
  record.created = utcNow();
  report.totalSeconds = secondsSince(t0);
  record.tuningSeconds = report.totalSeconds;
  for (Slot &slot : slots)
    report.candidates.push_back(slot.report);
  return report;
}
