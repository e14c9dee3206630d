// Strict JSON getters: type, range and finiteness checked, errors naming the source.
#include "core/json.hpp"

#include "core/errors.hpp"

#include <cmath>
#include <stdexcept>

namespace icl::core::json {

namespace {

[[noreturn]] void Bad(const std::string& what, const std::string& key, const std::string& why) {
  throw core::InputError(what, "", "'" + key + "' " + why);
}

const nlohmann::json& At(const nlohmann::json& j, const std::string& key, const std::string& what) {
  if (!j.is_object()) throw core::InputError(what, "", "expected a JSON object");
  const auto it = j.find(key);
  if (it == j.end()) Bad(what, key, "is missing");
  return *it;
}

}  // namespace

nlohmann::json Parse(const std::string& text, const std::string& what) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw core::InputError(what, "", std::string("not valid JSON (") + e.what() + ")");
  }
}

std::int64_t Int(const nlohmann::json& j, const std::string& key, const std::string& what,
                 std::int64_t lo, std::int64_t hi) {
  const auto& v = At(j, key, what);
  std::int64_t x = 0;
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(hi))
      Bad(what, key, "is " + std::to_string(u) + ", expected at most " + std::to_string(hi));
    x = static_cast<std::int64_t>(u);
  } else if (v.is_number_integer()) {
    x = v.get<std::int64_t>();
  } else {
    Bad(what, key, "is " + v.dump() + ", expected an integer");
  }
  if (x < lo || x > hi)
    Bad(what, key,
        "is " + std::to_string(x) + ", expected " + std::to_string(lo) + ".." + std::to_string(hi));
  return x;
}

std::uint64_t UInt(const nlohmann::json& j, const std::string& key, const std::string& what) {
  const auto& v = At(j, key, what);
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (v.is_number_integer() && v.get<std::int64_t>() >= 0)
    return static_cast<std::uint64_t>(v.get<std::int64_t>());
  Bad(what, key, "is " + v.dump() + ", expected a non-negative integer");
}

double Number(const nlohmann::json& j, const std::string& key, const std::string& what) {
  const auto& v = At(j, key, what);
  if (!v.is_number()) Bad(what, key, "is " + v.dump() + ", expected a number");
  const double x = v.get<double>();
  if (!std::isfinite(x)) Bad(what, key, "is not finite");
  return x;
}

bool Bool(const nlohmann::json& j, const std::string& key, const std::string& what) {
  const auto& v = At(j, key, what);
  if (!v.is_boolean()) Bad(what, key, "is " + v.dump() + ", expected true or false");
  return v.get<bool>();
}

std::string String(const nlohmann::json& j, const std::string& key, const std::string& what) {
  const auto& v = At(j, key, what);
  if (!v.is_string()) Bad(what, key, "is " + v.dump() + ", expected a string");
  return v.get<std::string>();
}

std::vector<int> IntList(const std::string& text, const std::string& what, std::int64_t lo,
                         std::int64_t hi, std::size_t max_size) {
  const auto j = Parse(text, what);
  if (!j.is_array()) throw core::InputError(what, "", "expected a JSON array of integers");
  if (j.size() > max_size)
    throw core::InputError(
        what, "",
        std::to_string(j.size()) + " entries, expected at most " + std::to_string(max_size));
  std::vector<int> out;
  for (const auto& v : j) {
    if (!v.is_number_integer())
      throw core::InputError(what, "", "entry " + v.dump() + " is not an integer");
    const bool neg = !v.is_number_unsigned() && v.get<std::int64_t>() < 0;
    const std::int64_t x =
        neg ? v.get<std::int64_t>()
            : std::int64_t(std::min<std::uint64_t>(v.get<std::uint64_t>(), INT64_MAX));
    if (x < lo || x > hi)
      throw core::InputError(
          what, "",
          "entry " + v.dump() + " is outside " + std::to_string(lo) + ".." + std::to_string(hi));
    out.push_back(static_cast<int>(x));
  }
  return out;
}

std::vector<std::string> StringList(const std::string& text, const std::string& what,
                                    std::size_t max_size) {
  const auto j = Parse(text, what);
  if (!j.is_array() || j.size() > max_size)
    throw core::InputError(
        what, "", "expected a JSON array of at most " + std::to_string(max_size) + " strings");
  std::vector<std::string> out;
  for (const auto& v : j) {
    if (!v.is_string()) throw core::InputError(what, "", "entry " + v.dump() + " is not a string");
    out.push_back(v.get<std::string>());
  }
  return out;
}

}  // namespace icl::core::json
