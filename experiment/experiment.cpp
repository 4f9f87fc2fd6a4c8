#include "experiment/experiment.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace bmpipe {

namespace {

std::int64_t gib_to_bytes(double gib) {
  return static_cast<std::int64_t>(std::llround(gib * 1073741824.0));
}

// Bytes as GiB with one decimal, or MiB below 1 GiB.
std::string gib_text(double bytes) {
  char buf[32];
  if (bytes < 1073741824.0)
    std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / 1048576.0);
  else
    std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / 1073741824.0);
  return buf;
}

// Host memory, per device: its share of a host (host_memory_GiB over host_devices) holds its
// offloaded optimizer state and its offloaded activations.
//
// Optimizer offload: each device keeps kHostOffloadBytesPerParam for every offloaded
// parameter of its optimizer shard. A pipeline rank's parameters depend on the partition the
// planner picks, so the rule takes a rank's average share (the pipeline's parameters over
// pp: every partition has a rank holding at least that much), times the devices of a host:
// consecutive devices (rank_device places a rank's tp x cp x dp devices side by side), so a
// host holds one rank's devices, or all of a few ranks' when it holds more devices than a
// rank has. Exact for a balanced partition. What is left is Experiment::host_capacity_bytes,
// which the engine holds each run's offloaded activations to (DeviceResult::peak_host_bytes).
//
// Activation offload: at load, the least any 1F1B run needs: its first rank holds min(pp, m)
// micro-batches in flight, each with its layers' offloaded bytes (a rank's average share of
// the model's, in the configured default recompute mode); refused here when even that does
// not fit, so that a run that cannot fit is an error with its key, not a silent "does not
// fit".
void size_host_memory(Experiment& e) {
  const AnalyticCosts& a = *e.analytic;
  const OptimizerSettings& opt = a.optimizer;
  const HardwareSpec& hw = a.hardware;
  const int pp = e.config.training.pp;
  const double host_share = hw.host_memory_GiB * 1073741824.0 / std::max(hw.host_devices, 1);
  double optimizer = 0;
  if (opt.offload_fraction > 0) {
    std::int64_t params = e.layers.head_copy_params, experts = 0;
    for (const LayerRow& row : e.layers.layers)
      params += row.param_count, experts += row.expert_param_count;
    optimizer = (offload_host_bytes(params - experts, opt, a.dense_shard()) +
                 offload_host_bytes(experts, opt, a.edp_shard())) /
                pp;
    const double need = optimizer * hw.host_devices;
    const double have = hw.host_memory_GiB * 1073741824.0;
    if (need > have) {
      char fraction[32];
      std::snprintf(fraction, sizeof fraction, "%g", opt.offload_fraction);
      e.config.fail("training.optimizer.offload_fraction",
                    std::string(fraction) + " puts " + gib_text(optimizer) +
                        " of optimizer state on the host for each device (fp32 master weights, "
                        "Adam m and v, the fp32 gradient copy: 16 bytes an offloaded "
                        "parameter, a pipeline rank's average share), " +
                        std::to_string(hw.host_devices) + " devices a host (host_devices): " +
                        gib_text(need) + ", more than the host's " + gib_text(have) +
                        " (host_memory_GiB; expected a smaller fraction, or more dp to shard "
                        "the state)");
    }
  }
  if (const int k = e.config.training.offload_layers; k > 0) {
    // Whole-layer offload (pp 1): one micro-batch in flight, its first k decoder layers'
    // activations on the host.
    const char* const key = "training.offload_layers";
    if (!(hw.host_memory_GiB > 0))
      e.config.fail(key, std::to_string(k) + " offloads to the host, but the " + hw.name +
                             " device's host memory is unknown (expected 0, or give "
                             "cluster.device.host_memory_GiB)");
    double need = 0;
    int seen = 0;
    for (const LayerRow& row : e.layers.layers)
      if (row.kind == LayerKind::decoder && seen++ < k)
        need += static_cast<double>(row.modes[Recompute::none]->activation_bytes);
    const double left = host_share - optimizer;
    if (need > left)
      e.config.fail(key, std::to_string(k) + " layers put " + gib_text(need) +
                             " of activations on the host for each device, more than the " +
                             gib_text(left) +
                             " each device has of its host (host_memory_GiB over " +
                             std::to_string(hw.host_devices) +
                             " devices, less offloaded optimizer state; expected fewer layers)");
    e.host_capacity_bytes = static_cast<std::int64_t>(left);
    return;
  }
  // The job-wide form: every layer in layer 0's mode. The per-layer form
  // (RecomputeSpec::names_offload): every layer the config may offload, a stage's offload
  // modes counted for every layer (the stages' layers are the plan's), the larger of two.
  const RecomputeSpec& spec = e.config.training.recompute;
  std::vector<Recompute> stage_modes;  // the offload modes the default and the stages name
  if (is_offload_mode(spec.global)) stage_modes.push_back(spec.global);
  for (const auto& [stage, m] : spec.stages)
    if (is_offload_mode(m)) stage_modes.push_back(m);
  const Recompute job_mode = recompute_mode(e.config, 0, 0);
  double activations = 0;  // one micro-batch's, over the whole model
  for (std::size_t l = 0; l < e.layers.layers.size(); ++l) {
    const LayerRow& row = e.layers.layers[l];
    const auto moved = [&](Recompute mode) {
      const auto& m = row.modes[mode];
      return m ? static_cast<double>(m->offload_bytes) : 0.0;
    };
    if (!spec.names_offload()) {
      activations += moved(job_mode);
      continue;
    }
    if (const auto it = spec.layers.find(static_cast<int>(l)); it != spec.layers.end()) {
      activations += moved(it->second);
      continue;
    }
    double most = 0;
    for (Recompute mode : stage_modes) most = std::max(most, moved(mode));
    activations += most;
  }
  if (activations == 0) return;
  if (!(hw.host_memory_GiB > 0))
    e.config.fail("training.offload_modules",
                  "offloads to the host, but the " + hw.name +
                      " device's host memory is unknown (expected none, or give "
                      "cluster.device.host_memory_GiB)");
  const int in_flight = std::min(pp, e.config.training.microbatches);
  const double need = activations / pp * in_flight;
  const double left = host_share - optimizer;
  if (need > left)
    e.config.fail("training.offload_modules",
                  e.config.training.offload_modules + " puts at least " + gib_text(need) +
                      " of activations on the host for the first pipeline rank's devices (" +
                      std::to_string(in_flight) + " micro-batches in flight of " +
                      gib_text(activations / pp) + " each), more than the " + gib_text(left) +
                      " each device has of its host (host_memory_GiB over " +
                      std::to_string(hw.host_devices) +
                      " devices, less offloaded optimizer state; expected fewer modules, "
                      "or more pp)");
  e.host_capacity_bytes = static_cast<std::int64_t>(left);
}

}  // namespace

std::shared_ptr<const Experiment> prepare(const Config& config) {
  return prepare(config, nullptr);
}

std::shared_ptr<const Experiment> prepare(const Config& config,
                                          std::shared_ptr<const Topology> topology) {
  auto e = std::make_shared<Experiment>();
  e->config = config;
  e->topology = topology ? std::move(topology) : std::make_shared<const Topology>(config.cluster);
  if (config.model.analytic()) e->analytic = analytic_costs(config);
  e->layers = layer_costs(config, e->analytic ? &*e->analytic : nullptr);
  // Pipeline rank r's first device: pp runs slowest in Megatron's rank order, so each rank
  // holds tp x cp x dp consecutive devices (ParallelMesh).
  const ParallelMesh mesh = config.mesh();
  e->rank_device.resize(mesh.pp());
  for (int r = 0; r < mesh.pp(); ++r) e->rank_device[r] = r * mesh.stride(MeshGroup::pp);
  e->reserved_bytes = gib_to_bytes(config.device.reserved_GiB);
  if (e->analytic &&
      e->analytic->settings.param_shard_dp * e->analytic->settings.param_shard_edp > 1 &&
      e->analytic->settings.param_reshard_after_forward) {
    // ZeRO-3: the layer in use and the prefetched next one, gathered to full size. (Without
    // resharding after forward every layer's gathered copy is in its static bytes.)
    const AnalyticCosts& a = *e->analytic;
    std::int64_t largest = std::max(a.embedding.param_count, a.head.param_count);
    for (const auto& [kind, count] : a.layer_kinds(*config.model.shape))
      largest = std::max(largest, kind->param_count);
    if (a.mtp) largest = std::max(largest, a.mtp->param_count);
    e->sharded_working_bytes = 2 * largest * a.settings.dtype_bytes;
    e->reserved_bytes += e->sharded_working_bytes;
  }
  e->capacity_bytes = gib_to_bytes(config.device.memory_GiB);
  e->allocator_overhead = config.device.allocator_overhead;
  if (e->analytic) size_host_memory(*e);
  return e;
}

std::vector<int> stage_layer_counts(const Config& c, int num_stages) {
  if (const std::vector<LayoutStage> written = separate_end_layout(c); !written.empty()) {
    if (static_cast<int>(written.size()) != num_stages)
      c.fail("training.megatron_layout", "has " + std::to_string(written.size()) +
                                             " stages but the schedule has " +
                                             std::to_string(num_stages));
    std::vector<int> rows;
    rows.reserve(written.size());
    for (const LayoutStage& st : written) rows.push_back(st.rows());
    return rows;
  }
  std::vector<int> counts;
  if (!c.training.partition.empty()) {
    if (static_cast<int>(c.training.partition.size()) != num_stages)
      c.fail("training.partition", "has " + std::to_string(c.training.partition.size()) +
                                       " entries but the schedule has " +
                                       std::to_string(num_stages) + " stages");
    counts = c.training.partition;
  } else {
    const int layers = c.model.num_layers();
    if (layers < num_stages)
      c.fail("training.pp", "the model's " + std::to_string(layers) + " layers cannot fill " +
                                std::to_string(num_stages) + " stages");
    counts = uniform_partition(layers, num_stages);
  }
  // Separate ends: the embedding row on the first stage, the MTP and loss rows on the last.
  if (has_separate_ends(c)) {
    counts.front() += 1;
    counts.back() += c.model.shape->mtp_layers + 1;
  }
  return counts;
}

std::vector<int> uniform_partition(int layers, int stages) {
  std::vector<int> counts(static_cast<std::size_t>(stages), layers / stages);
  for (int s = 0; s < layers % stages; ++s) ++counts[static_cast<std::size_t>(s)];
  return counts;
}

SimResult run(const Experiment& e, const Plan& plan, const Schedule& schedule,
              const RunOptions& options) {
  return run(e, plan, CompiledSchedule::borrowing(schedule), options);
}

SimResult run(const Experiment& e, const Plan& plan, const CompiledSchedule& compiled,
              const RunOptions& options) {
  const Schedule& schedule = compiled.schedule();
  SimInput in = assemble(e, plan, schedule);
  if (options.capacity_bytes) in.capacity_bytes.assign(schedule.num_ranks, *options.capacity_bytes);
  return simulate(in, compiled, options.observer);
}

Recompute recompute_mode(const Config& c, int stage, int layer) {
  const RecomputeSpec& r = c.training.recompute;
  if (auto it = r.layers.find(layer); it != r.layers.end()) return it->second;
  if (auto it = r.stages.find(stage); it != r.stages.end()) return it->second;
  return r.global;
}

namespace {

/// "none, selective" etc.: the modes a layer can run.
std::string mode_list(const LayerRow& row) {
  std::string text;
  for (Recompute r : kAllModes)
    if (row.has(r)) text += (text.empty() ? "" : ", ") + std::string(recompute_name(r));
  return text;
}

/// The config key that set the mode of `layer` in `stage` (for messages).
std::string recompute_key(const Config& c, int stage, int layer) {
  const RecomputeSpec& r = c.training.recompute;
  if (r.layers.count(layer)) return "training.recompute.layers." + std::to_string(layer);
  if (r.stages.count(stage)) return "training.recompute.stages." + std::to_string(stage);
  return c.lines.count("training.recompute.default") ? "training.recompute.default"
                                                     : "training.recompute";
}

/// Whole-layer offload (training.offload_layers): one micro-batch's pass over the decoder
/// rows, on the device's share of its host link (as activation offload's copies,
/// HardwareSpec::host_link_GBps over host_link_devices). Empty when off.
std::optional<LayerOffloadPass> layer_offload(const Experiment& e, const Plan& plan) {
  const int k = e.config.training.offload_layers;
  if (k <= 0 || !e.analytic || plan.recompute.size() != e.layers.layers.size()) return {};
  const HardwareSpec& hw = e.analytic->hardware;
  const double link = hw.host_link_GBps * 1e9 / std::max(hw.host_link_devices, 1);
  std::vector<LayerOffloadLayer> layers;
  for (std::size_t l = 0; l < e.layers.layers.size(); ++l) {
    const LayerRow& row = e.layers.layers[l];
    if (row.kind != LayerKind::decoder) continue;
    const std::int64_t bytes = row.modes[plan.recompute[l]]->activation_bytes;
    layers.push_back({row.forward, row.backward_input + row.backward_weight, bytes,
                      s_to_ns(static_cast<double>(bytes) / link)});
  }
  return layer_offload_pass(layers, k);
}

}  // namespace

Plan config_plan(const Experiment& e, int num_stages) {
  const Config& c = e.config;
  Plan plan;
  plan.partition = stage_layer_counts(c, num_stages);
  for (const auto& [stage, mode] : c.training.recompute.stages)
    if (stage >= num_stages)
      c.fail("training.recompute.stages." + std::to_string(stage),
             "stage " + std::to_string(stage) + " does not exist: the schedule has " +
                 std::to_string(num_stages) + " stages");
  plan.recompute.reserve(e.num_layers());
  // With separate ends, row 0 is the embedding: decoder layer l is row l + 1. The
  // embedding and the head run none; an MTP layer what the last decoder layer would run on
  // its stage, as it does folded into that layer.
  const int shift = e.layers.separate_ends ? 1 : 0;
  int layer = 0;
  for (int s = 0; s < num_stages; ++s)
    for (int i = 0; i < plan.partition[s] && layer < e.num_layers(); ++i, ++layer) {
      const LayerRow& row = e.layers.layers[layer];
      if (row.kind == LayerKind::embedding || row.kind == LayerKind::head) {
        plan.recompute.push_back(Recompute::none);
        continue;
      }
      // MTP layer k is recompute key num_layers + k when given (set_plan_keys writes it).
      const bool own =
          row.kind != LayerKind::mtp || c.training.recompute.layers.count(layer - shift);
      const Recompute mode = recompute_mode(c, s, own ? layer - shift : c.model.num_layers() - 1);
      if (!row.has(mode))
        c.fail(recompute_key(c, s, layer - shift),
               "layer " + std::to_string(layer - shift) + " (group '" + row.name + "') has no '" +
                   std::string(recompute_name(mode)) +
                   "' recompute costs; it can run: " + mode_list(row));
      plan.recompute.push_back(mode);
    }
  return plan;
}

void set_plan_keys(ConfigEdits& edits, const Config& c, const Plan& plan) {
  edits.megatron_layout.clear();
  edits.separate_ends = false;
  if (!has_separate_ends(c)) {
    edits.partition = plan.partition;
    edits.recompute = plan.recompute;
    return;
  }
  // Rows: E, the decoder layers, the MTP layers, L.
  const int decoders = c.model.num_layers(), mtp = c.model.shape->mtp_layers;
  std::vector<LayoutStage> stages(plan.partition.size());
  std::vector<Recompute> mtp_modes;
  edits.recompute.clear();
  int row = 0;
  for (std::size_t s = 0; s < plan.partition.size(); ++s)
    for (int i = 0; i < plan.partition[s]; ++i, ++row) {
      LayoutStage& st = stages[s];
      if (row == 0) {
        st.embedding = true;
      } else if (row <= decoders) {
        ++st.decoders;
        edits.recompute.push_back(plan.recompute[row]);
      } else if (row <= decoders + mtp) {
        ++st.mtp;
        mtp_modes.push_back(plan.recompute[row]);
      } else {
        st.loss = true;
      }
    }
  edits.recompute.insert(edits.recompute.end(), mtp_modes.begin(), mtp_modes.end());
  edits.partition.clear();
  if (folded_layout_mismatch(stages).empty()) {
    for (const LayoutStage& st : stages) edits.partition.push_back(st.decoders);
    edits.separate_ends = true;
  } else {
    edits.megatron_layout = layout_string(stages);
  }
}

std::string check_plan(const Experiment& e, const Plan& plan, int num_stages) {
  if (static_cast<int>(plan.partition.size()) != num_stages)
    return "the plan has " + std::to_string(plan.partition.size()) +
           " stages but the schedule has " + std::to_string(num_stages);
  std::int64_t sum = 0;
  for (int n : plan.partition) {
    if (n < 0) return "a stage of the plan has a negative layer count";
    sum += n;
  }
  if (sum != e.num_layers())
    return "the plan's stages hold " + std::to_string(sum) + " layers but the model has " +
           std::to_string(e.num_layers());
  if (static_cast<int>(plan.recompute.size()) != e.num_layers())
    return "the plan gives " + std::to_string(plan.recompute.size()) + " recompute modes for " +
           std::to_string(e.num_layers()) + " layers";
  for (int l = 0; l < e.num_layers(); ++l)
    if (!e.layers.layers[l].has(plan.recompute[l]))
      return "layer " + std::to_string(l) + " cannot run recompute mode " +
             std::string(recompute_name(plan.recompute[l]));
  return {};
}

bool grad_reduce_overlapped(const OptimizerSettings& optimizer) {
  return optimizer.overlap_grad_reduce || optimizer.zero_stage >= 3;
}

void assemble(const Experiment& e, const Plan& plan, const Schedule& schedule, SimInput& out) {
  const int num_stages = schedule.num_stages;
  const int p = schedule.num_ranks;
  if (static_cast<int>(plan.partition.size()) != num_stages ||
      static_cast<int>(plan.recompute.size()) != e.num_layers() ||
      p != static_cast<int>(e.rank_device.size()))
    throw std::invalid_argument("assemble: " + check_plan(e, plan, num_stages) +
                                (p != static_cast<int>(e.rank_device.size())
                                     ? " (the schedule has " + std::to_string(p) +
                                           " ranks, the experiment pp " +
                                           std::to_string(e.rank_device.size()) + ")"
                                     : ""));
  const TrainingConfig& t = e.config.training;
  out.topology = e.topology.get();
  out.fb_overlap_factor = t.overlap_factor;
  out.fb_pair_time.reset();
  if (t.overlap_ms) out.fb_pair_time = ms_to_ns(*t.overlap_ms);
  // An overlap_factor the user wrote wins over the pair computed from the parts (an
  // explicit key is never ignored); so does overlap_ms (SimInput::fb_pair_time).
  out.fb_factor_explicit = e.config.lines.count("training.overlap_factor") > 0;
  const bool parts = e.layers.all_to_all;
  out.stage_parts.resize(parts ? num_stages : 0);
  out.stages.assign(num_stages, StageCost{});
  out.rank_device.assign(e.rank_device.begin(), e.rank_device.end());
  out.static_bytes.assign(p, e.reserved_bytes);
  out.capacity_bytes.assign(p, e.capacity_bytes);
  // device.reserved_GiB (the CUDA context, communication buffers) lies outside PyTorch's
  // caching allocator; ZeRO-3's gathered working set is tensors like the rest.
  out.outside_allocator_bytes.assign(p, e.reserved_bytes - e.sharded_working_bytes);
  out.allocator_overhead = e.allocator_overhead;
  out.offload_lead = t.offload_lead;
  out.bpipe = t.bpipe;
  out.host_capacity_bytes.assign(e.host_capacity_bytes > 0 ? p : 0, e.host_capacity_bytes);
  // The end of the iteration is one concept in two parts: each stage's dp gradient
  // reduction as buckets on the rank's communication stream (SimInput::grad_buckets), then
  // the rank's optimizer step (tail_time). Parameters per rank are gathered in tail_time's
  // slots, then turned into the optimizer's time.
  const bool analytic = e.analytic.has_value();
  const bool overlap = analytic && grad_reduce_overlapped(t.optimizer);
  out.tail_time.assign(analytic ? p : 0, 0);
  out.grad_buckets.clear();
  out.overlap_grad_reduce = overlap;
  out.tied_reduce.reset();
  std::vector<std::int64_t> expert_params(analytic ? p : 0, 0);  // of tail_time's counts
  // What ZeRO-1/2's all-gather after the step moves of them (LayerRow::gather_bytes; the
  // matrix copies in dtype bytes).
  std::vector<double> gather_bytes(analytic ? p : 0, 0.0);
  const double dtype_bytes = analytic ? e.analytic->settings.dtype_bytes : 0.0;

  const int last_layer = e.num_layers() - 1;
  // Separate ends: the kinds of row each rank holds, for the MTP layers' matrix copies.
  std::vector<unsigned char> kinds(e.layers.separate_ends ? p : 0, 0);
  int layer = 0;
  for (int s = 0; s < num_stages; ++s) {
    StageCost& cost = out.stages[s];
    const int rank = schedule.stage_rank[s];
    std::int64_t retained = 0;
    bool all_retained = true;
    for (int i = 0; i < plan.partition[s]; ++i, ++layer) {
      if (layer > last_layer)
        throw std::invalid_argument("assemble: the plan holds too many layers");
      const LayerRow& row = e.layers.layers[layer];
      const auto& mode = row.modes[plan.recompute[layer]];
      if (!mode)
        throw std::invalid_argument("assemble: layer " + std::to_string(layer) +
                                    " cannot run recompute mode " +
                                    std::string(recompute_name(plan.recompute[layer])));
      cost.forward += row.forward;
      cost.backward_input += row.backward_input;
      cost.backward_weight += row.backward_weight;
      cost.recompute += mode->recompute;
      cost.activation_bytes += mode->activation_bytes;
      cost.offload_bytes += mode->offload_bytes;
      all_retained = all_retained && !mode->weight_grad_retained_bytes;
      retained += mode->weight_grad_retained_bytes.value_or(mode->activation_bytes);
      cost.output_bytes = row.output_bytes;
      std::int64_t static_bytes = row.static_bytes, params = row.param_count;
      if (layer == last_layer && num_stages > 1) {
        static_bytes += e.layers.head_copy_static_bytes;
        params += e.layers.head_copy_params;
      }
      out.static_bytes[rank] += static_bytes;
      if (analytic) {
        out.tail_time[rank] += params;
        expert_params[rank] += row.expert_param_count;
        gather_bytes[rank] +=
            row.gather_bytes + static_cast<double>(params - row.param_count) * dtype_bytes;
      }
      if (!kinds.empty())
        kinds[rank] |= static_cast<unsigned char>(1u << static_cast<int>(row.kind));
    }
    // A stage without rows passes its input on unchanged.
    if (plan.partition[s] == 0 && s > 0) cost.output_bytes = out.stages[s - 1].output_bytes;
    if (!all_retained) cost.weight_grad_retained_bytes = retained;
    // Activation offload: one copy of the stage's offloaded bytes each way on the device's
    // share of its host link (HardwareSpec::host_link_GBps over host_link_devices).
    if (cost.offload_bytes > 0) {
      const HardwareSpec& hw = e.analytic->hardware;
      const double link = hw.host_link_GBps * 1e9 / std::max(hw.host_link_devices, 1);
      cost.offload_time = s_to_ns(static_cast<double>(cost.offload_bytes) / link);
    }
    // ZeRO-3: the op's first layer in forward (and last, first in backward) cannot hide
    // its gather behind anything before it (LayerCost::first_forward_s).
    if (plan.partition[s] > 0) {
      const LayerRow& first = e.layers.layers[layer - plan.partition[s]];
      const LayerRow& last = e.layers.layers[layer - 1];
      cost.forward += first.first_forward;
      cost.backward_input += last.first_backward_input;
      cost.backward_weight += last.first_backward_weight;
    }
    if (parts) {
      // The stage's layers in turn; the backward runs them last to first, each layer's
      // recompute before its own backward.
      auto& sp = out.stage_parts[s];
      sp.forward.assign(1, 0);
      sp.backward.assign(1, 0);
      const int first = layer - plan.partition[s];
      for (int l = first; l < layer; ++l) {
        const LayerRow& row = e.layers.layers[l];
        if (row.forward_parts.empty()) {
          sp.forward.back() += row.forward;
        } else {
          sp.forward.back() += row.forward_parts.front();
          sp.forward.insert(sp.forward.end(), row.forward_parts.begin() + 1,
                            row.forward_parts.end());
        }
      }
      for (int l = layer - 1; l >= first; --l) {
        const LayerRow& row = e.layers.layers[l];
        sp.backward.back() += row.modes[plan.recompute[l]]->recompute;
        if (row.backward_parts.empty()) {
          sp.backward.back() += row.backward_input + row.backward_weight;
        } else {
          sp.backward.back() += row.backward_parts.front();
          sp.backward.insert(sp.backward.end(), row.backward_parts.begin() + 1,
                             row.backward_parts.end());
        }
      }
      // ZeRO-3's exposed first-layer gathers (above) run on the computation stream, at
      // the start of the forward and of the backward.
      if (plan.partition[s] > 0) {
        sp.forward.front() += e.layers.layers[first].first_forward;
        sp.backward.front() += e.layers.layers[layer - 1].first_backward_input +
                               e.layers.layers[layer - 1].first_backward_weight;
      }
    }
  }
  if (layer != e.num_layers())
    throw std::invalid_argument("assemble: " + check_plan(e, plan, num_stages));
  // Whole-layer offload: the one stage's passes wait for their copies (in their ops' times,
  // the computation pieces first when the stage has parts), and its decoder rows hold at
  // most the peak window of activations instead of all of them.
  if (const auto pass = layer_offload(e, plan)) {
    if (num_stages != 1)
      e.config.fail("training.offload_layers",
                    "needs a schedule with one stage (pp 1, no virtual stages); " + schedule.name +
                        " runs " + std::to_string(num_stages));
    StageCost& cost = out.stages[0];
    cost.forward += pass->forward_wait;
    cost.backward_input += pass->backward_wait;
    cost.activation_bytes -= pass->total_bytes - pass->peak_bytes;
    if (cost.weight_grad_retained_bytes)
      cost.weight_grad_retained_bytes =
          std::min(*cost.weight_grad_retained_bytes, cost.activation_bytes);
    if (parts) {
      out.stage_parts[0].forward.front() += pass->forward_wait;
      out.stage_parts[0].backward.front() += pass->backward_wait;
    }
  }
  const auto holds = [&](int rank, LayerKind k) {
    return (kinds[rank] >> static_cast<int>(k)) & 1u;
  };
  // Parameters of the copies each rank keeps, for its reduction buckets below.
  std::vector<std::int64_t> copy_params(kinds.size(), 0);
  for (int r = 0; r < static_cast<int>(kinds.size()); ++r) {
    if (!holds(r, LayerKind::mtp)) continue;
    if (!holds(r, LayerKind::embedding)) {
      out.static_bytes[r] += e.layers.mtp_embedding_copy_static_bytes;
      copy_params[r] += e.layers.mtp_embedding_copy_params;
    }
    if (!holds(r, LayerKind::head)) {
      out.static_bytes[r] += e.layers.mtp_head_copy_static_bytes;
      copy_params[r] += e.layers.mtp_head_copy_params;
    }
    if (analytic) {
      out.tail_time[r] += copy_params[r];
      gather_bytes[r] += static_cast<double>(copy_params[r]) * dtype_bytes;
    }
  }
  if (!analytic) return;
  // The forward op each rank runs first (its lowest stage's): what hides the post-step
  // all-gather under overlap_param_gather.
  std::vector<Time> first_forward(p, -1);
  for (int s = 0; s < num_stages; ++s)
    if (Time& f = first_forward[schedule.stage_rank[s]]; f < 0) f = out.stages[s].forward;
  out.grad_buckets.assign(num_stages, {});
  if (!overlap) {
    // Reductions after the pipeline (Megatron-LM without --overlap-grad-reduce reduces in
    // finalize_model_grads, after the last backward): a rank's gradients as one bucket,
    // ready when its last op ends, held by its first stage (they all start after the last
    // pipeline op, so which stage holds it changes nothing).
    std::vector<bool> held(p, false);
    for (int s = 0; s < num_stages; ++s) {
      const int rank = schedule.stage_rank[s];
      if (held[rank]) continue;
      held[rank] = true;
      out.grad_buckets[s].push_back(GradBucket{
          stage_grad_reduce_time(e, rank, out.tail_time[rank], expert_params[rank]), 1.0, 1.0});
    }
    for (int r = 0; r < p; ++r)
      out.tail_time[r] = optimizer_tail_time(e, r, out.tail_time[r], expert_params[r],
                                             first_forward[r], gather_bytes[r]);
    return;
  }
  // Megatron-LM reduces in buckets of max(40M, 1M x dp) parameters
  // (DistributedDataParallelConfig.bucket_size, megatron/core/distributed), filled in the
  // order the backward produces gradients (a stage's last layer first) and each launched
  // when all its gradients of the last micro-batch are in. Here a bucket is a run of whole
  // layers from the end of the stage, closed once it holds bucket_size parameters; it is
  // ready when the stage's last weight-gradient op has processed its first layer: a B (or
  // an FB's backward) walks the layers last to first in proportion to their input-grad +
  // weight-grad + recompute time, a W in proportion to their weight-grad time.
  const std::int64_t bucket_size =
      std::max<std::int64_t>(40'000'000, std::int64_t{1'000'000} * e.analytic->dense_group());
  for (int s = 0, first = 0; s < num_stages; first += plan.partition[s], ++s) {
    const int n = plan.partition[s];
    double total_b = 0, total_w = 0;
    for (int l = first; l < first + n; ++l) {
      const LayerRow& row = e.layers.layers[l];
      total_b += static_cast<double>(row.backward_input + row.backward_weight +
                                     row.modes[plan.recompute[l]]->recompute);
      total_w += static_cast<double>(row.backward_weight);
    }
    double done_b = 0, done_w = 0;
    std::int64_t params = 0, experts = 0;
    for (int l = first + n - 1; l >= first; --l) {
      const LayerRow& row = e.layers.layers[l];
      done_b += static_cast<double>(row.backward_input + row.backward_weight +
                                    row.modes[plan.recompute[l]]->recompute);
      done_w += static_cast<double>(row.backward_weight);
      params +=
          row.param_count + (l == last_layer && num_stages > 1 ? e.layers.head_copy_params : 0);
      // The MTP layers' matrix copies are parameters of the rank's model chunk, so
      // Megatron's buckets hold their gradients too: with the (first) MTP row that uses
      // them.
      if (row.kind == LayerKind::mtp && !copy_params.empty()) {
        const int rank = schedule.stage_rank[s];
        params += copy_params[rank];
        copy_params[rank] = 0;
      }
      experts += row.expert_param_count;
      if (params >= bucket_size || l == first) {
        const Time time = stage_grad_reduce_time(e, schedule.stage_rank[s], params, experts);
        out.grad_buckets[s].push_back(GradBucket{time, total_b > 0 ? done_b / total_b : 1.0,
                                                 total_w > 0 ? done_w / total_w : 1.0});
        params = 0;
        experts = 0;
      }
    }
    // The bucket holding the stage's first layer closes with the op: exactly 1.
    if (!out.grad_buckets[s].empty()) {
      out.grad_buckets[s].back().ready_b = 1.0;
      out.grad_buckets[s].back().ready_w = 1.0;
    }
  }
  for (int r = 0; r < p; ++r)
    out.tail_time[r] = optimizer_tail_time(e, r, out.tail_time[r], expert_params[r],
                                           first_forward[r], gather_bytes[r]);
  // Tied embeddings with more than one stage: the first and the last stage each hold the
  // matrix and all-reduce its gradient after the dp reduction (Megatron-LM,
  // finalize_model_grads: _allreduce_word_embedding_grads). One rank holding both (a V
  // schedule) sums them in place, which costs nothing here.
  const int first = schedule.stage_rank.front(), last = schedule.stage_rank.back();
  if (num_stages > 1 && first != last)
    if (const Time tied = tied_embedding_reduce_time(e, first, last); tied > 0)
      out.tied_reduce = PairReduction{first, last, tied};
}

SimInput assemble(const Experiment& e, const Plan& plan, const Schedule& schedule) {
  SimInput in;
  assemble(e, plan, schedule, in);
  return in;
}

std::vector<StageInfo> stage_info(const Experiment& e, const Plan& plan) {
  std::vector<StageInfo> stages(plan.partition.size());
  int layer = 0;
  const int last_layer = e.num_layers() - 1;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    StageInfo& st = stages[s];
    st.first_layer = layer;
    st.num_layers = plan.partition[s];
    for (int i = 0; i < plan.partition[s] && layer <= last_layer; ++i, ++layer) {
      ++st.modes[plan.recompute[layer]];
      const LayerRow& row = e.layers.layers[layer];
      st.static_bytes += row.static_bytes;
      st.params += row.param_count;
      st.expert_params += row.expert_param_count;
      if (layer == last_layer && stages.size() > 1) {
        st.static_bytes += e.layers.head_copy_static_bytes;
        st.params += e.layers.head_copy_params;
      }
    }
  }
  return stages;
}

std::vector<std::string> stage_recompute_labels(const std::vector<StageInfo>& stages) {
  std::vector<std::string> labels;
  labels.reserve(stages.size());
  for (const StageInfo& st : stages) {
    std::string label = "none";
    for (Recompute r : kAllModes)
      if (st.modes[r] == st.num_layers && st.num_layers > 0) label = recompute_name(r);
    int kinds = 0;
    for (Recompute r : kAllModes) kinds += st.modes[r] > 0;
    labels.push_back(kinds > 1 ? "mixed" : label);
  }
  return labels;
}

std::vector<std::string> stage_recompute_counts(const std::vector<StageInfo>& stages) {
  std::vector<std::string> out;
  out.reserve(stages.size());
  for (const StageInfo& st : stages) {
    std::string text;
    for (Recompute r : kAllModes)  // the offload modes too: a stage of them has layers
      if (st.modes[r] > 0)
        text += (text.empty() ? "" : ", ") + std::string(recompute_name(r)) + " " +
                std::to_string(st.modes[r]);
    out.push_back(text.empty() ? "no layers" : text);
  }
  return out;
}

namespace {

/// Where the dp x cp group of pipeline rank `rank` lies (tp rank 0: devices base + j * tp,
/// cp ranks then dp ranks, Megatron's "tp-cp-ep-dp-pp"): its members, and how many of them
/// share a scale-up domain (the node unless cluster.scale_up_domain is larger) when it
/// spans several, whose NICs its collectives then drive at once (sim/cost/collectives.hpp).
/// Under hybrid sharding (AnalyticCosts::shard_copies > 1) the group splits into the shard
/// group, which reduce-scatters and gathers, and the replica group across the copies, which
/// all-reduces the shards (Megatron-Core's intra- and inter-instance groups); without it the
/// shard group is the whole group and the replica group one member.
struct HybridGroups {
  CollectiveGroup shard, replicas;
};
HybridGroups hybrid_groups(const Experiment& e, int rank, MeshGroup g, int shard) {
  const ParallelMesh mesh = e.config.mesh();
  const ParallelMesh::Part s = mesh.shard_part(g, shard, rank);
  const ParallelMesh::Part r = mesh.replica_part(g, shard, rank);
  return {{s.size, s.per_domain}, {r.size, r.per_domain}};
}
HybridGroups dp_groups(const Experiment& e, int rank) {
  return hybrid_groups(e, rank, MeshGroup::dp_cp, e.analytic->dense_shard());
}

/// The same for the experts' data-parallel group (etp x ep apart, Megatron-Core's
/// expert_data_parallel group).
HybridGroups edp_groups(const Experiment& e, int rank) {
  return hybrid_groups(e, rank, MeshGroup::edp, e.analytic->edp_shard());
}

/// The dp reduction of `params` gradients over `groups`: all-reduce, or ZeRO-1's
/// reduce-scatter, over the shard group, then (hybrid sharding) the all-reduce of the
/// 1 / shard of them each member holds over the replica group, on the same stream after it
/// (Megatron-LM d98e8a64, megatron/core/distributed/param_and_grad_buffer.py,
/// start_grad_sync: "With multiple DistOpt instances, we need to all-reduce across
/// instances"; Megatron-FSDP's outer-DP all-reduce of the reduce-scattered shard on the
/// last micro-batch, fsdp/src/megatron_fsdp/param_and_grad_buffer.py). Stage 3 has only
/// the all-reduce here: its reduce-scatters run in the layers (grad_reduce_scatter).
double grad_reduce_s(const AnalyticCosts& a, const HybridGroups& groups, std::int64_t params) {
  const double grads = static_cast<double>(params) * a.optimizer.grad_bytes;
  const double shard =
      a.optimizer.zero_stage >= 3
          ? 0.0
          : collective_time_s(
                a.hardware,
                a.optimizer.zero_stage >= 1 ? Collective::reduce_scatter : Collective::all_reduce,
                groups.shard, grads);
  if (groups.replicas.size <= 1) return shard;
  return shard + collective_time_s(a.hardware, Collective::all_reduce, groups.replicas,
                                   grads / groups.shard.size);
}

/// ZeRO-1's all-gather of `params` updated parameters, `bytes_per_param` bytes each, over
/// the shard group.
double param_gather_s(const AnalyticCosts& a, const HybridGroups& groups, std::int64_t params,
                      double bytes_per_param) {
  return collective_time_s(a.hardware, Collective::all_gather, groups.shard,
                           static_cast<double>(params) * bytes_per_param);
}

}  // namespace

Time stage_grad_reduce_time(const Experiment& e, int rank, std::int64_t params,
                            std::int64_t expert_params) {
  if (!e.analytic) return 0;
  const AnalyticCosts& a = *e.analytic;
  // ZeRO-3 reduce-scatters each layer's gradients in its backward (grad_reduce_scatter);
  // only hybrid sharding's all-reduce across the copies is left for here, unless the layers
  // run it in every micro-batch's backward too (FSDP2's HSDP).
  if (a.optimizer.zero_stage >= 3 &&
      (a.shard_copies <= 1 || e.config.training.fsdp_all_reduce_every_microbatch))
    return 0;
  if (expert_params > 0) {
    // Dense gradients over dp, then the experts' over edp (Megatron-Core's
    // expert_data_parallel group), on the same stream one after the other, each on the
    // links its own members reach.
    const double dense = grad_reduce_s(a, dp_groups(e, rank), params - expert_params);
    const double experts = grad_reduce_s(a, edp_groups(e, rank), expert_params);
    return s_to_ns(dense + experts);
  }
  if (a.dense_group() <= 1) return 0;
  return s_to_ns(grad_reduce_s(a, dp_groups(e, rank), params));
}

Time optimizer_tail_time(const Experiment& e, int rank, std::int64_t params,
                         std::int64_t expert_params, Time first_forward,
                         std::optional<double> gather_bytes) {
  if (!e.analytic) return 0;
  const AnalyticCosts& a = *e.analytic;
  // The gather's bytes a parameter, taken alike over dense and experts (as ZeRO-3's are).
  const double per_param = gather_bytes && params > 0 ? *gather_bytes / static_cast<double>(params)
                                                      : static_cast<double>(a.settings.dtype_bytes);
  // ZeRO-1 and -2 gather the updated parameters after the step; ZeRO-3 in the layers.
  // Each device steps its shard: 1 / the shard group of the parameters.
  const bool gathers = a.optimizer.zero_stage == 1 || a.optimizer.zero_stage == 2;
  double step = 0, gather_dense = 0, gather_experts = 0;
  if (expert_params > 0) {
    const std::int64_t dense = params - expert_params;
    step =
        optimizer_step_s(dense, a.settings.dtype_bytes, a.optimizer, a.dense_shard(), a.hardware) +
        optimizer_step_s(expert_params, a.settings.dtype_bytes, a.optimizer, a.edp_shard(),
                         a.hardware);
    if (gathers) {
      if (a.dense_group() > 1)
        gather_dense = param_gather_s(a, dp_groups(e, rank), dense, per_param);
      gather_experts = param_gather_s(a, edp_groups(e, rank), expert_params, per_param);
    }
  } else {
    step =
        optimizer_step_s(params, a.settings.dtype_bytes, a.optimizer, a.dense_shard(), a.hardware);
    if (a.dense_group() > 1 && gathers)
      gather_dense = param_gather_s(a, dp_groups(e, rank), params, per_param);
  }
  if (!a.optimizer.overlap_param_gather) {
    double seconds = step;  // summed in this order so the rounding stays as it was
    seconds += gather_dense;
    seconds += gather_experts;
    return s_to_ns(seconds);
  }
  // --overlap-param-gather: the gather runs under the next iteration's first forward op.
  const Time exposed = std::max<Time>(0, s_to_ns(gather_dense + gather_experts) - first_forward);
  return s_to_ns(step) + exposed;
}

Time tied_embedding_reduce_time(const Experiment& e, int rank_a, int rank_b) {
  if (!e.analytic || rank_a == rank_b) return 0;
  const AnalyticCosts& a = *e.analytic;
  // LayerTable::head_copy_params is the last stage's own copy of the matrix: vocab / tp x
  // hidden when the embeddings are tied, 0 otherwise.
  const double grads = static_cast<double>(e.layers.head_copy_params) * a.optimizer.grad_bytes;
  const int dev_a = e.rank_device[rank_a], dev_b = e.rank_device[rank_b];
  const bool crosses = e.topology->domain_of(dev_a) != e.topology->domain_of(dev_b);
  return s_to_ns(collective_time_s(a.hardware, Collective::all_reduce, 2, grads, crosses));
}

RunInfo make_run_info(const Experiment& e, const Plan& plan, const Schedule& schedule) {
  const Config& c = e.config;
  const TrainingConfig& t = c.training;
  RunInfo info;
  info.schedule = schedule.name;
  info.pp = schedule.num_ranks;
  info.vpp = schedule.chunks_per_device();
  info.microbatches = schedule.num_microbatches;
  const int dp = c.mesh().dp();
  info.tp = t.tp;
  info.dp = dp;
  info.devices = t.pp * t.tp * t.cp * dp;
  info.idle_devices = std::max(0, c.cluster_devices() - info.devices);
  info.micro_batch_size = t.micro_batch_size;
  info.partition = plan.partition;
  if (static_cast<int>(plan.recompute.size()) == e.num_layers())
    info.stage_recompute = stage_recompute_labels(stage_info(e, plan));
  if (const auto pass = layer_offload(e, plan)) {
    info.offload_layers = t.offload_layers;
    for (const LayerRow& row : e.layers.layers)
      info.offload_layers_of += row.kind == LayerKind::decoder ? 1 : 0;
    info.layer_offload = *pass;
  }
  if (t.seq_length)
    info.tokens_per_iteration =
        static_cast<double>(schedule.num_microbatches) * t.micro_batch_size * dp * *t.seq_length;
  if (!e.analytic) return info;
  // One device's forward FLOPs per micro-batch summed over the pipeline, times the tp x
  // dp devices that share each stage and the micro-batches.
  double forward = e.layers.fixed_forward_flops, recompute = 0;
  for (int l = 0; l < e.num_layers() && l < static_cast<int>(plan.recompute.size()); ++l) {
    const LayerRow& row = e.layers.layers[l];
    forward += row.forward_flops;
    recompute += row.recompute_flops[plan.recompute[l]];
  }
  const double scale = static_cast<double>(t.tp) * t.cp * dp * schedule.num_microbatches;
  // Model FLOPs are the model's, the same for every layout of it (issue 41): what one
  // micro-batch costs on one device holding the whole of every layer (tp, cp, ep, etp 1),
  // not what the layout's devices execute, which counts work a layout repeats (the
  // down-projections of multi-latent attention on every tp rank, kv heads replicated past
  // tp = kv heads). Training = forward + input-grad + weight-grad =
  // 3x forward (the usual model-FLOPs convention behind MFU, e.g. Chowdhery et al. 2022,
  // appendix B).
  Config whole = c;
  whole.training.tp = whole.training.cp = whole.training.ep = whole.training.etp = 1;
  whole.training.sequence_parallel = whole.training.tp_comm_overlap = false;
  const AnalyticCosts whole_costs = analytic_costs(whole);
  const LayerTable whole_table = layer_costs(whole, &whole_costs);
  double model_forward = whole_table.fixed_forward_flops;
  for (const LayerRow& row : whole_table.layers) model_forward += row.forward_flops;
  info.model_flops_per_iteration =
      3 * model_forward * static_cast<double>(dp) * schedule.num_microbatches;
  info.hardware_flops_per_iteration = (3 * forward + recompute) * scale;
  const HardwareSpec& hw = e.analytic->hardware;
  info.peak_flops_per_device = hw.peak_tflops * 1e12;
  // The GEMMs' precision (the layers' GEMMs; the router and the head stay bf16, which this
  // figure does not split out): its dense peak, the one a framework quotes FP8 MFU against.
  if (e.analytic->settings.fp8 != Fp8::none) {
    const bool fp4 = e.analytic->settings.fp8_recipe == Fp8Recipe::nvfp4;
    info.gemm_precision = fp4 ? "NVFP4" : "FP8";
    info.gemm_peak_flops_per_device = (fp4 ? hw.fp4_peak_tflops : hw.fp8_peak_tflops) * 1e12;
  }
  return info;
}

}  // namespace bmpipe
