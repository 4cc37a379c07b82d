//===- tilefuse-fuzz.cpp - a mutation fuzzer of the DSL front door --------===//
//
//   tilefuse-fuzz [--runs N] [--seed S] [--max-mutations K] [--reproducer-dir DIR] [FILE.mlir...]
//
// Mutates the kernels of kernels/ (or the given files) the way a kernel author's typo would:
// integer literals become boundary values, dimension sizes of types change (or become `?`),
// lines are deleted, duplicated or swapped, op names, comparison predicates and types are
// swapped within their family, SSA uses are redirected, block arguments dropped, characters cut.
// Each input then goes through every stage a user's text can reach, in process:
//   parse + verify -> tilefuse::checkWrittenForm -> [tile-specialize with random options]
//   -> tile-to-cpu -> LLVM IR (the CPU backend's lowering; no JIT)
//   -> tile-derive-backward + tile-to-cpu-backward -> LLVM IR (the derived backward, tiled)
//   -> tile-to-ptx -> PTX (NVPTX in process), the derived backward's too
// Any stage may reject an input; none may crash. A crash (signal or fatal error) is caught with
// llvm::CrashRecoveryContext, the input is written to the reproducer directory and reported,
// and the run fails. Rejections with no located diagnostic (file:line:col) are reported too.
//
// Input i is mutated by a generator seeded with (seed, i) alone, so `--seed S --first I --runs 1`
// reproduces input I of a run exactly.
//
//===----------------------------------------------------------------------===//
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "tilefuse/dialect/ParseKernel.h"
#include "tilefuse/dialect/TileOps.h"
#include "tilefuse/kernels/Registry.h"
#include "tilefuse/passes/Passes.h"
#include "tilefuse/passes/Pipelines.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/CrashRecoveryContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <random>

using namespace mlir;
namespace cl = llvm::cl;

static cl::OptionCategory fuzzCategory("tilefuse-fuzz options");
static cl::list<std::string> inputFiles(cl::Positional,
                                        cl::desc("[FILE.mlir...] (default: the kernels of "
                                                 "kernels/, as the registry embeds them)"),
                                        cl::cat(fuzzCategory));
static cl::opt<uint64_t> runs("runs", cl::desc("Mutated inputs to try"), cl::init(1000),
                              cl::cat(fuzzCategory));
static cl::opt<uint64_t> firstInput("first", cl::desc("Index of the first input (to replay one)"),
                                    cl::init(0), cl::cat(fuzzCategory));
static cl::opt<uint64_t> seed("seed", cl::desc("Seed of the mutations"), cl::init(1),
                              cl::cat(fuzzCategory));
static cl::opt<unsigned> maxMutations("max-mutations",
                                      cl::desc("At most this many mutations per input (1 or more)"),
                                      cl::init(3), cl::cat(fuzzCategory));
static cl::opt<std::string> reproducerDir("reproducer-dir",
                                          cl::desc("Where crashing inputs are written"),
                                          cl::init("."), cl::cat(fuzzCategory));
static cl::opt<unsigned> maxCrashes("max-crashes",
                                    cl::desc("Stop after this many crashes (0: never)"),
                                    cl::init(10), cl::cat(fuzzCategory));
static cl::opt<bool> ptx("ptx", cl::desc("Lower accepted inputs to PTX too"), cl::init(true),
                         cl::cat(fuzzCategory));
static cl::opt<int64_t> crashAt("crash-at",
                                cl::desc("Tests the harness: input N faults instead of running"),
                                cl::init(-1), cl::Hidden, cl::cat(fuzzCategory));
static cl::opt<bool> verbose("v", cl::desc("Print every input's outcome"), cl::init(false),
                             cl::cat(fuzzCategory));

//===----------------------------------------------------------------------===//
// Mutations
//===----------------------------------------------------------------------===//

namespace {

/// The words a mutation may swap for another of the same family (a typo that still parses).
const std::vector<std::vector<llvm::StringRef>> kWordFamilies = {
    {"tile.load", "tile.store", "tile.dot", "tile.scale", "tile.score_mod", "tile.mask",
     "tile.softmax", "tile.yield"},
    {"arith.addi", "arith.subi", "arith.muli", "arith.divsi", "arith.divui", "arith.remsi",
     "arith.remui", "arith.andi", "arith.ori", "arith.xori", "arith.maxsi", "arith.minsi",
     "arith.shli", "arith.shrsi", "arith.ceildivsi", "arith.floordivsi"},
    {"arith.addf", "arith.subf", "arith.mulf", "arith.divf", "arith.maximumf", "arith.minimumf",
     "arith.remf"},
    {"arith.index_cast", "arith.index_castui", "arith.sitofp", "arith.uitofp", "arith.fptosi",
     "arith.extf", "arith.truncf", "arith.extsi", "arith.trunci", "arith.bitcast"},
    {"math.exp2", "math.exp", "math.log", "math.log2", "math.sqrt", "math.tanh", "math.absf",
     "math.rsqrt"},
    {"arith.cmpi", "arith.cmpf", "arith.select", "arith.constant"},
    {"memref.dim", "tensor.dim"},
    {"eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge"},
    {"oeq", "one", "olt", "ole", "ogt", "oge", "ueq", "une", "ult", "uno", "ord"},
    {"bf16", "f16", "f32", "f64", "i1", "i8", "i32", "i64", "index"},
    {"memref", "tensor", "vector"},
    {"transpose_rhs", "transpose_lhs", "scale"},
};

/// Integers at the edges: negative, zero, one, odd, powers of two, 32- and 64-bit limits, and
/// one that fits in no machine integer.
const llvm::StringRef kBoundaryIntegers[] = {"-3",
                                             "-1",
                                             "0",
                                             "1",
                                             "2",
                                             "3",
                                             "7",
                                             "16",
                                             "63",
                                             "64",
                                             "65",
                                             "128",
                                             "256",
                                             "4096",
                                             "2147483647",
                                             "2147483648",
                                             "-2147483648",
                                             "4294967296",
                                             "9223372036854775807",
                                             "-9223372036854775808",
                                             "99999999999999999999999"};
const llvm::StringRef kBoundaryFloats[] = {"0.0",        "-0.0",      "1.0",     "-1.0",
                                           "1.0e38",     "-1.0e38",   "1.0e-45", "3.4e39",
                                           "0x7FC00000", "0xFF800000"};
/// Dimension sizes of a shaped type.
const llvm::StringRef kDimensions[] = {
    "?", "0", "1", "3", "7", "16", "32", "64", "128", "256", "2147483648", "9223372036854775807"};

bool isWordChar(char c) { return llvm::isAlnum(c) || c == '_' || c == '.' || c == '$'; }

class Mutator {
public:
  Mutator(uint64_t seed, uint64_t index) : rng(seed * 0x9E3779B97F4A7C15ull + index) {}

  /// Applies 1 to `maxCount` mutations to `text`; `log` says what changed.
  std::string mutate(std::string text, unsigned maxCount, std::string &log) {
    unsigned count = 1 + pick(std::max(1u, maxCount));
    llvm::raw_string_ostream os(log);
    for (unsigned i = 0; i < count; ++i) {
      // A mutation that finds nothing to change returns false; another kind is tried.
      for (int attempt = 0; attempt < 8; ++attempt)
        if (mutateOnce(text, os))
          break;
    }
    return text;
  }

private:
  uint64_t pick(uint64_t n) { return n ? rng() % n : 0; }
  template <typename Range> llvm::StringRef pickFrom(const Range &range) {
    return range[pick(std::size(range))];
  }

  bool mutateOnce(std::string &text, llvm::raw_ostream &log) {
    switch (pick(10)) {
    case 0:
    case 1:
      return replaceInteger(text, log);
    case 2:
      return replaceDimension(text, log);
    case 3:
      return editLines(text, log);
    case 4:
    case 5:
      return swapWord(text, log);
    case 6:
      return redirectUse(text, log);
    case 7:
      return dropBlockArgument(text, log);
    case 8:
      return replaceFloat(text, log);
    default:
      return cutCharacters(text, log);
    }
  }

  /// Spans [begin, end) of `text` for which `isToken(begin, end)` holds, found by `scan`.
  using Span = std::pair<size_t, size_t>;

  static std::vector<Span> integerLiterals(const std::string &text) {
    std::vector<Span> spans;
    for (size_t i = 0; i < text.size(); ++i) {
      if (!llvm::isDigit(text[i]) || (i && (isWordChar(text[i - 1]) || text[i - 1] == '%' ||
                                            text[i - 1] == '#' || text[i - 1] == '^')))
        continue;
      size_t begin = i && text[i - 1] == '-' ? i - 1 : i, end = i;
      while (end < text.size() && llvm::isDigit(text[end]))
        ++end;
      // A float (1.0, 2e3), a hex literal or a dimension of a shape (64x) is not an integer.
      if (end < text.size() && (isWordChar(text[end]) || text[end] == 'x'))
        i = end;
      else
        spans.push_back({begin, end});
      i = end;
    }
    return spans;
  }

  static std::vector<Span> floatLiterals(const std::string &text) {
    std::vector<Span> spans;
    for (size_t i = 0; i + 1 < text.size(); ++i) {
      if (!llvm::isDigit(text[i]) || (i && (isWordChar(text[i - 1]) || text[i - 1] == '%')))
        continue;
      size_t begin = i && text[i - 1] == '-' ? i - 1 : i, end = i;
      while (end < text.size() && (llvm::isAlnum(text[end]) || text[end] == '.' ||
                                   ((text[end] == '-' || text[end] == '+') &&
                                    (text[end - 1] == 'e' || text[end - 1] == 'E'))))
        ++end;
      llvm::StringRef token(text.data() + i, end - i);
      if (token.contains('.') && !token.contains('x'))
        spans.push_back({begin, end});
      i = end;
    }
    return spans;
  }

  /// The sizes in shaped types: each `?` or integer followed by `x` right after `<` or after
  /// another size, e.g. the ?, ?, ? and 64 of memref<?x?x?x64xbf16>.
  static std::vector<Span> dimensions(const std::string &text) {
    std::vector<Span> spans;
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] != '<')
        continue;
      size_t j = i + 1;
      while (j < text.size()) {
        size_t end = j;
        if (text[end] == '?')
          ++end;
        else
          while (end < text.size() && llvm::isDigit(text[end]))
            ++end;
        if (end == j || end >= text.size() || text[end] != 'x')
          break;
        spans.push_back({j, end});
        j = end + 1;
      }
    }
    return spans;
  }

  void replace(std::string &text, Span span, llvm::StringRef with, llvm::StringRef what,
               llvm::raw_ostream &log) {
    log << "  " << what << " at offset " << span.first << ": '"
        << llvm::StringRef(text).slice(span.first, span.second) << "' -> '" << with << "'\n";
    text.replace(span.first, span.second - span.first, with.str());
  }

  bool replaceInteger(std::string &text, llvm::raw_ostream &log) {
    std::vector<Span> spans = integerLiterals(text);
    if (spans.empty())
      return false;
    replace(text, spans[pick(spans.size())], pickFrom(kBoundaryIntegers), "integer", log);
    return true;
  }

  bool replaceFloat(std::string &text, llvm::raw_ostream &log) {
    std::vector<Span> spans = floatLiterals(text);
    if (spans.empty())
      return false;
    replace(text, spans[pick(spans.size())], pickFrom(kBoundaryFloats), "float", log);
    return true;
  }

  bool replaceDimension(std::string &text, llvm::raw_ostream &log) {
    std::vector<Span> spans = dimensions(text);
    if (spans.empty())
      return false;
    Span span = spans[pick(spans.size())];
    switch (pick(4)) {
    case 0: // drop the dimension: a rank changes
      replace(text, {span.first, span.second + 1}, "", "dimension dropped", log);
      return true;
    case 1: { // repeat it
      std::string dim = text.substr(span.first, span.second - span.first + 1);
      replace(text, {span.first, span.first}, dim, "dimension repeated", log);
      return true;
    }
    default:
      replace(text, span, pickFrom(kDimensions), "dimension", log);
      return true;
    }
  }

  bool editLines(std::string &text, llvm::raw_ostream &log) {
    llvm::SmallVector<llvm::StringRef> lines;
    llvm::StringRef(text).split(lines, '\n');
    if (lines.size() < 2)
      return false;
    std::vector<std::string> out(lines.begin(), lines.end());
    size_t a = pick(out.size()), b = pick(out.size());
    switch (pick(3)) {
    case 0:
      log << "  line " << a + 1 << " deleted: " << out[a] << "\n";
      out.erase(out.begin() + a);
      break;
    case 1:
      log << "  line " << a + 1 << " duplicated: " << out[a] << "\n";
      out.insert(out.begin() + a, out[a]);
      break;
    default:
      log << "  lines " << a + 1 << " and " << b + 1 << " swapped\n";
      std::swap(out[a], out[b]);
      break;
    }
    text = llvm::join(out, "\n");
    return true;
  }

  bool swapWord(std::string &text, llvm::raw_ostream &log) {
    // Every whole word of the text that belongs to a family.
    std::vector<std::pair<Span, size_t>> words;
    for (size_t i = 0; i < text.size();) {
      if (!isWordChar(text[i]) || (i && (isWordChar(text[i - 1]) || text[i - 1] == '%' ||
                                         text[i - 1] == '!' || text[i - 1] == '^'))) {
        ++i;
        continue;
      }
      size_t end = i;
      while (end < text.size() && isWordChar(text[end]))
        ++end;
      llvm::StringRef word(text.data() + i, end - i);
      for (size_t f = 0; f < kWordFamilies.size(); ++f)
        if (llvm::is_contained(kWordFamilies[f], word))
          words.push_back({{i, end}, f});
      i = end;
    }
    if (words.empty())
      return false;
    auto [span, family] = words[pick(words.size())];
    // Mostly a word of the same family; now and then one of any family.
    const auto &pool = pick(8) ? kWordFamilies[family] : kWordFamilies[pick(kWordFamilies.size())];
    replace(text, span, pool[pick(pool.size())], "word", log);
    return true;
  }

  /// Replaces one use of an SSA value (%x, not its definition) with another value's name.
  bool redirectUse(std::string &text, llvm::raw_ostream &log) {
    std::vector<Span> names;
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] != '%')
        continue;
      size_t end = i + 1;
      while (end < text.size() && (isWordChar(text[end]) || text[end] == '#'))
        ++end;
      if (end > i + 1)
        names.push_back({i, end});
      i = end;
    }
    if (names.size() < 2)
      return false;
    Span use = names[pick(names.size())], other = names[pick(names.size())];
    std::string replacement = text.substr(other.first, other.second - other.first);
    replace(text, use, replacement, "SSA name", log);
    return true;
  }

  bool dropBlockArgument(std::string &text, llvm::raw_ostream &log) {
    std::vector<size_t> blocks;
    for (size_t pos = text.find("^bb"); pos != std::string::npos; pos = text.find("^bb", pos + 1))
      blocks.push_back(pos);
    if (blocks.empty())
      return false;
    size_t open = text.find('(', blocks[pick(blocks.size())]);
    size_t close = open == std::string::npos ? open : text.find(')', open);
    if (close == std::string::npos)
      return false;
    llvm::SmallVector<llvm::StringRef> args;
    llvm::StringRef(text).slice(open + 1, close).split(args, ',');
    if (args.empty())
      return false;
    args.erase(args.begin() + pick(args.size()));
    std::string joined =
        llvm::join(llvm::map_range(args, [](llvm::StringRef a) { return a.trim(); }), ", ");
    replace(text, {open + 1, close}, joined, "block arguments", log);
    return true;
  }

  bool cutCharacters(std::string &text, llvm::raw_ostream &log) {
    if (text.empty())
      return false;
    size_t at = pick(text.size()), length = 1 + pick(4);
    replace(text, {at, std::min(text.size(), at + length)}, "", "characters cut", log);
    return true;
  }

  std::mt19937_64 rng;
};

//===----------------------------------------------------------------------===//
// One input through the front door and both lowerings
//===----------------------------------------------------------------------===//

/// How far an input got: a rejection at any stage stops it there.
enum class Outcome { Rejected, LoweredToLLVMIR, LoweredToPTX };

struct InputResult {
  Outcome outcome = Outcome::Rejected;
  /// The stage that rejected the input, and whether it said where (file:line:col).
  std::string rejectedBy;
  bool located = false;
  std::string firstError;
};

class FrontDoor {
public:
  FrontDoor() {
    registerAllDialects(registry);
    registerAllExtensions(registry);
    registerAllToLLVMIRTranslations(registry);
    registry.insert<tilefuse::tile::TileDialect>();
  }

  InputResult run(llvm::StringRef text, llvm::StringRef bufferName, uint64_t optionSeed) {
    InputResult result;
    MLIRContext ctx(registry, MLIRContext::Threading::DISABLED);
    ctx.loadDialect<tilefuse::tile::TileDialect, func::FuncDialect>();
    ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &diag) {
      if (diag.getSeverity() == DiagnosticSeverity::Error && result.firstError.empty()) {
        result.located = isa<FileLineColLoc>(diag.getLocation()) ||
                         diag.getLocation()->findInstanceOf<FileLineColLoc>();
        llvm::raw_string_ostream os(result.firstError);
        os << diag.getLocation() << ": " << diag.str();
      }
      return success();
    });
    // Keeps result.outcome: a PTX rejection still counts as lowered to LLVM IR.
    auto reject = [&](llvm::StringRef stage) {
      result.rejectedBy = stage.str();
      return result;
    };

    // As the runtime parses (DiagnosedSource): through parseKernel's checks.
    llvm::SourceMgr sourceMgr;
    sourceMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(text, bufferName),
                                 llvm::SMLoc());
    OwningOpRef<ModuleOp> module = tilefuse::parseKernel(sourceMgr, ParserConfig(&ctx));
    if (!module)
      return reject("parse/verify");
    if (failed(tilefuse::checkWrittenForm(*module)))
      return reject("checkWrittenForm");

    // The runtime specializes a kernel to the caller's head dimension and storage type first.
    std::mt19937_64 optionRng(optionSeed);
    if (optionRng() % 4 == 0) {
      static const int64_t headDims[] = {0, 16, 32, 64, 128, 256, 7};
      static const char *types[] = {"", "bf16", "f16", "f32"};
      PassManager pm(&ctx, ModuleOp::getOperationName());
      tilefuse::TileSpecializeOptions options;
      options.headDim = headDims[optionRng() % std::size(headDims)];
      options.elementType = types[optionRng() % std::size(types)];
      pm.addPass(tilefuse::createTileSpecialize(options));
      if (failed(pm.run(*module)))
        return reject("tile-specialize");
    }
    static const int64_t blockSizes[] = {16, 32, 64, 128};
    int64_t blockM = blockSizes[optionRng() % 4], blockN = blockSizes[optionRng() % 4];

    {
      OwningOpRef<ModuleOp> cpu = module->clone();
      PassManager pm(&ctx, ModuleOp::getOperationName());
      tilefuse::FrontEndOptions options;
      options.blockM = blockM;
      options.blockN = blockN;
      tilefuse::buildTileToCpuPipeline(pm, options);
      if (failed(pm.run(*cpu)))
        return reject("tile-to-cpu");
      llvm::LLVMContext llvmContext;
      if (!translateModuleToLLVMIR(*cpu, llvmContext))
        return reject("translation to LLVM IR");
    }
    result.outcome = Outcome::LoweredToLLVMIR;

    // The derived backward (tile-derive-backward, then tile-tiling-backward and the CPU
    // lowering): a kernel it does not model is an error at its op, never a crash. Its
    // rejections do not decide the outcome: a forward without a backward is a valid kernel.
    {
      OwningOpRef<ModuleOp> backward = module->clone();
      PassManager pm(&ctx, ModuleOp::getOperationName());
      pm.addPass(tilefuse::createTileDeriveBackward());
      tilefuse::BackwardPipelineOptions options;
      options.blockM = blockM;
      options.blockN = blockN;
      options.deterministic = optionRng() % 2 == 0;
      tilefuse::buildTileBackwardToCpuPipeline(pm, options);
      if (succeeded(pm.run(*backward))) {
        llvm::LLVMContext llvmContext;
        (void)translateModuleToLLVMIR(*backward, llvmContext);
      }
      result.firstError.clear();
      result.located = false;
    }
    if (!ptx)
      return result;

    std::string chip = optionRng() % 2 ? "sm_90a" : "sm_80";
    // The derived backward down to PTX as `tilefuse compile --backward` takes it (Br = Bc,
    // warpgroup MMAs on sm_90a, atomic or ordered dQ). Like the CPU backward, its rejections
    // do not decide the outcome; it runs on its own copy before the forward's lowering
    // consumes the module.
    {
      OwningOpRef<ModuleOp> backward = module->clone();
      PassManager pm(&ctx, ModuleOp::getOperationName());
      tilefuse::GpuPipelineOptions options;
      tilefuse::TileConfig tiles;
      tiles.blockM = tiles.blockN = blockM < 64 ? 64 : blockM;
      tiles.rowsPerWarp = 16;
      tiles.mma = chip == "sm_90a" ? tilefuse::MmaKind::Wgmma : tilefuse::MmaKind::Sync;
      options.config = tiles.print();
      options.chip = chip;
      options.backward = true;
      options.deterministic = optionRng() % 2 == 0;
      tilefuse::buildTileToPTXPipeline(pm, options);
      (void)pm.run(*backward);
      result.firstError.clear();
      result.located = false;
    }

    PassManager pm(&ctx, ModuleOp::getOperationName());
    tilefuse::GpuPipelineOptions options;
    tilefuse::TileConfig tiles;
    tiles.blockM = blockM;
    tiles.blockN = blockN;
    options.config = tiles.print();
    options.chip = chip;
    tilefuse::buildTileToPTXPipeline(pm, options);
    if (failed(pm.run(*module)))
      return reject("tile-to-ptx");
    result.outcome = Outcome::LoweredToPTX;
    return result;
  }

private:
  DialectRegistry registry;
};

struct Seed {
  std::string name, text;
};

} // namespace

static bool loadSeeds(std::vector<Seed> &seeds) {
  if (inputFiles.empty()) {
    for (const tilefuse::kernels::KernelSource &k : tilefuse::kernels::all())
      seeds.push_back({k.fileName, k.text});
    return true;
  }
  for (const std::string &file : inputFiles) {
    auto buffer = llvm::MemoryBuffer::getFile(file);
    if (!buffer) {
      llvm::errs() << "error: cannot read " << file << ": " << buffer.getError().message() << "\n";
      return false;
    }
    seeds.push_back({file, (*buffer)->getBuffer().str()});
  }
  return true;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  tilefuse::registerTilePasses();
  cl::HideUnrelatedOptions(fuzzCategory);
  cl::ParseCommandLineOptions(argc, argv,
                              "tilefuse-fuzz: mutates DSL kernels and runs each through parsing, "
                              "verification, the front end and both lowerings; fails on a crash\n");
  std::vector<Seed> seeds;
  if (!loadSeeds(seeds) || seeds.empty())
    return 2;
  if (std::error_code ec = llvm::sys::fs::create_directories(reproducerDir)) {
    llvm::errs() << "error: cannot create " << reproducerDir << ": " << ec.message() << "\n";
    return 2;
  }

  llvm::CrashRecoveryContext::Enable();
  FrontDoor frontDoor;
  uint64_t tried = 0, rejected = 0, toLLVMIR = 0, toPTX = 0, unlocated = 0;
  std::vector<std::string> crashes;
  llvm::StringMap<uint64_t> rejectedByStage;
  auto start = std::chrono::steady_clock::now();
  for (uint64_t i = firstInput; i < firstInput + runs; ++i) {
    ++tried;
    Mutator mutator(seed, i);
    const Seed &base = seeds[i % seeds.size()];
    std::string log;
    std::string text = mutator.mutate(base.text, maxMutations, log);
    std::string bufferName =
        (llvm::Twine("fuzz-") + llvm::Twine(seed) + "-" + llvm::Twine(i) + ".mlir").str();

    InputResult result;
    llvm::CrashRecoveryContext crashRecovery;
    if (!crashRecovery.RunSafely([&] {
          if (static_cast<int64_t>(i) == crashAt)
            *static_cast<volatile int *>(nullptr) = 0;
          result = frontDoor.run(text, bufferName, seed ^ i);
        })) {
      llvm::SmallString<256> path(reproducerDir.getValue());
      llvm::sys::path::append(path, "crash-" + bufferName);
      std::error_code ec;
      llvm::raw_fd_ostream out(path, ec, llvm::sys::fs::OF_Text);
      if (!ec)
        out << text;
      llvm::errs() << "CRASH on input " << i << " (seed " << seed << ", from " << base.name
                   << "; replay: --seed " << seed << " --first " << i << " --runs 1), written to "
                   << path << "\n"
                   << log;
      crashes.push_back(std::string(path));
      if (maxCrashes && crashes.size() >= maxCrashes)
        break;
      continue;
    }
    if (!result.rejectedBy.empty()) {
      ++rejectedByStage[result.rejectedBy];
      if (!result.located) {
        ++unlocated;
        llvm::errs() << "input " << i << " (from " << base.name << "): rejected by "
                     << result.rejectedBy << " without a located diagnostic: "
                     << (result.firstError.empty() ? "(no error)" : result.firstError) << "\n"
                     << log;
      }
    }
    if (result.outcome == Outcome::Rejected)
      ++rejected;
    if (result.outcome != Outcome::Rejected)
      ++toLLVMIR;
    if (result.outcome == Outcome::LoweredToPTX)
      ++toPTX;
    if (verbose)
      llvm::outs() << "input " << i << " (from " << base.name << "): "
                   << (result.rejectedBy.empty() ? std::string("lowered")
                                                 : "rejected by " + result.rejectedBy)
                   << "\n"
                   << log;
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  llvm::outs() << "tilefuse-fuzz: " << tried << " inputs (seed " << seed << ") in "
               << llvm::format("%.1f", seconds) << " s: " << rejected
               << " rejected before LLVM IR; rejections by stage: ";
  llvm::interleaveComma(rejectedByStage, llvm::outs(), [](const auto &entry) {
    llvm::outs() << entry.first() << " " << entry.second;
  });
  llvm::outs() << "; " << toLLVMIR << " lowered to LLVM IR, " << toPTX << " to PTX, " << unlocated
               << " rejected without a location, " << crashes.size() << " crashes\n";
  return crashes.empty() ? 0 : 1;
}
