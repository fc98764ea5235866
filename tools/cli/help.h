// The CLI's help texts, made from the commands' tables (cli/commands.h), so that they list
// exactly the flags each command accepts, with the limits and defaults it applies.
#pragma once

#include <string>

#include "cli/commands.h"

namespace shardrt::cli {

// The text of `shardrt NAME --help` and `shardrt help NAME`: the usage line, the command's
// one-sentence summary, then one line per flag of its table (name and value, description,
// accepted range, default), then the flags every command takes (--timeout, --help). Ends with a
// newline. Thread-safe (pure).
std::string CommandHelp(const CommandDef& command);

// The text of `shardrt --help` and `shardrt help`: the usage line and one line per command
// (Commands()) with its summary. Ends with a newline. Thread-safe (pure).
std::string OverviewHelp();

}  // namespace shardrt::cli
