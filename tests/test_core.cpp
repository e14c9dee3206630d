// core/: the spec parser, whole-string numbers, the thread pool and the error kinds.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "core/errors.hpp"
#include "core/json.hpp"
#include "core/spec.hpp"
#include "core/thread_pool.hpp"
#include "tests/test_util.hpp"

namespace icl {

TEST(Spec, SplitsNameAndArgumentsKeepingEmptyParts) {
  const core::Spec s = core::ParseSpec(" gd:0.01:3 ");
  EXPECT_EQ(s.text, "gd:0.01:3");
  EXPECT_EQ(s.name, "gd");
  ASSERT_EQ(s.args.size(), 2u);
  EXPECT_EQ(*s.Number(0), 0.01);
  EXPECT_EQ(*s.Integer(1, 1, 1000), 3);
  EXPECT_FALSE(s.Integer(1, 4, 1000));  // out of range
  EXPECT_FALSE(s.Number(2));            // no such argument
  EXPECT_TRUE(core::ParseSpec("ols").args.empty());
  EXPECT_EQ(core::ParseSpec("gd:").args, (std::vector<std::string>{""}));
  EXPECT_EQ(core::ParseSpec("knn:3:weighted").args, (std::vector<std::string>{"3", "weighted"}));
}

TEST(Spec, NumbersAreWholeStringsAndFinite) {
  EXPECT_EQ(*core::ParseNumber("1e-3"), 1e-3);
  EXPECT_EQ(*core::ParseNumber("-2.5"), -2.5);
  for (const char* bad : {"", "1x", "1 ", "inf", "nan", "1e999", "0x", ","})
    EXPECT_FALSE(core::ParseNumber(bad)) << bad;
  EXPECT_EQ(*core::ParseInteger("42", 0, 100), 42);
  for (const char* bad : {"", "3.0", "1e3", "12a", "99999999999999999999"})
    EXPECT_FALSE(core::ParseInteger(bad, -1000000, 1000000)) << bad;
  EXPECT_FALSE(core::ParseInteger("101", 0, 100));
}

// Every index runs exactly once whatever the pool's size, and the first error comes back after
// all have run.
TEST(ThreadPool, RunsEveryIndexOnceAndRethrowsTheFirstError) {
  for (int threads : {1, 2, 5}) {
    core::ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    std::vector<std::atomic<int>> hits(1000);
    for (int round = 0; round < 3; ++round)
      pool.For(1000, [&](std::int64_t i) { hits[std::size_t(i)]++; });
    for (const auto& h : hits)
      EXPECT_EQ(h.load(), 3) << threads;
    std::atomic<int> ran{0};
    EXPECT_THROW(pool.For(50,
                          [&](std::int64_t i) {
                            ran++;
                            if (i == 7) throw std::runtime_error("seven");
                          }),
                 std::runtime_error);
    EXPECT_EQ(ran.load(), 50) << threads;
    pool.For(0, [](std::int64_t) { FAIL(); });
  }
}

// A fault in a file is an InputError with no setting, prefixed by the file's description; a
// caller's bug (a pool of no threads) is a logic_error, which the CLI does not call bad input.
TEST(InputError, FileFaultsNameTheFileAndNoSetting) {
  try {
    core::json::Parse("{\"d\": ", "checkpoint 'a.h5' model_config");
    ADD_FAILURE() << "truncated JSON was accepted";
  } catch (const core::InputError& e) {
    EXPECT_EQ(e.field(), "");
    EXPECT_EQ(e.module(), "checkpoint 'a.h5' model_config");
    EXPECT_EQ(std::string(e.what()).rfind("checkpoint 'a.h5' model_config: not valid JSON", 0), 0u)
        << e.what();
  }
  EXPECT_TRUE(test::ThrowsInternalError([] { core::ThreadPool pool(0); }));
}

}  // namespace icl
