// The probing run: streaming passes over each layer, ridge and gradient probes, outputs.
#include "probes/runner.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "data/hdf5.hpp"
#include "data/names.hpp"
#include "data/prompt_io.hpp"
#include "data/sha256.hpp"
#include "data/version.hpp"
#include "probes/data_access.hpp"

extern "C" void openblas_set_num_threads(int num_threads);

namespace icl::probes {

namespace fs = std::filesystem;

std::string FamilyName(Family f) {
  switch (f) {
    case Family::kRidge:
      return "ridge";
    case Family::kLinear:
      return "linear";
    case Family::kMlp:
      return "mlp";
  }
  return "?";
}

std::vector<Family> ParseFamilies(const std::string& text) {
  std::vector<Family> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item == "ridge")
      out.push_back(Family::kRidge);
    else if (item == "linear")
      out.push_back(Family::kLinear);
    else if (item == "mlp")
      out.push_back(Family::kMlp);
    else
      throw std::invalid_argument("--probes: unknown probe '" + item +
                                  "'; expected ridge, linear, mlp");
  }
  if (out.empty()) throw std::invalid_argument("--probes: empty list; expected ridge, linear, mlp");
  return out;
}

std::string SourceName(const std::string& path) {
  return fs::path(path).stem().string();
}

std::string ProbeRequest::ToJson() const {
  std::vector<std::string> fam;
  for (auto f : families)
    fam.push_back(FamilyName(f));
  nlohmann::json j = {
      {"activations", activations},
      {"controls", controls},
      {"targets", targets},
      {"probes", fam},
      {"seeds", seeds},
      {"shuffle_control", shuffle_control},
      {"lambdas", std::vector<double>(lambdas.begin(), lambdas.end())},
      {"lambda_selection", "exact leave-one-out on the training split"},
      {"split", split},
      {"seed", seed},
      {"pooling", pooled ? "attention" : "position"},
      {"mlp_hidden", gradient.mlp_hidden},
      {"lr", gradient.lr},
      {"batch", gradient.batch},
      {"max_epochs", gradient.max_epochs},
      {"patience", gradient.patience},
      {"layers", layers},
      {"ks", ks},
      {"standardize", "features by training mean/std; ridge intercept unpenalised"}};
  return j.dump();
}

std::vector<extract::ActivationsInfo> ValidateRequest(ProbeRequest& r) {
  if (r.seeds < 1) throw std::invalid_argument("--seeds: must be at least 1");
  std::vector<extract::ActivationsInfo> infos;
  infos.push_back(extract::ReadActivationsInfo(r.activations));
  for (const auto& c : r.controls)
    infos.push_back(extract::ReadActivationsInfo(c));
  const auto& main = infos[0];
  std::set<std::string> names = {"model", "shuffled"};
  for (std::size_t i = 1; i < infos.size(); ++i) {
    const auto& c = infos[i];
    auto mismatch = [&](const std::string& what, const std::string& a, const std::string& b) {
      throw std::invalid_argument("--control: '" + c.path + "' has " + what + " " + b + " but '" +
                                  main.path + "' has " + a +
                                  "; controls must match the main file's shapes");
    };
    if (c.model.hidden != main.model.hidden)
      mismatch("hidden", std::to_string(main.model.hidden), std::to_string(c.model.hidden));
    if (c.model.layers != main.model.layers)
      mismatch("layers", std::to_string(main.model.layers), std::to_string(c.model.layers));
    if (c.task.d != main.task.d)
      mismatch("d", std::to_string(main.task.d), std::to_string(c.task.d));
    if (c.task.n != main.task.n)
      mismatch("n", std::to_string(main.task.n), std::to_string(c.task.n));
    if (c.positions != main.positions) mismatch("positions", "another layout", "its layout");
    if (!data::IsPlainName(SourceName(c.path)))
      throw std::invalid_argument("--control: the file name of '" + c.path +
                                  "' names its source in the outputs and must be plain (letters, "
                                  "digits, _ . -, at most 64); rename the file");
    if (!names.insert(SourceName(c.path)).second)
      throw std::invalid_argument("--control: two sources are named '" + SourceName(c.path) +
                                  "'; rename a file");
  }
  for (const auto& t : r.targets)
    if (!data::IsPlainName(t))
      throw std::invalid_argument("--targets: '" + t.substr(0, 80) + "' is not a plain name");
  for (const auto& info : infos)
    for (const auto& t : r.targets)
      if (std::find(info.targets.begin(), info.targets.end(), t) == info.targets.end()) {
        std::string have;
        for (const auto& x : info.targets)
          have += (have.empty() ? "" : ", ") + x;
        throw std::invalid_argument("--targets: '" + t + "' is not in '" + info.path +
                                    "' (it has " + have + ")");
      }
  if (r.layers.empty()) r.layers = main.layers;
  for (const auto& info : infos)
    for (int l : r.layers)
      if (std::find(info.layers.begin(), info.layers.end(), l) == info.layers.end())
        throw std::invalid_argument("--layers: layer " + std::to_string(l) + " is not stored in '" +
                                    info.path + "'");
  if (r.ks.empty())
    for (int k = 1; k <= main.task.n; ++k)
      r.ks.push_back(k);
  for (int k : r.ks)
    if (k < 1 || k > main.task.n)
      throw std::invalid_argument("--k: " + std::to_string(k) + " is outside 1.." +
                                  std::to_string(main.task.n));
  for (const auto& info : infos) {
    const auto roles = SplitPrompts(info.prompts, r.split, r.seed);  // throws on an empty part
    const auto n_train = RoleIndices(roles, Role::kTrain).n_elem;
    if (r.lambdas.min() == 0 &&
        std::find(r.families.begin(), r.families.end(), Family::kRidge) != r.families.end() &&
        n_train <= arma::uword(info.model.hidden))
      throw std::invalid_argument("--lambdas: 0 is in the grid but '" + info.path + "' has " +
                                  std::to_string(n_train) + " training prompts for " +
                                  std::to_string(info.model.hidden) +
                                  " features; use lambdas > 0 or more prompts");
  }
  return infos;
}

namespace {

std::uint64_t SplitSeed(std::uint64_t base, int s) {
  return base * 1000003ULL + std::uint64_t(s);
}

// A target variant probed on one source: the real targets, or (shuffle control) targets
// permuted across training prompts, one permutation per seed.
struct Variant {
  std::string target;
  const Target* values;
  std::vector<std::vector<arma::mat>> shuffled;  // [seed][k-1], empty when not shuffled
  const arma::mat& Y(int seed, int k) const {
    return shuffled.empty() ? values->values[k - 1] : shuffled[seed][k - 1];
  }
};

struct Worker {
  int threads;
  // Runs f(i) for i in [0, count) on `threads` threads.
  template <typename F>
  void For(int count, F f) const {
    std::atomic<int> next{0};
    std::exception_ptr error;
    std::mutex m;
    auto body = [&] {
      for (int i; (i = next++) < count;) {
        try {
          f(i);
        } catch (...) {
          std::lock_guard<std::mutex> lock(m);
          if (!error) error = std::current_exception();
        }
      }
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < std::min(threads, count); ++t)
      pool.emplace_back(body);
    body();
    for (auto& t : pool)
      t.join();
    if (error) std::rethrow_exception(error);
  }
};

}  // namespace

ProbeOutput RunProbes(ProbeRequest r, const std::function<void(double, double)>& progress) {
  const auto infos = ValidateRequest(r);
  const int threads = r.threads > 0 ? r.threads : std::max(1u, std::thread::hardware_concurrency());
  // Work is spread over (k, seed) and probes by our own threads; BLAS and torch stay serial.
  openblas_set_num_threads(1);
  torch::set_num_threads(1);
  const Worker pool{threads};

  ProbeOutput out;
  out.layers = r.layers;
  out.ks = r.ks;
  out.seeds = r.seeds;
  const bool ridge =
      std::find(r.families.begin(), r.families.end(), Family::kRidge) != r.families.end();
  std::vector<Family> gradient;
  for (auto f : r.families)
    if (f != Family::kRidge) gradient.push_back(f);

  struct Source {
    std::string name;
    std::size_t info;
    bool shuffled;
  };
  std::vector<Source> sources = {{"model", 0, false}};
  for (std::size_t i = 1; i < infos.size(); ++i)
    sources.push_back({SourceName(infos[i].path), i, false});
  if (r.shuffle_control) sources.push_back({"shuffled", 0, true});
  for (const auto& s : sources)
    out.sources.push_back(s.name);

  const int K = r.ks.size(), S = r.seeds;
  const double total = double(sources.size()) * r.layers.size() * K * r.families.size();
  double done = 0;
  std::mutex out_mutex;

  for (const auto& src : sources) {
    const auto& info = infos[src.info];
    const std::int64_t N = info.prompts;
    const int H = info.model.hidden;
    std::vector<std::vector<Role>> roles;
    std::vector<arma::uvec> train, val, test;
    for (int s = 0; s < S; ++s) {
      roles.push_back(SplitPrompts(N, r.split, SplitSeed(r.seed, s)));
      train.push_back(RoleIndices(roles[s], Role::kTrain));
      val.push_back(RoleIndices(roles[s], Role::kVal));
      test.push_back(RoleIndices(roles[s], Role::kTest));
      if (src.name == "model") {
        std::vector<std::uint8_t> r8(N);
        for (std::int64_t i = 0; i < N; ++i)
          r8[i] = static_cast<std::uint8_t>(roles[s][i]);
        out.roles.push_back(std::move(r8));
      }
    }
    std::vector<Target> targets;
    for (const auto& t : r.targets)
      targets.push_back(LoadTarget(info, t));
    std::vector<Variant> variants;
    for (const auto& t : targets) {
      Variant v{t.name, &t, {}};
      if (src.shuffled) {
        v.shuffled.resize(S);
        for (int s = 0; s < S; ++s) {
          data::Rng rng(SplitSeed(r.seed, s), /*stream=*/0x5a0f);
          arma::uvec perm = train[s];
          for (arma::uword i = perm.n_elem - 1; i > 0; --i)
            std::swap(perm(i), perm(rng.NextU64() % (i + 1)));
          for (int k = 1; k <= info.task.n; ++k) {
            arma::mat y = t.values[k - 1];
            y.cols(train[s]) = t.values[k - 1].cols(perm);
            v.shuffled[s].push_back(std::move(y));
          }
        }
      }
      variants.push_back(std::move(v));
    }
    const int V = variants.size();

    for (std::size_t li = 0; li < r.layers.size(); ++li) {
      const int layer = r.layers[li];
      const HiddenReader reader(info, layer);
      auto record = [&](const std::string& target, Family f, int k, int s, const Errors& e,
                        double lambda, int epochs) {
        if (!(e.sst > 0))
          throw std::invalid_argument("'" + info.path + "': target " + target +
                                      " has zero variance on the test split at k=" +
                                      std::to_string(k) + "; nMSE is undefined");
        ProbeRecord rec{target,  FamilyName(f), src.name, layer,  k,     s,
                        e.Mse(), e.Nmse(),      e.R2(),   lambda, epochs};
        std::lock_guard<std::mutex> lock(out_mutex);
        out.records.push_back(rec);
      };

      if (ridge) {
        // Pass 1: training sufficient statistics per (k, seed) and target variant.
        std::vector<FeatureStats> fstats(K * S);
        std::vector<TargetStats> tstats(K * S * V);
        for (int i = 0; i < K * S; ++i) {
          fstats[i].Init(H);
          for (int v = 0; v < V; ++v)
            tstats[i * V + v].Init(H, variants[v].values->dims);
        }
        // Per seed, the block's rows of a role: positions in the block and prompt indices.
        struct Rows {
          arma::uvec loc, glob;
        };
        auto split_block = [&](std::int64_t r0, std::int64_t cnt, Role role) {
          std::vector<Rows> out(S);
          for (int s = 0; s < S; ++s) {
            std::vector<arma::uword> loc, glob;
            for (std::int64_t j = 0; j < cnt; ++j)
              if (roles[s][r0 + j] == role) loc.push_back(j), glob.push_back(r0 + j);
            out[s] = {arma::uvec(loc), arma::uvec(glob)};
          }
          return out;
        };
        for (std::int64_t r0 = 0; r0 < N; r0 += r.block_rows) {
          const std::int64_t cnt = std::min<std::int64_t>(r.block_rows, N - r0);
          const arma::mat block = reader.Read(r0, cnt);
          const auto train_rows = split_block(r0, cnt, Role::kTrain);
          pool.For(K * S, [&](int i) {
            const int k = r.ks[i / S], s = i % S, pos = AfterKPosition(info, k);
            const auto& [loc, glob] = train_rows[s];
            if (loc.is_empty()) return;
            const arma::mat x = block.submat(arma::span(pos * H, pos * H + H - 1), arma::span::all)
                                    .eval()
                                    .cols(loc);
            fstats[i].Add(x);
            for (int v = 0; v < V; ++v)
              tstats[i * V + v].Add(x, variants[v].Y(s, k).cols(glob));
          });
        }
        std::vector<RidgeProbe> probes;
        probes.reserve(K * S * V);
        for (int i = 0; i < K * S * V; ++i)
          probes.emplace_back(r.lambdas);
        pool.For(K * S, [&](int i) {
          RidgeProbe base(r.lambdas);
          base.Prepare(fstats[i]);
          for (int v = 0; v < V; ++v) {
            probes[i * V + v] = base;
            probes[i * V + v].Begin(tstats[i * V + v]);
          }
        });
        // Pass 2: leave-one-out errors on training rows, held-out errors on test rows.
        for (std::int64_t r0 = 0; r0 < N; r0 += r.block_rows) {
          const std::int64_t cnt = std::min<std::int64_t>(r.block_rows, N - r0);
          const arma::mat block = reader.Read(r0, cnt);
          const auto train_rows = split_block(r0, cnt, Role::kTrain);
          const auto test_rows = split_block(r0, cnt, Role::kTest);
          pool.For(K * S, [&](int i) {
            const int k = r.ks[i / S], s = i % S, pos = AfterKPosition(info, k);
            const arma::mat xk =
                block.submat(arma::span(pos * H, pos * H + H - 1), arma::span::all);
            const auto& [tl, tg] = train_rows[s];
            const auto& [hl, hg] = test_rows[s];
            for (int v = 0; v < V; ++v) {
              const arma::mat& y = variants[v].Y(s, k);
              if (!tl.is_empty()) probes[i * V + v].AccumulateLoo(xk.cols(tl), y.cols(tg));
              if (!hl.is_empty())
                probes[i * V + v].AccumulateHeldOut(xk.cols(hl),
                                                    variants[v].values->values[k - 1].cols(hg));
            }
          });
        }
        for (int i = 0; i < K * S; ++i) {
          const int k = r.ks[i / S], s = i % S;
          for (int v = 0; v < V; ++v) {
            RidgeProbe& p = probes[i * V + v];
            p.Select();
            // Test error against the real targets (the shuffle control is fit on permuted ones).
            const arma::mat yt = variants[v].values->values[k - 1].cols(test[s]);
            arma::mat c = yt;
            c.each_col() -= arma::vec(arma::mean(yt, 1));
            Errors e;
            e.sse = p.held_out_sse();
            e.sst = arma::accu(arma::square(c));
            e.rows = yt.n_cols;
            e.dims = yt.n_rows;
            record(variants[v].target, Family::kRidge, k, s, e, p.lambda(), 0);
            out.ridge.push_back({variants[v].target, src.name, layer, k, s, p.lambda(), p.weights(),
                                 p.intercept(), p.loo_mse()});
          }
        }
        done += K;
        if (progress) progress(done, total);
      }

      if (!gradient.empty()) {
        // The layer's states, streamed into memory block by block: [N, T, H] float32.
        const int T = info.positions_per_prompt;
        auto states = torch::empty({N, T, H}, torch::kFloat32);
        for (std::int64_t r0 = 0; r0 < N; r0 += r.block_rows) {
          const std::int64_t cnt = std::min<std::int64_t>(r.block_rows, N - r0);
          const arma::fmat block = arma::conv_to<arma::fmat>::from(reader.Read(r0, cnt));
          std::memcpy(states[r0].data_ptr<float>(), block.memptr(), sizeof(float) * block.n_elem);
        }
        struct Task {
          int ki, s, v;
          Family f;
        };
        std::vector<Task> tasks;
        for (int ki = 0; ki < K; ++ki)
          for (int s = 0; s < S; ++s)
            for (int v = 0; v < V; ++v)
              for (auto f : gradient)
                tasks.push_back({ki, s, v, f});
        pool.For(tasks.size(), [&](int ti) {
          const Task& t = tasks[ti];
          const int k = r.ks[t.ki], pos = AfterKPosition(info, k);
          // Pooled probes see the states up to and including the one after k examples.
          const auto x = r.pooled ? states.slice(1, 0, pos + 1) : states.select(1, pos);
          GradientProbeOptions o = r.gradient;
          o.mlp = t.f == Family::kMlp;
          o.pooled = r.pooled;
          o.seed = SplitSeed(r.seed, t.s) * 31 + k;
          // Fit on (possibly shuffled) training targets; test against the real ones.
          arma::mat y = variants[t.v].Y(t.s, k);
          y.cols(test[t.s]) = variants[t.v].values->values[k - 1].cols(test[t.s]);
          const GradientFit fit = FitGradientProbe(x, y, train[t.s], val[t.s], test[t.s], o);
          record(variants[t.v].target, t.f, k, t.s, fit.test, -1, fit.epochs);
          if (r.pooled) {
            arma::vec alpha(T, arma::fill::zeros);
            alpha.head(fit.alpha.n_elem) = fit.alpha;
            std::lock_guard<std::mutex> lock(out_mutex);
            out.alphas.push_back(
                {variants[t.v].target, FamilyName(t.f), src.name, layer, k, t.s, alpha});
          }
          if (progress) {
            std::lock_guard<std::mutex> lock(out_mutex);
            done += 1.0 / (S * V);  // S * V probes make one (layer, k, family) unit
            progress(done, total);
          }
        });
      }
    }
  }
  // A stable order: target, probe, source, layer, k, seed as requested.
  auto index_of = [](const auto& v, const auto& x) {
    return std::find(v.begin(), v.end(), x) - v.begin();
  };
  std::vector<std::string> fam;
  for (auto f : r.families)
    fam.push_back(FamilyName(f));
  std::sort(out.records.begin(), out.records.end(),
            [&](const ProbeRecord& a, const ProbeRecord& b) {
              return std::make_tuple(index_of(r.targets, a.target), index_of(fam, a.probe),
                                     index_of(out.sources, a.source), index_of(r.layers, a.layer),
                                     index_of(r.ks, a.k), a.seed) <
                     std::make_tuple(index_of(r.targets, b.target), index_of(fam, b.probe),
                                     index_of(out.sources, b.source), index_of(r.layers, b.layer),
                                     index_of(r.ks, b.k), b.seed);
            });
  return out;
}

void WriteProbesCsv(std::ostream& os, const ProbeOutput& out) {
  os << "target,probe,source,layer,k,seed,mse,nmse,r2\n";
  for (const auto& r : out.records)
    os << fmt::format("{},{},{},{},{},{},{:.9g},{:.9g},{:.9g}\n", r.target, r.probe, r.source,
                      r.layer, r.k, r.seed, r.mse, r.nmse, r.r2);
}

void WriteProbesFile(const std::string& path, const ProbeRequest& req, const ProbeOutput& out,
                     const std::map<std::string, std::string>& sha256) {
  const auto info = extract::ReadActivationsInfo(req.activations);
  auto sha = [&](const std::string& p) {
    const auto it = sha256.find(p);
    return it != sha256.end() ? it->second : data::Sha256File(p);
  };
  h5::File f = h5::File::Create(path, /*truncate=*/true);
  data::WriteFormatAttrs(f, kProbesFormat);
  f.SetAttr("activations", req.activations);
  f.SetAttr("activations_sha256", sha(req.activations));
  f.SetAttr("checkpoint_sha256", info.checkpoint_sha256);
  f.SetAttr("model_config", info.model.ToJson());
  f.SetAttr("task_config", info.task.ToJson());
  f.SetAttr("probe_config", req.ToJson());
  f.SetAttr("sources", nlohmann::json(out.sources).dump());
  nlohmann::json controls = nlohmann::json::object();
  for (const auto& c : req.controls)
    controls[SourceName(c)] = {{"path", c}, {"sha256", sha(c)}};
  f.SetAttr("controls", controls.dump());
  f.SetAttr("layers", nlohmann::json(out.layers).dump());
  f.SetAttr("ks", nlohmann::json(out.ks).dump());
  f.SetAttr("seeds", out.seeds);
  f.SetAttr(
      "metric_layout",
      std::string("/metrics/<target>/<probe>/<source>/{mse,nmse,r2} [layer index, k index, seed] "
                  "with layers and ks as in the root attributes"));

  const hsize_t L = out.layers.size(), K = out.ks.size(), S = out.seeds;
  auto li = [&](int layer) {
    return std::find(out.layers.begin(), out.layers.end(), layer) - out.layers.begin();
  };
  auto ki = [&](int k) { return std::find(out.ks.begin(), out.ks.end(), k) - out.ks.begin(); };
  std::map<std::string, std::array<arma::cube, 3>> metrics;  // key target/probe/source
  for (const auto& r : out.records) {
    auto& m = metrics[r.target + "/" + r.probe + "/" + r.source];
    if (m[0].is_empty())
      for (auto& c : m)
        c.set_size(S, K, L), c.fill(arma::datum::nan);  // column-major S x K x L == [L, K, S]
    m[0](r.seed, ki(r.k), li(r.layer)) = r.mse;
    m[1](r.seed, ki(r.k), li(r.layer)) = r.nmse;
    m[2](r.seed, ki(r.k), li(r.layer)) = r.r2;
  }
  for (const auto& [key, m] : metrics) {
    const char* names[] = {"mse", "nmse", "r2"};
    for (int i = 0; i < 3; ++i)
      f.CreateDataset<double>("metrics/" + key + "/" + names[i], {L, K, S}).Write(m[i].memptr());
    // Selectivity of the model over each control: R2(model) - R2(control).
    const auto slash = key.rfind('/');
    const std::string base = key.substr(0, slash), source = key.substr(slash + 1);
    if (source != "model" && metrics.count(base + "/model")) {
      const arma::cube sel = metrics.at(base + "/model")[2] - m[2];
      f.CreateDataset<double>("selectivity/" + base + "/" + source, {L, K, S}).Write(sel.memptr());
    }
  }
  // Ridge weights at the selected lambda.
  std::map<std::string, std::vector<const ProbeOutput::Ridge*>> ridge;
  for (const auto& r : out.ridge)
    ridge[r.target + "/" + r.source].push_back(&r);
  for (const auto& [key, list] : ridge) {
    const hsize_t p = list[0]->weights.n_rows, m = list[0]->weights.n_cols,
                  nl = list[0]->loo_mse.n_elem;
    std::vector<double> w(L * K * S * p * m, NAN), b(L * K * S * m, NAN), lam(L * K * S, NAN),
        loo(L * K * S * nl, NAN);
    for (const auto* r : list) {
      const std::size_t cell = (li(r->layer) * K + ki(r->k)) * S + r->seed;
      const arma::mat wt = r->weights.t();  // m x p column-major == [p, m] row-major
      std::copy(wt.begin(), wt.end(), w.begin() + cell * p * m);
      std::copy(r->intercept.begin(), r->intercept.end(), b.begin() + cell * m);
      lam[cell] = r->lambda;
      std::copy(r->loo_mse.begin(), r->loo_mse.end(), loo.begin() + cell * nl);
    }
    h5::Dataset dw = f.CreateDataset<double>("ridge/" + key + "/weights", {L, K, S, p, m});
    dw.Write(w.data());
    dw.SetAttr(
        "description",
        std::string("[layer, k, seed, feature, output] on raw (unstandardised) hidden states"));
    f.CreateDataset<double>("ridge/" + key + "/intercept", {L, K, S, m}).Write(b.data());
    f.CreateDataset<double>("ridge/" + key + "/lambda", {L, K, S}).Write(lam.data());
    f.CreateDataset<double>("ridge/" + key + "/loo_mse", {L, K, S, nl}).Write(loo.data());
  }
  if (!ridge.empty())
    f.OpenGroup("ridge").SetAttr(
        "lambdas",
        nlohmann::json(std::vector<double>(req.lambdas.begin(), req.lambdas.end())).dump());
  // The prompt splits of the main file, so that others can reproduce the fits.
  for (std::size_t s = 0; s < out.roles.size(); ++s) {
    h5::Dataset d = f.CreateDataset<std::uint8_t>("splits/seed_" + std::to_string(s),
                                                  {hsize_t(out.roles[s].size())});
    d.Write(out.roles[s].data());
    d.SetAttr(
        "description",
        std::string(
            "role of each prompt of the main activations file: 0 train, 1 validation, 2 test"));
  }
  // Pooling weights of gradient probes.
  std::map<std::string, std::vector<const ProbeOutput::Alpha*>> alphas;
  for (const auto& a : out.alphas)
    alphas[a.target + "/" + a.probe + "/" + a.source].push_back(&a);
  for (const auto& [key, list] : alphas) {
    const hsize_t T = list[0]->alpha.n_elem;
    std::vector<double> a(L * K * S * T, NAN);
    for (const auto* x : list) {
      const std::size_t cell = (li(x->layer) * K + ki(x->k)) * S + x->seed;
      std::copy(x->alpha.begin(), x->alpha.end(), a.begin() + cell * T);
    }
    h5::Dataset da = f.CreateDataset<double>("alpha/" + key, {L, K, S, T});
    da.Write(a.data());
    da.SetAttr(
        "description",
        std::string("[layer, k, seed, position]: softmax pooling weights; positions after the "
                    "state after k examples are 0"));
  }
  f.Close();
}

}  // namespace icl::probes
