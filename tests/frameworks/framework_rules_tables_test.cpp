// Each framework's rules in one table (issue 41, item 1): experiment/rules_megatron.cpp,
// frameworks/mindformers/rules.cpp, frameworks/torchtitan/rules.cpp. Every rule of every
// table has a case here that breaks it alone and is refused with the framework's own
// message, typed here from the framework's source (cited in the tables), not read from the
// table; the loader refuses Megatron-LM's as it always has; the importer, `plan
// --expressible` and the exporter ask the same tables; no export of a shipped example is a
// job its framework refuses; docs/export.md lists the tables as they are.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "api/export.hpp"
#include "experiment/config.hpp"
#include "experiment/rules_megatron.hpp"
#include "frameworks/exporters.hpp"
#include "frameworks/framework_rules.hpp"
#include "frameworks/mindformers/rules.hpp"
#include "frameworks/torchtitan/flavors.hpp"
#include "frameworks/torchtitan/rules.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace framework_rules_tables_test {

// True if `text` holds `part`, with the text in the failure.
::testing::AssertionResult has(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << part << "' not in: " << text;
}

// A dense job: Llama 3 8B on 8 H100s, pp 2 x tp 2 x dp 2, ZeRO-1, sequence parallel.
const std::string kDense = R"(cluster:
  nodes: 1
  device: {preset: h100-sxm}
model:
  preset: llama3-8b
training:
  pp: 2
  tp: 2
  sequence_parallel: true
  seq_length: 4096
  global_batch_size: 16
  optimizer: {zero_stage: 1}
)";

Config dense() {
  return parse_config(kDense, "dense.yaml");
}

// A mixture of experts: the shipped Mixtral 8x7B example, 1F1B, pp 4 x ep 8 on 64 H100s.
Config moe() {
  return load_config(test::kExamples + "h100_mixtral_8x7b_ep8.yaml");
}

// The same under the expert all-to-all overlap, as Megatron-Core runs it: interleaved, vpp 2.
Config overlapped() {
  Config c = moe();
  c.training.moe_overlap = true;
  c.training.schedule = "interleaved";
  c.training.vpp = 2;
  c.training.recompute = RecomputeSpec{Recompute::none, {}, {}};
  return c;
}

struct Case {
  std::string rule;    ///< the rule's id
  Config config;       ///< a job that breaks it alone
  std::string key;     ///< the key the refusal blames
  std::string quoted;  ///< what the message must say: the framework's own words
};

std::vector<Case> megatron_cases() {
  std::vector<Case> out;
  auto add = [&](const char* id, Config c, const char* key, const char* quoted) {
    out.push_back({id, std::move(c), key, quoted});
  };
  Config c = dense();
  c.training.pp = 1;
  c.training.offload_layers = 32;  // Llama 3 8B has 32 decoder layers
  add("megatron.offload-layers-fewer", c, "training.offload_layers",
      "\"CPU offloading can be done only for layers less than 32\"");
  c = dense();
  c.training.offload_layers = 2;
  add("megatron.offload-layers-pipeline", c, "training.offload_layers",
      "\"Currently there is no support for Pipeline parallelism with CPU offloading\"");
  c = dense();
  c.training.pp = 1;
  c.training.offload_layers = 2;
  c.training.recompute = RecomputeSpec{Recompute::full, {}, {}};
  add("megatron.offload-layers-recompute", c, "training.offload_layers",
      "\"CPU offloading does not work when activation recomputation is enabled\"");
  c = dense();
  c.training.pp = 1;
  c.training.offload_layers = 2;
  c.training.offload_modules = "core_attn";
  add("megatron.offload-layers-fine-grained", c, "training.offload_layers",
      "\"fine_grained_activation_offloading cannot be enabled with cpu_offloading\"");
  // Megatron-Core's fine-grained offload rules (transformer_config.py, __post_init__).
  c = dense();
  c.training.offload_modules = "attn_proj";
  add("megatron.offload-attn-proj-core-attn", c, "training.offload_modules",
      "\"the input of attn_proj is the output of core_attn, which is needed in "
      "core_attn.backward()\"");
  c = moe();
  c.training.offload_modules = "expert_fc1";
  c.training.recompute_modules = "moe";
  add("megatron.offload-experts-moe-recompute", c, "training.offload_modules",
      "\"Cannot offload ... while recomputing the entire MoE layer\"");
  c = dense();
  c.training.tp_comm_overlap = true;
  c.training.sequence_parallel = false;
  add("megatron.tp-comm-overlap-sequence-parallel", c, "training.tp_comm_overlap",
      // NVIDIA/Megatron-LM d98e8a64 megatron/training/arguments.py:1441-1442.
      "\"Tensor parallel communication/GEMM overlap can happen only when sequence parallelism "
      "is enabled\"");
  c = dense();
  c.training.optimizer.zero_stage = 0;
  c.training.optimizer.overlap_param_gather = true;
  c.training.optimizer.overlap_grad_reduce = true;
  add("megatron.overlap-param-gather-sharded", c, "training.optimizer.overlap_param_gather",
      // NVIDIA/Megatron-LM d98e8a64 megatron/training/arguments.py:1024-1027.
      "\"--overlap-param-gather only supported with distributed optimizer, megatron fsdp, or "
      "dist_muon\"");
  c = dense();
  c.training.optimizer.zero_stage = 0;
  c.training.optimizer.offload_fraction = 0.5;
  add("megatron.optimizer-offload-distributed", c, "training.optimizer.offload_fraction",
      "\"only supported with distributed optimizer\"");
  c = dense();
  c.training.optimizer.overlap_param_gather = true;
  c.training.optimizer.overlap_grad_reduce = false;
  add("megatron.overlap-param-gather-grad-reduce", c, "training.optimizer.overlap_param_gather",
      "\"Must use --overlap-param-gather with --overlap-grad-reduce\"");
  c = dense();
  c.training.tp = 1;
  c.training.tp_comm_overlap = true;
  add("megatron.tp-comm-overlap-tp1", c, "training.tp_comm_overlap",
      // NVIDIA/Megatron-LM d98e8a64 megatron/training/arguments.py:1433-1442.
      "\"Disabling sequence parallelism because tensor model parallelism is disabled\", then "
      "\"Tensor parallel communication/GEMM overlap");
  c = moe();
  c.training.tp = 2;
  c.training.sequence_parallel = false;
  // The example gives ep, not sequence_parallel: the refusal blames ep (given_key).
  add("megatron.moe-tp-sequence-parallel", c, "training.ep",
      "\"During training, performance may degrade if MoE and tensor parallelism are enabled "
      "without also enabling sequence parallelism.\"");
  c = overlapped();
  c.training.schedule = "gpipe";
  c.training.vpp = 1;
  // Megatron-Core has no assertion to quote here (NVIDIA/Megatron-LM d98e8a64
  // megatron/core/pipeline_parallel/schedules.py:778 and :1485: the overlap's only paths):
  // the message must say so rather than dress a condition up as a message.
  add("megatron.moe-overlap-schedule", c, "training.schedule",
      "1F1B and interleaved schedules, but the schedule is gpipe (Megatron-Core runs the "
      "overlap only in those two, its combined_1f1b paths, and has no other schedule, so no "
      "message of its own refuses this;");
  c = overlapped();
  c.training.schedule = "1f1b";
  c.training.vpp = 1;
  add("megatron.moe-overlap-virtual-stages", c, "training.schedule",
      "\"If enabling EP A2A overlap, virtual_pipeline_model_parallel_size must be specified "
      "when pipeline_model_parallel_size > 1\"");
  c = overlapped();
  c.training.recompute = RecomputeSpec{Recompute::full, {}, {}};
  add("megatron.moe-overlap-full-recompute", c, "training.recompute",
      "\"disable full recomputation when enabling overlap_moe_expert_parallel_comm\"");
  c = overlapped();
  c.training.recompute_modules = "moe";
  add("megatron.moe-overlap-recompute-moe", c, "training.recompute_modules",
      "\"disable moe in recompute_modules when enabling overlap_moe_expert_parallel_comm\"");
  c = overlapped();
  c.model.shape->mtp_layers = 2;
  add("megatron.moe-overlap-mtp", c, "training.moe_overlap",
      "\"MTP supports at most one layer when enabling overlap_moe_expert_parallel_comm.\"");
  // Hierarchical cp: NVIDIA/Megatron-LM d98e8a64 megatron/training/arguments.py:580-585.
  // The product's assertion has no message: the refusal names the expression.
  c = dense();
  c.training.pp = 1;
  c.training.cp = 4;
  c.training.cp_comm_type = "a2a+p2p";
  c.training.cp_hierarchy = {2, 4};
  add("megatron.cp-hierarchy-product", c, "training.cp_hierarchy",
      "context_parallel_size == prod(hierarchical_context_parallel_sizes)");
  c.training.cp_hierarchy.clear();
  add("megatron.cp-hierarchy-given", c, "training.cp_comm_type",
      "\"--hierarchical-context-parallel-sizes must be set when a2a+p2p is used in cp comm\"");
  return out;
}

std::vector<Case> mindformers_cases() {
  std::vector<Case> out;
  Config c = moe();
  c.training.offload_modules = "core_attn,attn_proj";
  out.push_back({"mindformers.swap-dense-only", c, "training.offload_modules",
                 // mindspore-ai/docs 156e3e403eb9, fine_grained_activations_swap.md.
                 "\"Compatible with LLama-family dense models, MoE sparse models to be supported "
                 "in future updates\""});
  c = dense();
  c.training.vocab_parallel = false;
  out.push_back({"mindformers.vocab-emb-dp-pipeline", c, "training.vocab_parallel",
                 // mindspore-lab/mindformers fd4deebc1 mindformers/core/parallel_config.py:64.
                 "\"vocab_emd_dp will be reset to False\""});
  c = dense();
  c.training.pp = 1;
  c.training.vpp = 2;
  out.push_back({"mindformers.interleave-pipeline", c, "training.vpp",
                 // mindspore-lab/mindformers 6be67890 docs/feature_cards/Offset_Recompute.md:14,
                 // translated.
                 "\"has an effect only where pipeline stage > 1\""});
  return out;
}

std::vector<Case> torchtitan_cases() {
  std::vector<Case> out;
  Config c = moe();
  c.training.tp = 2;
  c.training.sequence_parallel = true;
  c.training.etp = 4;
  out.push_back({"torchtitan.etp-one-or-tp", c, "training.etp",
                 "expert_tensor_parallel_degree is 1 or tensor_parallel_degree, not 4"});
  c = dense();
  c.training.tp_comm_overlap = true;
  c.training.kernels = "eager";
  out.push_back({"torchtitan.async-tp-compile", c, "training.tp_comm_overlap",
                 "\"Async TP requires 'model' in --compile.components and --compile.enable\""});
  c = dense();
  c.training.cuda_graphs = "full_iteration";
  out.push_back({"torchtitan.cuda-graphs", c, "training.cuda_graphs",
                 "\"CUDA graphs do not support pipeline parallelism yet\""});
  c = moe();
  c.training.pp = 1;
  c.training.cuda_graphs = "full_iteration";
  out.push_back({"torchtitan.cuda-graphs", c, "training.cuda_graphs",
                 "\"CUDA graphs support only expert parallel token dispatcher configurations "
                 "without CPU synchronization\""});
  return out;
}

// Each case is refused by its rule and by no rule before it, with the key and the words.
void expect_refused(std::span<const FrameworkRule> rules, const std::vector<Case>& cases) {
  std::set<std::string> covered;
  for (const Case& k : cases) {
    SCOPED_TRACE(k.rule);
    const std::optional<RuleRefusal> r = first_refusal(rules, k.config);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->rule->id, k.rule);
    EXPECT_EQ(r->breach.key, k.key);
    EXPECT_TRUE(has(r->breach.message, k.quoted));
    covered.insert(k.rule);
  }
  // A rule without a case fails here: every rule has a test.
  for (const FrameworkRule& rule : rules)
    EXPECT_TRUE(covered.count(std::string(rule.id))) << rule.id;
}

TEST(FrameworkRulesTables, EveryMegatronRuleRefusesWithItsOwnMessage) {
  expect_refused(megatron_rules(), megatron_cases());
}

TEST(FrameworkRulesTables, EveryMindFormersRuleRefusesWithItsOwnMessage) {
  expect_refused(mindformers_rules(), mindformers_cases());
}

TEST(FrameworkRulesTables, EveryTorchtitanRuleRefusesWithItsOwnMessage) {
  expect_refused(torchtitan_rules(), torchtitan_cases());
}

// Megatron-Core refuses expert offload beside recompute_modules' moe under selective
// recomputation only (NVIDIA/Megatron-LM d98e8a64 megatron/core/transformer/
// transformer_config.py:2165: if self.recompute_granularity == "selective" and "moe" in
// self.recompute_modules): with no selective layer the modules re-run nothing, and it runs.
TEST(FrameworkRulesTables, ExpertOffloadBesideMoeRecomputeOnlyUnderSelective) {
  Config c = moe();  // recompute: selective
  c.training.offload_modules = "expert_fc1";
  c.training.recompute_modules = "moe";
  const std::optional<RuleRefusal> selective = first_refusal(megatron_rules(), c);
  ASSERT_TRUE(selective.has_value());
  EXPECT_EQ(selective->rule->id, "megatron.offload-experts-moe-recompute");
  for (const Recompute mode : {Recompute::none, Recompute::full}) {
    c.training.recompute = RecomputeSpec{mode, {}, {}};
    EXPECT_FALSE(first_refusal(megatron_rules(), c)) << static_cast<int>(mode);
  }
  // One selective stage is enough: Megatron-LM's --recompute-granularity is selective.
  c.training.recompute = RecomputeSpec{Recompute::none, {{1, Recompute::selective}}, {}};
  ASSERT_TRUE(first_refusal(megatron_rules(), c).has_value());
}

TEST(FrameworkRulesTables, TheBaseJobsBreakNoRule) {
  for (const Config& c : {dense(), moe(), overlapped()}) {
    EXPECT_FALSE(first_refusal(megatron_rules(), c));
    EXPECT_FALSE(first_refusal(mindformers_rules(), c));
    EXPECT_FALSE(first_refusal(torchtitan_rules(), c));
  }
}

// bmpipe's YAML is Megatron-semantics: the loader refuses every Megatron-LM rule, with the
// table's key and message (FILE:LINE: key, exit 2 from the command line).
TEST(FrameworkRulesTables, TheLoaderAppliesMegatronsTable) {
  for (const Case& k : megatron_cases()) {
    SCOPED_TRACE(k.rule);
    try {
      check_config(k.config);
      ADD_FAILURE() << "check_config accepted it";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key(), k.key);
      EXPECT_TRUE(has(e.message(), k.quoted));
    }
  }
}

TEST(FrameworkRulesTables, EachExporterAsksItsFrameworksTable) {
  for (const Exporter& x : exporters()) {
    const std::span<const FrameworkRule> rules = framework_rules(x);
    ASSERT_FALSE(rules.empty()) << x.name;
    for (const FrameworkRule& r : rules) EXPECT_EQ(r.framework, x.framework) << x.name;
  }
}

// The export refuses by MindFormers' and torchtitan's rules (the ones it cannot state
// around) with their messages, as before the tables; those it states around (torchtitan's
// async TP needs compile) are restated, and the job stated passes the table.
TEST(FrameworkRulesTables, TheExporterRefusesByTheTable) {
  const Exporter& mf = *find_exporter("mindformers");
  const std::vector<Case> mf_cases = mindformers_cases();
  const Case& vocab = mf_cases[1];
  EXPECT_TRUE(has(mf.refusal(vocab.config), vocab.quoted));
  try {
    api::export_config(vocab.config, api::ExportRequest{"mindformers", {}});
    ADD_FAILURE() << "exported";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "--format");
    EXPECT_TRUE(has(e.message(), vocab.quoted));
  }
  // torchtitan names its models by flavor: deepseek_v3 16B is one, at etp 4 beside tp 2.
  const std::vector<Case> tt_cases = torchtitan_cases();
  Config ds = tt_cases[0].config;
  ds.model.shape = torchtitan_shape(*find_torchtitan_flavor("deepseek_v3", "16B"));
  for (const char* format : {"torchtitan", "torchtitan-registry"})
    EXPECT_TRUE(has(find_exporter(format)->refusal(ds), tt_cases[0].quoted)) << format;
  const Exporter& tt = *find_exporter("torchtitan");
  const Case& async = tt_cases[1];
  EXPECT_TRUE(first_refusal(torchtitan_rules(), async.config));
  EXPECT_EQ(tt.refusal(async.config), "");
  EXPECT_FALSE(framework_refusal(tt, stated_job(tt, async.config)));
}

// An export is never a job its framework refuses: every shipped example each exporter
// accepts states a job that passes its framework's table.
TEST(FrameworkRulesTables, NoExportOfAnExampleIsAJobItsFrameworkRefuses) {
  int exported = 0;
  for (const auto& entry : std::filesystem::directory_iterator(test::kExamples)) {
    if (entry.path().extension() != ".yaml") continue;
    const std::string name = entry.path().filename().string();
    // Not a whole config (a cluster file), or slow to simulate (the fuzz seeds leave the
    // same ones out: scripts/fuzz_seeds.sh).
    if (name == "ascend910b_2x8.yaml" || name == "h100_gemma3_27b.yaml" ||
        name == "h200_8x8_pp64.yaml")
      continue;
    Config c;
    try {
      c = load_config(entry.path().string());
    } catch (const ConfigError&) {
      continue;
    }
    for (const Exporter& x : exporters()) {
      SCOPED_TRACE(name + " --format " + std::string(x.name));
      try {
        api::export_config(c, api::ExportRequest{std::string(x.name), {}});
      } catch (const ConfigError&) {
        continue;  // a job its text cannot state: refused, not exported
      }
      ++exported;
      const std::optional<RuleRefusal> r = framework_refusal(x, stated_job(x, c));
      EXPECT_FALSE(r) << r->rule->id << ": " << r->breach.message;
    }
  }
  EXPECT_GT(exported, 10);
}

// `plan --expressible F` plans one job: a job F's table refuses is refused, exit 2, naming
// the key the rule blames; Megatron-LM's are the loader's.
TEST(FrameworkRulesTables, PlanExpressibleRefusesAJobTheFrameworkRefuses) {
  const test::ScratchDir dir;
  const std::string path = test::write_file(
      dir.file("job.yaml"),
      kDense + "  vocab_parallel: false\n  schedule: 1f1b\n  recompute: selective\n");
  const test::CliRun refused = test::run_cli("plan " + path + " --expressible mindformers");
  EXPECT_EQ(refused.code, 2) << refused.all();
  EXPECT_TRUE(has(refused.err, "training.vocab_parallel"));
  EXPECT_TRUE(has(refused.err, "resets parallel_config.vocab_emb_dp to False"));
  // Megatron-LM and torchtitan run it: planned.
  for (const char* f : {"megatron", "torchtitan"}) {
    const test::CliRun ok =
        test::run_cli("plan " + path + " --expressible " + f + " --max-evals 200 --threads 1");
    EXPECT_EQ(ok.code, 0) << f << ": " << ok.all();
  }
}

// `search --format F` ranks no layout F's framework refuses: MindFormers resets vocab_emb_dp
// with pipeline stages, so a replicated embedding is refused at tp 2 x pp 2 (filter
// "framework"), and every other layout is ranked as it is without --format.
TEST(FrameworkRulesTables, SearchFormatRanksNoLayoutTheFrameworkRefuses) {
  const test::ScratchDir dir;
  const std::string path = test::write_file(
      dir.file("job.yaml"), kDense + "  vocab_parallel: false\n  recompute: selective\n");
  const std::string args =
      path + " --tp 1,2 --pp 1,2 --schedules 1f1b --micro-batch-size 1 --planner off";
  int ranked_by[2] = {0, 0};
  for (const bool format : {false, true}) {
    SCOPED_TRACE(format ? "--format mindformers" : "no --format");
    const test::CliRun r =
        test::run_cli("search " + args + (format ? " --format mindformers" : "") + " --json");
    ASSERT_EQ(r.code, 0) << r.all();
    const nlohmann::json j = nlohmann::json::parse(r.out);
    int ranked = 0, refused = 0;
    for (const nlohmann::json& l : j["layouts"]) {
      const bool both = l["tp"] == 2 && l["pp"] == 2;
      if (l.contains("filter") && l["filter"] == "framework") {
        ++refused;
        EXPECT_TRUE(both) << l.dump();
        EXPECT_TRUE(has(l["rejected"].get<std::string>(), "mindformers.vocab-emb-dp-pipeline"));
      } else if (l["rejected"].is_null()) {
        ++ranked;
        EXPECT_TRUE(!format || !both) << l.dump();
      }
    }
    EXPECT_EQ(refused, format ? 1 : 0);
    ranked_by[format] = ranked;
  }
  EXPECT_EQ(ranked_by[1], ranked_by[0] - 1);  // tp 2 x pp 2 ran without --format
  EXPECT_GT(ranked_by[1], 0);
}

// The plan kept under --expressible megatron for a job with the expert all-to-all overlap is
// one Megatron-LM runs: its --out file loads (the loader applies Megatron-LM's table) and no
// layer recomputes in full.
TEST(FrameworkRulesTables, PlanExpressibleNeverKeepsAPlanTheTableRefuses) {
  const test::ScratchDir dir;
  const std::string hf = std::string(BMPIPE_SOURCE_DIR) + "/configs/presets/hf/mixtral-8x7b.json";
  const std::string path = test::write_file(dir.file("moe.yaml"), R"(cluster:
  nodes: 4
  devices_per_node: 8
  device: {preset: h100-sxm}
model:
  hf_config: )" + hf + R"(
  moe: {load_imbalance: 1}
training:
  schedule: interleaved
  pp: 4
  vpp: 2
  ep: 8
  moe_overlap: true
  seq_length: 4096
  micro_batch_size: 1
  global_batch_size: 32
  recompute: selective
  optimizer: {zero_stage: 1}
)");
  const std::string out = dir.file("planned.yaml");
  const test::CliRun r = test::run_cli("plan " + path + " --expressible megatron --out " + out +
                                       " --max-evals 300 --threads 1");
  ASSERT_EQ(r.code, 0) << r.all();
  const Config planned = load_config(out);
  EXPECT_FALSE(first_refusal(megatron_rules(), planned));
  EXPECT_NE(planned.training.recompute.global, Recompute::full);
  for (const auto& [layer, mode] : planned.training.recompute.layers)
    EXPECT_NE(mode, Recompute::full) << layer;
}

// `import mindformers` asks MindFormers' table: pp_interleave_num without pipeline stages.
TEST(FrameworkRulesTables, TheMindFormersImporterAsksTheTable) {
  const test::ScratchDir dir;
  std::string yaml = test::slurp(test::kExamples + "mindformers/llama2_13b.yaml");
  auto replace = [&](const std::string& from, const std::string& to) {
    const auto at = yaml.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    yaml.replace(at, from.size(), to);
  };
  replace("pipeline_interleave: False", "pipeline_interleave: True");
  replace("data_parallel: 2", "data_parallel: 16");
  replace("pipeline_stage: 8", "pipeline_stage: 1");
  replace("recompute: [5, 0, 0, 0, 0, 0, 0, 0]", "recompute: False");
  replace("    offset: 0\n", "    offset: 0\n    pp_interleave_num: 2\n");
  const std::string path = test::write_file(dir.file("mf.yaml"), yaml);
  const test::CliRun r =
      test::run_cli("import mindformers " + path + " --preset ascend-910b --devices 16");
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_TRUE(has(r.err, "pp_interleave_num"));
  EXPECT_TRUE(has(r.err, "needs parallel_config.pipeline_stage > 1"));
}

// docs/export.md lists every table as framework_rules_markdown() prints it.
TEST(FrameworkRulesTables, TheDocsListTheTables) {
  const std::string doc = test::slurp(std::string(BMPIPE_SOURCE_DIR) + "/docs/export.md");
  const std::string begin =
      "<!-- framework-rules: begin (tests/frameworks/"
      "framework_rules_tables_test.cpp) -->\n";
  const std::string end = "<!-- framework-rules: end -->";
  const auto from = doc.find(begin);
  const auto to = doc.find(end);
  ASSERT_NE(from, std::string::npos);
  ASSERT_NE(to, std::string::npos);
  // BMPIPE_UPDATE_DOCS=1 writes the list instead (what docs/export.md says to run).
  if (std::getenv("BMPIPE_UPDATE_DOCS")) {
    test::write_file(std::string(BMPIPE_SOURCE_DIR) + "/docs/export.md",
                     doc.substr(0, from + begin.size()) + "\n" + framework_rules_markdown() + "\n" +
                         doc.substr(to));
    return;
  }
  EXPECT_EQ(doc.substr(from + begin.size(), to - from - begin.size()),
            "\n" + framework_rules_markdown() + "\n");
}

}  // namespace framework_rules_tables_test
}  // namespace bmpipe
