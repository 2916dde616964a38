// preflight.cpp: see preflight.hpp.
// defines: train::validate_args, train::check_world, train::node_count_note, train::estimate_memory,
//          train::available_memory, train::check_memory
#include "preflight.hpp"

#include "compress_options.hpp"
#include "gpt2/layout.hpp"

// defines: tagc::default_catalogue, tagc::workspace_bytes_of (the reducers' workspace query)
#include "tagc/builder/default_catalogue.hpp"
// defines: tagc::gathered_index_cross_bits, tagc::gathered_union_ratio, tagc::routed_index_cross_bits
#include "tagc/cost_model.hpp"

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

// Bytes every segment's reducer allocates at initialize, from tagc's workspace query
// (the default catalogue's types on exec::host; no reducer is instantiated or allocated):
// the compressible prefix compressed unless --compress none (--compress auto counted as
// compressed, the larger), the rest plain unless --compress all.
double reducer_workspace(const std::vector<gpt2::UnitInfo>& units, const Args& a, int world) {
  const CompressOptions o = compress_options(a);
  double total = 0;
  for (const auto& u : units) {
    const size_t lens[2] = {u.compressible_size, u.size - u.compressible_size};
    for (int s = 0; s < 2; ++s) {
      if (lens[s] == 0) continue;
      const bool compressed = a.compress == CompressMode::all || (s == 0 && a.compress != CompressMode::none);
      std::size_t bytes = 0;
      const tagc::status st = tagc::workspace_bytes_of(tagc::default_catalogue<tagc::exec::host>{},
                                                       compressed ? unit_reducer(o, u.name) : o.plain,
                                                       segment_arguments(o, lens[s], world, 0), bytes);
      if (!st.ok()) throw std::runtime_error("memory check, unit " + u.name + ": " + st.message());
      total += double(bytes);
    }
  }
  return total;
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
  if (a.union_bound > 0.0 && (a.index_bits != tagc::index_routed || !a.grad_all_reduce))
    throw ArgsError("--union-bound " + num(a.union_bound) +
                    " bounds what the owners of a routed all-reduce forward: it needs --index-bits routed and "
                    "--grad-all-reduce (a reduce-scatter's owner keeps its sums)");
}

void check_world(const Args& a, int world) {
  if (a.compress == CompressMode::none) return;
  if (a.index_bits == 4 && world > 15)
    throw ArgsError("--index-bits 4 counts at most 15 ranks per element and this job has " + std::to_string(world) +
                    " ranks: use --index-bits exact (the narrowest exact width for the world size)");
  if (a.index_bits == tagc::index_auto && world > 255)
    throw ArgsError("--index-bits exact counts at most 255 ranks, this job has " + std::to_string(world));
}

std::string node_count_note(const Args& a, int nodes) {
  if (a.compress == CompressMode::none || a.index_bits != tagc::index_gathered || a.sparsity < 0.0) return {};
  const double bits = tagc::gathered_index_cross_bits(1.0 - a.sparsity, nodes, tagc::gathered_union_ratio(nodes));
  if (bits <= 16.0) return {};
  return "note: --index-bits gathered across " + std::to_string(nodes) + " nodes sends about " + num(std::round(bits)) +
         " bits per compressed parameter and node at --sparsity " + num(a.sparsity) +
         " (the cost model, with the union measured on d2), more than bf16's 16: its position lists grow with the "
         "nodes; --index-bits routed sends the same sums in about " +
         num(std::round(10.0 * tagc::routed_index_cross_bits(1.0 - a.sparsity)) / 10.0) + " at any node count";
}

std::string MemoryEstimate::describe() const {
  return gib(total()) + " (optimizer state " + gib(optimizer) + ", gradients " + gib(gradients) + ", gathered " +
         "parameters " + gib(gathered) + ", reducers " + gib(reducers) + ", activations " + gib(activations) + ")";
}

MemoryEstimate estimate_memory(const gpt2::Config& cfg, const Args& a, int world) {
  // In doubles: a model too big for 64-bit byte counts must still give a figure.
  const auto units = gpt2::units(cfg);
  double P = 0, biggest = 0;
  for (const auto& u : units) {
    P += double(u.size);
    biggest = std::max(biggest, double(u.size));
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
  // --gather-dtype int8: a coded shard and the gathered pieces (8.125 bits a value; one rank: the model's copy too)
  if (a.gather_dtype == "int8") e.gathered += bytes((biggest / W + biggest) * 260.0 / 256.0 + (W == 1 ? P * f : 0.0));
  e.reducers = bytes(reducer_workspace(units, a, world));  // residual, index, values, decode workspaces
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
