// Token layout: [0, x_j] then [y_j, 0_d], the same through the Armadillo and torch views.
#include <gtest/gtest.h>

#include "data/tokens.hpp"
#include "data/tokens_torch.hpp"
#include "tests/test_util.hpp"

using namespace icl::data;

TEST(Tokens, InterleavedLayoutAsInDesign) {
  TaskConfig t;
  t.d = 3;
  t.n = 4;
  const PromptSet s = SamplePrompts(t, 1, 0, 2);
  const arma::fmat m = TokenMatrix(s, 0, 2);
  ASSERT_EQ(m.n_rows, 4u);
  ASSERT_EQ(m.n_cols, 2u * 2 * 4);
  for (int p = 0; p < 2; ++p) {
    for (int j = 0; j < 4; ++j) {
      const arma::fvec xt = m.col(p * 8 + XTokenPos(j));
      const arma::fvec yt = m.col(p * 8 + XTokenPos(j) + 1);
      EXPECT_EQ(xt(0), 0.0f);
      for (int i = 0; i < 3; ++i)
        EXPECT_EQ(xt(1 + i), static_cast<float>(s.x(i, j, p)));
      EXPECT_EQ(yt(0), static_cast<float>(s.y(j, p)));
      for (int i = 0; i < 3; ++i)
        EXPECT_EQ(yt(1 + i), 0.0f);
    }
  }
  EXPECT_EQ(AfterKPos(1), 1);  // y-token of example 1
  EXPECT_EQ(AfterKPos(4), 7);
}

TEST(Tokens, TorchViewEqualsArmadilloView) {
  TaskConfig t;
  t.d = 5;
  t.n = 6;
  const PromptSet s = SamplePrompts(t, 2, 0, 3);
  const arma::fmat m = TokenMatrix(s, 1, 2);
  const torch::Tensor tt = TokenTensor(s, 1, 2);
  ASSERT_EQ(tt.sizes(), (std::vector<int64_t>{2, 12, 6}));
  const auto a = tt.accessor<float, 3>();
  for (int p = 0; p < 2; ++p)
    for (int pos = 0; pos < 12; ++pos)
      for (int c = 0; c < 6; ++c)
        EXPECT_EQ(a[p][pos][c], m(c, p * 12 + pos));
}

TEST(Tokens, FewerExamplesAndBadRanges) {
  TaskConfig t;
  t.d = 2;
  t.n = 5;
  const PromptSet s = SamplePrompts(t, 3, 0, 2);
  EXPECT_EQ(TokenMatrix(s, 0, 1, 3).n_cols, 6u);
  EXPECT_TRUE(icl::test::ThrowsInternalError([&] { TokenMatrix(s, 0, 1, 6); }));
  EXPECT_THROW(TokenMatrix(s, 1, 2), std::out_of_range);
}
