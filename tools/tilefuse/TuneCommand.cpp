//===- TuneCommand.cpp - `tilefuse tune` and `tilefuse compile --tuned` ---===//
//
//   tilefuse tune (--kernel NAME | FILE.mlir) [--head-dim D] [--dtype bf16|f16] [--param N=V]
//                 [--seq N,N,...] [--varlen] [--split-kv] [--shape B,H,Hkv,M] [--arch]
//                 [--jobs N] [--reps N] [--budget S] [--force] [--emit-dir DIR [--name STEM]]
//                 [--cache-dir DIR]
//       Tunes the kernel on this machine's GPU for each sequence bucket, writes the winners into
//       the tuning database (<cache dir>/tuning/) and, with --emit-dir, the winners' PTX and
//       sidecars (STEM.n<bucket>.ptx / .json, for tools/bench/bench.py --tuned-dir). With
//       --split-kv the split count is tuned too (each configuration at the launcher's choice
//       and the counts around it) and stored with the grid it was timed on.
//
//===----------------------------------------------------------------------===//
#include "TuneCommand.h"
#include "CurrentGpu.h"

#include "tilefuse/kernels/Registry.h"
#include "tilefuse/runtime/KernelCache.h"
#include "tilefuse/runtime/jit/Autotuner.h"
#include "tilefuse/runtime/jit/TuningDatabase.h"
#include "tilefuse/runtime/cuda/Driver.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

#include <fmt/core.h>

#include <algorithm>

using namespace tilefuse;
using namespace tilefuse::runtime;
using namespace tilefuse::runtime::jit;
namespace cl = llvm::cl;

cl::SubCommand tools::tuneCommand(
    "tune",
    "Time a kernel's configurations on this GPU and store the fastest in the tuning database");
static cl::OptionCategory tuneCategory(
    "tilefuse tune options",
    "  tilefuse tune (--kernel NAME | FILE.mlir) [--head-dim D] [--dtype bf16|f16] [--seq N,..]\n"
    "                [--varlen] [--split-kv] [--shape B,H,Hkv,M] [--emit-dir DIR] [--force]\n"
    "  The database is <cache dir>/tuning/ (TILEFUSE_CACHE_DIR, default ~/.cache/tilefuse);\n"
    "  the runtime uses it with TILEFUSE_AUTOTUNE=cached|on, `tilefuse compile --tuned` too.");

static cl::opt<std::string> tInput(cl::Positional, cl::desc("[FILE.mlir]"), cl::init(""),
                                   cl::sub(tools::tuneCommand), cl::cat(tuneCategory));
static cl::opt<std::string> tKernel("kernel", cl::desc("A bundled kernel instead of a file"),
                                    cl::init(""), cl::sub(tools::tuneCommand),
                                    cl::cat(tuneCategory));
static cl::opt<int64_t> tHeadDim("head-dim", cl::desc("Head dimension (0: as written)"),
                                 cl::init(0), cl::sub(tools::tuneCommand), cl::cat(tuneCategory));
static cl::opt<std::string> tDtype("dtype", cl::desc("bf16 or f16 (default: as written)"),
                                   cl::init(""), cl::sub(tools::tuneCommand),
                                   cl::cat(tuneCategory));
static cl::list<std::string> tParams("param", cl::desc("Variant parameter NAME=VALUE"),
                                     cl::sub(tools::tuneCommand), cl::cat(tuneCategory));
static cl::list<int64_t> tSeq("seq",
                              cl::desc("Sequence lengths to tune for, comma-separated (one "
                                       "bucket each: the next power of two; default 4096)"),
                              cl::CommaSeparated, cl::sub(tools::tuneCommand),
                              cl::cat(tuneCategory));
static cl::opt<bool> tVarlen(
    "varlen",
    cl::desc("Tune the kernel's varlen form (tile-varlen; `compile --tuned --varlen` reads it): "
             "timed on a packed batch of ragged sequences, the longest the bucket"),
    cl::init(false), cl::sub(tools::tuneCommand), cl::cat(tuneCategory));
static cl::opt<bool> tSplitKv(
    "split-kv",
    cl::desc("Tune the kernel's split-KV form (tile-split-kv; `compile --tuned --split-kv` and "
             "KernelSpec::splitKv read it): timed at decode (M = 1 unless --shape says), the "
             "split count an axis beside the configuration"),
    cl::init(false), cl::sub(tools::tuneCommand), cl::cat(tuneCategory));
static cl::list<int64_t> tShape(
    "shape",
    cl::desc("B,H,Hkv,M to time at (N is each --seq bucket; default: B = 16k / N, H = 2048 / D, "
             "Hkv = H, M = N; with --split-kv B = 8, H = 4096 / D, Hkv = H / 4, M = 1)"),
    cl::CommaSeparated, cl::sub(tools::tuneCommand), cl::cat(tuneCategory));
static cl::opt<std::string> tArch("arch", cl::desc("Target chip (default: this GPU's)"),
                                  cl::init(""), cl::sub(tools::tuneCommand),
                                  cl::cat(tuneCategory));
static cl::opt<std::string> tFeatures("ptx-features", cl::desc("NVPTX features (PTX version)"),
                                      cl::init("+ptx80"), cl::sub(tools::tuneCommand),
                                      cl::cat(tuneCategory));
static cl::opt<unsigned> tJobs("jobs", cl::desc("Compile threads (0: every core)"), cl::init(0),
                               cl::sub(tools::tuneCommand), cl::cat(tuneCategory));
static cl::opt<int> tReps("reps", cl::desc("Timed rounds (at least 3)"), cl::init(10),
                          cl::sub(tools::tuneCommand), cl::cat(tuneCategory));
static cl::opt<int> tWarmup("warmup", cl::desc("Untimed rounds"), cl::init(2),
                            cl::sub(tools::tuneCommand), cl::cat(tuneCategory));
static cl::opt<double> tBudget("budget",
                               cl::desc("Seconds per bucket after which timing stops early"),
                               cl::init(15), cl::sub(tools::tuneCommand), cl::cat(tuneCategory));
static cl::opt<bool> tForce("force", cl::desc("Tune even when the database has an entry"),
                            cl::sub(tools::tuneCommand), cl::cat(tuneCategory));
static cl::opt<std::string> tCacheDir("cache-dir",
                                      cl::desc("The cache directory (default: "
                                               "TILEFUSE_CACHE_DIR, ~/.cache/tilefuse)"),
                                      cl::init(""), cl::sub(tools::tuneCommand),
                                      cl::cat(tuneCategory));
static cl::opt<std::string> tEmitDir("emit-dir",
                                     cl::desc("Also write each winner's PTX and sidecar to "
                                              "DIR/STEM.n<bucket>.ptx/.json (bench.py "
                                              "--tuned-dir)"),
                                     cl::init(""), cl::sub(tools::tuneCommand),
                                     cl::cat(tuneCategory));
static cl::opt<std::string> tName("name",
                                  cl::desc("--emit-dir: the file stem (default: the kernel's "
                                           "name, _d<D> when not 64, _f16 for f16)"),
                                  cl::init(""), cl::sub(tools::tuneCommand),
                                  cl::cat(tuneCategory));

// Options of `tilefuse compile`, attached by addTunedOptionsTo (registered at the top level
// first, as tilefuse.cpp's subcommand cannot be named from here during static initialization).
static cl::OptionCategory tunedCategory("tilefuse compile --tuned options");
static cl::opt<bool> cTuned("tuned",
                            cl::desc("Compile with the tuning database's configuration for this "
                                     "kernel, the GPU and --seq's bucket (settings given "
                                     "explicitly win)"),
                            cl::cat(tunedCategory));
static cl::opt<std::string> cTunedGpu(
    "tuned-gpu",
    cl::desc("--tuned: the GPU, as `tilefuse tune` prints it "
             "(\"NAME|sms=N|cc=M.m|driver=N\"; default: this machine's)"),
    cl::init(""), cl::cat(tunedCategory));
static cl::opt<int64_t> cTunedSeq("seq", cl::desc("--tuned: the sequence length (bucket)"),
                                  cl::init(4096), cl::cat(tunedCategory));

void tools::addTunedOptionsTo(cl::SubCommand &compile) {
  for (cl::Option *option : {static_cast<cl::Option *>(&cTuned),
                             static_cast<cl::Option *>(&cTunedGpu),
                             static_cast<cl::Option *>(&cTunedSeq)}) {
    option->removeArgument();
    option->Subs.clear();
    option->addSubCommand(compile);
    option->addArgument();
  }
}

static int error(const std::string &message) {
  fmt::print(stderr, "error: {}\n", message);
  return 1;
}

/// The DSL text of --kernel or the positional file.
static int readSource(std::string &text, std::string &bufferName) {
  if (!tKernel.empty()) {
    const kernels::KernelSource *k = kernels::find(tKernel);
    if (!k)
      return error("no bundled kernel named '" + tKernel + "' (see `tilefuse list`)"), 2;
    text = k->text;
    bufferName = k->fileName;
    return 0;
  }
  if (tInput.empty())
    return error("give a DSL file or --kernel NAME (tilefuse tune --help)"), 2;
  auto buffer = llvm::MemoryBuffer::getFile(tInput);
  if (!buffer)
    return error("cannot read " + tInput + ": " + buffer.getError().message()), 2;
  text = (*buffer)->getBuffer().str();
  bufferName = tInput;
  return 0;
}

/// A progress bar on a terminal; plain lines (each quarter) otherwise.
class ProgressPrinter {
public:
  ProgressPrinter() : terminal(llvm::sys::Process::StandardErrIsDisplayed()) {}
  void operator()(const TuningProgress &p) {
    if (terminal) {
      constexpr size_t width = 30;
      size_t filled = p.total ? width * p.done / p.total : width;
      fmt::print(stderr, "\r  {:<8}[{}{}] {}/{}", p.phase.str(), std::string(filled, '#'),
                 std::string(width - filled, '.'), p.done, p.total);
      if (p.done == p.total)
        fmt::print(stderr, "\n");
      return;
    }
    size_t quarter = p.total ? 4 * p.done / p.total : 4;
    if (p.phase != phase)
      lastQuarter = 0;
    phase = p.phase.str();
    if (quarter > lastQuarter || p.done == p.total) {
      lastQuarter = quarter;
      fmt::print(stderr, "  {} {}/{}\n", phase, p.done, p.total);
    }
  }

private:
  bool terminal;
  std::string phase;
  size_t lastQuarter = 0;
};

static void printTable(const TuningReport &report) {
  std::vector<const CandidateReport *> rows;
  for (const CandidateReport &c : report.candidates)
    rows.push_back(&c);
  // Timed first, fastest first; then the dropped, grouped by why.
  std::stable_sort(rows.begin(), rows.end(), [](const auto *a, const auto *b) {
    bool ta = a->medianMs > 0, tb = b->medianMs > 0;
    if (ta != tb)
      return ta;
    if (ta)
      return a->medianMs < b->medianMs;
    return a->outcome < b->outcome;
  });
  double base = report.record.defaultMs;
  bool split = report.record.keySplits.has_value();
  fmt::print("{:<64} {:>9} {:>8}{} {:>5} {:>7}  {}\n", "configuration", "median", "vs dflt",
             split ? fmt::format(" {:>4}", "S") : "", "regs", "smem", "outcome");
  for (const CandidateReport *c : rows) {
    std::string ms = c->medianMs > 0 ? fmt::format("{:.3f}ms", c->medianMs) : "-";
    std::string splits =
        !split ? "" : fmt::format(" {:>4}", c->medianMs > 0 ? std::to_string(c->kvSplits) : "-");
    std::string ratio = c->medianMs > 0 && base > 0 ? fmt::format("{:.3f}x", base / c->medianMs)
                                                    : "-";
    std::string regs = c->registers ? std::to_string(c->registers) : "-";
    int64_t smem = c->sharedBytes ? c->sharedBytes : c->estimate.sharedBytes;
    std::string outcome = candidateOutcomeName(c->outcome).str();
    if (!c->reason.empty())
      outcome += ": " + c->reason;
    fmt::print("{:<64} {:>9} {:>8}{} {:>5} {:>6}K  {}{}\n", c->config.print(), ms, ratio, splits,
               regs, smem / 1024, outcome, c->isDefault ? " (default)" : "");
  }
}

/// A split-KV candidate's split counts, one line each: "S=4 (launcher) 0.031 ms".
static void printSplits(llvm::StringRef title, const CandidateReport &c) {
  fmt::print("{} {}:\n", title.str(), c.config.print());
  for (const SplitTiming &t : c.splits)
    fmt::print("  S={:<4}{:<11} {:>9}{}\n", t.splitsRun, t.kvSplits == 0 ? " (launcher)" : "",
               t.medianMs > 0 ? fmt::format("{:.4f}ms", t.medianMs) : "-",
               t.dropped.empty() ? "" : "  " + t.dropped);
}

/// Writes the winner's PTX and its sidecar (with the tuning fields) for bench.py.
static int emitWinner(const TuningReport &report, llvm::StringRef stem) {
  if (std::error_code ec = llvm::sys::fs::create_directories(tEmitDir))
    return error("cannot create " + tEmitDir + ": " + ec.message());
  std::string base = (tEmitDir + "/" + stem + ".n" + llvm::Twine(report.key.seqBucket)).str();
  auto sidecar = llvm::json::parse(report.best->metadataJson());
  if (!sidecar)
    return error(llvm::toString(sidecar.takeError()));
  llvm::json::Object &o = *sidecar->getAsObject();
  o["seq_bucket"] = report.key.seqBucket;
  o["tuned_ms"] = report.record.medianMs;
  o["default_config"] = report.record.defaultConfig.print();
  o["default_ms"] = report.record.defaultMs;
  o["gpu"] = report.key.gpu.text();
  for (auto [path, text] : {std::pair{base + ".ptx", report.best->ptx},
                            std::pair{base + ".json",
                                      llvm::formatv("{0:2}", *sidecar).str() + "\n"}}) {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    if (ec)
      return error("cannot write " + path + ": " + ec.message());
    os << text;
  }
  fmt::print("wrote {}.ptx and .json\n", base);
  return 0;
}

int tools::tuneMain() {
  std::string text, bufferName;
  if (int rc = readSource(text, bufferName))
    return rc;
  PtxCompileOptions options;
  options.headDim = tHeadDim;
  options.elementType = tDtype;
  options.params.assign(tParams.begin(), tParams.end());
  options.features = tFeatures;
  options.varlen = tVarlen;
  options.splitKv = tSplitKv;
  if (!tShape.empty() && tShape.size() != 4)
    return error("--shape takes B,H,Hkv,M (four sizes), not " + std::to_string(tShape.size())), 2;
  if (llvm::any_of(tShape, [](int64_t size) { return size < 1; }))
    return error("--shape: every size must be positive"), 2;
  if (!tShape.empty() && tShape[1] % tShape[2])
    return error("--shape: H (" + std::to_string(tShape[1]) + ") must be a multiple of Hkv (" +
                 std::to_string(tShape[2]) + ")"),
           2;
  if (!tArch.empty()) {
    options.chip = tArch;
  } else {
    auto current = currentGpu();
    if (!current)
      return error(llvm::toString(current.takeError()));
    options.chip = current->chip;
  }
  std::string cacheDir = tCacheDir.empty() ? CacheConfig::defaultDirectory() : tCacheDir;
  TuningDatabase database(cacheDir);
  std::vector<int64_t> lengths(tSeq.begin(), tSeq.end());
  if (lengths.empty())
    lengths.push_back(4096);
  auto gpu = GpuIdentity::current();
  if (!gpu)
    return error(llvm::toString(gpu.takeError()));
  fmt::print("tuning {} on {} ({}); database {}\n", bufferName, gpu->text(), options.chip,
             database.directory().empty() ? "(none)" : database.directory());

  // The default configuration resolves the key's dtype and head dim before any tuning.
  auto byDefault = compileToPTX(text, bufferName, options);
  if (!byDefault)
    return error(llvm::toString(byDefault.takeError()));
  std::string stem = tName;
  if (stem.empty()) {
    stem = llvm::sys::path::stem(bufferName).str();
    if (byDefault->headDim != 64)
      stem += "_d" + std::to_string(byDefault->headDim);
    if (byDefault->dtype == "f16")
      stem += "_f16";
    if (options.varlen)
      stem += "_varlen";
    if (options.splitKv)
      stem += "_split";
  }

  int status = 0;
  for (int64_t length : lengths) {
    TuningKey key = tuningKeyFor(text, options, *byDefault, length, *gpu);
    fmt::print("\n{} {} d{} seq bucket {} (key {})\n", byDefault->name, byDefault->dtype,
               byDefault->headDim, key.seqBucket, key.digest().substr(0, 16));
    if (!tForce && tEmitDir.empty())
      if (std::optional<TuningRecord> known = database.lookup(key)) {
        fmt::print("in the database: {}{} ({:.3f} ms, default {:.3f} ms; --force tunes again)\n",
                   known->config.print(),
                   known->keySplits ? fmt::format(" S={}", known->keySplits->kvSplits) : "",
                   known->medianMs, known->defaultMs);
        continue;
      }
    TuningProblem problem;
    problem.source = text;
    problem.bufferName = bufferName;
    problem.options = options;
    problem.seqLength = length;
    if (!tShape.empty()) {
      problem.batch = tShape[0];
      problem.heads = tShape[1];
      problem.kvHeads = tShape[2];
      problem.queries = tShape[3];
    }
    TuningOptions tuning;
    tuning.threads = tJobs;
    tuning.repetitions = tReps;
    tuning.warmup = tWarmup;
    tuning.budgetSeconds = tBudget;
    ProgressPrinter printer;
    tuning.progress = [&](const TuningProgress &p) { printer(p); };
    auto report = tune(problem, tuning);
    if (!report) {
      status = error(llvm::toString(report.takeError()));
      continue;
    }
    printTable(*report);
    const TuningRecord &r = report->record;
    fmt::print("problem B={} H={} Hkv={} M={} N={} D={}; {} candidates, {} timed, {} rounds\n",
               r.B, r.H, r.Hkv, r.M, r.N, byDefault->headDim, r.candidates, r.timed,
               report->rounds);
    fmt::print("time    {:.2f} s (compile+load {:.2f} s, check {:.2f} s, timing {:.2f} s){}\n",
               report->totalSeconds, report->compileSeconds, report->checkSeconds,
               report->timingSeconds,
               report->budgetNote.empty() ? "" : "; " + report->budgetNote);
    fmt::print("best    {} {:.3f} ms; default {} {:.3f} ms ({:.3f}x)\n", r.config.print(),
               r.medianMs, r.defaultConfig.print(), r.defaultMs,
               r.medianMs > 0 ? r.defaultMs / r.medianMs : 0.0);
    if (r.keySplits) {
      for (const CandidateReport &c : report->candidates) {
        if (c.config == r.config)
          printSplits("splits of the best", c);
        else if (c.isDefault)
          printSplits("splits of the default", c);
      }
      fmt::print("split   S={} (the launcher's choice S={}) for {} programs over {} key "
                 "blocks; launches of another grid keep the launcher's choice\n",
                 r.keySplits->kvSplits, r.keySplits->policySplits, r.keySplits->programs,
                 r.keySplits->keyBlocks);
    }
    if (llvm::Error e = database.store(report->key, r))
      status = error(llvm::toString(std::move(e)));
    else if (!database.directory().empty())
      fmt::print("stored  {}\n", database.entryPath(report->key));
    if (!tEmitDir.empty())
      if (int rc = emitWinner(*report, stem))
        status = rc;
  }
  return status;
}

bool tools::tunedConfigRequested() { return cTuned; }

int tools::applyTunedConfig(llvm::StringRef text, llvm::StringRef bufferName,
                            PtxCompileOptions &options) {
  if (!cTuned)
    return 0;
  llvm::Expected<GpuIdentity> gpu =
      cTunedGpu.empty() ? GpuIdentity::current() : GpuIdentity::parse(cTunedGpu);
  if (!gpu)
    return error("--tuned: " + llvm::toString(gpu.takeError()) +
                 (cTunedGpu.empty() ? " (name the GPU with --tuned-gpu)" : ""));
  PtxCompileOptions byDefault = options;
  byDefault.tiles = TileConfig();
  byDefault.dumpIRDirectory.clear();
  auto compiled = compileToPTX(text, bufferName, byDefault);
  if (!compiled)
    return error(llvm::toString(compiled.takeError()));
  TuningDatabase database(CacheConfig::defaultDirectory());
  TuningKey key = tuningKeyFor(text, options, *compiled, cTunedSeq, *gpu);
  std::optional<TuningRecord> record = database.lookup(key);
  if (!record)
    return error(("--tuned: the tuning database (" +
                  (database.directory().empty() ? std::string("none: no cache directory")
                                                : database.directory()) +
                  ") has no entry for " + bufferName + " " + compiled->dtype + " d" +
                  std::to_string(compiled->headDim) + ", seq bucket " +
                  std::to_string(key.seqBucket) + ", " + options.chip + ", GPU " +
                  gpu->text() + ", " + compilerVersion().str() +
                  "; run `tilefuse tune` there first")
                     .str());
  fmt::print(stderr, "tuned configuration {} ({:.3f} ms on {}, default {:.3f} ms)\n",
             record->config.print(), record->medianMs, gpu->text(), record->defaultMs);
  // The compiled kernel's launcher chooses its own split count; the runtime API uses this one.
  if (const std::optional<TunedKeySplits> &splits = record->keySplits)
    fmt::print(stderr,
               "tuned split count S={} for {} programs over {} key blocks (the "
               "launcher's choice there: {}); pass it as kvSplits on that grid\n",
               splits->kvSplits, splits->programs, splits->keyBlocks, splits->policySplits);
  options.tiles = record->config.overriddenBy(options.tiles);
  return 0;
}
