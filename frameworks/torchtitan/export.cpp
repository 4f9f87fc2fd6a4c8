#include "frameworks/torchtitan/export.hpp"

#include <algorithm>
#include <numeric>
#include <sstream>

#include "frameworks/torchtitan/flavors.hpp"
#include "frameworks/torchtitan/formats.hpp"
#include "frameworks/torchtitan/rules.hpp"

// Sources (read, not copied): pytorch/torchtitan at v0.2.2 (73a0e6979dd1), the same as
// frameworks/torchtitan/import.cpp cites: torchtitan/config/job_config.py (the keys),
// torchtitan/distributed/pipeline_parallel.py (module_fqns_per_model_part overrides the
// split; one list per stage, num_stages % pp == 0, V schedules with 2 per rank),
// torchtitan/distributed/activation_checkpoint.py (one mode for every layer: none, full,
// selective "op" or every n-th layer), torchtitan/models/llama3/infra/parallelize.py (FSDP
// with bf16 mixed precision when data_parallel_shard_degree > 1 or context parallelism,
// reshard_after_forward at its default; sequence
// parallelism with every tp > 1; async TP needs compile), torchtitan/distributed/
// tensor_parallel.py (maybe_enable_async_tp), and the converters of
// torchtitan/components/quantization/float8.py and mx.py.

namespace bmpipe {

namespace {

bool v_placement(const ExportLayout& l) {
  if (l.vpp != 2) return false;
  const int stages = export_stage_count(l);
  for (int s = 0; s < stages; ++s)
    if (l.stage_rank[s] != (s < l.pp ? s : 2 * l.pp - 1 - s)) return false;
  return l.pp > 1;
}

/// The per-layer modes of every rule torchtitan's [activation_checkpoint] states on the
/// layout's partition and placement, each with its mode and option.
struct Rule {
  std::string mode, option;
  std::vector<Recompute> modes;
};

std::vector<Rule> rules_of(const ExportLayout& l) {
  const int layers = static_cast<int>(l.recompute.size());
  const bool v = v_placement(l);
  std::vector<Rule> out;
  out.push_back({"none", "", std::vector<Recompute>(layers, Recompute::none)});
  out.push_back({"full", "", std::vector<Recompute>(layers, Recompute::full)});
  out.push_back({"selective", "op", std::vector<Recompute>(layers, Recompute::selective)});
  const int largest =
      l.partition.empty() ? 0 : *std::max_element(l.partition.begin(), l.partition.end());
  for (int freq = 2; freq <= std::max(2, largest * l.vpp); ++freq)
    out.push_back(
        {"selective", std::to_string(freq), torchtitan_layer_sac(l.partition, l.pp, v, freq)});
  return out;
}

}  // namespace

TorchTitanExport torchtitan_plan(const ExportLayout& layout) {
  check_export_layout(layout);
  TorchTitanExport x;
  x.expressed = layout;
  std::vector<std::string> why;
  if (layout.pp > 1 && !interleaved_placement(layout) && !v_placement(layout)) {
    // Stages on ranks neither looped nor V: torchtitan places them one of those two ways.
    for (int s = 0; s < export_stage_count(layout); ++s) x.expressed.stage_rank[s] = s % layout.pp;
    why.push_back(
        "torchtitan places stages looped (stage s on rank s mod pp) or as a V; "
        "stated looped");
  }
  if (!layout.embedding_on_first || !layout.loss_on_last) {
    x.expressed.embedding_on_first = x.expressed.loss_on_last = true;
    why.push_back(
        "torchtitan's module_fqns_per_model_part keeps tok_embeddings on the first stage and "
        "norm and output on the last; the plan puts them elsewhere");
  }
  const std::vector<Rule> rules = rules_of(x.expressed);
  const Rule* match = nullptr;
  for (const Rule& r : rules)
    if (r.modes == layout.recompute) {
      match = &r;
      break;
    }
  if (!match) {
    // The nearest rule that recomputes at least what the plan does: full if any layer is
    // full, else op-level selective.
    const bool any_full =
        std::count(layout.recompute.begin(), layout.recompute.end(), Recompute::full) > 0;
    const bool any_selective =
        std::count(layout.recompute.begin(), layout.recompute.end(), Recompute::selective) > 0;
    match = any_full ? &rules[1] : any_selective ? &rules[2] : &rules[0];
    why.push_back(
        "torchtitan's [activation_checkpoint] states one rule for every layer (none, "
        "full, selective op, or full on every n-th layer a rank builds), not this "
        "plan's modes; stated as mode \"" +
        match->mode + "\"" + (match->option.empty() ? "" : " \"" + match->option + "\""));
  }
  x.mode = match->mode;
  x.option = match->option;
  x.expressed.recompute = match->modes;
  x.exact = why.empty();
  for (const std::string& w : why) x.note += (x.note.empty() ? "" : "; ") + w;
  if (!x.note.empty()) x.note += ".";
  return x;
}

bool torchtitan_states(const ExportLayout& layout) {
  return torchtitan_plan(layout).exact;
}

std::vector<std::vector<Recompute>> torchtitan_recompute_choices(
    const std::vector<int>& partition) {
  ExportLayout l;
  l.pp = std::max<int>(1, static_cast<int>(partition.size()));
  l.partition = partition;
  for (int s = 0; s < l.pp; ++s) l.stage_rank.push_back(s);
  l.recompute.assign(
      static_cast<std::size_t>(std::accumulate(partition.begin(), partition.end(), 0)),
      Recompute::none);
  std::vector<std::vector<Recompute>> out;
  for (Rule& r : rules_of(l)) out.push_back(std::move(r.modes));
  return out;
}

std::string torchtitan_refusal(const Config& config, const std::string& form) {
  if (!config.model.shape)
    return form + " names a model by [model] name and flavor; a measured model has none";
  if (!torchtitan_flavor_of(*config.model.shape))
    return form +
           " names a model by [model] name and flavor, and this model is none of the flavors "
           "bmpipe knows the shape of (" +
           torchtitan_flavor_names() + ")";
  // torchtitan's ParallelDims (frameworks/torchtitan/rules.cpp).
  if (const auto b = rule_by_id(torchtitan_rules(), "torchtitan.etp-one-or-tp").check(config))
    return b->message;
  return {};
}

Config torchtitan_restated(const Config& config, std::vector<std::string>& dropped) {
  Config c = config;
  TrainingConfig& t = c.training;
  const ParallelMesh mesh = config.mesh();
  // FSDP over dp x cp, or nothing sharded (import.cpp [TT-par]).
  const bool sharded = mesh.dp() * mesh.cp() > 1;
  // Under pipeline parallelism torchtitan's FSDP gathers once a step and reduce-scatters after
  // the last backward: ZeRO-1 with the gather under the first forward (import.cpp, read_fsdp).
  const bool piped = mesh.pp() > 1;
  const int zero = !sharded ? 0 : piped ? 1 : 3;
  const int given = t.fsdp ? std::max(t.optimizer.zero_stage, 2) : t.optimizer.zero_stage;
  if (sharded && given != zero && !(zero == 3 && t.fsdp))
    dropped.push_back(
        "training.optimizer.zero_stage " + std::to_string(given) +
        ": torchtitan shards data parallelism with FSDP (ZeRO-3; under pipeline parallelism "
        "ZeRO-1 with the parameters gathered under the first forward) or replicates it in "
        "fp32 (DDP); stated as FSDP.");
  t.fsdp = zero == 3;
  t.optimizer.zero_stage = zero;
  // ZeRO-1 under a pipeline overlaps both (import.cpp, read_fsdp); ZeRO-3 has neither.
  const bool overlaps = zero == 1;
  if (sharded && given == zero &&
      (t.optimizer.overlap_grad_reduce != overlaps || t.optimizer.overlap_param_gather != overlaps))
    dropped.push_back(
        std::string("training.optimizer.overlap_grad_reduce / overlap_param_gather ") +
        (overlaps ? "off: torchtitan's FSDP under a pipeline reduce-scatters each "
                    "stage's gradients after its last backward and gathers the "
                    "parameters under the first forward; stated so."
                  : "on: Megatron-LM's; torchtitan's FSDP gathers and reduces per "
                    "layer instead."));
  t.optimizer.overlap_grad_reduce = overlaps;
  t.optimizer.overlap_param_gather = overlaps;
  // HSDP: torchtitan replicates over data_parallel_replicate_degree and shards over
  // data_parallel_shard_degree x cp, so the copies must divide dp.
  if (const int shard = t.fsdp_shard_group; shard > 0) {
    const int copies = sharded ? mesh.dp() * mesh.cp() / shard : 1;
    if (copies > 1 && mesh.dp() % copies != 0)
      dropped.push_back("training.fsdp_shard_group " + std::to_string(shard) + ": its " +
                        std::to_string(copies) +
                        " copies do not divide dp, which torchtitan's "
                        "data_parallel_replicate_degree must; stated without.");
    if (copies <= 1 || mesh.dp() % copies != 0) t.fsdp_shard_group = 0;
  }
  // FSDP2's HSDP all-reduces in every micro-batch's backward (import.cpp, read_parallelism).
  const bool every = zero == 3 && t.fsdp_shard_group > 0;
  if (every && !t.fsdp_all_reduce_every_microbatch)
    dropped.push_back(
        "training.fsdp_all_reduce_every_microbatch false: torchtitan's FSDP2 all-reduces "
        "across the replicas in every micro-batch's backward; stated so.");
  if (!every && t.fsdp_all_reduce_every_microbatch)
    dropped.push_back(
        "training.fsdp_all_reduce_every_microbatch true: torchtitan shards this job as "
        "ZeRO-1 or not at all, reducing once an iteration; stated so.");
  t.fsdp_all_reduce_every_microbatch = every;
  if (!t.fsdp_reshard_after_forward && zero != 3) {
    dropped.push_back(
        "training.fsdp_reshard_after_forward false: torchtitan keeps the parameters gathered "
        "through the step under pipeline parallelism (ZeRO-1); stated so.");
    t.fsdp_reshard_after_forward = true;
  }
  if (t.optimizer.offload_fraction > 0) {
    dropped.push_back(
        "training.optimizer.offload_fraction: torchtitan has no partial "
        "optimizer offload; stated without.");
    t.optimizer.offload_fraction = 0;
  }
  if (parse_recompute_modules(t.recompute_modules, nullptr) != kDefaultRecomputeModules) {
    dropped.push_back("training.recompute_modules " + t.recompute_modules +
                      ": Megatron-Core's modules; torchtitan's selective checkpointing is per "
                      "op or per layer, read by bmpipe as the attention core; stated so.");
    t.recompute_modules = "core_attn";
  }
  if (t.dtype != "bf16") {
    dropped.push_back("training.dtype " + t.dtype + ": torchtitan trains in bfloat16; stated so.");
    t.dtype = "bf16";
  }
  if (mesh.tp() > 1 && !t.sequence_parallel) {
    dropped.push_back(
        "tensor parallelism without sequence parallelism: torchtitan's always "
        "shards the norms over the sequence; stated with it.");
    t.sequence_parallel = true;
  }
  if (t.tp_comm_overlap && t.kernel_set() != Kernels::fused) {
    dropped.push_back(
        "training.tp_comm_overlap is torchtitan's async TP, which needs compile: "
        "stated with compile on (fused kernels).");
    t.kernels = "fused";
  }
  if (mesh.cp() > 1 && t.cp_comm_type != "p2p") {
    dropped.push_back("training.cp_comm_type " + t.cp_comm_type +
                      ": torchtitan's context parallelism is ring attention; stated as p2p.");
    t.cp_comm_type = "p2p";
  }
  if (t.fp8 != "none") {
    const bool float8 = t.fp8 == "hybrid" && t.fp8_recipe == "tensorwise";
    // torchao's rowwise recipe and its mx converter cast every operand to e4m3.
    const bool e4m3 = t.fp8_recipe == "mxfp8" || t.fp8_recipe == "rowwise";
    if (e4m3 && t.fp8 != "e4m3") {
      dropped.push_back("training.fp8 " + t.fp8 + " with " + t.fp8_recipe + ": torchtitan's " +
                        (t.fp8_recipe == "mxfp8" ? "mx converter" : "rowwise float8") +
                        " casts to e4m3; stated so.");
      t.fp8 = "e4m3";
    } else if (!float8 && !e4m3) {
      dropped.push_back("training.fp8 " + t.fp8 + " with the " + t.fp8_recipe +
                        " recipe: torchtitan's float8 converter scales tensorwise with e5m2 "
                        "gradients (hybrid) or rowwise, its mx converter MXFP8; stated "
                        "without FP8.");
      t.fp8 = "none";
    }
  }
  if (t.moe_overlap) {
    dropped.push_back(
        "training.moe_overlap: Megatron-LM's overlap of the expert all-to-alls; "
        "torchtitan runs it only inside DualPipeV.");
    t.moe_overlap = false;
  }
  if (!t.cuda_graphs.empty() && t.cuda_graphs != "none") {
    dropped.push_back("training.cuda_graphs: torchtitan captures no CUDA graphs; stated without.");
    t.cuda_graphs.clear();
  }
  return c;
}

namespace {

std::string toml_bool(bool b) {
  return b ? "true" : "false";
}

}  // namespace

std::vector<TorchTitanKey> torchtitan_job_keys(const TorchTitanExport& x, const ExportJob& job,
                                               std::string_view schedule) {
  const ExportLayout& l = x.expressed;
  const TorchTitanFlavor* flavor = job.shape ? torchtitan_flavor_of(*job.shape) : nullptr;
  const bool sharded = job.dp * job.cp > 1;
  std::vector<TorchTitanKey> keys;
  const auto put = [&keys](const char* section, const char* key, std::string literal) {
    keys.push_back(TorchTitanKey{section, key, std::move(literal)});
  };
  const auto text = [](std::string_view v) {
    std::string quoted(1, '"');
    quoted.append(v);
    quoted += '"';
    return quoted;
  };
  if (flavor) {
    put("model", "name", text(flavor->model));
    put("model", "flavor", text(flavor->flavor));
  }
  if (job.fp8 != "none")
    put("model", "converters",
        job.fp8_recipe == "mxfp8" ? "[\"quantize.linear.mx\"]" : "[\"quantize.linear.float8\"]");
  else
    put("model", "converters", "[]");
  // [TT-pp]: a pipeline pass runs local_batch_size / pipeline_parallel_microbatch_size
  // micro-batches; without a pipeline the global batch over local x dp is the gradient
  // accumulation.
  const int local = l.pp > 1 ? job.micro_batch_size * job.microbatches : job.micro_batch_size;
  put("training", "local_batch_size", std::to_string(local));
  put("training", "global_batch_size", std::to_string(job.global_batch_size()));
  put("training", "seq_len", std::to_string(job.seq_length));
  put("training", sharded ? "mixed_precision_param" : "dtype", text("bfloat16"));
  // HSDP (training.fsdp_shard_group): replicas of the shard group; restated keeps only
  // copies dividing dp.
  put("parallelism", "data_parallel_replicate_degree", std::to_string(job.shard_copies));
  put("parallelism", "data_parallel_shard_degree", std::to_string(job.dp / job.shard_copies));
  put("parallelism", "tensor_parallel_degree", std::to_string(job.tp));
  put("parallelism", "enable_async_tensor_parallel", toml_bool(job.tp > 1 && job.tp_comm_overlap));
  put("parallelism", "pipeline_parallel_degree", std::to_string(l.pp));
  // reshard_after_forward=False (restated keeps it at zero_stage 3 only, pp 1).
  if (!job.reshard_after_forward) put("parallelism", "fsdp_reshard_after_forward", text("never"));
  if (l.pp > 1) {
    put("parallelism", "pipeline_parallel_schedule", text(torchtitan_schedule_name(schedule)));
    put("parallelism", "pipeline_parallel_microbatch_size", std::to_string(job.micro_batch_size));
    put("parallelism", "module_fqns_per_model_part", torchtitan_module_fqns(l.partition));
  }
  put("parallelism", "context_parallel_degree", std::to_string(job.cp));
  if (job.shape && job.shape->is_moe()) {
    put("parallelism", "expert_parallel_degree", std::to_string(job.ep));
    put("parallelism", "expert_tensor_parallel_degree", std::to_string(job.etp));
    put("parallelism", "expert_parallel_comm_backend", text(job.deepep ? "deepep" : "standard"));
  }
  put("activation_checkpoint", "mode", text(x.mode));
  if (!x.option.empty()) put("activation_checkpoint", "selective_ac_option", text(x.option));
  put("compile", "enable", toml_bool(job.fused_kernels));
  put("compile", "components", "[\"model\", \"loss\"]");
  // The converters' sections are left at their defaults but for rowwise: float8's
  // recipe_name unset is torchao's tensorwise recipe, mx's is mxfp8_cublas.
  if (job.fp8 != "none" && job.fp8_recipe == "rowwise")
    put("quantize.linear.float8", "recipe_name", text("rowwise"));
  return keys;
}

std::string torchtitan_job_toml(const TorchTitanExport& x, const ExportJob& job,
                                std::string_view schedule) {
  std::ostringstream out;
  out << "# torchtitan job TOML (its form up to v0.2.2) for " << job.devices
      << " GPUs: NGPU=" << job.devices << " CONFIG_FILE=this.toml ./run_train.sh\n";
  out << "# " << x.expressed.recompute.size() << " decoder layers; global batch "
      << job.global_batch_size() << " = local_batch_size x data_parallel_shard_degree"
      << (x.expressed.pp > 1 ? "" : " x gradient accumulation") << "\n";
  std::string section;
  for (const TorchTitanKey& k : torchtitan_job_keys(x, job, schedule)) {
    if (k.section != section) {
      out << (section.empty() ? "" : "\n") << "[" << k.section << "]\n";
      section = k.section;
    }
    out << k.key << " = " << k.literal << "\n";
  }
  return out.str();
}

}  // namespace bmpipe
