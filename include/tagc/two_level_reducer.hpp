#pragma once
// defines: tagc::TwoLevelReducer<NodeReducer, CrossReducer> — a reduce-scatter in two
//          levels: plainly among the ranks of a node, compressed among the nodes.
//
// Why: every rank of a flat compressed reduce-scatter keeps its own top entries, so the
// union of kept positions (index counters, packed slots, sketch load) grows with the
// number of ranks. Links inside a node are fast and links between nodes are slow, so
// the node first sums its ranks' gradients with a plain reduce-scatter and only the
// exchange between nodes is compressed: the union then grows with the nodes, not the
// ranks, and the error-feedback residual covers a node's slice (1/K of the buffer).
// This is the hybrid the TAGC paper leaves as future work, and what ZeRO++'s qgZ and
// FSDP2's HSDP do.
//
// Layout (W = M nodes x K ranks per node, S = ceil(length / W), the flat shard size;
// node m's region R_m = flat shards mK .. mK + K - 1, K x S elements):
//   1. permute: the gradient, padded to W x S, is rearranged into K blocks of M x S
//      elements, block l holding one piece of S elements of every region, in node
//      order. Which piece is the lane layout's choice:
//        shards       piece (m, l) = flat shard mK + l, whole;
//        interleaved  piece (m, l) = the elements of R_m at offsets l, K + l, 2K + l, ...
//   2. node:  NodeReducer reduce-scatters the W x S buffer among the node's K ranks
//      (sum): local rank l receives block l summed over its node (its "slice");
//   3. check: every rank counts NaN/Inf in its slice and whether its sizes were right;
//      two 16-byte all-reduces (cross, then node, staged in Exec memory: NCCL takes
//      device buffers only) give every rank the world's verdict
//      before any residual changes;
//   4. cross: CrossReducer reduce-scatters the slice among the M ranks with local rank l
//      (sum): node m receives piece (m, l) summed over the world;
//   5. shards: that piece is this rank's own flat shard mK + l. interleaved: the node's
//      K ranks all-gather their pieces (R_m) and each keeps its shard of it;
//   6. mean: the shard is divided by W in float, as the flat reducers do.
// So rank r ends with exactly the flat reduce-scatter's shard r; with an exact cross
// reducer (plain, or packed values at theta = 0) and exactly representable sums the two
// agree bit for bit (tests/test_two_level.cpp), whatever the node shape and layout.
//
// Why two layouts: a compressed cross stage selects within one slice, k / K of the
// node's k entries per lane. With whole shards in a slice, the hot shard (the embedding
// rows of frequent tokens: issue 33) lies in one lane, which may keep only k / K of its
// large entries while the other lanes keep small ones, and that lane's exchange carries
// the hot shard's union. Interleaved, every lane holds every K-th element of every
// region, so each lane's top k / K is the node's top k up to sampling, and the lanes
// send alike. It costs one all-gather of S (K - 1) floats per rank inside the node
// (step 5; the node's reduce-scatter sends S (K - 1) M). A plain cross stage selects
// nothing and keeps whole shards (lane_layout::automatic).
//
// The cross stage may instead all-reduce the slice (`cross_topology` replicated: what
// HSDP does when parameters are replicated across nodes and sharded inside them, and the
// only form in which a routed index can bound what every rank receives,
// reducer_arguments::union_bound): step 4 then gives every node the whole slice's sums
// and each rank keeps piece (m, l) of it; the shard is the same, the bytes are the
// all-reduce's.
//
// NodeReducer is normally PlainReducer<float | bfloat16, Exec> (or an AnyReducer built
// as plain); CrossReducer any reducer with the Reducer contract (Reducer, AnyReducer).
// Both are given reduce_op::sum; the mean is taken once, at the end.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <thrust/copy.h>

#include "comm/communicator.hpp"
#include "comm/two_level.hpp"
#include "core/status.hpp"
#include "detail/launch.hpp"
#include "reducer/unit_label.hpp"
#include "stage/arguments.hpp"
#include "stats.hpp"

TAGC_BEGIN_NAMESPACE

namespace detail {
// The flat position of element j of piece (m, l) (W x S padded: length or beyond is padding).
TAGC_HOST_DEVICE inline std::size_t piece_source(std::size_t m, std::size_t l, std::size_t j, std::size_t shard,
                                                 std::size_t ranks_per_node, bool interleaved) {
  return interleaved ? (m * shard + j) * ranks_per_node + l : (m * ranks_per_node + l) * shard + j;
}
// Device path of step 1: element i of the node-major buffer from the flat gradient.
struct node_major_gather {
  const float* grad;
  float* out;
  std::size_t length, shard;
  std::size_t nodes, ranks_per_node;
  bool interleaved;
  TAGC_HOST_DEVICE void operator()(std::size_t i) const {
    const std::size_t slot = i / shard, j = i - slot * shard;  // slot = l * M + m
    const std::size_t l = slot / nodes, m = slot - l * nodes;
    const std::size_t src = piece_source(m, l, j, shard, ranks_per_node, interleaved);
    out[i] = src < length ? grad[src] : 0.0f;
  }
};
// Step 5, interleaved: element e of local rank l's shard from the node's gathered pieces
// ([K][S]: piece p holds region offsets p, K + p, ...).
struct shard_from_pieces {
  const float* pieces;
  float* shard_out;
  std::size_t shard, ranks_per_node, local_rank;
  TAGC_HOST_DEVICE void operator()(std::size_t e) const {
    const std::size_t offset = local_rank * shard + e;  // in the node's region
    shard_out[e] = pieces[(offset % ranks_per_node) * shard + offset / ranks_per_node];
  }
};
struct count_nonfinite {
  const float* x;
  TAGC_HOST_DEVICE unsigned long long operator()(std::size_t i) const {
    std::uint32_t b;
    std::memcpy(&b, x + i, sizeof b);
    return (b & 0x7f800000u) == 0x7f800000u ? 1ull : 0ull;
  }
};
struct scale_in_place {
  float* x;
  float s;
  TAGC_HOST_DEVICE void operator()(std::size_t i) const { x[i] *= s; }
};
}  // namespace detail

// Which elements a lane (the ranks with one local rank) reduces across nodes; see the
// header. automatic: interleaved when the cross stage compresses, shards when it is plain.
enum class lane_layout : std::uint64_t { shards = 0, interleaved = 1, automatic = 2 };

template <class NodeReducer, class CrossReducer>
class TwoLevelReducer {
 public:
  using exec_space = typename CrossReducer::exec_space;
  using node_reducer = NodeReducer;
  using cross_reducer = CrossReducer;
  template <class T> using vector = typename exec_space::template vector<T>;

  static constexpr std::uint64_t state_magic = 0x74616763'32'6c76ull;  // "tagc" "2" "lv"
  // 2: the lane layout in the header (version 1 states are whole-shard lanes).
  static constexpr std::uint64_t state_version = 2;

  TwoLevelReducer() = default;
  // Stages that must be made before they are initialised (AnyReducer: build_reducer first).
  TwoLevelReducer(NodeReducer node, CrossReducer cross) : node_(std::move(node)), cross_(std::move(cross)) {}

  // `args` describes the whole job as for a flat reducer (length, world, rank, op,
  // sharded topology, theta and the knobs the cross reducer takes); `shape` splits the
  // world into nodes; `layout` picks the lanes' elements, `cross_topology` whether the
  // cross stage reduce-scatters or all-reduces the slice (see the header). Refused: a
  // shape that does not multiply to the world, a replicated topology, an unknown layout,
  // and whatever the two reducers refuse for their level.
  status initialize(const reducer_arguments& args, node_shape shape, exec_space exec = {},
                    lane_layout layout = lane_layout::automatic, topology cross_topology = topology::sharded) {
    unit_.assign(args.name);
    if (args.topo != topology::sharded)
      return annotate({errc::invalid_argument, "a two-level reducer reduce-scatters (topology::sharded); "
                                               "for all-reduce use a flat reducer"});
    if (shape.nodes < 1 || shape.ranks_per_node < 1 || shape.world() != args.world_size)
      return annotate({errc::invalid_argument, "node shape " + std::to_string(shape.nodes) + " x " +
                                                   std::to_string(shape.ranks_per_node) +
                                                   " does not make the world size " + std::to_string(args.world_size)});
    if (layout != lane_layout::shards && layout != lane_layout::interleaved && layout != lane_layout::automatic)
      return annotate({errc::invalid_argument, "unknown lane layout " + std::to_string(std::uint64_t(layout))});
    if (args.rank < 0 || args.rank >= args.world_size)
      return annotate({errc::invalid_argument, "rank " + std::to_string(args.rank) + " outside [0, " +
                                                   std::to_string(args.world_size) + ")"});
    args_ = args;
    args_.name = {};
    shape_ = shape;
    exec_ = exec;
    const std::size_t world = std::size_t(args.world_size);
    shard_ = (args.length + world - 1) / world;
    slice_len_ = shard_ * std::size_t(shape.nodes);

    reducer_arguments node = args;
    node.length = shard_ * world;
    node.world_size = shape.ranks_per_node;
    node.rank = shape.local_rank_of(args.rank);
    node.op = reduce_op::sum;
    node.union_bound = 0.0;  // the cross stage's knob
    TAGC_TRY(node_.initialize(node, exec));
    reducer_arguments cross = args;
    cross.length = slice_len_;
    cross.world_size = shape.nodes;
    cross.rank = shape.node_of(args.rank);
    cross.op = reduce_op::sum;
    cross.topo = cross_topology;
    TAGC_TRY(cross_.initialize(cross, exec));
    cross_replicated_ = cross_topology != topology::sharded;
    const std::size_t cross_out = cross_replicated_ ? slice_len_ : shard_;
    if (node_.output_size() != slice_len_ || cross_.output_size() != cross_out)
      return annotate({errc::internal, "two-level layout: node stage gives " + std::to_string(node_.output_size()) +
                                           " elements (want " + std::to_string(slice_len_) + "), cross stage " +
                                           std::to_string(cross_.output_size()) + " (want " + std::to_string(cross_out) +
                                           ")"});
    if (layout == lane_layout::automatic) layout = cross_.compressed() ? lane_layout::interleaved : lane_layout::shards;
    layout_ = layout;
    node_major_.assign(node.length, 0.0f);  // padding is written once, here
    slice_.assign(slice_len_, 0.0f);
    slice_sums_.assign(cross_replicated_ ? slice_len_ : 0, 0.0f);
    if (layout_ == lane_layout::interleaved) {
      piece_.assign(shard_, 0.0f);
      region_.assign(shard_ * std::size_t(shape.ranks_per_node), 0.0f);
    } else {
      piece_ = {};
      region_ = {};
    }
    verdict_.assign(6, 0);
    TAGC_TRY(nonfinite_.template reserve<unsigned long long>(exec, slice_len_, detail::count_nonfinite{nullptr}));
    initialized_ = true;
    return {};
  }

  // Rank r's flat shard: output_size() elements, as a flat reduce-scatter gives it.
  std::size_t output_size() const { return shard_; }
  node_shape shape() const { return shape_; }
  lane_layout layout() const { return layout_; }
  topology cross_topology() const { return cross_replicated_ ? topology::replicated : topology::sharded; }
  // The flat position of element i of this rank's slice (what the cross stage and its
  // residual hold), arguments().length or more for padding: tests and tools map the
  // residual back.
  std::size_t slice_position(std::size_t i) const {
    const std::size_t m = i / shard_;
    return detail::piece_source(m, std::size_t(shape_.local_rank_of(args_.rank)), i - m * shard_, shard_,
                                std::size_t(shape_.ranks_per_node), layout_ == lane_layout::interleaved);
  }
  const reducer_arguments& arguments() const { return args_; }
  std::string_view name() const { return unit_.name(); }
  NodeReducer& node_stage() { return node_; }
  CrossReducer& cross_stage() { return cross_; }
  const CrossReducer& cross_stage() const { return cross_; }
  // Buffers of this level (the node-major gradient, the slice, interleaved: the piece and
  // the gathered region, the verdict and the NaN count's workspace), beside the stages' own.
  std::size_t buffer_bytes() const {
    return detail::buffer_bytes(node_major_) + detail::buffer_bytes(slice_) + detail::buffer_bytes(slice_sums_) +
           detail::buffer_bytes(piece_) +
           detail::buffer_bytes(region_) + detail::buffer_bytes(verdict_) + nonfinite_.workspace_bytes();
  }

  // stats (optional): the cross stage's statistics (what crosses nodes), with the node
  // stage's bytes in reduce_stats::intranode_bytes.
  template <communicator C>
  status reduce_scatter(two_level_communicator<C>& comm, std::span<const float> grad, std::span<float> shard,
                        reduce_stats* stats = nullptr) {
    return reduce_scatter(comm.node, comm.cross, grad, shard, stats);
  }

  template <communicator NodeComm, communicator CrossComm>
  status reduce_scatter(NodeComm& node, CrossComm& cross, std::span<const float> grad, std::span<float> shard,
                        reduce_stats* stats = nullptr) {
    if (!initialized_) return annotate({errc::invalid_argument, "two-level reducer used before initialize()"});
    if (node.size() != shape_.ranks_per_node || cross.size() != shape_.nodes ||
        node.rank() != shape_.local_rank_of(args_.rank) || cross.rank() != shape_.node_of(args_.rank))
      return annotate({errc::invalid_argument,
                       "communicators are local rank " + std::to_string(node.rank()) + " of " +
                           std::to_string(node.size()) + " and node " + std::to_string(cross.rank()) + " of " +
                           std::to_string(cross.size()) + "; the reducer was planned for rank " +
                           std::to_string(args_.rank) + " of " + std::to_string(shape_.nodes) + " nodes x " +
                           std::to_string(shape_.ranks_per_node)});
    // A rank with wrong sizes still takes part in the node collective (on this
    // reducer's own buffers) so that every rank reaches the shared verdict below.
    const bool sizes_ok = grad.size() == args_.length && shard.size() == shard_;
    if (sizes_ok) node_major(grad);
    reduce_stats node_stats;
    TAGC_TRY(node_.reduce_scatter(node, std::span<const float>(detail::raw(node_major_), node_major_.size()),
                                  std::span<float>(detail::raw(slice_), slice_len_), &node_stats));
    const detail::launcher<exec_space> launch{exec_};
    unsigned long long nonfinite = 0;
    TAGC_TRY(annotate(nonfinite_.sum(launch, slice_len_, detail::count_nonfinite{detail::raw(slice_)}, nonfinite)));
    std::array<std::int64_t, 2> mine{std::int64_t(nonfinite), sizes_ok ? 0 : 1}, all{};
    // Staged in this reducer's Exec memory (NCCL takes device buffers only):
    // [this rank's 2, their cross sums 2, everyone's 2].
    std::int64_t* v = detail::raw(verdict_);
    TAGC_TRY(annotate(exec_.copy_from_host(mine.data(), v, 2)));
    TAGC_TRY(annotate(cross.all_reduce(std::span<const std::int64_t>(v, 2), std::span<std::int64_t>(v + 2, 2))));
    TAGC_TRY(annotate(node.all_reduce(std::span<const std::int64_t>(v + 2, 2), std::span<std::int64_t>(v + 4, 2))));
    TAGC_TRY(annotate(exec_.copy_to_host(v + 4, all.data(), 2)));
    if (all[1] != 0)
      return annotate({errc::size_mismatch,
                       std::to_string(all[1]) + " rank(s) passed a gradient or shard of the wrong size (expected " +
                           std::to_string(args_.length) + " and " + std::to_string(shard_) + " elements; this rank " +
                           std::to_string(grad.size()) + " and " + std::to_string(shard.size()) + ")"});
    if (all[0] != 0)
      return annotate({errc::non_finite, std::to_string(all[0]) +
                                             " NaN/Inf entries in the nodes' summed gradients (a NaN/Inf gradient on "
                                             "some rank, or a node sum that overflowed); nothing was changed"});
    reduce_stats cross_stats;
    const bool interleaved = layout_ == lane_layout::interleaved;
    const std::span<float> piece = interleaved ? std::span<float>(detail::raw(piece_), shard_) : shard;
    if (cross_replicated_) {  // every node the slice's sums; this rank's piece is node m's
      float* sums = detail::raw(slice_sums_);
      TAGC_TRY(cross_.all_reduce(cross, std::span<const float>(detail::raw(slice_), slice_len_),
                                 std::span<float>(sums, slice_len_), stats ? &cross_stats : nullptr));
      const float* mine = sums + std::size_t(shape_.node_of(args_.rank)) * shard_;
      thrust::copy_n(exec_.policy(), mine, shard_, piece.data());
    } else {
      TAGC_TRY(cross_.reduce_scatter(cross, std::span<const float>(detail::raw(slice_), slice_len_), piece,
                                     stats ? &cross_stats : nullptr));
    }
    if (interleaved) {
      TAGC_TRY(annotate(node.all_gather(std::span<const float>(piece),
                                        std::span<float>(detail::raw(region_), region_.size()))));
      launch(shard_, detail::shard_from_pieces{detail::raw(region_), shard.data(), shard_,
                                               std::size_t(shape_.ranks_per_node),
                                               std::size_t(shape_.local_rank_of(args_.rank))});
    }
    if (args_.op == reduce_op::mean) launch(shard_, detail::scale_in_place{shard.data(), 1.0f / float(args_.world_size)});
    if (stats) {
      *stats = cross_stats;
      stats->control_bytes += ring_bytes_sent(collective::all_reduce, double(sizeof mine), shape_.nodes);
      stats->intranode_bytes =
          node_stats.total_bytes() + ring_bytes_sent(collective::all_reduce, double(sizeof mine), shape_.ranks_per_node);
      if (interleaved)
        stats->intranode_bytes +=
            ring_bytes_sent(collective::all_gather, double(region_.size() * sizeof(float)), shape_.ranks_per_node);
    }
    return {};
  }

  // ---- state: the cross stage's error feedback (the node stage's, if it keeps any) ----
  std::vector<std::byte> save_state() const {
    const std::vector<std::byte> n = node_.save_state(), c = cross_.save_state();
    const std::uint64_t head[7] = {state_magic, state_version, std::uint64_t(shape_.nodes),
                                   std::uint64_t(shape_.ranks_per_node), n.size(), c.size(),
                                   std::uint64_t(layout_)};
    std::vector<std::byte> out(sizeof head + n.size() + c.size());
    std::memcpy(out.data(), head, sizeof head);
    if (!n.empty()) std::memcpy(out.data() + sizeof head, n.data(), n.size());
    if (!c.empty()) std::memcpy(out.data() + sizeof head + n.size(), c.data(), c.size());
    return out;
  }
  status load_state(std::span<const std::byte> in) {
    if (!initialized_) return annotate({errc::invalid_argument, "load_state before initialize"});
    // version 1: six header words, whole-shard lanes; version 2: a seventh, the layout
    std::uint64_t head[7] = {};
    if (in.size() < 2 * sizeof(std::uint64_t))
      return annotate({errc::io, "two-level reducer state truncated: " + std::to_string(in.size()) + " bytes"});
    std::memcpy(head, in.data(), 2 * sizeof(std::uint64_t));
    if (head[0] != state_magic || head[1] < 1 || head[1] > state_version)
      return annotate({errc::io, "not a two-level reducer state of version 1 to " + std::to_string(state_version) +
                                     " (a flat reducer's state cannot seed a two-level one: the residual covers "
                                     "another slice)"});
    const std::size_t head_bytes = (head[1] == 1 ? 6 : 7) * sizeof(std::uint64_t);
    if (in.size() < head_bytes)
      return annotate({errc::io, "two-level reducer state truncated: " + std::to_string(in.size()) + " bytes"});
    std::memcpy(head, in.data(), head_bytes);
    if (head[2] != std::uint64_t(shape_.nodes) || head[3] != std::uint64_t(shape_.ranks_per_node))
      return annotate({errc::size_mismatch, "two-level reducer state was saved with " + std::to_string(head[2]) +
                                                " nodes x " + std::to_string(head[3]) + " ranks, this reducer has " +
                                                std::to_string(shape_.nodes) + " x " +
                                                std::to_string(shape_.ranks_per_node)});
    if (head[6] != std::uint64_t(layout_))  // the residual would land on other elements
      return annotate({errc::size_mismatch, std::string("two-level reducer state was saved with ") +
                                                layout_name(head[6]) + " lanes, this reducer has " +
                                                layout_name(std::uint64_t(layout_)) + " lanes"});
    if (in.size() != head_bytes + head[4] + head[5])
      return annotate({errc::io, "two-level reducer state has " + std::to_string(in.size()) + " bytes, its header says " +
                                     std::to_string(head_bytes + head[4] + head[5])});
    TAGC_TRY(node_.load_state(in.subspan(head_bytes, head[4])));
    return cross_.load_state(in.subspan(head_bytes + head[4], head[5]));
  }

 private:
  // Step 1: the node-major copy of the gradient (its padding stays zero).
  void node_major(std::span<const float> grad) {
    const std::size_t M = std::size_t(shape_.nodes), K = std::size_t(shape_.ranks_per_node);
    const bool interleaved = layout_ == lane_layout::interleaved;
    float* out = detail::raw(node_major_);
    if constexpr (!exec_space::is_device) {
      // One copy per piece, strided when interleaved: no division per element.
      const std::ptrdiff_t slots = std::ptrdiff_t(M * K);
#pragma omp parallel for schedule(static) if (shard_ * M * K >= detail::host_inline_below)
      for (std::ptrdiff_t slot = 0; slot < slots; ++slot) {
        const std::size_t l = std::size_t(slot) / M, m = std::size_t(slot) % M;
        const std::size_t first = detail::piece_source(m, l, 0, shard_, K, interleaved), stride = interleaved ? K : 1;
        const std::size_t n = first < grad.size() ? std::min(shard_, (grad.size() - first - 1) / stride + 1) : 0;
        float* dst = out + std::size_t(slot) * shard_;
        if (!interleaved) {
          if (n) std::memcpy(dst, grad.data() + first, n * sizeof(float));
        } else {
          for (std::size_t j = 0; j < n; ++j) dst[j] = grad[first + j * K];
        }
      }
    } else {
      detail::launcher<exec_space>{exec_}(
          shard_ * M * K, detail::node_major_gather{grad.data(), out, grad.size(), shard_, M, K, interleaved});
    }
  }

  static const char* layout_name(std::uint64_t l) {
    return l == std::uint64_t(lane_layout::shards) ? "whole-shard" : l == std::uint64_t(lane_layout::interleaved) ? "interleaved" : "unknown";
  }
  status annotate(status s) const { return unit_(std::move(s)); }

  reducer_arguments args_{};
  unit_label unit_{nullptr, "two-level"};  // unnamed: statuses go out as they are
  node_shape shape_{};
  exec_space exec_{};
  std::size_t shard_ = 0, slice_len_ = 0;
  lane_layout layout_ = lane_layout::shards;
  bool cross_replicated_ = false;  // the cross stage all-reduces the slice (cross_topology)
  bool initialized_ = false;
  NodeReducer node_;
  CrossReducer cross_;
  vector<float> node_major_, slice_;
  vector<float> slice_sums_;      // replicated cross stage: the slice's sums over the world (else empty)
  vector<float> piece_, region_;  // interleaved: the cross stage's piece, the node's gathered pieces
  vector<std::int64_t> verdict_;  // the verdict's all-reduces (see reduce_scatter)
  detail::sum_workspace<exec_space> nonfinite_;
};

TAGC_END_NAMESPACE
