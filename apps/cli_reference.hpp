// The command-line reference as markdown (docs/cli.md), written from the table of subcommands
// and their option tables, the same data `--help` prints; `iclprobe help --markdown` prints it.
#pragma once

#include <string>

namespace icl::cli {

// Every subcommand, in the order of `iclprobe --help`, with its summary and a table of its
// options (name and alias, value type, default, whether it names a file read or written, help).
std::string CliReferenceMarkdown();

}  // namespace icl::cli
