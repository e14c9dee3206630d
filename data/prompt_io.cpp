// Prompt-set HDF5 I/O and the format attributes every iclprobe file carries.
#include "data/prompt_io.hpp"

#include "core/errors.hpp"

#include <stdexcept>

#include "core/output.hpp"
#include "formats/header.hpp"

namespace icl::data {

namespace ps = prompt_set;

void WritePrompts(h5::Group& parent, const PromptSet& set) {
  const hsize_t N = set.size(), n = set.task.n, d = set.task.d;
  h5::Group g = parent.CreateGroup(ps::kGroup);
  g.SetAttr(ps::kTaskConfig, set.task.ToJson());
  g.SetAttr(ps::kSeed, static_cast<std::int64_t>(set.seed));
  g.SetAttr(ps::kFirstIndex, static_cast<std::int64_t>(set.first_index));
  g.CreateDataset<double>(ps::kX, {N, n, d}, ps::kXLabels).Write(set.x.memptr(), set.x.n_elem);
  g.CreateDataset<double>(ps::kY, {N, n}, ps::kYLabels).Write(set.y.memptr(), set.y.n_elem);
  g.CreateDataset<double>(ps::kW, {N, d}, ps::kWLabels).Write(set.w.memptr(), set.w.n_elem);
  if (set.task.HasQueries()) {
    g.CreateDataset<double>(ps::kQueryX, {N, n, d}, ps::kQueryXLabels)
        .Write(set.query_x.memptr(), set.query_x.n_elem);
    g.CreateDataset<double>(ps::kQueryY, {N, n}, ps::kQueryYLabels)
        .Write(set.query_y.memptr(), set.query_y.n_elem);
  }
}

PromptSet ReadPrompts(const h5::Group& parent) {
  const h5::Group g = parent.OpenGroup(ps::kGroup);
  PromptSet set;
  set.task = TaskConfig::FromJson(g.GetString(ps::kTaskConfig), g.Where(ps::kTaskConfig));
  set.seed = static_cast<std::uint64_t>(g.GetInt(ps::kSeed));
  set.first_index =
      g.HasAttr(ps::kFirstIndex) ? static_cast<std::uint64_t>(g.GetInt(ps::kFirstIndex)) : 0;
  const h5::Dataset x = g.OpenDataset(ps::kX);
  const hsize_t N = x.dims().empty() ? 0 : x.dims()[0];
  const hsize_t n = set.task.n, d = set.task.d;
  x.ExpectDims({N, n, d});
  const h5::Dataset y = g.OpenDataset(ps::kY);
  y.ExpectDims({N, n});
  const h5::Dataset w = g.OpenDataset(ps::kW);
  w.ExpectDims({N, d});
  set.x.set_size(d, n, N);
  set.y.set_size(n, N);
  set.w.set_size(d, N);
  x.Read(set.x.memptr(), set.x.n_elem);
  y.Read(set.y.memptr(), set.y.n_elem);
  w.Read(set.w.memptr(), set.w.n_elem);
  if (set.task.HasQueries()) {  // the query after k examples, k = 0..n-1 (a query shift)
    const h5::Dataset qx = g.OpenDataset(ps::kQueryX), qy = g.OpenDataset(ps::kQueryY);
    qx.ExpectDims({N, n, d});
    qy.ExpectDims({N, n});
    set.query_x.set_size(d, n, N);
    set.query_y.set_size(n, N);
    qx.Read(set.query_x.memptr(), set.query_x.n_elem);
    qy.Read(set.query_y.memptr(), set.query_y.n_elem);
  }
  return set;
}

// The header is the formats layer's (formats/header.hpp); the formats that have no schema there
// yet share kFormatVersion.
void WriteFormatAttrs(h5::Group& root, const std::string& format) {
  formats::WriteHeader(root, format, kFormatVersion);
}

void CheckFormat(const h5::Group& root, const std::string& format) {
  formats::CheckHeader(root, format, kFormatVersion);
}

void SavePromptSet(const std::string& path, const PromptSet& set, bool force) {
  core::AtomicOutput out(path, "prompts", core::OutputOptions{force, {}, false, true});
  {
    h5::File f = h5::File::Create(out.temp_path(), /*truncate=*/true);
    WriteFormatAttrs(f, kPromptsFormat);
    f.SetAttr(ps::kTaskConfig, set.task.ToJson());
    f.SetAttr(ps::kSeed, static_cast<std::int64_t>(set.seed));
    WritePrompts(f, set);
    f.Close();  // checked and synced
  }
  out.Commit();
}

PromptSet LoadPromptSet(const std::string& path) {
  const h5::File f = h5::File::Open(path);
  CheckFormat(f, kPromptsFormat);
  return ReadPrompts(f);
}

}  // namespace icl::data

namespace icl::data {

namespace {

formats::Schema MakePromptSetSchema() {
  using formats::AttrType;
  const std::string g = std::string(ps::kGroup) + "/";
  const std::string queries = "a task with a query shift (task_config's query_shift)";
  formats::Schema s;
  s.format = kPromptsFormat;
  s.version = kFormatVersion;
  s.title = "A prompt set: seeded prompts of one task, standalone.";
  s.description =
      "The prompts x, their labels y and each prompt's weights w, float64, as the seeded sampler "
      "draws them: prompt j of the file is prompt first_index + j of the stream of (task, seed). "
      "A task with a query shift also stores the query after k examples, which stands in for "
      "example k + 1 at the prediction. What a task family's prompt drew (the pool member, the "
      "noise level) is not stored: it follows from (task, seed, index). Written by "
      "`data::SavePromptSet` (no subcommand writes one; activations files keep their prompts "
      "under the same names in their own format) and read by `data::LoadPromptSet`.";
  s.owner = "`data/prompt_io.cpp`";
  s.sizes = {{"prompt", "the prompts in the set"},
             {"n", "n of task_config: the examples of a prompt"},
             {"d", "d of task_config: the dimension of x and w"}};
  s.attrs = {
      formats::Attr(ps::kTaskConfig, AttrType::kString, "the task (JSON)"),
      formats::Attr(ps::kSeed, AttrType::kInt, "the seed of the prompts' stream"),
      formats::AttrOn(ps::kGroup, ps::kTaskConfig, AttrType::kString, "the task (JSON)"),
      formats::AttrOn(ps::kGroup, ps::kSeed, AttrType::kInt, "the seed of the prompts' stream"),
      formats::AttrOn(ps::kGroup, ps::kFirstIndex, AttrType::kInt,
                      "the stream index of the first prompt"),
  };
  s.datasets = {
      formats::Data(g + ps::kX, {"prompt", "n", "d"}, ps::kXLabels, "x_j of each prompt"),
      formats::Data(g + ps::kY, {"prompt", "n"}, ps::kYLabels, "the label y_j of each x_j"),
      formats::Data(g + ps::kW, {"prompt", "d"}, ps::kWLabels, "the task's weights of each prompt"),
      formats::Data(g + ps::kQueryX, {"prompt", "n", "d"}, ps::kQueryXLabels,
                    "the query x after k = 0..n-1 examples", formats::Values::kFinite, {}, queries),
      formats::Data(g + ps::kQueryY, {"prompt", "n"}, ps::kQueryYLabels,
                    "the query's label after k = 0..n-1 examples", formats::Values::kFinite, {},
                    queries),
  };
  return s;
}

}  // namespace

const formats::Schema& PromptSetSchema() {
  static const formats::Schema s = MakePromptSetSchema();
  return s;
}

}  // namespace icl::data
