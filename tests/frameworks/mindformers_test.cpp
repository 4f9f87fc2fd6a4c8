// `bmpipe import mindformers`: a MindFormers YAML read with MindFormers' own defaults and
// rules (mindformers/models/utils.py LayerSetting, llama_layer.py LlamaFeedForward,
// llama_config.py, trainer/base_trainer.py at fd4deebc1; docs/feature_cards/
// Offset_Recompute.md), worked by hand or checked against published model shapes; the
// round trip through the plan export; and the YAML, which must load.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "frameworks/mindformers/export.hpp"
#include "frameworks/mindformers/formats.hpp"
#include "frameworks/mindformers/import.hpp"
#include "support/export_layouts.hpp"
#include "support/export_readback.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace mindformers_test {

using R = Recompute;
using test::decode_mindformers;
using test::Decoded;
using test::dominates;
using test::layout_of;
using test::mentions;
using test::plan;
using test::yaml_value;

// A MindFormers-style config written for these tests: Llama-2-7B on 16 devices, dp 2,
// mp 2, 4 pipeline stages. Line numbers matter to the tests below.
const std::string kConfig = R"(seed: 0
run_mode: 'train'
runner_config:
  epochs: 1
  batch_size: 1
  sink_mode: True
parallel:
  parallel_mode: 1
  enable_parallel_optimizer: True
  pipeline_config:
    pipeline_interleave: False
    pipeline_scheduler: '1f1b'
parallel_config:
  data_parallel: 2
  model_parallel: 2
  pipeline_stage: 4
  use_seq_parallel: True
  micro_batch_num: 16
  vocab_emb_dp: False
recompute_config:
  recompute: [1, 1, 0, 0]
  select_recompute: [2, 2, 1, 0]
  mp_comm_recompute: True
model:
  model_config:
    type: LlamaConfig
    seq_length: 4096
    hidden_size: 4096
    num_layers: 32
    num_heads: 32
    n_kv_heads: null
    intermediate_size: 11008
    vocab_size: 32000
    compute_dtype: "bfloat16"
    use_flash_attention: True
    offset: [1, 1, 0, -2]
    rms_norm_eps: 1.0e-5
  arch:
    type: LlamaForCausalLM
)";

ImportedJob import(const std::string& yaml) {
  return read_mindformers_yaml(yaml, "mf.yaml");
}

/// `text` with `from` (the rest of its line after the indentation) replaced by `to`; an
/// empty `to` deletes the whole line.
std::string with(std::string text, const std::string& from, const std::string& to) {
  const std::size_t at = text.find(from);
  if (at == std::string::npos) throw std::invalid_argument("no '" + from + "'");
  const std::size_t end = text.find('\n', at);
  if (!to.empty()) return text.replace(at, end - at, to);
  const std::size_t start = at == 0 ? 0 : text.rfind('\n', at - 1) + 1;
  return text.erase(start, end + 1 - start);
}

std::string error_of(const std::string& yaml) {
  try {
    import(yaml);
  } catch (const ImportError& e) {
    return e.what();
  }
  return "<accepted>";
}

/// An exported fragment made a whole config: the model's shape and the rest of
/// parallel_config added under the fragment's own sections.
std::string whole(const std::string& fragment, int layers) {
  std::string text = fragment;
  const std::string mc = "  model_config:\n";
  text.insert(text.find(mc) + mc.size(),
              "    num_layers: " + std::to_string(layers) +
                  "\n    hidden_size: 1024\n    num_heads: 8\n    intermediate_size: 2816\n"
                  "    vocab_size: 32000\n    seq_length: 2048\n");
  const std::string pc = "parallel_config:\n";
  text.insert(text.find(pc) + pc.size(), "  data_parallel: 1\n  micro_batch_num: 8\n");
  return text;
}

// ---- the round trip -----------------------------------------------------------------------

TEST(MindFormersImport, TheWorkedOffsetExample) {
  const ImportedJob job = import(kConfig);
  EXPECT_EQ(job.pp, 4);
  EXPECT_EQ(job.vpp, 1);
  EXPECT_EQ(job.partition, (std::vector<int>{9, 9, 8, 6}));
  // recompute [1, 1, 0, 0], select_recompute [2, 2, 1, 0]: the first layer of stages 0
  // and 1 full, the second selective; stage 2's first selective.
  std::vector<R> expected(32, R::none);
  expected[0] = expected[9] = R::full;
  expected[1] = expected[10] = expected[18] = R::selective;
  EXPECT_EQ(job.recompute, expected);
  std::vector<std::string> notes;
  const std::string back = export_mindformers(layout_of(job), &notes);
  EXPECT_NE(back.find("    offset: [1, 1, 0, -2]\n"), std::string::npos) << back;
  EXPECT_NE(back.find("  recompute: [1, 1, 0, 0]\n"), std::string::npos) << back;
  EXPECT_NE(back.find("  select_recompute: [2, 2, 1, 0]\n"), std::string::npos) << back;
}

// The export's fragments, made whole configs, read back as their plans and export to the
// same text: flat lists, 2-D lists with interleaving, the feature card's layout, every
// layer full.
TEST(MindFormersImport, ExportedKeysReadBackAsTheirPlan) {
  const ExportLayout plans[] = {
      plan(4, 1, {9, 9, 8, 6}),
      plan(4, 1, {9, 9, 8, 6}, {{1, 2}, {1, 0}, {0, 3}, {0, 0}}),
      plan(4, 1, {8, 8, 8, 8}, {{8, 0}, {8, 0}, {8, 0}, {8, 0}}),
      plan(2, 2, {3, 2, 2, 3}, {{2, 0}, {1, 1}, {0, 2}, {0, 0}}),
      plan(5, 2, {4, 5, 5, 5, 5, 5, 5, 5, 5, 4}, {{4, 0}, {3, 1}, {0, 5}}),
      plan(3, 1, {0, 5, 5}),
  };
  for (const ExportLayout& l : plans) {
    std::vector<std::string> notes;
    const std::string fragment = export_mindformers(l, &notes);
    const int layers = static_cast<int>(l.recompute.size());
    const ImportedJob job = import(whole(fragment, layers));
    EXPECT_EQ(job.pp, l.pp) << fragment;
    EXPECT_EQ(job.vpp, l.vpp) << fragment;
    EXPECT_EQ(job.partition, l.partition) << fragment;
    EXPECT_EQ(job.recompute, l.recompute) << fragment;
    EXPECT_EQ(job.schedule, l.vpp > 1 ? "interleaved" : "1f1b");
    EXPECT_EQ(export_mindformers(layout_of(job), nullptr), fragment);
  }
}

// ---- MindFormers' rules -------------------------------------------------------------------

// Without intermediate_size the Llama rule gives the published MLP widths: Llama-2-7B
// 11008, Llama-2-70B 28672, Llama-3-8B 14336 (their HF config.json intermediate_size).
TEST(MindFormersImport, TheLlamaMlpRule) {
  struct Case {
    int hidden;
    const char* multiplier;  // nullptr: none
    int multiple_of;
    int expected;
  };
  const Case cases[] = {
      {4096, nullptr, 256, 11008}, {8192, "1.3", 4096, 28672}, {4096, "1.3", 1024, 14336}};
  for (const Case& c : cases) {
    std::string yaml =
        with(kConfig, "intermediate_size: 11008", "multiple_of: " + std::to_string(c.multiple_of));
    yaml = with(yaml, "hidden_size: 4096", "hidden_size: " + std::to_string(c.hidden));
    if (c.multiplier)
      yaml = with(yaml, "n_kv_heads: null", std::string("ffn_dim_multiplier: ") + c.multiplier);
    EXPECT_EQ(import(yaml).shape->ffn_hidden_size, c.expected) << c.hidden;
  }
  // multiple_of defaults to 256.
  EXPECT_EQ(import(with(kConfig, "intermediate_size: 11008", "")).shape->ffn_hidden_size, 11008);
}

TEST(MindFormersImport, ShapeBatchAndDefaults) {
  const ImportedJob job = import(kConfig);
  const ModelShape& m = *job.shape;
  EXPECT_EQ(m.architecture, Architecture::llama);
  EXPECT_EQ(m.num_layers, 32);
  EXPECT_EQ(m.num_kv_heads, 32);  // n_kv_heads null: one per head
  EXPECT_EQ(m.vocab_size, 32000);
  EXPECT_FALSE(m.tied_embeddings);
  EXPECT_EQ(job.flash_attention, true);
  EXPECT_EQ(job.dp, 2);
  EXPECT_EQ(job.tp, 2);
  EXPECT_EQ(job.microbatches, 16);
  EXPECT_EQ(job.micro_batch_size, 1);
  EXPECT_EQ(job.seq_length, 4096);
  EXPECT_EQ(job.dtype, "bf16");
  EXPECT_EQ(job.sequence_parallel, true);
  EXPECT_EQ(job.zero_stage, 1);
  // LlamaConfig's defaults: float16, no flash attention.
  const ImportedJob plain = import(
      with(with(kConfig, "compute_dtype: \"bfloat16\"", ""), "use_flash_attention: True", ""));
  EXPECT_EQ(plain.dtype, "fp16");
  EXPECT_EQ(plain.flash_attention, false);
  // Without pipeline stages the micro-batches are the gradient accumulation steps.
  std::string flat = with(kConfig, "pipeline_stage: 4", "pipeline_stage: 1");
  flat = with(flat, "offset: [1, 1, 0, -2]", "offset: 0");
  flat = with(flat, "recompute: [1, 1, 0, 0]", "recompute: [3]");
  flat = with(flat, "select_recompute: [2, 2, 1, 0]", "select_recompute: False");
  flat = with(flat, "batch_size: 1", "batch_size: 2\n  gradient_accumulation_steps: 8");
  const ImportedJob ga = import(flat);
  EXPECT_EQ(ga.pp, 1);
  EXPECT_EQ(ga.microbatches, 8);
  EXPECT_EQ(ga.micro_batch_size, 2);
  EXPECT_EQ(ga.partition, (std::vector<int>{32}));
  EXPECT_EQ(std::count(ga.recompute.begin(), ga.recompute.end(), R::full), 3);
  // With stages, gradient accumulation is not used, and a note says so.
  const ImportedJob pipelined =
      import(with(kConfig, "batch_size: 1", "batch_size: 1\n  gradient_accumulation_steps: 4"));
  EXPECT_EQ(pipelined.microbatches, 16);
  EXPECT_NE(std::find_if(pipelined.notes.begin(), pipelined.notes.end(),
                         [](const std::string& n) {
                           return n.find("gradient_accumulation_steps has no effect") !=
                                  std::string::npos;
                         }),
            pipelined.notes.end());
}

TEST(MindFormersImport, RecomputeValues) {
  auto modes = [](const std::string& recompute, const std::string& select) {
    std::string yaml = with(kConfig, "recompute: [1, 1, 0, 0]", "recompute: " + recompute);
    return import(with(yaml, "select_recompute: [2, 2, 1, 0]", "select_recompute: " + select))
        .recompute;
  };
  const std::vector<R> none(32, R::none), full(32, R::full), sel(32, R::selective);
  EXPECT_EQ(modes("True", "False"), full);
  EXPECT_EQ(modes("False", "True"), sel);
  EXPECT_EQ(modes("True", "[1, 1, 1, 1]"), full);  // full wins
  EXPECT_EQ(modes("False", "False"), none);
  // Counts past a stage's size take the stage, and True in a list the whole stage too.
  std::vector<R> first_stage = none;
  std::fill(first_stage.begin(), first_stage.begin() + 9, R::full);
  EXPECT_EQ(modes("[100, 0, 0, 0]", "False"), first_stage);
  EXPECT_EQ(modes("[True, 0, 0, 0]", "False"), first_stage);
  // Operator names recompute in every layer.
  EXPECT_EQ(modes("False", "['feed_forward\\.mul']"), sel);
  // A mapping of patterns: the layers any pattern covers.
  std::vector<R> patterns = none;
  patterns[0] = patterns[1] = patterns[9] = R::selective;
  const ImportedJob dict = import(with(
      kConfig, "select_recompute: [2, 2, 1, 0]",
      "select_recompute: {'feed_forward\\.mul': [2, 0, 0, 0], 'attention\\.wq': [1, 1, 0, 0]}"));
  std::vector<R> with_full = patterns;
  with_full[0] = with_full[9] = R::full;  // recompute [1, 1, 0, 0] still applies
  EXPECT_EQ(dict.recompute, with_full);
}

// pp 2, interleave 2, 10 layers, offset [[1, 0], [0, 1]]: stages of 3, 2, 2, 3. A flat
// recompute list [3, 1] deals rank 0's three layers to its interleaves in turn (2 to the
// first, 1 to the second) and rank 1's one to its first.
TEST(MindFormersImport, AFlatListWithInterleaving) {
  std::string yaml = with(kConfig, "pipeline_interleave: False", "pipeline_interleave: True");
  yaml = with(yaml, "pipeline_stage: 4", "pipeline_stage: 2");
  yaml = with(yaml, "num_layers: 32", "num_layers: 10\n    pp_interleave_num: 2");
  yaml = with(yaml, "offset: [1, 1, 0, -2]", "offset: [[1, 0], [0, 1]]");
  yaml = with(yaml, "recompute: [1, 1, 0, 0]", "recompute: [3, 1]");
  yaml = with(yaml, "select_recompute: [2, 2, 1, 0]", "select_recompute: False");
  const ImportedJob job = import(yaml);
  EXPECT_EQ(job.vpp, 2);
  EXPECT_EQ(job.partition, (std::vector<int>{3, 2, 2, 3}));
  EXPECT_EQ(job.recompute, (std::vector<R>{R::full, R::full, R::none, R::full, R::none, R::full,
                                           R::none, R::none, R::none, R::none}));
  EXPECT_EQ(job.schedule, "interleaved");
  // GPipe has no interleaved form in MindFormers (nor in bmpipe's schedule table).
  try {
    import(with(yaml, "pipeline_scheduler: '1f1b'", "pipeline_scheduler: gpipe"));
    ADD_FAILURE() << "gpipe with pp_interleave_num 2 was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "parallel.pipeline_config.pipeline_scheduler");
    EXPECT_EQ(e.message(), "gpipe runs one stage per rank; pp_interleave_num must be 1");
  }
  // Without the pipeline_interleave context MindFormers runs one stage per rank.
  const ImportedJob off =
      import(with(with(yaml, "pipeline_interleave: True", "pipeline_interleave: False"),
                  "offset: [[1, 0], [0, 1]]", "offset: 0"));
  EXPECT_EQ(off.vpp, 1);
  EXPECT_EQ(off.partition, (std::vector<int>{5, 5}));
}

TEST(MindFormersImport, SchedulersAndIgnoredKeys) {
  const ImportedJob job = import(kConfig);
  for (const char* key :
       {"seed (not modelled)", "run_mode (not modelled)", "runner_config.epochs (not modelled)",
        "parallel.parallel_mode (not modelled)",
        "recompute_config.mp_comm_recompute (not modelled)",
        "model.model_config.rms_norm_eps (not modelled)", "model.arch (not modelled)"})
    EXPECT_NE(std::find(job.ignored.begin(), job.ignored.end(), key), job.ignored.end()) << key;
  EXPECT_EQ(
      import(with(kConfig, "pipeline_scheduler: '1f1b'", "pipeline_scheduler: gpipe")).schedule,
      "gpipe");
  const ImportedJob seq =
      import(with(kConfig, "pipeline_scheduler: '1f1b'", "pipeline_scheduler: seqpipe"));
  EXPECT_EQ(seq.schedule, "1f1b");
  EXPECT_NE(std::find(seq.notes.begin(), seq.notes.end(),
                      "pipeline_scheduler seqpipe is not modelled; simulated as 1f1b."),
            seq.notes.end());
}

TEST(MindFormersImport, ErrorsNameTheFileLineAndKey) {
  struct Case {
    std::string from, to, expected;
  };
  const Case cases[] = {
      {"offset: [1, 1, 0, -2]", "offset: [1, 1, 0, -1]",
       "mf.yaml:36: model.model_config.offset: the offsets add up to 1; MindFormers requires "
       "num_layers % (pipeline_stage * pp_interleave_num) = 32 % 4 = 0"},
      {"offset: [1, 1, 0, -2]", "offset: [1, -1]",
       "mf.yaml:36: model.model_config.offset: has 2 entries"},
      {"offset: [1, 1, 0, -2]", "offset: [-9, 9, 0, 0]",
       "mf.yaml:36: model.model_config.offset: stage 0 would hold -1 layers"},
      {"offset: [1, 1, 0, -2]", "offset: [[1, 1, 0, -2]]", "<accepted>"},
      {"offset: [1, 1, 0, -2]", "offset: [[1, 1], [0, -2]]",
       "mf.yaml:36: model.model_config.offset: has 2 rows; a 2-D offset has one per interleave"},
      {"offset: [1, 1, 0, -2]", "offset: [[1, 1, -2]]",
       "mf.yaml:36: model.model_config.offset: each row needs 4 entries"},
      {"offset: [1, 1, 0, -2]", "offset: one",
       "mf.yaml:36: model.model_config.offset: expected an integer"},
      {"recompute: [1, 1, 0, 0]", "recompute: [1, 1, 0]",
       "mf.yaml:21: recompute_config.recompute: has 3 entries"},
      {"recompute: [1, 1, 0, 0]", "recompute: [1, -1, 0, 0]",
       "mf.yaml:21: recompute_config.recompute[1]: must be at least 0, got -1"},
      {"recompute: [1, 1, 0, 0]", "recompute: 3",
       "mf.yaml:21: recompute_config.recompute: expected True, False or a list"},
      {"compute_dtype: \"bfloat16\"", "compute_dtype: float32",
       "mf.yaml:34: model.model_config.compute_dtype: unknown value 'float32'"},
      {"num_layers: 32", "", "mf.yaml:26: model.model_config.num_layers: missing"},
      {"num_layers: 32", "num_layers: 32.5",
       "mf.yaml:29: model.model_config.num_layers: expected "
       "an integer, got '32.5'"},
      {"pipeline_stage: 4", "pipeline_stage: 0",
       "mf.yaml:16: parallel_config.pipeline_stage: must be at least 1"},
      {"use_seq_parallel: True", "use_seq_parallel: maybe",
       "mf.yaml:17: parallel_config.use_seq_parallel: expected True or False, got 'maybe'"},
      {"pipeline_stage: 4", "pipline_stage: 4",
       "mf.yaml:16: parallel_config.pipline_stage: unknown key: MindFormers has no key "
       "'pipline_stage' in parallel_config (did you mean 'pipeline_stage'?)"},
      {"seed: 0", "sed: 0",
       "mf.yaml:1: sed: unknown key: MindFormers has no top-level key 'sed' (did you mean "
       "'seed'?)"},
      {"rms_norm_eps: 1.0e-5", "rms_norm_epsilon: 1.0e-5",
       "mf.yaml:37: model.model_config.rms_norm_epsilon: unknown key: MindFormers has no key "
       "'rms_norm_epsilon' in model.model_config (did you mean 'rms_norm_eps'?)"},
      {"seed: 0", "context:\n  max_device_memory: 58G",
       "mf.yaml:2: context.max_device_memory: expected a size like \"58GB\" (MindSpore's form), "
       "got '58G'"},
      {"seed: 0", "context:\n  max_device_memory: GB",
       "mf.yaml:2: context.max_device_memory: expected a size like \"58GB\""},
      {"seed: 0", "context:\n  max_device_memory: -1GB",
       "mf.yaml:2: context.max_device_memory: expected a size like \"58GB\""},
      {"seed: 0", "context:\n  max_device_memory: 0GB",
       "mf.yaml:2: context.max_device_memory: must be more than 0GB, got '0GB'"},
      {"seed: 0", "context:\n  max_device_memory: [58GB]",
       "mf.yaml:2: context.max_device_memory: expected a size like \"58GB\""},
      {"num_layers: 32", "num_layers: 32\n    pp_interleave_num: 2", "<accepted>"},
  };
  for (const Case& c : cases) {
    const std::string e = error_of(with(kConfig, c.from, c.to));
    EXPECT_EQ(e.rfind(c.expected, 0), 0u) << c.to << "\n  got: " << e;
  }
  std::string one_stage = with(kConfig, "pipeline_stage: 4", "pipeline_stage: 1");
  one_stage = with(one_stage, "offset: [1, 1, 0, -2]", "offset: 0");
  one_stage = with(one_stage, "pipeline_interleave: False", "pipeline_interleave: True");
  EXPECT_EQ(error_of(with(one_stage, "num_layers: 32", "num_layers: 32\n    pp_interleave_num: 2"))
                .rfind("mf.yaml:30: model.model_config.pp_interleave_num: needs "
                       "parallel_config.pipeline_stage > 1",
                       0),
            0u);
  EXPECT_EQ(error_of("- a list\n").rfind("mf.yaml:1: expected a MindFormers config", 0), 0u);
  EXPECT_NE(error_of(with(kConfig, "seed: 0", "seed: [")).find("malformed YAML"),
            std::string::npos);
}

TEST(MindFormersImport, TheYamlLoadsAndWholeConfigChecksNameTheKey) {
  const ImportedJob job = import(kConfig);
  const std::string yaml = imported_yaml(job, cluster_from_preset("ascend-910b", 16), "out.yaml");
  const Config c = parse_config(yaml, "out.yaml");
  EXPECT_EQ(c.training.pp, 4);
  EXPECT_EQ(c.training.dp, 2);
  EXPECT_EQ(c.training.microbatches, 16);
  EXPECT_EQ(c.training.partition, (std::vector<int>{9, 9, 8, 6}));
  EXPECT_EQ(c.training.recompute.layers.size(), 5u);
  EXPECT_TRUE(c.model.shape->flash_attention);
  // dp 2 x mp 2 x pp 4 = 16 devices, not 8.
  try {
    imported_yaml(job, cluster_from_preset("ascend-910b", 8), "out.yaml");
    ADD_FAILURE() << "accepted 16 devices' layout on 8";
  } catch (const ImportError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("mf.yaml:14: parallel_config.data_parallel: pp * tp * "
                                          "dp = 16 but the cluster has 8 devices",
                                          0),
              0u)
        << e.what();
  }
}

// ---- every key is modelled, inert, unmodelled or unknown ----------------------------------

// Keys that change time or memory are returned as unmodelled with their line and value; a
// harmless value is only listed; an inert section's keys are not checked.
TEST(MindFormersImport, KeysThatChangeTheJobAreUnmodelled) {
  const struct {
    std::string from, to, given;
    int line;
  } cases[] = {
      {"vocab_emb_dp: False", "seq_split_num: 2", "parallel_config.seq_split_num: '2'", 19},
      {"mp_comm_recompute: True", "select_comm_recompute: True",
       "recompute_config.select_comm_recompute: 'True'", 23},
      {"rms_norm_eps: 1.0e-5", "num_hidden_layers: 32",
       "model.model_config.num_hidden_layers: '32'", 37},
      {"seed: 0", "context:\n  jit_config: {jit_level: O1}", "context.jit_config", 2},
      {"rms_norm_eps: 1.0e-5", "hidden_dropout_prob: 0.1",
       "model.model_config.hidden_dropout_prob: '0.1'", 37},
  };
  for (const auto& c : cases) {
    const ImportedJob job = import(with(kConfig, c.from, c.to));
    ASSERT_EQ(job.unmodelled.size(), 1u) << c.to;
    EXPECT_EQ(job.unmodelled[0].given, c.given);
    EXPECT_EQ(job.unmodelled[0].origin.line, c.line) << c.to;
    EXPECT_EQ(job.unmodelled[0].origin.file, "mf.yaml");
  }
  // expert_num 1 (MindFormers' default) is a dense model: read, nothing to list.
  const ImportedJob harmless =
      import(with(with(with(kConfig, "seed: 0", "moe_config:\n  expert_num: 1"),
                       "vocab_emb_dp: False", "seq_split_num: 1"),
                  "rms_norm_eps: 1.0e-5", "hidden_dropout_prob: 0."));
  EXPECT_TRUE(harmless.unmodelled.empty());
  EXPECT_FALSE(harmless.shape->is_moe());
  for (const char* key : {"parallel_config.seq_split_num (not modelled)",
                          "model.model_config.hidden_dropout_prob (not modelled)"})
    EXPECT_NE(std::find(harmless.ignored.begin(), harmless.ignored.end(), key),
              harmless.ignored.end())
        << key;
  // An inert section is listed whole; its keys are the framework's business.
  const ImportedJob inert =
      import(with(kConfig, "seed: 0", "train_dataset:\n  anything: [1, 2]\n  pipline: 3"));
  EXPECT_TRUE(inert.unmodelled.empty());
  EXPECT_NE(std::find(inert.ignored.begin(), inert.ignored.end(), "train_dataset (not modelled)"),
            inert.ignored.end());
}

// context.max_device_memory caps the device's memory: 58GB is 58 GiB (MindSpore counts a
// GB as 2^30 bytes), named as the key it came from; a cap above the device's own memory
// leaves the device's (an Ascend 910B preset has 64 GiB).
TEST(MindFormersImport, MaxDeviceMemoryIsTheMemoryLimit) {
  const ImportedJob job =
      import(with(kConfig, "seed: 0", "context:\n  mode: 0\n  max_device_memory: \"58GB\""));
  EXPECT_EQ(job.device_memory_GiB, 58.0);
  EXPECT_NE(std::find(job.ignored.begin(), job.ignored.end(), "context.mode (not modelled)"),
            job.ignored.end());
  const std::string yaml = imported_yaml(job, cluster_from_preset("ascend-910b", 16), "out.yaml");
  EXPECT_NE(yaml.find("    preset: ascend-910b\n    memory_GiB: 58  # context.max_device_memory "
                      "(line 3)\n"),
            std::string::npos)
      << yaml;
  EXPECT_EQ(parse_config(yaml, "out.yaml").device.memory_GiB, 58.0);
  const ImportedJob half =
      import(with(kConfig, "seed: 0", "context:\n  max_device_memory: 30.5GB"));
  EXPECT_EQ(half.device_memory_GiB, 30.5);
  const ImportedJob above = import(with(kConfig, "seed: 0", "context:\n  max_device_memory: 80GB"));
  const std::string big = imported_yaml(above, cluster_from_preset("ascend-910b", 16), "out.yaml");
  EXPECT_EQ(parse_config(big, "out.yaml").device.memory_GiB, 64.0);
  EXPECT_NE(big.find("# Note: context.max_device_memory (80 GiB) is not below the device's 64 "
                     "GiB, which stays the limit.\n"),
            std::string::npos)
      << big;
}

// The table names each key once and cites the MindFormers commit it lists; the importer
// checks at each section that it reads exactly the table's modelled keys.
TEST(MindFormersVocabulary, EachKeyOnceWithItsSource) {
  const std::string_view text = mindformers_keys_text();
  EXPECT_NE(text.find("fd4deebc1"), std::string_view::npos);
  std::vector<std::string> names;
  for (const VocabularyEntry& e : mindformers_vocabulary().entries()) names.push_back(e.name);
  std::size_t rows = 0;
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t end = std::min(text.find('\n', pos), text.size());
    if (end > pos && text[pos] != '#') ++rows;
    pos = end + 1;
  }
  EXPECT_EQ(names.size(), rows);  // the parser refuses a name given twice
  for (const char* key : {"parallel_config.pipeline_stage", "context.max_device_memory",
                          "model.model_config.num_layers", "recompute_config.select_recompute"})
    EXPECT_EQ(mindformers_vocabulary().find(key)->treatment, Treatment::modelled) << key;
  EXPECT_NO_THROW(import(kConfig));
}

// ---- the vocabulary ------------------------------------------------------------------------
// MindFormers' offsets (docs/feature_cards/Offset_Recompute.md: 48 layers, pp 5, interleave
// 2, offset [[0,1,1,1,1],[1,1,1,1,0]] is [[4,5,5,5,5],[5,5,5,5,4]]) and its spreading of a
// flat recompute list over the interleaves (LayerSetting._alloc_recompute_layer).

TEST(MindFormersOffsets, TheWorkedExampleAndTheFeatureCard) {
  EXPECT_EQ(mindformers_partition(32, 4, 1, {1, 1, 0, -2}), (std::vector<int>{9, 9, 8, 6}));
  EXPECT_EQ(mindformers_offsets({9, 9, 8, 6}), (std::vector<int>{1, 1, 0, -2}));
  const std::vector<int> card = {0, 1, 1, 1, 1, 1, 1, 1, 1, 0};
  EXPECT_EQ(mindformers_partition(48, 5, 2, card),
            (std::vector<int>{4, 5, 5, 5, 5, 5, 5, 5, 5, 4}));
  EXPECT_EQ(mindformers_offsets({4, 5, 5, 5, 5, 5, 5, 5, 5, 4}), card);
  EXPECT_EQ(mindformers_stage_list(card, 5, 2), "[[0, 1, 1, 1, 1], [1, 1, 1, 1, 0]]");
  EXPECT_EQ(mindformers_stage_list({1, 1, 0, -2}, 4, 1), "[1, 1, 0, -2]");
  EXPECT_THROW(mindformers_partition(32, 4, 1, {1, 1, 0, -1}), FormatError);  // 33 layers
  EXPECT_THROW(mindformers_partition(8, 4, 1, {-3, 1, 1, 1}), FormatError);   // -1 layers
  EXPECT_THROW(mindformers_partition(8, 4, 1, {0, 0, 0}), FormatError);       // 3 offsets
}

TEST(MindFormersRecompute, AFlatListIsDealtOverTheInterleaves) {
  // pp 2, interleave 2, stages (v, j) in order (0,0) (0,1) (1,0) (1,1) of 3, 2, 2, 3
  // layers. Rank 0 holds 3 + 2: a count of 3 goes v0, v1, v0 -> 2 and 1. Rank 1 holds
  // 2 + 3: a count of 1 goes to v0.
  EXPECT_EQ(mindformers_spread_counts({3, 2, 2, 3}, 2, 2, {3, 1}), (std::vector<int>{2, 1, 1, 0}));
  // True in the list stands for MAX_INT32: every layer of the rank.
  EXPECT_EQ(mindformers_spread_counts({3, 2, 2, 3}, 2, 2, {INT_MAX, 0}),
            (std::vector<int>{3, 0, 2, 0}));
  // A full stage is skipped: rank 0's 4 over stages of 1 and 3 -> 1 and 3.
  EXPECT_EQ(mindformers_spread_counts({1, 0, 3, 0}, 2, 2, {4, 0}), (std::vector<int>{1, 0, 3, 0}));
  // vpp 1: the count, capped at the stage.
  EXPECT_EQ(mindformers_spread_counts({4, 4}, 2, 1, {2, 9}), (std::vector<int>{2, 4}));
}

// ---- export --------------------------------------------------------------------------------

// The brief's example: offset [1, 1, 0, -2] over 32 layers and pp 4 is [9, 9, 8, 6].
TEST(MindFormersExport, OffsetsOfTheWorkedExample) {
  std::vector<std::string> notes{"stale"};
  const std::string yaml = export_mindformers(plan(4, 1, {9, 9, 8, 6}), &notes);
  EXPECT_EQ(yaml,
            "# bmpipe plan: 32 decoder layers, pipeline_stage 4, layers per stage [9, 9, 8, 6]\n"
            "parallel_config:\n"
            "  pipeline_stage: 4\n"
            "model:\n"
            "  model_config:\n"
            "    offset: [1, 1, 0, -2]\n"
            "recompute_config:\n"
            "  recompute: [0, 0, 0, 0]\n"
            "  select_recompute: [0, 0, 0, 0]\n");
  EXPECT_TRUE(notes.empty());
  // The other direction, through the decoder: the docs' formula gives back the partition.
  EXPECT_EQ(decode_mindformers(yaml, 32).partition, (std::vector<int>{9, 9, 8, 6}));
}

// The feature card's own example: 48 layers, pipeline_stage 5, offset [0,1,1,1,0] gives
// 9,10,10,10,9.
TEST(MindFormersExport, OffsetsOfTheFeatureCardExample) {
  const std::string yaml = export_mindformers(plan(5, 1, {9, 10, 10, 10, 9}), nullptr);
  EXPECT_EQ(yaml_value(yaml, "offset"), "[0, 1, 1, 1, 0]");
}

// The feature card's interleaved example: 48 layers, pp 5, pp_interleave_num 2, offset
// [[0,1,1,1,1],[1,1,1,1,0]] is [[4,5,5,5,5],[5,5,5,5,4]], with recompute
// [[2,1,0,0,0],[1,0,0,0,0]]; the outer index is the interleave.
TEST(MindFormersExport, InterleavedExampleOfTheFeatureCard) {
  std::vector<std::string> notes;
  const ExportLayout l =
      plan(5, 2, {4, 5, 5, 5, 5, 5, 5, 5, 5, 4}, {{2, 0}, {1, 0}, {}, {}, {}, {1, 0}});
  const std::string yaml = export_mindformers(l, &notes);
  EXPECT_EQ(yaml,
            "# bmpipe plan: 48 decoder layers, pipeline_stage 5, pp_interleave_num 2, layers per "
            "stage [[4, 5, 5, 5, 5], [5, 5, 5, 5, 4]]\n"
            "parallel:\n"
            "  pipeline_config:\n"
            "    pipeline_interleave: True\n"
            "parallel_config:\n"
            "  pipeline_stage: 5\n"
            "model:\n"
            "  model_config:\n"
            "    pp_interleave_num: 2\n"
            "    offset: [[0, 1, 1, 1, 1], [1, 1, 1, 1, 0]]\n"
            "recompute_config:\n"
            "  recompute: [[2, 1, 0, 0, 0], [1, 0, 0, 0, 0]]\n"
            "  select_recompute: [[2, 1, 0, 0, 0], [1, 0, 0, 0, 0]]\n");
  EXPECT_TRUE(notes.empty());
  const Decoded d = decode_mindformers(yaml, 48);
  EXPECT_EQ(d.partition, l.partition);
  EXPECT_EQ(d.modes, l.recompute);
}

// The issue's stage with (none 0, selective 9, full 1): recompute 1, select_recompute 10,
// since a layer in both counts recomputes fully.
TEST(MindFormersExport, SelectiveCountsIncludeTheFullLayers) {
  std::vector<std::string> notes;
  const ExportLayout l = plan(2, 1, {10, 10}, {{1, 9}, {0, 0}});
  const std::string yaml = export_mindformers(l, &notes);
  EXPECT_EQ(yaml_value(yaml, "recompute"), "[1, 0]");
  EXPECT_EQ(yaml_value(yaml, "select_recompute"), "[10, 0]");
  EXPECT_EQ(yaml_value(yaml, "offset"), "[0, 0]");
  EXPECT_EQ(decode_mindformers(yaml, 20).modes, l.recompute);
  // The counts are exact; what differs is which operators "selective" means there.
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("attention core"), std::string::npos) << notes[0];
}

TEST(MindFormersExport, NoSelectiveNoteWithoutSelectiveLayers) {
  std::vector<std::string> notes;
  export_mindformers(plan(2, 1, {4, 4}, {{4, 0}, {2, 0}}), &notes);
  EXPECT_TRUE(notes.empty());
}

// MindFormers counts from the first layer of a stage; modes in another order take the
// shortest prefixes that cover the plan, and say so.
TEST(MindFormersExport, ModesOutOfOrderTakeTheCoveringPrefix) {
  ExportLayout l = plan(2, 1, {4, 4});
  l.recompute = {R::none, R::full, R::none, R::none, R::selective, R::full, R::none, R::none};
  std::vector<std::string> notes;
  const std::string yaml = export_mindformers(l, &notes);
  EXPECT_EQ(yaml_value(yaml, "recompute"), "[2, 2]");
  EXPECT_EQ(yaml_value(yaml, "select_recompute"), "[2, 2]");
  EXPECT_TRUE(mentions(notes, "stages 0 and 1: MindFormers recomputes the first n layers"));
  EXPECT_TRUE(dominates(decode_mindformers(yaml, 8).modes, l.recompute));
}

TEST(MindFormersExport, VPlacementIsNoted) {
  ExportLayout l = plan(2, 2, {2, 2, 2, 2});
  l.stage_rank = {0, 1, 1, 0};
  std::vector<std::string> notes;
  const std::string yaml = export_mindformers(l, &notes);
  EXPECT_EQ(yaml_value(yaml, "offset"), "[[0, 0], [0, 0]]");
  EXPECT_TRUE(mentions(notes, "V placement"));
}

TEST(MindFormersExport, OnePipelineStage) {
  std::vector<std::string> notes;
  const std::string yaml = export_mindformers(plan(1, 1, {8}, {{3, 0}}), &notes);
  EXPECT_EQ(yaml_value(yaml, "pipeline_stage"), "1");
  EXPECT_EQ(yaml_value(yaml, "offset"), "[0]");
  EXPECT_EQ(yaml_value(yaml, "recompute"), "[3]");
  EXPECT_EQ(yaml_value(yaml, "select_recompute"), "[3]");
  EXPECT_TRUE(notes.empty());
}

// 24 layers over 4 stages average 6, so a first stage with only the embedding is offset -6.
TEST(MindFormersExport, StageWithOnlyTheEmbedding) {
  std::vector<std::string> notes;
  const std::string yaml = export_mindformers(plan(4, 1, {0, 8, 8, 8}), &notes);
  EXPECT_EQ(yaml_value(yaml, "offset"), "[-6, 2, 2, 2]");
  EXPECT_EQ(decode_mindformers(yaml, 24).partition, (std::vector<int>{0, 8, 8, 8}));
  EXPECT_TRUE(mentions(notes, "stage 0 holds no decoder layer"));
}

// MindFormers' YAML has no FP8 key: an FP8 job goes out as its bf16 twin, not exact, and
// the time quoted is that twin's as `bmpipe simulate` runs it (issue 41).
TEST(MindFormersExport, AnFp8JobIsStatedInBf16WithThatJobsTime) {
  const std::string example =
      std::string(BMPIPE_SOURCE_DIR) + "/configs/examples/h100_llama3_70b_fp8.yaml";
  const nlohmann::json x = test::run_json("export '" + example + "' --format mindformers --json");
  EXPECT_FALSE(x["exact"].get<bool>());
  EXPECT_NE(x["notes"].dump().find("training.fp8 hybrid (tensorwise): MindFormers' keys have no "
                                   "FP8; stated in bf16."),
            std::string::npos)
      << x["notes"];
  const nlohmann::json bf16 = test::run_json("simulate '" + example +
                                             "' --set training.fp8=none "
                                             "--set training.fp8_param_gather=false --json");
  EXPECT_EQ(x["iteration_time_ms"].get<double>(), bf16["iteration_time_ms"].get<double>());
  EXPECT_NE(x["iteration_time_ms"].get<double>(), x["config_iteration_time_ms"].get<double>());
}

}  // namespace mindformers_test
}  // namespace bmpipe
