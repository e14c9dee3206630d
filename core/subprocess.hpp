// Running another program (gnuplot) with fork/exec: no shell between us and it, so no argument
// or folder name is ever parsed as a command.
#pragma once

#include <string>
#include <vector>

namespace icl::core {

// The absolute path of `name` on PATH (or of $env_override when that is set), or "" when
// there is none.
std::string FindProgram(const std::string& name, const char* env_override = nullptr);

// Runs `program` with `args` in `workdir` (fork/exec, no shell); returns its exit status and
// puts the start of what it printed in `output`.
int RunProgram(const std::string& program, const std::vector<std::string>& args,
               const std::string& workdir, std::string* output);

}  // namespace icl::core
