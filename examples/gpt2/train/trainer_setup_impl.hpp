// trainer_setup_impl.hpp: Trainer<Exec, Comm>'s constructor, a list of named setup steps
// read top to bottom: the batches, the data, the owned shards and gathered units, the
// segment table (each segment's path: by --compress, from --resume's checkpoint, or
// measured), the two levels (--ranks-per-node) and their parameter gathers, each unit's
// gradient buffer, and each segment's reducer. Included by trainer_impl.hpp.
// defines: train::Trainer<Exec, Comm>::Trainer and its setup steps, segment_paths, split_levels,
//          plan_gathers
#pragma once

#include "trainer.hpp"

// defines: train::config_json
#include "run_config.hpp"
// defines: tagc::split_two_level (MPI, and NCCL under nvcc; --ranks-per-node)
#include "tagc/comm/mpi_two_level.hpp"
#if defined(__CUDACC__)
#  include "tagc/comm/nccl_two_level.hpp"
#endif

#include <algorithm>
#include <stdexcept>
#include <type_traits>

namespace train {

// The constructor reads as the order of setup; every step that can fail on one rank is
// agreed (agree), so all ranks throw together.
template <class Exec, class Comm>
Trainer<Exec, Comm>::Trainer(const Args& args, Comm& comm, Exec model, Exec side)
    : args_(args),
      cfg_(model_config(args)),
      comm_(comm),
      plan_(gpt2::units(cfg_), comm.size(), comm.rank()),
      model_exec_(model),
      local_(comm.size() == 1),
      queue_(model, side) {
  // NCCL orders each collective after its compute stream's work and makes that stream
  // wait for the result: that stream is the side stream, where the tasks run.
  if constexpr (requires(Comm& c, const Exec& e) { c.set_compute_stream(e.stream); }) comm.set_compute_stream(side.stream);
  model_ = std::make_unique<gpt2::DeviceModel<Exec>>(cfg_, args_.B, args_.T, model_exec_);
  allocate_batches();
  open_data();
  allocate_shards();
  choose_paths();
  split_levels();
  plan_gathers();
  const CompressOptions co = compress_options(args_);
  refuse_index_carries(co);
  allocate_gradients(co);
  build_reducers(co);
  rng_state_ = args_.seed;
  inject_nan_ = fault::nan_at();
}

template <class Exec, class Comm>
Trainer<Exec, Comm>::~Trainer() = default;

// The token batches (host; copied to the device space), and the small all-reduces'
// scratch: the step's totals (step_totals.hpp), the checkpoint store's (2 x ranks);
// evaluate_batches grows it to its batches x ranks once.
template <class Exec, class Comm>
void Trainer<Exec, Comm>::allocate_batches() {
  inputs_.resize(size_t(args_.B) * size_t(args_.T));
  targets_.resize(inputs_.size());
  if constexpr (Exec::is_device) {
    dev_inputs_.assign(inputs_.size(), 0);
    dev_targets_.assign(inputs_.size(), 0);
  }
  scratch_.assign(2 * (16 + size_t(plan_.num_units()) + 2 * size_t(world())), 0.0);
}

template <class Exec, class Comm>
void Trainer<Exec, Comm>::open_data() {
  agree("data", [&] {
    train_loader_ = std::make_unique<gpt2::DataLoader>(gpt2::list_shards(args_.train_data, "train"), size_t(args_.B),
                                                       size_t(args_.T), rank(), world(),
                                                       args_.shuffle ? gpt2::DataOrder::shuffle(args_.shuffle_seed)
                                                                     : gpt2::DataOrder::sequential());
    val_loader_ = std::make_unique<gpt2::DataLoader>(gpt2::list_shards(args_.val_data, "val"), size_t(args_.B),
                                                     size_t(args_.T), rank(), world());
    for (auto* l : {train_loader_.get(), val_loader_.get()}) {
      l->set_vocab_size(uint32_t(cfg_.vocab_size));
      l->preload();  // token ids checked now, where every rank agrees on the error
    }
  });
}

// The owned shards (parameters, gradient, AdamW m and v) and the gathered units.
template <class Exec, class Comm>
void Trainer<Exec, Comm>::allocate_shards() {
  const int U = plan_.num_units();
  const size_t owned = plan_.owned_size();
  params_.assign(owned, 0.0f);
  grad_shard_.assign(owned, 0.0f);
  m_.assign(owned, 0.0f);
  v_.assign(owned, 0.0f);

  // FULL_SHARD: unit 0 (needed again by the head) + two rotating slots.
  // --zero2: every unit keeps its gathered copy from forward to backward.
  // One rank: the owned buffer is the whole model, nothing to gather into.
  if (local_) {
  } else if (args_.zero2) {
    gather_bufs_.resize(size_t(U));
    for (int u = 0; u < U; ++u) gather_bufs_[size_t(u)].assign(plan_.gather_capacity(u), 0.0f);
  } else {
    size_t slot = 0;
    for (int u = 1; u < U; ++u) slot = std::max(slot, plan_.gather_capacity(u));
    gather_bufs_.resize(3);
    gather_bufs_[0].assign(plan_.gather_capacity(0), 0.0f);
    gather_bufs_[1].assign(slot, 0.0f);
    gather_bufs_[2].assign(slot, 0.0f);
  }

  // --gather-dtype bf16: staging for the 16-bit gather, sized once (no allocation per step)
  gather_bf16_ = args_.gather_dtype == "bf16";
  if (gather_bf16_ && local_) {
    local_rounded_.assign(owned, 0.0f);
  } else if (gather_bf16_) {
    size_t shard = 0, padded = 0;
    for (int u = 0; u < U; ++u)
      for (const Segment& g : plan_.unit(u).seg) {
        shard = std::max(shard, g.shard);
        padded = std::max(padded, g.padded(world()));
      }
    gather_send16_.assign(shard, tagc::bfloat16::from_bits(0));
    gather_recv16_.assign(padded, tagc::bfloat16::from_bits(0));
  }
  // --gather-dtype int8: the same for the int8 blocks (one rank: a segment's code, decoded in place)
  gather_int8_ = args_.gather_dtype == "int8";
  if (gather_int8_) {
    size_t shard = 0;
    for (int u = 0; u < U; ++u)
      for (const Segment& g : plan_.unit(u).seg) shard = std::max(shard, local_ ? g.length : g.shard);
    if (local_) local_rounded_.assign(owned, 0.0f);
    gather_send8_.assign(tagc::int8_blocks::piece_bytes(shard), 0);
    gather_recv8_.assign(local_ ? 0 : tagc::int8_blocks::piece_bytes(shard) * size_t(world()), 0);
  }
}

// The segment table, and which path each segment takes: fixed by the mode, or measured
// (--compress auto), or the decision a resumed --compress auto run was saved with.
template <class Exec, class Comm>
void Trainer<Exec, Comm>::choose_paths() {
  const int U = plan_.num_units();
  units_.resize(size_t(U));
  for (int u = 0; u < U; ++u)
    for (int s = 0; s < 2; ++s) {
      SegmentState& seg = units_[size_t(u)].seg[size_t(s)];
      seg.layout = &plan_.unit(u).seg[s];
      seg.name = plan_.unit(u).name + (s == 0 ? "/prefix" : "/suffix");
      if (seg.layout->length == 0) continue;  // e.g. lnf has no compressible prefix: no collective at all
      const bool compress = args_.compress == CompressMode::all ||
                            (args_.compress == CompressMode::non_attention && seg.layout->compressible);
      seg.path = compress ? path_tagc : path_plain;
    }
  if (args_.compress != CompressMode::automatic) return;
  if (args_.resume.empty()) return decide_auto();
  // A resumed run keeps the decision it was checkpointed with.
  agree("--resume", [&] {
    const CheckpointData d = read_newest_plan(args_.resume, file_header(), config_json(args_));
    if (d.auto_json.empty() || d.segment_paths.size() != 2 * units_.size())
      throw std::runtime_error("checkpoint in " + args_.resume + " holds no --compress auto decision");
    auto_ = auto_plan_from_json(nlohmann::json::parse(d.auto_json));
    auto_->source = "checkpoint";
    auto next = d.segment_paths.begin();
    for (UnitState& unit : units_)
      for (SegmentState& seg : unit.seg) seg.path = *next++;
  });
}

// Summed 1-bit counters carry into neighbours beyond 2 ranks: most kept entries are never
// marked and go back to the residual every step (measured: docs/design.md, "Many ranks").
template <class Exec, class Comm>
void Trainer<Exec, Comm>::refuse_index_carries(const CompressOptions& co) const {
  if (args_.compress != CompressMode::none && co.reducer.index_bits == 1 && shape_.nodes > 2 &&
      !args_.allow_index_carries)
    throw std::runtime_error("--index-bits 1 across " + std::to_string(shape_.nodes) + (levels_ ? " nodes" : " ranks") +
                             ": summed 1-bit counters carry into neighbouring positions, so most kept entries "
                             "(49-80 % measured at 3-16 ranks) are held back in the residual every step; use "
                             "--index-bits exact, or --allow-index-carries to run it anyway (the step line then "
                             "shows the share held back)");
}

// Each unit's gradient buffer. A unit none of whose segments has a reducer (1 rank, plain
// fp32) accumulates its gradient in grad_shard_ itself: on one rank the owned shard is the
// unit, unpadded and contiguous.
template <class Exec, class Comm>
void Trainer<Exec, Comm>::allocate_gradients(const CompressOptions& co) {
  const bool plain_local = local_ && co.plain.values == tagc::values_kind::plain_fp32;
  for (int u = 0; u < plan_.num_units(); ++u) {
    UnitState& unit = units_[size_t(u)];
    for (SegmentState& seg : unit.seg) {
      seg.local = plain_local && seg.path == path_plain;
      if (seg.path != path_none && !seg.local) unit.reduced = true;
    }
    if (unit.reduced) {
      unit.grad_store.assign(plan_.unit(u).size, 0.0f);
      unit.grad = std::span<float>(raw(unit.grad_store), plan_.unit(u).size);
    } else {
      unit.grad = std::span<float>(raw(grad_shard_) + plan_.unit(u).seg[0].owned, plan_.unit(u).size);
    }
  }
}

// A reducer per segment that exchanges anything: the catalogue's choice for the unit
// (compressed) or the baseline (plain), checked against the shard plan.
template <class Exec, class Comm>
void Trainer<Exec, Comm>::build_reducers(const CompressOptions& co) {
  agree("reducer setup", [&] {
    if (!co.unit_sparsity.empty()) {
      std::vector<std::string> names, compressed;
      for (int u = 0; u < plan_.num_units(); ++u) {
        const auto& seg = units_[size_t(u)].seg;
        names.push_back(plan_.unit(u).name);
        // --compress auto decides from a measurement: a unit it sends plain is not the flag's error
        if (args_.compress == CompressMode::automatic || seg[0].path == path_tagc || seg[1].path == path_tagc)
          compressed.push_back(plan_.unit(u).name);
      }
      if (const std::string e = unit_sparsity_error(co, names, compressed); !e.empty()) throw std::runtime_error(e);
    }
    for (int u = 0; u < plan_.num_units(); ++u)
      for (SegmentState& seg : units_[size_t(u)].seg) {
        if (seg.path == path_none || seg.local) continue;
        const tagc::reducer_description d = seg.path == path_tagc ? unit_reducer(co, plan_.unit(u).name) : co.plain;
        seg.reducer = make_segment_reducer<Exec, Counted>(co, d, seg.layout->length, world(), rank(), queue_.side(),
                                                          shape_);
        // Stage timings for the log: on the CPU they only read the clock; on a GPU they
        // would synchronize after each stage (lost overlap), so not there.
        seg.reducer->set_profiling(!Exec::is_device);
        if (seg.reducer->output_size() != seg.layout->shard)
          throw std::logic_error("reducer shard of " + plan_.unit(u).name + " has " +
                                 std::to_string(seg.reducer->output_size()) + " elements, the shard plan " +
                                 std::to_string(seg.layout->shard));
      }
  });
}

template <class Exec, class Comm>
std::vector<uint8_t> Trainer<Exec, Comm>::segment_paths() const {
  std::vector<uint8_t> paths;
  for (const UnitState& unit : units_)
    for (const SegmentState& seg : unit.seg) paths.push_back(seg.path);
  return paths;
}

// --ranks-per-node: the world in two levels (the same verdict on every rank).
template <class Exec, class Comm>
void Trainer<Exec, Comm>::split_levels() {
  shape_ = {world(), 1};
  if (args_.ranks_per_node == 1) return;
  if (args_.compress == CompressMode::automatic)
    throw std::runtime_error("--ranks-per-node with --compress auto: the cost model is flat; choose the compression");
  std::optional<tagc::two_level_communicator<Comm>> levels;
  tagc::status split;
  if constexpr (std::is_same_v<Comm, tagc::mpi_communicator>) {
    split = tagc::split_two_level(comm_.inner(), args_.ranks_per_node, levels);
  } else {
#if defined(__CUDACC__)
    // NCCL cannot tell which ranks share a host: K is given.
    if (args_.ranks_per_node == 0)
      throw std::runtime_error("--ranks-per-node auto: on NCCL give the count (the ranks of a host are not known)");
    split = tagc::split_two_level(comm_.inner(), tagc::node_shape{world() / args_.ranks_per_node, args_.ranks_per_node},
                                  levels);
#else
    throw std::runtime_error("--ranks-per-node: two-level reduction is not implemented on this backend");
#endif
  }
  if (!split.ok()) throw std::runtime_error("--ranks-per-node: " + split.message());
  shape_ = levels->shape();
  if (shape_.ranks_per_node == 1) return;  // every rank its own node: the flat reducers
  levels_raw_ = std::make_unique<tagc::two_level_communicator<Comm>>(std::move(*levels));
  // NCCL: the levels' collectives are ordered after the side stream, as comm_'s are.
  if constexpr (requires(Comm& c, const Exec& e) { c.set_compute_stream(e.stream); }) {
    levels_raw_->node.set_compute_stream(queue_.side().stream);
    levels_raw_->cross.set_compute_stream(queue_.side().stream);
  }
  levels_ = std::make_unique<tagc::two_level_communicator<Counted>>(
      tagc::two_level_communicator<Counted>{Counted(levels_raw_->node), Counted(levels_raw_->cross)});
}

// --ranks-per-node K > 1: the parameters gather in two levels (param_gathers.hpp), staged
// per segment length on the side space, where the worker runs them.
template <class Exec, class Comm>
void Trainer<Exec, Comm>::plan_gathers() {
  if (levels_)
    gathers_ = std::make_unique<ParamGathers<Exec>>(plan_, shape_, gather_bf16_, gather_int8_, queue_.side());
}

}  // namespace train
