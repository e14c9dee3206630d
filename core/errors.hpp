// Bad input, in the library's own terms. A library names the configuration setting at fault
// (`field`, e.g. "layers") and may refer to other settings as {name} in its text; it never
// spells a command-line option. The program renders the same error with options ("--layers:
// ... pass --force ..."), so the words on screen match what the user typed.
#pragma once

#include <stdexcept>
#include <string>

namespace icl::core {

class InputError : public std::invalid_argument {
 public:
  // `module` prefixes the message: the library ("extract") or, for a fault in a file, the file
  // ("'runs/a.h5'", "checkpoint 'runs/a.h5'"); `field` is the setting at fault ("" when the
  // fault is in a file); `text` says what was found and what was expected. Internal invariants
  // (a caller's bug, not the user's input) throw std::logic_error instead.
  InputError(const std::string& module, const std::string& field, const std::string& text)
      : std::invalid_argument(module + ": " + (field.empty() ? "" : field + ": ") +
                              Render(text, "")),
        module_(module),
        field_(field),
        text_(text) {}
  const std::string& module() const { return module_; }
  const std::string& field() const { return field_; }
  const std::string& text() const { return text_; }
  // `text` with every {name} written as prefix + name ("" in the library, "--" in the CLI,
  // where underscores also become dashes).
  // Only {name} with a lower-case name of letters, digits, '_' and '-' is a placeholder; other
  // braces (JSON quoted from a file, a set) are kept as they are.
  static std::string Render(const std::string& text, const std::string& prefix) {
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
      const std::size_t close = text[i] == '{' ? text.find('}', i) : std::string::npos;
      if (close == std::string::npos || !IsPlaceholder(text.substr(i + 1, close - i - 1))) {
        out += text[i];
        continue;
      }
      std::string name = text.substr(i + 1, close - i - 1);
      if (!prefix.empty())
        for (char& c : name)
          if (c == '_') c = '-';
      out += prefix + name;
      i = close;
    }
    return out;
  }

 private:
  static bool IsPlaceholder(const std::string& name) {
    if (name.empty() || name.size() > 40 || name[0] < 'a' || name[0] > 'z') return false;
    for (char c : name)
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
    return true;
  }
  std::string module_, field_, text_;
};

}  // namespace icl::core
