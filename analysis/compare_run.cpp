// The compare pipeline: references on each learner's task, SPD, implicit weights, ILWD.
#include "analysis/compare_run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>

#include "data/errors.hpp"
#include "learners/trainer.hpp"

namespace icl::analysis {

namespace {

double MeanRange(const arma::vec& v, arma::uword lo, arma::uword hi) {  // mean of v[lo, hi)
  if (hi <= lo || v.is_empty()) return arma::datum::nan;
  return arma::mean(v.subvec(lo, std::min<arma::uword>(hi, v.n_elem) - 1));
}

std::string Cell(double v, bool best) {
  if (std::isnan(v)) return fmt::format("{:>11}", "-");
  return fmt::format("{:>10.3e}{}", v, best ? '*' : ' ');
}

// Reference learners on one task: predictions n x N and, for linear ones, weights d x n x P.
struct References {
  data::PromptSet set;
  std::vector<std::unique_ptr<learners::ClassicalLearner>> learners;
  std::vector<arma::mat> pred;
  std::vector<arma::cube> w;
};

References MakeReferences(const data::TaskConfig& t, const CompareRequest& req, int contexts) {
  References r;
  r.set = data::SamplePrompts(t, req.seed, 0, req.prompts);
  r.learners = learners::MakeLearners(req.learner_specs, t);
  for (const auto& l : r.learners) {
    arma::mat pred(t.n, req.prompts);
    arma::cube w(t.d, t.n, l->is_linear() ? contexts : 0);
    learners::LearnerRun run;
    for (int i = 0; i < req.prompts; ++i) {
      l->Run(r.set.x.slice(i), r.set.y.col(i), run);
      pred.col(i) = run.predictions;
      if (l->is_linear() && i < contexts) w.slice(i) = run.weights;
    }
    r.pred.push_back(std::move(pred));
    r.w.push_back(std::move(w));
  }
  return r;
}

}  // namespace

LearnerUnderTest TransformerUnderTest(const std::string& name, const data::TaskConfig& task,
                                      learners::Transformer model) {
  LearnerUnderTest l;
  l.name = name;
  l.task = task;
  l.predict = [model](const data::PromptSet& set) mutable {
    return learners::TransformerPredictions(model, set);
  };
  l.query = [model](const data::PromptSet& set, std::size_t i, const arma::cube& q) mutable {
    return learners::QueryPredictionsAllK(model, set, i, q);  // one forward pass per context
  };
  return l;
}

LearnerUnderTest ClassicalUnderTest(const std::string& name, const data::TaskConfig& task,
                                    std::shared_ptr<const learners::ClassicalLearner> learner) {
  if (!learner->is_linear())
    throw std::invalid_argument("compare: '" + learner->spec() +
                                "' is not linear; only linear learners answer queries here");
  LearnerUnderTest l;
  l.name = name;
  l.task = task;
  l.predict = [learner](const data::PromptSet& set) {
    arma::mat p(set.task.n, set.size());
    learners::LearnerRun run;
    for (std::size_t i = 0; i < set.size(); ++i) {
      learner->Run(set.x.slice(i), set.y.col(i), run);
      p.col(i) = run.predictions;
    }
    return p;
  };
  l.query = [learner](const data::PromptSet& set, std::size_t i, const arma::cube& q) {
    learners::LearnerRun run;
    learner->Run(set.x.slice(i), set.y.col(i), run);  // run.weights: d x n, after k = 0..n-1
    arma::mat out(q.n_cols, q.n_slices);
    for (arma::uword k = 0; k < q.n_slices; ++k)
      out.col(k) = q.slice(k).t() * run.weights.col(k);
    return out;
  };
  return l;
}

void CompareRequest::Validate(int d) const {
  if (prompts < 1) throw data::InputError("compare", "prompts", "must be positive");
  if (ilwd_prompts < 1) throw data::InputError("compare", "ilwd_prompts", "must be positive");
  if (queries != 0 && queries < d + 1)
    throw data::InputError("compare", "queries",
                           "the implicit-weight fit needs at least d+1 = " + std::to_string(d + 1) +
                               " query points, got " + std::to_string(queries));
}

CompareResult RunCompare(const std::vector<LearnerUnderTest>& models, const CompareRequest& req,
                         const std::function<void(long long, long long)>& progress) {
  if (models.empty()) throw std::invalid_argument("compare: no learner to compare");
  CompareResult out;
  out.d = models[0].task.d;
  out.n = models[0].task.n;
  req.Validate(out.d);
  for (const auto& m : models)
    if (m.task.d != out.d || m.task.n != out.n)
      throw std::invalid_argument("compare: '" + m.name + "' reads d=" + std::to_string(m.task.d) +
                                  ", n=" + std::to_string(m.task.n) + " but '" + models[0].name +
                                  "' reads d=" + std::to_string(out.d) +
                                  ", n=" + std::to_string(out.n));
  learners::MakeLearners(req.learner_specs, models[0].task);  // checks the specs before work
  const int d = out.d, n = out.n;
  out.prompts = req.prompts;
  out.seed = req.seed;
  out.queries = req.queries == 0 ? 2 * (d + 1) : req.queries;
  out.contexts = std::min(req.ilwd_prompts, req.prompts);
  const int P = out.contexts, Q = out.queries;
  const long long total = static_cast<long long>(models.size()) * P;
  for (std::size_t c = 0; c < models.size(); ++c) {
    const auto& m = models[c];
    out.models.push_back(m.name);
    out.tasks.push_back(m.task);
    const References ref = MakeReferences(m.task, req, P);
    const arma::mat pred = m.predict(ref.set);
    arma::cube w(d, n, P);
    arma::mat r2(n, P);
    for (int i = 0; i < P; ++i) {
      arma::cube q(d, Q, n);
      for (int k = 0; k < n; ++k)
        q.slice(k) = QueryPoints(d, Q, req.seed, std::uint64_t(i) * n + k);
      const arma::mat yhat = m.query(ref.set, i, q);
      for (int k = 0; k < n; ++k) {
        const auto fit = FitImplicitWeights(q.slice(k), yhat.col(k));
        w.slice(i).col(k) = fit.w;
        r2(k, i) = fit.r2;
      }
      if (progress) progress(static_cast<long long>(c) * P + i + 1, total);
    }
    out.implicit_r2.push_back(r2);
    for (std::size_t j = 0; j < ref.learners.size(); ++j)
      out.entries.push_back({m.name, ref.learners[j]->spec(), Spd(pred, ref.pred[j], d),
                             ref.learners[j]->is_linear() ? Ilwd(w, ref.w[j]) : arma::vec()});
  }
  if (req.all_pairs) {
    const References ref = MakeReferences(models[0].task, req, P);
    const auto& L = ref.learners;
    for (std::size_t a = 0; a < L.size(); ++a)
      for (std::size_t b = a + 1; b < L.size(); ++b)
        out.entries.push_back(
            {L[a]->spec(), L[b]->spec(), Spd(ref.pred[a], ref.pred[b], d),
             L[a]->is_linear() && L[b]->is_linear() ? Ilwd(ref.w[a], ref.w[b]) : arma::vec()});
    for (const auto& l : L)
      if (std::find(out.models.begin(), out.models.end(), l->spec()) == out.models.end())
        out.models.push_back(l->spec());
  }
  return out;
}

void WriteCompareCsv(std::ostream& os, const CompareResult& r) {
  os << "model,learner,k,spd,spd_lo,spd_hi,ilwd\n";
  for (const auto& e : r.entries)
    for (arma::uword k = 0; k < e.spd.mean.n_elem; ++k)
      os << fmt::format("{},{},{},{:.9g},{:.9g},{:.9g},{}\n", e.model, e.learner, k, e.spd.mean(k),
                        e.spd.lo(k), e.spd.hi(k),
                        e.ilwd.is_empty() ? std::string() : fmt::format("{:.9g}", e.ilwd(k)));
}

void WriteLinearityCsv(std::ostream& os, const CompareResult& r) {
  os << "model,k,r2,contexts\n";
  for (std::size_t c = 0; c < r.implicit_r2.size(); ++c)
    for (arma::uword k = 0; k < r.implicit_r2[c].n_rows; ++k) {
      const arma::rowvec row = r.implicit_r2[c].row(k);
      const arma::uvec ok = arma::find_finite(row);
      os << fmt::format("{},{},{},{}\n", r.models[c], k,
                        ok.is_empty()
                            ? std::string()
                            : fmt::format("{:.9g}", arma::mean(arma::rowvec(row.cols(ok)))),
                        ok.n_elem);
    }
}

void PrintCompareSummary(std::ostream& os, const CompareResult& r, const std::string& specs) {
  const int d = r.d;
  os << fmt::format(
      "compare: d={} n={}, {} prompts (seed {}) of each checkpoint's task, ILWD on {} contexts x "
      "{} queries; values are divided by d\n",
      d, r.n, r.prompts, r.seed, r.contexts, r.queries);
  for (std::size_t c = 0; c < r.models.size(); ++c) {
    std::vector<const CompareEntry*> rows;
    for (const auto& e : r.entries)
      if (e.model == r.models[c]) rows.push_back(&e);
    if (rows.empty()) continue;
    std::array<std::vector<double>, 4> cols;
    for (const auto* e : rows) {
      cols[0].push_back(MeanRange(e->spd.mean, 0, d));
      cols[1].push_back(arma::mean(e->spd.mean));
      cols[2].push_back(MeanRange(e->ilwd, 0, d));
      cols[3].push_back(e->ilwd.is_empty() ? arma::datum::nan : arma::mean(e->ilwd));
    }
    std::array<double, 4> best;
    for (int j = 0; j < 4; ++j) {
      best[j] = arma::datum::inf;
      for (double v : cols[j])
        if (!std::isnan(v)) best[j] = std::min(best[j], v);
    }
    const std::string noise = c < r.tasks.size() ? fmt::format(" (noise {:g}, w_scale {:g})",
                                                               r.tasks[c].noise, r.tasks[c].w_scale)
                                                 : "";
    os << fmt::format("\n{}{} against:\n{:<16}{:>11}{:>11}{:>11}{:>11}\n", r.models[c], noise,
                      "learner", "SPD k<d", "SPD all k", "ILWD k<d", "ILWD all k");
    for (std::size_t i = 0; i < rows.size(); ++i) {
      os << fmt::format("{:<16}", rows[i]->learner);
      for (int j = 0; j < 4; ++j)
        os << Cell(cols[j][i], cols[j][i] == best[j]);
      os << "\n";
    }
    if (c < r.implicit_r2.size()) {
      os << "implicit linear fit R2 by k (mean over contexts):";
      for (arma::uword k = 0; k < r.implicit_r2[c].n_rows; ++k) {
        const arma::rowvec row = r.implicit_r2[c].row(k);
        const arma::uvec ok = arma::find_finite(row);
        os << fmt::format(
            " {}", ok.is_empty() ? std::string("-")
                                 : fmt::format("{:.3f}", arma::mean(arma::rowvec(row.cols(ok)))));
      }
      os << "\n";
    }
  }
  os << "* = closest learner in that column\n";
  if (r.tasks.size() > 1) {
    // The paper's noisy-regime layout: rows = reference learners, columns = learners under
    // test, mean SPD over k.
    os << fmt::format(
        "\nmean SPD over k (rows: learners, columns: checkpoints; * = column minimum)\n{:<16}", "");
    for (std::size_t c = 0; c < r.tasks.size(); ++c)
      os << fmt::format("{:>24}", r.models[c].substr(0, 23));
    os << "\n";
    for (const auto& l : learners::MakeLearners(specs, r.tasks[0])) {
      os << fmt::format("{:<16}", l->spec());
      for (std::size_t c = 0; c < r.tasks.size(); ++c) {
        double v = 0, best = arma::datum::inf;
        for (const auto& e : r.entries)
          if (e.model == r.models[c]) {
            const double m = arma::mean(e.spd.mean);
            best = std::min(best, m);
            if (e.learner == l->spec()) v = m;
          }
        os << fmt::format("{:>23.3e}{}", v, v == best ? '*' : ' ');
      }
      os << "\n";
    }
  }
}

}  // namespace icl::analysis
