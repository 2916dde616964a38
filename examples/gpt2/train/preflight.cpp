// preflight.cpp: see preflight.hpp.
// defines: train::validate_args, train::check_world, train::estimate_memory,
//          train::available_memory, train::check_memory
#include "preflight.hpp"

#include "gpt2/layout.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace train {
namespace {

std::string gib(uint64_t b) {
  char s[32];
  std::snprintf(s, sizeof s, "%.2f GiB", double(b) / double(1ull << 30));
  return s;
}
std::string num(double x) {
  char s[32];
  std::snprintf(s, sizeof s, "%g", x);
  return s;
}

}  // namespace

void validate_args(const Args& a) {
  if (a.command != "train") return;
  const auto bad = [](const std::string& flag, double v, const std::string& want) {
    throw ArgsError("--" + flag + ": expected " + want + ", got " + num(v));
  };
  if (!(a.lr >= 0.0f)) bad("lr", a.lr, "a learning rate >= 0");
  if (!(a.lr_min >= 0.0f && a.lr_min <= a.lr)) bad("lr-min", a.lr_min, "a value in [0, --lr = " + num(a.lr) + "]");
  if (!(a.beta1 >= 0.0f && a.beta1 < 1.0f)) bad("beta1", a.beta1, "a value in [0, 1)");
  if (!(a.beta2 >= 0.0f && a.beta2 < 1.0f)) bad("beta2", a.beta2, "a value in [0, 1)");
  if (!(a.eps > 0.0f)) bad("eps", a.eps, "a value > 0");
  if (!(a.weight_decay >= 0.0f)) bad("weight-decay", a.weight_decay, "a value >= 0");
  if (!(a.clip >= 0.0f)) bad("clip", a.clip, "a norm > 0, or 'none'");
}

void check_world(const Args& a, int world) {
  if (a.compress == CompressMode::none) return;
  if (a.index_bits == 4 && world > 15)
    throw ArgsError("--index-bits 4 counts at most 15 ranks per element and this job has " + std::to_string(world) +
                    " ranks: use --index-bits exact (the narrowest exact width for the world size)");
  if (a.index_bits == index_bits_exact && world > 255)
    throw ArgsError("--index-bits exact counts at most 255 ranks, this job has " + std::to_string(world));
}

std::string MemoryEstimate::describe() const {
  return gib(total()) + " (optimizer state " + gib(optimizer) + ", gradients " + gib(gradients) + ", gathered " +
         "parameters " + gib(gathered) + ", reducers " + gib(reducers) + ", activations " + gib(activations) + ")";
}

MemoryEstimate estimate_memory(const gpt2::Config& cfg, const Args& a, int world) {
  // In doubles: a model too big for 64-bit byte counts must still give a figure.
  const auto units = gpt2::units(cfg);
  double P = 0, biggest = 0, compressible = 0;
  for (const auto& u : units) {
    P += double(u.size);
    biggest = std::max(biggest, double(u.size));
    compressible += double(u.compressible_size);
  }
  const double W = world, f = sizeof(float);
  const double B = a.B, T = a.T, C = cfg.channels, L = cfg.num_layers, NH = cfg.num_heads, Vp = cfg.padded_vocab_size;
  MemoryEstimate e;
  const auto bytes = [](double x) { return x >= 1.8e19 ? uint64_t(1.8e19) : uint64_t(x); };
  e.optimizer = bytes(4 * std::ceil(P / W) * f);
  e.gradients = bytes(P * f);
  e.gathered = bytes((a.zero2 ? P : double(units.front().size) + 2 * biggest) * f);
  // --gather-dtype bf16: a 16-bit send shard and receive segment beside the fp32 slots
  if (a.gather_dtype == "bf16") e.gathered += bytes((biggest / W + biggest) * 2);
  const double reduced = a.compress == CompressMode::none ? 0.0 : a.compress == CompressMode::all ? P : compressible;
  e.reducers = bytes(2 * reduced * f);  // residual + sketch/values scratch
  // Model::activations: per layer ~16 BTC + NH*B*T*T, plus the head's B*T*Vp, scratch.
  e.activations = bytes((L * (16 * B * T * C + NH * B * T * T) + B * T * Vp + 16 * B * T * C) * f);
  return e;
}

uint64_t available_memory() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  uint64_t kb = 0;
  std::string unit;
  while (f >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

void check_memory(const MemoryEstimate& e, int ranks_on_host, uint64_t available, const std::string& model) {
  if (available == 0) return;
  const double need = double(e.total()) * double(ranks_on_host);
  if (need <= double(available)) return;
  throw std::runtime_error("--model " + model + " needs about " + e.describe() + " per rank, " +
                           std::to_string(ranks_on_host) + " rank(s) on this host: " + gib(uint64_t(std::min(need, 1.8e19))) +
                           ", but only " + gib(available) +
                           " are available (MemAvailable): use a smaller --model, --B or --T, or more hosts");
}

}  // namespace train
