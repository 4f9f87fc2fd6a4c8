// What a mutation fuzzer found: inputs that killed bmpipe with a signal, hung it, overflowed
// signed integers, or were accepted with a silent change of meaning. Each is now a
// ConfigError naming the key (or, below the config, an exception the caller can report).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "experiment/config_cases.hpp"
#include "experiment/experiment.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

using test::config_error;
using test::has;
using test::kUnit;
using test::with;

// ---- work bounds ------------------------------------------------------------------------------

TEST(WorkBounds, DefaultsAreTheDocumentedOnes) {
  const WorkLimits l;
  EXPECT_EQ(l.max_ops, 100'000'000);
  EXPECT_EQ(l.max_devices, 65'536);
  EXPECT_EQ(l.max_links, 8'388'608);
  EXPECT_EQ(l.max_link_visits, 1'073'741'824);
}

TEST(WorkBounds, TenMillionMicrobatchesAreRefusedBeforeAnyAllocation) {
  const ConfigError e = config_error(with("microbatches: 8", "microbatches: 10000000"));
  EXPECT_EQ(e.key(), "training.microbatches");
  EXPECT_EQ(e.line(), 19);
  // 4 stages x 10^7 x 3 = 1.2e8 ops; at 50 and 100 bytes per op 5.59 and 11.2 GiB.
  EXPECT_EQ(e.message(),
            "this run needs up to 120000000 ops (4 stages x 10000000 micro-batches x 3), about "
            "5.6 GiB (11.2 GiB with --svg); the limit is 100000000 ops; raise it with "
            "--max-ops");
  Overrides raised;
  raised.limits = WorkLimits{};
  raised.limits->max_ops = 120'000'000;
  EXPECT_EQ(parse_config(with("microbatches: 8", "microbatches: 10000000"), "exp.yaml", raised)
                .training.microbatches,
            10'000'000);
}

TEST(WorkBounds, IntMaxMicrobatchesFromTheCommandLine) {
  Overrides o;
  o.microbatches = 2147483647;
  const ConfigError e = config_error(kUnit, o);
  EXPECT_EQ(e.key(), "training.microbatches (from the command line)");
  EXPECT_TRUE(has(e.message(), "--max-ops"));
}

TEST(WorkBounds, VScheduleStagesCountTwicePerDevice) {
  Config c = parse_config(with("schedule: 1f1b", "schedule: zb-v"), "exp.yaml");
  EXPECT_EQ(op_bound(c), 8 * 8 * 3);  // 2 x 4 stages x 8 micro-batches x 3
  c.training.schedule = "1f1b";
  EXPECT_EQ(op_bound(c), 4 * 8 * 3);
}

TEST(WorkBounds, DeviceProductsNeverOverflow) {
  // nodes x devices_per_node = (2^31 - 1)^2 in int would be UB.
  const std::string huge = with("  nodes: 1\n  devices_per_node: 4\n",
                                "  nodes: 2147483647\n  devices_per_node: 2147483647\n"
                                "  inter_node: {bandwidth_GBps: 1, latency_us: 1}\n");
  const ConfigError e = config_error(huge);
  EXPECT_EQ(e.key(), "cluster.nodes");
  EXPECT_TRUE(has(e.message(),
                  "= 4611686014132420609 devices; the limit is 65536; raise it with "
                  "--max-devices"));
  // pp x tp = 2^32 wraps to 0 in int: was a SIGFPE.
  const ConfigError pt = config_error(with("  pp: 4\n", "  pp: 65536\n  tp: 65536\n"));
  EXPECT_EQ(pt.key(), "training.pp");
  // pp x vpp = 2^33.
  const ConfigError pv = config_error(with("  pp: 4\n", "  pp: 4\n  vpp: 2147483647\n"));
  EXPECT_EQ(pv.key(), "training.pp");
  EXPECT_TRUE(has(pv.message(), "--max-ops"));
}

TEST(WorkBounds, BigNodesAreRefusedForTheirLinks) {
  // One node of 4096 devices: 4096 x 4095 links; was a hang.
  const ConfigError e =
      config_error(with("  devices_per_node: 4\n", "  devices_per_node: 4096\n",
                        with("count: 8", "count: 4096", with("  pp: 4\n", "  pp: 4096\n"))));
  EXPECT_EQ(e.key(), "cluster.devices_per_node");
  EXPECT_TRUE(has(e.message(), "16773120 links")) << e.message();
  // 1024 devices: 1047552 links fit, but routing 1023 boundaries visits 2.1e9 links.
  const ConfigError r =
      config_error(with("  devices_per_node: 4\n", "  devices_per_node: 1024\n",
                        with("count: 8", "count: 1024", with("  pp: 4\n", "  pp: 1024\n"))));
  EXPECT_TRUE(has(r.message(), "routing the 1023 stage boundaries")) << r.message();
  // The same node with pp 2 routes two boundaries' worth: fine.
  EXPECT_NO_THROW(parse_config(
      with("  devices_per_node: 4\n", "  devices_per_node: 1024\n", with("  pp: 4\n", "  pp: 2\n")),
      "exp.yaml"));
}

// ---- sums and totals ---------------------------------------------------------------------------

TEST(Totals, LayerCountsThroughAliasesAreBounded) {
  // Two aliases of a 10^5-layer group: 2 x 10^5 LayerGroups once expanded. Was bad_alloc
  // with a thousand aliases.
  const std::string text = with(
      "    - name: unit\n      count: 8\n", "    - &g\n      name: unit\n      count: 100000\n",
      with("      param_bytes: 1048576\n", "      param_bytes: 1048576\n    - *g\n"));
  const ConfigError e = config_error(text);
  EXPECT_EQ(e.key(), "model.layers[1].count");
  EXPECT_EQ(e.message(),
            "the layer groups up to here add up to 200000 layers; a model has at most 100000");
}

const std::string kOneDevice =
    with("  devices_per_node: 4\n", "  devices_per_node: 1\n", with("  pp: 4\n", "  pp: 1\n"));

TEST(Totals, IterationLongerThanTheClockIsRefused) {
  // 10^5 layers x a day each = 8.64e18 ns for one micro-batch's forwards, past 2^62.
  const ConfigError e = config_error(with(
      "count: 8", "count: 100000", with("forward_ms: 0.5", "forward_ms: 86400000", kOneDevice)));
  EXPECT_EQ(e.key(), "model.layers[0]");
  EXPECT_TRUE(has(e.message(), "past the int64 clock of 2^62 ns")) << e.message();
  // A day per layer is fine on its own.
  EXPECT_NO_THROW(
      parse_config(with("forward_ms: 0.5", "forward_ms: 86400000", kOneDevice), "exp.yaml"));
}

TEST(Totals, BytesBeyondInt64AreRefused) {
  // 10^5 layers x 2^50 bytes x 8 micro-batches in flight.
  const ConfigError e = config_error(
      with("count: 8", "count: 100000",
           with("activation_bytes: 1048576", "activation_bytes: 1125899906842624", kOneDevice)));
  EXPECT_EQ(e.key(), "training.microbatches");
  EXPECT_TRUE(has(e.message(), "more than int64 can count")) << e.message();
}

TEST(Totals, TransferLongerThanTheClockIsRefused) {
  // 2^50 bytes at 1 byte/s: 1.1e24 ns.
  const ConfigError e =
      config_error(with("bandwidth_GBps: 100", "bandwidth_GBps: 1e-9",
                        with("output_bytes: 0", "output_bytes: 1125899906842624")));
  EXPECT_EQ(e.key(), "cluster.intra_node.bandwidth_GBps");
  EXPECT_TRUE(has(e.message(), "one transfer of 1125899906842624 bytes")) << e.message();
}

TEST(Totals, PartitionSumsCannotWrap) {
  // In int, 2147483647 + 2147483647 + 5 + 5 wraps to 8, the layer count: was a SIGSEGV.
  const ConfigError e =
      config_error(with("  pp: 4\n", "  pp: 4\n  partition: [2147483647, 2147483647, 5, 5]\n"));
  EXPECT_EQ(e.key(), "training.partition");
  EXPECT_EQ(e.message(), "adds up to 4294967304 layers but the model has 8");
  const ConfigError longer =
      config_error(with("  pp: 4\n", "  pp: 4\n  partition: [2, 2, 2, 1, 1]\n"));
  EXPECT_EQ(longer.message(), "has 5 entries but there are 4 stages (pp 4 x vpp 1)");
}

TEST(Totals, HandBuiltConfigsAreCheckedToo) {
  Config c = parse_config(kUnit, "exp.yaml");
  c.training.pp = 0;
  EXPECT_THROW(check_config(c), ConfigError);
  c = parse_config(kUnit, "exp.yaml");
  c.model.layers[0].count = 2'000'000'000;
  c.model.layers.push_back(c.model.layers[0]);  // 4e9 layers: num_layers saturates
  EXPECT_EQ(c.model.num_layers(), 2147483647);
  EXPECT_THROW(check_config(c), ConfigError);
  // Values a planner (or a test) sets directly are held to the same ranges as YAML.
  auto error_of = [](const Config& bad) {
    try {
      check_config(bad);
    } catch (const ConfigError& e) {
      return std::string(e.key()) + ": " + e.message();
    }
    return std::string("accepted");
  };
  c = parse_config(kUnit, "exp.yaml");
  c.model.layers[0].forward_ms = std::nan("");
  EXPECT_EQ(error_of(c), "model.layers[0].forward_ms: must be a finite number, got nan");
  c = parse_config(kUnit, "exp.yaml");
  c.cluster.intra_node.bandwidth_GBps = -5;
  EXPECT_EQ(error_of(c), "cluster.intra_node.bandwidth_GBps: must be greater than 0 GB/s, got -5");
  c = parse_config(kUnit, "exp.yaml");
  c.training.overlap_factor = 1e308;
  EXPECT_EQ(error_of(c),
            "training.overlap_factor: must be at most 10 (ten times the two halves run apart), got "
            "1e+308");
  c = parse_config(kUnit, "exp.yaml");
  c.model.layers[0].recompute[Recompute::full] = LayerModeCosts{-1.0, 0, std::nullopt};
  EXPECT_EQ(error_of(c),
            "model.layers[0].recompute.full.recompute_ms: must be at least 0 ms, got -1");
}

// ---- the analytic model ----------------------------------------------------------------------

const std::string kAnalytic =
    "cluster: {nodes: 1, devices_per_node: 2, device: {preset: h200}}\n"
    "model: {preset: llama2-7b}\n"
    "training: {pp: 2, microbatches: 4, seq_length: 4096}\n";

TEST(AnalyticBounds, HugeMicroBatchesAreRefusedBeforeTheCostModelRoundsThem) {
  // 2^24 tokens x 2^16 samples x the 32 x 2^24 score columns x 8 bytes: 5e22.
  const ConfigError e = config_error(
      with("seq_length: 4096", "seq_length: 16777216, micro_batch_size: 65536", kAnalytic));
  EXPECT_EQ(e.key(), "training.seq_length");
  EXPECT_TRUE(has(e.message(), "1099511627776 tokens")) << e.message();
}

TEST(AnalyticBounds, AbsurdlySlowDevicesAreRefused) {
  // A Llama-2-7B layer at 1 MFLOP/s: about 10^6 s per forward.
  const ConfigError e =
      config_error(with("{preset: h200}", "{preset: h200, peak_tflops: 1e-6}", kAnalytic));
  EXPECT_EQ(e.key(), "model");
  EXPECT_TRUE(has(e.message(), "more than a day")) << e.message();
}

TEST(AnalyticBounds, HfValuesAreHeldToTheShapeRanges) {
  const test::ScratchDir dir;
  const std::string json =
      test::write_file(dir.file("config.json"),
                       R"({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 100000000,
          "num_attention_heads": 1, "intermediate_size": 8, "vocab_size": 8})");
  const ConfigError e =
      config_error(with("{preset: llama2-7b}", "{hf_config: " + json + "}", kAnalytic));
  EXPECT_EQ(e.key(), "model.hf_config");
  EXPECT_EQ(e.message(), json + " gives hidden_size = 100000000, which must be at most 1048576");
  const ConfigError d = config_error(with("{preset: llama2-7b}", "{hf_config: .}", kAnalytic));
  EXPECT_EQ(d.key(), "model.hf_config");
  EXPECT_TRUE(has(d.message(), "is a directory")) << d.message();
}

// ---- bytes that are not text -------------------------------------------------------------------

// nlohmann::json's dump throws on invalid UTF-8 by default: a strict check.
bool valid_utf8(const std::string& s) {
  try {
    (void)nlohmann::json(s).dump();
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

TEST(Utf8, ErrorTextIsValidUtf8WhateverTheInput) {
  ASSERT_FALSE(valid_utf8("\xff"));  // the check itself can fail
  const ConfigError key = config_error(with("  pp: 4\n", "  pp: 4\n  \xff\xfe: 1\n"));
  EXPECT_TRUE(valid_utf8(key.what()));
  EXPECT_TRUE(valid_utf8(key.key()));
  EXPECT_EQ(key.key(), "training.\\xff\\xfe");
  const ConfigError value = config_error(with("forward_ms: 0.5", "forward_ms: \"\xc3\x28\""));
  EXPECT_TRUE(valid_utf8(value.what()));
  EXPECT_EQ(value.message(), "expected a number, got '\\xc3('");
  // Overlong encodings and surrogates are not UTF-8 either.
  const ConfigError overlong =
      config_error(with("  pp: 4\n", "  pp: 4\n  \xc0\xaf\xed\xa0\x80: 1\n"));
  EXPECT_TRUE(valid_utf8(overlong.what()));
  try {
    parse_config("cluster: 1\n", "bad\xff/exp.yaml");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_TRUE(valid_utf8(e.what()));
    EXPECT_EQ(e.file(), "bad\\xff/exp.yaml");
  }
}

TEST(Utf8, ControlCharactersAreEscapedAndRealTextKept) {
  const ConfigError e = config_error(with("  pp: 4\n", "  pp: 4\n  \"a\\e[31mb\": 1\n"));
  EXPECT_EQ(e.key(), "training.a\\x1b[31mb");
  const ConfigError kept = config_error(with("  pp: 4\n", "  pp: 4\n  café模型: 1\n"));
  EXPECT_EQ(kept.key(), "training.café模型");
}

// ---- files -----------------------------------------------------------------------------------

TEST(ConfigFiles, WhatIsNotAConfigFileIsAConfigError) {
  const test::ScratchDir dir;
  auto error_loading = [](const std::string& path) {
    try {
      load_config(path);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    ADD_FAILURE() << path;
    return std::string();
  };
  EXPECT_TRUE(has(error_loading(dir.path().string()), "is a directory"));
  EXPECT_EQ(error_loading("/dev/null"),
            "/dev/null:1: the file is empty: expected a mapping with "
            "cluster, model and training");
  const std::string big = test::write_file(dir.file("big.yaml"), std::string((16u << 20) + 1, '#'));
  EXPECT_TRUE(has(error_loading(big), "larger than 16 MiB"));
  const std::string odd = error_loading(dir.file("no\xff\xfe.yaml"));
  EXPECT_TRUE(has(odd, "cannot open the file"));
  EXPECT_TRUE(valid_utf8(odd));
}

// ---- below the config: the device graph guards itself ------------------------------------------

TEST(TopologyGuards, LinkFiguresThatCannotBeTimedAreRefused) {
  // A latency of 1e300 us used to become a negative edge inside Boost.Graph.
  EXPECT_THROW(Topology(ClusterSpec{2, 1, LinkSpec{}, LinkSpec{10, 1e300}}), std::invalid_argument);
  // 1e-320 GB/s used to leave every path infinite: "no path from device 0 to device 1".
  EXPECT_THROW(Topology(ClusterSpec{1, 2, LinkSpec{1e-320, 0}, LinkSpec{}}), std::invalid_argument);
  EXPECT_THROW(Topology(ClusterSpec{1, 2, LinkSpec{std::nan(""), 0}, LinkSpec{}}),
               std::invalid_argument);
  EXPECT_THROW(Topology(ClusterSpec{65536, 65536, LinkSpec{1, 0}, LinkSpec{1, 0}}),
               std::invalid_argument);
  // Unused link kinds are not looked at (one node: no NIC).
  EXPECT_NO_THROW(Topology(ClusterSpec{1, 2, LinkSpec{1, 0}, LinkSpec{}}));
}

TEST(TopologyGuards, TransfersBeyondInt64AreErrorsNotNegativeTimes) {
  const Topology slow(ClusterSpec{1, 2, LinkSpec{1e-9, 0}, LinkSpec{}});  // 1 byte/s
  EXPECT_THROW(slow.route(0, 1, std::int64_t{1} << 62), std::invalid_argument);
  const Route r = slow.route(0, 1, 1000);
  EXPECT_EQ(r.serialization(1000), 1'000'000'000'000);  // 1000 s
  EXPECT_THROW(r.serialization(std::int64_t{1} << 62), std::invalid_argument);
}

TEST(TimeConversions, CheckedFormsRefuseWhatDoesNotFit) {
  EXPECT_EQ(checked_ms_to_ns(1.5), 1'500'000);
  EXPECT_EQ(checked_us_to_ns(-2.0), -2'000);
  EXPECT_EQ(checked_s_to_ns(9.2e9), 9'200'000'000'000'000'000);
  EXPECT_FALSE(checked_s_to_ns(9.3e9));  // 9.3e18 > 2^63
  EXPECT_FALSE(checked_ms_to_ns(1e13));
  EXPECT_FALSE(checked_us_to_ns(std::nan("")));
  EXPECT_FALSE(checked_us_to_ns(-std::numeric_limits<double>::infinity()));
}

}  // namespace
}  // namespace bmpipe
