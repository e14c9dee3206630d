// Strict reading of the JSON configurations stored in iclprobe files. nlohmann's get<int>()
// converts silently (4.7 -> 4, 2^32 + 8 -> 8, -1 -> 2^64 - 1 for unsigned); files are hostile,
// so every number is read with its type and range checked, and every error names the source.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace icl::core::json {

// Parses `text`; throws core::InputError("<what>: not valid JSON (...)").
nlohmann::json Parse(const std::string& text, const std::string& what);

// j[key] as an integer in [lo, hi]: a JSON integer (not 4.7, not "4"), else
// core::InputError("<what>: '<key>' ...").
std::int64_t Int(const nlohmann::json& j, const std::string& key, const std::string& what,
                 std::int64_t lo, std::int64_t hi);
std::uint64_t UInt(const nlohmann::json& j, const std::string& key, const std::string& what);
// A finite number.
double Number(const nlohmann::json& j, const std::string& key, const std::string& what);
bool Bool(const nlohmann::json& j, const std::string& key, const std::string& what);
std::string String(const nlohmann::json& j, const std::string& key, const std::string& what);

// A JSON array of integers in [lo, hi] (of at most max_size entries), e.g. the stored layers.
std::vector<int> IntList(const std::string& text, const std::string& what, std::int64_t lo,
                         std::int64_t hi, std::size_t max_size = 1 << 20);
std::vector<std::string> StringList(const std::string& text, const std::string& what,
                                    std::size_t max_size = 1 << 20);

}  // namespace icl::core::json
