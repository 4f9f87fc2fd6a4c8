// Command-line overrides are applied before the cross-field checks, which then run once:
// a file that only makes sense with its overrides loads, and an override that breaks the
// experiment is named as coming from the command line.
#include <gtest/gtest.h>

#include "experiment/config_cases.hpp"
#include "experiment/experiment.hpp"
#include "support/run_config.hpp"

namespace bmpipe {
namespace {

using test::config_error;
using test::has;
using test::kUnit;
using test::with;

// The bug report: pp 4 in the file, 2 layers, run with --pp 2.
const std::string kTwoLayersPp4 = with("count: 8", "count: 2");

TEST(Overrides, FileValidOnlyWithItsOverrideLoads) {
  // Without the override the file is impossible, and says why.
  const ConfigError e = config_error(kTwoLayersPp4);
  EXPECT_EQ(e.key(), "training.pp");
  EXPECT_TRUE(has(e.message(), "2 layers cannot fill 4 stages"));
  Overrides o;
  o.pp = 2;
  const Config c = parse_config(kTwoLayersPp4, "exp.yaml", o);
  EXPECT_EQ(c.training.pp, 2);
  EXPECT_EQ(c.lines.at("training.pp"), 0);  // from the command line
  // And it runs: 2 stages of one 0.5 ms layer each.
  const test::Prepared run = test::prepare_run(c);
  const SimInput& in = run.input;
  ASSERT_EQ(in.stages.size(), 2u);
  EXPECT_EQ(in.stages[0].forward, 500'000);
  EXPECT_TRUE(simulate(in, run.schedule).ok);
}

TEST(Overrides, LoadConfigTakesThemToo) {
  Overrides o;
  o.pp = 2;
  o.microbatches = 3;
  o.schedule = "gpipe";
  // tiny.yaml is 8 layers, pp 4: with the overrides 2 stages of 4 layers.
  const Config c = load_config(std::string(BMPIPE_SOURCE_DIR) + "/configs/examples/tiny.yaml", o);
  EXPECT_EQ(c.training.pp, 2);
  EXPECT_EQ(c.training.microbatches, 3);
  EXPECT_EQ(c.training.schedule, "gpipe");
}

TEST(Overrides, OverrideThatBreaksTheFileIsNamedAsCommandLine) {
  Overrides o;
  o.pp = 3;
  const ConfigError e = config_error(kUnit, o);
  EXPECT_EQ(e.key(), "training.pp (from the command line)");
  EXPECT_EQ(e.line(), 0);
  EXPECT_TRUE(has(e.message(), "does not divide the 4 devices"));
  Overrides zero;
  zero.microbatches = 0;
  const ConfigError z = config_error(kUnit, zero);
  EXPECT_EQ(z.key(), "--microbatches");
  EXPECT_EQ(z.message(), "must be at least 1, got 0");
}

TEST(Overrides, MicrobatchesOverrideWinsOverGlobalBatch) {
  const std::string gbs = with("  microbatches: 8\n", "  global_batch_size: 8\n");
  EXPECT_EQ(parse_config(gbs, "exp.yaml").training.microbatches, 8);  // dp 1, mbs 1
  Overrides o;
  o.microbatches = 5;
  const Config c = parse_config(gbs, "exp.yaml", o);
  EXPECT_EQ(c.training.microbatches, 5);
  EXPECT_FALSE(c.training.global_batch_size);
}

TEST(Overrides, BatchIsDerivedAfterThePpOverride) {
  // 4 devices, gbs 8: pp 4 gives dp 1 and 8 micro-batches; pp 2 gives dp 2 and 4.
  const std::string gbs = with("  microbatches: 8\n", "  global_batch_size: 8\n");
  Overrides o;
  o.pp = 2;
  EXPECT_EQ(parse_config(gbs, "exp.yaml", o).training.microbatches, 4);
}

TEST(Overrides, ApplyOverridesStillWorksOnAConfigReadEarlier) {
  // What the compare command does per schedule.
  Config c = parse_config(kUnit, "exp.yaml");
  Overrides o;
  o.schedule = "interleaved";
  o.vpp = 2;
  apply_overrides(c, o);
  EXPECT_EQ(c.training.vpp, 2);
  EXPECT_EQ(c.lines.at("training.vpp"), 0);
  Overrides bad;
  bad.vpp = 3;  // 12 stages, 8 layers
  try {
    apply_overrides(c, bad);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "training.pp");
    EXPECT_TRUE(has(e.message(), "8 layers cannot fill 12 stages"));
  }
}

TEST(Overrides, LimitsTravelWithTheConfig) {
  Overrides o;
  o.limits = WorkLimits{};
  o.limits->max_ops = 10;  // 4 stages x 8 micro-batches x 3 = 96 ops
  const ConfigError e = config_error(kUnit, o);
  EXPECT_EQ(e.key(), "training.microbatches");
  EXPECT_TRUE(has(e.message(), "up to 96 ops"));
  o.limits->max_ops = 96;
  Config c = parse_config(kUnit, "exp.yaml", o);
  EXPECT_EQ(c.limits.max_ops, 96);
  // A later apply_overrides without limits keeps them: --max-ops outlives the per-schedule
  // overrides of compare.
  Overrides later;
  later.microbatches = 9;
  EXPECT_THROW(apply_overrides(c, later), ConfigError);  // 108 ops
}

}  // namespace
}  // namespace bmpipe
