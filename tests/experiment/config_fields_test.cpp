// The field tables: each section accepts exactly its documented keys, refuses duplicates,
// reads integers without wrapping, and every number outside its physical range is an
// error naming the key, the range and the value as written.
#include <gtest/gtest.h>

#include "experiment/config_cases.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

using test::config_error;
using test::has;
using test::kUnit;
using test::with;

// The allowed keys of each section, as docs/config.md lists them, in that order.
TEST(ConfigFields, UnknownKeyListsExactlyTheSectionsKeys) {
  struct Case {
    std::string from, to, key, expected, suggestion = "";
  };
  const Case cases[] = {
      {"  nodes: 1\n", "  nodes: 1\n  node: 2\n", "cluster.node",
       "nodes, devices_per_node, scale_up_domain, device, intra_node, inter_node", "nodes"},
      {"latency_us: 0}", "latency_us: 0, jitter_us: 1}", "cluster.intra_node.jitter_us",
       "bandwidth_GBps, latency_us"},
      {"count: 8\n", "count: 8\n      flops: 3\n", "model.layers[0].flops",
       "name, count, forward_ms, backward_input_ms, backward_weight_ms, recompute_ms, "
       "activation_bytes, weight_grad_retained_bytes, output_bytes, param_bytes, grad_bytes, "
       "optimizer_bytes, recompute"},
      {"  pp: 4\n", "  pp: 4\n  ppp: 4\n", "training.ppp",
       "schedule, pp, vpp, tp, ep, etp, cp, cp_comm_type, cp_hierarchy, dp, devices, microbatches, "
       "partition, "
       "megatron_layout, overlap_factor, overlap_ms, "
       "activation_limit_microbatches, seq_length, micro_batch_size, global_batch_size, dtype, "
       "sequence_parallel, tp_comm_overlap, separate_ends, fp8, fp8_recipe, fp8_param_gather, "
       "optimizer, kernels, "
       "grad_accumulation, recompute, recompute_modules, offload_modules, offload_lead, "
       "offload_layers, bpipe, fsdp, fsdp_shard_group, fsdp_reshard_after_forward, "
       "fsdp_all_reduce_every_microbatch, moe_overlap, "
       "moe_dispatcher, moe_capacity_factor, vocab_parallel, cuda_graphs",
       "pp"},
      {"model:\n", "modle: 1\nmodel:\n", "modle", "cluster, model, training", "model"},
  };
  for (const Case& c : cases) {
    const ConfigError e = config_error(with(c.from, c.to));
    EXPECT_EQ(e.key(), c.key);
    const std::string hint = c.suggestion.empty() ? "" : " (did you mean '" + c.suggestion + "'?)";
    EXPECT_EQ(e.message(), "unknown key" + hint + " (expected one of: " + c.expected + ")");
  }
}

TEST(ConfigFields, DuplicateKeyNamesBothLines) {
  // yaml-cpp would silently keep the first of the two.
  const ConfigError e = config_error(with("  pp: 4\n", "  pp: 4\n  microbatches: 2\n  pp: 2\n"));
  EXPECT_EQ(e.key(), "training.pp");
  EXPECT_EQ(e.line(), 20);
  EXPECT_TRUE(has(e.message(), "given twice, on lines 18 and 20"));
  const ConfigError flow = config_error(with("memory_GiB: 1}", "memory_GiB: 1, memory_GiB: 2}"));
  EXPECT_EQ(flow.key(), "cluster.device.memory_GiB");
  EXPECT_TRUE(has(flow.message(), "on lines 4 and 4"));
}

TEST(ConfigFields, DuplicateSectionNamesBothLines) {
  const ConfigError e = config_error(kUnit + "cluster:\n  nodes: 2\n");
  EXPECT_EQ(e.key(), "cluster");
  EXPECT_EQ(e.line(), 20);
  EXPECT_TRUE(has(e.message(), "given twice, on lines 1 and 20"));
}

TEST(ConfigFields, DuplicateRecomputeIndexIsCaughtThroughItsValue) {
  // 3 and 03 are different YAML keys but the same stage.
  const ConfigError e =
      config_error(with("  pp: 4\n", "  pp: 4\n  recompute: {stages: {3: none, 03: none}}\n"));
  EXPECT_EQ(e.key(), "training.recompute.stages.3");
  EXPECT_TRUE(has(e.message(), "stage 3 is given twice, on lines 19 and 19"));
}

TEST(ConfigFields, IntegersAreNeverWrapped) {
  // 2^32 + 2 would read as 2 through a 32-bit int.
  const ConfigError part =
      config_error(with("  pp: 4\n", "  pp: 4\n  partition: [4294967298, 2, 2, 2]\n"));
  EXPECT_EQ(part.key(), "training.partition[0]");
  EXPECT_EQ(part.line(), 19);
  EXPECT_EQ(part.message(), "must be at most 2147483647, got '4294967298'");
  // 2^32 would read as stage 0.
  const ConfigError stage =
      config_error(with("  pp: 4\n", "  pp: 4\n  recompute: {stages: {4294967296: none}}\n"));
  EXPECT_EQ(stage.key(), "training.recompute.stages");
  EXPECT_TRUE(has(stage.message(), "at most 2147483647"));
  const ConfigError big =
      config_error(with("microbatches: 8", "microbatches: 99999999999999999999"));
  EXPECT_EQ(big.key(), "training.microbatches");
  EXPECT_TRUE(has(big.message(), "expected an integer"));
  const ConfigError sci = config_error(with("microbatches: 8", "microbatches: 1e3"));
  EXPECT_TRUE(has(sci.message(), "in full digits"));
  const ConfigError frac = config_error(with("count: 8", "count: 2.5"));
  EXPECT_EQ(frac.message(), "expected an integer, got '2.5'");
}

TEST(ConfigFields, NumbersMustBeFiniteAndNormal) {
  for (const char* v : {".nan", ".inf", "-.inf", "fast"}) {
    const ConfigError e = config_error(with("forward_ms: 0.5", std::string("forward_ms: ") + v));
    EXPECT_EQ(e.key(), "model.layers[0].forward_ms") << v;
    EXPECT_EQ(e.message(), std::string("expected a number, got '") + v + "'");
  }
  const ConfigError denormal = config_error(with("forward_ms: 0.5", "forward_ms: 1e-310"));
  EXPECT_TRUE(has(denormal.message(), "denormal"));
  // Zero itself is a fine time.
  EXPECT_NO_THROW(parse_config(with("forward_ms: 0.5", "forward_ms: 0"), "exp.yaml"));
}

TEST(ConfigFields, RangesNameTheirBoundAndUnit) {
  struct Case {
    std::string from, to, key, message;
  };
  const Case cases[] = {
      {"memory_GiB: 1", "memory_GiB: -1", "cluster.device.memory_GiB",
       "must be greater than 0 GiB, got '-1'"},
      {"memory_GiB: 1", "memory_GiB: 1, reserved_GiB: -2", "cluster.device.reserved_GiB",
       "must be at least 0 GiB, got '-2'"},
      {"param_bytes: 1048576", "param_bytes: -1", "model.layers[0].param_bytes",
       "must be at least 0 bytes, got '-1'"},
      {"backward_input_ms: 0.5", "backward_input_ms: 1e13", "model.layers[0].backward_input_ms",
       "must be at most 86400000 ms (a day), got '1e13'"},
      {"latency_us: 0", "latency_us: 1e300", "cluster.intra_node.latency_us",
       "must be at most 3600000000 us (an hour), got '1e300'"},
      {"bandwidth_GBps: 100", "bandwidth_GBps: 1e-12", "cluster.intra_node.bandwidth_GBps",
       "must be at least 1e-09 GB/s (1 byte/s), got '1e-12'"},
      {"bandwidth_GBps: 100", "bandwidth_GBps: 2e6", "cluster.intra_node.bandwidth_GBps",
       "must be at most 1000000 GB/s (1 PB/s), got '2e6'"},
      {"  pp: 4\n", "  pp: 4\n  overlap_factor: -0.5\n", "training.overlap_factor",
       "must be greater than 0, got '-0.5'"},
      {"  pp: 4\n", "  pp: 4\n  overlap_factor: 1e308\n", "training.overlap_factor",
       "must be at most 10 (ten times the two halves run apart), got '1e308'"},
      {"count: 8", "count: 0", "model.layers[0].count", "must be at least 1, got '0'"},
  };
  for (const Case& c : cases) {
    const ConfigError e = config_error(with(c.from, c.to));
    EXPECT_EQ(e.key(), c.key) << c.to;
    EXPECT_EQ(e.message(), c.message) << c.to;
    EXPECT_GT(e.line(), 0) << c.to;
  }
}

TEST(ConfigFields, FilesWithoutLinesPointAtLineOne) {
  for (const char* text : {"", "# nothing but a comment\n", "\n\n\n"}) {
    const ConfigError e = config_error(text);
    EXPECT_EQ(e.line(), 1) << "'" << text << "'";
    EXPECT_TRUE(has(e.message(), "the file is empty"));
  }
  const ConfigError scalar = config_error("just words\n");
  EXPECT_EQ(scalar.line(), 1);
  EXPECT_TRUE(has(scalar.message(), "expected a mapping with cluster, model and training"));
  // Sections missing, even after comment lines: line 1.
  const ConfigError missing = config_error("# header\n\n" + kUnit.substr(0, kUnit.find("model:")));
  EXPECT_EQ(missing.line(), 1);
  EXPECT_EQ(missing.key(), "model");
  EXPECT_TRUE(has(missing.message(), "missing required section"));
}

TEST(ConfigFields, KeysMustBePlainNames) {
  const ConfigError e = config_error(with("  pp: 4\n", "  pp: 4\n  ? [a, b]\n  : 1\n"));
  EXPECT_EQ(e.key(), "training");
  EXPECT_TRUE(has(e.message(), "expected a plain key name, got a list"));
}

TEST(ConfigFields, LongValuesAreCutInMessages) {
  const std::string value(5000, '7');
  const ConfigError e = config_error(with("forward_ms: 0.5", "forward_ms: x" + value));
  EXPECT_LT(e.message().size(), 120u) << e.message();
  EXPECT_TRUE(has(e.message(), "..."));
}

TEST(ConfigFields, DefaultsStayWhenKeysAreAbsent) {
  const Config c = parse_config(kUnit, "exp.yaml");
  EXPECT_EQ(c.training.vpp, 1);
  EXPECT_EQ(c.training.tp, 1);
  EXPECT_FALSE(c.training.dp);
  EXPECT_DOUBLE_EQ(c.training.overlap_factor, 1.0);
  EXPECT_EQ(c.model.layers[0].grad_bytes, 0);
  EXPECT_FALSE(c.model.layers[0].weight_grad_retained_bytes);
  EXPECT_DOUBLE_EQ(c.device.reserved_GiB, 0);
  // overlap_ms: 0 means "not given" (overlap_factor decides).
  const Config z = parse_config(with("  pp: 4\n", "  pp: 4\n  overlap_ms: 0\n"), "exp.yaml");
  EXPECT_FALSE(z.training.overlap_ms);
}

// A key's default is not in the file: its errors point at its section's line.
TEST(ConfigFields, ChecksOnDefaultedKeysPointAtTheirSection) {
  const ConfigError e = config_error(with("  pp: 4\n", "  pp: 2\n  dp: 3\n"));
  EXPECT_EQ(e.key(), "training.dp");
  EXPECT_EQ(e.line(), 19);
  Config c = parse_config(kUnit, "exp.yaml");
  c.training.tp = 3;  // never in the file
  try {
    check_config(c);
    FAIL();
  } catch (const ConfigError& err) {
    EXPECT_EQ(err.key(), "training.tp");
    EXPECT_EQ(err.line(), 17);  // where the training section's mapping starts
  }
}

// docs/config-guide.md documents the measured form with one example: it must load as
// written.
TEST(ConfigFields, ReadmeExampleLoads) {
  const std::string readme = test::slurp(std::string(BMPIPE_SOURCE_DIR) + "/docs/config-guide.md");
  const auto section = readme.find("## The config");
  ASSERT_NE(section, std::string::npos);
  const auto start = readme.find("```yaml\n", section);
  ASSERT_NE(start, std::string::npos);
  const auto end = readme.find("```", start + 8);
  const Config c = parse_config(readme.substr(start + 8, end - start - 8), "config-guide.md");
  EXPECT_EQ(c.model.num_layers(), 40);
  EXPECT_TRUE(c.model.layers[1].has_mode(Recompute::full));
  EXPECT_EQ(c.training.recompute.stages.at(1), Recompute::full);
}

}  // namespace
}  // namespace bmpipe
