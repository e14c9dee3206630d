// The activations file's per-prompt datasets.
#include "extract/activations_schema.hpp"

#include <fmt/format.h>

#include <cctype>

namespace icl::extract::schema {

std::string Hidden(int layer) {
  return fmt::format("hidden/layer_{:02d}", layer);
}

std::string LearnerTargetName(const std::string& spec) {
  std::string name = "w_" + spec;
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') c = '_';
  return name;
}

std::string LearnerTarget(const std::string& spec) {
  return "targets/" + LearnerTargetName(spec);
}

std::vector<Dataset> PerPromptDatasets(int n, int d,
                                       const std::vector<std::string>& learner_targets,
                                       const data::TaskFamily& family) {
  const hsize_t hn = n, hd = d;
  std::vector<Dataset> out = {
      {kPredictions,
       {hn},
       true,
       "[N, n] the model's prediction of y_{k+1} from k examples, k = 0..n-1",
       {"prompt", "k"},
       ""},
      {kPromptsX, {hn, hd}, false, "[N, n, d] inputs x_j", {"prompt", "example", "feature"}, ""},
      {kPromptsY, {hn}, false, "[N, n] labels y_j", {"prompt", "example"}, ""},
      {kPromptsW, {hd}, false, "[N, d] the task's weight vector", {"prompt", "feature"}, ""},
      {kWOls,
       {hn, hd},
       false,
       "[N, n, d] minimum-norm least squares after k = 1..n examples",
       {"prompt", "k", "feature"},
       ""},
      {kWRidge,
       {hn, hd},
       false,
       "[N, n, d] ridge (lambda = ridge_lambda) after k = 1..n examples",
       {"prompt", "k", "feature"},
       ""},
      {kXty,
       {hn, hd},
       false,
       "[N, n, d] moment vector X_k^T y_k after k = 1..n examples",
       {"prompt", "k", "feature"},
       ""},
      {kXtx,
       {hn, hd, hd},
       false,
       "[N, n, d, d] moment matrix X_k^T X_k after k = 1..n examples",
       {"prompt", "k", "row", "column"},
       ""},
  };
  for (const std::string& spec : learner_targets)
    out.push_back(
        {LearnerTarget(spec),
         {hn, hd},
         false,
         "[N, n, d] the weights of the classical learner " + spec + " after k = 1..n examples",
         {"prompt", "k", "feature"},
         spec});
  if (family.kind == data::TaskFamily::Kind::kPool)
    out.push_back({kPoolMember,
                   {1},
                   false,
                   "[N, 1] the member of the task's pool (0-based) each prompt's w is",
                   {"prompt", "feature"},
                   ""});
  if (family.kind == data::TaskFamily::Kind::kNoiseMix)
    out.push_back({kSigma,
                   {1},
                   false,
                   "[N, 1] the noise sigma each prompt drew (the same after every k)",
                   {"prompt", "feature"},
                   ""});
  return out;
}

}  // namespace icl::extract::schema
