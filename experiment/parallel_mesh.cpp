#include "experiment/parallel_mesh.hpp"

namespace bmpipe {

namespace {

std::string str(std::int64_t v) {
  return std::to_string(v);
}

}  // namespace

std::optional<MeshViolation> ParallelMesh::device_violation(const MeshSizes& s,
                                                            std::int64_t devices) {
  const std::int64_t pp_tp = static_cast<std::int64_t>(s.pp) * s.tp;
  // Context parallelism takes its cp ranks out of what would be dp.
  const std::int64_t pp_tp_cp = pp_tp * s.cp;
  MeshViolation v{MeshRule::pp_divides_devices, "training.pp", devices, s, 0};
  if (devices % s.pp != 0) return v;
  if (devices % pp_tp != 0) {
    v.rule = MeshRule::tp_divides_devices, v.key = "training.tp";
    return v;
  }
  if (s.cp > 1 && devices % pp_tp_cp != 0) {
    v.rule = MeshRule::cp_divides_devices, v.key = "training.cp";
    return v;
  }
  if (s.dp && pp_tp_cp * *s.dp != devices) {
    v.rule = MeshRule::dp_fills_devices, v.key = "training.dp";
    return v;
  }
  return std::nullopt;
}

std::optional<MeshViolation> ParallelMesh::model_violation(const MeshSizes& s, int heads,
                                                           int ffn_hidden_size) {
  if (heads % s.tp != 0)
    return MeshViolation{MeshRule::tp_divides_heads, "training.tp", 0, s, heads};
  if (ffn_hidden_size % s.tp != 0)
    return MeshViolation{MeshRule::tp_divides_ffn, "training.tp", 0, s, ffn_hidden_size};
  return std::nullopt;
}

std::optional<MeshViolation> ParallelMesh::expert_violation() const {
  // The stage's tp x cp x dp devices: the messages call them tp x dp, as Megatron-Core's
  // folding does (etp x ep x edp = tp x dp, cp folded into dp).
  const std::int64_t stage = stage_devices();
  const std::int64_t folded = static_cast<std::int64_t>(etp_) * ep_;
  if (folded <= stage && stage % folded == 0) return std::nullopt;
  MeshSizes s;
  s.tp = tp_, s.cp = cp_, s.ep = ep_, s.etp = etp_, s.pp = pp_, s.dp = dp_;
  return MeshViolation{
      folded > stage ? MeshRule::expert_fold_fits_stage : MeshRule::expert_fold_divides_stage,
      "training.ep", static_cast<std::int64_t>(pp_) * stage, s, 0};
}

std::string MeshViolation::message() const {
  const MeshSizes& s = sizes;
  const std::int64_t pp_tp = static_cast<std::int64_t>(s.pp) * s.tp;
  const std::int64_t pp_tp_cp = pp_tp * s.cp;
  switch (rule) {
    case MeshRule::pp_divides_devices:
      return "pp = " + str(s.pp) + " does not divide the " + str(devices) + " devices of " +
             (job_devices ? "training.devices" : "the cluster");
    case MeshRule::tp_divides_devices:
      return "pp * tp = " + str(pp_tp) + " does not divide the " + str(devices) + " devices";
    case MeshRule::cp_divides_devices:
      return "tp * pp * cp = " + str(s.tp) + " * " + str(s.pp) + " * " + str(s.cp) + " = " +
             str(pp_tp_cp) + " does not divide the " + str(devices) + " devices";
    case MeshRule::dp_fills_devices: {
      // pp * tp * cp divides the devices (the rule before), so one dp always fits; a pp
      // may too.
      const std::int64_t dp = s.dp.value_or(0);
      const std::int64_t dp_fit = devices / pp_tp_cp;
      const std::int64_t tp_dp = static_cast<std::int64_t>(s.tp) * s.cp * dp;
      std::string fix = ": use dp " + str(dp_fit) + " (--dp " + str(dp_fit) + ")";
      if (tp_dp > 0 && devices % tp_dp == 0)
        fix += ", or pp " + str(devices / tp_dp) + " (--pp " + str(devices / tp_dp) + ")";
      return std::string(s.cp > 1 ? "pp * tp * cp * dp = " : "pp * tp * dp = ") +
             str(pp_tp_cp * dp) +
             (job_devices ? " but training.devices is " : " but the cluster has ") + str(devices) +
             " devices" + fix;
    }
    case MeshRule::tp_divides_heads:
      return "tp = " + str(s.tp) + " does not divide the " + str(count) + " attention heads";
    case MeshRule::tp_divides_ffn:
      return "tp = " + str(s.tp) + " does not divide ffn_hidden_size = " + str(count);
    case MeshRule::expert_fold_fits_stage:
    case MeshRule::expert_fold_divides_stage: {
      const std::int64_t folded = static_cast<std::int64_t>(s.etp) * s.ep;
      const std::int64_t stage = static_cast<std::int64_t>(s.tp) * s.cp * s.dp.value_or(1);
      if (rule == MeshRule::expert_fold_fits_stage)
        return "etp x ep = " + str(folded) + " is more than the tp x dp = " + str(stage) +
               " devices of a pipeline stage: the MoE layers' experts are spread over the "
               "stage's own devices (use a smaller ep or etp, or more dp)";
      return "etp x ep = " + str(folded) + " does not divide the tp x dp = " + str(stage) +
             " devices of a pipeline stage, which the MoE layers share";
    }
  }
  return {};
}

std::string MeshViolation::layout_message() const {
  const MeshSizes& s = sizes;
  switch (rule) {
    case MeshRule::pp_divides_devices:
    case MeshRule::tp_divides_devices:
      // The search tries tp alone first (pp 1), then each pp with it.
      if (s.pp == 1) return "tp " + str(s.tp) + " does not divide the " + str(devices) + " devices";
      return "tp x pp = " + str(static_cast<std::int64_t>(s.tp) * s.pp) + " does not divide the " +
             str(devices) + " devices";
    case MeshRule::cp_divides_devices:
      return "tp x pp x cp = " + str(static_cast<std::int64_t>(s.tp) * s.pp * s.cp) +
             " does not divide the " + str(devices) + " devices";
    case MeshRule::tp_divides_heads:
      return "tp " + str(s.tp) + " does not divide the " + str(count) + " attention heads";
    case MeshRule::tp_divides_ffn:
      return "tp " + str(s.tp) + " does not divide ffn_hidden_size " + str(count);
    case MeshRule::dp_fills_devices:
    case MeshRule::expert_fold_fits_stage:
    case MeshRule::expert_fold_divides_stage:
      break;
  }
  return message();
}

int ParallelMesh::size(MeshGroup g) const {
  switch (g) {
    case MeshGroup::tp:
      return tp_;
    case MeshGroup::cp:
      return cp_;
    case MeshGroup::dp:
      return dp_;
    case MeshGroup::dp_cp:
      return dp_ * cp_;
    case MeshGroup::pp:
      return pp_;
    case MeshGroup::etp:
      return etp_;
    case MeshGroup::ep:
      return ep_;
    case MeshGroup::edp:
      return edp();
  }
  return 1;
}

int ParallelMesh::stride(MeshGroup g) const {
  switch (g) {
    // Dense order "tp-cp-dp-pp".
    case MeshGroup::tp:
      return 1;
    case MeshGroup::cp:
    case MeshGroup::dp_cp:  // cp ranks then dp ranks, one tp group apart
      return tp_;
    case MeshGroup::dp:
      return tp_ * cp_;
    case MeshGroup::pp:
      return stage_devices();
    // Expert order "etp-ep-edp-pp".
    case MeshGroup::etp:
      return 1;
    case MeshGroup::ep:
      return etp_;
    case MeshGroup::edp:
      return etp_ * ep_;
  }
  return 1;
}

std::optional<std::string> cp_split_problem(long long seq_length, int cp) {
  if (cp <= 1 || seq_length % (2LL * cp) == 0) return std::nullopt;
  return "2 cp = " + std::to_string(2 * cp) + " does not divide seq_length " +
         std::to_string(seq_length) +
         ": the load-balanced causal split cuts each sequence into 2 cp equal chunks";
}

std::optional<std::string> ulysses_heads_problem(int heads, int tp, int cp) {
  if (cp <= 1 || (heads / tp) % cp == 0) return std::nullopt;
  return "a2a (Ulysses) splits each tp rank's " + std::to_string(heads / tp) +
         " attention heads over cp = " + std::to_string(cp) + ", which does not divide them";
}

}  // namespace bmpipe
