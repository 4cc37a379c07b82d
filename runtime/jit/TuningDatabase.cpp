//===- TuningDatabase.cpp - the autotuner's winners, on disk --------------===//
#include "tilefuse/runtime/jit/TuningDatabase.h"

#include "tilefuse/runtime/cuda/Driver.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"


using namespace tilefuse::runtime;
using namespace tilefuse::runtime::jit;

static constexpr llvm::StringLiteral entryMagic = "tilefuse-tuning 1";

std::string GpuIdentity::text() const {
  return llvm::formatv("{0}|sms={1}|cc={2}.{3}|driver={4}", name, multiprocessors, computeMajor,
                       computeMinor, driverVersion)
      .str();
}

llvm::Expected<GpuIdentity> GpuIdentity::parse(llvm::StringRef text) {
  auto fail = [&](const llvm::Twine &why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "GPU '" + text + "': " + why +
                                       " (expected NAME|sms=N|cc=MAJOR.MINOR|driver=N)");
  };
  llvm::SmallVector<llvm::StringRef> parts;
  text.split(parts, '|');
  if (parts.size() != 4)
    return fail("needs four fields");
  GpuIdentity gpu;
  gpu.name = parts[0].str();
  llvm::StringRef sms = parts[1], cc = parts[2], driver = parts[3];
  if (!sms.consume_front("sms=") || sms.getAsInteger(10, gpu.multiprocessors))
    return fail("bad sms=");
  auto [major, minor] = cc.drop_front(cc.starts_with("cc=") ? 3 : cc.size()).split('.');
  if (!cc.starts_with("cc=") || major.getAsInteger(10, gpu.computeMajor) ||
      minor.getAsInteger(10, gpu.computeMinor))
    return fail("bad cc=");
  if (!driver.consume_front("driver=") || driver.getAsInteger(10, gpu.driverVersion))
    return fail("bad driver=");
  return gpu;
}

llvm::Expected<GpuIdentity> GpuIdentity::current() {
  auto driver = cuda::Driver::get();
  if (!driver)
    return driver.takeError();
  auto device = driver->currentDevice();
  if (!device)
    return device.takeError();
  GpuIdentity gpu;
  gpu.name = device->name;
  gpu.multiprocessors = device->multiprocessorCount;
  gpu.computeMajor = device->computeMajor;
  gpu.computeMinor = device->computeMinor;
  gpu.driverVersion = driver->version();
  return gpu;
}

int64_t jit::sequenceBucket(int64_t length) {
  int64_t bucket = 512;
  while (bucket < length && bucket < 65536)
    bucket *= 2;
  return bucket;
}

bool TunedKeySplits::appliesTo(int64_t launchPrograms, int64_t launchKeyBlocks) const {
  return launchPrograms == programs && 2 * launchKeyBlocks > keyBlocks &&
         launchKeyBlocks <= keyBlocks;
}

int64_t jit::keySplitsForLaunch(int64_t requested, const std::optional<TunedKeySplits> &tuned,
                                int64_t programs, int64_t keyBlocks) {
  if (requested != 0)
    return requested;
  if (tuned && tuned->appliesTo(programs, keyBlocks))
    return tuned->kvSplits;
  return 0;
}

std::string TuningKey::text() const {
  std::string out;
  llvm::raw_string_ostream os(out);
  os << "tilefuse-tuning-key 1\n"
     << "kernel=" << kernelIdentity << "\n"
     << "dtype=" << dtype << "\n"
     << "head_dim=" << headDim << "\n"
     << "seq_bucket=" << seqBucket << "\n"
     << "gpu=" << gpu.text() << "\n"
     << "tilefuse=" << version << "\n";
  return out;
}

std::string TuningKey::digest() const {
  llvm::SHA256 sha;
  sha.update(text());
  std::array<uint8_t, 32> bytes = sha.final();
  return llvm::toHex(bytes, /*LowerCase=*/true);
}

TuningDatabase::TuningDatabase(std::string cacheDirectory) {
  if (!cacheDirectory.empty()) {
    llvm::SmallString<256> path(cacheDirectory);
    llvm::sys::path::append(path, "tuning");
    dir = std::string(path);
  }
}

std::string TuningDatabase::entryPath(const TuningKey &key) const {
  if (dir.empty())
    return "";
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, key.digest() + ".json");
  return std::string(path);
}

static llvm::json::Object keyJson(const TuningKey &key) {
  return llvm::json::Object{{"kernel", key.kernelIdentity},
                            {"dtype", key.dtype},
                            {"head_dim", key.headDim},
                            {"seq_bucket", key.seqBucket},
                            {"gpu", key.gpu.name},
                            {"sms", key.gpu.multiprocessors},
                            {"compute_capability", llvm::formatv("{0}.{1}", key.gpu.computeMajor,
                                                                 key.gpu.computeMinor)
                                                       .str()},
                            {"driver", key.gpu.driverVersion},
                            {"tilefuse", key.version}};
}

static std::string checksum(llvm::StringRef bytes) {
  return llvm::utohexstr(llvm::xxh3_64bits(bytes), /*LowerCase=*/true, /*Width=*/16);
}

std::string TuningDatabase::serializeEntry(const TuningKey &key, const TuningRecord &record) {
  llvm::json::Object o{
      {"key", keyJson(key)},
      {"config", record.config.print()},
      {"median_ms", record.medianMs},
      {"default_config", record.defaultConfig.print()},
      {"default_ms", record.defaultMs},
      {"candidates", record.candidates},
      {"timed", record.timed},
      {"tuning_seconds", record.tuningSeconds},
      {"shape", llvm::json::Object{{"B", record.B},
                                   {"H", record.H},
                                   {"Hkv", record.Hkv},
                                   {"M", record.M},
                                   {"N", record.N}}},
      {"created", record.created},
  };
  if (const std::optional<TunedKeySplits> &splits = record.keySplits)
    o["key_splits"] = llvm::json::Object{{"kv_splits", splits->kvSplits},
                                         {"programs", splits->programs},
                                         {"key_blocks", splits->keyBlocks},
                                         {"policy_splits", splits->policySplits}};
  std::string body = llvm::formatv("{0:2}", llvm::json::Value(std::move(o))).str() + "\n";
  return (entryMagic + " key=" + key.digest() + " bytes=" + llvm::Twine(body.size()) +
          " xxh3=" + checksum(body) + "\n" + body)
      .str();
}

llvm::Expected<TuningRecord> TuningDatabase::parseEntry(const TuningKey &key,
                                                        llvm::StringRef bytes) {
  auto fail = [](const llvm::Twine &why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), why);
  };
  auto [header, body] = bytes.split('\n');
  llvm::SmallVector<llvm::StringRef> fields;
  header.split(fields, ' ');
  if (fields.size() != 5 || (fields[0] + " " + fields[1]).str() != entryMagic)
    return fail("not a tilefuse tuning entry (or another format version)");
  llvm::StringRef storedKey = fields[2], size = fields[3], sum = fields[4];
  uint64_t n = 0;
  if (!storedKey.consume_front("key=") || !size.consume_front("bytes=") ||
      !sum.consume_front("xxh3=") || size.getAsInteger(10, n))
    return fail("malformed header");
  if (storedKey != key.digest())
    return fail("the entry is for key " + storedKey);
  if (body.size() != n)
    return fail("the entry has " + llvm::Twine(body.size()) + " bytes, the header says " +
                llvm::Twine(n) + " (truncated?)");
  if (checksum(body) != sum)
    return fail("checksum mismatch (corrupted)");
  llvm::Expected<llvm::json::Value> value = llvm::json::parse(body);
  if (!value)
    return fail("bad JSON: " + llvm::toString(value.takeError()));
  const llvm::json::Object *o = value->getAsObject();
  if (!o)
    return fail("not a JSON object");
  // The key's fields too: a hash collision or a hand-edited file must not pass as this key.
  const llvm::json::Object *storedFields = o->getObject("key");
  if (!storedFields || llvm::json::Value(llvm::json::Object(*storedFields)) !=
                           llvm::json::Value(keyJson(key)))
    return fail("the entry's key fields differ from the key's");
  TuningRecord record;
  auto config = [&](llvm::StringRef name, TileConfig &out, bool required) -> llvm::Error {
    std::optional<llvm::StringRef> text = o->getString(name);
    if (!text)
      return fail("missing string \"" + name + "\"");
    auto parsed = TileConfig::parse(*text);
    if (!parsed)
      return fail(name + ": " + llvm::toString(parsed.takeError()));
    if (required && !parsed->isComplete())
      return fail(name + " '" + *text + "' is not a complete configuration");
    out = *parsed;
    return llvm::Error::success();
  };
  if (llvm::Error error = config("config", record.config, /*required=*/true))
    return std::move(error);
  if (llvm::Error error = record.config.verify())
    return fail("config: " + llvm::toString(std::move(error)));
  if (llvm::Error error = config("default_config", record.defaultConfig, /*required=*/false))
    return std::move(error);
  std::optional<double> ms = o->getNumber("median_ms");
  if (!ms || !(*ms > 0))
    return fail("missing or non-positive \"median_ms\"");
  record.medianMs = *ms;
  record.defaultMs = o->getNumber("default_ms").value_or(0);
  record.candidates = o->getInteger("candidates").value_or(0);
  record.timed = o->getInteger("timed").value_or(0);
  record.tuningSeconds = o->getNumber("tuning_seconds").value_or(0);
  if (const llvm::json::Object *shape = o->getObject("shape"))
    for (auto [name, field] :
         {std::pair{"B", &record.B}, std::pair{"H", &record.H}, std::pair{"Hkv", &record.Hkv},
          std::pair{"M", &record.M}, std::pair{"N", &record.N}})
      *field = shape->getInteger(name).value_or(0);
  if (std::optional<llvm::StringRef> created = o->getString("created"))
    record.created = created->str();
  // Absent: the launcher chooses (entries written before the field, unsplit kernels).
  if (const llvm::json::Value *field = o->get("key_splits")) {
    const llvm::json::Object *splits = field->getAsObject();
    if (!splits)
      return fail("\"key_splits\" is not an object");
    TunedKeySplits tuned;
    for (auto [name, value] :
         {std::pair{"kv_splits", &tuned.kvSplits}, std::pair{"programs", &tuned.programs},
          std::pair{"key_blocks", &tuned.keyBlocks},
          std::pair{"policy_splits", &tuned.policySplits}}) {
      std::optional<int64_t> number = splits->getInteger(name);
      if (!number || *number < 1)
        return fail(llvm::Twine("\"key_splits\": missing or non-positive \"") + name + "\"");
      *value = *number;
    }
    record.keySplits = tuned;
  }
  return record;
}

std::optional<TuningRecord> TuningDatabase::lookup(const TuningKey &key) {
  std::string path = entryPath(key);
  auto miss = [&]() -> std::optional<TuningRecord> {
    std::lock_guard<std::mutex> lock(mutex);
    ++statistics.misses;
    return std::nullopt;
  };
  if (path.empty())
    return miss();
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return miss();
  auto record = parseEntry(key, (*buffer)->getBuffer());
  if (!record) {
    // Never used: deleted, so the next tuning writes a good one (a concurrent writer's fresh
    // entry may go too; it is tuned again on the next miss).
    std::string why = path + ": " + llvm::toString(record.takeError());
    (void)llvm::sys::fs::remove(path);
    {
      std::lock_guard<std::mutex> lock(mutex);
      ++statistics.badEntries;
      statistics.lastProblem = why;
    }
    return miss();
  }
  std::lock_guard<std::mutex> lock(mutex);
  ++statistics.hits;
  return std::move(*record);
}

llvm::Error TuningDatabase::store(const TuningKey &key, const TuningRecord &record) {
  std::string path = entryPath(key);
  if (path.empty())
    return llvm::Error::success();
  auto failed = [&](const llvm::Twine &why) {
    std::string message = ("cannot write " + path + ": " + why).str();
    std::lock_guard<std::mutex> lock(mutex);
    ++statistics.writeFailures;
    statistics.lastProblem = message;
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return failed("creating the directory: " + ec.message());
  // A temporary file beside the entry, renamed over it once complete (LLVM's writeToOutput):
  // readers and other writers never see a partial entry.
  if (llvm::Error e = llvm::writeToOutput(path, [&](llvm::raw_ostream &os) {
        os << serializeEntry(key, record);
        return llvm::Error::success();
      }))
    return failed(llvm::toString(std::move(e)));
  std::lock_guard<std::mutex> lock(mutex);
  ++statistics.writes;
  return llvm::Error::success();
}

TuningDatabaseStats TuningDatabase::stats() const {
  std::lock_guard<std::mutex> lock(mutex);
  return statistics;
}
