// The planner's third lever (issue 43): `plan --offload auto` plans once per activation-
// offload choice and keeps the fastest fitting plan, and the planner's memory estimate
// counts offloaded bytes as the engine holds them (memory_model.hpp, moment_bytes).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>

#include "api/search.hpp"
#include "planner/memory_model.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace offload_plan_test {

using test::run_cli;

TEST(OffloadMemoryModel, OffloadedBytesStayForTheResidentMicroBatchesOnly) {
  // 8 micro-batches of 10 bytes in flight, 6 of each offloaded, 3 resident:
  // 8 x (10 - 6) + 3 x 6 = 50; and 2 retained of 4 bytes: + 8.
  EXPECT_EQ(moment_bytes(8, 2, 10, 4, 6, 3), 50 + 8);
  // Fewer in flight than resident: all of it, 2 x 10.
  EXPECT_EQ(moment_bytes(2, 0, 10, 4, 6, 3), 20);
  // Nothing offloaded: the old count, full x A + retained x R.
  EXPECT_EQ(moment_bytes(8, 2, 10, 4, 0, 3), 88);
  // 1F1B on 4 ranks, 8 micro-batches: rank 0 holds 4 at its peak; with 2 resident,
  // 4 x (10 - 6) + 2 x 6 = 28 against 40 without offload.
  const Schedule sch = test::generate("1f1b", 4, 8);
  const std::vector<RankMemory> plain = memory_profile(sch);
  const std::vector<RankMemory> off = memory_profile(sch, 2);
  EXPECT_EQ(peak_activation(plain[0], {10}, {10}), 40);
  EXPECT_EQ(peak_activation(off[0], {10}, {10}, {6}), 28);
  EXPECT_EQ(peak_activation(off[0], {10}, {10}), 40);  // no offload vector: as before
}

// Llama-2-7B on 8 GB200 (NVLink-C2C), pp 8, 16 micro-batches of 4 096 tokens: 1F1B's rank 0
// holds 8 micro-batches in flight, of which the planner counts 2 + lead holding their
// offloaded bytes (memory_model.hpp). `limit` GiB, `extra` more options.
std::string lead_job(const test::ScratchDir& dir) {
  return test::write_file(dir.file("job.yaml"),
                          "cluster: {nodes: 1, devices_per_node: 8, device: {preset: gb200}}\n"
                          "model: {preset: llama2-7b}\n"
                          "training: {schedule: 1f1b, pp: 8, tp: 1, seq_length: 4096, "
                          "micro_batch_size: 1, microbatches: 16}\n");
}

nlohmann::json plan_at(const std::string& job, int limit_GiB, const std::string& extra) {
  return test::run_json("plan " + job + " --quiet --json --threads 2 --max-evals 200 " +
                        "--memory-limit-GiB " + std::to_string(limit_GiB) + " " + extra);
}

// The lead is a lever: at 24 GiB lead 0 (two micro-batches' offloaded bytes on the device
// instead of three) lets fewer layers recompute, and beats leads 1 and 2; at 40 GiB memory
// is ample and lead 1 hides the copy back that lead 0 leaves exposed before each backward,
// and beats lead 0 (lead 2 hides it as well: the tie goes to lead 1, tried first). Checked
// against every (modules, lead) pair planned on its own, without --offload auto.
TEST(OffloadPlan, TheLeadKeptIsTheFastestOfEveryLead) {
  const test::ScratchDir dir;
  const std::string job = lead_job(dir);
  struct Case {
    int limit_GiB, lead;
    std::vector<int> slower;  // the leads whose best plan is slower
  };
  for (const Case& c : {Case{24, 0, {1, 2}}, Case{40, 1, {0}}}) {
    SCOPED_TRACE("limit " + std::to_string(c.limit_GiB) + " GiB");
    const nlohmann::json got = plan_at(job, c.limit_GiB, "--offload auto");
    // Brute force: none, then each module set at each lead of {0, 1, 2}, in the order
    // --offload auto tries them; the first of the fastest is kept.
    double least = plan_at(job, c.limit_GiB, "")["plan"]["iteration_time_ms"].get<double>();
    std::string best_modules = "none";
    std::optional<int> best_lead;
    std::map<int, double> fastest_at_lead;
    for (const std::string modules : {"core_attn,attn_proj", "qkv_linear,core_attn,attn_proj"})
      for (const int l : {1, 0, 2}) {
        const double t =
            plan_at(job, c.limit_GiB,
                    "--set training.offload_modules=" + modules + " --set training.offload_lead=" +
                        std::to_string(l))["plan"]["iteration_time_ms"]
                .get<double>();
        if (!fastest_at_lead.count(l) || t < fastest_at_lead[l]) fastest_at_lead[l] = t;
        if (t < least) {
          least = t;
          best_modules = modules;
          best_lead = l;
        }
      }
    ASSERT_TRUE(best_lead.has_value());
    EXPECT_EQ(*best_lead, c.lead);
    for (const int l : c.slower) EXPECT_GT(fastest_at_lead[l], least) << "lead " << l;
    EXPECT_EQ(got["plan"]["iteration_time_ms"].get<double>(), least);
    EXPECT_EQ(got["offload"]["chosen"], best_modules);
    EXPECT_EQ(got["offload"]["lead"], c.lead);
  }
}

// --out writes the lead kept with the modules, and the file simulates to the plan's time.
TEST(OffloadPlan, TheLeadKeptIsWrittenWithThePlan) {
  const test::ScratchDir dir;
  const std::string job = lead_job(dir);
  const std::string out = dir.file("plan.yaml");
  const nlohmann::json got = plan_at(job, 24, "--offload auto --out " + out);
  const std::string written = test::slurp(out);
  EXPECT_NE(written.find("offload_lead: 0"), std::string::npos) << written;
  EXPECT_NE(written.find("offload_modules: \"core_attn,attn_proj\""), std::string::npos) << written;
  const nlohmann::json sim = test::run_json("simulate " + out + " --json");
  EXPECT_EQ(sim["iteration_time_ms"], got["plan"]["iteration_time_ms"]);
}

// At 24 GiB offloading the attention's inputs to the host lets fewer layers recompute, so
// the joint plan is faster than recompute alone, which is one of the choices tried. (The
// Llama-3.1-405B case on 1 024 H100 of docs/plan.md takes 3 s: seven plans.) With the
// config's lead at 2, that lead is tried first, then 0 and 1.
TEST(OffloadPlan, JointPlanIsNeverSlowerThanRecomputeAlone) {
  const test::ScratchDir dir;
  const nlohmann::json j =
      plan_at(lead_job(dir), 24, "--offload auto --set training.offload_lead=2");
  const auto& tried = j["offload"]["tried"];
  // none once, then each module set at the config's lead (2), 0 and 1, job-wide; then the
  // same six per layer, then six offload alone (offload_mode_plan_test.cpp).
  ASSERT_EQ(tried.size(), 19u);
  EXPECT_EQ(tried[0]["offload_modules"], "none");
  EXPECT_FALSE(tried[0].contains("offload_lead"));
  for (std::size_t i = 1; i < 19; ++i) {
    const std::size_t k = (i - 1) % 6;
    EXPECT_EQ(tried[i]["offload_modules"],
              k < 3 ? "core_attn,attn_proj" : "qkv_linear,core_attn,attn_proj");
    EXPECT_EQ(tried[i]["offload_lead"], std::vector<int>({2, 0, 1})[k % 3]);
    EXPECT_EQ(tried[i]["form"], i < 7 ? "job" : i < 13 ? "per_layer" : "only");
  }
  double least = 1e300;
  for (const auto& row : tried)
    if (row.contains("iteration_time_ms"))
      least = std::min(least, row["iteration_time_ms"].get<double>());
  const double recompute_alone = tried[0]["iteration_time_ms"].get<double>();
  EXPECT_EQ(j["plan"]["iteration_time_ms"].get<double>(), least);
  EXPECT_LT(least, recompute_alone);
  EXPECT_NE(j["offload"]["chosen"], "none");
}

const nlohmann::json& baseline_row(const nlohmann::json& plan, const std::string& name) {
  for (const auto& b : plan["baselines"])
    if (b["name"] == name) return b;
  throw std::runtime_error("no baseline " + name);
}

// megatron-offload is Megatron-Bridge's offload rule on Megatron-LM's even split: the
// attention's core offloaded at lead 1 under the fastest fitting recompute rule. So it is
// megatron-best-rule of the same job with training.offload_modules = core_attn,attn_proj
// and offload_lead 1 written into the file, to the nanosecond; at 24 GiB the offload lets
// fewer layers recompute than megatron-best-rule without it.
TEST(OffloadPlan, MegatronOffloadIsTheBestRuleOfTheEvenSplitOffloadingTheAttention) {
  const test::ScratchDir dir;
  const std::string job = lead_job(dir);
  const nlohmann::json j = plan_at(job, 24, "");
  const nlohmann::json& off = baseline_row(j, "megatron-offload");
  ASSERT_TRUE(off.contains("iteration_time_ms")) << off.dump();
  EXPECT_EQ(off["partition"], std::vector<int>(8, 4));
  EXPECT_EQ(off["offload_modules"], "core_attn,attn_proj");
  EXPECT_EQ(off["offload_lead"], 1);
  EXPECT_EQ(off["fits"], true);
  const nlohmann::json by_hand =
      plan_at(job, 24,
              "--baseline megatron-best-rule --set training.offload_modules=core_attn,attn_proj "
              "--set training.offload_lead=1");
  EXPECT_EQ(off["iteration_time_ms"], by_hand["plan"]["iteration_time_ms"]);
  EXPECT_EQ(off["layer_recompute"], by_hand["plan"]["layer_recompute"]);
  EXPECT_LT(off["iteration_time_ms"].get<double>(),
            baseline_row(j, "megatron-best-rule")["iteration_time_ms"].get<double>());
  // Shown and written, it carries its offload: the file simulates to its time.
  const std::string out = dir.file("offload.yaml");
  const nlohmann::json shown = plan_at(job, 24, "--baseline megatron-offload --out " + out);
  EXPECT_EQ(shown["plan"]["iteration_time_ms"], off["iteration_time_ms"]);
  EXPECT_NE(test::slurp(out).find("offload_modules: \"core_attn,attn_proj\""), std::string::npos);
  EXPECT_EQ(test::run_json("simulate " + out + " --json")["iteration_time_ms"],
            off["iteration_time_ms"]);
  // Exported, it carries its offload too: Megatron-LM's flags state it (lead 1).
  const test::CliRun exported = run_cli("plan " + job +
                                        " --quiet --max-evals 200 --memory-limit-GiB 24 "
                                        "--baseline megatron-offload --format megatron");
  EXPECT_EQ(exported.code, 0) << exported.all();
  EXPECT_NE(exported.out.find("--fine-grained-activation-offloading\n--offload-modules core_attn "
                              "attn_proj\n"),
            std::string::npos)
      << exported.out;
}

TEST(OffloadPlan, MegatronOffloadNeedsAHostLink) {
  // The tiny example has measured layers and no host link: the row says why.
  const nlohmann::json j = test::run_json("plan " + test::kTiny + " --quiet --json");
  const nlohmann::json& off = baseline_row(j, "megatron-offload");
  EXPECT_EQ(off["fits"], false);
  EXPECT_NE(off["error"].get<std::string>().find("host link"), std::string::npos) << off.dump();
}

// search --offload auto: each layout under each offload choice, job-wide and per layer,
// ranked with the rest. On Llama-2-7B, 8 GB200, 24 GiB, tp 1 or 2, pp 4 or 8, recompute
// alone does best at tp 2 pp 4. Checked against a search per offload choice (the choice in
// the file; the per-layer form as the file states it, training.recompute: offload, where
// the planner picks each layer's mode): the fastest of those is the one kept, and it is
// faster than recompute alone. --screen-evals 0: each layout gets the whole quick planner,
// whatever the others do.
struct SearchChoice {
  std::string modules;
  int lead;
  bool per_layer;
};

const std::vector<SearchChoice> kSearchChoices = {{"none", -1, false},
                                                  {"core_attn,attn_proj", 1, false},
                                                  {"core_attn,attn_proj", 0, false},
                                                  {"core_attn,attn_proj", 2, false},
                                                  {"qkv_linear,core_attn,attn_proj", 1, false},
                                                  {"qkv_linear,core_attn,attn_proj", 0, false},
                                                  {"qkv_linear,core_attn,attn_proj", 2, false},
                                                  {"core_attn,attn_proj", 1, true},
                                                  {"core_attn,attn_proj", 0, true},
                                                  {"core_attn,attn_proj", 2, true},
                                                  {"qkv_linear,core_attn,attn_proj", 1, true},
                                                  {"qkv_linear,core_attn,attn_proj", 0, true},
                                                  {"qkv_linear,core_attn,attn_proj", 2, true}};

std::string search_args(const std::string& job, int limit_GiB) {
  return "search " + job + " --quiet --json --threads 2 --memory-limit-GiB " +
         std::to_string(limit_GiB) +
         " --tp 1,2 --pp 4,8 --schedules 1f1b --micro-batch-size 1 --screen-evals 0 ";
}

TEST(OffloadSearch, TheFastestOfEveryChoiceAndFormIsKept) {
  const test::ScratchDir dir;
  const std::string job = lead_job(dir);
  const std::string args = search_args(job, 24);
  const std::string out = dir.file("best.yaml");
  const nlohmann::json got = test::run_json(args + "--offload auto --out " + out);
  const nlohmann::json& best = got["layouts"][0];
  // 4 layouts (tp 1 or 2, pp 4 or 8): tp 2 pp 8 needs 16 devices, refused once by
  // divisibility; the other 3 under each of the 13 choices a config states, and under the
  // 6 of offload alone (each module set at each lead).
  EXPECT_EQ(got["layouts"].size(), 3 * (kSearchChoices.size() + 6) + 1);
  // Brute force over the choices --offload auto tries.
  double least = 1e300;
  const SearchChoice* kept = nullptr;
  double recompute_alone = 0;
  for (const SearchChoice& c : kSearchChoices) {
    std::string set = "--set training.offload_modules=" + c.modules;
    if (c.lead >= 0) set += " --set training.offload_lead=" + std::to_string(c.lead);
    if (c.per_layer) set += " --set training.recompute=offload";
    const nlohmann::json one = test::run_json(args + set);
    const double t = one["layouts"][0]["iteration_time_ms"].get<double>();
    EXPECT_FALSE(one["layouts"][0].contains("offload_modules"));  // no --offload auto
    if (c.modules == "none") recompute_alone = t;
    if (t < least) {
      least = t;
      kept = &c;
    }
  }
  ASSERT_NE(kept, nullptr);
  // Offload alone, which no config states: its layouts are those of --offload only, and
  // none of them is faster here (at 24 GiB offload alone fits no layout: the planner's
  // least-memory check refuses each).
  const nlohmann::json only = test::run_json(args + "--offload only");
  std::vector<nlohmann::json> only_rows;
  for (const auto& l : got["layouts"])
    if (l["offload_form"] == "only") only_rows.push_back(l);
  // (and the layout divisibility refuses, once, without a choice)
  ASSERT_EQ(only_rows.size() + 1, only["layouts"].size());
  for (const auto& l : only["layouts"]) {
    if (l["filter"] == "divisibility") continue;
    EXPECT_NE(std::find(only_rows.begin(), only_rows.end(), l), only_rows.end()) << l.dump();
    if (!l["iteration_time_ms"].is_null() && l["fits"] == true) {
      EXPECT_GT(l["iteration_time_ms"].get<double>(), least) << l.dump();
    }
  }
  EXPECT_EQ(best["iteration_time_ms"].get<double>(), least);
  EXPECT_EQ(best["offload_modules"], kept->modules);
  EXPECT_EQ(best["offload_lead"], kept->lead >= 0 ? nlohmann::json(kept->lead) : nlohmann::json());
  EXPECT_EQ(best["offload_form"], kept->per_layer ? "per_layer" : "job");
  EXPECT_LT(least, recompute_alone);
  // Every layout carries its choice; none of them the config's own.
  for (const auto& l : got["layouts"]) {
    EXPECT_TRUE(l.contains("offload_modules")) << l.dump();
    EXPECT_TRUE(l.contains("offload_form")) << l.dump();
  }
  // --out writes the choice with the layout: the file simulates to its time.
  EXPECT_EQ(test::run_json("simulate " + out + " --json")["iteration_time_ms"],
            best["iteration_time_ms"]);
}

// A per-layer layout's plan offloads some layers and recomputes others. Llama-2-7B at
// 8 192 tokens on 8 GB200, tp 1 pp 8, 30 GiB: under core_attn,attn_proj at lead 1 in the
// per-layer form the planner offloads at least one layer, and that layout's time in
// --offload auto is the time of the job written with the form stated (training.recompute:
// offload and the choice, by --set): its --out file states the layers' modes, offload among
// them, and simulates to that time.
TEST(OffloadSearch, APerLayerLayoutIsWrittenWithItsOffloadLayers) {
  const test::ScratchDir dir;
  const std::string job = test::write_file(
      dir.file("job.yaml"),
      "cluster: {nodes: 1, devices_per_node: 8, device: {preset: gb200}}\n"
      "model: {preset: llama2-7b}\n"
      "training: {schedule: 1f1b, pp: 8, tp: 1, seq_length: 8192, micro_batch_size: 1, "
      "microbatches: 16}\n");
  const std::string args = "search " + job +
                           " --quiet --json --threads 2 --memory-limit-GiB 30 --tp 1 --pp 8 "
                           "--schedules 1f1b --micro-batch-size 1 --screen-evals 0 ";
  const nlohmann::json all = test::run_json(args + "--offload auto");
  const nlohmann::json* row = nullptr;
  for (const auto& l : all["layouts"])
    if (l["offload_form"] == "per_layer" && l["offload_modules"] == "core_attn,attn_proj" &&
        l["offload_lead"] == 1)
      row = &l;
  ASSERT_NE(row, nullptr) << all.dump();
  const auto& modes = (*row)["layer_recompute"];
  EXPECT_NE(std::find(modes.begin(), modes.end(), "offload"), modes.end()) << modes.dump();
  EXPECT_NE(std::find(modes.begin(), modes.end(), "full"), modes.end()) << modes.dump();
  const std::string out = dir.file("per_layer.yaml");
  const nlohmann::json one = test::run_json(
      args +
      "--set training.recompute=offload --set training.offload_modules=core_attn,attn_proj "
      "--set training.offload_lead=1 --out " +
      out);
  EXPECT_EQ(one["layouts"][0]["iteration_time_ms"], (*row)["iteration_time_ms"]);
  EXPECT_EQ(one["layouts"][0]["layer_recompute"], modes);
  const std::string written = test::slurp(out);
  EXPECT_NE(written.find(": offload"), std::string::npos) << written;
  EXPECT_NE(written.find("offload_modules: \"core_attn,attn_proj\""), std::string::npos) << written;
  EXPECT_EQ(test::run_json("simulate " + out + " --json")["iteration_time_ms"],
            (*row)["iteration_time_ms"]);
}

// search --offload only: each layout under each offload choice at each lead with offload
// alone (each layer none or offload), planned by plan --offload only's code
// (bmpipe::offload_only). One layout, Llama-2-7B at 4 096 tokens on 8 GB200, tp 1 pp 8,
// 36 GiB (24 GiB fits no offload-only plan), with the planner at 300 evaluations in both:
// each (modules, lead) layout's time is the one plan --offload only reports having tried
// for that choice, and the kept layout is plan's plan, layer for layer. Its --out file
// simulates to its time.
TEST(OffloadSearch, OffloadOnlyLayoutsArePlanOffloadOnlysPlans) {
  const test::ScratchDir dir;
  const std::string job = lead_job(dir);
  const std::string out = dir.file("only.yaml");
  const nlohmann::json got = test::run_json(
      "search " + job +
      " --quiet --json --threads 2 --memory-limit-GiB 36 --tp 1 --pp 8 --schedules 1f1b "
      "--micro-batch-size 1 --planner full --layout-evals 300 --offload only --out " +
      out);
  const nlohmann::json plan = test::run_json(
      "plan " + job + " --quiet --json --threads 2 --max-evals 300 --memory-limit-GiB 36 " +
      "--offload only");
  // Two module sets at leads 1, 0 and 2: plan's six tries, search's six layouts.
  const auto& tried = plan["offload"]["tried"];
  ASSERT_EQ(tried.size(), 6u);
  ASSERT_EQ(got["layouts"].size(), 6u);
  for (const auto& row : tried) {
    const nlohmann::json* layout = nullptr;
    for (const auto& l : got["layouts"])
      if (l["offload_modules"] == row["offload_modules"] &&
          l["offload_lead"] == row["offload_lead"])
        layout = &l;
    ASSERT_NE(layout, nullptr) << row.dump();
    EXPECT_EQ((*layout)["offload_form"], "only");
    EXPECT_EQ((*layout)["iteration_time_ms"], row["iteration_time_ms"]) << row.dump();
    EXPECT_EQ((*layout)["max_peak_memory_bytes"], row["peak_memory_bytes"]) << row.dump();
  }
  const nlohmann::json& best = got["layouts"][0];
  EXPECT_EQ(best["iteration_time_ms"], plan["plan"]["iteration_time_ms"]);
  EXPECT_EQ(best["partition"], plan["plan"]["partition"]);
  EXPECT_EQ(best["layer_recompute"], plan["plan"]["layer_recompute"]);
  EXPECT_EQ(best["offload_modules"], plan["offload"]["chosen"]);
  EXPECT_EQ(best["offload_lead"], plan["offload"]["lead"]);
  // Offload alone: no layer recomputes, and some offload.
  const auto& modes = best["layer_recompute"];
  for (const auto& m : modes) EXPECT_TRUE(m == "none" || m == "offload") << modes.dump();
  EXPECT_NE(std::find(modes.begin(), modes.end(), "offload"), modes.end()) << modes.dump();
  // The table names the form.
  const test::CliRun table = run_cli("search " + job +
                                     " --memory-limit-GiB 36 --tp 1 --pp 8 --schedules 1f1b "
                                     "--micro-batch-size 1 --planner full --layout-evals 300 "
                                     "--offload only --quiet --top 1");
  EXPECT_EQ(table.code, 0) << table.all();
  EXPECT_NE(table.out.find(best["offload_modules"].get<std::string>() + " (" +
                           std::to_string(best["offload_lead"].get<int>()) + ", only)"),
            std::string::npos)
      << table.out;
  // --out: the layers' modes and the choice; the file simulates to the layout's time.
  const std::string written = test::slurp(out);
  EXPECT_NE(written.find(": offload"), std::string::npos) << written;
  EXPECT_EQ(test::run_json("simulate " + out + " --json")["iteration_time_ms"],
            best["iteration_time_ms"]);
  // A journal carries the form: resumed, the search is the same; a line of another form is
  // refused, naming the field.
  const std::string journal = dir.file("only.jsonl");
  const std::string journaled = "search " + job +
                                " --quiet --json --threads 2 --memory-limit-GiB 36 --tp 1 --pp 8 "
                                "--schedules 1f1b --micro-batch-size 1 --planner full "
                                "--layout-evals 300 --offload only --journal ";
  EXPECT_EQ(test::run_json(journaled + journal)["layouts"], got["layouts"]);
  const std::string lines = test::slurp(journal);
  EXPECT_NE(lines.find("\"offload_form\":\"only\""), std::string::npos) << lines;
  EXPECT_EQ(test::run_json(journaled + journal)["layouts"], got["layouts"]);  // resumed
  std::string forged = lines;
  forged.replace(forged.find("\"offload_form\":\"only\""), 21, "\"offload_form\":\"job\"");
  const std::string other = test::write_file(dir.file("forged.jsonl"), forged);
  const test::CliRun refused = run_cli(journaled + other);
  EXPECT_EQ(refused.code, 2) << refused.all();
  EXPECT_NE(refused.err.find("result.offload_form: unknown offload form \"job\""),
            std::string::npos)
      << refused.err;
}

// search --offload only needs the planner (each layer's choice is the plan), and a host
// link as auto does.
TEST(OffloadSearch, OffloadOnlyNeedsThePlanner) {
  const test::ScratchDir dir;
  const test::CliRun off =
      run_cli("search " + lead_job(dir) + " --offload only --planner off --quiet");
  EXPECT_EQ(off.code, 2) << off.all();
  EXPECT_NE(off.err.find("--offload: only needs the planner"), std::string::npos) << off.err;
  const test::CliRun hostless = run_cli("search " + test::kTiny + " --offload only --quiet");
  EXPECT_EQ(hostless.code, 2) << hostless.all();
  EXPECT_NE(hostless.err.find("--offload"), std::string::npos) << hostless.err;
}

// What search --offload auto --out writes of the offload choice (api::offload_keys):
// hand-built layouts and plans.
TEST(OffloadSearch, TheWrittenOffloadKeysFollowTheForm) {
  using Keys = std::vector<std::pair<std::string, std::string>>;
  LayoutResult r;
  EXPECT_EQ(api::offload_keys(r), Keys{});  // no --offload auto: the config's own
  r.layout.offload = "none";                // recompute alone
  EXPECT_EQ(api::offload_keys(r), (Keys{{"training.offload_modules", "none"}}));
  r.layout.offload = "core_attn,attn_proj";
  r.layout.offload_lead = 0;
  r.plan.recompute = {Recompute::full, Recompute::none};
  const Keys both = {{"training.offload_modules", "core_attn,attn_proj"},
                     {"training.offload_lead", "0"}};
  EXPECT_EQ(api::offload_keys(r), both);           // job-wide: the none layer moves the modules
  r.layout.offload_form = OffloadForm::per_layer;  // per layer, no offload layer: nothing moves
  EXPECT_EQ(api::offload_keys(r), (Keys{{"training.offload_modules", "none"}}));
  r.plan.recompute = {Recompute::full, Recompute::offload};
  EXPECT_EQ(api::offload_keys(r), both);
  r.layout.offload_form = OffloadForm::only;  // offload alone: as per layer
  r.plan.recompute = {Recompute::none, Recompute::none};
  EXPECT_EQ(api::offload_keys(r), (Keys{{"training.offload_modules", "none"}}));
  r.plan.recompute = {Recompute::none, Recompute::offload};
  EXPECT_EQ(api::offload_keys(r), both);
}

// plan and search alike.
TEST(OffloadPlan, BadChoicesAndHostlessDevicesAreRefused) {
  for (const std::string command : {"plan ", "search "}) {
    SCOPED_TRACE(command);
    const test::CliRun bad = run_cli(command + test::kTiny + " --offload sometimes --quiet");
    EXPECT_EQ(bad.code, 2) << bad.all();
    EXPECT_NE(bad.err.find("--offload: 'sometimes' is not a choice"), std::string::npos) << bad.err;
    EXPECT_NE(bad.err.find("only: "), std::string::npos) << bad.err;  // names the choices
    // The tiny example has measured layers and no host link.
    const test::CliRun hostless = run_cli(command + test::kTiny + " --offload auto --quiet");
    EXPECT_EQ(hostless.code, 2) << hostless.all();
    EXPECT_NE(hostless.err.find("needs an analytic model on a device with a host link"),
              std::string::npos)
        << hostless.err;
  }
}

}  // namespace offload_plan_test
}  // namespace bmpipe
