// The evaluation log of a training run (learners/train_log.hpp).
#include "learners/train_log.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "core/errors.hpp"
#include "core/output.hpp"
#include "core/spec.hpp"
#include "data/task.hpp"

namespace icl::learners {

namespace fs = std::filesystem;

std::string TrainLogPath(const std::string& checkpoint) {
  fs::path p(checkpoint);
  if (p.extension() == ".h5") p.replace_extension("");
  return p.string() + ".train.csv";
}

namespace {

// The header's columns; the reference column is OLS for a noiseless task, the Bayes ridge
// (lambda = noise^2 / w_scale^2) for a noisy one, where OLS interpolates at k = d and is no
// benchmark.
constexpr const char* kLogColumns = "step,lr,train_loss,eval_loss,k,model_error,";
std::string LogHeader(bool noisy_task) {
  return std::string(kLogColumns) + (noisy_task ? "bayes_error" : "ols_error");
}

}  // namespace

void StartTrainLog(const std::string& path, bool noisy_task) {
  core::AtomicOutput log(path, "out", {/*force=*/true, {}, false, /*lock=*/false});
  log.CommitText(LogHeader(noisy_task) + "\n");
}

bool IsTrainLog(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  std::ifstream in(path);
  std::string first;
  if (!in || !std::getline(in, first)) return false;
  return first == LogHeader(false) || first == LogHeader(true);
}

void TruncateTrainLog(const std::string& path, std::int64_t step, const std::string& field) {
  if (!fs::exists(path)) return;
  core::RequireRegularInput(path, field);
  std::ifstream in(path);
  if (!in) throw std::runtime_error("training log '" + path + "': cannot read it");
  std::string kept, line;
  std::size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line_no == 1) {
      kept += line + "\n";
      continue;
    }
    if (line.empty()) continue;
    const std::string first = line.substr(0, line.find(','));
    const auto s = core::ParseInteger(first, 0, std::numeric_limits<long long>::max());
    if (!s)
      throw core::InputError("train", field,
                             "training log '" + path + "' line " + std::to_string(line_no) +
                                 ": expected a step number in the first column, got '" +
                                 first.substr(0, 40) + "'");
    if (*s <= step) kept += line + "\n";
  }
  core::AtomicOutput out(path, field, {/*force=*/true, {}, false, /*lock=*/false});
  out.CommitText(kept);
}

void AppendTrainLog(const std::string& path, const EvalRecord& r) {
  std::ofstream f(path, std::ios::app);
  for (arma::uword k = 0; k < r.model_error.n_elem; ++k)
    f << fmt::format("{},{:.6g},{:.9g},{:.9g},{},{:.9g},{:.9g}\n", r.step, r.lr, r.train_loss,
                     r.eval_loss, k, r.model_error(k), r.ref_error(k));
  f.close();
  if (!f)
    throw std::runtime_error("cannot append to the evaluation log '" + path + "' (disk full?)");
}

namespace {

constexpr std::size_t kMaxLogLine = 1000;  // train's rows are under 150 characters

// The seven fields of one row; nullopt unless each is a finite number (step and k integers).
struct LogRow {
  std::int64_t step = 0;
  int k = 0;
  double lr = 0, train_loss = 0, eval_loss = 0, model_error = 0, ref_error = 0;
};
std::optional<LogRow> ParseLogRow(const std::string& line) {
  std::vector<std::string> f;
  std::stringstream ss(line);
  for (std::string x; std::getline(ss, x, ',');)
    f.push_back(x);
  if (f.size() != 7 || line.back() == ',') return std::nullopt;
  const auto step = core::ParseInteger(f[0], 0, std::numeric_limits<std::int64_t>::max());
  const auto k = core::ParseInteger(f[4], 0, data::kMaxN);
  if (!step || !k) return std::nullopt;
  LogRow r{*step, static_cast<int>(*k)};
  double* values[] = {&r.lr, &r.train_loss, &r.eval_loss, &r.model_error, &r.ref_error};
  const int at[] = {1, 2, 3, 5, 6};
  for (int i = 0; i < 5; ++i) {
    const auto v = core::ParseNumber(f[at[i]]);
    if (!v || *v < 0) return std::nullopt;
    *values[i] = *v;
  }
  return r;
}

}  // namespace

TrainLog ReadTrainLog(const std::string& path) {
  const std::string module = "training log '" + path + "'";
  core::RequireRegularInput(path, "training log");
  std::ifstream in(path);
  if (!in) throw core::InputError(module, "", "cannot read it");
  TrainLog log{path, "", {}};
  std::string line;
  std::size_t line_no = 0;
  std::size_t n = 0;  // k per evaluation, from the first complete one
  std::vector<LogRow> rows;
  const auto close_eval = [&](std::size_t at_line) {
    if (rows.empty()) return;
    if (n == 0) n = rows.size();
    if (rows.size() != n)
      throw core::InputError(module, "",
                             fmt::format("the evaluation of step {} (ending before line {}) has {} "
                                         "rows of k, the first one {}; train writes k = 0..n-1 "
                                         "for every evaluation",
                                         rows[0].step, at_line, rows.size(), n));
    TrainLogEval e{rows[0].step,      rows[0].lr,   rows[0].train_loss,
                   rows[0].eval_loss, arma::vec(n), arma::vec(n)};
    for (std::size_t k = 0; k < n; ++k)
      e.model_error(k) = rows[k].model_error, e.ref_error(k) = rows[k].ref_error;
    if (!log.evals.empty() && e.step <= log.evals.back().step)
      throw core::InputError(module, "",
                             fmt::format("step {} (before line {}) follows step {}; steps of a "
                                         "log increase",
                                         e.step, at_line, log.evals.back().step));
    log.evals.push_back(std::move(e));
    rows.clear();
  };
  while (std::getline(in, line)) {
    ++line_no;
    // train ends every line with '\n': a last line without one was cut by an interrupted write
    // or a copy, and may hold a number cut short (2.88e-22 read as 2.88).
    if (in.eof())
      throw core::InputError(module, "",
                             fmt::format("line {} does not end with a newline: the log was cut "
                                         "mid-line (an interrupted write or copy)",
                                         line_no));
    if (line.size() > kMaxLogLine)
      throw core::InputError(module, "",
                             fmt::format("line {} is over {} characters; not a log train wrote",
                                         line_no, kMaxLogLine));
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line_no == 1) {
      const std::string head = "step,lr,train_loss,eval_loss,k,model_error,";
      if (line == head + "ols_error")
        log.ref_name = "ols";
      else if (line == head + "bayes_error")
        log.ref_name = "bayes";
      else
        throw core::InputError(module, "",
                               "expected the header '" + head +
                                   "ols_error' (or bayes_error), got '" + line.substr(0, 80) + "'");
      continue;
    }
    if (line.empty()) continue;
    const auto r = ParseLogRow(line);
    if (!r)
      throw core::InputError(module, "",
                             fmt::format("line {}: expected step,lr,train_loss,eval_loss,k,"
                                         "model_error,{}_error (non-negative finite numbers), got "
                                         "'{}'",
                                         line_no, log.ref_name, line.substr(0, 80)));
    if (r->k == 0) close_eval(line_no);
    if (static_cast<std::size_t>(r->k) != rows.size() || (!rows.empty() && r->step != rows[0].step))
      throw core::InputError(
          module, "",
          fmt::format("line {}: expected k = {} of step {}, got k = {} of step "
                      "{}; train writes k = 0..n-1 for every evaluation",
                      line_no, rows.size(), rows.empty() ? r->step : rows[0].step, r->k, r->step));
    rows.push_back(*r);
  }
  if (in.bad()) throw core::InputError(module, "", "cannot read it");
  close_eval(line_no + 1);
  if (line_no == 0) throw core::InputError(module, "", "is empty; expected train's header");
  return log;
}

}  // namespace icl::learners
