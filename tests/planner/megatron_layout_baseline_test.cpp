// The megatron-layout plan baseline: a Megatron-LM --pipeline-model-parallel-layout (from
// --baseline-layout, or the one `bmpipe import megatron` kept in training.megatron_layout)
// under the fastest fitting recompute rule. Splits worked out by hand from the layout
// grammar (Megatron-LM's docs "Custom Pipeline Model Parallel Layout"); a layout equal to
// the even split must give megatron-best-rule's run, which is the even split under the
// same rules.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "frameworks/common/formats.hpp"
#include "planner/baselines.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

using planner::megatron_layout_split;
using V = std::vector<int>;

const std::string k13bArg =
    "'" + std::string(BMPIPE_SOURCE_DIR) + "/configs/examples/ascend910b_llama2_13b_analytic.yaml'";

TEST(MegatronLayoutBaseline, TheSplitIsTheDecoderLayersPerStage) {
  EXPECT_EQ(megatron_layout_split("Et*9|t*9|t*8|t*6L", 32).decoders, (V{9, 9, 8, 6}));
  // Groups unroll: E t t | t t t | t t t | t t t L -> 2, 3, 3, 3; commas are dropped.
  EXPECT_EQ(megatron_layout_split("Et*2|(t*3|)*2t,t,tL", 11).decoders, (V{2, 3, 3, 3}));
  EXPECT_EQ(megatron_layout_split("Et*9|t*9|t*8|t*6L", 32).unsupported, "");
  // Not this model's layout: E or L off the end stages (Megatron-LM's parser refuses it),
  // another decoder count, another MTP count, bad grammar.
  EXPECT_THROW(megatron_layout_split("t*4|Et*4L", 8), FormatError);
  EXPECT_THROW(megatron_layout_split("Et*4|t*4L", 9), FormatError);
  EXPECT_THROW(megatron_layout_split("Et*4|x*4L", 8), FormatError);
  EXPECT_THROW(megatron_layout_split("Et*4|t*4mL", 8), FormatError);      // the model has no MTP
  EXPECT_THROW(megatron_layout_split("Et*4|t*4L", 8, 1), FormatError);    // it has one
  EXPECT_THROW(megatron_layout_split("Et*4|t*4mmL", 8, 1), FormatError);  // not two
}

TEST(MegatronLayoutBaseline, MtpOnTheLastStageRunsAnythingElseSaysWhy) {
  // DeepSeek-V3's 61 decoder layers and one MTP layer over 32 stages (pp 16 x 2), the MTP
  // module with the loss on the last stage, where bmpipe runs it: 1 + 29 x 2 + 1 + 1.
  const planner::LayoutSplit with_loss = megatron_layout_split("Et|(tt|)*29,t|t,m,L", 61, 1);
  V expected{1};
  expected.insert(expected.end(), 29, 2);
  expected.insert(expected.end(), {1, 1});
  EXPECT_EQ(with_loss.decoders, expected);
  EXPECT_EQ(with_loss.unsupported, "");
  // Megatron-LM's documented example (docs "Custom Pipeline Model Parallel Layout"): the MTP
  // layer and the loss each on a stage of their own, stages 30 and 31, without decoders.
  const planner::LayoutSplit documented = megatron_layout_split("Et*3|(tt|)*29,m|L", 61, 1);
  ASSERT_EQ(documented.decoders.size(), 32u);
  EXPECT_EQ(documented.decoders[30], 0);
  EXPECT_EQ(documented.decoders[31], 0);
  EXPECT_EQ(documented.unsupported.rfind("leaves stage 30 of 32 without decoder layers (t)", 0), 0u)
      << documented.unsupported;
  // Its rows on a table with separate ends (E, t, m, L): E + 3 t, 2 t x 29, m, L.
  V rows{4};
  rows.insert(rows.end(), 29, 2);
  rows.insert(rows.end(), {1, 1});
  EXPECT_EQ(documented.rows, rows);
  // MTP before the last stage, with decoders after it: the MTP layers run on the last
  // decoder layer's output, so this is no model's layout.
  EXPECT_THROW(megatron_layout_split("Et*4m|t*4L", 8, 1), FormatError);
  EXPECT_EQ(megatron_layout_split("Et*4|t*4m|L", 8, 1)
                .unsupported.rfind("puts multi-token prediction layers (m) on stage 1 of 3", 0),
            0u);
  // The embedding alone on stage 0.
  EXPECT_EQ(megatron_layout_split("E|t*4|t*4L", 8)
                .unsupported.rfind("leaves stage 0 of 3 without decoder layers (t)", 0),
            0u);
}

nlohmann::json plan_json(const std::string& args) {
  const test::CliRun r = test::run_cli("plan " + args + " --quiet --json --max-evals 50");
  EXPECT_EQ(r.code, 0) << r.err;
  return r.code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
}

const nlohmann::json& baseline(const nlohmann::json& j, const std::string& name) {
  for (const nlohmann::json& b : j["baselines"])
    if (b["name"] == name) return b;
  static const nlohmann::json none;
  ADD_FAILURE() << "no baseline " << name;
  return none;
}

TEST(MegatronLayoutBaseline, TheEvenSplitAsALayoutIsMegatronBestRule) {
  // Llama-2-13B's 40 layers over pp 8: 5 a stage, Megatron's even split, at the README's
  // 40 GiB limit, where the best rule recomputes some layers.
  const nlohmann::json j = plan_json(
      k13bArg + " --memory-limit-GiB 40 --baseline-layout 'Et*5|t*5|t*5|t*5|t*5|t*5|t*5|t*5L'");
  const nlohmann::json& layout = baseline(j, "megatron-layout");
  const nlohmann::json& rule = baseline(j, "megatron-best-rule");
  ASSERT_TRUE(layout.contains("iteration_time_ms")) << layout;
  EXPECT_EQ(layout["partition"], nlohmann::json(V(8, 5)));
  EXPECT_EQ(layout["iteration_time_ms"], rule["iteration_time_ms"]);
  EXPECT_EQ(layout["layer_recompute"], rule["layer_recompute"]);
  EXPECT_EQ(layout["fits"], rule["fits"]);
}

TEST(MegatronLayoutBaseline, SeparateEndsKeepMegatronsEvenSplit) {
  // With training.separate_ends the embedding and the loss are rows of their own, and the
  // baselines still split the decoder layers evenly (5 a stage), the embedding row on the
  // first stage and the loss row on the last: the same runs as folded, to the ns rounding
  // of the rows.
  const nlohmann::json folded = plan_json(k13bArg + " --memory-limit-GiB 40");
  const nlohmann::json separate =
      plan_json(k13bArg + " --memory-limit-GiB 40 --set training.separate_ends=true");
  V rows(8, 5);
  rows.front() += 1;
  rows.back() += 1;
  for (const char* name :
       {"megatron-no-recompute", "megatron-full-recompute", "megatron-best-rule"}) {
    const nlohmann::json &f = baseline(folded, name), &s = baseline(separate, name);
    ASSERT_TRUE(s.contains("iteration_time_ms")) << s;
    EXPECT_EQ(s["partition"], nlohmann::json(rows)) << name;
    EXPECT_NEAR(s["iteration_time_ms"].get<double>(), f["iteration_time_ms"].get<double>(), 1e-3)
        << name;
    EXPECT_EQ(s["fits"], f["fits"]) << name;
  }
}

TEST(MegatronLayoutBaseline, AnotherLayoutRunsItsOwnSplit) {
  const nlohmann::json j =
      plan_json(k13bArg + " --memory-limit-GiB 40 --baseline-layout 'Et*4|(t*5|)*6t*6L'");
  EXPECT_EQ(baseline(j, "megatron-layout")["partition"], nlohmann::json(V{4, 5, 5, 5, 5, 5, 5, 6}));
}

TEST(MegatronLayoutBaseline, SkippedWithAReasonWithoutALayoutOrForAnotherStageCount) {
  const nlohmann::json none = plan_json(k13bArg);
  const nlohmann::json& skipped = baseline(none, "megatron-layout");
  EXPECT_FALSE(skipped.contains("iteration_time_ms")) << skipped;
  EXPECT_NE(skipped["error"].get<std::string>().find("--baseline-layout"), std::string::npos)
      << skipped;
  // Four stages where the schedule has eight.
  const nlohmann::json four = plan_json(k13bArg + " --baseline-layout 'Et*10|t*10|t*10|t*10L'");
  EXPECT_EQ(baseline(four, "megatron-layout")["error"],
            "--baseline-layout has 4 stages, this schedule 8 (pp x vpp)");
}

TEST(MegatronLayoutBaseline, AMalformedLayoutExitsTwoNamingTheOption) {
  for (const char* layout : {"Et*5|t*5|q*5L", "Et*5|(t*5|t*5L", "t*40L"}) {
    const test::CliRun r =
        test::run_cli("plan " + k13bArg + " --quiet --baseline-layout '" + layout + "'");
    EXPECT_EQ(r.code, 2) << layout << "\n" << r.err;
    EXPECT_NE(r.err.find("--baseline-layout"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(layout), std::string::npos) << r.err;
  }
  // Well formed, but 39 decoder layers for a 40-layer model.
  const test::CliRun r = test::run_cli("plan " + k13bArg +
                                       " --quiet --baseline-layout 'Et*5|t*5|t*5|t*5|t*5|t*5|"
                                       "t*5|t*4L'");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--baseline-layout"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("holds 39 decoder layers (t), but the model has 40"), std::string::npos)
      << r.err;
}

TEST(MegatronLayoutBaseline, AnImportedScriptsLayoutIsTheDefault) {
  const test::ScratchDir dir;
  const std::string args = test::write_file(
      dir.file("args.txt"),
      "torchrun pretrain_gpt.py \\\n"
      "  --num-layers 32 --hidden-size 4096 --ffn-hidden-size 11008 --num-attention-heads 32 \\\n"
      "  --seq-length 4096 --vocab-size 32000 --swiglu --untie-embeddings-and-output-weights \\\n"
      "  --micro-batch-size 1 --global-batch-size 64 --bf16 \\\n"
      "  --tensor-model-parallel-size 2 --pipeline-model-parallel-size 4 \\\n"
      "  --pipeline-model-parallel-layout \"Et*9|t*9|t*8|t*6L\"\n");
  const std::string yaml = dir.file("job.yaml");
  const test::CliRun imported = test::run_cli("import megatron '" + args +
                                              "' --preset h200 --devices 16 --out '" + yaml + "'");
  ASSERT_EQ(imported.code, 0) << imported.err;
  const std::string text = test::slurp(yaml);
  EXPECT_NE(text.find("  megatron_layout: \"Et*9|t*9|t*8|t*6L\""), std::string::npos) << text;
  const nlohmann::json j = plan_json("'" + yaml + "'");
  EXPECT_EQ(baseline(j, "megatron-layout")["partition"], nlohmann::json(V{9, 9, 8, 6}));
  // --baseline-layout takes precedence.
  const nlohmann::json k = plan_json("'" + yaml + "' --baseline-layout 'Et*8|t*8|t*8|t*8L'");
  EXPECT_EQ(baseline(k, "megatron-layout")["partition"], nlohmann::json(V{8, 8, 8, 8}));
  // A hand-edited layout that does not parse: exit 2 at the key's line.
  const std::string bad = dir.file("bad.yaml");
  std::string edited = text;
  edited.replace(edited.find("Et*9|t*9|t*8|t*6L"), 17, "Et*9|t*9|t*8|t*6");
  test::write_file(bad, edited);
  const test::CliRun r = test::run_cli("plan '" + bad + "' --quiet");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(": training.megatron_layout: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the last layer must be the loss L"), std::string::npos) << r.err;
}

TEST(MegatronLayoutBaseline, DeepSeekV3sLayoutsRunOrSkipWithTheReason) {
  const std::string ds =
      "'" + std::string(BMPIPE_SOURCE_DIR) + "/configs/examples/h800_deepseek_v3.yaml'";
  // DualPipeV at pp 16: 32 stages, as the layouts.
  const nlohmann::json runs = plan_json(ds + " --baseline-layout 'Et|(tt|)*29,t|t,m,L'");
  V expected{1};
  expected.insert(expected.end(), 29, 2);
  expected.insert(expected.end(), {1, 1});
  EXPECT_EQ(baseline(runs, "megatron-layout")["partition"], nlohmann::json(expected));
  const nlohmann::json skips = plan_json(ds + " --baseline-layout 'Et*3|(tt|)*29,m|L'");
  const nlohmann::json& skipped = baseline(skips, "megatron-layout");
  EXPECT_FALSE(skipped.contains("iteration_time_ms")) << skipped;
  EXPECT_EQ(skipped["error"].get<std::string>().rfind(
                "--baseline-layout leaves stage 30 of 32 without decoder layers (t)", 0),
            0u)
      << skipped;
  // Without the MTP layer it is another model's layout: exit 2, naming the option.
  const test::CliRun r =
      test::run_cli("plan " + ds + " --quiet --baseline-layout 'Et*3|(tt|)*29,L'");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--baseline-layout: 'Et*3|(tt|)*29,L': holds 0 multi-token prediction "
                       "layers (m), but the model has 1 (model.mtp_layers)"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace bmpipe
