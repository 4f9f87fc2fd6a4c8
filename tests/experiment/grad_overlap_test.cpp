// The dp reduction overlapped with the backward (training.optimizer.overlap_grad_reduce),
// the tied-embedding all-reduce, and the cost-model knobs wired with them
// (training.optimizer.grad_dtype, training.grad_accumulation,
// cluster.device.matmul_weight_grad_efficiency). Expected values come from the collective
// formula written out here (ring: all-reduce moves 2(k-1)/k of the buffer per device over
// 2(k-1) steps, reduce-scatter (k-1)/k over k-1), from the one-bucket reduction, or from
// the runs' own pipelines, which the reductions must not move.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "config_cases.hpp"
#include "experiment/experiment.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

// 8 H200 on one node: pp 4, dp 2, interleaved with two chunks per rank, so a rank's
// chunk-1 stage completes its gradients while its chunk-0 stage still has backward to run.
std::string config(const std::string& training_extra = "", const std::string& link = "",
                   const std::string& model_extra = "") {
  return "cluster:\n"
         "  nodes: 1\n"
         "  devices_per_node: 8\n"
         "  device: {preset: h200}\n" +
         (link.empty() ? std::string() : "  intra_node: " + link + "\n") +
         "model: {architecture: llama, num_layers: 16, hidden_size: 2048, num_attention_heads: "
         "16, ffn_hidden_size: 5632, vocab_size: 32000" +
         model_extra +
         "}\n"
         "training:\n"
         "  schedule: interleaved\n"
         "  pp: 4\n"
         "  vpp: 2\n"
         "  microbatches: 8\n"
         "  seq_length: 2048\n" +
         training_extra;
}

struct Outcome {
  std::shared_ptr<const Experiment> e;
  Schedule schedule;
  SimInput input;
  SimResult result;
};

Outcome run(const std::string& text) {
  Outcome r;
  r.e = prepare(parse_config(text, "overlap.yaml"));
  r.schedule = make_schedule(*r.e);
  r.input = assemble(*r.e, config_plan(*r.e, r.schedule.num_stages), r.schedule);
  r.result = simulate(r.input, r.schedule);
  EXPECT_TRUE(r.result.ok) << r.result.error;
  return r;
}

const std::string kOverlap = "  optimizer: {overlap_grad_reduce: true}\n";

// Parameters each stage holds, from the layer table (the embedding folded into layer 0, the
// head and its tied copy, if any, into the last layer).
std::vector<std::int64_t> stage_params(const Outcome& r) {
  const Plan plan = config_plan(*r.e, r.schedule.num_stages);
  std::vector<std::int64_t> out;
  int layer = 0;
  for (int n : plan.partition) {
    std::int64_t sum = 0;
    for (int i = 0; i < n; ++i, ++layer) sum += r.e->layers.layers[layer].param_count;
    out.push_back(sum);
  }
  out.back() += r.e->layers.head_copy_params;
  return out;
}

TEST(GradOverlap, OffByDefaultEachRankReducesOnceAfterItsLastOp) {
  // Without overlap, Megatron-LM reduces a rank's gradients after its last backward: one
  // bucket of the rank's parameters, ready when its last op ends, on the rank's first
  // stage; the tail left is the optimizer step.
  const Outcome off = run(config());
  EXPECT_FALSE(off.input.overlap_grad_reduce);
  EXPECT_FALSE(off.input.tied_reduce.has_value());
  ASSERT_EQ(off.input.grad_buckets.size(), 8u);
  const std::vector<std::int64_t> params = stage_params(off);
  for (int rank = 0; rank < 4; ++rank) {
    std::int64_t sum = 0;
    int first = -1;
    for (int s = 0; s < 8; ++s)
      if (off.schedule.stage_rank[s] == rank) {
        sum += params[s];
        if (first < 0) first = s;
      }
    for (int s = 0; s < 8; ++s) {
      if (off.schedule.stage_rank[s] != rank) continue;
      if (s != first) {
        EXPECT_TRUE(off.input.grad_buckets[s].empty()) << s;
        continue;
      }
      ASSERT_EQ(off.input.grad_buckets[s].size(), 1u) << s;
      const GradBucket& b = off.input.grad_buckets[s][0];
      EXPECT_EQ(b.time, stage_grad_reduce_time(*off.e, rank, sum)) << rank;
      EXPECT_GT(b.time, 0) << rank;
      EXPECT_EQ(b.ready_b, 1.0);
      EXPECT_EQ(b.ready_w, 1.0);
    }
    EXPECT_EQ(off.input.tail_time[rank], optimizer_tail_time(*off.e, rank, sum)) << rank;
    // The rank's tail starts once its one reduction, started at its last op, is done.
    const DeviceResult& d = off.result.devices[rank];
    EXPECT_EQ(d.tail_start - d.last_end, stage_grad_reduce_time(*off.e, rank, sum)) << rank;
  }
}

// The layers of stage s (the embedding folded into layer 0, the head and its tied copy into
// the last layer).
std::vector<std::int64_t> layer_params(const Outcome& r, int s) {
  const Plan plan = config_plan(*r.e, r.schedule.num_stages);
  int first = 0;
  for (int k = 0; k < s; ++k) first += plan.partition[k];
  std::vector<std::int64_t> out;
  for (int l = first; l < first + plan.partition[s]; ++l)
    out.push_back(r.e->layers.layers[l].param_count +
                  (l == r.e->num_layers() - 1 ? r.e->layers.head_copy_params : 0));
  return out;
}

Time bucket_total(const SimInput& in, int s) {
  Time t = 0;
  for (const GradBucket& b : in.grad_buckets[s]) t += b.time;
  return t;
}

TEST(GradOverlap, BucketsAreWholeLayersOfAtLeastFortyMillionParameters) {
  // Each decoder layer here holds 4 x 2048^2 + 3 x 2048 x 5632 = 51.4M parameters, above
  // Megatron-LM's 40M bucket: one bucket per layer, last layer first, the stage's first
  // layer closing with the op (ready 1). A B walks the layers last to first, so the k-th
  // bucket of an n-layer stage of equal layers is ready at (k + 1) / n of it.
  const Outcome on = run(config(kOverlap));
  ASSERT_EQ(on.input.grad_buckets.size(), 8u);
  const HardwareSpec& hw = on.e->analytic->hardware;
  const double bw = hw.intra_node.bandwidth_GBps * 1e9 * hw.collective_efficiency;
  for (int s = 0; s < 8; ++s) {
    const std::vector<std::int64_t> params = layer_params(on, s);
    ASSERT_EQ(on.input.grad_buckets[s].size(), params.size()) << s;
    for (std::size_t k = 0; k < params.size(); ++k) {
      // dp 2 on one node: an all-reduce moves the fp32 gradients once, in 2 latency steps.
      const std::int64_t p = params[params.size() - 1 - k];
      const double seconds = 4.0 * p / bw + 2 * hw.intra_node.latency_us * 1e-6;
      EXPECT_NEAR(on.input.grad_buckets[s][k].time, seconds * 1e9, 1.0) << s << " " << k;
    }
    EXPECT_DOUBLE_EQ(on.input.grad_buckets[s].back().ready_b, 1.0);
    if (s > 0 && s < 7) {  // middle stages: identical layers
      for (std::size_t k = 0; k + 1 < params.size(); ++k)
        EXPECT_NEAR(on.input.grad_buckets[s][k].ready_b, (k + 1.0) / params.size(), 1e-9);
    }
  }
  // Either way the tail is the Adam step; without overlap the rank's gradients are one
  // bucket, which pays its latency once instead of once per bucket.
  const Outcome off = run(config());
  for (int rank = 0; rank < 4; ++rank) {
    const Time reduce = bucket_total(on.input, rank) + bucket_total(on.input, rank + 4);
    const int buckets = static_cast<int>(on.input.grad_buckets[rank].size() +
                                         on.input.grad_buckets[rank + 4].size());
    const Time latency = s_to_ns((buckets - 1) * 2 * hw.intra_node.latency_us * 1e-6);
    const Time off_reduce = bucket_total(off.input, rank) + bucket_total(off.input, rank + 4);
    EXPECT_EQ(on.input.tail_time[rank], off.input.tail_time[rank]) << rank;
    EXPECT_NEAR(reduce, off_reduce + latency, 3 * buckets) << rank;
  }
}

TEST(GradOverlap, ZeroOneReduceScattersAndKeepsTheAllGatherInTheTail) {
  const Outcome on = run(config("  optimizer: {overlap_grad_reduce: true, zero_stage: 1}\n"));
  const Outcome off = run(config("  optimizer: {zero_stage: 1}\n"));
  const HardwareSpec& hw = on.e->analytic->hardware;
  const double bw = hw.intra_node.bandwidth_GBps * 1e9 * hw.collective_efficiency;
  for (int s = 0; s < 8; ++s) {
    const std::vector<std::int64_t> params = layer_params(on, s);
    for (std::size_t k = 0; k < params.size(); ++k) {
      // dp 2: a reduce-scatter moves half the gradients in one step.
      const std::int64_t p = params[params.size() - 1 - k];
      const double seconds = 0.5 * 4.0 * p / bw + hw.intra_node.latency_us * 1e-6;
      EXPECT_NEAR(on.input.grad_buckets[s][k].time, seconds * 1e9, 1.0) << s;
    }
  }
  for (int rank = 0; rank < 4; ++rank) {
    const Time reduce = bucket_total(on.input, rank) + bucket_total(on.input, rank + 4);
    const int buckets = static_cast<int>(on.input.grad_buckets[rank].size() +
                                         on.input.grad_buckets[rank + 4].size());
    const Time latency = s_to_ns((buckets - 1) * hw.intra_node.latency_us * 1e-6);
    const Time off_reduce = bucket_total(off.input, rank) + bucket_total(off.input, rank + 4);
    EXPECT_EQ(on.input.tail_time[rank], off.input.tail_time[rank]) << rank;
    EXPECT_NEAR(reduce, off_reduce + latency, 3 * buckets) << rank;
  }
}

TEST(GradOverlap, FastLinksLeaveTheOptimizerStepAndWhatCannotHide) {
  const Outcome on = run(config(kOverlap));
  const Outcome off = run(config());
  EXPECT_EQ(on.result.pipeline_time, off.result.pipeline_time);
  EXPECT_LT(on.result.iteration_time, off.result.iteration_time);
  for (int rank = 0; rank < 4; ++rank) {
    const DeviceResult& d = on.result.devices[rank];
    EXPECT_EQ(d.last_end, off.result.devices[rank].last_end);
    // Chunk 1 (stage rank + 4) completes first and hides behind chunk 0's last backward;
    // chunk 0's buckets become ready while its last backward runs, all but the one with
    // the stage's first layer before it ends. So at most that stage shows, and at least
    // its last bucket, which is ready only at the end.
    const Time exposed = d.tail_start - d.last_end;
    EXPECT_LT(exposed, bucket_total(on.input, rank)) << rank;
    EXPECT_GE(exposed, on.input.grad_buckets[rank].back().time) << rank;
    // Without overlap the whole reduction shows, after the last op.
    EXPECT_EQ(off.result.devices[rank].tail_start - off.result.devices[rank].last_end,
              bucket_total(off.input, rank) + bucket_total(off.input, rank + 4))
        << rank;
    EXPECT_LT(exposed, off.result.devices[rank].tail_start - off.result.devices[rank].last_end)
        << rank;
  }
}

TEST(GradOverlap, OneStagePerRankHidesBehindItsOwnLastBackward) {
  // 1F1B: a rank's only stage completes its gradients with its last op, so only buckets
  // can hide anything: the last layers' reductions run while the backward goes on.
  const std::string one = test::with("  schedule: interleaved\n  pp: 4\n  vpp: 2\n",
                                     "  schedule: 1f1b\n  pp: 4\n", config(kOverlap));
  const Outcome on = run(one);
  const Outcome off = run(test::with(kOverlap, "", one));
  for (int rank = 0; rank < 4; ++rank) {
    const DeviceResult& d = on.result.devices[rank];
    const Time exposed = d.tail_start - d.last_end;
    EXPECT_LT(exposed, bucket_total(on.input, rank)) << rank;
    EXPECT_GE(exposed, on.input.grad_buckets[rank].back().time) << rank;
  }
  EXPECT_LT(on.result.iteration_time, off.result.iteration_time);
}

TEST(GradOverlap, SlowLinksTendToTheWholeReductionAsTail) {
  // Collectives at 1e-4 of NVLink (45 MB/s) while the pipeline's transfers keep the full
  // link: each reduction takes seconds, far longer than the pipeline.
  // (NVLink SHARP off: its bandwidth is nvls_efficiency's, not collective_efficiency's.)
  const std::string slow =
      "device: {preset: h200, collective_efficiency: 0.0001, nvls_efficiency: 0}";
  const Outcome on = run(test::with("device: {preset: h200}", slow, config(kOverlap)));
  const Outcome off = run(test::with("device: {preset: h200}", slow, config()));
  ASSERT_GT(off.result.iteration_time, 20 * off.result.pipeline_time);
  // The reductions can hide only inside the pipeline's own span.
  EXPECT_LE(off.result.iteration_time - on.result.iteration_time, on.result.pipeline_time);
  EXPECT_GT(static_cast<double>(on.result.iteration_time) / off.result.iteration_time, 0.95);
}

TEST(GradOverlap, TiedEmbeddingAllReduceOnlyWhenTiedAndPipelined) {
  const std::string tied = ", tied_embeddings: true";
  const std::string link = "{bandwidth_GBps: 100, latency_us: 7}";
  const Outcome on = run(config(kOverlap, link, tied));
  ASSERT_TRUE(on.input.tied_reduce.has_value());
  EXPECT_EQ(on.input.tied_reduce->rank_a, 0);
  EXPECT_EQ(on.input.tied_reduce->rank_b, 3);  // interleaved: the last stage is on rank 3
  // vocab x hidden fp32 gradients, all-reduced by two devices of one node: the buffer once
  // over the link, two latency steps.
  const HardwareSpec& hw = on.e->analytic->hardware;
  const double seconds = 32000.0 * 2048 * 4 / (100e9 * hw.collective_efficiency) + 2 * 7e-6;
  EXPECT_NEAR(on.input.tied_reduce->time, seconds * 1e9, 1.0);
  // Both ends start their Adam step only once it is done.
  EXPECT_EQ(on.result.devices[0].tail_start, on.result.devices[3].tail_start);
  EXPECT_GE(on.result.devices[0].tail_start,
            std::max(on.result.devices[0].last_end, on.result.devices[3].last_end) +
                on.input.tied_reduce->time);

  EXPECT_FALSE(run(config(kOverlap, link)).input.tied_reduce);  // untied
  // One pipeline stage: the head shares the embedding matrix, nothing to reduce.
  std::string one = config(kOverlap, link, tied);
  one = test::with("  pp: 4\n  vpp: 2\n", "  pp: 1\n", one);
  one = test::with("schedule: interleaved", "schedule: 1f1b", one);
  EXPECT_FALSE(run(one).input.tied_reduce);
  // A V schedule holds the first and the last stage on rank 0: summed in place.
  EXPECT_FALSE(
      run(test::with("schedule: interleaved", "schedule: zb-v", config(kOverlap, link, tied)))
          .input.tied_reduce);
  // Off: the old single block, which never counted it.
  EXPECT_FALSE(run(config("", link, tied)).input.tied_reduce);
}

TEST(GradOverlap, TheKeyIsCheckedLikeAnyOther) {
  const ConfigError bad =
      test::config_error(config("  optimizer: {overlap_grad_reduce: sometimes}\n"));
  EXPECT_EQ(bad.key(), "training.optimizer.overlap_grad_reduce");
  // Measured layers have no dp model, so no optimizer section either.
  const ConfigError measured = test::config_error(
      test::with("  microbatches: 8\n", "  microbatches: 8\n" + kOverlap, test::kUnit));
  EXPECT_EQ(measured.key(), "training.optimizer");
}

// ---- the cost-model knobs ------------------------------------------------------------------

double decoder_w(const std::string& training_extra, const std::string& device = "{preset: h200}") {
  std::string text = config(training_extra, "{bandwidth_GBps: 450, latency_us: 5}");
  text = test::with("device: {preset: h200}", "device: " + device, text);
  return prepare(parse_config(text, "knobs.yaml"))->analytic->decoder.backward_weight_s;
}

TEST(CostKnobs, GradDtypeSetsTheAccumulationBuffer) {
  const auto e32 = prepare(parse_config(config("  optimizer: {grad_dtype: fp32}\n"), "a.yaml"));
  const auto e16 = prepare(parse_config(config("  optimizer: {grad_dtype: bf16}\n"), "b.yaml"));
  EXPECT_EQ(e32->analytic->settings.grad_bytes, 4);
  EXPECT_EQ(e16->analytic->settings.grad_bytes, 2);
  // Llama accumulates with a separate add: per parameter, read the buffer and write it back
  // (2 x grad bytes) plus read the fresh gradient. Halving the buffer saves 2 x 2 bytes a
  // parameter of HBM traffic, all else equal.
  const HardwareSpec& hw = e32->analytic->hardware;
  const double saved =
      4.0 * e32->analytic->decoder.param_count / (hw.hbm_GBps * 1e9 * hw.memory_efficiency);
  EXPECT_NEAR(e32->analytic->decoder.backward_weight_s - e16->analytic->decoder.backward_weight_s,
              saved, saved * 1e-9);
  EXPECT_EQ(decoder_w(""), decoder_w("  optimizer: {grad_dtype: fp32}\n"));  // the default
}

TEST(CostKnobs, GradAccumulationOverridesTheArchitecturesDefault) {
  EXPECT_EQ(decoder_w(""), decoder_w("  grad_accumulation: add\n"));  // llama's default
  EXPECT_LT(decoder_w("  grad_accumulation: overwrite\n"), decoder_w("  grad_accumulation: add\n"));
  EXPECT_NE(decoder_w("  grad_accumulation: fused\n"), decoder_w(""));
  const auto gpt = [](const std::string& extra) {
    std::string text = test::with("architecture: llama", "architecture: gpt", config(extra));
    return prepare(parse_config(text, "gpt.yaml"))->analytic->decoder.backward_weight_s;
  };
  EXPECT_EQ(gpt(""), gpt("  grad_accumulation: fused\n"));  // gpt's default
  EXPECT_NE(gpt(""), gpt("  grad_accumulation: add\n"));
  const ConfigError e = test::config_error(config("  grad_accumulation: sum\n"));
  EXPECT_EQ(e.key(), "training.grad_accumulation");
  EXPECT_TRUE(test::has(e.message(), "overwrite"));
  EXPECT_TRUE(test::has(e.message(), "fused"));
  const ConfigError measured = test::config_error(test::with(
      "  microbatches: 8\n", "  microbatches: 8\n  grad_accumulation: add\n", test::kUnit));
  EXPECT_EQ(measured.key(), "training.grad_accumulation");
}

TEST(CostKnobs, WeightGradEfficiencyReachesTheWeightGradGemms) {
  // The h200 preset's own value (sim/cost/hardware.cpp) changes nothing; a lower one slows
  // the weight-grad GEMMs only.
  const HardwareSpec& h200 = *find_hardware_preset("h200");
  ASSERT_TRUE(h200.matmul_weight_grad_efficiency.has_value());
  std::ostringstream same;
  same << "{preset: h200, matmul_weight_grad_efficiency: " << *h200.matmul_weight_grad_efficiency
       << "}";
  EXPECT_EQ(decoder_w("", same.str()), decoder_w(""));
  EXPECT_GT(decoder_w("", "{preset: h200, matmul_weight_grad_efficiency: 0.3}"), decoder_w(""));
  const auto e = prepare(parse_config(
      test::with("device: {preset: h200}",
                 "device: {preset: h200, matmul_weight_grad_efficiency: 0.3}", config()),
      "w.yaml"));
  EXPECT_EQ(e->analytic->hardware.matmul_weight_grad_efficiency, 0.3);
  // Without a preset it follows matmul_backward_efficiency unless given.
  const std::string bare =
      "{memory_GiB: 141, peak_tflops: 989, hbm_GBps: 4800, "
      "matmul_backward_efficiency: 0.55";
  EXPECT_EQ(decoder_w("", bare + "}"),
            decoder_w("", bare + ", matmul_weight_grad_efficiency: 0.55}"));
  const ConfigError out = test::config_error(
      test::with("device: {preset: h200}",
                 "device: {preset: h200, matmul_weight_grad_efficiency: 1.5}", config()));
  EXPECT_EQ(out.key(), "cluster.device.matmul_weight_grad_efficiency");
}

TEST(CostKnobs, ADeviceWithoutPresetOnOneNodeNeedsNoNic) {
  // The config check bounds the dp reduction over the links the cluster has; a single node
  // has no NIC figures, which must not read as an infinitely slow one (dp 2 here).
  const std::string bare =
      "device: {memory_GiB: 141, peak_tflops: 989, hbm_GBps: 4800}\n"
      "  intra_node: {bandwidth_GBps: 450, latency_us: 5}";
  for (const std::string& extra : {std::string(), kOverlap})
    EXPECT_NO_THROW(
        parse_config(test::with("device: {preset: h200}", bare, config(extra)), "b.yaml"));
}

}  // namespace
}  // namespace bmpipe
