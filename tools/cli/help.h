// The CLI's help texts, made from the commands' tables (cli/commands.h), so that they list
// exactly the flags each command accepts, with the limits and defaults it applies.
#pragma once

#include <string>

#include "absl/strings/string_view.h"
#include "cli/commands.h"

namespace shardrt::cli {

// The text of `shardrt NAME --help` and `shardrt help NAME`: the usage line, the command's
// one-sentence summary, then one line per flag of its table (name and value, description,
// accepted range, default), then the flags every command takes (--timeout, --help). Ends with a
// newline. Thread-safe (pure).
std::string CommandHelp(const CommandDef& command);
// The same for `command` typed as `invocation` (e.g. "shardrt generate", or the name of a
// program of its own built on the command): the usage line reads "usage: INVOCATION USAGE".
// CommandHelp(command) is CommandHelp(command, "shardrt NAME"). Thread-safe (pure).
std::string CommandHelp(const CommandDef& command, absl::string_view invocation);

// The text of `shardrt --help` and `shardrt help`: the usage line and one line per command
// (Commands()) with its summary. Ends with a newline. Thread-safe (pure).
std::string OverviewHelp();

}  // namespace shardrt::cli
