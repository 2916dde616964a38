// trainer_impl.hpp: Trainer<Exec, Comm>'s definitions (see trainer.hpp for the shape of a
// step), included by the files that instantiate it: trainer_host.cpp (exec::host + MPI)
// and trainer_cuda.cu (exec::cuda + NCCL). The constructor and its setup steps are in
// trainer_setup_impl.hpp, --compress auto's measurement in trainer_auto_impl.hpp.
// defines: train::Trainer<Exec, Comm> (members), TAGC_GPT2_TRAINER
#pragma once

#include "trainer.hpp"

// defines: gpt2::units, gpt2::unit_offsets
#include "gpt2/layout.hpp"
// defines: gpt2::init_unit
#include "gpt2/init.hpp"
// defines: gpt2::adamw_update, gpt2::sum_of_squares
#include "gpt2/optim.hpp"
// defines: gpt2::load_checkpoint
#include "gpt2/checkpoint.hpp"
// defines: train::nonfinite_message
#include "step_checks.hpp"
// defines: tagc::int8_blocks (--gather-dtype int8)
#include "tagc/int8_blocks.hpp"
// defines: train::StepTotals
#include "step_totals.hpp"
// defines: train::stop_requested
#include "stop_signal.hpp"
// defines: train::config_json
#include "run_config.hpp"
// defines: train::throw_if_failed, train::AgreedError
#include "watchdog.hpp"

#include <thrust/copy.h>
#include <thrust/fill.h>
#include <thrust/transform.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <type_traits>

namespace train {
namespace trainer_detail {

using clock_type = std::chrono::steady_clock;
inline double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

struct times {
  float s;
  TAGC_HOST_DEVICE float operator()(float x) const { return x * s; }
};
// --gather-dtype bf16: round-to-nearest-even, the exact widening back, and both at once
// (the 1-rank rounded copy)
struct to_bf16 {
  TAGC_HOST_DEVICE tagc::bfloat16 operator()(float x) const { return tagc::bfloat16(x); }
};
struct from_bf16 {
  TAGC_HOST_DEVICE float operator()(tagc::bfloat16 b) const { return float(b); }
};
struct round_bf16 {
  TAGC_HOST_DEVICE float operator()(float x) const { return float(tagc::bfloat16(x)); }
};

}  // namespace trainer_detail

template <class Exec, class Comm>
tagc::traffic Trainer<Exec, Comm>::all_counters() const {
  tagc::traffic t = comm_.counters();
  if (levels_) t += levels_->node.counters(), t += levels_->cross.counters();
  return t;
}

template <class Exec, class Comm>
double Trainer<Exec, Comm>::bytes_sent(bool internode_only) const {
  if (!levels_) return comm_.counters().total_bytes_sent();
  const double cross = levels_->cross.counters().total_bytes_sent();
  return internode_only ? cross : cross + levels_->node.counters().total_bytes_sent();
}

template <class Exec, class Comm>
size_t Trainer<Exec, Comm>::num_parameters() const {
  return gpt2::num_parameters(cfg_);
}

template <class Exec, class Comm>
void Trainer<Exec, Comm>::check(const tagc::status& s, const char* what) const {
  throw_if_failed(s, what);
}

template <class Exec, class Comm>
double Trainer<Exec, Comm>::sum_of_squares(const float* x, size_t n) const {
  // The CPU keeps optim.cpp's loop (its summation order, which the CPU tests' figures
  // were taken with); a device space reduces with Thrust.
  if constexpr (std::is_same_v<Exec, tagc::exec::host>) return gpt2::sum_of_squares(std::span<const float>(x, n));
  else return n == 0 ? 0.0 : gpt2::sum_of_squares(model_exec_, x, n);
}

template <class Exec, class Comm>
double Trainer<Exec, Comm>::all_reduce_sum(double x) {
  all_reduce_sum(std::span<double>(&x, 1));
  return x;
}

template <class Exec, class Comm>
void Trainer<Exec, Comm>::all_reduce_sum(std::span<double> values) {
  const size_t n = values.size();
  // Grown only outside the step (evaluate_batches' first call): no task uses it now, as
  // every use below completes before returning.
  if (2 * n > scratch_.size()) scratch_.assign(2 * n, 0.0);
  double* d = raw(scratch_);
  // In and out are separate halves of the scratch: NCCL refuses partial overlap.
  check(queue_.run([&]() -> tagc::status {
          const Exec& e = queue_.side();
          TAGC_TRY(e.copy_from_host(values.data(), d, n));
          TAGC_TRY(comm_.all_reduce(std::span<const double>(d, n), std::span<double>(d + n, n)));
          return e.copy_to_host(d + n, values.data(), n);  // ordered after the sum on the side stream
        }),
        "all-reduce");
}

template <class Exec, class Comm>
RankGroup Trainer<Exec, Comm>::rank_group() {
  return {rank(), world(), [this](std::span<double> v) { all_reduce_sum(v); }};
}

template <class Exec, class Comm>
float* Trainer<Exec, Comm>::gathered(int u) {
  if (local_) {  // the whole unit, in place (or its rounded copy)
    const size_t at = plan_.unit(u).seg[0].owned;
    return gather_bf16_ || gather_int8_ ? raw(local_rounded_) + at : raw(params_) + at;
  }
  if (args_.zero2) return raw(gather_bufs_[size_t(u)]);
  return u == 0 ? raw(gather_bufs_[0]) : raw(gather_bufs_[1 + size_t(u % 2)]);
}

template <class Exec, class Comm>
typename Trainer<Exec, Comm>::Ticket Trainer<Exec, Comm>::enqueue_gather(int u, bool master) {
  if (local_) {
    // gathered(u) is the owned buffer: a ticket that is already done (0). With bf16 or int8
    // the unit is rounded into its copy here (what a 1-rank gather would deliver), on the
    // model's space.
    if (gather_bf16_) {
      const size_t at = plan_.unit(u).seg[0].owned, n = plan_.unit(u).size;
      thrust::transform(model_exec_.policy(), raw(params_) + at, raw(params_) + at + n, raw(local_rounded_) + at,
                        trainer_detail::round_bf16{});
    }
    if (gather_int8_)
      for (const Segment& g : plan_.unit(u).seg) {
        tagc::int8_blocks::encode(model_exec_, raw(params_) + g.owned, g.length, raw(gather_send8_));
        tagc::int8_blocks::decode(model_exec_, raw(gather_send8_), g.length, g.length, raw(local_rounded_) + g.owned);
      }
    return 0;
  }
  float* dst = gathered(u);
  // the fp32 master (--save-model) is never coded
  const GatherCode code = master ? GatherCode::fp32
                                 : gather_bf16_ ? GatherCode::bf16 : gather_int8_ ? GatherCode::int8 : GatherCode::fp32;
  return queue_.enqueue([this, u, dst, code]() -> tagc::status {
    const auto t0 = trainer_detail::clock_type::now();
    const double before = bytes_sent(false), before_internode = bytes_sent(true);
    for (const Segment& g : plan_.unit(u).seg) {
      if (g.length == 0) continue;
      if (tagc::status st = gather_segment(g, dst, code); !st.ok())
        return {st.code(), "all-gather of unit " + plan_.unit(u).name +
                               (code == GatherCode::bf16 ? " (bf16)" : code == GatherCode::int8 ? " (int8)" : "") +
                               (levels_ ? " in two levels" : "") + ": " + st.what()};
    }
    param_bytes_ += bytes_sent(false) - before;
    param_bytes_internode_ += bytes_sent(true) - before_internode;
    param_comm_s_ += trainer_detail::ms_since(t0) / 1e3;
    return {};
  });
}

// One segment into dst + g.offset, on the worker. Flat: the padded segment straight into
// place; the prefix's padding spills into the suffix's place, which the suffix's gather
// then overwrites (see ShardPlan::gather_capacity; both in this order on one thread, one
// stream on a GPU). Two levels: exactly the segment's length (TwoLevelAllGather cuts the
// padding off).
template <class Exec, class Comm>
tagc::status Trainer<Exec, Comm>::gather_segment(const Segment& g, float* dst, GatherCode code) {
  const float* shard = raw(params_) + g.owned;
  const size_t n = levels_ ? g.length : g.padded(world());
  if (code == GatherCode::int8) {  // coding, gather of the pieces and decoding in order on the side space
    const size_t piece = tagc::int8_blocks::piece_bytes(g.shard);
    std::uint8_t* send = raw(gather_send8_);
    std::uint8_t* recv = raw(gather_recv8_);
    tagc::int8_blocks::encode(queue_.side(), shard, g.shard, send);
    const std::span<const std::uint8_t> in(send, piece);
    const std::span<std::uint8_t> out(recv, piece * size_t(world()));
    TAGC_TRY(levels_ ? gathers_->template of<std::uint8_t>(g.length).all_gather(*levels_, in, out)
                     : comm_.all_gather(in, out));
    tagc::int8_blocks::decode(queue_.side(), recv, g.shard, n, dst + g.offset);
    return {};
  }
  if (code == GatherCode::fp32) {
    const std::span<const float> in(shard, g.shard);
    const std::span<float> out(dst + g.offset, n);
    return levels_ ? gathers_->template of<float>(g.length).all_gather(*levels_, in, out) : comm_.all_gather(in, out);
  }
  // rounding, gather and widening in order on the side space (the worker's)
  tagc::bfloat16* send = raw(gather_send16_);
  tagc::bfloat16* recv = raw(gather_recv16_);
  thrust::transform(queue_.side().policy(), shard, shard + g.shard, send, trainer_detail::to_bf16{});
  const std::span<const tagc::bfloat16> in(send, g.shard);
  const std::span<tagc::bfloat16> out(recv, n);
  TAGC_TRY(levels_ ? gathers_->template of<tagc::bfloat16>(g.length).all_gather(*levels_, in, out)
                   : comm_.all_gather(in, out));
  thrust::transform(queue_.side().policy(), recv, recv + n, dst + g.offset, trainer_detail::from_bf16{});
  return {};
}

template <class Exec, class Comm>
void Trainer<Exec, Comm>::enqueue_reduce(int u) {
  queue_.enqueue([this, u, step = step_ + 1]() -> tagc::status {
    const auto t0 = trainer_detail::clock_type::now();
    const double before = bytes_sent(false), before_internode = bytes_sent(true);
    UnitState& unit = units_[size_t(u)];
    for (SegmentState& seg : unit.seg) {
      const Segment& g = *seg.layout;
      if (!seg.reducer) {  // 1 rank, beside a reduced segment of the same unit: the mean is the gradient
        if (seg.local)
          thrust::copy_n(queue_.side().policy(), unit.grad.data() + g.offset, g.length, raw(grad_shard_) + g.owned);
        continue;
      }
      if (tagc::status st = seg.reducer->reduce_scatter(comm_, levels_.get(),
                                                        std::span<const float>(unit.grad.data() + g.offset, g.length),
                                                        std::span<float>(raw(grad_shard_) + g.owned, g.shard),
                                                        &seg.stats);
          !st.ok())  // which step and unit: the library knows neither
        return {st.code(), "step " + std::to_string(step) + ", " + seg.name + " (" +
                               (seg.compressed() ? "compressed" : "plain") + " reduce-scatter): " + st.what()};
    }
    grad_bytes_ += bytes_sent(false) - before;
    grad_bytes_internode_ += bytes_sent(true) - before_internode;
    grad_comm_s_ += trainer_detail::ms_since(t0) / 1e3;
    return {};
  });
}

template <class Exec, class Comm>
double Trainer<Exec, Comm>::forward(const int32_t* inputs, const int32_t* targets) {
  const int U = plan_.num_units();
  if constexpr (Exec::is_device) {
    // Ordered on the model stream after the previous batch's use of these buffers.
    const size_t n = inputs_.size();
    check(model_exec_.copy_from_host(inputs, raw(dev_inputs_), n), "copy inputs");
    check(model_exec_.copy_from_host(targets, raw(dev_targets_), n), "copy targets");
    inputs = raw(dev_inputs_);
    targets = raw(dev_targets_);
  }
  std::vector<Ticket> tick(size_t(U), 0);
  // Two gathers in flight at the start; afterwards one unit ahead of the compute.
  tick[0] = enqueue_gather(0);
  if (U > 1) tick[1] = enqueue_gather(1);
  for (int u = 0; u < U; ++u) {
    check(queue_.wait(tick[size_t(u)]), "");
    model_->forward_unit(u, gathered(u), u == 0 ? inputs : nullptr);
    // unit u+2 shares u's slot, which u no longer needs (on a GPU the gather is ordered
    // after u's forward: comm_queue.hpp)
    if (u + 2 < U) tick[size_t(u + 2)] = enqueue_gather(u + 2);
  }
  return model_->forward_head(gathered(0), targets);
}

template <class Exec, class Comm>
float Trainer<Exec, Comm>::lr_at(int step) const {
  const float lr = args_.lr;
  if (args_.warmup > 0 && step < args_.warmup) return lr * float(step + 1) / float(args_.warmup);
  if (args_.schedule == Schedule::constant) return lr;
  const int decay = std::max(1, args_.steps - args_.warmup);
  const double progress = std::min(1.0, double(step - args_.warmup) / double(decay));
  return float(args_.lr_min + 0.5 * (lr - args_.lr_min) * (1.0 + std::cos(M_PI * progress)));
}

template <class Exec, class Comm>
StepMetrics Trainer<Exec, Comm>::train_step() {
  fault::maybe_stall(step_ + 1, rank());
  const auto t0 = trainer_detail::clock_type::now();
  const int U = plan_.num_units();
  const int K = args_.accum;
  (void)queue_.take_busy_seconds();
  (void)queue_.take_wait_seconds();
  const tagc::traffic before = all_counters();  // the worker is idle between steps
  grad_bytes_ = grad_bytes_internode_ = param_bytes_ = param_bytes_internode_ = 0.0;
  grad_comm_s_ = param_comm_s_ = 0.0;
  // After the previous step's wait_all, so no reduce still reads these.
  for (UnitState& unit : units_) thrust::fill(model_exec_.policy(), unit.grad.begin(), unit.grad.end(), 0.0f);

  const bool inject = inject_nan_ && inject_nan_->step == step_ + 1 && inject_nan_->rank == rank();
  double loss_sum = 0.0;
  for (int micro = 0; micro < K; ++micro) {
    train_loader_->next_batch(inputs_, targets_);
    loss_sum += forward(inputs_.data(), targets_.data());
    if (inject && inject_nan_->unit == "loss") loss_sum = std::numeric_limits<double>::quiet_NaN();
    const bool last = micro == K - 1;
    // FULL_SHARD re-gathers for backward; start the last unit's now, under the head.
    Ticket next = args_.zero2 ? 0 : enqueue_gather(U - 1);
    model_->backward_head(gathered(0), units_[0].grad.data(), 1.0f / float(K));
    for (int u = U - 1; u >= 0; --u) {
      if (!args_.zero2 && u >= 1) {  // unit 0 is still gathered from forward
        check(queue_.wait(next), "");
        if (u - 1 >= 1) next = enqueue_gather(u - 1);  // into the slot unit u+1 just freed
      }
      model_->backward_unit(u, gathered(u), units_[size_t(u)].grad.data());
      if (last && inject && inject_nan_->unit == plan_.unit(u).name) {
        const Segment& g = plan_.unit(u).seg[inject_nan_->suffix || plan_.unit(u).seg[0].length == 0 ? 1 : 0];
        const float nan = std::numeric_limits<float>::quiet_NaN();
        check(model_exec_.copy_from_host(&nan, units_[size_t(u)].grad.data() + g.offset, 1), "TAGC_GPT2_INJECT_NAN");
      }
      // The gradient of unit u is complete: reduce it while unit u-1 computes.
      if (last && units_[size_t(u)].reduced) enqueue_reduce(u);
    }
  }
  check(queue_.wait_all(), "");  // the tasks name step, unit and collective

  // One all-reduce of the step's totals (step_totals.hpp): the global gradient norm over
  // all owned shards, the mean loss, the decode statistics of every rank's shards (each
  // rank decodes only its own), each unit's sum of squares and each rank's loss (the
  // non-finite check), and whether any rank was asked to stop.
  const size_t owned = plan_.owned_size();
  StepTotals totals{size_t(U), size_t(world())};
  totals.stop = stop_requested() ? 1.0 : 0.0;  // SIGTERM/SIGINT here (stop_signal.hpp)
  totals.grad_sq = sum_of_squares(raw(grad_shard_), owned);
  totals.loss = loss_sum;
  totals.rank_loss[size_t(rank())] = loss_sum;
  totals.rank_internode[size_t(rank())] = grad_bytes_internode_;
  std::vector<std::string> names;
  for (int u = 0; u < U; ++u) {
    names.push_back(plan_.unit(u).name);
    for (const SegmentState& seg : units_[size_t(u)].seg) {
      totals.unit_grad_sq[size_t(u)] += sum_of_squares(raw(grad_shard_) + seg.layout->owned, seg.layout->shard);
      if (!seg.compressed()) continue;
      const tagc::reduce_stats& st = seg.stats;
      totals.support += double(st.support);
      totals.cells += st.load > 0 ? double(st.support) / st.load : 0.0;
      totals.unresolved += double(st.unresolved);
      totals.pending += deferred_entries(st);
    }
  }
  std::vector<double> flat = totals.flatten();
  all_reduce_sum(std::span<double>(flat));
  totals.unflatten(flat);
  if (const std::string bad = nonfinite_message(step_ + 1, totals.rank_loss, totals.unit_grad_sq, names); !bad.empty())
    throw AgreedError(bad);
  const double norm = std::sqrt(totals.grad_sq);
  if (args_.clip > 0.0f && norm > double(args_.clip)) {
    const float scale = float(double(args_.clip) / norm);
    thrust::transform(model_exec_.policy(), raw(grad_shard_), raw(grad_shard_) + owned, raw(grad_shard_),
                      trainer_detail::times{scale});
  }
  const float lr = lr_at(step_);
  const gpt2::AdamW opt{lr, args_.beta1, args_.beta2, args_.eps, args_.weight_decay};
  // The CPU keeps optim.cpp's vectorized loop; a device space runs the same update as a kernel.
  if constexpr (std::is_same_v<Exec, tagc::exec::host>)
    gpt2::adamw_update(std::span<float>(raw(params_), owned), std::span<const float>(raw(grad_shard_), owned),
                       std::span<float>(raw(m_), owned), std::span<float>(raw(v_), owned), opt, step_ + 1);
  else
    gpt2::adamw_update(model_exec_, raw(params_), raw(grad_shard_), raw(m_), raw(v_), owned, opt, step_ + 1);
  ++step_;

  StepMetrics m;
  m.step = step_;
  m.loss = totals.loss / double(K * world());
  m.lr = lr;
  m.grad_norm = norm;
  m.stop_requested = totals.stop > 0.0;
  last_loss_ = m.loss;
  last_norm_ = norm;
  m.step_ms = trainer_detail::ms_since(t0);
  m.wait_ms = queue_.take_wait_seconds() * 1e3;
  m.comm_ms = queue_.take_busy_seconds() * 1e3;
  m.grad_comm_ms = grad_comm_s_ * 1e3;
  m.param_comm_ms = param_comm_s_ * 1e3;
  m.compute_ms = m.step_ms - m.wait_ms;
  m.grad_bytes = grad_bytes_;
  m.grad_bytes_internode = grad_bytes_internode_;
  for (const double b : totals.rank_internode) {
    m.grad_bytes_internode_mean += b / double(world());
    m.grad_bytes_internode_max = std::max(m.grad_bytes_internode_max, b);
  }
  m.param_bytes = param_bytes_;
  m.param_bytes_internode = param_bytes_internode_;
  m.all_support = totals.support;
  m.all_load = totals.cells > 0 ? totals.support / totals.cells : 0.0;
  m.all_unresolved = totals.unresolved;
  m.all_pending = totals.pending;
  m.traffic = all_counters();
  m.traffic -= before;
  for (int u = 0; u < U; ++u)
    for (int s = 0; s < 2; ++s)
      if (const SegmentState& seg = units_[size_t(u)].seg[size_t(s)]; seg.compressed())
        m.compression.push_back({plan_.unit(u).name, s, seg.stats});
  m.tokens = long(K) * args_.B * args_.T * world();
  return m;
}

template <class Exec, class Comm>
double Trainer<Exec, Comm>::evaluate(int batches) {
  const std::vector<double> losses = evaluate_batches(batches);
  double sum = 0.0;
  for (double l : losses) sum += l;
  return sum / double(losses.size());
}

template <class Exec, class Comm>
std::vector<double> Trainer<Exec, Comm>::evaluate_batches(int batches) {
  val_loader_->reset();
  // Each rank fills its own slots (rank-major), the all-reduce sums the zeros away: every
  // rank gets every batch's loss, for the standard error of the mean.
  const size_t n = size_t(batches) * size_t(world());
  std::vector<double> all(n, 0.0);
  for (int i = 0; i < batches; ++i) {
    val_loader_->next_batch(inputs_, targets_);
    all[size_t(rank()) * size_t(batches) + size_t(i)] = forward(inputs_.data(), targets_.data());
  }
  all_reduce_sum(std::span<double>(all));
  return all;
}

template <class Exec, class Comm>
std::vector<float> Trainer<Exec, Comm>::gather_model() {
  const auto offsets = gpt2::unit_offsets(gpt2::units(cfg_));
  std::vector<float> flat(num_parameters());
  for (int u = 0; u < plan_.num_units(); ++u) {
    // the fp32 master weights, whatever --gather-dtype the model computes with
    const float* src = local_ ? raw(params_) + plan_.unit(u).seg[0].owned
                              : (check(queue_.wait(enqueue_gather(u, /*master=*/true)), ""), gathered(u));
    check(model_exec_.copy_to_host(src, flat.data() + offsets[size_t(u)], plan_.unit(u).size),
          "copy parameters to the host");
  }
  return flat;
}

template <class Exec, class Comm>
void Trainer<Exec, Comm>::init_from_seed() {
  std::vector<float> owned(plan_.owned_size(), 0.0f);
  for (int u = 0; u < plan_.num_units(); ++u) {
    std::vector<float> full(plan_.unit(u).size);
    gpt2::init_unit(cfg_, u, args_.seed, full);  // same on every rank: no communication
    plan_.scatter_unit(u, full, owned);
  }
  check(model_exec_.copy_from_host(owned.data(), raw(params_), owned.size()), "copy parameters in");
}

template <class Exec, class Comm>
void Trainer<Exec, Comm>::init_from_llmc(const std::string& path) {
  agree("--init-from", [&] {
    const gpt2::Checkpoint ck = gpt2::load_checkpoint(path);
    if (!(ck.config == cfg_))
      throw std::runtime_error("--init-from " + path + ": model L=" + std::to_string(ck.config.num_layers) +
                               " C=" + std::to_string(ck.config.channels) + " NH=" +
                               std::to_string(ck.config.num_heads) + " maxT=" + std::to_string(ck.config.max_seq_len) +
                               " V=" + std::to_string(ck.config.vocab_size) + " differs from this run's L=" +
                               std::to_string(cfg_.num_layers) + " C=" + std::to_string(cfg_.channels) + " NH=" +
                               std::to_string(cfg_.num_heads) + " maxT=" + std::to_string(cfg_.max_seq_len));
    const auto offsets = gpt2::unit_offsets(gpt2::units(cfg_));
    std::vector<float> owned(plan_.owned_size(), 0.0f);
    for (int u = 0; u < plan_.num_units(); ++u)
      plan_.scatter_unit(u, std::span<const float>(ck.params).subspan(offsets[size_t(u)], plan_.unit(u).size),
                         owned);
    check(model_exec_.copy_from_host(owned.data(), raw(params_), owned.size()), "copy parameters in");
  });
}

template <class Exec, class Comm>
uint64_t Trainer<Exec, Comm>::run_id() {
  if (run_id_ == 0) {
    RankGroup g = rank_group();
    run_id_ = draw_run_id(g);
  }
  return run_id_;
}

template <class Exec, class Comm>
void Trainer<Exec, Comm>::claim_checkpoint_dir(const std::string& dir) {
  const uint64_t id = run_id();
  RankGroup g = rank_group();
  train::claim_checkpoint_dir(dir, id, g);
}

template <class Exec, class Comm>
std::string Trainer<Exec, Comm>::save_checkpoint(const std::string& dir) {
  const uint64_t id = run_id();
  CheckpointData d;
  agree("checkpoint save", [&] {
    d.header = file_header();
    d.header.step = uint64_t(step_);
    d.header.loader_shard = train_loader_->position().shard;
    d.header.loader_offset = train_loader_->position().offset;
    d.header.loader_batch = train_loader_->position().batch;
    d.header.rng_state = rng_state_;
    d.header.run_id = id;
    d.segment_paths = segment_paths();
    if (auto_) d.auto_json = to_json(*auto_).dump();
    const size_t n = plan_.owned_size();
    d.params.resize(n);
    d.m.resize(n);
    d.v.resize(n);
    // The model stream holds the last update; the copies complete before returning.
    check(model_exec_.copy_to_host(raw(params_), d.params.data(), n), "copy parameters out");
    check(model_exec_.copy_to_host(raw(m_), d.m.data(), n), "copy AdamW m out");
    check(model_exec_.copy_to_host(raw(v_), d.v.data(), n), "copy AdamW v out");
    for (const UnitState& unit : units_)
      for (const SegmentState& seg : unit.seg) {
        if (seg.reducer) d.reducer_states.push_back(seg.reducer->save_state());
        else if (seg.local) d.reducer_states.emplace_back();  // what a plain reducer saves
      }
  });
  RankGroup g = rank_group();
  return save_step(dir, d, {args_.keep_checkpoints, last_loss_, last_norm_, config_json(args_), id, args_.guard_param_max},
                   g);
}

template <class Exec, class Comm>
void Trainer<Exec, Comm>::load_checkpoint(const std::string& dir) {
  RankGroup g = rank_group();
  Resumed res = load_newest(dir, file_header(), config_json(args_), g);
  resume_notes_ = res.notes;
  if (res.run_id != 0) run_id_ = res.run_id;
  agree("--resume", [&] {
    CheckpointData& d = res.data;
    const std::string from = res.from.string();
    // The same segments must go through the same paths (error feedback is per path).
    // Older files (version 1) hold no plan.
    if (!d.segment_paths.empty()) {
      const auto said = [](uint8_t p) -> std::string {
        return p == path_tagc ? "compressed (tagc)" : p == path_plain ? "plain" : "no collective";
      };
      const auto refuse = [&](const std::string& segment, const std::string& was, const std::string& is) {
        throw std::runtime_error("checkpoint in " + from + " was written with segment " + segment + " " + was +
                                 ", this run has it " + is +
                                 ": a resumed --compress auto run must keep the checkpoint's decision (pass --resume "
                                 "so the trainer takes it from the checkpoint instead of measuring)");
      };
      const std::vector<uint8_t>& saved = d.segment_paths;
      size_t i = 0;
      for (const UnitState& unit : units_)
        for (const SegmentState& seg : unit.seg) {
          if (i == saved.size() || saved[i] != seg.path)
            refuse(seg.name, i < saved.size() ? said(saved[i]) : "absent", said(seg.path));
          ++i;
        }
      if (i < saved.size()) refuse("?", said(saved[i]), "absent");
    }
    // One state per segment that carries one, in table order.
    size_t n = 0;
    for (const UnitState& unit : units_)
      for (const SegmentState& seg : unit.seg) n += seg.carries_state();
    if (d.reducer_states.size() != n)
      throw std::runtime_error("checkpoint in " + from + " holds " + std::to_string(d.reducer_states.size()) +
                               " reducer states, this run has " + std::to_string(n) + " segments");
    auto state = d.reducer_states.begin();
    for (UnitState& unit : units_)
      for (SegmentState& seg : unit.seg) {
        if (seg.reducer) check(seg.reducer->load_state(*state), ("reducer state in " + from).c_str());
        if (seg.carries_state()) ++state;  // a local segment has nothing to restore
      }
    const size_t owned = plan_.owned_size();
    check(model_exec_.copy_from_host(d.params.data(), raw(params_), owned), "copy parameters in");
    check(model_exec_.copy_from_host(d.m.data(), raw(m_), owned), "copy AdamW m in");
    check(model_exec_.copy_from_host(d.v.data(), raw(v_), owned), "copy AdamW v in");
    step_ = int(d.header.step);
    rng_state_ = d.header.rng_state;
    train_loader_->seek({d.header.loader_shard, d.header.loader_offset, d.header.loader_batch});
  });
}

}  // namespace train

// trainer_setup_impl.hpp: the constructor and its setup steps (the segment table).
#include "trainer_setup_impl.hpp"
// trainer_auto_impl.hpp: decide_auto (--compress auto), also a member template.
#include "trainer_auto_impl.hpp"

// Explicit instantiation of Trainer for one (Exec, Comm), in exactly one translation unit.
#define TAGC_GPT2_TRAINER(EXEC, COMM) template class train::Trainer<EXEC, COMM>
