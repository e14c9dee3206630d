// The erasure file's schema (schemas.hpp): iclprobe erase's LEACE erasure.
#include "formats/schemas.hpp"

#include <string>

namespace icl::formats {

namespace {

Schema MakeErasureSchema() {
  Schema s;
  s.format = kErasureFormat;
  s.title = "Concept erasure (`iclprobe erase`).";
  s.description =
      "A regression target is erased from a layer's states by the least-squares (LEACE) eraser and "
      "the model runs on from the erased states; its error per k is compared with the model as it "
      "is, with erasing a random subspace of the same rank, and with the zero predictor. Errors "
      "are (prediction of y_(k+1) - y_(k+1))^2 / d per test prompt.";
  s.owner = "`intervene/erase.cpp` through the formats layer (`formats/`)";
  s.sizes = {{"layer", "the entries of attribute 'layers'"},
             {"k", "the entries of attribute 'ks'"},
             {"prompt", "attribute 'prompts'"}};
  using T = AttrType;
  s.attrs = {
      Attr("checkpoint", T::kString, "the checkpoint's path"),
      Attr("checkpoint_sha256", T::kString, "SHA-256 of the checkpoint file"),
      Attr("target", T::kString, "the erased target (xty, w_ols, w_ridge)"),
      Attr("seed", T::kInt, "the test prompts' stream (the eraser's: seed + 1)"),
      Attr("prompts", T::kInt, "test prompts"),
      Attr("fit_prompts", T::kInt, "prompts the eraser is fitted on"),
      Attr("bootstrap_replicates", T::kInt, "replicates of the bootstrap over prompts"),
      Attr("task_config", T::kString, "the task (JSON)"),
      Attr("layers", T::kIntList, "the states erased"),
      Attr("ks", T::kIntList, "the prefix lengths"),
      Attr("eraser_rule", T::kString, "the eraser", "",
           "LEACE: r(h) = h - W^+ U U' W (h - mean h), W the states' whitening, U an orthonormal "
           "basis of W Sigma_hz; fitted per (layer, k) on the y-token of example k and the x-token "
           "of example k+1 of the fit prompts (stream seed + 1), applied at those positions of the "
           "test prompts (stream seed); random: the same with a random orthonormal U of the same "
           "rank in the whitened support"),
      Attr("error_rule", T::kString, "the error and its intervals", "",
           "(prediction of y_(k+1) - y_(k+1))^2 / d per prompt; 95% percentile bootstrap over "
           "prompts, paired for increases"),
  };
  for (const char* name :
       {"erased_mean", "erased_lo", "erased_hi", "random_mean", "random_lo", "random_hi",
        "erased_increase", "erased_increase_lo", "erased_increase_hi", "random_increase",
        "random_increase_lo", "random_increase_hi"})
    s.datasets.push_back(Data(name, {"layer", "k"}, {"layer", "k"},
                              std::string(name) + " of the error over test prompts"));
  s.datasets.push_back(Data("rank", {"layer", "k"}, {"layer", "k"}, "the eraser's rank"));
  for (const char* name : {"base_mean", "base_lo", "base_hi", "zero_mean", "zero_lo", "zero_hi"})
    s.datasets.push_back(
        Data(name, {"k"}, {"k"},
             std::string(name) + " of the model's (base) or the zero predictor's error"));
  for (const char* name : {"erased_error", "random_error"})
    s.datasets.push_back(Data(name, {"layer", "k", "prompt"}, {"layer", "k", "prompt"},
                              "per test prompt, the target (erased) or a random subspace erased"));
  for (const char* name : {"base_error", "zero_error"})
    s.datasets.push_back(Data(name, {"k", "prompt"}, {"k", "prompt"},
                              "per test prompt, the model as it is (base) or the zero predictor"));
  return s;
}

}  // namespace

const Schema& ErasureSchema() {
  static const Schema s = MakeErasureSchema();
  return s;
}

}  // namespace icl::formats
