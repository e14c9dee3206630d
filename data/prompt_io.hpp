// Prompt sets in HDF5: /prompts/{x [N,n,d], y [N,n], w [N,d]} (and, for a task with a query
// shift, query_x [N,n,d] and query_y [N,n]: the query after k examples) with the task config and
// seed as attributes. Standalone files carry format = "iclprobe-prompts"; their schema
// (PromptSetSchema) is built from the names below.
#pragma once

#include <string>
#include <vector>

#include "core/hdf5.hpp"
#include "data/task.hpp"
#include "formats/schema.hpp"

namespace icl::data {

inline constexpr const char* kPromptsFormat = "iclprobe-prompts";
inline constexpr int kFormatVersion = 1;

// The group WritePrompts writes and its datasets (relative to the group) and attributes.
namespace prompt_set {
inline constexpr const char* kGroup = "prompts";
inline constexpr const char* kX = "x";
inline constexpr const char* kY = "y";
inline constexpr const char* kW = "w";
inline constexpr const char* kQueryX = "query_x";
inline constexpr const char* kQueryY = "query_y";
inline constexpr const char* kTaskConfig = "task_config";
inline constexpr const char* kSeed = "seed";
inline constexpr const char* kFirstIndex = "first_index";
// The axes (HDF5 dimension labels) of x, y, w and of the queries.
inline const std::vector<std::string> kXLabels = {"prompt", "example", "feature"};
inline const std::vector<std::string> kYLabels = {"prompt", "example"};
inline const std::vector<std::string> kWLabels = {"prompt", "feature"};
inline const std::vector<std::string> kQueryXLabels = {"prompt", "prefix_len", "feature"};
inline const std::vector<std::string> kQueryYLabels = {"prompt", "prefix_len"};
}  // namespace prompt_set

// The standalone prompt-set file (SavePromptSet) as a schema: its documentation page and what a
// conformance check holds its files to.
const formats::Schema& PromptSetSchema();

// Writes group `prompts` under `parent` (datasets float64; attrs task_config, seed, first_index).
void WritePrompts(h5::Group& parent, const PromptSet& set);
// Reads the group written by WritePrompts, checking every dataset's shape against the config.
PromptSet ReadPrompts(const h5::Group& parent);

// Root attributes shared by every iclprobe file: format, format_version, created_by.
void WriteFormatAttrs(h5::Group& root, const std::string& format);
// Throws naming the file unless its `format` attribute is `format` and the version is known.
void CheckFormat(const h5::Group& root, const std::string& format);

// A standalone prompt-set file, written atomically; refuses to overwrite unless `force`.
void SavePromptSet(const std::string& path, const PromptSet& set, bool force);
PromptSet LoadPromptSet(const std::string& path);

}  // namespace icl::data
