// DeepSeek sparse attention through Megatron-LM's flags: --experimental-attention-variant dsa
// and the indexer's flags import as model.dsa, export back to the same job, and bad or
// unmodelled combinations exit 2 naming FILE:LINE:flag.
#include <gtest/gtest.h>

#include "experiment/config.hpp"
#include "support/megatron_round_trip.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace dsa_interop_test {

using test::run_cli;
using test::ScratchDir;
using test::write_file;

// A small MLA model (lines 1-4), its DSA flags from the end of line 4 (the variant and
// the heads) to line 5 (the head width and the top-k).
const std::string kMla =
    "--num-layers 4 --hidden-size 1024 --num-attention-heads 8 --swiglu \\\n"                // 1
    "  --vocab-size 32000 --attention-dropout 0 --hidden-dropout 0 --use-flash-attn \\\n"    // 2
    "  --multi-latent-attention --q-lora-rank 256 --kv-lora-rank 128 --qk-head-dim 64 \\\n"  // 3
    "  --qk-pos-emb-head-dim 32 --v-head-dim 64 ";                                           // 4
const std::string kDsa =
    "--experimental-attention-variant dsa --dsa-indexer-n-heads 4 \\\n"  // 4 (cont.)
    "  --dsa-indexer-head-dim 64 --dsa-indexer-topk 512";                // 5
const std::string kParallel =
    " \\\n  --seq-length 2048 --micro-batch-size 1 --bf16 --pipeline-model-parallel-size 2 "
    "--global-batch-size 16\n";

TEST(DsaInterop, ImportsAndComesBackFromTheExport) {
  ScratchDir dir;
  // The script without DSA, the DSA flags after it: the second import reads the model
  // from the export alone.
  const std::string mla = kMla + kParallel;
  const auto rt = test::megatron_round_trip(
      dir, mla,
      kDsa.substr(0, kDsa.size()) +
          " --dsa-indexer-loss-coeff 0.01 --dsa-indexer-use-sparse-loss\n",
      "h100-sxm", 8);
  const Config c = load_config(rt.yaml);
  EXPECT_EQ(c.model.shape->dsa.index_heads, 4);
  EXPECT_EQ(c.model.shape->dsa.index_head_dim, 64);
  EXPECT_EQ(c.model.shape->dsa.index_topk, 512);
  EXPECT_TRUE(c.model.shape->dsa.indexer_loss);
  for (const char* flag : {"--experimental-attention-variant dsa\n", "--dsa-indexer-n-heads 4\n",
                           "--dsa-indexer-head-dim 64\n", "--dsa-indexer-topk 512\n",
                           "--dsa-indexer-use-sparse-loss\n"})
    EXPECT_NE(rt.exported.find(flag), std::string::npos) << flag << rt.exported;
  EXPECT_EQ(rt.second["iteration_time_ms"], rt.first["iteration_time_ms"]);
  EXPECT_EQ(rt.second["devices"][0]["peak_memory_bytes"],
            rt.first["devices"][0]["peak_memory_bytes"]);
  // Without the loss the indexer is frozen: a faster backward.
  ScratchDir dir2;
  const auto frozen = test::megatron_round_trip(dir2, mla, kDsa + "\n", "h100-sxm", 8);
  EXPECT_FALSE(load_config(frozen.yaml).model.shape->dsa.indexer_loss);
  EXPECT_LT(frozen.first["iteration_time_ms"].get<double>(),
            rt.first["iteration_time_ms"].get<double>());
  EXPECT_EQ(frozen.second["iteration_time_ms"], frozen.first["iteration_time_ms"]);
}

TEST(DsaInterop, BadFlagsNameFileLineAndFlag) {
  ScratchDir dir;
  struct Case {
    std::string model;
    std::string expect;
  };
  const std::string no_mla =
      "--num-layers 4 --hidden-size 1024 --num-attention-heads 8 --swiglu \\\n"
      "  --vocab-size 32000 --attention-dropout 0 --hidden-dropout 0 --use-flash-attn \\\n"
      "  --experimental-attention-variant dsa --dsa-indexer-n-heads 4 \\\n"
      "  --dsa-indexer-head-dim 64 --dsa-indexer-topk 512";
  const Case cases[] = {
      {kMla + "--experimental-attention-variant gdn",
       ":4: --experimental-attention-variant: the attention variant gdn is not one"},
      {no_mla, ":3: --experimental-attention-variant: dsa needs --multi-latent-attention"},
      {kMla + "--experimental-attention-variant dsa --dsa-indexer-n-heads 4 \\\n"
              "  --dsa-indexer-head-dim 64",
       ":4: --experimental-attention-variant: dsa needs --dsa-indexer-topk"},
      {kMla + kDsa + " --dsa-indexer-loss-coeff 0.01",
       ":5: --dsa-indexer-loss-coeff: the dense indexer loss"},
      {kMla + "--experimental-attention-variant dsa --dsa-indexer-n-heads 4 \\\n"
              "  --dsa-indexer-head-dim 16 --dsa-indexer-topk 512",
       ":5: --dsa-indexer-head-dim: 16 is narrower than --qk-pos-emb-head-dim 32"},
      {kMla + kDsa + " --dsa-indexer-topk 0", ":5: --dsa-indexer-topk: must be at least 1"},
  };
  int n = 0;
  for (const Case& c : cases) {
    const std::string script =
        write_file(dir.file(std::to_string(n++) + ".sh"), c.model + kParallel);
    const auto r = run_cli("import megatron " + script + " --preset h100-sxm --devices 8 --out " +
                           dir.file("out.yaml"));
    EXPECT_EQ(r.code, 2) << c.model << "\n" << r.all();
    EXPECT_NE(r.err.find(script + c.expect), std::string::npos) << r.err;
  }
}

TEST(DsaInterop, FrameworksWithoutAnIndexerRefuseTheExport) {
  const std::string yaml =
      std::string(BMPIPE_SOURCE_DIR) + "/configs/examples/h800_deepseek_v32_16k.yaml";
  const auto r = run_cli("export " + yaml + " --format mindformers");
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_NE(r.err.find("the MindFormers export does not state DeepSeek sparse attention "
                       "(model.dsa)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(run_cli("export " + yaml + " --format megatron").code, 0);
}

}  // namespace dsa_interop_test
}  // namespace bmpipe
