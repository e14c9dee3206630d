// The one parser of "name:arg:arg" specs (ridge:0.1, gd:0.01:5, knn:3:weighted, gd:fit:5, the
// response gd:0.05, the program gd:3), of whole-string numbers and of comma lists. A caller
// checks the name and the arguments' ranges and says what it expected; only SplitList throws
// (an empty entry is never what a user meant, whatever the list holds).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace icl::core {

// The whole text as a finite number ("0.1", "1e-3", leading blanks allowed); nullopt for
// anything else ("1x", "1 ", "inf", "").
std::optional<double> ParseNumber(const std::string& text);
// The whole text as an integer in [lo, hi]; nullopt otherwise ("3.0" and "1e3" are not).
std::optional<long long> ParseInteger(const std::string& text, long long lo, long long hi);

// The entries of a comma list ("0,4,8", "ols,gd:0.05:3"), each with its surrounding blanks
// removed: the one splitter of every list setting, on the command line and in the Python module.
// An empty entry ("1,,2", "1,", ",1", " , ", "") is a mistake (a stray comma, an unset shell
// variable) and never skipped: throws InputError(module, field, ...) quoting the list.
std::vector<std::string> SplitList(const std::string& module, const std::string& field,
                                   const std::string& text);

struct Spec {
  std::string text;               // as given, surrounding blanks removed
  std::string name;               // before the first ':'
  std::vector<std::string> args;  // after it, split on ':' (empty parts kept: "gd:" has one)
  std::optional<double> Number(std::size_t i) const {
    return i < args.size() ? ParseNumber(args[i]) : std::nullopt;
  }
  std::optional<long long> Integer(std::size_t i, long long lo, long long hi) const {
    return i < args.size() ? ParseInteger(args[i], lo, hi) : std::nullopt;
  }
};
Spec ParseSpec(const std::string& text);

}  // namespace icl::core
