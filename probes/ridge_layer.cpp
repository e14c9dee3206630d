// The ridge probes of one (source, layer): two streaming passes over the layer's states, the
// training statistics summed over ranks, the online codelength, and the records.
#include <algorithm>
#include <future>
#include <vector>

#include "core/dist.hpp"
#include "probes/runner_internal.hpp"

namespace icl::probes::detail {

namespace {

// Streams this rank's rows of the layer in blocks of r.block_rows, calling f(r0, count, block)
// with the block as stored (float32; the workers convert the positions they use). With more
// than one worker the next block is read on a thread of its own while the workers process this
// one: reading is serial, and was a third of a ridge run's time. The blocks and their order are
// the same either way.
template <class F>
void StreamBlocks(const LayerJob& job, const dist::Range& share, F&& f) {
  const std::int64_t step = job.run.r.block_rows;
  auto read = [&job, &share, step](std::int64_t r0) {
    return job.read(r0, std::min<std::int64_t>(step, share.hi - r0));
  };
  const bool ahead = job.run.pool.size() > 1;
  std::future<arma::fmat> next;  // joined by its destructor when f throws
  if (ahead && share.lo < share.hi) next = std::async(std::launch::async, read, share.lo);
  for (std::int64_t r0 = share.lo; r0 < share.hi; r0 += step) {
    const arma::fmat block = ahead ? next.get() : read(r0);
    if (ahead && r0 + step < share.hi) next = std::async(std::launch::async, read, r0 + step);
    f(r0, std::min<std::int64_t>(step, share.hi - r0), block);
  }
}

// Rows [row0, row0 + rows) of the columns col0 + cols of a float block, as doubles: one pass, in
// place of a submatrix copy, a column selection and a conversion (the same values).
arma::mat GatherColumns(const arma::fmat& block, arma::uword row0, arma::uword rows,
                        const arma::uvec& cols, arma::uword col0 = 0) {
  arma::mat x(rows, cols.n_elem, arma::fill::none);
  for (arma::uword j = 0; j < cols.n_elem; ++j) {
    const float* from = block.colptr(col0 + cols(j)) + row0;
    double* to = x.colptr(j);
    for (arma::uword i = 0; i < rows; ++i)
      to[i] = from[i];
  }
  return x;
}

// The shape of one layer's ridge work. The (k, seed) pairs are numbered i = k index * S + seed;
// the statistics lie flat, features at i * A + a (position a of the request's `at`), targets at
// i * V + v (target variant v), and a code block b of either at (...) * B + b.
struct RidgeGrid {
  int H, K, S, V, A, B;
  std::vector<int> at_index;  // per target variant: its position's index in the request's `at`
};

RidgeGrid GridOf(const LayerJob& job) {
  const ProbeRequest& r = job.run.r;
  RidgeGrid g;
  g.H = job.src.info->hidden;
  g.K = r.ks.size();
  g.S = r.seeds;
  g.V = job.src.variants.size();
  g.A = r.at.size();
  g.B = r.codelength ? int(r.codelength_fractions.size()) : 0;
  for (const Variant& v : job.src.variants)
    g.at_index.push_back(int(std::find(r.at.begin(), r.at.end(), v.at) - r.at.begin()));
  return g;
}

// Pass 1's training sufficient statistics per (k, seed) and position (features) and per target
// variant (targets). Codelength: the same statistics per code block, kept apart, so that the
// probes' own sums are those of a run without it.
struct TrainingStats {
  std::vector<FeatureStats> features, code_features;
  std::vector<TargetStats> targets, code_targets;
};

TrainingStats EmptyStats(const RidgeGrid& g, const std::vector<Variant>& variants) {
  const int K = g.K, S = g.S, A = g.A, V = g.V, B = g.B;
  TrainingStats st;
  st.features.resize(K * S * A);
  st.targets.resize(K * S * V);
  for (int i = 0; i < K * S; ++i) {
    for (int a = 0; a < A; ++a)
      st.features[i * A + a].Init(g.H);
    for (int v = 0; v < V; ++v)
      st.targets[i * V + v].Init(g.H, variants[v].values->dims);
  }
  st.code_features.resize(K * S * A * B);
  st.code_targets.resize(K * S * V * B);
  for (int i = 0; i < K * S; ++i)
    for (int b = 0; b < B; ++b) {
      for (int a = 0; a < A; ++a)
        st.code_features[(i * A + a) * B + b].Init(g.H);
      for (int v = 0; v < V; ++v)
        st.code_targets[(i * V + v) * B + b].Init(g.H, variants[v].values->dims);
    }
  return st;
}

// A block's rows of one role for one seed: positions in the block and prompt indices.
struct Rows {
  arma::uvec loc, glob;
};

// Per seed, the rows of a block [r0, r0 + cnt) that have `role`.
std::vector<Rows> RowsOfRole(const std::vector<std::vector<Role>>& roles, int S, std::int64_t r0,
                             std::int64_t cnt, Role role) {
  std::vector<Rows> out(S);
  for (int s = 0; s < S; ++s) {
    std::vector<arma::uword> loc, glob;
    for (std::int64_t j = 0; j < cnt; ++j)
      if (roles[s][r0 + j] == role) loc.push_back(j), glob.push_back(r0 + j);
    out[s] = {arma::uvec(loc), arma::uvec(glob)};
  }
  return out;
}

// The probed positions of this rank's rows, kept from pass 1 for pass 2 when they fit
// (ridge_keep_bytes): then the file is read once. Pass 2 sees the same floats in the same blocks
// either way. states[ki * A + a]: H x (this rank's rows).
struct KeptStates {
  bool keep = false;
  std::vector<arma::fmat> states;
};

KeptStates KeptStatesFor(const LayerJob& job, const RidgeGrid& g, const dist::Range& share) {
  const std::int64_t here = share.hi - share.lo;
  KeptStates kept;
  kept.keep = static_cast<double>(g.K) * g.A * g.H * here * sizeof(float) <=
              static_cast<double>(job.run.r.ridge_keep_bytes);
  kept.states.resize(kept.keep ? g.K * g.A : 0);
  for (auto& m : kept.states)
    m.set_size(g.H, here);
  return kept;
}

// Copies a block's probed positions into the kept states.
void KeepBlock(const LayerJob& job, const RidgeGrid& g, const dist::Range& share, std::int64_t r0,
               std::int64_t cnt, const arma::fmat& block, KeptStates& kept) {
  const ProbeRequest& r = job.run.r;
  const int A = g.A, H = g.H;
  job.run.pool.For(g.K * A, [&](std::int64_t i) {
    const int pos = ProbePosition(*job.src.info, r.ks[i / A], r.at[i % A]);
    kept.states[i].cols(r0 - share.lo, r0 - share.lo + cnt - 1) =
        block.rows(pos * H, pos * H + H - 1);
  });
}

// Adds training rows x (at position a, of pair i = (k, seed s)) to their code blocks' statistics.
// Training rows come in prompt order, so each code block is a run of them.
void AddCodeBlocks(const LayerJob& job, const RidgeGrid& g, std::int64_t i, std::size_t a, int k,
                   int s, const Rows& rows, const arma::mat& x, TrainingStats& st) {
  const ProbeRequest& r = job.run.r;
  const auto& variants = job.src.variants;
  const int A = g.A, V = g.V, B = g.B;
  const auto& [loc, glob] = rows;
  for (arma::uword j0 = 0; B > 0 && j0 < loc.n_elem;) {
    const int b = job.src.code_block[s][glob(j0)];
    arma::uword j1 = j0 + 1;
    while (j1 < loc.n_elem && job.src.code_block[s][glob(j1)] == b)
      ++j1;
    const arma::span run(j0, j1 - 1);
    st.code_features[(i * A + a) * B + b].Add(x.cols(run));
    for (int v = 0; v < V; ++v)
      if (variants[v].at == r.at[a])
        st.code_targets[(i * V + v) * B + b].Add(x.cols(run),
                                                 variants[v].Y(s, k).cols(glob.subvec(run)));
    j0 = j1;
  }
}

// Pass 1, one worker's part of a block: the training rows of pair i = (k, seed) added to its
// statistics at every position.
void AddTrainingRows(const LayerJob& job, const RidgeGrid& g, std::int64_t i, const Rows& rows,
                     const arma::fmat& block, TrainingStats& st) {
  const ProbeRequest& r = job.run.r;
  const auto& variants = job.src.variants;
  const int A = g.A, V = g.V, H = g.H;
  const int k = r.ks[i / g.S], s = i % g.S;
  const auto& [loc, glob] = rows;
  if (loc.is_empty()) return;
  for (std::size_t a = 0; a < r.at.size(); ++a) {
    const int pos = ProbePosition(*job.src.info, k, r.at[a]);
    const arma::mat x = GatherColumns(block, pos * H, H, loc);
    st.features[i * A + a].Add(x);
    for (int v = 0; v < V; ++v)
      if (variants[v].at == r.at[a]) st.targets[i * V + v].Add(x, variants[v].Y(s, k).cols(glob));
    AddCodeBlocks(job, g, i, a, k, s, rows, x, st);
  }
}

// Pass 1: streams the training statistics of every (k, seed) and target, keeping the probed
// states on the way when they fit; the statistics are then summed over ranks.
TrainingStats StreamTrainingStats(const LayerJob& job, const RidgeGrid& g, const dist::Range& share,
                                  KeptStates& kept) {
  TrainingStats st = EmptyStats(g, job.src.variants);
  dist::Together([&] {
    StreamBlocks(job, share, [&](std::int64_t r0, std::int64_t cnt, const arma::fmat& block) {
      if (kept.keep) KeepBlock(job, g, share, r0, cnt, block, kept);
      const auto train_rows = RowsOfRole(job.src.roles, g.S, r0, cnt, Role::kTrain);
      job.run.pool.For(g.K * g.S, [&](std::int64_t i) {
        AddTrainingRows(job, g, i, train_rows[i % g.S], block, st);
      });
    });
  });
  SumOverRanks(st.features, st.targets);
  return st;
}

// The online codelength of every (k, seed, variant) at i * V + v, from its code blocks'
// statistics (summed over ranks here); empty without codelength.
std::vector<Codelength> RidgeCodelengths(const LayerJob& job, const RidgeGrid& g,
                                         TrainingStats& st) {
  const ProbeRequest& r = job.run.r;
  const int A = g.A, V = g.V, B = g.B;
  std::vector<Codelength> codes(B > 0 ? g.K * g.S * V : 0);
  if (B == 0) return codes;
  SumOverRanks(st.code_features, st.code_targets);
  CodelengthOptions co;
  co.lambdas = r.lambdas.elem(arma::find(r.lambdas > 0));
  co.precision = r.codelength_precision;
  job.run.pool.For(g.K * g.S * V, [&](std::int64_t iv) {
    const int i = int(iv) / V, v = int(iv) % V;
    const auto f0 = st.code_features.begin() + (i * A + g.at_index[v]) * B;
    const auto t0 = st.code_targets.begin() + (i * V + v) * B;
    codes[iv] = RidgeCodelength(std::vector<FeatureStats>(f0, f0 + B),
                                std::vector<TargetStats>(t0, t0 + B), co);
  });
  return codes;
}

// One ridge probe per (k, seed, variant) at i * V + v, begun on its training statistics; the
// variants read at one position share its prepared eigendecomposition.
std::vector<RidgeProbe> BeginProbes(const LayerJob& job, const RidgeGrid& g,
                                    const TrainingStats& st) {
  const ProbeRequest& r = job.run.r;
  const int A = g.A, V = g.V;
  std::vector<RidgeProbe> probes;
  probes.reserve(g.K * g.S * V);
  for (int i = 0; i < g.K * g.S * V; ++i)
    probes.emplace_back(r.lambdas);
  job.run.pool.For(g.K * g.S, [&](std::int64_t i) {
    for (int a = 0; a < A; ++a) {
      RidgeProbe base(r.lambdas);
      base.Prepare(st.features[i * A + a]);
      for (int v = 0; v < V; ++v)
        if (g.at_index[v] == a) {
          probes[i * V + v] = base;
          probes[i * V + v].Begin(st.targets[i * V + v]);
        }
    }
  });
  return probes;
}

// Where the block's states at position a after k = ks[ki] examples lie: a float matrix, its
// first row and the column of the block's first prompt (H rows, one column per prompt).
struct StatesAt {
  const arma::fmat* m;
  arma::uword row0, col0;
};

// Pass 2 over one block [r0, r0 + cnt): leave-one-out errors on its training rows, held-out
// errors on its test rows; `states(ki, a)` gives a StatesAt.
template <class States>
void AccumulateBlockErrors(const LayerJob& job, const RidgeGrid& g, std::int64_t r0,
                           std::int64_t cnt, const States& states,
                           std::vector<RidgeProbe>& probes) {
  const ProbeRequest& r = job.run.r;
  const auto& variants = job.src.variants;
  const int S = g.S, A = g.A, V = g.V, H = g.H;
  const auto train_rows = RowsOfRole(job.src.roles, S, r0, cnt, Role::kTrain);
  const auto test_rows = RowsOfRole(job.src.roles, S, r0, cnt, Role::kTest);
  job.run.pool.For(g.K * S, [&](std::int64_t i) {
    const int ki = int(i) / S, k = r.ks[ki], s = i % S;
    const auto& [tl, tg] = train_rows[s];
    const auto& [hl, hg] = test_rows[s];
    for (int a = 0; a < A; ++a) {
      const StatesAt at = states(ki, a);
      const arma::mat train = GatherColumns(*at.m, at.row0, H, tl, at.col0);
      const arma::mat held = GatherColumns(*at.m, at.row0, H, hl, at.col0);
      for (int v = 0; v < V; ++v) {
        if (g.at_index[v] != a) continue;
        const arma::mat& y = variants[v].Y(s, k);
        if (!tl.is_empty()) probes[i * V + v].AccumulateLoo(train, y.cols(tg));
        if (!hl.is_empty())
          probes[i * V + v].AccumulateHeldOut(held, variants[v].values->values[k - 1].cols(hg));
      }
    }
  });
}

// Pass 2: the leave-one-out and held-out errors of every probe, from the kept states when they
// fit, else streamed from the layer again.
void StreamErrors(const LayerJob& job, const RidgeGrid& g, const dist::Range& share,
                  const KeptStates& kept, std::vector<RidgeProbe>& probes) {
  const ProbeRequest& r = job.run.r;
  const int A = g.A;
  dist::Together([&] {
    if (kept.keep) {
      for (std::int64_t r0 = share.lo; r0 < share.hi; r0 += r.block_rows) {
        const std::int64_t cnt = std::min<std::int64_t>(r.block_rows, share.hi - r0);
        AccumulateBlockErrors(
            job, g, r0, cnt,
            [&](int ki, int a) {
              return StatesAt{&kept.states[ki * A + a], 0, arma::uword(r0 - share.lo)};
            },
            probes);
      }
      return;
    }
    StreamBlocks(job, share, [&](std::int64_t r0, std::int64_t cnt, const arma::fmat& block) {
      AccumulateBlockErrors(
          job, g, r0, cnt,
          [&](int ki, int a) {
            const int pos = ProbePosition(*job.src.info, r.ks[ki], r.at[a]);
            return StatesAt{&block, arma::uword(pos) * g.H, 0};
          },
          probes);
    });
  });
}

// Each probe's lambda chosen, its test error against the real targets (the shuffle control is
// fit on permuted ones), and its record, codelength and weights kept.
void RecordRidgeProbes(const LayerJob& job, const RidgeGrid& g, std::vector<RidgeProbe>& probes,
                       const std::vector<Codelength>& codes) {
  const ProbeRequest& r = job.run.r;
  const auto& variants = job.src.variants;
  const int S = g.S, V = g.V;
  for (int i = 0; i < g.K * S; ++i) {
    const int k = r.ks[i / S], s = i % S;
    for (int v = 0; v < V; ++v) {
      RidgeProbe& p = probes[i * V + v];
      p.Select();
      const arma::mat yt = variants[v].values->values[k - 1].cols(job.src.test[s]);
      arma::mat c = yt;
      c.each_col() -= arma::vec(arma::mean(yt, 1));
      Errors e;
      e.sse = p.held_out_sse();
      e.row_sse = p.held_out_row_sse();
      e.row_sst = arma::sum(arma::square(c), 0).t();
      e.sst = arma::accu(e.row_sst);
      e.rows = yt.n_cols;
      e.dims = yt.n_rows;
      const Codelength* code = g.B > 0 ? &codes[i * V + v] : nullptr;
      job.run.Record(job.src, job.layer, variants[v].target, Family::kRidge, k, s, e, p.lambda(), 0,
                     code);
      if (code)
        job.run.Keep(ProbeOutput::Code{variants[v].target, job.src.name, job.layer, k, s, *code});
      job.run.Keep(ProbeOutput::Ridge{variants[v].target, job.src.name, job.layer, k, s, p.lambda(),
                                      p.weights(), p.intercept(), p.loo_mse(), p.feature_scale()});
    }
  }
}

}  // namespace

// Ridge probes of one layer: pass 1 streams the training statistics of every (k, seed) and
// target; the lambda sweep follows from one eigendecomposition each; pass 2 streams the
// leave-one-out and held-out errors.
void RidgeOverLayer(const LayerJob& job) {
  const RidgeGrid g = GridOf(job);
  // Under mpirun each rank streams its own share of the rows; the statistics are summed over
  // ranks, and every rank then holds the same probes (rank 0 writes them).
  // A rank that fails reading its rows (a damaged file, a NaN) stops every rank.
  const dist::Range share = dist::Share(job.src.info->prompts);
  KeptStates kept = KeptStatesFor(job, g, share);
  TrainingStats st = StreamTrainingStats(job, g, share, kept);
  const std::vector<Codelength> codes = RidgeCodelengths(job, g, st);
  std::vector<RidgeProbe> probes = BeginProbes(job, g, st);
  StreamErrors(job, g, share, kept, probes);
  for (auto& p : probes)
    p.CombineRanks();
  RecordRidgeProbes(job, g, probes, codes);
  job.run.Advance(g.K);
}

}  // namespace icl::probes::detail
