#pragma once
/// \file
/// The parallel mesh of a job: how its devices split into tensor (tp), context (cp), expert
/// (ep, etp), data (dp, edp) and pipeline (pp) parallel groups, in one type. Every rule the
/// sizes must obey, every size derived from them and every question of where a group's
/// devices lie is answered here, so the config's checks (experiment/field_checks.cpp), the
/// layout search (planner/layout_search.cpp), the cost settings and the run info read one
/// answer instead of deriving their own.
///
/// Rank order: Megatron-Core's RankGenerator (NVIDIA/Megatron-LM
/// d98e8a64ddf34856e74b24714e3bedb2f5a39553, megatron/core/parallel_state.py, class
/// RankGenerator and initialize_model_parallel's decoder_rank_generator and
/// expert_decoder_rank_generator). Ranks are numbered with the first name of the order
/// fastest:
///   dense layers  "tp-cp-ep-dp-pp" with ep = 1, i.e. tp, then cp, then dp, then pp;
///   expert layers "tp-ep-dp-pp" with tp = etp and dp = edp (cp = 1 in that generator).
/// So a group of the order's k-th name has its members `stride` = (product of the sizes
/// before it) devices apart, and all of them lie in a block of `span` = stride x size
/// consecutive devices. Both generators run pp slowest, so one pipeline rank holds the
/// devices/pp consecutive devices tp x cp x dp = etp x ep x edp (Megatron-Core's MoE
/// parallel folding).
///
/// The type is a handful of ints: building it and asking it allocate nothing, so the layout
/// search may build one per candidate. A rule that fails is a MeshViolation, which renders
/// its text only when asked.

#include <cstdint>
#include <optional>
#include <string>

namespace bmpipe {

/// The sizes a job states: training.tp, cp, ep, etp, pp and, optionally, dp.
struct MeshSizes {
  int tp = 1;
  int cp = 1;
  int ep = 1;
  int etp = 1;
  int pp = 1;
  std::optional<int> dp;  ///< not given: devices / (pp * tp * cp)
};

/// The rules of the mesh, in the order check_config applies them.
enum class MeshRule {
  pp_divides_devices,         ///< training.pp: pp divides the devices
  tp_divides_devices,         ///< training.tp: pp x tp divides the devices
  cp_divides_devices,         ///< training.cp: pp x tp x cp divides the devices
  dp_fills_devices,           ///< training.dp: pp x tp x cp x dp is the devices
  tp_divides_heads,           ///< training.tp: tp divides the attention heads
  tp_divides_ffn,             ///< training.tp: tp divides ffn_hidden_size
  expert_fold_fits_stage,     ///< training.ep: etp x ep at most a pipeline rank's devices
  expert_fold_divides_stage,  ///< training.ep: etp x ep divides a pipeline rank's devices
};

/// The first rule a mesh breaks, with the numbers its message needs. No text is kept: it is
/// written when asked, by message() (check_config's wording, said against `key`) or
/// layout_message() (the layout search's shorter wording, which names the sizes the search
/// has chosen so far). Both wordings are pinned by tests and by the outputs of `bmpipe`; they
/// are written only in parallel_mesh.cpp.
struct MeshViolation {
  MeshRule rule;
  const char* key;  ///< the config key the rule is said against ("training.cp")
  std::int64_t devices = 0;
  MeshSizes sizes;
  std::int64_t count = 0;  ///< tp_divides_heads: the heads; tp_divides_ffn: the FFN size
  /// The devices are training.devices, part of the cluster: the message says so.
  bool job_devices = false;

  std::string message() const;
  std::string layout_message() const;
};

/// The groups of the mesh. dp_cp is the group dense gradients reduce over (dp x cp ranks,
/// Megatron's data-parallel group with context parallelism), tp-strided.
enum class MeshGroup { tp, cp, dp, dp_cp, pp, etp, ep, edp };

class ParallelMesh {
 public:
  /// The first of the rules on the devices (pp, pp x tp, pp x tp x cp, then a given dp)
  /// that `sizes` break on `devices` devices; nothing when they hold. check_config says
  /// the violation against its key; the layout search skips the candidate.
  static std::optional<MeshViolation> device_violation(const MeshSizes& sizes,
                                                       std::int64_t devices);
  /// tp against a model's attention heads, then its ffn_hidden_size.
  static std::optional<MeshViolation> model_violation(const MeshSizes& sizes, int heads,
                                                      int ffn_hidden_size);

  /// dp as given, or devices / (pp x tp x cp) (Megatron's data_parallel_size = world /
  /// model_size), in 64 bits for a cluster not yet held to its bounds.
  static std::int64_t data_parallel(const MeshSizes& sizes, std::int64_t devices) {
    return sizes.dp ? *sizes.dp
                    : devices / (static_cast<std::int64_t>(sizes.pp) * sizes.tp * sizes.cp);
  }

  /// The mesh of `sizes` on `devices` devices whose scale-up domain (the node unless
  /// cluster.scale_up_domain is larger: ClusterSpec::domain) holds `domain` of them. The
  /// sizes are taken as they are: a mesh is asked about sizes device_violation accepted.
  ParallelMesh(const MeshSizes& sizes, int devices, int domain)
      : tp_(sizes.tp),
        cp_(sizes.cp),
        ep_(sizes.ep),
        etp_(sizes.etp),
        pp_(sizes.pp),
        dp_(static_cast<int>(data_parallel(sizes, devices))),
        domain_(domain) {}

  int tp() const { return tp_; }
  int cp() const { return cp_; }
  int ep() const { return ep_; }
  int etp() const { return etp_; }
  int pp() const { return pp_; }
  /// Data-parallel replicas: as given, or devices / (pp x tp x cp).
  int dp() const { return dp_; }
  /// Devices of one pipeline rank: tp x cp x dp (= etp x ep x edp).
  int stage_devices() const { return tp_ * cp_ * dp_; }
  /// Every device of the mesh: pp x tp x cp x dp.
  int devices() const { return pp_ * stage_devices(); }
  /// Devices that hold one replica of the model: tp x cp x pp (Megatron's model_size).
  int model_parallel() const { return tp_ * cp_ * pp_; }
  /// Expert data-parallel replicas: the stage's tp x cp x dp devices over etp x ep
  /// (Megatron's expert_data_parallel_size = world / (etp x ep x pp)); at least 1.
  int edp() const {
    const int e = stage_devices() / (ep_ * etp_);
    return e > 1 ? e : 1;
  }
  /// Members of a group.
  int size(MeshGroup g) const;
  /// Devices between a group's neighbouring members (its stride in the rank order).
  int stride(MeshGroup g) const;
  /// The consecutive devices a group's members lie in: stride x size, the product of its
  /// sizes and those before it in the order ("tp-cp-dp-pp"; experts "etp-ep-edp-pp").
  int span(MeshGroup g) const { return stride(g) * size(g); }
  /// Whether a group's members can leave the scale-up domain: when its span is larger than
  /// the domain (a group is laid on consecutive devices from a multiple of its span, so
  /// one no larger than the domain stays inside it). Its collectives then run on the NIC.
  bool crosses_domain(MeshGroup g) const { return span(g) > domain_; }
  /// Whether the group of pipeline rank `rank`'s first device (tp rank 0, cp rank 0, ...)
  /// holds devices of two domains: its first device and its last, (size - 1) x stride
  /// further, fall in different domains.
  bool crosses_domain_at(MeshGroup g, int rank) const {
    const long long first = static_cast<long long>(rank) * stage_devices();
    const long long last = first + static_cast<long long>(size(g) - 1) * stride(g);
    return first / domain_ != last / domain_;
  }
  /// A group's members in one scale-up domain, for the hierarchical collectives
  /// (sim/cost/collectives.hpp): all of them when the group stays inside a domain
  /// (!crosses_domain), else the members its stride fits in a domain: domain / stride, at
  /// least 1 (a dp group of tp-strided ranks over 8-GPU nodes at tp 2: 4 a node).
  int members_per_domain(MeshGroup g) const {
    return crosses_domain(g) ? spread_per_domain(g) : size(g);
  }
  /// The same for the group of pipeline rank `rank`'s first device (crosses_domain_at).
  int members_per_domain_at(MeshGroup g, int rank) const {
    return crosses_domain_at(g, rank) ? spread_per_domain(g) : size(g);
  }
  /// Hybrid sharding (training.fsdp_shard_group): a group's members cut into copies of
  /// `shard` consecutive members each (Megatron-Core's intra-partial data-parallel groups:
  /// members [i shard, (i + 1) shard) of the group, NVIDIA/Megatron-LM d98e8a64,
  /// megatron/core/parallel_state.py, initialize_model_parallel), and the groups across the
  /// copies (its inter-instance groups: one member of each copy, shard x stride devices
  /// apart). A part's size and its members in one scale-up domain, for pipeline rank
  /// `rank`'s first device (as members_per_domain_at), or the mesh's (rank < 0: as
  /// members_per_domain). shard = size(g): the shard part is the group, the replica part one.
  struct Part {
    int size = 1;
    int per_domain = 1;
  };
  Part shard_part(MeshGroup g, int shard, int rank) const {
    return strided_part(shard, stride(g), rank);
  }
  Part replica_part(MeshGroup g, int shard, int rank) const {
    return strided_part(size(g) / shard, stride(g) * shard, rank);
  }
  /// The ep ranks one domain holds, as DeepEP counts them: a domain's devices over etp,
  /// at least 1 and at most ep.
  int ep_per_domain() const {
    const int in_domain = domain_ / etp_ > 1 ? domain_ / etp_ : 1;
    return ep_ < in_domain ? ep_ : in_domain;
  }
  /// The rules of the experts' fold (Megatron-Core's MoE parallel folding): etp x ep
  /// ranks fit in and divide a pipeline rank's tp x cp x dp devices.
  std::optional<MeshViolation> expert_violation() const;

 private:
  /// Members per domain of a group that leaves it: domain / stride, within 1..size.
  int spread_per_domain(MeshGroup g) const {
    const int per = domain_ / stride(g);
    return per < 1 ? 1 : (per > size(g) ? size(g) : per);
  }

  /// `size` members `stride` devices apart from pipeline rank `rank`'s first device (rank <
  /// 0: laid from a multiple of their span), and how many of them share a domain.
  Part strided_part(int size, int stride, int rank) const {
    const long long first = rank < 0 ? 0 : static_cast<long long>(rank) * stage_devices();
    const long long last = first + static_cast<long long>(size - 1) * stride;
    const bool crosses = rank < 0 ? static_cast<long long>(stride) * size > domain_
                                  : first / domain_ != last / domain_;
    const int per = domain_ / stride;
    return {size, !crosses ? size : per < 1 ? 1 : (per > size ? size : per)};
  }

  int tp_, cp_, ep_, etp_, pp_, dp_, domain_;
};

/// Context parallelism's load-balanced causal split (Megatron / TransformerEngine) cuts each
/// sequence into 2 cp equal chunks: 2 cp must divide the sequence. What is wrong, or nothing.
std::optional<std::string> cp_split_problem(long long seq_length, int cp);

/// Ulysses (cp_comm_type a2a) trades the sequence split for a head split: cp must divide a tp
/// rank's heads. What is wrong, or nothing.
std::optional<std::string> ulysses_heads_problem(int heads, int tp, int cp);

}  // namespace bmpipe
