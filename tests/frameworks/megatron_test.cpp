// `bmpipe import megatron`: Megatron-LM arguments read with Megatron-LM's defaults and
// checks (megatron/training/arguments.py, argument_utils.py, transformer_config.py,
// transformer_block.py at d98e8a64ddf3), worked by hand; the round trip through the plan
// export (frameworks/megatron/export.hpp); and the YAML, which must load as `bmpipe simulate`
// loads it.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "frameworks/megatron/export.hpp"
#include "frameworks/megatron/formats.hpp"
#include "frameworks/megatron/import.hpp"
#include "planner/export_layout.hpp"
#include "support/export_layouts.hpp"
#include "support/export_readback.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace megatron_test {

using R = Recompute;
using test::decode_megatron;
using test::dominates;
using test::layout_of;
using test::Modes;
using test::parse_layout;
using test::plan;

// Llama-2-7B's shape, one micro-batch of 4096 tokens, 64 sequences per step, bf16.
const std::string kModel =
    "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 11008 --num-attention-heads 32 \\\n"
    "  --seq-length 4096 --vocab-size 32000 --swiglu --untie-embeddings-and-output-weights \\\n"
    "  --micro-batch-size 1 --global-batch-size 64 --bf16\n";

ImportedJob import(const std::string& args) {
  return read_megatron_args(args, "args.txt");
}

std::string error_of(const std::string& args) {
  try {
    import(args);
  } catch (const ImportError& e) {
    return e.what();
  }
  return "<accepted>";
}

/// The line of `text` that starts with `start`.
std::string line_with(const std::string& text, const std::string& start) {
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t end = std::min(text.find('\n', pos), text.size());
    if (text.compare(pos, start.size(), start) == 0) return text.substr(pos, end - pos);
    pos = end + 1;
  }
  return "<no line starting with '" + start + "'>";
}

std::vector<R> all(R mode, int n = 32) {
  return std::vector<R>(static_cast<std::size_t>(n), mode);
}

// ---- the round trip -----------------------------------------------------------------------

// The brief's example, both ways: the layout is [9, 9, 8, 6] with the embedding first and
// the loss last, and exporting the imported plan prints the same flags.
TEST(MegatronImport, TheWorkedLayoutExample) {
  const std::string flags =
      "--pipeline-model-parallel-size 4\n--num-layers 32\n"
      "--pipeline-model-parallel-layout \"Et*9|t*9|t*8|t*6L\"\n";
  const ImportedJob job = import(kModel + flags);
  EXPECT_EQ(job.pp, 4);
  EXPECT_EQ(job.vpp, 1);
  EXPECT_EQ(job.partition, (std::vector<int>{9, 9, 8, 6}));
  EXPECT_EQ(job.recompute, all(R::none));
  const MegatronExport back = export_megatron(layout_of(job));
  EXPECT_TRUE(back.exact);
  EXPECT_EQ(back.flags, flags);
}

// Every form the export writes reads back as the plan it came from, and exports again to
// the same flags: the even split, virtual stages, the first/last-rank flags (with and
// without virtual stages), layouts, and the three recompute rules.
TEST(MegatronImport, ExportedFlagsReadBackAsTheirPlan) {
  const ExportLayout plans[] = {
      plan(4, 1, {8, 8, 8, 8}),
      plan(4, 2, {4, 4, 4, 4, 4, 4, 4, 4}),
      plan(4, 1, {10, 8, 8, 6}),
      plan(3, 1, {10, 11, 11}),
      plan(3, 1, {11, 11, 10}),
      plan(4, 2, {6, 4, 4, 2, 6, 4, 4, 2}),
      plan(4, 1, {9, 9, 8, 6}),
      plan(4, 2, {5, 3, 4, 4, 4, 4, 3, 5}),
      plan(2, 1, {16, 16}, {{0, 16}, {0, 16}}),                    // selective everywhere
      plan(2, 1, {16, 16}, {{16, 0}, {16, 0}}),                    // full everywhere: uniform 1
      plan(4, 1, {9, 9, 8, 6}, {{2, 0}, {2, 0}, {2, 0}, {2, 0}}),  // block 2
      plan(4, 2, {4, 4, 4, 4, 4, 4, 4, 4},
           {{1, 0}, {1, 0}, {1, 0}, {1, 0}, {1, 0}, {1, 0}, {1, 0}, {1, 0}}),
  };
  for (const ExportLayout& l : plans) {
    const MegatronExport out = export_megatron(l);
    ASSERT_TRUE(out.exact) << out.note;
    const ImportedJob job = import(kModel + out.flags);
    EXPECT_EQ(job.pp, l.pp) << out.flags;
    EXPECT_EQ(job.vpp, l.vpp) << out.flags;
    EXPECT_EQ(job.partition, l.partition) << out.flags;
    EXPECT_EQ(job.recompute, l.recompute) << out.flags;
    EXPECT_EQ(job.schedule, l.vpp > 1 ? "interleaved" : "1f1b");
    EXPECT_EQ(export_megatron(layout_of(job)).flags, out.flags);
  }
}

// Flags the export does not write but Megatron takes, read as Megatron builds them; the
// export then says the same plan its own way.
// A layout with MTP layers ([MG-layout]: their count is --mtp-num-layers, after every
// decoder layer): on the last stage, before the loss, it is the plan bmpipe runs; on an
// earlier stage (DeepSeek-V3's documented layout gives m a stage of its own) it is not.
TEST(MegatronImport, MtpLayersInTheLayoutOnTheLastStage) {
  const std::string mtp = kModel + "--mtp-num-layers 1 --pipeline-model-parallel-size 4 ";
  const ImportedJob job = import(mtp + "--pipeline-model-parallel-layout 'Et*9|t*9|t*8|t*6,m,L'\n");
  EXPECT_EQ(job.partition, (std::vector<int>{9, 9, 8, 6}));
  ASSERT_TRUE(job.shape.has_value());
  EXPECT_EQ(job.shape->mtp_layers, 1);
  // The MTP layer and the loss on a stage of their own: the layout places every layer (a
  // table with separate ends), so the YAML keeps it and leaves the decoder split as a
  // comment; it exports back as given.
  const std::string moved = "Et*11|t*11|t*10|mL";
  const ImportedJob there = import(mtp + "--pipeline-model-parallel-layout '" + moved + "'\n");
  EXPECT_EQ(there.partition, (std::vector<int>{11, 11, 10, 0}));
  const std::string yaml = imported_yaml(there, cluster_from_preset("h200", 32), "out.yaml");
  EXPECT_EQ(line_with(yaml, "  megatron_layout:"),
            "  megatron_layout: \"" + moved + "\"  # --pipeline-model-parallel-layout (line 4)");
  EXPECT_EQ(yaml.find("\n  partition:"), std::string::npos);
  const auto e = prepare(parse_config(yaml, "out.yaml"));
  ASSERT_TRUE(e->layers.separate_ends);
  const Schedule sched = make_schedule(*e);
  const Plan p = config_plan(*e, sched.num_stages);
  // Rows: E + 11 t | 11 t | 10 t | m + L.
  EXPECT_EQ(p.partition, (std::vector<int>{12, 11, 10, 2}));
  const ExportLayout x = export_layout(*e, p, sched);
  EXPECT_EQ(x.mtp_per_stage, (std::vector<int>{0, 0, 0, 1}));
  EXPECT_NE(export_megatron(x).flags.find("--pipeline-model-parallel-layout \"" + moved + "\""),
            std::string::npos);
}

TEST(MegatronImport, OtherSpellingsOfTheSamePlan) {
  // (32 / 4) / 2 = 4 virtual stages of 2 layers.
  const ImportedJob per_stage =
      import(kModel + "--pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 2");
  EXPECT_EQ(per_stage.vpp, 4);
  EXPECT_EQ(per_stage.partition, std::vector<int>(16, 2));
  EXPECT_EQ(export_megatron(layout_of(per_stage)).flags,
            "--pipeline-model-parallel-size 4\n--num-layers 32\n"
            "--num-virtual-stages-per-pipeline-rank 4\n");
  // 30 layers + embedding + loss = 32 over 4 ranks: the first and last stage build 7.
  const std::string thirty =
      "--num-layers 30 --hidden-size 1024 --num-attention-heads 8 "
      "--seq-length 1024 --vocab-size 1000 --micro-batch-size 1 --bf16 ";
  const ImportedJob accounted =
      import(thirty +
             "--pipeline-model-parallel-size 4 --account-for-embedding-in-pipeline-split "
             "--account-for-loss-in-pipeline-split");
  EXPECT_EQ(accounted.partition, (std::vector<int>{7, 8, 8, 7}));
  EXPECT_EQ(export_megatron(layout_of(accounted)).flags,
            "--pipeline-model-parallel-size 4\n--num-layers 30\n"
            "--decoder-first-pipeline-num-layers 7\n--decoder-last-pipeline-num-layers 7\n");
  // Block with a count past the stage size recomputes whole stages: every layer here.
  const ImportedJob block = import(kModel +
                                   "--pipeline-model-parallel-size 4 --recompute-granularity full "
                                   "--recompute-method block --recompute-num-layers 9");
  EXPECT_EQ(block.recompute, all(R::full));
  // The old switch for selective recompute.
  EXPECT_EQ(import(kModel + "--recompute-activations").recompute, all(R::selective));
  // Uniform groups of 4 recompute every layer; the note says what bmpipe keeps instead.
  const ImportedJob uniform = import(kModel +
                                     "--recompute-granularity full --recompute-method uniform "
                                     "--recompute-num-layers 4");
  EXPECT_EQ(uniform.recompute, all(R::full));
  ASSERT_EQ(uniform.notes.size(), 1u);
  EXPECT_NE(uniform.notes[0].find("one input per 4 layers"), std::string::npos);
}

// ---- the model and the run ----------------------------------------------------------------

TEST(MegatronImport, ShapeAndDefaults) {
  const ImportedJob job = import(kModel +
                                 "--tensor-model-parallel-size 2 --sequence-parallel "
                                 "--use-distributed-optimizer");
  ASSERT_TRUE(job.shape);
  const ModelShape& m = *job.shape;
  EXPECT_EQ(m.architecture, Architecture::llama);
  EXPECT_EQ(m.num_layers, 32);
  EXPECT_EQ(m.hidden_size, 4096);
  EXPECT_EQ(m.num_attention_heads, 32);
  EXPECT_EQ(m.num_kv_heads, 32);
  EXPECT_EQ(m.ffn_hidden_size, 11008);
  EXPECT_EQ(m.vocab_size, 32000);  // already a multiple of 128 x 2
  EXPECT_FALSE(m.tied_embeddings);
  EXPECT_EQ(job.dropout, true);  // attention and hidden dropout default to 0.1
  EXPECT_EQ(job.tp, 2);
  EXPECT_EQ(job.sequence_parallel, true);
  EXPECT_EQ(job.seq_length, 4096);
  EXPECT_EQ(job.micro_batch_size, 1);
  EXPECT_EQ(job.global_batch_size, 64);
  EXPECT_EQ(job.microbatches, std::nullopt);  // bmpipe derives 64 / (1 x dp)
  EXPECT_EQ(job.dtype, "bf16");
  EXPECT_EQ(job.grad_dtype, "fp32");
  EXPECT_EQ(job.zero_stage, 1);
  EXPECT_EQ(job.partition, (std::vector<int>{32}));
  // Megatron-LM's fused kernels for llama-style layers; gpt-style ones are fused either way
  // and get no key.
  EXPECT_EQ(job.kernels, "fused");
  std::string gelu = kModel;
  gelu.erase(gelu.find(" --swiglu"), 9);
  EXPECT_EQ(import(gelu).kernels, std::nullopt);
}

TEST(MegatronImport, DefaultsMegatronDerives) {
  const std::string base =
      "--num-layers 4 --hidden-size 4096 --num-attention-heads 32 "
      "--seq-length 2048 --micro-batch-size 2 ";
  // No --swiglu: GeLU MLP of 4h; with it, int((4 * 4096 * 2 / 3) / 64) * 64 = 170 * 64.
  const ImportedJob gpt = import(base + "--vocab-size 50257 --fp16");
  EXPECT_EQ(gpt.shape->architecture, Architecture::gpt);
  EXPECT_EQ(gpt.shape->ffn_hidden_size, 16384);
  EXPECT_TRUE(gpt.shape->tied_embeddings);
  // 50257 padded to a multiple of 128: 393 x 128.
  EXPECT_EQ(gpt.shape->vocab_size, 50304);
  EXPECT_EQ(gpt.grad_dtype, "fp16");  // fp16 keeps fp16 gradients by default
  EXPECT_EQ(gpt.microbatches, 1);     // no global batch: micro-batch size x dp
  EXPECT_EQ(gpt.zero_stage, 0);
  const ImportedJob llama =
      import(base +
             "--vocab-size 50257 --swiglu --tensor-model-parallel-size 2 --bf16 "
             "--group-query-attention --attention-dropout 0 --hidden-dropout 0.0 "
             "--grad-reduce-in-bf16");
  EXPECT_EQ(llama.shape->ffn_hidden_size, 10880);
  EXPECT_EQ(llama.shape->num_kv_heads, 1);    // --num-query-groups defaults to 1
  EXPECT_EQ(llama.shape->vocab_size, 50432);  // multiple of 128 x tp 2: 197 x 256
  EXPECT_EQ(llama.dropout, false);
  EXPECT_EQ(llama.grad_dtype, "bf16");
  EXPECT_EQ(import(base + "--vocab-size 1000 --fp16 --accumulate-allreduce-grads-in-fp32 "
                          "--make-vocab-size-divisible-by 64 --group-query-attention "
                          "--num-query-groups 8")
                .shape->num_kv_heads,
            8);
  // Sequence parallelism is off with tp 1, and said so.
  const ImportedJob sp = import(base + "--vocab-size 1000 --bf16 --sequence-parallel");
  EXPECT_EQ(sp.sequence_parallel, false);
  EXPECT_EQ(sp.notes.size(), 1u);
}

TEST(MegatronImport, FlagsItDoesNotModelAreListed) {
  const ImportedJob job =
      import("torchrun --nproc_per_node 8 pretrain_gpt.py \\\n" + kModel +
             "--wgrad-deferral-limit 2 --expert-model-parallel-size 4 --lr 3e-4 \\\n"
             "  --data-path 0.5 /data/a 0.5 /data/b --lr 1e-4 2>&1 | tee train.log\n");
  // The launcher's flag (before the script) is listed; so are inert flags. Deferring
  // weight gradients changes the job: not listed as ignored but as unmodelled.
  const std::vector<std::string> expected = {
      "'torchrun' (not a flag)", "--nproc_per_node (not modelled)", "--lr (not modelled)",
      "--data-path (not modelled)", "'tee' (not a flag)", "'train.log' (not a flag)",
      // Read, but Megatron-LM has no experts to spread without --num-experts.
      "--expert-model-parallel-size (no effect without --num-experts)"};
  EXPECT_EQ(job.ignored, expected);
  ASSERT_EQ(job.unmodelled.size(), 1u);
  EXPECT_EQ(job.unmodelled[0].given, "--wgrad-deferral-limit 2");
  EXPECT_EQ(job.unmodelled[0].origin.line, 5);
}

TEST(MegatronImport, ShellWords) {
  const std::string text =
      "# a comment --num-layers 9\n"
      "--a 1 --b=\"x y\" \\\n"
      "  --c 'it''s' # trailing comment\r\n"
      "--d \"$VAR\" \\\r\n"
      "--e \\\"q\\\" --f=\n";
  const std::vector<ShellWord> w = split_shell_words(text, "t.txt");
  std::vector<std::string> words;
  for (const ShellWord& x : w) words.push_back(x.text);
  EXPECT_EQ(words, (std::vector<std::string>{"--a", "1", "--b=x y", "--c", "its", "--d", "$VAR",
                                             "--e", "\"q\"", "--f="}));
  EXPECT_EQ(w[0].line, 2);
  EXPECT_EQ(w[3].line, 3);
  EXPECT_EQ(w[5].line, 4);
  EXPECT_EQ(w[7].line, 5);
  EXPECT_TRUE(w[6].expansion);
  EXPECT_FALSE(w[8].expansion);
  EXPECT_THROW(split_shell_words("--a 'open\n", "t.txt"), ImportError);
  // Duplicates: the last one counts, as argparse does, and a note says so.
  const ImportedJob twice = import(kModel +
                                   "--pipeline-model-parallel-size 2\n"
                                   "--pipeline-model-parallel-size=4\n");
  EXPECT_EQ(twice.pp, 4);
  ASSERT_EQ(twice.notes.size(), 1u);
  EXPECT_NE(twice.notes[0].find("given 2 times (last on line 5)"), std::string::npos);
}

// ---- errors name the file, the line and the flag ------------------------------------------

TEST(MegatronImport, ErrorsNameTheFileLineAndFlag) {
  struct Case {
    std::string extra, expected;
  };
  // kModel is three lines; the extra flags are on line 4.
  const Case cases[] = {
      {"--recompute-granularity partial",
       "args.txt:4: --recompute-granularity: unknown value 'partial' (expected full, selective)"},
      {"--swiglu yes", "args.txt:4: --swiglu: takes no value (it is a switch), got 'yes'"},
      {"--pipeline-model-parallel-size 4x",
       "args.txt:4: --pipeline-model-parallel-size: expected an integer, got '4x'"},
      {"--pipeline-model-parallel-size 0",
       "args.txt:4: --pipeline-model-parallel-size: must be at least 1, got 0"},
      {"--tensor-model-parallel-size $TP",
       "args.txt:4: --tensor-model-parallel-size: the value '$TP' is a shell expansion"},
      {"--pipeline-model-parallel-size",
       "args.txt:4: --pipeline-model-parallel-size: expects a value"},
      {"--pipeline-model-parallel-size 2 4",
       "args.txt:4: --pipeline-model-parallel-size: takes one value, got 2"},
      {"--pipline-model-parallel-size 8",
       "args.txt:4: --pipline-model-parallel-size: unknown flag: Megatron-LM's arguments.py has "
       "no such flag, and its parser takes no abbreviations (did you mean "
       "'--pipeline-model-parallel-size'?)"},
      {"--recompute-granulrity full",
       "args.txt:4: --recompute-granulrity: unknown flag: Megatron-LM's arguments.py has no "
       "such flag, and its parser takes no abbreviations (did you mean "
       "'--recompute-granularity'?)"},
      {"--pipeline-model", "args.txt:4: --pipeline-model: unknown flag"},  // no abbreviations
      {"--batch-size 4",
       "args.txt:4: --batch-size: no longer valid (Megatron-LM asserts): use --micro-batch-size"},
      {"--fp16", "args.txt:4: --fp16: cannot be given with --bf16"},
      {"--pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 2 "
       "--pipeline-model-parallel-layout 'Et*8|t*8|t*8|t*8L'",
       "args.txt:4: --pipeline-model-parallel-layout: give at most one of"},
      {"--pipeline-model-parallel-size 4 --pipeline-model-parallel-layout 'Et*8|t*8|t*8|t*7L'",
       "args.txt:4: --pipeline-model-parallel-layout: holds 31 decoder layers (t) but "
       "--num-layers is 32"},
      {"--pipeline-model-parallel-size 3 --pipeline-model-parallel-layout 'Et*8|t*8|t*8|t*8L'",
       "args.txt:4: --pipeline-model-parallel-layout: 4 stages do not divide over 3"},
      {"--pipeline-model-parallel-size 2 --pipeline-model-parallel-layout 'Et*16|t*16|mL'",
       "args.txt:4: --pipeline-model-parallel-layout: 3 stages do not divide over 2"},
      {"--pipeline-model-parallel-size 4 --pipeline-model-parallel-layout 'Et*8|t*8|t*8|t*8|mL'",
       "args.txt:4: --pipeline-model-parallel-layout: 5 stages"},
      {"--pipeline-model-parallel-size 3 --pipeline-model-parallel-layout 'Et*16|t*16L|'",
       "args.txt:4: --pipeline-model-parallel-layout: puts the loss L on stage 1"},
      {"--pipeline-model-parallel-size 2 --pipeline-model-parallel-layout 'Et*16|t*16|L|t'",
       "args.txt:4: --pipeline-model-parallel-layout: the last layer must be the loss L"},
      {"--pipeline-model-parallel-size 2 --pipeline-model-parallel-layout '|Et*16|t*16|L'",
       "args.txt:4: --pipeline-model-parallel-layout: puts the embedding E on stage 1"},
      // An MTP layer runs on the main model's last hidden state: no 't' after an 'm'.
      {"--mtp-num-layers 1 --pipeline-model-parallel-size 4 "
       "--pipeline-model-parallel-layout 'Et*9|t*9|t*8m|t*6L'",
       "args.txt:4: --pipeline-model-parallel-layout: puts decoder layer 27 of 32 (t) after "
       "a multi-token prediction layer (m)"},
      {"--pipeline-model-parallel-size 2 --pipeline-model-parallel-layout 'Et*16|t*16mL'",
       "args.txt:4: --pipeline-model-parallel-layout: holds 1 multi-token prediction layers (m) "
       "but --mtp-num-layers is 0"},
      {"--pipeline-model-parallel-size 3",
       "args.txt:4: --pipeline-model-parallel-size: 32 layers "
       "do not split evenly over 3 pipeline ranks"},
      {"--pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 9",
       "args.txt:4: --decoder-first-pipeline-num-layers: Megatron-LM refuses this split"},
      {"--pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 8 "
       "--account-for-loss-in-pipeline-split",
       "args.txt:4: --decoder-first-pipeline-num-layers: cannot be given with --account-for"},
      {"--num-virtual-stages-per-pipeline-rank 2",
       "args.txt:4: --num-virtual-stages-per-pipeline-rank: 2 virtual stages need "
       "--pipeline-model-parallel-size > 1"},
      {"--recompute-granularity full",
       "args.txt:4: --recompute-granularity: full recompute needs "
       "--recompute-method"},
      {"--recompute-granularity selective --recompute-method block",
       "args.txt:4: --recompute-method: is not supported with selective recompute"},
      {"--attention-dropout 2", "args.txt:4: --attention-dropout: must be between 0 and 1, got 2"},
      {"--group-query-attention --num-query-groups 5",
       "args.txt:4: --num-query-groups: 5 query groups do not divide the 32 attention heads"},
  };
  for (const Case& c : cases) {
    const std::string e = error_of(kModel + c.extra + "\n");
    EXPECT_EQ(e.rfind(c.expected, 0), 0u) << c.extra << "\n  got: " << e;
  }
  // Missing flags name the flag without a line.
  EXPECT_EQ(error_of("--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 8 "
                     "--micro-batch-size 1 --bf16")
                .rfind("args.txt: --vocab-size: missing: Megatron-LM takes the vocabulary from "
                       "the tokenizer",
                       0),
            0u);
  EXPECT_EQ(error_of("--hidden-size 64").rfind("args.txt: --num-layers: missing", 0), 0u);
  EXPECT_EQ(error_of("--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 8 "
                     "--vocab-size 10 --micro-batch-size 1")
                .rfind("args.txt: --bf16: neither --bf16 nor --fp16", 0),
            0u);
  EXPECT_EQ(
      error_of(kModel + "--data-path \"unterminated\n").rfind("args.txt:4: a double quote", 0), 0u);
}

// ---- the vocabulary: every flag is modelled, inert, unmodelled or unknown ------------------

/// The rows of the table's text, read here independently of the importer's parser.
std::vector<std::vector<std::string>> table_rows(std::string_view text) {
  std::vector<std::vector<std::string>> rows;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t end = std::min(text.find('\n', pos), text.size());
    const std::string line(text.substr(pos, end - pos));
    pos = end + 1;
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> cells;
    std::size_t from = 0;
    for (std::size_t tab; (tab = line.find('\t', from)) != std::string::npos; from = tab + 1)
      cells.push_back(line.substr(from, tab - from));
    cells.push_back(line.substr(from));
    rows.push_back(cells);
  }
  return rows;
}

// The code reads exactly the flags the table calls modelled, so the two cannot drift; the
// table names each flag once and cites the Megatron-LM commit it lists.
TEST(MegatronVocabulary, TheTableAndTheReaderAgree) {
  const auto rows = table_rows(megatron_flags_text());
  std::vector<std::string> names, modelled;
  for (const auto& r : rows) {
    ASSERT_EQ(r.size(), 5u) << r[0];  // FLAG CLASS HARMLESS REASON VALUES
    names.push_back(r[0]);
    if (r[1] == "modelled") modelled.push_back(r[0]);
  }
  std::vector<std::string> sorted = names;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end())
      << "listed twice: " << *std::adjacent_find(sorted.begin(), sorted.end());
  std::vector<std::string> read;
  for (std::string_view f : megatron_modelled_flags()) read.emplace_back(f);
  std::sort(read.begin(), read.end());
  std::sort(modelled.begin(), modelled.end());
  EXPECT_EQ(read, modelled);
  EXPECT_NE(megatron_flags_text().find("d98e8a64ddf3"), std::string_view::npos);
  EXPECT_EQ(megatron_vocabulary().entries().size(), rows.size());
  // Spot checks, one per class and one of each generated form (argument_utils.py: a
  // bool field defaulting to True gives --no-X and --disable-X).
  const struct {
    const char* flag;
    Treatment treatment;
  } spots[] = {
      {"--overlap-grad-reduce", Treatment::modelled},
      {"--pipeline-model-parallel-size", Treatment::modelled},
      {"--save", Treatment::inert},
      {"--log-interval", Treatment::inert},
      {"--tokenizer-model", Treatment::inert},
      {"--context-parallel-size", Treatment::modelled},
      {"--fp8-format", Treatment::modelled},
      {"--fp8-margin", Treatment::unmodelled},
      {"--num-experts", Treatment::modelled},
      {"--expert-model-parallel-size", Treatment::modelled},
      {"--use-torch-fsdp2", Treatment::modelled},
      {"--cpu-offloading-num-layers", Treatment::modelled},
      {"--tp-comm-overlap", Treatment::modelled},
      {"--hybrid-layer-pattern", Treatment::modelled},
      {"--squared-relu", Treatment::modelled},
      {"--disable-mamba-mem-eff-path", Treatment::unmodelled},
      {"--multi-latent-attention", Treatment::modelled},
      {"--mtp-num-layers", Treatment::modelled},
      {"--overlap-param-gather", Treatment::modelled},
      {"--no-tp-comm-bulk-wgrad", Treatment::unmodelled},
      {"--disable-tp-comm-bulk-wgrad", Treatment::unmodelled},
      {"--batch-size", Treatment::obsolete},
  };
  for (const auto& s : spots) {
    const VocabularyEntry* e = megatron_vocabulary().find(s.flag);
    ASSERT_NE(e, nullptr) << s.flag;
    EXPECT_EQ(e->treatment, s.treatment) << s.flag;
  }
  EXPECT_EQ(megatron_vocabulary().find("--pipline-model-parallel-size"), nullptr);
  // How many values each takes, as Megatron-LM's add_argument calls say (nargs, action):
  // switches (store_true, a generated --no- form), one value, '+', '*' and nargs=3.
  const struct {
    const char* flag;
    std::pair<int, int> values;
  } takes[] = {
      {"--num-layers", {1, 1}},
      {"--bf16", {0, 0}},
      {"--no-tp-comm-bulk-wgrad", {0, 0}},
      {"--save", {1, 1}},
      {"--recompute-modules", {1, -1}},
      {"--cp-comm-type", {1, -1}},
      {"--data-path", {0, -1}},
      {"--rampup-batch-size", {3, 3}},
      {"--use-torch-fsdp2", {0, 0}},
      {"--fp8-format", {1, 1}},
  };
  for (const auto& t : takes) {
    const VocabularyEntry* e = megatron_vocabulary().find(t.flag);
    ASSERT_NE(e, nullptr) << t.flag;
    ASSERT_TRUE(e->values.has_value()) << t.flag;
    EXPECT_EQ(*e->values, t.values) << t.flag;
  }
  for (const VocabularyEntry& e : megatron_vocabulary().entries())
    EXPECT_TRUE(e.values.has_value()) << e.name << ": every flag says how many values it takes";
}

TEST(MegatronVocabulary, TheValuesColumnIsCheckedAndOptional) {
  EXPECT_FALSE(Vocabulary("--a\tinert\t-\t-\n", "t").find("--a")->values.has_value());
  const Vocabulary v("--a\tinert\t-\t-\t0\n--b\tinert\t-\t-\t+\n--c\tinert\t-\t-\t?\n", "t");
  EXPECT_EQ(v.find("--a")->values, (std::pair{0, 0}));
  EXPECT_EQ(v.find("--b")->values, (std::pair{1, -1}));
  EXPECT_EQ(v.find("--c")->values, (std::pair{0, 1}));
  EXPECT_THROW(Vocabulary("--a\tinert\t-\t-\tmany\n", "t"), std::logic_error);
  EXPECT_THROW(Vocabulary("--a\tinert\t-\t-\t-1\n", "t"), std::logic_error);
  // Every row or none.
  EXPECT_THROW(Vocabulary("--a\tinert\t-\t-\t1\n--b\tinert\t-\t-\n", "t"), std::logic_error);
}

TEST(MegatronVocabulary, MalformedTablesAreRefused) {
  EXPECT_NO_THROW(Vocabulary("# c\n--a\tinert\t-\t-\n--b\tunmodelled\t1|2\tbecause\n", "t"));
  EXPECT_THROW(Vocabulary("--a\tinert\t-\t-\n--a\tinert\t-\t-\n", "t"), std::logic_error);
  EXPECT_THROW(Vocabulary("--a\tinert\n", "t"), std::logic_error);
  EXPECT_THROW(Vocabulary("--a\tsometimes\t-\t-\n", "t"), std::logic_error);
  EXPECT_THROW(Vocabulary("--a\tunmodelled\t-\t-\n", "t"), std::logic_error);  // no reason
  EXPECT_THROW(Vocabulary("--a\tinert\t1\t-\n", "t"),
               std::logic_error);  // harmless: unmodelled only
  const Vocabulary v("--b\tunmodelled\t1|2\tbecause\n", "t");
  EXPECT_TRUE(v.find("--b")->harmless_value("1"));
  EXPECT_TRUE(v.find("--b")->harmless_value("2"));
  EXPECT_FALSE(v.find("--b")->harmless_value("12"));
  EXPECT_FALSE(v.find("--b")->harmless_value("1|2"));
  // Numbers match by value: YAML's "0." and "1.0" are 0 and 1.
  EXPECT_TRUE(v.find("--b")->harmless_value("1.0"));
  EXPECT_TRUE(v.find("--b")->harmless_value("2."));
  EXPECT_FALSE(v.find("--b")->harmless_value("1.5"));
}

// The cases: each flag that changes time or memory is returned as unmodelled with
// its line and value (the caller refuses it unless allowed), and not listed as ignored.
TEST(MegatronImport, FlagsThatChangeTheJobAreUnmodelled) {
  for (const char* extra :
       {"--wgrad-deferral-limit 2", "--fp8-margin 1", "--moe-shared-expert-overlap",
        "--fsdp-double-buffer", "--tp-comm-overlap-rs-dgrad"}) {
    const ImportedJob job = import(kModel + extra + "\n");
    ASSERT_EQ(job.unmodelled.size(), 1u) << extra;
    EXPECT_EQ(job.unmodelled[0].given, extra);
    EXPECT_EQ(job.unmodelled[0].origin.file, "args.txt");
    EXPECT_EQ(job.unmodelled[0].origin.line, 4);
    EXPECT_EQ(job.unmodelled[0].origin.key,
              std::string(extra).substr(0, std::string(extra).find(' ')));
    EXPECT_FALSE(job.unmodelled[0].reason.empty());
    EXPECT_TRUE(job.ignored.empty()) << job.ignored[0];
    // The refusal names the file, the line and the flag.
    EXPECT_EQ(std::string(unmodelled_error(job.unmodelled).what())
                  .rfind("args.txt:4: " + job.unmodelled[0].origin.key +
                             ": not modelled yet; the simulated job would differ from yours (",
                         0),
              0u);
  }
  // Megatron-LM's own default changes nothing: listed, not refused (also as --flag=value).
  const ImportedJob defaults =
      import(kModel +
             "--wgrad-deferral-limit 0 --pipeline-model-parallel-comm-backend=nccl "
             "--expert-model-parallel-size 1\n");
  EXPECT_TRUE(defaults.unmodelled.empty());
  EXPECT_EQ(defaults.ignored,
            (std::vector<std::string>{
                "--wgrad-deferral-limit 0 (Megatron-LM's default)",
                "--pipeline-model-parallel-comm-backend nccl (Megatron-LM's default)",
                "--expert-model-parallel-size (no effect without --num-experts)"}));
  // The last use counts, as in argparse; several are named after the first.
  const ImportedJob both =
      import(kModel + "--fp8-margin 1 --wgrad-deferral-limit 0\n--wgrad-deferral-limit 2\n");
  ASSERT_EQ(both.unmodelled.size(), 2u);
  EXPECT_EQ(both.unmodelled[1].given, "--wgrad-deferral-limit 2");
  EXPECT_EQ(both.unmodelled[1].origin.line, 5);
  EXPECT_NE(std::string(unmodelled_error(both.unmodelled).what())
                .find("; also not modelled: --wgrad-deferral-limit (line 5)."),
            std::string::npos);
  EXPECT_EQ(unmodelled_warning(both.unmodelled[0])
                .rfind("--fp8-margin 1 is not modelled; the simulated job differs from yours (", 0),
            0u);
}

// Flags before the script are the launcher's; a .py file as a flag's value is no script.
TEST(MegatronImport, TheLaunchersFlagsAreListed) {
  const ImportedJob job = import(
      "export X=1; python -m torch.distributed.run --nnodes 2 "
      "--nproc-per-node=8 pretrain_gpt.py \\\n" +
      kModel);
  EXPECT_EQ(job.ignored, (std::vector<std::string>{
                             "'export' (not a flag)", "'X=1' (not a flag)", "'python' (not a flag)",
                             "'-m' (not a flag)", "'torch.distributed.run' (not a flag)",
                             "--nnodes (not modelled)", "--nproc-per-node (not modelled)",
                             "'pretrain_gpt.py' (not a flag)"}));
  EXPECT_EQ(
      error_of("--nnodes 2 --spec x.py\n" + kModel).rfind("args.txt:1: --nnodes: unknown flag", 0),
      0u);
}

// Inert flags stay listed, their values with them.
TEST(MegatronImport, InertFlagsStayListed) {
  const ImportedJob job = import(kModel + "--save /x --log-interval 10 --wandb-project p\n");
  EXPECT_EQ(job.ignored,
            (std::vector<std::string>{"--save (not modelled)", "--log-interval (not modelled)",
                                      "--wandb-project (not modelled)"}));
  EXPECT_TRUE(job.unmodelled.empty());
}

// --overlap-grad-reduce is bmpipe's training.optimizer.overlap_grad_reduce.
TEST(MegatronImport, OverlapGradReduceIsRead) {
  const ImportedJob job = import(kModel + "--overlap-grad-reduce\n");
  EXPECT_EQ(job.overlap_grad_reduce, true);
  EXPECT_TRUE(job.ignored.empty());
  const std::string yaml = imported_yaml(job, cluster_from_preset("h200", 8), "out.yaml");
  EXPECT_EQ(line_with(yaml, "    overlap_grad_reduce:"),
            "    overlap_grad_reduce: true           # --overlap-grad-reduce (line 4)");
  EXPECT_TRUE(parse_config(yaml, "out.yaml").training.optimizer.overlap_grad_reduce);
  // Without the flag the key is left out (bmpipe's default, false).
  const std::string plain = imported_yaml(import(kModel), cluster_from_preset("h200", 8), "o.yaml");
  EXPECT_EQ(plain.find("overlap_grad_reduce"), std::string::npos);
  EXPECT_FALSE(parse_config(plain, "o.yaml").training.optimizer.overlap_grad_reduce);
}

// ---- the YAML -----------------------------------------------------------------------------

TEST(MegatronImport, TheYamlLoadsAndSaysWhereEachValueCameFrom) {
  const ImportedJob job = import(kModel +
                                 "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 4 "
                                 "--pipeline-model-parallel-layout 'Et*9|t*9|t*8|t*6L' "
                                 "--recompute-granularity full --recompute-method block "
                                 "--recompute-num-layers 2 --use-distributed-optimizer\n");
  const std::string yaml = imported_yaml(job, cluster_from_preset("h200", 16), "out.yaml");
  const Config c = parse_config(yaml, "out.yaml");
  EXPECT_EQ(c.cluster.nodes, 2);
  EXPECT_EQ(c.training.pp, 4);
  EXPECT_EQ(c.training.tp, 2);
  EXPECT_EQ(c.training.data_parallel(16), 2);
  EXPECT_EQ(c.training.microbatches, 32);  // 64 / (1 x dp 2)
  EXPECT_EQ(c.training.partition, (std::vector<int>{9, 9, 8, 6}));
  EXPECT_EQ(c.training.optimizer.zero_stage, 1);
  EXPECT_EQ(c.model.shape->ffn_hidden_size, 11008);
  // Block 2: the first two layers of each stage (0, 9, 18, 26) recompute fully.
  EXPECT_EQ(c.training.recompute.global, R::none);
  std::vector<int> full;
  for (const auto& [layer, mode] : c.training.recompute.layers)
    if (mode == R::full) full.push_back(layer);
  EXPECT_EQ(full, (std::vector<int>{0, 1, 9, 10, 18, 19, 26, 27}));
  EXPECT_NE(line_with(yaml, "  pp: 4 ").find("# --pipeline-model-parallel-size (line 4)"),
            std::string::npos)
      << yaml;
  EXPECT_NE(line_with(yaml, "  ffn_hidden_size: ").find("# --ffn-hidden-size (line 1)"),
            std::string::npos);
  EXPECT_NE(yaml.find("# Imported by bmpipe from args.txt (Megatron-LM arguments)."),
            std::string::npos);
  // Same inputs, same bytes.
  EXPECT_EQ(yaml,
            imported_yaml(import(kModel + "--tensor-model-parallel-size 2 "
                                          "--pipeline-model-parallel-size 4 "
                                          "--pipeline-model-parallel-layout 'Et*9|t*9|t*8|t*6L' "
                                          "--recompute-granularity full --recompute-method block "
                                          "--recompute-num-layers 2 --use-distributed-optimizer\n"),
                          cluster_from_preset("h200", 16), "out.yaml"));
}

// Megatron's even split is bmpipe's default: the YAML shows it as a comment and leaves the
// key out, so a schedule with twice the stages (zb-v, dualpipe-v) can load the same config.
TEST(MegatronImport, AnEvenSplitIsLeftToTheDefaultSoOtherSchedulesLoadIt) {
  const ImportedJob job =
      import(kModel + "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 4\n");
  ASSERT_EQ(job.partition, (std::vector<int>{8, 8, 8, 8}));
  const std::string yaml = imported_yaml(job, cluster_from_preset("h200", 16), "out.yaml");
  EXPECT_EQ(yaml.find("\n  partition:"), std::string::npos) << yaml;
  EXPECT_NE(line_with(yaml, "  # partition: [8, 8, 8, 8]").find("even split"), std::string::npos)
      << yaml;
  EXPECT_TRUE(parse_config(yaml, "out.yaml").training.partition.empty());
  Overrides zbv;
  zbv.schedule = "zb-v";
  const Config c = parse_config(yaml, "out.yaml", zbv);
  EXPECT_EQ(c.training.schedule, "zb-v");
  // An uneven split stays, written out.
  const std::string uneven = imported_yaml(
      import(kModel + "--pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 5\n"),
      cluster_from_preset("h200", 8), "out.yaml");
  EXPECT_EQ(parse_config(uneven, "out.yaml").training.partition, (std::vector<int>{5, 9, 9, 9}));
}

// What only the whole config can check (the cluster against the layout, the batch) is
// reported against the flag the value came from.
TEST(MegatronImport, ChecksOfTheWholeConfigNameTheFlag) {
  auto yaml_error = [](const std::string& args, long long devices) {
    try {
      imported_yaml(import(args), cluster_from_preset("h200", devices), "out.yaml");
    } catch (const ImportError& e) {
      return std::string(e.what());
    }
    return std::string("<accepted>");
  };
  const std::string pp3 =
      "--num-layers 30 --hidden-size 1024 --num-attention-heads 8 --seq-length 1024 "
      "--vocab-size 1024 --micro-batch-size 1 --bf16\n--pipeline-model-parallel-size 3\n";
  EXPECT_EQ(yaml_error(pp3, 8).rfind("args.txt:2: --pipeline-model-parallel-size: ", 0), 0u)
      << yaml_error(pp3, 8);
  const std::string gbs =
      "--num-layers 2 --hidden-size 1024 --num-attention-heads 8 "
      "--seq-length 1024 --vocab-size 1024 --micro-batch-size 1 --bf16 \\\n"
      "  --global-batch-size 10\n";
  EXPECT_EQ(yaml_error(gbs, 4).rfind("args.txt:2: --global-batch-size: ", 0), 0u)
      << yaml_error(gbs, 4);
  EXPECT_EQ(yaml_error(gbs, 5), "<accepted>");
  // An analytic model needs a device with compute figures.
  const test::ScratchDir dir;
  const std::string cluster =
      test::write_file(dir.file("cluster.yaml"),
                       "cluster:\n  nodes: 1\n  devices_per_node: 2\n  device: {memory_GiB: 80}\n"
                       "  intra_node: {bandwidth_GBps: 100, latency_us: 1}\n");
  try {
    imported_yaml(import(kModel), cluster_from_file(cluster), "out.yaml");
    ADD_FAILURE() << "accepted a device without compute figures";
  } catch (const ImportError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(cluster + ":1: cluster.device: the imported model is "
                                                    "analytic",
                                          0),
              0u)
        << e.what();
  }
}

// ---- the vocabulary ------------------------------------------------------------------------
// Megatron-LM's layout grammar (pipeline_parallel_layer_layout.py parse_str_to_list and
// docs/user-guide/features/pipeline_parallel_layout.md: "Et*3|(tt|)*29,m|L" is DeepSeek-V3's
// 61 decoder layers and one MTP layer over PP16 x VPP2), the uneven first/last rule and the
// even split with the embedding/loss accounted for (transformer_block.py
// get_num_layers_to_build).

std::vector<int> decoders(const std::vector<MegatronLayoutStage>& stages) {
  std::vector<int> out;
  for (const auto& s : stages) out.push_back(s.decoders);
  return out;
}

std::string layout_error(const std::string& layout) {
  try {
    parse_megatron_layout(layout);
  } catch (const FormatError& e) {
    return e.what();
  }
  return "<accepted>";
}

TEST(MegatronLayout, TheWorkedExample) {
  const auto stages = parse_megatron_layout("Et*9|t*9|t*8|t*6L");
  EXPECT_EQ(decoders(stages), (std::vector<int>{9, 9, 8, 6}));
  ASSERT_EQ(stages.size(), 4u);
  EXPECT_TRUE(stages[0].embedding);
  EXPECT_FALSE(stages[0].loss);
  EXPECT_TRUE(stages[3].loss);
  EXPECT_EQ(megatron_layout_string({9, 9, 8, 6}), "Et*9|t*9|t*8|t*6L");
}

TEST(MegatronLayout, TheDocumentedDeepSeekExample) {
  // PP16 x VPP2 = 32 stages: E + 3 decoders, 29 stages of two, one MTP stage, the loss.
  const auto stages = parse_megatron_layout("Et*3|(tt|)*29,m|L");
  ASSERT_EQ(stages.size(), 32u);
  EXPECT_TRUE(stages[0].embedding);
  EXPECT_EQ(stages[0].decoders, 3);
  for (int s = 1; s <= 29; ++s) EXPECT_EQ(stages[s].decoders, 2) << s;
  EXPECT_EQ(stages[30].mtp, 1);
  EXPECT_EQ(stages[30].decoders, 0);
  EXPECT_TRUE(stages[31].loss);
  int total = 0;
  for (const auto& s : stages) total += s.decoders;
  EXPECT_EQ(total, 61);
}

TEST(MegatronLayout, CommasEmptyStagesAndGroups) {
  // The help text's example: "E|(t|)*3,m|m||L" is E, t, t, t, m, m, (empty), L.
  const auto help = parse_megatron_layout("E|(t|)*3,m|m||L");
  ASSERT_EQ(help.size(), 8u);
  EXPECT_EQ(decoders(help), (std::vector<int>{0, 1, 1, 1, 0, 0, 0, 0}));
  EXPECT_EQ(help[4].mtp + help[5].mtp, 2);
  EXPECT_TRUE(help[7].loss);
  // "(|ab)*2,cd -> |ab|abcd" in the parser's own comment, with t for a and b.
  EXPECT_EQ(decoders(parse_megatron_layout("E(|tt)*2,tL")), (std::vector<int>{0, 2, 3}));
  // x*n repeats any one character, a separator included.
  EXPECT_EQ(decoders(parse_megatron_layout("Et|*3tL")), (std::vector<int>{1, 0, 0, 1}));
  EXPECT_EQ(decoders(parse_megatron_layout("E,t,t|t*010,L")), (std::vector<int>{2, 10}));
}

TEST(MegatronLayout, WhatMegatronRefuses) {
  EXPECT_NE(layout_error("Et*9|t*9|t*8|t*6").find("last layer must be the loss"),
            std::string::npos);
  EXPECT_NE(layout_error("tE|L").find("first layer must be the embedding"), std::string::npos);
  EXPECT_NE(layout_error("|EtL").find("<accepted>"), std::string::npos);  // empty first stage
  EXPECT_NE(layout_error("Et|EtL").find("exactly once"), std::string::npos);
  EXPECT_NE(layout_error("Et|x|L").find("invalid layer character 'x'"), std::string::npos);
  EXPECT_NE(layout_error("E t|L").find("invalid layer character"), std::string::npos);
  EXPECT_NE(layout_error("E((t)*2|)*2L").find("nested parentheses"), std::string::npos);
  EXPECT_NE(layout_error("E(t)|L").find("followed by *n"), std::string::npos);
  EXPECT_NE(layout_error("E(t|L").find("never closed"), std::string::npos);
  EXPECT_NE(layout_error("Et*3*2|L").find("invalid layer character '*'"), std::string::npos);
  EXPECT_NE(layout_error("Et*200000|L").find("more than 100000"), std::string::npos);
  EXPECT_NE(layout_error("E(t*9|)*99999L").find("more than 100000"), std::string::npos);
  EXPECT_NE(layout_error("").find("no layer"), std::string::npos);
}

// Any partition written as a layout reads back as itself.
TEST(MegatronLayout, WrittenLayoutsReadBack) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<int> partition(1 + rng() % 12);
    for (int& n : partition) n = static_cast<int>(rng() % 6);
    const auto stages = parse_megatron_layout(megatron_layout_string(partition));
    EXPECT_EQ(decoders(stages), partition);
    EXPECT_TRUE(stages.front().embedding);
    EXPECT_TRUE(stages.back().loss);
  }
}

TEST(MegatronPartition, FirstAndLastRanks) {
  EXPECT_EQ(megatron_uneven(32, 4, 1, 10, 6), (std::vector<int>{10, 8, 8, 6}));
  EXPECT_EQ(megatron_uneven(32, 3, 1, 10, std::nullopt), (std::vector<int>{10, 11, 11}));
  // vpp 2: a rank's 8 layers are two chunks of 4; the middle ranks' 8 too.
  EXPECT_EQ(megatron_uneven(32, 4, 2, 8, 8), (std::vector<int>{4, 4, 4, 4, 4, 4, 4, 4}));
  EXPECT_EQ(megatron_uneven(32, 4, 1, 9, std::nullopt), std::nullopt);  // 23 over 3 ranks
  EXPECT_EQ(megatron_uneven(32, 4, 2, 9, 7), std::nullopt);             // 9 is odd
  EXPECT_EQ(megatron_uneven(16, 2, 1, 10, 6), (std::vector<int>{10, 6}));
  EXPECT_EQ(megatron_uneven(16, 2, 1, 10, 5), std::nullopt);  // one layer and no rank left
}

TEST(MegatronPartition, EvenSplitWithTheEmbeddingAndLossCounted) {
  EXPECT_EQ(megatron_even(32, 4, 1, false, false), (std::vector<int>{8, 8, 8, 8}));
  // 31 + the embedding = 32 over 4: the first stage builds 7 decoder layers.
  EXPECT_EQ(megatron_even(31, 4, 1, true, false), (std::vector<int>{7, 8, 8, 8}));
  EXPECT_EQ(megatron_even(30, 4, 1, true, true), (std::vector<int>{7, 8, 8, 7}));
  // vpp 2: 8 per rank, 4 per chunk; only the very first and very last chunk lose one.
  EXPECT_EQ(megatron_even(30, 4, 2, true, true), (std::vector<int>{3, 4, 4, 4, 4, 4, 4, 3}));
  EXPECT_THROW(megatron_even(31, 4, 1, false, false), FormatError);
  EXPECT_THROW(megatron_even(32, 4, 3, false, false), FormatError);
  EXPECT_EQ(megatron_even(3, 2, 1, true, false), (std::vector<int>{1, 2}));
}

// ---- export --------------------------------------------------------------------------------

// The brief's example: Et*9|t*9|t*8|t*6L is [9, 9, 8, 6]; neither the first nor the last
// rank alone, nor both, leaves an evenly divisible middle (23/3, 26/3, 17/2).
TEST(MegatronExport, LayoutOfTheWorkedExample) {
  const ExportLayout l = plan(4, 1, {9, 9, 8, 6});
  const MegatronExport m = export_megatron(l);
  EXPECT_EQ(m.flags,
            "--pipeline-model-parallel-size 4\n"
            "--num-layers 32\n"
            "--pipeline-model-parallel-layout \"Et*9|t*9|t*8|t*6L\"\n");
  EXPECT_TRUE(m.exact);
  EXPECT_EQ(m.note, "");
  EXPECT_EQ(m.expressed.partition, l.partition);
  EXPECT_EQ(m.expressed.stage_rank, l.stage_rank);
  EXPECT_EQ(parse_layout("\"Et*9|t*9|t*8|t*6L\""), (std::vector<int>{9, 9, 8, 6}));
}

// With DeepSeek-V3's MTP module: Megatron-LM refuses a layout whose 'm' count is not
// --mtp-num-layers ([MG-layout] validate_layer_layout), so the layout lists it on the last
// stage before the loss, where bmpipe runs it; two MTP layers as m*2.
TEST(MegatronExport, TheLayoutListsTheMtpLayersBeforeTheLoss) {
  ExportLayout l = plan(4, 1, {9, 9, 8, 6});
  l.mtp_layers = 1;
  EXPECT_EQ(export_megatron(l).flags,
            "--pipeline-model-parallel-size 4\n"
            "--num-layers 32\n"
            "--pipeline-model-parallel-layout \"Et*9|t*9|t*8|t*6mL\"\n");
  const auto stages = parse_megatron_layout(megatron_layout_string({9, 9, 8, 6}, 2));
  ASSERT_EQ(stages.size(), 4u);
  EXPECT_EQ(stages[3].decoders, 6);
  EXPECT_EQ(stages[3].mtp, 2);
  EXPECT_TRUE(stages[3].loss);
  EXPECT_EQ(megatron_layout_string({9, 9, 8, 6}, 2), "Et*9|t*9|t*8|t*6m*2L");
}

TEST(MegatronExport, UniformPlanPrintsNoPartitionFlags) {
  EXPECT_EQ(export_megatron(plan(4, 1, {8, 8, 8, 8})).flags,
            "--pipeline-model-parallel-size 4\n--num-layers 32\n");
  EXPECT_EQ(export_megatron(plan(4, 2, {4, 4, 4, 4, 4, 4, 4, 4})).flags,
            "--pipeline-model-parallel-size 4\n--num-layers 32\n"
            "--num-virtual-stages-per-pipeline-rank 2\n");
  // Every layer selective: one flag, no method, no count.
  const MegatronExport sel = export_megatron(plan(2, 1, {4, 4}, {{0, 4}, {0, 4}}));
  EXPECT_EQ(
      sel.flags,
      "--pipeline-model-parallel-size 2\n--num-layers 8\n--recompute-granularity selective\n");
  EXPECT_TRUE(sel.exact);
  // Every layer full: uniform groups of one layer.
  const MegatronExport full = export_megatron(plan(2, 1, {4, 4}, {{4, 0}, {4, 0}}));
  EXPECT_EQ(full.flags,
            "--pipeline-model-parallel-size 2\n--num-layers 8\n--recompute-granularity full\n"
            "--recompute-method uniform\n--recompute-num-layers 1\n");
  EXPECT_TRUE(full.exact);
}

TEST(MegatronExport, FirstAndLastRankFlags) {
  // 32 - 10 - 6 = 16 over the 2 middle ranks.
  EXPECT_EQ(export_megatron(plan(4, 1, {10, 8, 8, 6})).flags,
            "--pipeline-model-parallel-size 4\n--num-layers 32\n"
            "--decoder-first-pipeline-num-layers 10\n--decoder-last-pipeline-num-layers 6\n");
  // 32 - 10 = 22 over the other 2 ranks, last included.
  EXPECT_EQ(export_megatron(plan(3, 1, {10, 11, 11})).flags,
            "--pipeline-model-parallel-size 3\n--num-layers 32\n"
            "--decoder-first-pipeline-num-layers 10\n");
  EXPECT_EQ(export_megatron(plan(3, 1, {11, 11, 10})).flags,
            "--pipeline-model-parallel-size 3\n--num-layers 32\n"
            "--decoder-last-pipeline-num-layers 10\n");
  EXPECT_EQ(export_megatron(plan(2, 1, {9, 7})).flags,
            "--pipeline-model-parallel-size 2\n--num-layers 16\n"
            "--decoder-first-pipeline-num-layers 9\n");
}

// vpp 2 with chunks of one rank unequal: only the layout says it, VPP rank 0's stages first;
// the layout implies vpp, so no vpp flag.
TEST(MegatronExport, InterleavedLayout) {
  const ExportLayout l = plan(2, 2, {3, 5, 4, 4});
  const MegatronExport m = export_megatron(l);
  EXPECT_EQ(m.flags,
            "--pipeline-model-parallel-size 2\n--num-layers 16\n"
            "--pipeline-model-parallel-layout \"Et*3|t*5|t*4|t*4L\"\n");
  EXPECT_TRUE(m.exact);
}

// The MindFormers card's interleaved plan: different full counts per stage are beyond
// Megatron's one N; block 2 covers them.
TEST(MegatronExport, DifferentFullCountsTakeTheLargest) {
  const ExportLayout l =
      plan(5, 2, {4, 5, 5, 5, 5, 5, 5, 5, 5, 4}, {{2, 0}, {1, 0}, {}, {}, {}, {1, 0}});
  const MegatronExport m = export_megatron(l);
  EXPECT_EQ(m.flags,
            "--pipeline-model-parallel-size 5\n--num-layers 48\n"
            "--pipeline-model-parallel-layout "
            "\"Et*4|t*5|t*5|t*5|t*5|t*5|t*5|t*5|t*5|t*4L\"\n"
            "--recompute-granularity full\n--recompute-method block\n--recompute-num-layers 2\n");
  EXPECT_FALSE(m.exact);
  EXPECT_NE(m.note.find("full [2, 1, 0, 0, 0, 1, 0, 0, 0, 0]"), std::string::npos) << m.note;
  EXPECT_EQ(m.expressed.partition, l.partition);
  EXPECT_EQ(decode_megatron(m.flags).modes, m.expressed.recompute);
  EXPECT_TRUE(dominates(m.expressed.recompute, l.recompute));
}

// Selective and full mixed: selective layers count as full. [9, 9, 8, 6] with full
// [2, 1, 0, 0] and selective [0, 3, 0, 0] needs the first 4 layers of every stage full.
TEST(MegatronExport, MixedModesGiveTheNearestBlock) {
  const ExportLayout l = plan(4, 1, {9, 9, 8, 6}, {{2, 0}, {1, 3}, {}, {}});
  const MegatronExport m = export_megatron(l);
  EXPECT_FALSE(m.exact);
  EXPECT_EQ(m.note,
            "Megatron-LM recomputes in full the same first N layers of every stage and cannot mix "
            "selective with full; the plan has full [2, 1, 0, 0] and selective [0, 3, 0, 0] "
            "layers per stage, so the nearest flags recompute the first 4 layers of every stage "
            "in full.");
  EXPECT_NE(m.flags.find("--recompute-method block\n--recompute-num-layers 4\n"),
            std::string::npos);
  EXPECT_EQ(m.expressed.partition, l.partition);
  const ExportLayout want = plan(4, 1, {9, 9, 8, 6}, {{4, 0}, {4, 0}, {4, 0}, {4, 0}});
  EXPECT_EQ(m.expressed.recompute, want.recompute);
}

// Stages of 3 and 2 layers: none, selective, block 1, block 2, uniform; written out by hand.
TEST(MegatronExport, TheRecomputeChoicesAreEveryRuleTheFlagsCanState) {
  const R n = R::none, s = R::selective, f = R::full;
  const std::vector<Modes> want{
      {n, n, n, n, n}, {s, s, s, s, s}, {f, n, n, f, n}, {f, f, n, f, f}, {f, f, f, f, f}};
  EXPECT_EQ(megatron_recompute_choices({3, 2}), want);
  // Each is exact: the flags state it as it is.
  for (const Modes& modes : want) {
    ExportLayout l = plan(2, 1, {3, 2});
    l.recompute = modes;
    const MegatronExport m = export_megatron(l);
    EXPECT_TRUE(m.exact) << m.note;
    EXPECT_EQ(decode_megatron(m.flags).modes, modes) << m.flags;
  }
}

// The (none 0, selective 9, full 1) stage beside a stage without recompute: N = 10 covers
// every stage, so every layer recomputes in full.
TEST(MegatronExport, CoveringEveryLayerIsUniform) {
  const ExportLayout l = plan(2, 1, {10, 10}, {{1, 9}, {0, 0}});
  const MegatronExport m = export_megatron(l);
  EXPECT_FALSE(m.exact);
  EXPECT_NE(m.flags.find("--recompute-method uniform\n--recompute-num-layers 1\n"),
            std::string::npos);
  EXPECT_NE(m.note.find("every layer in full"), std::string::npos) << m.note;
  EXPECT_EQ(m.expressed.recompute, Modes(20, Recompute::full));
}

TEST(MegatronExport, PartlySelectiveBecomesAllSelective) {
  const ExportLayout l = plan(2, 1, {4, 4}, {{0, 4}, {0, 1}});
  const MegatronExport m = export_megatron(l);
  EXPECT_FALSE(m.exact);
  EXPECT_NE(m.note.find("keeps 3 of 8 layers without recompute"), std::string::npos) << m.note;
  EXPECT_EQ(m.expressed.recompute, Modes(8, Recompute::selective));
  EXPECT_NE(m.flags.find("--recompute-granularity selective\n"), std::string::npos);
}

TEST(MegatronExport, VPlacementIsNotExpressible) {
  ExportLayout l = plan(2, 2, {2, 2, 2, 2});
  l.stage_rank = {0, 1, 1, 0};
  const MegatronExport m = export_megatron(l);
  EXPECT_FALSE(m.exact);
  EXPECT_NE(m.note.find("no V placement"), std::string::npos) << m.note;
  EXPECT_EQ(m.expressed.stage_rank, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(m.expressed.partition, l.partition);
  EXPECT_EQ(m.expressed.recompute, l.recompute);
}

TEST(MegatronExport, OnePipelineStage) {
  const MegatronExport m = export_megatron(plan(1, 1, {8}, {{3, 0}}));
  EXPECT_EQ(m.flags,
            "--pipeline-model-parallel-size 1\n--num-layers 8\n--recompute-granularity full\n"
            "--recompute-method block\n--recompute-num-layers 3\n");
  EXPECT_TRUE(m.exact);
}

// A first stage with only the embedding: --decoder-first-pipeline-num-layers must be > 0, so
// the layout says it with an empty decoder run.
TEST(MegatronExport, StageWithOnlyTheEmbedding) {
  const MegatronExport m = export_megatron(plan(4, 1, {0, 8, 8, 8}));
  EXPECT_EQ(m.flags,
            "--pipeline-model-parallel-size 4\n--num-layers 24\n"
            "--pipeline-model-parallel-layout \"E|t*8|t*8|t*8L\"\n");
  EXPECT_TRUE(m.exact);
}

}  // namespace megatron_test
}  // namespace bmpipe
