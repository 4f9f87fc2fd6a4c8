// Hybrid sharding and FSDP2 without resharding after forward through the Megatron-LM
// importer and exporter (issue 39 item 3): --num-distributed-optimizer-instances N is read
// as training.fsdp_shard_group = dp x cp / N (NVIDIA/Megatron-LM d98e8a64,
// megatron/core/parallel_state.py: the intra-instance groups hold (dp x cp) / N consecutive
// ranks), --torch-fsdp2-no-reshard-after-forward as training.fsdp_reshard_after_forward
// false (megatron/training/arguments.py: store_false of torch_fsdp2_reshard_after_forward),
// and both are written back by `bmpipe export --format megatron`.
#include <gtest/gtest.h>

#include <string>

#include "experiment/config.hpp"
#include "frameworks/common/import_common.hpp"
#include "frameworks/megatron/import.hpp"
#include "frameworks/torchtitan/import.hpp"
#include "support/framework_files.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace hsdp_interop_test {

// Llama-2-7B, tp 2, pp 2 over 16 devices (two nodes of 8 H200): dp 4.
const std::string kLlama =
    "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 11008 --num-attention-heads 32 \\\n"
    "  --seq-length 4096 --vocab-size 32000 --swiglu --untie-embeddings-and-output-weights \\\n"
    "  --micro-batch-size 1 --global-batch-size 64 --bf16 \\\n"
    "  --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2\n";

std::string yaml_of(const std::string& flags, const std::string& out) {
  return imported_yaml(read_megatron_args(kLlama + flags, "args.txt"),
                       cluster_from_preset("h200", 16), out);
}

Config config_from(const std::string& flags) {
  return parse_config(yaml_of(flags, "out.yaml"), "out.yaml");
}

// dp 4 in 2 copies: shard groups of 2.
TEST(HsdpImport, InstancesBecomeTheShardGroup) {
  const Config c =
      config_from("--use-distributed-optimizer --num-distributed-optimizer-instances 2\n");
  EXPECT_EQ(c.training.optimizer.zero_stage, 1);
  EXPECT_EQ(c.training.fsdp_shard_group, 2);
  // One instance is the whole dp group: nothing written, the default 0.
  EXPECT_EQ(config_from("--use-distributed-optimizer --num-distributed-optimizer-instances 1\n")
                .training.fsdp_shard_group,
            0);
  // Without a sharded optimizer Megatron reduces over the whole dp group: a note, no key.
  const ImportedJob plain =
      read_megatron_args(kLlama + "--num-distributed-optimizer-instances 2\n", "args.txt");
  EXPECT_FALSE(plain.shard_copies.has_value());
  EXPECT_FALSE(plain.notes.empty());
}

TEST(HsdpImport, InstancesThatDoNotDivideDpAreRefused) {
  try {
    yaml_of("--use-distributed-optimizer --num-distributed-optimizer-instances 3\n", "o.yaml");
    ADD_FAILURE() << "accepted";
  } catch (const ImportError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("args.txt:5"), std::string::npos) << what;
    EXPECT_NE(what.find("--num-distributed-optimizer-instances"), std::string::npos) << what;
    EXPECT_NE(what.find("dp x cp = 4"), std::string::npos) << what;
  }
}

TEST(HsdpImport, NoReshardAfterForwardIsReadUnderFsdp2Only) {
  const Config c = config_from("--use-torch-fsdp2 --torch-fsdp2-no-reshard-after-forward\n");
  EXPECT_EQ(c.training.optimizer.zero_stage, 3);
  EXPECT_FALSE(c.training.fsdp_reshard_after_forward);
  const Config alone = config_from("--torch-fsdp2-no-reshard-after-forward\n");
  EXPECT_TRUE(alone.training.fsdp_reshard_after_forward);
}

std::string export_of(const std::string& flags) {
  test::ScratchDir dir;
  const std::string yaml =
      test::write_file(dir.file("hsdp_job.yaml"), yaml_of(flags, dir.file("hsdp_job.yaml")));
  const test::CliRun r = test::run_cli("export '" + yaml + "' --format megatron");
  EXPECT_EQ(r.code, 0) << r.err;
  return test::export_flag_lines(r.out);
}

TEST(HsdpExport, BothRoundTrip) {
  const std::string hsdp =
      export_of("--use-distributed-optimizer --num-distributed-optimizer-instances 2\n");
  EXPECT_NE(hsdp.find("--num-distributed-optimizer-instances 2\n"), std::string::npos) << hsdp;
  EXPECT_EQ(config_from(hsdp).training.fsdp_shard_group, 2);
  // Megatron's copies all-reduce once an iteration.
  EXPECT_FALSE(config_from(hsdp).training.fsdp_all_reduce_every_microbatch);
  const std::string kept = export_of("--use-torch-fsdp2 --torch-fsdp2-no-reshard-after-forward\n");
  EXPECT_NE(kept.find("--use-torch-fsdp2\n--torch-fsdp2-no-reshard-after-forward\n"),
            std::string::npos)
      << kept;
  EXPECT_EQ(kept.find("--use-megatron-fsdp"), std::string::npos) << kept;
  const Config back = config_from(kept);
  EXPECT_EQ(back.training.optimizer.zero_stage, 3);
  EXPECT_FALSE(back.training.fsdp_reshard_after_forward);
}

// torchtitan's HSDP ([parallelism] data_parallel_replicate_degree 2 x shard degree 4, tp 2,
// on 16 devices): fully_shard over the 4 shard ranks, replicated twice, so the state
// shards over dp x cp / 2 = 4 ranks; fsdp_reshard_after_forward "never" (at pp 1) keeps the
// gathered parameters through the backward.
const std::string kTitanHsdp = R"([model]
name = "llama3"
flavor = "8B"

[training]
local_batch_size = 8
seq_len = 4096

[parallelism]
data_parallel_replicate_degree = 2
data_parallel_shard_degree = 4
tensor_parallel_degree = 2
fsdp_reshard_after_forward = "never"
)";

std::string titan_yaml(const std::string& out) {
  const ImportedJob job = read_torchtitan_toml(kTitanHsdp, "hsdp.toml");
  EXPECT_TRUE(job.unmodelled.empty());
  return imported_yaml(job, cluster_from_preset("h200", 16), out);
}

TEST(HsdpImport, TorchtitanReplicasAndNeverReshard) {
  const Config c = parse_config(titan_yaml("hsdp.yaml"), "hsdp.yaml");
  EXPECT_EQ(c.training.optimizer.zero_stage, 3);
  EXPECT_EQ(c.training.fsdp_shard_group, 4);
  EXPECT_FALSE(c.training.fsdp_reshard_after_forward);
  // FSDP2's HSDP all-reduces across the replicas in every backward (torchtitan b5bcd76c,
  // torchtitan/trainer.py: each gradient-accumulation step calls loss.backward() and
  // nothing calls set_requires_all_reduce).
  EXPECT_TRUE(c.training.fsdp_all_reduce_every_microbatch);
}

// And back: `bmpipe export --format torchtitan` writes the replicas and "never".
TEST(HsdpExport, TorchtitanWritesReplicasAndNever) {
  test::ScratchDir dir;
  const std::string yaml =
      test::write_file(dir.file("tt_hsdp.yaml"), titan_yaml(dir.file("tt_hsdp.yaml")));
  const test::CliRun r = test::run_cli("export '" + yaml + "' --format torchtitan");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("data_parallel_replicate_degree = 2\ndata_parallel_shard_degree = 4\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("fsdp_reshard_after_forward = \"never\"\n"), std::string::npos) << r.out;
}

}  // namespace hsdp_interop_test
}  // namespace bmpipe
