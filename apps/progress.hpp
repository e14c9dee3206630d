// A one-line progress bar on stderr: done / total, rate, time left and a free-form note.
// Silent with --quiet or when stderr is not a terminal.
#pragma once

#include <chrono>
#include <string>

namespace icl::cli {

class Progress {
 public:
  Progress(std::string label, long long total, bool quiet, std::string unit = "it");
  // Redraws at most ~10 times per second (and always at the end).
  void Update(long long done, const std::string& note = "");
  // Ends the line so that later output starts on a fresh one.
  void Finish();
  bool enabled() const { return enabled_; }

 private:
  std::string label_, unit_;
  long long total_, start_done_ = -1;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

// "1h02m", "3m05s", "12s".
std::string FormatDuration(double seconds);

}  // namespace icl::cli
