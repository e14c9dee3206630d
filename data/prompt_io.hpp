// Prompt sets in HDF5: /prompts/{x [N,n,d], y [N,n], w [N,d]} (and, for a task with a query
// shift, query_x [N,n,d] and query_y [N,n]: the query after k examples) with the task config and
// seed as attributes. Standalone files carry format = "iclprobe-prompts".
#pragma once

#include <string>

#include "core/hdf5.hpp"
#include "data/task.hpp"

namespace icl::data {

inline constexpr const char* kPromptsFormat = "iclprobe-prompts";
inline constexpr int kFormatVersion = 1;

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
