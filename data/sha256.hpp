// SHA-256 of a file, hex encoded: how files made from a checkpoint or an activations file
// record exactly which one they came from.
#pragma once

#include <string>

namespace icl::data {

// Throws std::runtime_error naming the file when it cannot be read.
std::string Sha256File(const std::string& path);

}  // namespace icl::data
