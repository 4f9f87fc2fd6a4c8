// `bmpipe import megatron` and Megatron-LM's own defaults (issue 41): a flag given at the
// value Megatron-LM's parser takes when it is absent (frameworks/megatron/flags.tsv's HARMLESS
// column, from megatron/training/arguments.py and the config dataclasses at NVIDIA/Megatron-LM
// d98e8a64ddf3) changes nothing and is only listed, while any other value of it is still
// refused; the router flags of negligible cost are inert, with the reason above their row;
// and the DeepSeek-V3 script Megatron-LM ships imports with nothing unmodelled but the
// kernel and dispatcher changes bmpipe does not cost.
#include <gtest/gtest.h>

#include <algorithm>
#include <charconv>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "api/import.hpp"
#include "frameworks/megatron/import.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace megatron_defaults_test {

// Llama-2-7B's shape, one micro-batch of 4096 tokens, 64 sequences per step, bf16 (as in
// megatron_test.cpp); kMoe makes its MLPs 8 experts, 2 per token, alltoall-dispatched.
const std::string kModel =
    "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 11008 --num-attention-heads 32 \\\n"
    "  --seq-length 4096 --vocab-size 32000 --swiglu --untie-embeddings-and-output-weights \\\n"
    "  --micro-batch-size 1 --global-batch-size 64 --bf16\n";
const std::string kMoe =
    kModel +
    "--num-experts 8 --moe-router-topk 2 --moe-grouped-gemm --moe-token-dispatcher-type alltoall\n";

ImportedJob import(const std::string& args) {
  return read_megatron_args(args, "args.txt");
}

bool listed(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

/// The flags of job.unmodelled.
std::set<std::string> unmodelled_flags(const ImportedJob& job) {
  std::set<std::string> flags;
  for (const Unmodelled& u : job.unmodelled) flags.insert(u.origin.key);
  return flags;
}

/// The '|'-separated values of a HARMLESS cell.
std::vector<std::string> alternatives(const std::string& cell) {
  std::vector<std::string> out;
  std::stringstream s(cell);
  for (std::string v; std::getline(s, v, '|');) out.push_back(v);
  return out;
}

/// A value that is none of `harmless`: a number plus one, else the text with a prefix.
std::string another_value(const std::string& harmless) {
  const std::string first = alternatives(harmless).front();
  double v = 0;
  const auto r = std::from_chars(first.data(), first.data() + first.size(), v);
  if (r.ec == std::errc() && r.ptr == first.data() + first.size()) {
    std::ostringstream s;
    s << v + 1;
    return s.str();
  }
  return "not-" + first;
}

// ---- Megatron-LM's defaults ----------------------------------------------------------------

// Checked by hand against Megatron-LM d98e8a64ddf3: each flag's default, and the source that
// sets it. Given explicitly, the flag is listed as Megatron-LM's default, not refused.
TEST(MegatronDefaults, TheParsersDefaultsAreInert) {
  const struct {
    const char* flag;
    const char* value;
  } defaults[] = {
      // megatron/core/transformer/transformer_config.py
      {"--fp8-margin", "0"},                         // fp8_margin: int = 0
      {"--fp8-interval", "1"},                       // fp8_interval: int = 1
      {"--moe-dispatch-fwd-dtype", "bf16"},          // moe_dispatch_fwd_dtype = 'bf16'
      {"--transformer-impl", "transformer_engine"},  // transformer_impl = "transformer_engine"
      {"--activation-offload-fraction", "1"},        // activation_offload_fraction: float = 1.0
      // megatron/core/model_parallel_config.py
      {"--cross-entropy-fusion-impl", "native"},  // cross_entropy_fusion_impl = 'native'
      {"--wgrad-deferral-limit", "0"},            // wgrad_deferral_limit: int = 0
      // megatron/training/arguments.py
      {"--optimizer", "adam"},      // add_argument('--optimizer', default='adam')
      {"--exp-avg-dtype", "fp32"},  // add_argument('--exp-avg-dtype', default='fp32')
      {"--megatron-fsdp-grad-comm-dtype", "auto"},  // default='auto'
  };
  for (const auto& d : defaults) {
    const std::string given = std::string(d.flag) + " " + d.value;
    const VocabularyEntry* e = megatron_vocabulary().find(d.flag);
    ASSERT_NE(e, nullptr) << d.flag;
    EXPECT_EQ(e->treatment, Treatment::unmodelled) << d.flag;
    EXPECT_TRUE(e->harmless_value(d.value)) << given;
    const ImportedJob job = import(kModel + given + "\n");
    EXPECT_TRUE(job.unmodelled.empty()) << given;
    EXPECT_TRUE(listed(job.ignored, given + " (Megatron-LM's default)")) << given;
    // Also as --flag=value.
    const ImportedJob eq = import(kModel + d.flag + "=" + d.value + "\n");
    EXPECT_TRUE(eq.unmodelled.empty()) << given;
  }
}

// Every default in the table: each HARMLESS value of a flag that takes one value, given, is
// listed and not refused; another value is refused as unmodelled, with the flag's reason.
TEST(MegatronDefaults, EveryDefaultInTheTableIsInertAndNothingElse) {
  int checked = 0;
  for (const VocabularyEntry& e : megatron_vocabulary().entries()) {
    if (!e.harmless) continue;
    ASSERT_EQ(e.treatment, Treatment::unmodelled) << e.name;
    ASSERT_TRUE(e.values.has_value()) << e.name;
    ASSERT_GE(e.values->first, 1) << e.name << ": a switch has no default to give";
    for (const std::string& v : alternatives(*e.harmless)) {
      const std::string given = e.name + " " + v;
      const ImportedJob job = import(kModel + given + "\n");
      EXPECT_TRUE(job.unmodelled.empty()) << given;
      EXPECT_TRUE(listed(job.ignored, given + " (Megatron-LM's default)")) << given;
      ++checked;
    }
    const std::string other = e.name + " " + another_value(*e.harmless);
    const ImportedJob job = import(kModel + other + "\n");
    ASSERT_EQ(job.unmodelled.size(), 1u) << other;
    EXPECT_EQ(job.unmodelled[0].given, other);
    EXPECT_EQ(job.unmodelled[0].reason, e.reason);
    EXPECT_FALSE(listed(job.ignored, other + " (Megatron-LM's default)")) << other;
  }
  // The column is filled for every flag whose default is a value (104 filled from the
  // parser, besides those set before, less the three since found of negligible cost and
  // made inert: --fp8-amax-history-len, --fp8-amax-compute-algo,
  // --empty-unused-memory-level), not for a handful.
  EXPECT_GE(checked, 97);
}

// The same flags at other values, as a user would write them: refused, naming the flag.
TEST(MegatronDefaults, AValueThatIsNotTheDefaultIsStillRefused) {
  for (const char* given :
       {"--fp8-margin 1", "--fp8-interval 2", "--num-layers-at-start-in-bf16 2",
        "--transformer-impl local", "--kitchen-attention-backend fa", "--wgrad-deferral-limit 2",
        "--exp-avg-dtype bf16", "--optimizer sgd", "--activation-offload-fraction 0.5",
        "--cross-entropy-fusion-impl te"}) {
    const ImportedJob job = import(kModel + given + "\n");
    ASSERT_EQ(job.unmodelled.size(), 1u) << given;
    EXPECT_EQ(job.unmodelled[0].given, given);
    EXPECT_EQ(job.unmodelled[0].origin.line, 4);
    EXPECT_TRUE(job.ignored.empty()) << given << ": " << job.ignored[0];
  }
  // Given twice, the last value counts, as in argparse: the default first is no cover.
  EXPECT_EQ(unmodelled_flags(import(kModel + "--fp8-margin 0 --fp8-margin 1\n")),
            std::set<std::string>{"--fp8-margin"});
}

// ---- router flags of negligible cost -------------------------------------------------------

/// The reason a '# negligible cost:' line above `flag`'s row in the table gives, or "".
std::string negligible_reason(const std::string& flag) {
  const std::string_view text = megatron_flags_text();
  const std::size_t row = text.find("\n" + flag + "\t");
  if (row == std::string_view::npos) return "";
  const std::size_t start = text.rfind('\n', row - 1);
  const std::string_view above =
      text.substr(start == std::string_view::npos ? 0 : start + 1,
                  row - (start == std::string_view::npos ? 0 : start + 1));
  const std::string_view prefix = "# negligible cost: ";
  if (above.substr(0, prefix.size()) != prefix) return "";
  return std::string(above.substr(prefix.size()));
}

// The router's own small ops (issue 41: a stock DeepSeek-V3 script needed --allow-unmodelled
// for them): inert, each with the reason its cost is negligible above its row.
TEST(MegatronRouterFlags, NegligibleOnesAreInertWithTheirReason) {
  const struct {
    const char* flag;
    const char* value;  // nullptr: a switch
  } router[] = {
      {"--moe-router-dtype", "fp32"},
      {"--moe-router-score-function", "sigmoid"},
      {"--moe-router-pre-softmax", nullptr},
      {"--moe-router-enable-expert-bias", nullptr},
      {"--moe-router-force-load-balancing", nullptr},
  };
  for (const auto& r : router) {
    const VocabularyEntry* e = megatron_vocabulary().find(r.flag);
    ASSERT_NE(e, nullptr) << r.flag;
    EXPECT_EQ(e->treatment, Treatment::inert) << r.flag;
    const std::string reason = negligible_reason(r.flag);
    EXPECT_NE(reason.find("experts"), std::string::npos) << r.flag << ": '" << reason << "'";
    const std::string given = std::string(r.flag) + (r.value ? std::string(" ") + r.value : "");
    const ImportedJob job = import(kMoe + given + "\n");
    EXPECT_TRUE(job.unmodelled.empty()) << given << ": " << job.unmodelled[0].given;
    EXPECT_TRUE(listed(job.ignored, std::string(r.flag) + " (not modelled)")) << given;
  }
  // The two defaults, and the router's scalars already inert.
  for (const char* given :
       {"--moe-router-load-balancing-type aux_loss", "--moe-router-score-function softmax",
        "--moe-router-load-balancing-type seq_aux_loss aux_loss", "--moe-aux-loss-coeff 1e-4",
        "--moe-router-bias-update-rate 1e-3", "--moe-router-topk-scaling-factor 2.5"})
    EXPECT_TRUE(import(kMoe + given + "\n").unmodelled.empty()) << given;
  // Every such comment stands above an inert row: the reason goes with the class.
  for (const VocabularyEntry& e : megatron_vocabulary().entries())
    if (!negligible_reason(e.name).empty()) {
      EXPECT_EQ(e.treatment, Treatment::inert) << e.name;
    }
  // The balancing is read for the capacity factor's rule (tests/frameworks/
  // mindformers_deepseek_test.cpp), and ignored otherwise.
  EXPECT_EQ(megatron_vocabulary().find("--moe-router-load-balancing-type")->treatment,
            Treatment::modelled);
  EXPECT_TRUE(listed(import(kMoe + "--moe-router-load-balancing-type seq_aux_loss\n").ignored,
                     "--moe-router-load-balancing-type (not modelled)"));
  // What changes the MoE layer's kernels stays refused.
  for (const char* given : {"--moe-permute-fusion", "--moe-router-fusion"})
    EXPECT_EQ(unmodelled_flags(import(kMoe + given + "\n")), std::set<std::string>{given});
}

// The delayed FP8 recipe's amax history and the allocator's cache (issue 41: Megatron-LM's
// Llama 3 8B FP8 example gives all three): inert at any value, each with the reason its cost
// is negligible, citing Megatron-LM's source, above its row.
TEST(MegatronNegligibleFlags, AmaxHistoryAndEmptyCacheAreInertWithTheirReason) {
  const struct {
    const char* given;
    const char* cites;  // the file the reason cites
  } flags[] = {
      {"--fp8-amax-history-len 1024", "transformer_engine.py:3360"},
      {"--fp8-amax-compute-algo max", "transformer_engine.py:3360"},
      {"--empty-unused-memory-level 2", "training.py:3229"},
  };
  for (const auto& f : flags) {
    const std::string flag = std::string(f.given).substr(0, std::string(f.given).find(' '));
    const VocabularyEntry* e = megatron_vocabulary().find(flag);
    ASSERT_NE(e, nullptr) << flag;
    EXPECT_EQ(e->treatment, Treatment::inert) << flag;
    EXPECT_NE(negligible_reason(flag).find(f.cites), std::string::npos) << flag;
    const ImportedJob job = import(kModel + f.given + "\n");
    EXPECT_TRUE(job.unmodelled.empty()) << f.given;
    EXPECT_TRUE(listed(job.ignored, flag + " (not modelled)")) << f.given;
  }
  // The cross-entropy fusion beside them is a change of kernels, 3.6 % of the Llama 3 8B
  // example's iteration in bmpipe's own cost (tests/frameworks/megatron_stock_scripts_test.cpp):
  // still refused.
  EXPECT_EQ(unmodelled_flags(import(kModel + "--cross-entropy-loss-fusion\n")),
            std::set<std::string>{"--cross-entropy-loss-fusion"});
}

// ---- the DeepSeek-V3 script Megatron-LM ships ----------------------------------------------

const std::string kDeepSeekV3 =
    std::string(BMPIPE_TEST_DATA_DIR) + "/megatron/deepseek_v3_mfsdp_args.txt";

/// `text` without the lines whose first word is one of `flags` (the script has one flag a
/// line).
std::string without(const std::string& text, const std::vector<std::string>& flags) {
  std::stringstream in(text);
  std::string out;
  for (std::string line; std::getline(in, line);) {
    std::string first;
    std::stringstream(line) >> first;
    if (std::find(flags.begin(), flags.end(), first) == flags.end()) out += line + "\n";
  }
  return out;
}

// examples/megatron_fsdp/sbatch_mfsdp_deepseek_v3.sh (tests/data/megatron, with its source):
// the router flags are no longer in the way. What is left unmodelled changes kernels bmpipe
// does not cost: the fused permute (--moe-permute-fusion, which --enable-experimental turns
// on in the flex dispatcher) and the HybridEP dispatcher backend.
TEST(MegatronStockScripts, DeepSeekV3AsMegatronLmShipsIt) {
  std::string text = test::slurp(kDeepSeekV3);
  ASSERT_NE(text.find("--moe-router-dtype fp32"), std::string::npos);
  // --kv-channels is read now (model.head_dim, issue 41); with MLA, whose head widths are
  // its own, it changes nothing and is listed so.
  ASSERT_NE(text.find("--kv-channels"), std::string::npos);
  const ImportedJob job = read_megatron_args(text, "deepseek_v3.sh");
  EXPECT_TRUE(listed(job.ignored, "--kv-channels (no effect with --multi-latent-attention)"));
  EXPECT_EQ(job.shape->explicit_head_dim, 0);
  EXPECT_EQ(unmodelled_flags(job),
            (std::set<std::string>{"--moe-permute-fusion", "--enable-experimental",
                                   "--moe-token-dispatcher-type"}));
  for (const char* flag :
       {"--moe-router-dtype", "--moe-router-score-function", "--moe-router-pre-softmax",
        "--moe-router-enable-expert-bias", "--moe-router-load-balancing-type",
        "--moe-router-force-load-balancing", "--moe-aux-loss-coeff",
        "--moe-router-bias-update-rate", "--moe-router-topk-scaling-factor"})
    EXPECT_TRUE(listed(job.ignored, std::string(flag) + " (not modelled)")) << flag;
  EXPECT_TRUE(listed(job.ignored, "--transformer-impl transformer_engine (Megatron-LM's default)"));
  ASSERT_TRUE(job.shape.has_value());
  EXPECT_EQ(job.shape->moe.num_experts, 256);
  EXPECT_EQ(job.shape->moe.top_k, 8);

  // Without those three (the alltoall dispatcher for flex), the job imports on 64 H800s with
  // no --allow-unmodelled, checked as simulate checks it.
  text = without(
      text, {"--moe-permute-fusion", "--enable-experimental", "--moe-flex-dispatcher-backend"});
  const std::size_t flex = text.find("--moe-token-dispatcher-type flex");
  ASSERT_NE(flex, std::string::npos);
  text.replace(flex, std::string("--moe-token-dispatcher-type flex").size(),
               "--moe-token-dispatcher-type alltoall");
  test::ScratchDir dir;
  api::ImportRequest request;
  request.format = "megatron";
  request.input = test::write_file(dir.file("deepseek_v3.sh"), text);
  request.preset = "h800";
  request.devices = 64;
  const api::ImportOutcome out = api::run_import(request);
  EXPECT_TRUE(out.warnings.empty());
  EXPECT_NE(out.yaml.find("num_experts: 256"), std::string::npos);
}

}  // namespace megatron_defaults_test
}  // namespace bmpipe
