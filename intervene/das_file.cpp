// The DAS file (formats::DasSchema(), das.hpp): its writer and reader through the formats layer,
// its tidy CSV and the console summary of a run.
#include "intervene/das.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "core/errors.hpp"
#include "core/names.hpp"
#include "formats/reader.hpp"
#include "formats/schemas.hpp"
#include "formats/writer.hpp"
#include "intervene/das_internal.hpp"
#include "intervene/file_common.hpp"
#include "learners/classical.hpp"

namespace icl::intervene {

namespace {

constexpr const char* kPerLayerM[] = {"iia",           "iia_lo",        "iia_hi", "random_iia",
                                      "random_iia_lo", "random_iia_hi", "epochs"};
constexpr const char* kPerLayer[] = {"none_iia",    "none_iia_lo", "none_iia_hi", "full_iia",
                                     "full_iia_lo", "full_iia_hi", "probe_r2"};
constexpr const char* kPerSubspace[] = {"subspace_iia", "subspace_iia_lo", "subspace_iia_hi"};
template <typename R>
auto& PerLayerM(R& r, int i) {
  return *std::array{&r.iia,           &r.iia_lo,        &r.iia_hi, &r.random_iia,
                     &r.random_iia_lo, &r.random_iia_hi, &r.epochs}[i];
}
template <typename R>
auto& PerLayer(R& r, int i) {
  return *std::array{&r.none_iia,    &r.none_iia_lo, &r.none_iia_hi, &r.full_iia,
                     &r.full_iia_lo, &r.full_iia_hi, &r.probe_r2}[i];
}

arma::cube CubeOf(const std::vector<double>& v, arma::uword L, arma::uword M, arma::uword X) {
  arma::cube c(L, M, X);
  std::size_t n = 0;
  for (arma::uword i = 0; i < L; ++i)
    for (arma::uword j = 0; j < M; ++j)
      for (arma::uword s = 0; s < X; ++s)
        c(i, j, s) = v[n++];
  return c;
}

constexpr const char* kBasis = "bases/state_<layer>_m_<m>";
formats::Fill BasisFill(int layer, int m) {
  return {{"layer", std::to_string(layer)}, {"m", std::to_string(m)}};
}

}  // namespace

void WriteDasFile(const std::string& path, const DasResult& res) {
  const hsize_t L = res.layers.size(), M = res.ms.size(), K = res.ks.size(),
                S = res.subspace_names.size();
  formats::Writer f(path, formats::DasSchema());
  const DasRequest& r = res.request;
  f.SetAttr("checkpoint", res.checkpoint);
  f.SetAttr("checkpoint_sha256", res.checkpoint_sha256);
  f.SetAttr("quantity", r.quantity);
  f.SetAttr("algorithm", r.algorithm);
  f.SetAttr("position", DasPositionName(r.position));
  f.SetAttr("start", DasStartName(r.start));
  f.SetAttr("seed", static_cast<std::int64_t>(r.seed));
  f.SetAttr("train_pairs", r.train_pairs);
  f.SetAttr("test_pairs", r.test_pairs);
  f.SetAttr("max_epochs", r.max_epochs);
  f.SetAttr("tolerance", r.tolerance);
  f.SetAttr("learning_rate", r.learning_rate);
  f.SetAttr("batch", r.batch);
  f.SetAttr("bootstrap_replicates", r.bootstrap);
  f.SetAttr("task_config", res.task.ToJson());
  f.SetAttr("layers", res.layers);
  f.SetAttr("ms", res.ms);
  f.SetAttr("ks", res.ks);
  f.SetAttr("subspaces", res.subspace_names);
  const formats::Sizes sizes = {{"layer", L}, {"m", M}, {"k", K}, {"subspace", S}};
  for (int i = 0; i < 7; ++i)
    f.Write(kPerLayerM[i], sizes, RowMajor(PerLayerM(res, i)));
  for (int i = 0; i < 7; ++i)
    f.Write(kPerLayer[i], sizes, PerLayer(res, i).memptr(), PerLayer(res, i).n_elem);
  f.Write("iia_k", sizes, RowMajor(res.iia_k));
  f.Write("random_iia_k", sizes, RowMajor(res.random_iia_k));
  f.Write("angle_min", sizes, RowMajor(res.angle_min));
  f.Write("angle_max", sizes, RowMajor(res.angle_max));
  for (int i = 0; i < 3; ++i)
    f.Write(
        kPerSubspace[i], sizes,
        RowMajor(*std::array{&res.subspace_iia, &res.subspace_iia_lo, &res.subspace_iia_hi}[i]));
  if (r.quantity == "w")
    for (const auto& [name, v] : {std::pair<const char*, double>{"ceiling_iia", res.ceiling_iia},
                                  {"ceiling_iia_lo", res.ceiling_iia_lo},
                                  {"ceiling_iia_hi", res.ceiling_iia_hi}})
      f.Write(name, sizes, &v, 1);
  for (std::size_t li = 0; li < L; ++li)
    for (std::size_t mi = 0; mi < M; ++mi) {
      const arma::mat& b = res.bases[li * M + mi];
      // H x m column-major is [m, H] row-major: row i is basis vector i.
      f.Write(kBasis, {{"m", b.n_cols}, {"H", b.n_rows}}, b.memptr(), b.n_elem,
              BasisFill(res.layers[li], res.ms[mi]));
    }
  f.Close();
}

DasResult ReadDasFile(const std::string& path) {
  const formats::Reader f(path, formats::DasSchema());
  const std::string& where = f.where();
  DasResult res;
  DasRequest& r = res.request;
  res.checkpoint = f.String("checkpoint");
  res.checkpoint_sha256 = f.String("checkpoint_sha256");
  r.quantity = f.String("quantity");
  r.algorithm = f.String("algorithm");
  r.position = ParseDasPosition(f.String("position"), where);
  const std::string start = f.String("start");
  if (start != "probe" && start != "random")
    throw core::InputError(where, "", "attribute 'start' must be probe or random");
  r.start = start == "probe" ? DasStart::kProbe : DasStart::kRandom;
  res.task = data::TaskConfig::FromJson(f.String("task_config"), where + " task_config");
  r.seed = static_cast<std::uint64_t>(f.Int("seed"));
  const auto small_int = [&](const char* name) {
    const std::int64_t v = f.Int(name);
    if (v < 0 || v > 100000000)
      throw core::InputError(where, "", std::string("attribute '") + name + "' is out of range");
    return static_cast<int>(v);
  };
  r.train_pairs = small_int("train_pairs");
  r.test_pairs = small_int("test_pairs");
  r.max_epochs = small_int("max_epochs");
  r.batch = small_int("batch");
  r.bootstrap = small_int("bootstrap_replicates");
  r.tolerance = f.Double("tolerance");
  r.learning_rate = f.Double("learning_rate");
  try {
    r.Validate();
    if (r.quantity == "xty")
      ParseMomentAlgorithm(r.algorithm, res.task);
    else
      learners::MakeLearner(r.algorithm, res.task, "algorithm");
  } catch (const core::InputError& e) {
    throw core::InputError(where, "", "attribute '" + e.field() + "': " + e.text());
  }
  ReadLayersAndKs(f, res.task, res.layers, res.ks);
  std::vector<std::int64_t> ms = f.IntList("ms");
  if (ms.empty() || ms.size() > 4096)
    throw core::InputError(where, "", "attribute 'ms' must hold 1..4096 sizes");
  for (const std::int64_t m : ms) {
    if (m < 1 || m > 1000000)
      throw core::InputError(where, "", "attribute 'ms' holds " + std::to_string(m));
    res.ms.push_back(static_cast<int>(m));
  }
  if (std::set<int>(res.ms.begin(), res.ms.end()).size() != res.ms.size())
    throw core::InputError(where, "", "attribute 'ms' lists a size twice");
  res.subspace_names = f.StringList("subspaces");
  if (res.subspace_names.empty() || res.subspace_names.size() > 64 ||
      res.subspace_names[0] != "probe" ||
      std::set<std::string>(res.subspace_names.begin(), res.subspace_names.end()).size() !=
          res.subspace_names.size())
    throw core::InputError(where, "",
                           "attribute 'subspaces' must hold 1..64 distinct names, 'probe' first");
  for (const std::string& s : res.subspace_names)
    if (!core::IsPlainName(s))
      throw core::InputError(where, "", "attribute 'subspaces' holds a name that is not plain");
  const hsize_t L = res.layers.size(), M = res.ms.size(), K = res.ks.size(),
                S = res.subspace_names.size();
  const formats::Sizes sizes = {{"layer", L}, {"m", M}, {"k", K}, {"subspace", S}};
  const auto read = [&](const char* name) { return f.Read(name, sizes); };
  for (int i = 0; i < 7; ++i) {
    const std::vector<double> v = read(kPerLayerM[i]);
    PerLayerM(res, i) = arma::mat(v.data(), M, L).t();
  }
  for (int i = 0; i < 7; ++i)
    PerLayer(res, i) = arma::vec(read(kPerLayer[i]));
  res.iia_k = CubeOf(read("iia_k"), L, M, K);
  res.random_iia_k = CubeOf(read("random_iia_k"), L, M, K);
  res.angle_min = CubeOf(read("angle_min"), L, M, S);
  res.angle_max = CubeOf(read("angle_max"), L, M, S);
  for (int i = 0; i < 3; ++i) {
    const std::vector<double> v = read(kPerSubspace[i]);
    *std::array{&res.subspace_iia, &res.subspace_iia_lo, &res.subspace_iia_hi}[i] =
        arma::mat(v.data(), S, L).t();
  }
  if (r.quantity == "w") {
    res.ceiling_iia = read("ceiling_iia")[0];
    res.ceiling_iia_lo = read("ceiling_iia_lo")[0];
    res.ceiling_iia_hi = read("ceiling_iia_hi")[0];
  }
  const std::vector<unsigned long long> dims0 = f.Dims(kBasis, BasisFill(res.layers[0], res.ms[0]));
  if (dims0[1] < 1 || dims0[1] > 65536)
    throw core::InputError(where, "", "/bases datasets must be [m, H] with H in 1..65536");
  const hsize_t H = dims0[1];
  for (std::size_t li = 0; li < L; ++li)
    for (std::size_t mi = 0; mi < M; ++mi) {
      const formats::Fill fill = BasisFill(res.layers[li], res.ms[mi]);
      if (static_cast<hsize_t>(res.ms[mi]) > H)
        throw core::InputError(
            where, "", "m = " + std::to_string(res.ms[mi]) + " is larger than the bases' width");
      const std::vector<double> v =
          f.Read(kBasis, {{"m", static_cast<hsize_t>(res.ms[mi])}, {"H", H}}, fill);
      arma::mat b(v.data(), H, res.ms[mi]);
      // Written orthonormal to float64 rounding (QR): sqrt(H) eps per entry, far below 1e-9.
      if (arma::abs(b.t() * b - arma::eye(b.n_cols, b.n_cols)).max() > 1e-9)
        throw core::InputError(
            where, "", "/" + formats::FillPath(kBasis, fill) + " is not an orthonormal basis");
      res.bases.push_back(std::move(b));
    }
  return res;
}

void WriteDasCsv(std::ostream& os, const DasResult& res) {
  os << "quantity,algorithm,position,layer,m,k,test_pairs,iia,iia_lo,iia_hi,random_iia,"
        "random_iia_lo,random_iia_hi,none_iia,full_iia,epochs,probe_r2,ceiling_iia";
  for (const std::string& s : res.subspace_names)
    os << ",angle_max_" << s << ",angle_min_" << s;
  os << "\n";
  const DasRequest& r = res.request;
  for (std::size_t li = 0; li < res.layers.size(); ++li)
    for (std::size_t mi = 0; mi < res.ms.size(); ++mi) {
      const auto row = [&](const std::string& k, double iia, const std::string& lo,
                           const std::string& hi, double rnd, const std::string& rlo,
                           const std::string& rhi, bool angles) {
        os << fmt::format(
            "{},{},{},{},{},{},{},{:.6g},{},{},{:.6g},{},{},{:.6g},{:.6g},{},{:.6g},{}", r.quantity,
            r.algorithm, DasPositionName(r.position), res.layers[li], res.ms[mi], k, r.test_pairs,
            iia, lo, hi, rnd, rlo, rhi, res.none_iia(li), res.full_iia(li), res.epochs(li, mi),
            res.probe_r2(li), r.quantity == "w" ? fmt::format("{:.6g}", res.ceiling_iia) : "");
        for (std::size_t si = 0; si < res.subspace_names.size(); ++si)
          if (angles)
            os << fmt::format(",{:.4g},{:.4g}", res.angle_max(li, mi, si),
                              res.angle_min(li, mi, si));
          else
            os << ",,";
        os << "\n";
      };
      for (std::size_t ki = 0; ki < res.ks.size(); ++ki)
        row(std::to_string(res.ks[ki]), res.iia_k(li, mi, ki), "", "", res.random_iia_k(li, mi, ki),
            "", "", false);
      row("pooled", res.iia(li, mi), CsvValue(res.iia_lo(li, mi)), CsvValue(res.iia_hi(li, mi)),
          res.random_iia(li, mi), CsvValue(res.random_iia_lo(li, mi)),
          CsvValue(res.random_iia_hi(li, mi)), true);
    }
}

void PrintDasSummary(std::ostream& os, const DasResult& res) {
  const DasRequest& r = res.request;
  os << fmt::format(
      "das: {} counterfactual under {} at the {}; IIA pooled over k = {}..{} on {} held-out "
      "pairs, 95% bootstrap intervals\n",
      r.quantity, r.algorithm, DasPositionName(r.position), res.ks.front(), res.ks.back(),
      r.test_pairs);
  if (r.quantity == "w")
    os << fmt::format(
        "ceiling (the model itself on B's first k examples and A's query): IIA {:.4f} {}\n",
        res.ceiling_iia, IntervalText(res.ceiling_iia_lo, res.ceiling_iia_hi, 0, 4));
  os << "  state    m   IIA                        random subspace            epochs";
  for (const std::string& s : res.subspace_names)
    os << fmt::format("  max angle {}", s);
  os << "\n";
  for (std::size_t li = 0; li < res.layers.size(); ++li) {
    os << fmt::format(
        "  {:5d}  none {:.4f} {}   full {:.4f} {}   probe R2 {:.3f}\n", res.layers[li],
        res.none_iia(li), IntervalText(res.none_iia_lo(li), res.none_iia_hi(li), 0, 4),
        res.full_iia(li), IntervalText(res.full_iia_lo(li), res.full_iia_hi(li), 0, 4),
        res.probe_r2(li));
    os << "         interchanged as given:";
    for (std::size_t si = 0; si < res.subspace_names.size(); ++si)
      os << fmt::format(
          "  {} {:.4f} {}", res.subspace_names[si], res.subspace_iia(li, si),
          IntervalText(res.subspace_iia_lo(li, si), res.subspace_iia_hi(li, si), 0, 4));
    os << "\n";
    for (std::size_t mi = 0; mi < res.ms.size(); ++mi) {
      os << fmt::format("  {:5d} {:4d}   {:7.4f} {}   {:7.4f} {}   {:6.0f}", res.layers[li],
                        res.ms[mi], res.iia(li, mi),
                        IntervalText(res.iia_lo(li, mi), res.iia_hi(li, mi), 7, 4),
                        res.random_iia(li, mi),
                        IntervalText(res.random_iia_lo(li, mi), res.random_iia_hi(li, mi), 7, 4),
                        res.epochs(li, mi));
      for (std::size_t si = 0; si < res.subspace_names.size(); ++si)
        os << fmt::format("  {:8.1f}", res.angle_max(li, mi, si));
      os << "\n";
    }
  }
}

}  // namespace icl::intervene
