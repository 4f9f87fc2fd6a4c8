// The job a command computed on is the job it states and the job it writes (issue 38):
// `plan --out` and `search --out` write the command line's overrides (--set,
// --global-batch-size, --microbatches) with the plan, so the file simulates to exactly the
// time the command printed; `search` takes --set, --global-batch-size and --seq-length as
// simulate and plan do; a searched layout of a job imported with a Megatron layout writes
// and exports without that layout; and `simulate`, `compare` and `cost --json` carry a
// "job" that names every dimension of it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "experiment/config.hpp"
#include "support/support.hpp"

namespace written_job_test {

using bmpipe::test::run_cli;
using bmpipe::test::ScratchDir;
using bmpipe::test::search_json;
using nlohmann::json;

// GPT-3's layer cut to 24 layers on 64 A100s: tp 8, pp 8, dp 1, global batch 32, full
// recompute, no sequence parallelism.
const std::string kGpt3Layers24 = std::string(BMPIPE_TEST_DATA_DIR) + "/search_gpt3_24_layers.yaml";
// Two layouts (pp 4 and 8 at tp 8), 1F1B.
const std::string kSpace = " --tp 8 --pp 4,8 --micro-batch-size 1 --schedules 1f1b";
// Two kinds of override, each of which the written file used to lose: a global batch that
// disagrees with the file's (the file kept its own, so it no longer loaded) and a key only
// --set reaches (the file ran without it, another time).
const std::string kOverrides = " --global-batch-size 16 --set training.sequence_parallel=true";

/// `simulate FILE --json`'s iteration time, which must run.
json simulated_time(const std::string& file) {
  const auto sim = run_cli("simulate '" + file + "' --json");
  EXPECT_EQ(sim.code, 0) << sim.err;
  if (sim.code != 0) return nullptr;
  return json::parse(sim.out)["iteration_time_ms"];
}

/// `plan CONFIG ARGS --json --out FILE`'s iteration time and FILE's simulated one.
void expect_plan_out_reproduces(const std::string& args) {
  ScratchDir dir;
  const std::string out = dir.file("plan.yaml");
  const auto r = run_cli("plan " + args + " --max-evals 50 --quiet --json --out '" + out + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  const json printed = json::parse(r.out)["plan"]["iteration_time_ms"];
  ASSERT_TRUE(printed.is_number()) << r.out;
  // Exactly: both are one integer of ns as ms.
  EXPECT_EQ(simulated_time(out), printed) << bmpipe::test::slurp(out);
}

TEST(WrittenJob, PlanOutWritesSetAndGlobalBatch) {
  expect_plan_out_reproduces(kGpt3Layers24 + kOverrides);
  // The file states the overrides as keys, so it is that job and not another.
  ScratchDir dir;
  const std::string out = dir.file("plan.yaml");
  const auto r =
      run_cli("plan " + kGpt3Layers24 + kOverrides + " --max-evals 50 --quiet --out '" + out + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  const bmpipe::Config written = bmpipe::load_config(out);
  EXPECT_TRUE(written.training.sequence_parallel);
  EXPECT_EQ(written.training.global_batch_size, 16);
  EXPECT_EQ(written.training.microbatches, 16);
  // And where they came from.
  EXPECT_NE(bmpipe::test::slurp(out).find("# From the command line: "
                                          "training.global_batch_size=16 "
                                          "training.sequence_parallel=true\n"),
            std::string::npos)
      << bmpipe::test::slurp(out);
}

TEST(WrittenJob, PlanOutWritesMicrobatchesOverAGlobalBatch) {
  // --microbatches wins over the file's global batch when the config is read: the written
  // file states the micro-batches alone.
  expect_plan_out_reproduces(kGpt3Layers24 + " --microbatches 8 --seq-length 1024");
}

TEST(WrittenJob, SearchOutWritesSetAndGlobalBatch) {
  ScratchDir dir;
  const std::string out = dir.file("best.yaml");
  // And the memory limit searched for, as plan writes its own.
  const json j = search_json(kGpt3Layers24 + kSpace + kOverrides +
                             " --memory-limit-GiB 30 --out '" + out + "'");
  const json& best = j["layouts"][0];
  ASSERT_TRUE(best["fits"].get<bool>()) << best.dump();
  // 16 sequences over dp 1 at micro-batch size 1 (pp 8) or dp 2 (pp 4).
  EXPECT_EQ(best["microbatches"].get<int>() * best["dp"].get<int>(), 16) << best.dump();
  EXPECT_EQ(simulated_time(out), best["iteration_time_ms"]) << bmpipe::test::slurp(out);
  const bmpipe::Config written = bmpipe::load_config(out);
  EXPECT_TRUE(written.training.sequence_parallel);
  EXPECT_EQ(written.training.global_batch_size, 16);
  EXPECT_EQ(written.device.memory_GiB, 30.0);
}

TEST(WrittenJob, SearchSetIsTheFileWithTheKey) {
  // --set and --global-batch-size are the file with those keys written in: the same
  // layouts, the same times, and not those of the file without them.
  ScratchDir dir;
  std::string text = bmpipe::test::slurp(kGpt3Layers24);
  const std::string seq = "  seq_length: 2048\n";
  const std::size_t at = text.find(seq);
  ASSERT_NE(at, std::string::npos);
  text.replace(at, seq.size(), "  seq_length: 1024\n");
  // training is the file's last section.
  const std::string edited =
      bmpipe::test::write_file(dir.file("edited.yaml"), text + "  sequence_parallel: true\n");
  json by_options = search_json(kGpt3Layers24 + kSpace +
                                " --seq-length 1024 --set training.sequence_parallel=true");
  json by_file = search_json(edited + kSpace);
  by_options.erase("bmpipe");  // names the config file
  by_file.erase("bmpipe");
  EXPECT_EQ(by_options.dump(), by_file.dump());
  const json plain = search_json(kGpt3Layers24 + kSpace);
  EXPECT_NE(plain["layouts"][0]["iteration_time_ms"],
            by_options["layouts"][0]["iteration_time_ms"]);
}

TEST(WrittenJob, SearchSetWithoutAValueIsAUsageError) {
  const auto r = run_cli("search " + kGpt3Layers24 + kSpace + " --quiet --set sequence_parallel");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--set: expected KEY=VALUE"), std::string::npos) << r.err;
  // A key the config does not know names the command line, as simulate's does.
  const auto bad = run_cli("search " + kGpt3Layers24 + kSpace + " --quiet --set training.tq=2");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("(from the command line)"), std::string::npos) << bad.err;
}

TEST(WrittenJob, SearchJournalTellsSetApart) {
  // A journal written under one --set is not read back under another.
  ScratchDir dir;
  const std::string journal = dir.file("search.journal");
  const std::string args = kGpt3Layers24 + kSpace + " --quiet --journal '" + journal + "'";
  ASSERT_EQ(run_cli("search " + args + " --set training.sequence_parallel=true").code, 0);
  const auto other = run_cli("search " + args + " --set training.sequence_parallel=false");
  EXPECT_EQ(other.code, 2) << other.out;
}

// Llama-2-7B cut to 4 layers on 4 H100s, imported with a Megatron layout whose first and
// last stages hold no decoder layer (the layout is the partition: separate ends).
std::string megatron_layout_job(const ScratchDir& dir) {
  return bmpipe::test::write_file(
      dir.file("layout.yaml"),
      "cluster: {nodes: 1, devices_per_node: 4, device: {preset: h100-sxm}}\n"
      "model: {preset: llama2-7b, num_layers: 4}\n"
      "training:\n  pp: 4\n  seq_length: 1024\n  global_batch_size: 16\n"
      "  megatron_layout: \"E|t*2|t*2|L\"\n");
}

TEST(WrittenJob, SearchOutOfAMegatronLayoutJobLoads) {
  ScratchDir dir;
  const std::string job = megatron_layout_job(dir);
  const std::string out = dir.file("best.yaml");
  const json j = search_json("'" + job + "' --global-batch-size 32 --out '" + out + "'");
  const json& best = j["layouts"][0];
  ASSERT_TRUE(best["fits"].get<bool>()) << best.dump();
  // The layout fixed pp 4: the searched layout's file has its own partition instead.
  EXPECT_EQ(simulated_time(out), best["iteration_time_ms"]) << bmpipe::test::slurp(out);
  EXPECT_TRUE(bmpipe::load_config(out).training.megatron_layout.empty());
}

TEST(WrittenJob, SearchFormatOfAMegatronLayoutJobExports) {
  ScratchDir dir;
  const std::string job = megatron_layout_job(dir);
  const auto r = run_cli("search '" + job + "' --quiet --format megatron");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("--pipeline-model-parallel-size "), std::string::npos) << r.out;
}

// ---- the job in the JSON documents ----------------------------------------------------------

/// Mixtral-8x7B on 16 H100s with every dimension away from its default: tp 2, cp 2, ep 4,
/// pp 2 with 2 chunks each, dp 16 / (2 x 2 x 2) = 2, 8 sequences of 4096 tokens in
/// micro-batches of 1 (4 per pipeline), FP8 hybrid with tensorwise scaling, DeepEP, and
/// selective recompute with a stage and a layer of their own.
std::string mixtral_job(const ScratchDir& dir) {
  return bmpipe::test::write_file(
      dir.file("job.yaml"),
      "cluster: {nodes: 2, devices_per_node: 8, device: {preset: h100-sxm}}\n"
      "model: {name: mixtral-job, hf_config: \"" +
          std::string(BMPIPE_SOURCE_DIR) +
          "/configs/presets/hf/mixtral-8x7b.json\"}\n"
          "training:\n"
          "  schedule: interleaved\n  pp: 2\n  vpp: 2\n  tp: 2\n  cp: 2\n  ep: 4\n  etp: 1\n"
          "  sequence_parallel: true\n"
          "  seq_length: 4096\n  micro_batch_size: 1\n  global_batch_size: 8\n"
          "  fp8: hybrid\n  fp8_recipe: tensorwise\n  moe_dispatcher: deepep\n"
          "  recompute: {default: selective, stages: {3: none}, layers: {0: full}}\n");
}

const json kMixtralJob = {
    {"schedule", "interleaved"},
    {"model", "mixtral-job"},
    {"device", "h100-sxm"},
    {"tp", 2},
    {"cp", 2},
    {"ep", 4},
    {"etp", 1},
    {"pp", 2},
    {"vpp", 2},
    {"dp", 2},
    {"devices", 16},
    {"cluster_devices", 16},
    {"micro_batch_size", 1},
    {"microbatches", 4},
    {"global_batch_size", 8},
    {"seq_length", 4096},
    {"precision", {{"dtype", "bf16"}, {"fp8", "hybrid"}, {"fp8_recipe", "tensorwise"}}},
    {"moe_dispatcher", "deepep"},
    {"recompute", {{"default", "selective"}, {"per_stage", true}, {"per_layer", true}}}};

TEST(JobJson, SimulateStatesTheWholeJob) {
  ScratchDir dir;
  const auto r = run_cli("simulate '" + mixtral_job(dir) + "' --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_TRUE(j.contains("job")) << r.out;
  for (const auto& [key, value] : kMixtralJob.items()) {
    ASSERT_TRUE(j["job"].contains(key)) << key;
    EXPECT_EQ(j["job"][key], value) << key;
  }
  EXPECT_EQ(j["job"].size(), kMixtralJob.size()) << j["job"].dump();
}

TEST(JobJson, OverridesAreTheJobs) {
  // The job is the one that ran: the command line's values, not the file's.
  ScratchDir dir;
  const auto r = run_cli("simulate '" + mixtral_job(dir) +
                         "' --json --global-batch-size 16 --recompute full --set "
                         "training.moe_dispatcher=alltoall --set training.fp8_recipe=delayed");
  ASSERT_EQ(r.code, 0) << r.err;
  const json job = json::parse(r.out)["job"];
  EXPECT_EQ(job["global_batch_size"], 16);
  EXPECT_EQ(job["microbatches"], 8);
  EXPECT_EQ(job["moe_dispatcher"], "alltoall");
  EXPECT_EQ(job["precision"]["fp8_recipe"], "delayed");
  EXPECT_EQ(job["recompute"],
            json({{"default", "full"}, {"per_stage", false}, {"per_layer", false}}));
}

TEST(JobJson, CompareAndCostStateTheSameJob) {
  ScratchDir dir;
  const std::string job = mixtral_job(dir);
  const auto compare = run_cli("compare '" + job + "' --schedules interleaved,1f1b --json --quiet");
  ASSERT_EQ(compare.code, 0) << compare.err;
  const json rows = json::parse(compare.out);
  ASSERT_EQ(rows.size(), 2u);
  for (const json& row : rows) {
    json expected = kMixtralJob;
    // Each row is its schedule's run: 1F1B holds one chunk per device.
    expected["schedule"] = row["schedule"];
    expected["vpp"] = row["schedule"] == "1f1b" ? 1 : 2;
    EXPECT_EQ(row["job"], expected) << row["schedule"];
  }
  const auto cost = run_cli("cost '" + job + "' --json");
  ASSERT_EQ(cost.code, 0) << cost.err;
  EXPECT_EQ(json::parse(cost.out)["job"], kMixtralJob);
}

}  // namespace written_job_test
