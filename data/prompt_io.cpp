// Prompt-set HDF5 I/O and the format attributes every iclprobe file carries.
#include "data/prompt_io.hpp"

#include "core/errors.hpp"

#include <stdexcept>

#include "core/output.hpp"
#include "formats/header.hpp"

namespace icl::data {

void WritePrompts(h5::Group& parent, const PromptSet& set) {
  const hsize_t N = set.size(), n = set.task.n, d = set.task.d;
  h5::Group g = parent.CreateGroup("prompts");
  g.SetAttr("task_config", set.task.ToJson());
  g.SetAttr("seed", static_cast<std::int64_t>(set.seed));
  g.SetAttr("first_index", static_cast<std::int64_t>(set.first_index));
  g.CreateDataset<double>("x", {N, n, d}, {"prompt", "example", "feature"})
      .Write(set.x.memptr(), set.x.n_elem);
  g.CreateDataset<double>("y", {N, n}, {"prompt", "example"}).Write(set.y.memptr(), set.y.n_elem);
  g.CreateDataset<double>("w", {N, d}, {"prompt", "feature"}).Write(set.w.memptr(), set.w.n_elem);
  if (set.task.HasQueries()) {
    g.CreateDataset<double>("query_x", {N, n, d}, {"prompt", "prefix_len", "feature"})
        .Write(set.query_x.memptr(), set.query_x.n_elem);
    g.CreateDataset<double>("query_y", {N, n}, {"prompt", "prefix_len"})
        .Write(set.query_y.memptr(), set.query_y.n_elem);
  }
}

PromptSet ReadPrompts(const h5::Group& parent) {
  const h5::Group g = parent.OpenGroup("prompts");
  PromptSet set;
  set.task = TaskConfig::FromJson(g.GetString("task_config"), g.Where("task_config"));
  set.seed = static_cast<std::uint64_t>(g.GetInt("seed"));
  set.first_index =
      g.HasAttr("first_index") ? static_cast<std::uint64_t>(g.GetInt("first_index")) : 0;
  const h5::Dataset x = g.OpenDataset("x");
  const hsize_t N = x.dims().empty() ? 0 : x.dims()[0];
  const hsize_t n = set.task.n, d = set.task.d;
  x.ExpectDims({N, n, d});
  const h5::Dataset y = g.OpenDataset("y");
  y.ExpectDims({N, n});
  const h5::Dataset w = g.OpenDataset("w");
  w.ExpectDims({N, d});
  set.x.set_size(d, n, N);
  set.y.set_size(n, N);
  set.w.set_size(d, N);
  x.Read(set.x.memptr(), set.x.n_elem);
  y.Read(set.y.memptr(), set.y.n_elem);
  w.Read(set.w.memptr(), set.w.n_elem);
  if (set.task.HasQueries()) {  // the query after k examples, k = 0..n-1 (a query shift)
    const h5::Dataset qx = g.OpenDataset("query_x"), qy = g.OpenDataset("query_y");
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
    f.SetAttr("task_config", set.task.ToJson());
    f.SetAttr("seed", static_cast<std::int64_t>(set.seed));
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
