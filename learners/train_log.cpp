// The evaluation log of a training run (learners/train_log.hpp).
#include "learners/train_log.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>

#include "core/errors.hpp"
#include "core/output.hpp"
#include "core/spec.hpp"

namespace icl::learners {

namespace fs = std::filesystem;

std::string TrainLogPath(const std::string& checkpoint) {
  fs::path p(checkpoint);
  if (p.extension() == ".h5") p.replace_extension("");
  return p.string() + ".train.csv";
}

void StartTrainLog(const std::string& path, bool noisy_task) {
  core::AtomicOutput log(path, "out", {/*force=*/true, {}, false, /*lock=*/false});
  // The reference column: OLS for a noiseless task, the Bayes ridge (lambda = noise^2 /
  // w_scale^2) for a noisy one, where OLS interpolates at k = d and is no benchmark.
  log.CommitText(std::string("step,lr,train_loss,eval_loss,k,model_error,") +
                 (noisy_task ? "bayes_error\n" : "ols_error\n"));
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

}  // namespace icl::learners
