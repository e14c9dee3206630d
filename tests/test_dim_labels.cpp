// Every dataset iclprobe writes names its axes (HDF5 dimension labels, H5DS; h5py shows them as
// dims[i].label): checked with H5DSget_label on every dataset of every file kind, made by the
// program itself.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <H5DSpublic.h>  // after hdf5.h, which it needs

#include <string>
#include <vector>

#include "core/hdf5.hpp"
#include "data/prompt_io.hpp"
#include "tests/test_util.hpp"

namespace icl {
namespace {

using test::RunIclprobe;
using test::TempDir;

void Ok(const test::CommandResult& r) {
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

struct Found {
  std::vector<std::string> datasets;   // every dataset visited
  std::vector<std::string> unlabeled;  // "name: dimension i"
};

// Visits every object of the file with the C API (not through iclprobe's own reader).
herr_t Visit(hid_t root, const char* name, const H5O_info_t* info, void* data) {
  if (info->type != H5O_TYPE_DATASET) return 0;
  auto* found = static_cast<Found*>(data);
  found->datasets.push_back(name);
  const hid_t ds = H5Dopen2(root, name, H5P_DEFAULT);
  const hid_t space = H5Dget_space(ds);
  const int rank = H5Sget_simple_extent_ndims(space);
  for (int i = 0; i < rank; ++i) {
    char label[256] = {0};
    const ssize_t n = H5DSget_label(ds, static_cast<unsigned>(i), label, sizeof(label));
    if (n <= 0) found->unlabeled.push_back(std::string(name) + ": dimension " + std::to_string(i));
  }
  H5Sclose(space);
  H5Dclose(ds);
  return 0;
}

Found LabelsOf(const std::string& path) {
  Found found;
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  EXPECT_GE(f, 0) << path;
  if (f < 0) return found;
  H5Ovisit2(f, H5_INDEX_NAME, H5_ITER_NATIVE, Visit, &found, H5O_INFO_BASIC);
  H5Fclose(f);
  return found;
}

void ExpectAllLabeled(const std::string& path, std::size_t at_least) {
  const Found found = LabelsOf(path);
  EXPECT_GE(found.datasets.size(), at_least) << path;
  for (const auto& u : found.unlabeled)
    ADD_FAILURE() << path << ": " << u << " has no label";
}

TEST(DimensionLabels, EveryDatasetOfEveryFileKindNamesItsAxes) {
  TempDir tmp;
  // Checkpoints: untrained (parameters), trained (with the optimizer state), constructed.
  Ok(
      RunIclprobe("train --d 3 --n 6 --layers 2 --hidden 16 --heads 2 --steps 4 --batch 8 "
                  "--eval-every 2 --save-every 2 --eval-prompts 16 --threads 1 --quiet --out " +
                  (tmp / "ckpt.h5")));
  Ok(RunIclprobe("train --d 3 --n 6 --layers 2 --hidden 16 --heads 2 --init-only --out " +
                 (tmp / "init.h5")));
  Ok(RunIclprobe("construct --program gd --alpha 0.05 --d 3 --n 6 --out " + (tmp / "gd.h5")));
  // Activations, probes (ridge weights, errors, splits, pooling weights, codelengths),
  // interventions.
  Ok(RunIclprobe("extract -c " + (tmp / "gd.h5") + " --prompts 400 --threads 1 --quiet --out " +
                 (tmp / "acts.h5")));
  Ok(RunIclprobe(
      "probe -a " + (tmp / "acts.h5") +
      " --targets xty --probes ridge,linear --epochs 2 --k 3,5 --shuffle-control --codelength "
      "--codelength-blocks 0.05,0.25,1 "
      "--threads 1 --quiet --out " +
      (tmp / "probes.h5")));
  Ok(RunIclprobe("intervene -c " + (tmp / "gd.h5") + " --probes " + (tmp / "probes.h5") +
                 " --target xty --response gd:0.05 --layers 2 --k 3 --pairs 20 --bootstrap 50 "
                 "--calibration-prompts 50 --threads 1 --quiet --out " +
                 (tmp / "edits.h5")));
  // A standalone prompt set (the library's writer; no subcommand writes one).
  data::TaskConfig task;
  data::SavePromptSet(tmp / "prompts.h5", data::SamplePrompts(task, 1, 0, 5), false);

  ExpectAllLabeled(tmp / "ckpt.h5", 30);
  ExpectAllLabeled(tmp / "init.h5", 15);
  ExpectAllLabeled(tmp / "gd.h5", 5);
  ExpectAllLabeled(tmp / "acts.h5", 12);
  ExpectAllLabeled(tmp / "probes.h5", 15);
  ExpectAllLabeled(tmp / "edits.h5", 8);
  ExpectAllLabeled(tmp / "prompts.h5", 3);
}

// The labels read back are the ones the schema names, in order, through iclprobe's reader and
// through H5DSget_label alike.
TEST(DimensionLabels, ActivationsAxesAreTheSchemas) {
  TempDir tmp;
  Ok(RunIclprobe("construct --program gd --alpha 0.05 --d 3 --n 6 --out " + (tmp / "gd.h5")));
  Ok(RunIclprobe("extract -c " + (tmp / "gd.h5") + " --prompts 40 --threads 1 --quiet --out " +
                 (tmp / "acts.h5")));
  const h5::File f = h5::File::Open(tmp / "acts.h5");
  EXPECT_EQ(f.OpenDataset("hidden/layer_01").DimLabels(),
            (std::vector<std::string>{"prompt", "position", "feature"}));
  EXPECT_EQ(f.OpenDataset("targets/xtx").DimLabels(),
            (std::vector<std::string>{"prompt", "k", "row", "column"}));
  EXPECT_EQ(f.OpenDataset("predictions").DimLabels(), (std::vector<std::string>{"prompt", "k"}));
  char label[64] = {0};
  const hid_t file = H5Fopen((tmp / "acts.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t ds = H5Dopen2(file, "prompts/x", H5P_DEFAULT);
  ASSERT_GT(H5DSget_label(ds, 1, label, sizeof(label)), 0);
  EXPECT_STREQ(label, "example");
  H5Dclose(ds);
  H5Fclose(file);
}

}  // namespace
}  // namespace icl
