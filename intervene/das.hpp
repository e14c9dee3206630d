// Distributed alignment search (iclprobe das): is there an m-dimensional subspace of layer l's
// state whose interchange from prompt B into prompt A makes the model output what an algorithm
// says it should with B's value of a quantity (its weights w, or X'y) and A's everything else?
// The subspace is learned (an orthogonal map kept orthogonal by construction), scored by
// interchange-intervention accuracy on held-out pairs, against a random subspace of the same
// size. This file owns the DAS file: its writer and reader, through its schema
// (formats::DasSchema()).
#pragma once

#include <armadillo>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "data/task.hpp"
#include "formats/schemas.hpp"
#include "learners/transformer.hpp"

namespace icl::intervene {

inline constexpr const char* kDasFormat = formats::kDasFormat;

// Where the subspace is interchanged, for k examples: the query (the x-token of example k+1,
// position 2k), the y-token of example k (2k - 1), or every context position (0..2k-1).
enum class DasPosition { kQuery, kYToken, kContext };
std::string DasPositionName(DasPosition p);  // "query", "y-token", "context"
// DasPositionName's inverse; core::InputError (setting "position") for any other name, its
// message led by `where` (the module, or the file the name was read from).
DasPosition ParseDasPosition(const std::string& name, const std::string& where = "das");

// A named subspace of the state (orthonormal columns, H x r) to measure the learned one against,
// e.g. the rows a construction keeps a quantity in (after its rotation).
struct NamedSubspace {
  std::string name;
  arma::mat basis;
};

// Where the search starts. From random subspaces the interchange loss has poor local optima: on
// the rotated gd construction, three of three random starts ended at IIA 0.19-0.26 with most of
// X'y's subspace missed (a direction of state differences that the output does not read must
// turn through ones it reads, which mix large differences into the product). The ridge probe's
// directions (the quantity read linearly, das_interchange.cpp) start in the quantity's span;
// the training then follows the interchange loss alone. The angle to the probe is then a
// distance travelled from the start, not independent evidence; `random` starts from a random
// rotation.
enum class DasStart { kProbe, kRandom };
std::string DasStartName(DasStart s);  // "probe", "random"
// DasStartName's inverse; core::InputError (setting "start") for any other name.
DasStart ParseDasStart(const std::string& name);

struct DasRequest {
  // The swapped quantity and the algorithm that says what it does:
  //   w    A's query with B's weights: x_A^T w_alg(B's first k examples); any linear learner;
  //   xty  the algorithm on A's X'X and B's X'y: ols (every k >= d + 2, where X'X is invertible
  //        with room to spare: at k <= d an OLS response to a changed X'y is off every prompt's
  //        manifold), ridge:LAMBDA, bayes or gd:ALPHA[:STEPS].
  std::string quantity = "w";
  std::string algorithm = "ols";
  DasPosition position = DasPosition::kQuery;
  DasStart start = DasStart::kProbe;
  std::vector<int> layers;  // states 0..L; empty: all
  std::vector<int> ms;      // subspace sizes, each in 1..H; empty: 1, 2, d/2, d, 2d (<= H)
  std::vector<int> ks;      // each in 1..n-1; empty: every k the algorithm allows
  int train_pairs = 10000;  // pair p is prompts (2p, 2p+1) of the stream `seed`
  int test_pairs = 1000;    // the same of the stream seed + 1
  std::uint64_t seed = 11;
  int max_epochs = 30;
  double tolerance = 0.001;  // stop when the held-out IIA gains less than this over an epoch
  double learning_rate = 0.001;
  int batch = 128;
  int bootstrap = 1000;
  std::vector<NamedSubspace> subspaces;  // extra subspaces to report principal angles to
  // When not empty (H x m, orthonormal columns, m the only size requested): the start itself,
  // instead of `start` (a known start, to test that the training finds its way from there).
  arma::mat start_basis;
  void Validate() const;
};

// Interchange-intervention accuracy: for held-out pairs (A, B) and each k, o = the model's output
// at A's query with the subspace of A's state at the positions replaced by B's, t = the
// algorithm's counterfactual output; IIA = 1 - sum (o - t)^2 / sum (t - mean t)^2 per k, and pooled
// over k (both sums over pairs and k, the mean per k), with 95% percentile bootstrap intervals
// over pairs (undefined, NaN, when a resample of the test pairs has no spread in t: few pairs,
// file_common.hpp's SpreadRatio). References per layer: "none" (no interchange: A's own output) and
// "full" (the whole state at the positions interchanged, m = H).
struct DasResult {
  DasRequest request;
  data::TaskConfig task;
  std::string checkpoint, checkpoint_sha256;
  std::vector<int> layers, ms, ks;
  std::vector<std::string> subspace_names;  // "probe", then request.subspaces' names
  // [layer, m] as matrices of rows layers, cols ms (pooled over k):
  arma::mat iia, iia_lo, iia_hi, random_iia, random_iia_lo, random_iia_hi, epochs;
  arma::cube iia_k, random_iia_k;  // [layer, m, k]: rows layers, cols ms, slices ks
  // Per layer: no interchange and the full state's, pooled; the ridge probe's R2 (train pairs).
  arma::vec none_iia, none_iia_lo, none_iia_hi, full_iia, full_iia_lo, full_iia_hi, probe_r2;
  // The ceiling (w only): the IIA of the model's own output on the prompt the counterfactual
  // stands for (B's first k examples, then A's query) against the algorithm's; no interchange
  // can make the model agree with the algorithm better than the model itself does on that
  // prompt. NaN for xty (no prompt has A's X'X and B's X'y).
  double ceiling_iia = arma::datum::nan, ceiling_iia_lo = arma::datum::nan,
         ceiling_iia_hi = arma::datum::nan;
  // Principal angles (degrees) between the learned subspace and each named one:
  // [layer, m, subspace] as cubes of rows layers, cols ms, slices subspaces.
  arma::cube angle_min, angle_max;
  // The IIA of each named subspace itself interchanged (the probe's directions, a construction's
  // rows): [layer, subspace] as matrices of rows layers, cols subspaces, pooled over k.
  arma::mat subspace_iia, subspace_iia_lo, subspace_iia_hi;
  // The learned subspaces: bases[li * ms.size() + mi] is H x m with orthonormal columns.
  std::vector<arma::mat> bases;
};

// Checks the request against the model and its task before any work (a layer the model lacks,
// m above its width, a k whose query does not exist, an algorithm that cannot produce the
// swapped quantity; throws core::InputError naming the setting), then learns and scores the
// subspaces. `model`'s parameters are not changed.
DasResult RunDas(learners::Transformer model, const std::string& checkpoint_sha256,
                 const data::TaskConfig& task, const DasRequest& request,
                 const std::function<void(const std::string& what)>& progress = {});

// The algorithm's counterfactual outputs for pairs (a, b) of `task`: column ki holds, per pair,
// the output at A's x_{k+1} with B's quantity (DasRequest); P x K.
arma::mat DasTargets(const DasRequest& request, const data::TaskConfig& task,
                     const std::vector<int>& ks, const data::PromptSet& a,
                     const data::PromptSet& b);

// Principal angles (degrees, ascending) between the column spaces of two orthonormal bases.
arma::vec PrincipalAngles(const arma::mat& u, const arma::mat& v);

// The file: root attributes (format, created_by, checkpoint, checkpoint_sha256, quantity,
// algorithm, position, start, seed, train_pairs, test_pairs, max_epochs, tolerance, learning_rate,
// batch, bootstrap_replicates, task_config, layers, ms, ks, subspaces, rule) and
//   /iia, /iia_lo, /iia_hi, /random_iia(_lo, _hi), /epochs     [layer, m]
//   /iia_k, /random_iia_k                                      [layer, m, k]
//   /none_iia(_lo, _hi), /full_iia(_lo, _hi), /probe_r2        [layer]
//   /angle_min, /angle_max                                     [layer, m, subspace]
//   /subspace_iia(_lo, _hi)                                    [layer, subspace]
//   /ceiling_iia(_lo, _hi)                  [1] (quantity w only)
//   /bases/state_L_m_M                                         [M, H] (row i: basis vector i)
// The bounds (*_lo, *_hi) may be NaN, undefined, as their attribute 'undefined' says; every
// other value is finite.
void WriteDasFile(const std::string& path, const DasResult& result);
// Reads and checks one (shapes as the attributes say, names plain, every value finite but the
// undefined bounds, bases orthonormal).
DasResult ReadDasFile(const std::string& path);
// The tidy CSV: quantity,algorithm,position,layer,m,k,test_pairs,iia,iia_lo,iia_hi,random_iia,
// random_iia_lo,random_iia_hi,none_iia,full_iia,epochs,probe_r2,ceiling_iia (w only), then
// angle_max_<name> per
// subspace; k = "pooled" rows hold the summaries over every k. An undefined bound is an empty
// cell.
void WriteDasCsv(std::ostream& os, const DasResult& result);
// A short table on stdout: per layer and m, the pooled IIA with its interval, the random
// subspace's, and the largest angle to each named subspace.
void PrintDasSummary(std::ostream& os, const DasResult& result);

}  // namespace icl::intervene
