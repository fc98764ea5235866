// shardrt cache info|clear [--compile-cache DIR] [--json]: the persistent compile cache's
// entries and size, or removes them. The directory is the one the other commands use
// (CompileCacheDirectory: the flag, $SHARDRT_COMPILE_CACHE, the XDG default).
#include <sys/stat.h>

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "shardrt/base/json_writer.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/runtime_setup.h"
#include "shardrt/base/status_macros.h"
#include "shardrt/client/persistent_cache.h"

namespace shardrt::cli {
namespace {

constexpr FlagDef kFlags[] = {
    {.name = "compile-cache", .value_name = "DIR",
     .description = "folder of the persistent compile cache",
     .default_text = kCompileCacheFlag.default_text},
    {.name = "json", .type = FlagType::kBoolean,
     .description = "print `cache info` as one JSON object", .default_text = "off"},
};

// The note after an entry that is not valid: "(invalid)" for a regular file (damaged, of
// another format or key), "(invalid: a directory, not an entry file)" for something else under
// an entry's name, which the cache neither reads nor removes (its size is not counted).
std::string InvalidNote(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return "  (invalid)";
  absl::string_view kind = "a special file";
  if (S_ISDIR(st.st_mode)) kind = "a directory";
  if (S_ISFIFO(st.st_mode)) kind = "a FIFO";
  if (S_ISLNK(st.st_mode)) kind = "a symbolic link";
  if (S_ISSOCK(st.st_mode)) kind = "a socket";
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) kind = "a device";
  return absl::StrCat("  (invalid: ", kind, ", not an entry file)");
}

}  // namespace

constinit const CommandDef kCacheCommand{
    .name = "cache",
    .usage = "info|clear [flags]",
    .summary = "Lists the persistent compile cache's entries and size (info), or removes them "
               "(clear).",
    .flags = kFlags,
    .run = CacheCommand};

// The `cache` subcommand (see commands.h). Errors: bad arguments (InvalidArgument), a missing
// directory (NotFound), the file system's.
absl::Status CacheCommand(const std::vector<std::string>& args) {
  SHARDRT_ASSIGN_OR_RETURN(Flags flags, Flags::Parse(args, kFlags));
  if (flags.positional().size() != 1 ||
      (flags.positional()[0] != "info" && flags.positional()[0] != "clear")) {
    return absl::InvalidArgumentError("expected `cache info` or `cache clear`");
  }
  SHARDRT_ASSIGN_OR_RETURN(std::string dir, CompileCacheDirectory(flags.Get("compile-cache")));
  if (dir.empty()) {
    return absl::InvalidArgumentError(
        "no compile cache: --compile-cache, $SHARDRT_COMPILE_CACHE, $XDG_CACHE_HOME and $HOME "
        "name none");
  }
  if (flags.positional()[0] == "clear") {
    SHARDRT_ASSIGN_OR_RETURN(int64_t removed, ClearPersistentCache(dir));
    std::printf("removed %lld entries from %s\n", static_cast<long long>(removed), dir.c_str());
    return absl::OkStatus();
  }
  SHARDRT_ASSIGN_OR_RETURN(PersistentCacheInfo info, InspectPersistentCache(dir));
  if (flags.Has("json")) {
    std::string entries;
    for (const PersistentCacheEntryInfo& e : info.entries) {
      absl::StrAppend(&entries, entries.empty() ? "" : ", ", "{\"file\": ", JsonString(e.file),
                      ", \"name\": ", JsonString(e.name), ", \"bytes\": ", e.bytes,
                      ", \"modified\": ", e.modified_unix_seconds,
                      ", \"valid\": ", e.valid ? "true" : "false", "}");
    }
    std::printf("{\"directory\": %s, \"entries\": [%s], \"bytes\": %lld}\n",
                JsonString(info.directory).c_str(), entries.c_str(),
                static_cast<long long>(info.bytes));
    return absl::OkStatus();
  }
  std::printf("%s: %zu entries, %lld bytes\n", info.directory.c_str(), info.entries.size(),
              static_cast<long long>(info.bytes));
  for (const PersistentCacheEntryInfo& e : info.entries) {
    std::printf("  %s  %10lld bytes  %s%s\n", e.file.substr(0, 16).c_str(),
                static_cast<long long>(e.bytes), e.name.c_str(),
                e.valid ? "" : InvalidNote(info.directory + "/" + e.file).c_str());
  }
  return absl::OkStatus();
}

}  // namespace shardrt::cli
