// The layout of probes.h5 written down once: the metrics of each probe, the axes of its
// datasets and the fixed texts its writer stores, shared by the writer (probes_file_write.cpp)
// and the reader (probes_file.cpp); ProbesSchema() is the whole file as a formats::Schema (its
// documentation page, the conformance check of its files).
#pragma once

#include <array>
#include <string>
#include <vector>

#include "formats/schema.hpp"

namespace icl::probes::schema {

// The datasets of /metrics/<target>/<probe>/<source>/, each [layer, k, seed].
inline constexpr std::array<const char*, 7> kMetricNames = {"mse",   "nmse",    "r2",     "r2_lo",
                                                            "r2_hi", "nmse_lo", "nmse_hi"};
// The axes of a (layer, k, seed) cell, which every score, fit and code is indexed by.
inline const std::vector<std::string> kCellLabels = {"layer", "k", "seed"};

// The attribute description of each dataset that has one, and the root's metric_layout.
inline constexpr const char* kMetricLayout =
    "/metrics/<target>/<probe>/<source>/{mse,nmse,r2} [layer index, k index, seed] with layers "
    "and ks as in the root attributes";
inline constexpr const char* kSseDescription =
    "[layer, k, seed, test prompt]: squared error of the probe's prediction summed over the "
    "target's entries; test prompts in prompt order (/splits/seed_<s> == 2)";
inline constexpr const char* kSstDescription =
    "[k, seed, test prompt]: squared distance of the target from its test-split mean (sum sse / "
    "sum sst = nmse)";
inline constexpr const char* kWeightsDescription =
    "[layer, k, seed, feature, output] on raw (unstandardised) hidden states";
inline constexpr const char* kFeatureScaleDescription =
    "[layer, k, seed, feature] training standard deviation of each hidden unit (1 where "
    "constant): the probe standardised by it";
inline constexpr const char* kSplitDescription =
    "role of each prompt of the main activations file: 0 train, 1 validation, 2 test";
inline constexpr const char* kAlphaDescription =
    "[layer, k, seed, position]: softmax pooling weights; positions after the state after k "
    "examples are 0";
inline constexpr const char* kBitsDescription =
    "online codelength of the training targets given the state, in bits (block 0 by the "
    "reference code)";
inline constexpr const char* kUniformBitsDescription =
    "the same rows by the reference code: every entry by the Gaussian of block 0's mean and "
    "variance";
inline constexpr const char* kBlockLambdaDescription =
    "the penalty each block was coded with, chosen by the evidence of the blocks before it "
    "(block 0: NaN)";
inline constexpr const char* kBlockEndsDescription =
    "training rows (in prompt order) that end each block";
inline constexpr const char* kCodelengthDescription =
    "online (prequential) code of the ridge probe's training targets, Voita & Titov (2020): "
    "block 0 by N(mean, variance) of block 0 per entry, block i by the Bayesian ridge predictive "
    "fitted on blocks 0..i-1 (penalty by their evidence); every entry to precision times block "
    "0's standard deviation";
inline constexpr const char* kTargetMapsDescription =
    "[k, from, to]: test R2 of the least-squares affine map from one target to another (seed "
    "0's split): near 1 both ways, no probe can tell the two apart";
inline constexpr const char* kCeilingDescription =
    "R2 of E[w | prompt] = w_ridge(sigma^2/tau^2) on the seed's test prompts: the most any "
    "representation can give for this target";

// The probes file as a schema: every dataset and attribute the writer writes.
const formats::Schema& ProbesSchema();

}  // namespace icl::probes::schema
