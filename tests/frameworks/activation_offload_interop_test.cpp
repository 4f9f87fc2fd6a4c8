// Megatron-Core's fine-grained activation offload through the Megatron-LM importer and
// exporter (issue 43, item 6): --fine-grained-activation-offloading with --offload-modules is
// training.offload_modules, checked as Megatron-Core's TransformerConfig checks it
// (NVIDIA/Megatron-LM d98e8a64, megatron/core/transformer/transformer_config.py).
#include <gtest/gtest.h>

#include <string>

#include "frameworks/megatron/import.hpp"
#include "support/megatron_round_trip.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace activation_offload_interop_test {

using test::run_cli;
using test::ScratchDir;

// Line 1: the model; line 2: the flags under test.
const std::string kModel =
    "--num-layers 8 --hidden-size 1024 --ffn-hidden-size 4096 --num-attention-heads 16 "
    "--seq-length 2048 --vocab-size 32000 --swiglu --micro-batch-size 1 "
    "--global-batch-size 8 --bf16 --pipeline-model-parallel-size 2\n";

ImportedJob import(const std::string& flags) {
  return read_megatron_args(kModel + flags + "\n", "offload.sh");
}

std::string refusal(const std::string& flags) {
  try {
    import(flags);
  } catch (const ImportError& e) {
    return e.what();
  }
  return "<accepted>";
}

TEST(ActivationOffloadImport, TheModulesAreReadAsGiven) {
  const ImportedJob job = import(
      "--fine-grained-activation-offloading --offload-modules qkv_linear core_attn attn_proj "
      "core_attn");
  EXPECT_EQ(job.offload_modules.value_or("<none>"), "qkv_linear,core_attn,attn_proj");
  EXPECT_EQ(job.origin.at("training.offload_modules").key, "--offload-modules");
  EXPECT_EQ(job.origin.at("training.offload_modules").line, 2);
  // Without the switch Megatron reads no list: nothing is offloaded.
  EXPECT_FALSE(import("--offload-modules core_attn").offload_modules.has_value());
  EXPECT_FALSE(import("").offload_modules.has_value());
}

TEST(ActivationOffloadImport, MegatronsRefusalsWithFileLineFlag) {
  std::string e = refusal("--fine-grained-activation-offloading");
  EXPECT_EQ(e.rfind("offload.sh:2: --fine-grained-activation-offloading:", 0), 0u) << e;
  EXPECT_NE(e.find("non-empty offload_modules"), std::string::npos) << e;
  e = refusal("--fine-grained-activation-offloading --offload-modules attn_proj");
  EXPECT_EQ(e.rfind("offload.sh:2: --offload-modules:", 0), 0u) << e;
  EXPECT_NE(e.find("attn_proj cannot be set to offload_modules alone without core_attn"),
            std::string::npos)
      << e;
  e = refusal("--fine-grained-activation-offloading --offload-modules core_attn mlp");
  EXPECT_NE(e.find("unknown module"), std::string::npos) << e;
  // Megatron's fused grouped MLP offload is real but not modelled: listed as such.
  const ImportedJob fused =
      import("--fine-grained-activation-offloading --offload-modules core_attn fused_group_mlp");
  ASSERT_EQ(fused.unmodelled.size(), 1u);
  EXPECT_EQ(fused.unmodelled[0].given, "--offload-modules fused_group_mlp");
  EXPECT_EQ(fused.offload_modules.value_or("<none>"), "core_attn");
}

// Import -> simulate -> export -> import -> simulate: the same time, and the flags written.
TEST(ActivationOffloadInterop, ExportImportRoundTrip) {
  ScratchDir dir;
  const test::MegatronRoundTrip trip = test::megatron_round_trip(
      dir, kModel,
      "--tensor-model-parallel-size 2 --fine-grained-activation-offloading "
      "--offload-modules core_attn attn_proj\n",
      "h200", 8);
  const std::string& yaml = trip.yaml;
  EXPECT_NE(trip.exported.find("--fine-grained-activation-offloading\n--offload-modules core_attn "
                               "attn_proj\n"),
            std::string::npos)
      << trip.exported;
  EXPECT_EQ(trip.first["iteration_time_ms"], trip.second["iteration_time_ms"]);
  EXPECT_GT(trip.second["devices"][0]["peak_host_bytes"].get<std::int64_t>(), 0);
  // MindFormers states the same modules as flash attention's swap (mindformers_swap_test.cpp);
  // torchtitan has no such keys: refused, not dropped.
  const auto mf = run_cli("export " + yaml + " --format mindformers");
  EXPECT_EQ(mf.code, 0) << mf.all();
  EXPECT_NE(mf.out.find("    - op_name: '.*\\.flash_attention'\n"), std::string::npos) << mf.out;
  const auto titan = run_cli("export " + yaml + " --format torchtitan");
  EXPECT_EQ(titan.code, 2) << titan.all();
  EXPECT_NE(titan.err.find("cannot state training.offload_modules"), std::string::npos)
      << titan.err;
}

// Llama-2-7B's shape as Megatron-LM flags, 8 GB200 (NVLink-C2C), pp 8, 16 micro-batches of
// 4 096 tokens: 1F1B's first rank holds 8 in flight, so at 30 GiB offloading helps.
const std::string kLlama7b =
    "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 11008 --num-attention-heads 32 "
    "--seq-length 4096 --vocab-size 32000 --swiglu --untie-embeddings-and-output-weights "
    "--attention-dropout 0 --hidden-dropout 0 --micro-batch-size 1 --global-batch-size 16 "
    "--bf16 --pipeline-model-parallel-size 8\n";

// Imports `flags` (after the model) on 8 GB200 as `name`.yaml and returns its path.
std::string import_llama(const ScratchDir& dir, const std::string& name, const std::string& flags) {
  const std::string script = test::write_file(dir.file(name + ".sh"), kLlama7b + flags);
  const std::string yaml = dir.file(name + ".yaml");
  const auto r = run_cli("import megatron " + script + " --preset gb200 --devices 8 --out " + yaml);
  EXPECT_EQ(r.code, 0) << r.all();
  return yaml;
}

// The flags of an export without its `#` lines.
std::string flags_of(const std::string& text) {
  std::string out;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = text.find('\n', at);
    const std::string line = text.substr(at, end - at);
    if (!line.empty() && line[0] != '#') out += line + "\n";
    at = end == std::string::npos ? text.size() : end + 1;
  }
  return out;
}

// `plan --offload auto --format megatron` states the offload choice kept, as `--out` writes
// it: the flags import back to a job that simulates to the time the export quotes (issue
// 43, item 6). With --expressible megatron the export is exact, and the offload kept beats
// the same planner without offload; without it the text is the nearest recompute rule with
// the offload, and still simulates to its quoted time. A lead Megatron-LM's flags do not
// state (0, kept at 24 GiB) is refused naming it, and torchtitan, which has no offload
// keys, refuses the plan rather than drop its offload; MindFormers' swap_config states it.
TEST(ActivationOffloadInterop, PlanOffloadAutoExportsTheOffloadKept) {
  ScratchDir dir;
  const std::string yaml = import_llama(dir, "job", "");
  const std::string plan =
      "plan " + yaml + " --quiet --json --threads 2 --max-evals 200 --memory-limit-GiB ";
  const nlohmann::json recompute_alone = test::run_json(plan + "30 --expressible megatron");
  for (const std::string extra : {" --expressible megatron", ""}) {
    SCOPED_TRACE(extra);
    const nlohmann::json j = test::run_json(plan + "30 --offload auto --format megatron" + extra);
    EXPECT_EQ(j["offload"]["chosen"], "qkv_linear,core_attn,attn_proj");
    EXPECT_EQ(j["offload"]["lead"], 1);
    const nlohmann::json& x = j["export"];
    const std::string text = x["text"].get<std::string>();
    EXPECT_NE(text.find("--fine-grained-activation-offloading\n--offload-modules qkv_linear "
                        "core_attn attn_proj\n"),
              std::string::npos)
        << text;
    const std::string again =
        import_llama(dir, "again" + std::to_string(extra.size()), flags_of(text));
    EXPECT_EQ(test::run_json("simulate " + again + " --json")["iteration_time_ms"],
              x["iteration_time_ms"]);
    if (!extra.empty()) {
      EXPECT_TRUE(x["exact"].get<bool>()) << text;
      EXPECT_EQ(x["iteration_time_ms"], j["plan"]["iteration_time_ms"]);
      EXPECT_LT(x["iteration_time_ms"].get<double>(),
                recompute_alone["plan"]["iteration_time_ms"].get<double>());
    }
  }
  const auto lead0 = run_cli(plan + "24 --offload auto --format megatron");
  EXPECT_EQ(lead0.code, 2) << lead0.all();
  EXPECT_NE(lead0.err.find("--format: Megatron-LM's flags cannot state training.offload_lead 0"),
            std::string::npos)
      << lead0.err;
  EXPECT_NE(lead0.err.find("bmpipe plan --expressible megatron"), std::string::npos) << lead0.err;
  // MindFormers states the attention's offload as swap_config (mindformers_swap_test.cpp).
  const nlohmann::json mf = test::run_json(plan + "30 --offload auto --format mindformers");
  EXPECT_TRUE(mf["export"]["exact"].get<bool>()) << mf["export"]["text"];
  EXPECT_NE(mf["export"]["text"].get<std::string>().find("    - op_name: 'attention'\n"),
            std::string::npos);
  const auto titan = run_cli(plan + "30 --offload auto --format torchtitan");
  EXPECT_EQ(titan.code, 2) << titan.all();
  EXPECT_NE(
      titan.err.find("cannot state training.offload_modules (qkv_linear,core_attn,attn_proj)"),
      std::string::npos)
      << titan.err;
}

}  // namespace activation_offload_interop_test
}  // namespace bmpipe
