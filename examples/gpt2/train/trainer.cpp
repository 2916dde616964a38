// trainer.cpp: see trainer.hpp for the shape of a step.
// defines: train::Trainer
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
// defines: train::config_json
#include "run_config.hpp"
// defines: train::throw_if_failed, train::AgreedError
#include "watchdog.hpp"

#include <limits>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>

namespace train {

using clock_type = std::chrono::steady_clock;
static double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

Trainer::Trainer(const Args& args, tagc::mpi_communicator& mpi)
    : args_(args),
      cfg_(model_config(args)),
      mpi_(mpi),
      comm_(mpi),
      plan_(gpt2::units(cfg_), mpi.size(), mpi.rank()),
      local_(mpi.size() == 1) {
  const int U = plan_.num_units();
  model_ = std::make_unique<gpt2::DeviceModel<tagc::exec::host>>(cfg_, args_.B, args_.T);
  inputs_.resize(size_t(args_.B) * size_t(args_.T));
  targets_.resize(inputs_.size());
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

  // FULL_SHARD: unit 0 (needed again by the head) + two rotating slots.
  // --zero2: every unit keeps its gathered copy from forward to backward.
  // One rank: the owned buffer is the whole model, nothing to gather into.
  if (local_) {
  } else if (args_.zero2) {
    for (int u = 0; u < U; ++u) gather_bufs_.emplace_back(plan_.gather_capacity(u), 0.0f);
  } else {
    size_t slot = 0;
    for (int u = 1; u < U; ++u) slot = std::max(slot, plan_.gather_capacity(u));
    gather_bufs_.emplace_back(plan_.gather_capacity(0), 0.0f);
    gather_bufs_.emplace_back(slot, 0.0f);
    gather_bufs_.emplace_back(slot, 0.0f);
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

  // Which path each segment takes: fixed by the mode, or measured (--compress auto).
  paths_.assign(size_t(2 * U), path_none);
  for (int u = 0; u < U; ++u)
    for (int s = 0; s < 2; ++s) {
      const Segment& g = plan_.unit(u).seg[s];
      if (g.length == 0) continue;  // e.g. lnf has no compressible prefix: no collective at all
      const bool compress = args_.compress == CompressMode::all ||
                            (args_.compress == CompressMode::non_attention && g.compressible);
      paths_[size_t(2 * u + s)] = compress ? path_tagc : path_plain;
    }
  if (args_.compress == CompressMode::automatic) {
    if (!args_.resume.empty()) {
      // A resumed run keeps the decision it was checkpointed with.
      agree("--resume", [&] {
        const CheckpointData d =
            read_newest_plan(args_.resume, run_header(cfg_, args_, world(), rank(), plan_.owned_size()));
        if (d.auto_json.empty() || d.segment_paths.size() != paths_.size())
          throw std::runtime_error("checkpoint in " + args_.resume + " holds no --compress auto decision");
        auto_ = auto_plan_from_json(nlohmann::json::parse(d.auto_json));
        auto_->source = "checkpoint";
        paths_ = d.segment_paths;
      });
    } else {
      decide_auto();
    }
  }

  const CompressOptions co = compress_options(args_);
  plain_local_ = local_ && co.plain.values == tagc::values_kind::plain_fp32;
  // A unit none of whose segments has a reducer (1 rank) accumulates its gradient in
  // grad_shard_ itself: on one rank the owned shard is the unit, unpadded and contiguous.
  grads_.resize(size_t(U));
  grad_store_.resize(size_t(U));
  unit_reduces_.assign(size_t(U), 0);
  for (int u = 0; u < U; ++u) {
    for (size_t i : {size_t(2 * u), size_t(2 * u + 1)})
      if (paths_[i] != path_none && !segment_local(i)) unit_reduces_[size_t(u)] = 1;
    if (unit_reduces_[size_t(u)]) {
      grad_store_[size_t(u)].assign(plan_.unit(u).size, 0.0f);
      grads_[size_t(u)] = grad_store_[size_t(u)];
    } else {
      grads_[size_t(u)] = std::span<float>(grad_shard_).subspan(plan_.unit(u).seg[0].owned, plan_.unit(u).size);
    }
  }
  reducers_.resize(size_t(U));
  stats_.resize(size_t(U));
  agree("reducer setup", [&] {
    for (int u = 0; u < U; ++u)
      for (int s = 0; s < 2; ++s) {
        const Segment& g = plan_.unit(u).seg[s];
        const uint8_t path = paths_[size_t(2 * u + s)];
        if (path == path_none || segment_local(size_t(2 * u + s))) continue;
        auto& r = reducers_[size_t(u)][size_t(s)];
        r = path == path_tagc ? make_tagc_reducer(co, g.length, world(), rank())
                              : make_plain_reducer(co, g.length, world(), rank());
        r->set_profiling(true);  // stage timings for the log; on the CPU it only reads the clock
        if (r->output_size() != g.shard)
          throw std::logic_error("reducer shard of " + plan_.unit(u).name + " has " + std::to_string(r->output_size()) +
                                 " elements, the shard plan " + std::to_string(g.shard));
      }
  });
  rng_state_ = args_.seed;
  inject_nan_ = fault::nan_at();
}

Trainer::~Trainer() = default;

size_t Trainer::num_parameters() const { return gpt2::num_parameters(cfg_); }

std::string Trainer::segment_name(size_t i) const {
  return plan_.unit(int(i / 2)).name + (i % 2 == 0 ? "/prefix" : "/suffix");
}

void Trainer::check(const tagc::status& s, const char* what) const { throw_if_failed(s, what); }

double Trainer::all_reduce_sum(double x) {
  all_reduce_sum(std::span<double>(&x, 1));
  return x;
}

void Trainer::all_reduce_sum(std::span<double> values) {
  const std::vector<double> in(values.begin(), values.end());
  check(worker_.run([&] { return comm_.all_reduce(std::span<const double>(in), values); }), "all-reduce");
}

RankGroup Trainer::rank_group() {
  return {rank(), world(), [this](std::span<double> v) { all_reduce_sum(v); }};
}

void Trainer::agree_flag(bool failed, const std::string& message, const char* what) {
  const double failures = all_reduce_sum(failed ? 1.0 : 0.0);
  if (failures == 0.0) return;
  if (failed) throw AgreedError(message);
  throw AgreedError(std::string(what) + " failed on another rank (see its message)");
}

float* Trainer::gathered(int u) {
  if (local_) {  // the whole unit, in place (or its rounded copy)
    const size_t at = plan_.unit(u).seg[0].owned;
    return gather_bf16_ ? local_rounded_.data() + at : params_.data() + at;
  }
  if (args_.zero2) return gather_bufs_[size_t(u)].data();
  return u == 0 ? gather_bufs_[0].data() : gather_bufs_[1 + size_t(u % 2)].data();
}

CommWorker::Ticket Trainer::enqueue_gather(int u, bool master) {
  if (local_) {
    // gathered(u) is the owned buffer: a ticket that is already done. With bf16 the unit
    // is rounded into its copy here (what a 2-rank gather would deliver), on this thread.
    if (gather_bf16_) {
      const size_t at = plan_.unit(u).seg[0].owned, n = plan_.unit(u).size;
      for (size_t i = at; i < at + n; ++i) local_rounded_[i] = float(tagc::bfloat16(params_[i]));
    }
    return 0;
  }
  float* dst = gathered(u);
  const bool bf16 = gather_bf16_ && !master;
  return worker_.enqueue([this, u, dst, bf16]() -> tagc::status {
    // Prefix first: its padding spills into the suffix's place, which the suffix's
    // gather then overwrites (see ShardPlan::gather_capacity).
    for (const Segment& g : plan_.unit(u).seg) {
      if (g.length == 0) continue;
      const size_t n = g.padded(world());
      tagc::status st;
      if (bf16) {
        const float* src = params_.data() + g.owned;
        for (size_t i = 0; i < g.shard; ++i) gather_send16_[i] = tagc::bfloat16(src[i]);
        st = comm_.all_gather(std::span<const tagc::bfloat16>(gather_send16_.data(), g.shard),
                              std::span<tagc::bfloat16>(gather_recv16_.data(), n));
        if (st.ok())
          for (size_t i = 0; i < n; ++i) dst[g.offset + i] = float(gather_recv16_[i]);
      } else {
        st = comm_.all_gather(std::span<const float>(params_.data() + g.owned, g.shard),
                              std::span<float>(dst + g.offset, n));
      }
      if (!st.ok())
        return {st.code(), "all-gather of unit " + plan_.unit(u).name + (bf16 ? " (bf16)" : "") + ": " + st.what()};
    }
    return {};
  });
}

void Trainer::enqueue_reduce(int u) {
  worker_.enqueue([this, u, step = step_ + 1]() -> tagc::status {
    const double before = comm_.counters().total_bytes_sent();
    for (int s = 0; s < 2; ++s) {
      auto& r = reducers_[size_t(u)][size_t(s)];
      const Segment& g = plan_.unit(u).seg[s];
      if (!r) {  // 1 rank, beside a reduced segment of the same unit: the mean is the gradient
        if (segment_local(size_t(2 * u + s)))
          std::copy_n(grads_[size_t(u)].data() + g.offset, g.length, grad_shard_.data() + g.owned);
        continue;
      }
      if (tagc::status st = r->reduce_scatter(comm_, std::span<const float>(grads_[size_t(u)].data() + g.offset, g.length),
                                              std::span<float>(grad_shard_.data() + g.owned, g.shard),
                                              &stats_[size_t(u)][size_t(s)]);
          !st.ok())  // which step and unit: the library knows neither
        return {st.code(), "step " + std::to_string(step) + ", " + segment_name(size_t(2 * u + s)) + " (" +
                               (r->compressed() ? "compressed" : "plain") + " reduce-scatter): " + st.what()};
    }
    grad_bytes_ += comm_.counters().total_bytes_sent() - before;
    return {};
  });
}

double Trainer::forward(const int32_t* inputs, const int32_t* targets) {
  const int U = plan_.num_units();
  std::vector<CommWorker::Ticket> tick(size_t(U), 0);
  // Two gathers in flight at the start; afterwards one unit ahead of the compute.
  tick[0] = enqueue_gather(0);
  if (U > 1) tick[1] = enqueue_gather(1);
  for (int u = 0; u < U; ++u) {
    check(worker_.wait(tick[size_t(u)]), "");
    model_->forward_unit(u, gathered(u), u == 0 ? inputs : nullptr);
    // unit u+2 shares u's slot, which u no longer needs
    if (u + 2 < U) tick[size_t(u + 2)] = enqueue_gather(u + 2);
  }
  return model_->forward_head(gathered(0), targets);
}

float Trainer::lr_at(int step) const {
  const float lr = args_.lr;
  if (args_.warmup > 0 && step < args_.warmup) return lr * float(step + 1) / float(args_.warmup);
  if (args_.schedule == Schedule::constant) return lr;
  const int decay = std::max(1, args_.steps - args_.warmup);
  const double progress = std::min(1.0, double(step - args_.warmup) / double(decay));
  return float(args_.lr_min + 0.5 * (lr - args_.lr_min) * (1.0 + std::cos(M_PI * progress)));
}

StepMetrics Trainer::train_step() {
  fault::maybe_stall(step_ + 1, rank());
  const auto t0 = clock_type::now();
  const int U = plan_.num_units();
  const int K = args_.accum;
  (void)worker_.take_busy_seconds();
  (void)worker_.take_wait_seconds();
  const tagc::traffic before = comm_.counters();  // the worker is idle between steps
  grad_bytes_ = 0.0;
  for (auto& g : grads_) std::fill(g.begin(), g.end(), 0.0f);

  const bool inject = inject_nan_ && inject_nan_->step == step_ + 1 && inject_nan_->rank == rank();
  double loss_sum = 0.0;
  for (int micro = 0; micro < K; ++micro) {
    train_loader_->next_batch(inputs_, targets_);
    loss_sum += forward(inputs_.data(), targets_.data());
    if (inject && inject_nan_->unit == "loss") loss_sum = std::numeric_limits<double>::quiet_NaN();
    const bool last = micro == K - 1;
    // FULL_SHARD re-gathers for backward; start the last unit's now, under the head.
    CommWorker::Ticket next = args_.zero2 ? 0 : enqueue_gather(U - 1);
    model_->backward_head(gathered(0), grads_[0].data(), 1.0f / float(K));
    for (int u = U - 1; u >= 0; --u) {
      if (!args_.zero2 && u >= 1) {  // unit 0 is still gathered from forward
        check(worker_.wait(next), "");
        if (u - 1 >= 1) next = enqueue_gather(u - 1);  // into the slot unit u+1 just freed
      }
      model_->backward_unit(u, gathered(u), grads_[size_t(u)].data());
      if (last && inject && inject_nan_->unit == plan_.unit(u).name) {
        const Segment& g = plan_.unit(u).seg[inject_nan_->suffix || plan_.unit(u).seg[0].length == 0 ? 1 : 0];
        grads_[size_t(u)][g.offset] = std::numeric_limits<float>::quiet_NaN();
      }
      // The gradient of unit u is complete: reduce it while unit u-1 computes.
      if (last && unit_reduces_[size_t(u)]) enqueue_reduce(u);
    }
  }
  check(worker_.wait_all(), "");  // the tasks name step, unit and collective

  // One all-reduce for: global gradient norm over all owned shards, the mean loss, and
  // the decode statistics of every rank's shards (each rank decodes only its own);
  // then each unit's sum of squares and each rank's loss, for the non-finite check.
  const size_t W = size_t(world());
  std::vector<double> in(6 + size_t(U) + W, 0.0);
  in[0] = gpt2::sum_of_squares(grad_shard_);
  in[1] = loss_sum;
  for (int u = 0; u < U; ++u)
    for (const Segment& g : plan_.unit(u).seg)
      in[6 + size_t(u)] += gpt2::sum_of_squares(std::span<const float>(grad_shard_).subspan(g.owned, g.shard));
  in[6 + size_t(U) + size_t(rank())] = loss_sum;
  for (int u = 0; u < U; ++u)
    for (int s = 0; s < 2; ++s)
      if (const auto& r = reducers_[size_t(u)][size_t(s)]; r && r->compressed()) {
        const tagc::reduce_stats& st = stats_[size_t(u)][size_t(s)];
        in[2] += double(st.support);
        in[3] += st.load > 0 ? double(st.support) / st.load : 0.0;  // sketch cells
        in[4] += double(st.unresolved);
        in[5] += deferred_entries(st);
      }
  all_reduce_sum(in);
  const double* out = in.data();
  std::vector<std::string> names;
  for (int u = 0; u < U; ++u) names.push_back(plan_.unit(u).name);
  if (const std::string bad = nonfinite_message(step_ + 1, std::span<const double>(in).subspan(6 + size_t(U), W),
                                                std::span<const double>(in).subspan(6, size_t(U)), names);
      !bad.empty())
    throw AgreedError(bad);
  const double norm = std::sqrt(out[0]);
  if (args_.clip > 0.0f && norm > double(args_.clip)) {
    const float scale = float(double(args_.clip) / norm);
    for (float& g : grad_shard_) g *= scale;
  }
  const float lr = lr_at(step_);
  gpt2::adamw_update(params_, grad_shard_, m_, v_, {lr, args_.beta1, args_.beta2, args_.eps, args_.weight_decay},
                     step_ + 1);
  ++step_;

  StepMetrics m;
  m.step = step_;
  m.loss = out[1] / double(K * world());
  m.lr = lr;
  m.grad_norm = norm;
  last_loss_ = m.loss;
  last_norm_ = norm;
  m.step_ms = ms_since(t0);
  m.wait_ms = worker_.take_wait_seconds() * 1e3;
  m.comm_ms = worker_.take_busy_seconds() * 1e3;
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

double Trainer::evaluate(int batches) {
  const std::vector<double> losses = evaluate_batches(batches);
  double sum = 0.0;
  for (double l : losses) sum += l;
  return sum / double(losses.size());
}

std::vector<double> Trainer::evaluate_batches(int batches) {
  val_loader_->reset();
  // Each rank fills its own slots (rank-major), the all-reduce sums the zeros away: every
  // rank gets every batch's loss, for the standard error of the mean (issue 11).
  const size_t n = size_t(batches) * size_t(world());
  std::vector<double> mine(n, 0.0), all(n, 0.0);
  for (int i = 0; i < batches; ++i) {
    val_loader_->next_batch(inputs_, targets_);
    mine[size_t(rank()) * size_t(batches) + size_t(i)] = forward(inputs_.data(), targets_.data());
  }
  check(worker_.run([&] { return comm_.all_reduce(std::span<const double>(mine), std::span<double>(all)); }),
        "all-reduce");
  return all;
}

std::vector<float> Trainer::gather_model() {
  const auto offsets = gpt2::unit_offsets(gpt2::units(cfg_));
  std::vector<float> flat(num_parameters());
  for (int u = 0; u < plan_.num_units(); ++u) {
    // the fp32 master weights, whatever --gather-dtype the model computes with
    const float* src = local_ ? params_.data() + plan_.unit(u).seg[0].owned
                              : (check(worker_.wait(enqueue_gather(u, /*master=*/true)), ""), gathered(u));
    std::copy_n(src, plan_.unit(u).size, flat.begin() + std::ptrdiff_t(offsets[size_t(u)]));
  }
  return flat;
}

void Trainer::init_from_seed() {
  for (int u = 0; u < plan_.num_units(); ++u) {
    std::vector<float> full(plan_.unit(u).size);
    gpt2::init_unit(cfg_, u, args_.seed, full);  // same on every rank: no communication
    plan_.scatter_unit(u, full, params_);
  }
}

void Trainer::init_from_llmc(const std::string& path) {
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
    for (int u = 0; u < plan_.num_units(); ++u)
      plan_.scatter_unit(u, std::span<const float>(ck.params).subspan(offsets[size_t(u)], plan_.unit(u).size),
                         params_);
  });
}

void Trainer::save_checkpoint(const std::string& dir) {
  CheckpointData d;
  agree("checkpoint save", [&] {
    d.header = run_header(cfg_, args_, world(), rank(), plan_.owned_size());
    d.header.step = uint64_t(step_);
    d.header.loader_shard = train_loader_->position().shard;
    d.header.loader_offset = train_loader_->position().offset;
    d.header.rng_state = rng_state_;
    d.segment_paths = paths_;
    if (auto_) d.auto_json = to_json(*auto_).dump();
    d.params = params_;
    d.m = m_;
    d.v = v_;
    for (size_t i = 0; i < paths_.size(); ++i) {
      if (const auto& r = reducers_[i / 2][i % 2]) d.reducer_states.push_back(r->save_state());
      else if (segment_local(i)) d.reducer_states.emplace_back();  // what a plain reducer saves
    }
  });
  RankGroup g = rank_group();
  save_step(dir, d, {args_.keep_checkpoints, last_loss_, last_norm_, config_json(args_)}, g);
}

void Trainer::load_checkpoint(const std::string& dir) {
  RankGroup g = rank_group();
  Resumed res = load_newest(dir, run_header(cfg_, args_, world(), rank(), plan_.owned_size()), config_json(args_), g);
  resume_notes_ = res.notes;
  agree("--resume", [&] {
    CheckpointData& d = res.data;
    const std::string from = res.from.string();
    // The same segments must go through the same paths (error feedback is per path).
    if (!d.segment_paths.empty() && d.segment_paths != paths_) {
      size_t i = 0;
      while (i < paths_.size() && i < d.segment_paths.size() && d.segment_paths[i] == paths_[i]) ++i;
      const auto path = [](size_t k, const std::vector<uint8_t>& p) -> std::string {
        if (k >= p.size()) return "absent";
        return p[k] == path_tagc ? "compressed (tagc)" : p[k] == path_plain ? "plain" : "no collective";
      };
      throw std::runtime_error(
          "checkpoint in " + from + " was written with segment " + (i < paths_.size() ? segment_name(i) : "?") + " " +
          path(i, d.segment_paths) + ", this run has it " + path(i, paths_) +
          ": a resumed --compress auto run must keep the checkpoint's decision (pass --resume so the trainer "
          "takes it from the checkpoint instead of measuring)");
    }
    size_t n = 0;
    for (size_t i = 0; i < paths_.size(); ++i) n += reducers_[i / 2][i % 2] != nullptr || segment_local(i);
    if (d.reducer_states.size() != n)
      throw std::runtime_error("checkpoint in " + from + " holds " + std::to_string(d.reducer_states.size()) +
                               " reducer states, this run has " + std::to_string(n) + " segments");
    for (size_t i = 0, k = 0; i < paths_.size(); ++i) {
      if (auto& r = reducers_[i / 2][i % 2]) check(r->load_state(d.reducer_states[k++]), ("reducer state in " + from).c_str());
      else if (segment_local(i)) ++k;  // nothing to restore
    }
    params_ = std::move(d.params);
    m_ = std::move(d.m);
    v_ = std::move(d.v);
    step_ = int(d.header.step);
    rng_state_ = d.header.rng_state;
    train_loader_->seek({d.header.loader_shard, d.header.loader_offset});
  });
}

}  // namespace train
