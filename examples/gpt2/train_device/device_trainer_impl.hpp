// device_trainer_impl.hpp: DeviceTrainer's definitions (see device_trainer.hpp for the
// shape of a step), included by the files that instantiate it:
// device_trainer_host.cpp (exec::host + MPI) and device_trainer_cuda.cu (exec::cuda + NCCL).
#pragma once

#include "device_trainer.hpp"

// defines: gpt2::units, gpt2::unit_offsets
#include "gpt2/layout.hpp"
// defines: gpt2::init_unit
#include "gpt2/init.hpp"
// defines: gpt2::load_checkpoint
#include "gpt2/checkpoint.hpp"
// defines: train::nonfinite_message
#include "step_checks.hpp"
// defines: train::config_json
#include "run_config.hpp"
// defines: train::throw_if_failed, train::AgreedError
#include "watchdog.hpp"

#include <thrust/fill.h>
#include <thrust/transform.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace train_device {
namespace detail {

using clock_type = std::chrono::steady_clock;
inline double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

struct times {
  float s;
  TAGC_HOST_DEVICE float operator()(float x) const { return x * s; }
};
// --gather-dtype bf16: round-to-nearest-even, and the exact widening back
struct to_bf16 {
  TAGC_HOST_DEVICE tagc::bfloat16 operator()(float x) const { return tagc::bfloat16(x); }
};
struct from_bf16 {
  TAGC_HOST_DEVICE float operator()(tagc::bfloat16 b) const { return float(b); }
};

}  // namespace detail

template <class Exec, class Comm>
template <class T>
T* DeviceTrainer<Exec, Comm>::raw(vector<T>& v) {
  return thrust::raw_pointer_cast(v.data());
}

template <class Exec, class Comm>
DeviceTrainer<Exec, Comm>::DeviceTrainer(const train::Args& args, Comm& comm, Exec model, Exec side)
    : args_(args),
      cfg_(train::model_config(args)),
      comm_(comm),
      plan_(gpt2::units(cfg_), comm.size(), comm.rank()),
      model_exec_(model),
      queue_(model, side) {
  // NCCL orders each collective after its compute stream's work and makes that stream
  // wait for the result: that stream is the side stream, where the tasks run.
  if constexpr (requires(Comm& c, const Exec& e) { c.set_compute_stream(e.stream); }) comm.set_compute_stream(side.stream);
  if (args_.compress == train::CompressMode::automatic)
    throw std::invalid_argument(
        "--compress auto is not available in the device trainer: pick none, non-attention or all");

  const int U = plan_.num_units();
  model_ = std::make_unique<gpt2::DeviceModel<Exec>>(cfg_, args_.B, args_.T, model_exec_);
  inputs_.resize(size_t(args_.B) * size_t(args_.T));
  targets_.resize(inputs_.size());
  dev_inputs_.assign(inputs_.size(), 0);
  dev_targets_.assign(inputs_.size(), 0);
  // small all-reduces: the step's (6 + units + ranks), the checkpoint store's (2 x ranks)
  scratch_.assign(2 * (16 + size_t(plan_.num_units()) + 2 * size_t(world())), 0.0);
  agree("data", [&] {
    train_loader_ = std::make_unique<gpt2::DataLoader>(gpt2::list_shards(args_.train_data, "train"), size_t(args_.B),
                                                       size_t(args_.T), rank(), world());
    val_loader_ = std::make_unique<gpt2::DataLoader>(gpt2::list_shards(args_.val_data, "val"), size_t(args_.B),
                                                     size_t(args_.T), rank(), world());
    for (auto* l : {train_loader_.get(), val_loader_.get()}) {
      l->set_vocab_size(uint32_t(cfg_.vocab_size));
      l->preload();  // token ids checked now, where every rank agrees on the error
    }
  });

  const size_t owned = plan_.owned_size();
  params_.assign(owned, 0.0f);
  grad_shard_.assign(owned, 0.0f);
  m_.assign(owned, 0.0f);
  v_.assign(owned, 0.0f);
  grads_.resize(size_t(U));
  for (int u = 0; u < U; ++u) grads_[size_t(u)].assign(plan_.unit(u).size, 0.0f);

  // FULL_SHARD: unit 0 (needed again by the head) + two rotating slots.
  // --zero2: every unit keeps its gathered copy from forward to backward.
  if (args_.zero2) {
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

  // --gather-dtype bf16: staging for the 16-bit gather (no allocation per step)
  gather_bf16_ = args_.gather_dtype == "bf16";
  if (gather_bf16_) {
    size_t shard = 0, padded = 0;
    for (int u = 0; u < U; ++u)
      for (const train::Segment& g : plan_.unit(u).seg) {
        shard = std::max(shard, g.shard);
        padded = std::max(padded, g.padded(world()));
      }
    gather_send16_.assign(shard, tagc::bfloat16::from_bits(0));
    gather_recv16_.assign(padded, tagc::bfloat16::from_bits(0));
  }

  paths_.assign(size_t(2 * U), train::path_none);
  for (int u = 0; u < U; ++u)
    for (int s = 0; s < 2; ++s) {
      const train::Segment& g = plan_.unit(u).seg[s];
      if (g.length == 0) continue;  // e.g. lnf has no compressible prefix: no collective at all
      const bool compress = args_.compress == train::CompressMode::all ||
                            (args_.compress == train::CompressMode::non_attention && g.compressible);
      paths_[size_t(2 * u + s)] = compress ? train::path_tagc : train::path_plain;
    }

  // The CPU trainer's flags to the same reducers, from this space's catalogue.
  const train::CompressOptions co = train::compress_options(args_);
  reducers_.resize(size_t(U));
  stats_.resize(size_t(U));
  agree("reducer setup", [&] {
    if (args_.baseline_dtype != "fp32" && args_.baseline_dtype != "bf16")
      throw std::invalid_argument("--baseline-dtype " + args_.baseline_dtype + ": expected fp32 or bf16");
    for (int u = 0; u < U; ++u)
      for (int s = 0; s < 2; ++s) {
        const train::Segment& g = plan_.unit(u).seg[s];
        const uint8_t path = paths_[size_t(2 * u + s)];
        if (path == train::path_none) continue;
        auto& r = reducers_[size_t(u)][size_t(s)];
        r = make_segment_reducer<Exec, Comm>(co, path == train::path_tagc ? co.reducer : co.plain, g.length, world(),
                                             rank(), queue_.side());
        // Stage timings synchronize after each stage: cheap on the CPU, lost overlap on a GPU.
        r->set_profiling(!Exec::is_device);
        if (r->output_size() != g.shard)
          throw std::logic_error("reducer shard of " + plan_.unit(u).name + " has " + std::to_string(r->output_size()) +
                                 " elements, the shard plan " + std::to_string(g.shard));
      }
  });
  rng_state_ = args_.seed;
  inject_nan_ = train::fault::nan_at();
}

template <class Exec, class Comm>
DeviceTrainer<Exec, Comm>::~DeviceTrainer() = default;

template <class Exec, class Comm>
size_t DeviceTrainer<Exec, Comm>::num_parameters() const {
  return gpt2::num_parameters(cfg_);
}

template <class Exec, class Comm>
std::string DeviceTrainer<Exec, Comm>::segment_name(size_t i) const {
  return plan_.unit(int(i / 2)).name + (i % 2 == 0 ? "/prefix" : "/suffix");
}

template <class Exec, class Comm>
void DeviceTrainer<Exec, Comm>::check(const tagc::status& s, const char* what) const {
  train::throw_if_failed(s, what);
}

template <class Exec, class Comm>
train::RankGroup DeviceTrainer<Exec, Comm>::rank_group() {
  return {rank(), world(), [this](std::span<double> v) { all_reduce_sum(v); }};
}

template <class Exec, class Comm>
void DeviceTrainer<Exec, Comm>::all_reduce_sum(std::span<double> values) {
  const size_t n = values.size();
  if (2 * n > scratch_.size()) throw std::logic_error("all_reduce_sum: more values than the scratch holds");
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
double DeviceTrainer<Exec, Comm>::all_reduce_sum(double x) {
  all_reduce_sum(std::span<double>(&x, 1));
  return x;
}

template <class Exec, class Comm>
void DeviceTrainer<Exec, Comm>::agree_flag(bool failed, const std::string& message, const char* what) {
  const double failures = all_reduce_sum(failed ? 1.0 : 0.0);
  if (failures == 0.0) return;
  if (failed) throw train::AgreedError(message);
  throw train::AgreedError(std::string(what) + " failed on another rank (see its message)");
}

template <class Exec, class Comm>
float* DeviceTrainer<Exec, Comm>::gathered(int u) {
  if (args_.zero2) return raw(gather_bufs_[size_t(u)]);
  return u == 0 ? raw(gather_bufs_[0]) : raw(gather_bufs_[1 + size_t(u % 2)]);
}

template <class Exec, class Comm>
typename CommQueue<Exec>::Ticket DeviceTrainer<Exec, Comm>::enqueue_gather(int u, bool master) {
  float* dst = gathered(u);
  const bool bf16 = gather_bf16_ && !master;
  return queue_.enqueue([this, u, dst, bf16]() -> tagc::status {
    // Prefix first: its padding spills into the suffix's place, which the suffix's
    // gather then overwrites (see ShardPlan::gather_capacity); both are issued in this
    // order on one stream / one thread.
    for (const train::Segment& g : plan_.unit(u).seg) {
      if (g.length == 0) continue;
      const size_t n = g.padded(world());
      tagc::status st;
      if (bf16) {
        // rounding, gather and widening in order on the side stream (the worker's)
        const float* src = raw(params_) + g.owned;
        tagc::bfloat16* send = raw(gather_send16_);
        tagc::bfloat16* recv = raw(gather_recv16_);
        thrust::transform(queue_.side().policy(), src, src + g.shard, send, detail::to_bf16{});
        st = comm_.all_gather(std::span<const tagc::bfloat16>(send, g.shard), std::span<tagc::bfloat16>(recv, n));
        if (st.ok()) thrust::transform(queue_.side().policy(), recv, recv + n, dst + g.offset, detail::from_bf16{});
      } else {
        st = comm_.all_gather(std::span<const float>(raw(params_) + g.owned, g.shard),
                              std::span<float>(dst + g.offset, n));
      }
      if (!st.ok())
        return {st.code(), "all-gather of unit " + plan_.unit(u).name + (bf16 ? " (bf16)" : "") + ": " + st.what()};
    }
    return {};
  });
}

template <class Exec, class Comm>
void DeviceTrainer<Exec, Comm>::enqueue_reduce(int u) {
  queue_.enqueue([this, u, step = step_ + 1]() -> tagc::status {
    const double before = comm_.counters().total_bytes_sent();
    for (int s = 0; s < 2; ++s) {
      auto& r = reducers_[size_t(u)][size_t(s)];
      if (!r) continue;
      const train::Segment& g = plan_.unit(u).seg[s];
      if (tagc::status st = r->reduce_scatter(comm_, std::span<const float>(raw(grads_[size_t(u)]) + g.offset, g.length),
                                              std::span<float>(raw(grad_shard_) + g.owned, g.shard),
                                              &stats_[size_t(u)][size_t(s)]);
          !st.ok())  // which step and unit: the library knows neither
        return {st.code(), "step " + std::to_string(step) + ", " + segment_name(size_t(2 * u + s)) + " (" +
                               (r->compressed() ? "compressed" : "plain") + " reduce-scatter): " + st.what()};
    }
    grad_bytes_ += comm_.counters().total_bytes_sent() - before;
    return {};
  });
}

template <class Exec, class Comm>
double DeviceTrainer<Exec, Comm>::forward(const int32_t* inputs, const int32_t* targets) {
  const int U = plan_.num_units();
  const size_t n = inputs_.size();
  // Ordered on the model stream after the previous batch's use of these buffers.
  check(model_exec_.copy_from_host(inputs, raw(dev_inputs_), n), "copy inputs");
  check(model_exec_.copy_from_host(targets, raw(dev_targets_), n), "copy targets");
  std::vector<typename CommQueue<Exec>::Ticket> tick(size_t(U), 0);
  // Two gathers in flight at the start; afterwards one unit ahead of the compute.
  tick[0] = enqueue_gather(0);
  if (U > 1) tick[1] = enqueue_gather(1);
  for (int u = 0; u < U; ++u) {
    check(queue_.wait(tick[size_t(u)]), "");
    model_->forward_unit(u, gathered(u), u == 0 ? raw(dev_inputs_) : nullptr);
    // unit u+2 shares u's slot: its gather is ordered after u's forward (comm_queue.hpp)
    if (u + 2 < U) tick[size_t(u + 2)] = enqueue_gather(u + 2);
  }
  return model_->forward_head(gathered(0), raw(dev_targets_));
}

template <class Exec, class Comm>
float DeviceTrainer<Exec, Comm>::lr_at(int step) const {
  // train::Trainer's schedule: linear warmup, then cosine to lr_min (or constant).
  const float lr = args_.lr;
  if (args_.warmup > 0 && step < args_.warmup) return lr * float(step + 1) / float(args_.warmup);
  if (args_.schedule == train::Schedule::constant) return lr;
  const int decay = std::max(1, args_.steps - args_.warmup);
  const double progress = std::min(1.0, double(step - args_.warmup) / double(decay));
  return float(args_.lr_min + 0.5 * (lr - args_.lr_min) * (1.0 + std::cos(M_PI * progress)));
}

template <class Exec, class Comm>
train::StepMetrics DeviceTrainer<Exec, Comm>::train_step() {
  train::fault::maybe_stall(step_ + 1, rank());
  const auto t0 = detail::clock_type::now();
  const int U = plan_.num_units();
  const int K = args_.accum;
  (void)queue_.take_busy_seconds();
  (void)queue_.take_wait_seconds();
  const tagc::traffic before = comm_.counters();  // the worker is idle between steps
  grad_bytes_ = 0.0;
  // After the previous step's wait_all, so no reduce still reads these.
  for (auto& g : grads_) thrust::fill(model_exec_.policy(), g.begin(), g.end(), 0.0f);

  const bool inject = inject_nan_ && inject_nan_->step == step_ + 1 && inject_nan_->rank == rank();
  double loss_sum = 0.0;
  for (int micro = 0; micro < K; ++micro) {
    train_loader_->next_batch(inputs_, targets_);
    loss_sum += forward(inputs_.data(), targets_.data());
    if (inject && inject_nan_->unit == "loss") loss_sum = std::numeric_limits<double>::quiet_NaN();
    const bool last = micro == K - 1;
    // FULL_SHARD re-gathers for backward; start the last unit's now, under the head.
    typename CommQueue<Exec>::Ticket next = args_.zero2 ? 0 : enqueue_gather(U - 1);
    model_->backward_head(gathered(0), raw(grads_[0]), 1.0f / float(K));
    for (int u = U - 1; u >= 0; --u) {
      if (!args_.zero2 && u >= 1) {  // unit 0 is still gathered from forward
        check(queue_.wait(next), "");
        if (u - 1 >= 1) next = enqueue_gather(u - 1);  // into the slot unit u+1 just freed
      }
      model_->backward_unit(u, gathered(u), raw(grads_[size_t(u)]));
      if (last && inject && inject_nan_->unit == plan_.unit(u).name) {
        const train::Segment& g = plan_.unit(u).seg[inject_nan_->suffix || plan_.unit(u).seg[0].length == 0 ? 1 : 0];
        const float nan = std::numeric_limits<float>::quiet_NaN();
        check(model_exec_.copy_from_host(&nan, raw(grads_[size_t(u)]) + g.offset, 1), "TAGC_GPT2_INJECT_NAN");
      }
      // The gradient of unit u is complete: reduce it while unit u-1 computes.
      if (last) enqueue_reduce(u);
    }
  }
  check(queue_.wait_all(), "");  // the tasks name step, unit and collective

  // One all-reduce for: global gradient norm over all owned shards, the mean loss, and
  // the decode statistics of every rank's shards (each rank decodes only its own).
  // then each unit's sum of squares and each rank's loss, for the non-finite check.
  const size_t owned = plan_.owned_size();
  const size_t W = size_t(world());
  std::vector<double> in(6 + size_t(U) + W, 0.0);
  in[0] = gpt2::sum_of_squares(model_exec_, raw(grad_shard_), owned);
  in[1] = loss_sum;
  for (int u = 0; u < U; ++u)
    for (const train::Segment& g : plan_.unit(u).seg)
      if (g.shard > 0) in[6 + size_t(u)] += gpt2::sum_of_squares(model_exec_, raw(grad_shard_) + g.owned, g.shard);
  in[6 + size_t(U) + size_t(rank())] = loss_sum;
  for (int u = 0; u < U; ++u)
    for (int s = 0; s < 2; ++s)
      if (const auto& r = reducers_[size_t(u)][size_t(s)]; r && r->compressed()) {
        const tagc::reduce_stats& st = stats_[size_t(u)][size_t(s)];
        in[2] += double(st.support);
        in[3] += st.load > 0 ? double(st.support) / st.load : 0.0;  // sketch cells
        in[4] += double(st.unresolved);
        in[5] += train::deferred_entries(st);
      }
  all_reduce_sum(std::span<double>(in));
  const double* out = in.data();
  std::vector<std::string> names;
  for (int u = 0; u < U; ++u) names.push_back(plan_.unit(u).name);
  if (const std::string bad = train::nonfinite_message(step_ + 1, std::span<const double>(in).subspan(6 + size_t(U), W),
                                                       std::span<const double>(in).subspan(6, size_t(U)), names);
      !bad.empty())
    throw train::AgreedError(bad);
  const double norm = std::sqrt(out[0]);
  if (args_.clip > 0.0f && norm > double(args_.clip)) {
    const float scale = float(double(args_.clip) / norm);
    thrust::transform(model_exec_.policy(), grad_shard_.begin(), grad_shard_.end(), grad_shard_.begin(),
                      detail::times{scale});
  }
  const float lr = lr_at(step_);
  gpt2::adamw_update(model_exec_, raw(params_), raw(grad_shard_), raw(m_), raw(v_), owned,
                     gpt2::AdamW{lr, args_.beta1, args_.beta2, args_.eps, args_.weight_decay}, step_ + 1);
  ++step_;

  train::StepMetrics m;
  m.step = step_;
  m.loss = out[1] / double(K * world());
  m.lr = lr;
  m.grad_norm = norm;
  last_loss_ = m.loss;
  last_norm_ = norm;
  m.step_ms = detail::ms_since(t0);
  m.wait_ms = queue_.take_wait_seconds() * 1e3;
  m.comm_ms = queue_.take_busy_seconds() * 1e3;
  m.compute_ms = m.step_ms - m.wait_ms;
  m.grad_bytes = grad_bytes_;
  m.all_support = out[2];
  m.all_load = out[3] > 0 ? out[2] / out[3] : 0.0;
  m.all_unresolved = out[4];
  m.all_pending = out[5];
  m.traffic = comm_.counters();
  for (size_t k = 0; k < m.traffic.by_kind.size(); ++k) {
    auto& a = m.traffic.by_kind[k];
    const auto& b = before.by_kind[k];
    a.calls -= b.calls;
    a.bytes_sent -= b.bytes_sent;
    a.payload_bytes -= b.payload_bytes;
    a.seconds -= b.seconds;
  }
  for (int u = 0; u < U; ++u)
    for (int s = 0; s < 2; ++s)
      if (reducers_[size_t(u)][size_t(s)] && reducers_[size_t(u)][size_t(s)]->compressed())
        m.compression.push_back({plan_.unit(u).name, s, stats_[size_t(u)][size_t(s)]});
  m.tokens = long(K) * args_.B * args_.T * world();
  return m;
}

template <class Exec, class Comm>
double DeviceTrainer<Exec, Comm>::evaluate(int batches) {
  val_loader_->reset();
  double sum = 0.0;
  for (int i = 0; i < batches; ++i) {
    val_loader_->next_batch(inputs_, targets_);
    sum += forward(inputs_.data(), targets_.data());
  }
  return all_reduce_sum(sum) / double(batches * world());
}

template <class Exec, class Comm>
std::vector<float> DeviceTrainer<Exec, Comm>::gather_model() {
  const auto offsets = gpt2::unit_offsets(gpt2::units(cfg_));
  std::vector<float> flat(num_parameters());
  for (int u = 0; u < plan_.num_units(); ++u) {
    check(queue_.wait(enqueue_gather(u, /*master=*/true)), "");  // the fp32 master, whatever --gather-dtype
    check(model_exec_.copy_to_host(gathered(u), flat.data() + offsets[size_t(u)], plan_.unit(u).size),
          "copy parameters to the host");
  }
  return flat;
}

template <class Exec, class Comm>
void DeviceTrainer<Exec, Comm>::init_from_seed() {
  std::vector<float> owned(plan_.owned_size(), 0.0f);
  for (int u = 0; u < plan_.num_units(); ++u) {
    std::vector<float> full(plan_.unit(u).size);
    gpt2::init_unit(cfg_, u, args_.seed, full);  // same on every rank: no communication
    plan_.scatter_unit(u, full, owned);
  }
  check(model_exec_.copy_from_host(owned.data(), raw(params_), owned.size()), "copy parameters in");
}

template <class Exec, class Comm>
void DeviceTrainer<Exec, Comm>::init_from_llmc(const std::string& path) {
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
void DeviceTrainer<Exec, Comm>::save_checkpoint(const std::string& dir) {
  train::CheckpointData d;
  agree("checkpoint save", [&] {
    d.header = train::run_header(cfg_, args_, world(), rank(), plan_.owned_size());
    d.header.step = uint64_t(step_);
    d.header.loader_shard = train_loader_->position().shard;
    d.header.loader_offset = train_loader_->position().offset;
    d.header.rng_state = rng_state_;
    d.segment_paths = paths_;
    const size_t n = plan_.owned_size();
    d.params.resize(n);
    d.m.resize(n);
    d.v.resize(n);
    // The model stream holds the last update; the copies complete before returning.
    check(model_exec_.copy_to_host(raw(params_), d.params.data(), n), "copy parameters out");
    check(model_exec_.copy_to_host(raw(m_), d.m.data(), n), "copy AdamW m out");
    check(model_exec_.copy_to_host(raw(v_), d.v.data(), n), "copy AdamW v out");
    for (const auto& pair : reducers_)
      for (const auto& r : pair)
        if (r) d.reducer_states.push_back(r->save_state());
  });
  train::RankGroup g = rank_group();
  train::save_step(dir, d, {args_.keep_checkpoints, last_loss_, last_norm_, train::config_json(args_)}, g);
}

template <class Exec, class Comm>
void DeviceTrainer<Exec, Comm>::load_checkpoint(const std::string& dir) {
  train::RankGroup g = rank_group();
  train::Resumed res = train::load_newest(dir, train::run_header(cfg_, args_, world(), rank(), plan_.owned_size()),
                                          train::config_json(args_), g);
  resume_notes_ = res.notes;
  agree("--resume", [&] {
    train::CheckpointData& d = res.data;
    const std::string from = res.from.string();
    // The same segments must go through the same paths (error feedback is per path).
    if (!d.segment_paths.empty() && d.segment_paths != paths_) {
      size_t i = 0;
      while (i < paths_.size() && i < d.segment_paths.size() && d.segment_paths[i] == paths_[i]) ++i;
      throw std::runtime_error("checkpoint in " + from + " was written with a different path for segment " +
                               (i < paths_.size() ? segment_name(i) : std::string("?")) +
                               " (a --compress auto run of the CPU trainer?): the device trainer cannot continue it");
    }
    size_t n = 0;
    for (const auto& pair : reducers_)
      for (const auto& r : pair) n += r != nullptr;
    if (d.reducer_states.size() != n)
      throw std::runtime_error("checkpoint in " + from + " holds " + std::to_string(d.reducer_states.size()) +
                               " reducer states, this run has " + std::to_string(n) + " segments");
    size_t i = 0;
    for (auto& pair : reducers_)
      for (auto& r : pair)
        if (r) check(r->load_state(d.reducer_states[i++]), ("reducer state in " + from).c_str());
    const size_t owned = plan_.owned_size();
    check(model_exec_.copy_from_host(d.params.data(), raw(params_), owned), "copy parameters in");
    check(model_exec_.copy_from_host(d.m.data(), raw(m_), owned), "copy AdamW m in");
    check(model_exec_.copy_from_host(d.v.data(), raw(v_), owned), "copy AdamW v in");
    step_ = int(d.header.step);
    rng_state_ = d.header.rng_state;
    train_loader_->seek({d.header.loader_shard, d.header.loader_offset});
  });
}

}  // namespace train_device

// Explicit instantiation of DeviceTrainer for one (Exec, Comm).
#define TAGC_GPT2_DEVICE_TRAINER(EXEC, COMM) template class train_device::DeviceTrainer<EXEC, COMM>
