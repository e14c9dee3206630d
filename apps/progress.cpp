// Progress bar rendering.
#include "apps/progress.hpp"

#include <unistd.h>

#include <fmt/format.h>
#include <cmath>
#include <cstdio>

namespace icl::cli {

std::string FormatDuration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const long long t = std::llround(s);
  if (t >= 3600) return fmt::format("{}h{:02d}m", t / 3600, (t % 3600) / 60);
  if (t >= 60) return fmt::format("{}m{:02d}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

Progress::Progress(std::string label, long long total, bool quiet, std::string unit)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      total_(total),
      enabled_(!quiet && ::isatty(STDERR_FILENO)),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

void Progress::Update(long long done, const std::string& note) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (start_done_ < 0) {
    start_done_ = done;
    start_ = now;
  }
  if (drawn_ && done < total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  drawn_ = true;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double rate = elapsed > 0 ? (done - start_done_) / elapsed : 0.0;
  const double left = rate > 0 ? (total_ - done) / rate : NAN;
  const int width = 24;
  const int filled =
      total_ > 0 ? static_cast<int>(width * std::min(1.0, double(done) / total_)) : 0;
  std::string bar(filled, '#');
  bar.resize(width, '.');
  std::fprintf(stderr, "\r%s [%s] %lld/%lld %.1f %s/s, %s left%s%s\033[K", label_.c_str(),
               bar.c_str(), done, total_, rate, unit_.c_str(), FormatDuration(left).c_str(),
               note.empty() ? "" : ", ", note.c_str());
  std::fflush(stderr);
}

void Progress::Finish() {
  if (enabled_ && drawn_) std::fprintf(stderr, "\n");
  drawn_ = false;
}

}  // namespace icl::cli
