// Hybrid (Mamba) models and the head width through Megatron-LM's flags, both ways (issue 40
// item 2, issue 41's --kv-channels): the Nemotron 3 Nano arguments Megatron-LM ships
// (tests/data/megatron/nemotron3_nano_args.txt, with its source) imported as the model of its
// HF config.json; the pattern's '|' as the partition; every refusal exit 2 naming FILE:LINE
// and the flag; --squared-relu and --kv-channels changing the imported model; and export ->
// script -> import giving back the time the export quoted, to the digit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "experiment/config.hpp"
#include "frameworks/megatron/import.hpp"
#include "support/framework_files.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace hybrid_interop_test {

using test::run_cli;

const std::string kData = std::string(BMPIPE_TEST_DATA_DIR);
const std::string kNanoArgs = kData + "/megatron/nemotron3_nano_args.txt";
const std::string kNanoExample =
    std::string(BMPIPE_SOURCE_DIR) + "/configs/examples/h100_nemotron3_nano.yaml";

/// `bmpipe cost --json`'s parameters_total of `config`.
double parameters_total(const std::string& config) {
  const test::CliRun r = run_cli("cost '" + config + "' --json");
  EXPECT_EQ(r.code, 0) << r.err;
  return nlohmann::json::parse(r.out).value("parameters_total", -1.0);
}

TEST(MegatronHybridImport, NemotronNanoScriptIsItsHfConfigsModel) {
  test::ScratchDir dir;
  const std::string job = dir.file("nano.yaml");
  const test::CliRun r =
      run_cli("import megatron '" + kNanoArgs +
              "' --preset h100-sxm --devices 16 --allow-unmodelled --out '" + job + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  // What is left unmodelled is kernels and fusions, none of the hybrid flags
  // (--attention-backend flash is the flash-attention core bmpipe costs).
  for (const char* flag : {"--enable-experimental", "--moe-permute-fusion",
                           "--use-fused-weighted-squared-relu", "--cross-entropy-loss-fusion"})
    EXPECT_NE(r.err.find(std::string("warning: ") + flag + " is not modelled"), std::string::npos)
        << flag << "\n"
        << r.err;
  for (const char* flag : {"--hybrid-layer-pattern", "--mamba-", "--squared-relu", "--kv-channels",
                           "--normalization", "--attention-backend"})
    EXPECT_EQ(r.err.find(std::string("warning: ") + flag), std::string::npos) << r.err;

  const Config a = load_config(job), hf = load_config(kNanoExample);
  const ModelShape &m = *a.model.shape, &h = *hf.model.shape;
  EXPECT_EQ(m.hybrid_pattern, h.hybrid_pattern);
  EXPECT_EQ(m.num_layers, 52);
  EXPECT_EQ(m.head_dim(), h.head_dim());
  EXPECT_EQ(m.num_kv_heads, h.num_kv_heads);
  EXPECT_EQ(m.mlp_activation, MlpActivation::relu2);
  EXPECT_EQ(m.mamba.num_heads, h.mamba.num_heads);
  EXPECT_EQ(m.mamba.head_dim, h.mamba.head_dim);
  EXPECT_EQ(m.mamba.state_dim, h.mamba.state_dim);
  EXPECT_EQ(m.mamba.groups, h.mamba.groups);
  EXPECT_EQ(m.mamba.conv_kernel, h.mamba.conv_kernel);
  EXPECT_EQ(m.mamba.chunk_size, h.mamba.chunk_size);
  EXPECT_EQ(m.moe.num_experts, h.moe.num_experts);
  EXPECT_EQ(m.moe.top_k, h.moe.top_k);
  EXPECT_EQ(m.moe.expert_ffn, h.moe.expert_ffn);
  EXPECT_EQ(m.moe.shared_ffn, h.moe.shared_ffn);
  EXPECT_EQ(a.training.kernels, "fused");
  EXPECT_TRUE(m.flash_attention);
  EXPECT_EQ(a.training.ep, 8);
  // The parameters, as `bmpipe cost` counts them, within 0.01 %: only the router's
  // expert-score bias (--moe-router-enable-expert-bias, inert) is the HF config's alone.
  const double imported = parameters_total(job), card = parameters_total(kNanoExample);
  ASSERT_GT(card, 3e10);
  EXPECT_LT(std::abs(imported - card) / card, 1e-4) << imported << " vs " << card;
  EXPECT_NE(imported, card);  // the 23 x 128 biases: a count, not a copy of the HF file
  // And the import simulates.
  const test::CliRun sim = run_cli("simulate '" + job + "' --json");
  EXPECT_EQ(sim.code, 0) << sim.err;
}

// A small hybrid model's dimensions (lines 1-3); the case's flags go on line 4.
const std::string kSmall =
    "--hidden-size 1024 --num-attention-heads 8 --seq-length 1024 --vocab-size 32000 \\\n"
    "  --micro-batch-size 1 --global-batch-size 16 --bf16 --normalization RMSNorm \\\n"
    "  --squared-relu --attention-dropout 0 --hidden-dropout 0 --mamba-num-heads 32 \\\n";

ImportedJob import(const std::string& text) {
  return read_megatron_args(text, "args.txt");
}

TEST(MegatronHybridImport, PipeSegmentsAreThePartition) {
  // Four segments over pp 4: the partition as written.
  const ImportedJob four = import(kSmall +
                                  "  --pipeline-model-parallel-size 4 "
                                  "--hybrid-layer-pattern \"M*|M-M-M|M-|M*M\"\n");
  EXPECT_EQ(four.partition, (std::vector<int>{2, 5, 2, 3}));
  EXPECT_EQ(four.vpp, 1);
  EXPECT_EQ(four.schedule, "1f1b");
  EXPECT_EQ(four.shape->hybrid_pattern, "M*M-M-MM-M*M");
  EXPECT_EQ(four.shape->num_layers, 12);
  // Four over pp 2: two virtual stages a rank, Megatron's segment vp_stage x pp + pp_rank.
  const ImportedJob two = import(kSmall +
                                 "  --pipeline-model-parallel-size 2 "
                                 "--hybrid-layer-pattern \"M*|M-M-M|M-|M*M\"\n");
  EXPECT_EQ(two.partition, (std::vector<int>{2, 5, 2, 3}));
  EXPECT_EQ(two.vpp, 2);
  EXPECT_EQ(two.schedule, "interleaved");
  // No '|': Megatron-LM's even split, or its first/last counts.
  EXPECT_EQ(import(kSmall + "  --pipeline-model-parallel-size 2 --hybrid-layer-pattern M*M-M*M-\n")
                .partition,
            (std::vector<int>{4, 4}));
  EXPECT_EQ(import(kSmall + "  --pipeline-model-parallel-size 2 --hybrid-layer-pattern M*M-M*M- "
                            "--decoder-first-pipeline-num-layers 3\n")
                .partition,
            (std::vector<int>{3, 5}));
  // The deprecated spelling is the same pattern; --num-layers that disagrees is a note.
  const ImportedJob old = import(kSmall + "  --num-layers 6 --hybrid-override-pattern M*M-\n");
  EXPECT_EQ(old.shape->num_layers, 4);
  ASSERT_EQ(old.notes.size(), 1u);
  EXPECT_NE(old.notes[0].find("--num-layers 6 is not the 4 layers"), std::string::npos);
  // CUDA graphs of the whole layer capture a hybrid model's Mamba blocks too.
  EXPECT_EQ(import(kSmall + "  --hybrid-layer-pattern M*M- --cuda-graph-impl transformer_engine\n")
                .cuda_graphs,
            "attn,mlp,moe,mamba");
  // Mamba heads without --mamba-num-heads: 2 x hidden / head_dim (MambaMixer's d_inner).
  std::string derived = kSmall;
  derived.replace(derived.find("--mamba-num-heads 32"), 20, "--mamba-head-dim 128");
  EXPECT_EQ(import(derived + "  --hybrid-layer-pattern M*M-\n").shape->mamba.num_heads, 16);
  // Through the command line, the partition is the config's.
  test::ScratchDir dir;
  const std::string script =
      test::write_file(dir.file("args.txt"), kSmall +
                                                 "  --pipeline-model-parallel-size 4 "
                                                 "--hybrid-layer-pattern \"M*|M-M-M|M-|M*M\"\n");
  const std::string out = dir.file("job.yaml");
  const test::CliRun r =
      run_cli("import megatron '" + script + "' --preset h100-sxm --devices 8 --out '" + out + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(load_config(out).training.partition, (std::vector<int>{2, 5, 2, 3}));
}

TEST(MegatronHybridImport, RefusalsExitTwoNamingFileLineAndFlag) {
  test::ScratchDir dir;
  struct Case {
    std::string line4;   ///< the flags on line 4
    std::string expect;  ///< after "FILE:"
  };
  const Case cases[] = {
      {"--hybrid-layer-pattern M*M- --hybrid-override-pattern M*M-",
       "4: --hybrid-override-pattern: cannot be given with --hybrid-layer-pattern (Megatron-LM "
       "asserts: \"--hybrid-override-pattern and --hybrid-layer-pattern cannot both be "
       "specified."},
      {"--hybrid-layer-pattern \"M*M-/MM/M*\"",
       "4: --hybrid-layer-pattern: All MTP patterns must be identical. Pattern 1 is 'MM', but "
       "pattern 2 is 'M*' (Megatron-LM's message)"},
      {"--hybrid-layer-pattern \"M*M-/M|M\"",
       "4: --hybrid-layer-pattern: In MTP pattern, '|' is not a valid layer symbol"},
      {"--hybrid-layer-pattern M*M- --mtp-num-layers 2 --mtp-hybrid-override-pattern MX",
       "4: --mtp-hybrid-override-pattern: In MTP pattern, 'X' is not a valid layer symbol"},
      {"--hybrid-layer-pattern M*ME --num-experts 8 --moe-latent-size 1024",
       "4: --moe-latent-size: 1024 is not narrower than --hidden-size 1024"},
      {"--hybrid-layer-pattern MGM-",
       "4: --hybrid-layer-pattern: symbol 'G' at position 1: Gated DeltaNet layers, whose "
       "Megatron flags this import does not read yet"},
      {"--hybrid-layer-pattern MDM-",
       "4: --hybrid-layer-pattern: hybrid_pattern: symbol 'D' at "
       "position 1 (DeepSeek sparse attention"},
      {"--hybrid-layer-pattern M+M-",
       "4: --hybrid-layer-pattern: hybrid_pattern: symbol '+' at position 1 (MLA in a hybrid"},
      {"--hybrid-layer-pattern MXM-",
       "4: --hybrid-layer-pattern: In main pattern, 'X' is not a valid layer symbol"},
      {"--pipeline-model-parallel-size 2 --hybrid-layer-pattern \"M*|M-|M*\"",
       "4: --hybrid-layer-pattern: The number of hybrid pipeline segments described by "
       "--hybrid-layer-pattern must be evenly divisible by --pipeline-model-parallel-size. Got "
       "3 segments and 2 pipeline parallel size."},
      {"--pipeline-model-parallel-size 2 --hybrid-layer-pattern M*M-M",
       "4: --hybrid-layer-pattern: Number of layers (5) must be evenly divisible by "
       "pipeline-model-parallel-size (2) when no pipe separators"},
      {"--pipeline-model-parallel-size 2 --hybrid-layer-pattern \"M*|M-\" "
       "--decoder-first-pipeline-num-layers 2",
       "4: --decoder-first-pipeline-num-layers: should not be specified when "
       "--hybrid-layer-pattern contains pipe separators"},
      {"--pipeline-model-parallel-size 2 --hybrid-layer-pattern M*M- "
       "--num-virtual-stages-per-pipeline-rank 2",
       "4: --num-virtual-stages-per-pipeline-rank: should not be used with "
       "--hybrid-layer-pattern"},
      {"--pipeline-model-parallel-size 2 --hybrid-layer-pattern M*M- "
       "--pipeline-model-parallel-layout \"Et*2|t*2L\"",
       "4: --pipeline-model-parallel-layout: should not be used with --hybrid-layer-pattern"},
      {"--hybrid-layer-pattern M*M- --swiglu", "3: --squared-relu: cannot be given with --swiglu"},
      {"--num-layers 4 --is-hybrid-model", "4: --is-hybrid-model: makes no hybrid model alone"},
      {"--hybrid-layer-pattern M*ME",
       "4: --hybrid-layer-pattern: has MoE layers (E) but no "
       "--num-experts"},
      {"--hybrid-layer-pattern M*M- --mamba-num-groups 5",
       "4: --mamba-num-groups: 5 groups do not divide the 32 Mamba heads"},
      {"--hybrid-layer-pattern M*M- --mtp-num-layers 1",
       "4: --mtp-num-layers: a hybrid model's multi-token prediction depths need their "
       "block's layers"},
      {"--hybrid-layer-pattern M*M- --tensor-model-parallel-size 8 --mamba-num-groups 4",
       "4: --tensor-model-parallel-size: tp = 8 does not divide the Mamba mixer's 32 heads and "
       "4 groups"},
      {"--hybrid-layer-pattern M*M- --spec my.module my_spec", "4: --spec: not modelled yet"},
  };
  for (const Case& c : cases) {
    const std::string file = test::write_file(dir.file("args.txt"), kSmall + "  " + c.line4 + "\n");
    const test::CliRun r =
        run_cli("import megatron '" + file + "' --preset h100-sxm --devices 8 --out '" +
                dir.file("out.yaml") + "'");
    EXPECT_EQ(r.code, 2) << c.line4 << "\n" << r.err;
    EXPECT_NE(r.err.find(file + ":" + c.expect), std::string::npos)
        << c.line4 << "\n  got: " << r.err;
  }
  // Derived Mamba heads that MambaMixer's assert refuses: 2 x 1000 is no multiple of 64.
  std::string odd = kSmall;
  odd.replace(odd.find("--mamba-num-heads 32"), 20, "--kv-channels 128");
  odd.replace(odd.find("--hidden-size 1024"), 18, "--hidden-size 1000");
  const std::string file =
      test::write_file(dir.file("odd.txt"), odd + "  --hybrid-layer-pattern M*M-\n");
  const test::CliRun r = run_cli("import megatron '" + file + "' --preset h100-sxm --devices 8");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(file + ":1: --hidden-size: without --mamba-num-heads Megatron-LM's "
                              "MambaMixer takes d_inner = 2 x --hidden-size = 2000"),
            std::string::npos)
      << r.err;
  // Squared ReLU in LayerNorm layers, and a hybrid model in LayerNorm: unmodelled.
  std::string layernorm = kSmall;
  layernorm.replace(layernorm.find("--normalization RMSNorm"), 23, "--normalization LayerNorm");
  const std::string ln = test::write_file(dir.file("ln.txt"), layernorm + "  --num-layers 4\n");
  const test::CliRun lr = run_cli("import megatron '" + ln + "' --preset h100-sxm --devices 8");
  EXPECT_EQ(lr.code, 2);
  EXPECT_NE(lr.err.find(ln + ":3: --squared-relu: not modelled yet"), std::string::npos) << lr.err;
  const std::string lh =
      test::write_file(dir.file("lh.txt"), layernorm + "  --hybrid-layer-pattern M*M-\n");
  const test::CliRun hr = run_cli("import megatron '" + lh + "' --preset h100-sxm --devices 8");
  EXPECT_EQ(hr.code, 2);
  EXPECT_NE(hr.err.find(lh + ":2: --normalization: not modelled yet"), std::string::npos) << hr.err;
}

TEST(MegatronHybridImport, SquaredReluAndKvChannelsChangeTheModel) {
  // A dense model: --squared-relu with RMSNorm is llama-style layers with relu2, fused.
  const std::string dense =
      "--num-layers 4 --hidden-size 1024 --num-attention-heads 8 --seq-length 1024 \\\n"
      "  --vocab-size 32000 --micro-batch-size 1 --bf16 --normalization RMSNorm \\\n";
  const ImportedJob gelu = import(dense);
  const ImportedJob relu2 = import(dense + "  --squared-relu\n");
  EXPECT_EQ(gelu.shape->architecture, Architecture::gpt);
  EXPECT_EQ(relu2.shape->architecture, Architecture::llama);
  EXPECT_EQ(relu2.shape->mlp_activation, MlpActivation::relu2);
  EXPECT_EQ(relu2.kernels, "fused");
  // With LayerNorm (Megatron-LM's default) it is unmodelled, and allowed it is the GeLU of
  // bmpipe's gpt-style layers.
  std::string layernorm = dense;
  layernorm.replace(layernorm.find("--normalization RMSNorm"), 23, "");
  const ImportedJob ln = import(layernorm + "  --squared-relu\n");
  EXPECT_EQ(ln.shape->architecture, Architecture::gpt);
  EXPECT_EQ(ln.shape->mlp_activation, MlpActivation::swiglu);  // unused by gpt layers
  ASSERT_EQ(ln.unmodelled.size(), 1u);
  EXPECT_EQ(ln.unmodelled[0].origin.key, "--squared-relu");
  // In a hybrid model: squared ReLU against SwiGLU, h -> ffn -> h against h -> 2 ffn -> h.
  const std::string hybrid =
      dense + "  --hybrid-layer-pattern M-M* --mamba-num-heads 32 --ffn-hidden-size 2048 \\\n";
  const ImportedJob h_relu2 = import(hybrid + "  --squared-relu\n");
  const ImportedJob h_swiglu = import(hybrid + "  --swiglu\n");
  EXPECT_EQ(h_relu2.shape->mlp_activation, MlpActivation::relu2);
  EXPECT_EQ(h_swiglu.shape->mlp_activation, MlpActivation::swiglu);
  EXPECT_LT(h_relu2.shape->dense_mlp_params(), h_swiglu.shape->dense_mlp_params());
  // --kv-channels: each head 256 wide instead of 1024 / 8 = 128.
  const ImportedJob wide = import(dense + "  --squared-relu --kv-channels 256\n");
  EXPECT_EQ(relu2.shape->head_dim(), 128);
  EXPECT_EQ(wide.shape->head_dim(), 256);
  EXPECT_GT(wide.shape->attention_params(), relu2.shape->attention_params());
  // A head width that does not divide the hidden size needs no quotient (Megatron asserts
  // the division only without --kv-channels).
  EXPECT_EQ(import("--num-layers 2 --hidden-size 2688 --num-attention-heads 32 --seq-length 64 "
                   "--vocab-size 1000 --micro-batch-size 1 --bf16 --swiglu --kv-channels 128\n")
                .shape->head_dim(),
            128);
  // Through the command line, both reach the config: parameters differ.
  test::ScratchDir dir;
  double params[3] = {0, 0, 0};
  const std::string extra[3] = {"", "  --squared-relu\n", "  --squared-relu --kv-channels 256\n"};
  for (int k = 0; k < 3; ++k) {
    const std::string file = test::write_file(dir.file("d.txt"), dense + extra[k]);
    const std::string out = dir.file("d" + std::to_string(k) + ".yaml");
    const test::CliRun r =
        run_cli("import megatron '" + file + "' --preset h100-sxm --devices 8 --out '" + out + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    params[k] = parameters_total(out);
  }
  EXPECT_NE(params[0], params[1]);
  EXPECT_LT(params[1], params[2]);
  // MLA's head widths are its own: --kv-channels changes nothing there, and says so.
  const ImportedJob mla = import(dense + "  --swiglu --multi-latent-attention --kv-channels 64\n");
  EXPECT_EQ(mla.shape->explicit_head_dim, 0);
  EXPECT_NE(std::find(mla.ignored.begin(), mla.ignored.end(),
                      "--kv-channels (no effect with --multi-latent-attention)"),
            mla.ignored.end());
}

// A hybrid model with experts, squared ReLU, a head width of its own and an uneven split over
// pp 2 x vpp 2, on 16 H100.
const std::string kHybridConfig =
    "cluster: {nodes: 2, devices_per_node: 8, device: {preset: h100-sxm}}\n"
    "model:\n"
    "  num_layers: 8\n  hidden_size: 2048\n  num_attention_heads: 16\n  num_kv_heads: 4\n"
    "  head_dim: 160\n  ffn_hidden_size: 4096\n  vocab_size: 32000\n"
    "  mlp_activation: relu2\n  hybrid_pattern: \"M*MEM-ME\"\n"
    "  mamba: {num_heads: 64, head_dim: 64, state_dim: 64, groups: 8}\n"
    "  moe: {num_experts: 16, top_k: 4, expert_ffn_hidden_size: 1024,\n"
    "        shared_expert_ffn_hidden_size: 2048}\n"
    "training:\n  schedule: interleaved\n  pp: 2\n  vpp: 2\n  partition: [2, 2, 1, 3]\n"
    "  tp: 2\n  sequence_parallel: true\n  ep: 4\n  kernels: fused\n  seq_length: 2048\n"
    "  micro_batch_size: 1\n  global_batch_size: 64\n  dtype: bf16\n";
// The dimensions the export leaves to the script, and flags it must say to remove: a SwiGLU
// MLP, the deprecated pattern spelling, a vpp flag Megatron refuses beside the pattern.
const std::string kHybridScript =
    "--num-layers 8 --hidden-size 2048 --num-attention-heads 16 --group-query-attention \\\n"
    "  --num-query-groups 4 --ffn-hidden-size 4096 --swiglu --untie-embeddings-and-output-weights "
    "\\\n"
    "  --vocab-size 32000 --attention-dropout 0 --hidden-dropout 0 --use-flash-attn \\\n"
    "  --hybrid-override-pattern MMMMMMMM --num-virtual-stages-per-pipeline-rank 2 \\\n"
    "  --seq-length 2048 --micro-batch-size 1 --bf16\n";

/// `config_yaml` exported as Megatron-LM's flags (kHybridScript given them), and the file
/// `bmpipe import megatron` writes back from the script, on 16 H100.
struct RoundTrip {
  nlohmann::json exported;
  std::string text;   ///< the export's flags
  std::string given;  ///< the script with them
  std::string back;   ///< the imported YAML
};
RoundTrip export_and_import(const test::ScratchDir& dir, const std::string& config_yaml) {
  RoundTrip t;
  const std::string config = test::write_file(dir.file("job.yaml"), config_yaml);
  const test::CliRun x = run_cli("export '" + config + "' --format megatron --json");
  EXPECT_EQ(x.code, 0) << x.err;
  if (x.code != 0) return t;
  t.exported = nlohmann::json::parse(x.out);
  t.text = t.exported["text"].get<std::string>();
  t.given =
      test::write_file(dir.file("given.txt"), test::script_with_export(kHybridScript, t.text));
  t.back = dir.file("back.yaml");
  const test::CliRun r = run_cli("import megatron '" + t.given +
                                 "' --preset h100-sxm --devices 16 --out '" + t.back + "'");
  EXPECT_EQ(r.code, 0) << r.err << "\n" << test::slurp(t.given);
  return t;
}

/// `simulate --json`'s iteration time of `config`.
nlohmann::json simulated_time(const std::string& config) {
  return nlohmann::json::parse(
      run_cli("simulate '" + config + "' --json").out)["iteration_time_ms"];
}

TEST(MegatronHybridExport, ImportOfTheExportIsTheSameJob) {
  test::ScratchDir dir;
  const RoundTrip t = export_and_import(dir, kHybridConfig);
  const std::string& text = t.text;
  // The pattern with '|' between the four stages, in place of --num-layers.
  EXPECT_NE(text.find("--hybrid-layer-pattern \"M*|ME|M|-ME\"\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("\n--num-layers "), std::string::npos) << text;
  for (const char* flag : {"--squared-relu\n", "--normalization RMSNorm\n", "--kv-channels 160\n",
                           "--mamba-num-heads 64\n", "--mamba-state-dim 64\n",
                           "--spec megatron.core.models.hybrid.hybrid_layer_specs "
                           "hybrid_stack_spec\n"})
    EXPECT_NE(text.find(flag), std::string::npos) << flag << text;
  for (const char* flag : {"#   --swiglu\n", "#   --hybrid-override-pattern\n",
                           "#   --num-virtual-stages-per-pipeline-rank\n"})
    EXPECT_NE(text.find(flag), std::string::npos) << flag << text;
  const Config a = load_config(dir.file("job.yaml")), b = load_config(t.back);
  EXPECT_EQ(b.model.shape->hybrid_pattern, a.model.shape->hybrid_pattern);
  EXPECT_EQ(b.model.shape->head_dim(), 160);
  EXPECT_EQ(b.model.shape->mlp_activation, MlpActivation::relu2);
  EXPECT_EQ(b.model.shape->mamba.state_dim, 64);
  EXPECT_EQ(b.training.partition, (std::vector<int>{2, 2, 1, 3}));
  EXPECT_EQ(b.training.vpp, 2);
  EXPECT_EQ(simulated_time(t.back), t.exported["iteration_time_ms"]) << text;
}

// Nemotron 3 Super's blocks (issue 40): a latent MoE (--moe-latent-size) and a hybrid MTP
// block ("*E" at 2 depths sharing one block's weights, --mtp-use-repeated-layer) go out as
// Megatron-LM's flags and come back as the same model, to the time the export quoted.
const std::string kLatentMtpConfig =
    "cluster: {nodes: 2, devices_per_node: 8, device: {preset: h100-sxm}}\n"
    "model:\n"
    "  num_layers: 8\n  hidden_size: 2048\n  num_attention_heads: 16\n  num_kv_heads: 4\n"
    "  ffn_hidden_size: 4096\n  vocab_size: 32000\n"
    "  mlp_activation: relu2\n  hybrid_pattern: \"M*MEM-ME\"\n"
    "  mtp_layers: 2\n  mtp_pattern: \"*E\"\n  mtp_shared: true\n"
    "  mamba: {num_heads: 64, head_dim: 64, state_dim: 64, groups: 8}\n"
    "  moe: {num_experts: 16, top_k: 4, expert_ffn_hidden_size: 512, latent_size: 512}\n"
    "training:\n  schedule: 1f1b\n  pp: 2\n  partition: [4, 4]\n"
    "  tp: 2\n  sequence_parallel: true\n  ep: 4\n  kernels: fused\n  seq_length: 2048\n"
    "  micro_batch_size: 1\n  global_batch_size: 64\n  dtype: bf16\n";

TEST(MegatronHybridExport, LatentExpertsAndHybridMtpGoOutAndComeBack) {
  test::ScratchDir dir;
  const RoundTrip t = export_and_import(dir, kLatentMtpConfig);
  const std::string& text = t.text;
  // [MG-hybrid] parse_hybrid_pattern's unified form: main '|' stages, then '/' a depth.
  EXPECT_NE(text.find("--hybrid-layer-pattern \"M*ME|M-ME/*E/*E\"\n"), std::string::npos) << text;
  for (const char* flag :
       {"--moe-latent-size 512\n", "--mtp-num-layers 2\n", "--mtp-use-repeated-layer\n"})
    EXPECT_NE(text.find(flag), std::string::npos) << flag << text;
  const Config b = load_config(t.back);
  EXPECT_EQ(b.model.shape->hybrid_pattern, "M*MEM-ME");
  EXPECT_EQ(b.model.shape->mtp_pattern, "*E");
  EXPECT_EQ(b.model.shape->mtp_layers, 2);
  EXPECT_TRUE(b.model.shape->mtp_shared);
  EXPECT_EQ(b.model.shape->moe.latent_size, 512);
  EXPECT_EQ(simulated_time(t.back), t.exported["iteration_time_ms"]) << text;

  // The deprecated spelling with --mtp-num-layers is the same block ([MG-args]'s conversion);
  // a --mtp-num-layers that disagrees with the '/' depths loses to them, with a note.
  std::string legacy = test::slurp(t.given);
  legacy.replace(legacy.find("/*E/*E"), 6, "");
  legacy += " --mtp-hybrid-override-pattern \"*E\"\n";
  const std::string legacy_file = test::write_file(dir.file("legacy.txt"), legacy);
  const std::string legacy_back = dir.file("legacy.yaml");
  const test::CliRun l = run_cli("import megatron '" + legacy_file +
                                 "' --preset h100-sxm --devices 16 --out '" + legacy_back + "'");
  ASSERT_EQ(l.code, 0) << l.err << "\n" << legacy;
  EXPECT_EQ(load_config(legacy_back).model.shape->mtp_pattern, "*E");
  EXPECT_EQ(load_config(legacy_back).model.shape->mtp_layers, 2);
  std::string conflict = test::slurp(t.given);
  conflict.replace(conflict.find("--mtp-num-layers 2"), 18, "--mtp-num-layers 3");
  const test::CliRun c =
      run_cli("import megatron '" + test::write_file(dir.file("conflict.txt"), conflict) +
              "' --preset h100-sxm --devices 16");
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.err.find("--mtp-num-layers 3 is not the 2 MTP depths of --hybrid-layer-pattern"),
            std::string::npos)
      << c.err;
}

TEST(MegatronHybridExport, AMixerMegatronCannotStateIsRefused) {
  test::ScratchDir dir;
  std::string yaml = kHybridConfig;
  yaml.replace(yaml.find("groups: 8}"), 10, "groups: 8, chunk_size: 256}");
  const std::string config = test::write_file(dir.file("chunk.yaml"), yaml);
  const test::CliRun x = run_cli("export '" + config + "' --format megatron");
  EXPECT_EQ(x.code, 2) << x.out;
  EXPECT_NE(x.err.find("chunk_size 256"), std::string::npos) << x.err;
}

}  // namespace hybrid_interop_test
}  // namespace bmpipe
