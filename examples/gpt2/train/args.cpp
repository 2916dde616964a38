// args.cpp: see args.hpp. A table of flags, each with a setter that parses its value,
// so adding a flag is one line and every value error names its flag.
// defines: train::parse_args, train::usage, train::flag_names
#include "args.hpp"
#include "compress_options.hpp"

#include <algorithm>
#include <charconv>
#include <cctype>
#include <cmath>
#include <functional>
#include <initializer_list>
#include <map>
#include <string_view>
#include <vector>

namespace train {
namespace {

template <class T>
T number(const std::string& flag, const std::string& v) {
  T out{};
  const char* b = v.data();
  const char* e = v.data() + v.size();
  auto [p, ec] = std::from_chars(b, e, out);
  if (ec != std::errc{} || p != e || v.empty())
    throw ArgsError("--" + flag + ": expected a number, got '" + v + "'");
  return out;
}
int positive(const std::string& flag, const std::string& v, int min = 1) {
  const int x = number<int>(flag, v);
  if (x < min) throw ArgsError("--" + flag + ": must be >= " + std::to_string(min) + ", got " + v);
  return x;
}
float finite(const std::string& flag, const std::string& v) {
  const float x = number<float>(flag, v);
  if (!std::isfinite(x)) throw ArgsError("--" + flag + ": must be finite, got " + v);
  return x;
}

// A non-negative finite factor or bound (0: the rule is off).
double factor(const std::string& flag, const std::string& v) {
  const double x = number<double>(flag, v);
  if (!(x >= 0.0 && std::isfinite(x))) throw ArgsError("--" + flag + ": expected a value >= 0 (0: off), got " + v);
  return x;
}

// "embed=0.99,mlp=0.9": unit names as gpt2::units spells them (letters, digits, dots).
std::vector<UnitSparsity> parse_unit_sparsity(const std::string& v) {
  const std::string flag = "--unit-sparsity";
  std::vector<UnitSparsity> out;
  size_t at = 0;
  while (at <= v.size()) {
    const size_t end = std::min(v.find(',', at), v.size());
    const std::string item = v.substr(at, end - at);
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      throw ArgsError(flag + ": expected UNIT=THETA[,UNIT=THETA...], got '" + item + "' in '" + v + "'");
    UnitSparsity u{item.substr(0, eq), 0.0};
    for (const char c : u.unit)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.'))
        throw ArgsError(flag + ": '" + u.unit + "' is not a unit name (e.g. embed, mlp, mlp.1)");
    u.theta = number<double>("unit-sparsity", item.substr(eq + 1));
    if (!(u.theta >= 0.0 && u.theta <= 1.0))
      throw ArgsError(flag + ": " + u.unit + ": expected theta in [0, 1], got " + item.substr(eq + 1));
    out.push_back(u);
    at = end + 1;
  }
  return out;
}

// "a|b|c": the names of a choice's values that `takes` accepts (all without it), in the
// order of its name table (tagc::name_table for the reducer's choices, arg_names.cpp for
// the trainer's own).
template <class E>
std::string choices(E, bool (*takes)(E) = nullptr) {
  return tagc::name_choices<E>([takes](E e) { return !takes || takes(e); });
}
// The value of a choice that `v` names; the error lists choices(E{}, takes).
template <class E>
E choice(const std::string& flag, const std::string& v, bool (*takes)(E) = nullptr) {
  for (const auto& row : name_table(E{}))
    if ((!takes || takes(row.value)) && v == row.name) return row.value;
  throw ArgsError("--" + flag + ": expected " + choices(E{}, takes) + ", got '" + v + "'");
}
// A choice flag's help: "a|b|c (default)".
template <class E>
std::string choices_help(E default_value, bool (*takes)(E) = nullptr) {
  return choices(default_value, takes) + " (" + std::string(to_string(default_value)) + ")";
}
// --values takes the compressed kinds; the plain ones are --baseline-dtype's.
bool compressed_values(tagc::values_kind v) { return !tagc::is_plain(v); }

struct Flag {
  bool is_switch;
  std::function<void(Args&, const std::string&)> set;
  std::string help;
};

const std::map<std::string, Flag>& flags();

// --reducer TEXT: tagc's description language. The library's parser reads the text (its
// refusal names an unknown key or a malformed value); then each key=value is set as the
// flag that spells the key (reducer_keys), in order, so both spellings are checked and
// stored alike and a later flag or key overrides an earlier one.
void set_reducer(Args& a, const std::string& text) {
  tagc::reducer_description parsed;
  if (const tagc::status s = tagc::parse_reducer_description(text, parsed); !s.ok())
    throw ArgsError("--reducer: " + s.message());
  for (const DescriptionItem& i : description_items(text)) {
    const char* flag = flag_of_key(i.key);
    if (!flag) {
      std::string keys;
      for (const ReducerKey& k : reducer_keys) keys += (keys.empty() ? "" : ", ") + std::string(k.key);
      throw ArgsError("--reducer: " + i.key + " is not a setting of tagc-gpt2 (its keys: " + keys + ")");
    }
    try {
      flags().at(flag).set(a, i.value);
    } catch (const ArgsError& e) {
      throw ArgsError("--reducer " + i.key + "=" + i.value + ": " + e.what());
    }
    if (i.key == "adaptive-load") a.adaptive = true;
  }
}

const std::map<std::string, Flag>& flags() {
  using A = Args;
  using S = const std::string&;
  static const std::map<std::string, Flag> f = {
      {"model", {false, [](A& a, S v) { a.model = v; a.shape_given = true; }, "d2|d4|d6|d12 (default d2; with --init-from: the checkpoint's shape, a different one is refused)"}},
      {"L", {false, [](A& a, S v) { a.L = positive("L", v); a.shape_given = true; }, "override layers"}},
      {"C", {false, [](A& a, S v) { a.C = positive("C", v); a.shape_given = true; }, "override channels"}},
      {"NH", {false, [](A& a, S v) { a.NH = positive("NH", v); a.shape_given = true; }, "override heads"}},
      {"maxT", {false, [](A& a, S v) { a.maxT = positive("maxT", v); a.shape_given = true; }, "override max sequence length"}},
      {"B", {false, [](A& a, S v) { a.B = positive("B", v); }, "micro-batch per rank (default 4)"}},
      {"T", {false, [](A& a, S v) { a.T = positive("T", v); }, "sequence length (default 64)"}},
      {"accum", {false, [](A& a, S v) { a.accum = positive("accum", v); }, "micro-batches per step (default 1)"}},
      {"steps", {false, [](A& a, S v) { a.steps = positive("steps", v, 0); }, "optimizer steps (default 50)"}},
      {"seed", {false, [](A& a, S v) { a.seed = number<uint64_t>("seed", v); }, "init/sampling seed (1337)"}},
      {"lr", {false, [](A& a, S v) { a.lr = finite("lr", v); }, "peak learning rate (3e-4)"}},
      {"lr-min", {false, [](A& a, S v) { a.lr_min = finite("lr-min", v); }, "cosine floor (0)"}},
      {"beta1", {false, [](A& a, S v) { a.beta1 = finite("beta1", v); }, "AdamW beta1 (0.9)"}},
      {"beta2", {false, [](A& a, S v) { a.beta2 = finite("beta2", v); }, "AdamW beta2 (0.999)"}},
      {"eps", {false, [](A& a, S v) { a.eps = finite("eps", v); }, "AdamW eps (1e-8)"}},
      {"weight-decay", {false, [](A& a, S v) { a.weight_decay = finite("weight-decay", v); }, "decoupled, all params (0)"}},
      {"clip", {false, [](A& a, S v) {
         a.clip = v == "none" ? 0.0f : finite("clip", v);
         if (v != "none" && !(a.clip > 0.0f)) throw ArgsError("--clip: expected a norm > 0, or 'none', got " + v);
       }, "global-norm clip or 'none' (1.0)"}},
      {"schedule", {false, [](A& a, S v) { a.schedule = choice<Schedule>("schedule", v); },
       choices_help(Args{}.schedule)}},
      {"warmup", {false, [](A& a, S v) { a.warmup = positive("warmup", v, 0); }, "linear warmup steps (0)"}},
      {"zero2", {true, [](A& a, S) { a.zero2 = true; }, "keep gathered params from forward for backward"}},
      {"compress", {false, [](A& a, S v) {
         a.compress = choice<CompressMode>("compress", v);
       }, choices_help(Args{}.compress) + "; auto: the cost model picks per segment"}},
      {"link-mbps", {false, [](A& a, S v) {
         a.link_mbps = number<double>("link-mbps", v);
         if (!(a.link_mbps > 0.0 && std::isfinite(a.link_mbps)))
           throw ArgsError("--link-mbps: expected a bandwidth > 0 (Mbit/s), got " + v);
       }, "--compress auto: assume this link bandwidth per rank, Mbit/s (default: measured)"}},
      {"link-latency-us", {false, [](A& a, S v) {
         a.link_latency_us = number<double>("link-latency-us", v);
         if (!(a.link_latency_us >= 0.0 && std::isfinite(a.link_latency_us)))
           throw ArgsError("--link-latency-us: expected a latency >= 0 (microseconds), got " + v);
       }, "--compress auto: assume this per-collective latency, us (default: measured)"}},
      {"baseline-dtype", {false, [](A& a, S v) {
         if (v != "fp32" && v != "bf16") throw ArgsError("--baseline-dtype: expected fp32|bf16, got '" + v + "'");
         a.baseline_dtype = v;
       }, "uncompressed reduce-scatter in fp32|bf16 (fp32)"}},
      {"gather-dtype", {false, [](A& a, S v) {
         if (v != "fp32" && v != "bf16" && v != "int8")
           throw ArgsError("--gather-dtype: expected fp32|bf16|int8, got '" + v + "'");
         a.gather_dtype = v;
       }, "parameter all-gather in fp32|bf16|int8 (fp32); bf16: the model computes with the bf16-rounded master "
          "weights, half the gather bytes; int8: with weights coded in blocks of 256 (int8 and an fp32 scale "
          "each), 0.51x bf16's bytes; master weights, AdamW state and gradients stay fp32"}},
      {"ranks-per-node", {false, [](A& a, S v) {
         if (v == "auto") { a.ranks_per_node = 0; return; }
         a.ranks_per_node = number<int>("ranks-per-node", v);
         if (a.ranks_per_node < 1) throw ArgsError("--ranks-per-node: expected a count >= 1 or 'auto', got " + v);
       }, "ranks per node K|auto (1): gradients reduce-scatter plainly inside a node of K ranks and compressed "
          "across nodes (two levels); auto: the ranks sharing a host; must divide the world size"}},
      {"grad-all-reduce", {true, [](A& a, S) { a.grad_all_reduce = true; },
         "all-reduce the gradients (DDP; with --ranks-per-node, HSDP: plain inside a node, all-reduced across "
         "nodes) instead of reduce-scattering them (ZeRO-3), each rank keeping its shard: replicated training's "
         "bytes and quality"}},
      {"union-bound", {false, [](A& a, S v) {
         a.union_bound = number<double>("union-bound", v);
         if (!(a.union_bound >= 0.0 && a.union_bound <= 1e6))
           throw ArgsError("--union-bound: expected a multiple of k in [0, 1e6], got " + v);
       }, "B (0): --index-bits routed with --grad-all-reduce: each owner forwards at most ceil(B k / N) of its "
          "largest summed entries and the ranks keep the rest in their residuals, so every rank receives about "
          "B k entries at any world size (0: the union of the ranks' picks, which grows with it)"}},
      {"allow-index-carries", {true, [](A& a, S) { a.allow_index_carries = true; },
         "run a 1-bit index across more than 2 ranks (or nodes) although its summed counters carry and hold "
         "back most kept entries (measured 49-80 % at 3-16 ranks); the step line shows the share held back"}},
      {"reducer", {false, set_reducer,
         "the compressed segments' reducer in tagc's description language, e.g. \"values=packed-bf16 index=exact "
         "theta=0.9875 warmup=300\"; keys: values ratio index exchange decoder residual theta adaptive-load warmup "
         "warmup-shape warmup-start union-bound, each the same setting as its flag (--values --ratio --index-bits "
         "--index-exchange --decoder --residual --sparsity --target-load with --adaptive --sparsity-warmup "
         "--sparsity-schedule --sparsity-start --union-bound)"}},
      {"ratio", {false, [](A& a, S v) {
         a.ratio = number<int>("ratio", v);
         if (a.ratio != 2 && a.ratio != 4 && a.ratio != 10) throw ArgsError("--ratio: expected 2|4|10, got " + v);
       }, "sketch ratio 2|4|10 (10)"}},
      {"index-bits", {false, [](A& a, S v) {
         if (v == "exact") { a.index_bits = tagc::index_auto; return; }
         if (v == "shared") { a.index_bits = tagc::index_shared; return; }
         if (v == "pooled") { a.index_bits = tagc::index_pooled; return; }
         if (v == "gathered") { a.index_bits = tagc::index_gathered; return; }
         if (v == "routed") { a.index_bits = tagc::index_routed; return; }
         a.index_bits = number<int>("index-bits", v);
         if (a.index_bits != 1 && a.index_bits != 4)
           throw ArgsError("--index-bits: expected 1|4|exact|shared|pooled|gathered|routed, got " + v);
       }, "1|4|exact|shared|pooled|gathered|routed (" + tagc::index_bits_name(Args{}.index_bits) + "); exact: the narrowest "
          "exact width for the world size; shared: one selection for all ranks (a rotating leader's top-k); pooled: one "
          "selection for all ranks (the union of every rank's largest, about k), every rank's values there; gathered: "
          "every rank's own top-k all-gathered, its values where it picked (the exact index's sums, its positions as "
          "lists); routed: every rank's own top-k sent to the shards' owners as (offset, value) entries, the "
          "gathered index's sums with no index (its bytes do not grow with the world size) (shared, pooled, gathered "
          "and routed: --values packed|packed-bf16)"}},
      {"values", {false, [](A& a, S v) {
         a.values = choice("values", v, compressed_values);
       }, choices_help(Args{}.values, compressed_values) + "; packed: exact values at the union positions"}},
      {"residual", {false, [](A& a, S v) {
         a.residual = choice<tagc::residual_kind>("residual", v);
       }, choices_help(Args{}.residual) + ": storage of the error-feedback residual"}},
      {"index-exchange", {false, [](A& a, S v) {
         a.index_exchange = choice<tagc::index_exchange>("index-exchange", v);
       }, choices_help(Args{}.index_exchange) + "; reduce-scatter: half the index bytes"}},
      {"sparsity", {false, [](A& a, S v) {
         a.sparsity = number<double>("sparsity", v);
         if (!(a.sparsity >= 0.0 && a.sparsity < 1.0))
           throw ArgsError("--sparsity: expected a value in [0, 1), got " + v +
                           (a.sparsity == 1.0 ? " (1 would keep no entry: the compressed units would never learn; "
                                                "use --compress none for units that should not be compressed)"
                                              : ""));
       }, "theta in [0,1] (default: 0.8/0.9/0.9875 for ratio 2/4/10)"}},
      {"unit-sparsity", {false, [](A& a, S v) { a.unit_sparsity = parse_unit_sparsity(v); },
       "UNIT=THETA[,...]: theta of the named units (embed, mlp.1; or a kind: mlp, every layer's), "
       "overriding --sparsity there; the last match wins"}},
      {"decoder", {false, [](A& a, S v) {
         a.decoder = choice<tagc::decode_mode>("decoder", v);
       }, choices_help(Args{}.decoder)}},
      {"adaptive", {true, [](A& a, S) { a.adaptive = true; }, "adaptive theta per segment (tagc::adaptive_sparsity)"}},
      {"target-load", {false, [](A& a, S v) {
         a.target_load = number<double>("target-load", v);
         if (!(a.target_load > 0.0 && a.target_load < 0.82)) throw ArgsError("--target-load: expected (0, 0.82), got " + v);
       }, "adaptive theta's sketch load target (0.6)"}},
      {"sparsity-warmup", {false, [](A& a, S v) { a.sparsity_warmup = positive("sparsity-warmup", v, 0); },
       "theta warm-up steps per reducer, from --sparsity-start to the target (0: off)"}},
      {"sparsity-schedule", {false, [](A& a, S v) {
         a.sparsity_shape = choice<tagc::schedule_shape>("sparsity-schedule", v);
       }, choices_help(Args{}.sparsity_shape) + ": the density 1 - theta falls geometrically (DGC) or linearly"}},
      {"sparsity-start", {false, [](A& a, S v) {
         a.sparsity_start = number<double>("sparsity-start", v);
         if (!(a.sparsity_start >= 0.0 && a.sparsity_start < 1.0))
           throw ArgsError("--sparsity-start: expected a value in [0, 1), got " + v);
       }, "theta of the first step of the warm-up (0.75; 0: dense)"}},
      {"check-collectives", {true, [](A& a, S) { a.check_collectives = true; }, "MPI cross-rank argument check per collective"}},
      {"train-data", {false, [](A& a, S v) { a.train_data = v; }, "train shard file or dir"}},
      {"val-data", {false, [](A& a, S v) { a.val_data = v; }, "val shard file or dir"}},
      {"shuffle", {true, [](A& a, S) { a.shuffle = true; }, "train batches in a seeded random order, each once per epoch "
                                                                "(default: in the order of the data)"}},
      {"shuffle-seed", {false, [](A& a, S v) { a.shuffle_seed = number<uint64_t>("shuffle-seed", v); a.shuffle = true; },
                        "--shuffle's seed (1337); implies --shuffle"}},
      {"val-every", {false, [](A& a, S v) { a.val_every = positive("val-every", v, 0); }, "val loss before step 1 (logged as step 0) and every K steps (0: at the end only)"}},
      {"val-batches", {false, [](A& a, S v) { a.val_batches = positive("val-batches", v, 0); }, "val batches (4; 0: none)"}},
      {"log", {false, [](A& a, S v) { a.log = v; }, "JSON-lines metrics file"}},
      {"print-every", {false, [](A& a, S v) { a.print_every = positive("print-every", v); }, "progress period off a terminal (10)"}},
      {"checkpoint-dir", {false, [](A& a, S v) { a.checkpoint_dir = v; }, "where to write checkpoints"}},
      {"checkpoint-every", {false, [](A& a, S v) { a.checkpoint_every = positive("checkpoint-every", v, 0); }, "checkpoint period (0: end only)"}},
      {"keep-checkpoints", {false, [](A& a, S v) { a.keep_checkpoints = positive("keep-checkpoints", v); }, "complete checkpoint steps kept (2)"}},
      {"collective-timeout", {false, [](A& a, S v) {
         a.collective_timeout = number<double>("collective-timeout", v);
         if (!(a.collective_timeout > 0.0 && a.collective_timeout <= 1e6))
           throw ArgsError("--collective-timeout: expected seconds in (0, 1e6], got " + v);
       }, "seconds a collective waits for every rank before the job ends naming the missing ones (300)"}},
      {"resume", {false, [](A& a, S v) { a.resume = v; }, "checkpoint dir (newest complete step) or one step dir to continue from"}},
      {"init-from", {false, [](A& a, S v) { a.init_from = v; }, "llm.c checkpoint to start from; the model shape is its own (no --model needed)"}},
      {"save-model", {false, [](A& a, S v) { a.save_model = v; }, "write the trained model (llm.c format)"}},
      // divergence guard (divergence_guard.hpp)
      {"guard-loss-spike", {false, [](A& a, S v) { a.guard_loss_spike = factor("guard-loss-spike", v); },
                            "a step whose loss exceeds X times the best healthy loss is not saved (2; 0: off)"}},
      {"guard-grad-spike", {false, [](A& a, S v) { a.guard_grad_spike = factor("guard-grad-spike", v); },
                            "... whose gradient norm exceeds X times its running mean (100; 0: off)"}},
      {"guard-param-max", {false, [](A& a, S v) { a.guard_param_max = factor("guard-param-max", v); },
                           "... holding a parameter beyond this magnitude (1e3; 0: off)"}},
      {"guard-rewind", {false, [](A& a, S v) { a.guard_rewind = positive("guard-rewind", v, 0); },
                        "on an unhealthy step, reload the last healthy checkpoint, at most N times (0: go on)"}},
      {"tokenizer", {false, [](A& a, S v) { a.tokenizer_dir = v; }, "dir with encoder.json + vocab.bpe (data/gpt2)"}},
      {"corpus", {false, [](A& a, S v) { a.corpus = v; }, "prepare: text dir or file (data/corpus)"}},
      {"out", {false, [](A& a, S v) { a.out_dir = v; }, "prepare: output dir (data/tokens)"}},
      {"val-fraction", {false, [](A& a, S v) { a.val_fraction = number<double>("val-fraction", v); }, "prepare: (0.05)"}},
      {"model-file", {false, [](A& a, S v) { a.model_file = v; }, "eval/sample: llm.c checkpoint"}},
      {"data", {false, [](A& a, S v) { a.data = v; }, "eval: shard file or dir"}},
      {"prompt", {false, [](A& a, S v) { a.prompt = v; }, "sample: prompt text"}},
      {"tokens", {false, [](A& a, S v) { a.tokens = positive("tokens", v); }, "sample: tokens to generate (32)"}},
      {"top-k", {false, [](A& a, S v) { a.top_k = positive("top-k", v, 0); }, "sample: 0 = greedy (0)"}},
  };
  return f;
}

// The commands that read a flag; every flag not listed is train's alone.
const std::map<std::string, std::vector<std::string>>& flag_commands() {
  static const std::map<std::string, std::vector<std::string>> m = {
      {"seed", {"train", "sample"}},        {"B", {"train", "eval"}},
      {"T", {"train", "eval"}},             {"val-data", {"train", "eval"}},
      {"val-batches", {"train", "eval"}},   {"tokenizer", {"prepare", "sample", "tokenize"}},
      {"corpus", {"prepare"}},              {"out", {"prepare"}},
      {"val-fraction", {"prepare"}},        {"model-file", {"eval", "sample"}},
      {"data", {"eval"}},                   {"prompt", {"sample"}},
      {"tokens", {"sample"}},               {"top-k", {"sample"}},
  };
  return m;
}
bool reads_flag(const std::string& command, const std::string& flag) {
  const auto it = flag_commands().find(flag);
  if (it == flag_commands().end()) return command == "train";
  return std::find(it->second.begin(), it->second.end(), command) != it->second.end();
}

struct Command {
  const char* name;
  const char* what;
};
constexpr Command commands_help[] = {
    {"train", "sharded GPT-2 training (run N ranks with scripts/mpirun_local.sh -np N)"},
    {"prepare", "text files -> llm.c token shards (--corpus DIR --out DIR)"},
    {"eval", "loss of an llm.c checkpoint (--model-file X --data Y)"},
    {"sample", "generate text (--model-file X --prompt \"...\" --tokens N [--top-k K --seed S])"},
    {"tokenize", "token ids of stdin, one line"},
};

std::string command_flags(const std::string& command) {
  std::string u;
  for (const auto& [name, f] : flags())
    if (reads_flag(command, name)) u += "  --" + name + (f.is_switch ? "" : " V") + "\t" + f.help + "\n";
  return u;
}

}  // namespace

Args parse_args(int argc, const char* const* argv) {
  Args a;
  if (argc < 2) throw ArgsError("missing command; expected one of train, prepare, eval, sample, tokenize, help");
  a.command = argv[1];
  static const char* commands[] = {"train", "prepare", "eval", "sample", "tokenize", "help", "--help", "-h"};
  bool known = false;
  for (const char* c : commands) known |= a.command == c;
  if (!known) throw ArgsError("unknown command '" + a.command + "'; expected train, prepare, eval, sample, tokenize or help");
  for (int i = 2; i < argc; ++i) {
    std::string s = argv[i];
    if (s.rfind("--", 0) != 0) throw ArgsError("unexpected argument '" + s + "' (flags start with --)");
    s = s.substr(2);
    std::string value;
    bool has_value = false;
    if (auto eq = s.find('='); eq != std::string::npos) {
      value = s.substr(eq + 1);
      s = s.substr(0, eq);
      has_value = true;
    }
    const auto it = flags().find(s);
    if (it == flags().end()) throw ArgsError("unknown flag --" + s + " (see: tagc-gpt2 help)");
    if (it->second.is_switch) {
      if (has_value) throw ArgsError("--" + s + " takes no value");
    } else if (!has_value) {
      if (i + 1 >= argc) throw ArgsError("--" + s + ": missing value");
      value = argv[++i];
    }
    it->second.set(a, value);
  }
  validate_args(a);
  // The reducer policies are compiled in, not all combinations: refuse the others here,
  // before any rank starts, with the list of what is built.
  if (a.command == "train" && a.compress != CompressMode::none)
    if (const std::string why = unbuilt_combination(compress_options(a)); !why.empty()) throw ArgsError(why);
  return a;
}

std::string command_usage(const std::string& command, const std::string& program) {
  for (const Command& c : commands_help)
    if (command == c.name)
      return std::string("usage: ").append(program).append(" ").append(command).append(" [flags]\n  ").append(c.what)
          .append("\nflags:\n").append(command_flags(command));
  return {};
}

bool wants_help(int argc, const char* const* argv) {
  for (int i = 2; i < argc; ++i)
    if (std::string_view(argv[i]) == "--help" || std::string_view(argv[i]) == "-h") return true;
  return false;
}

std::string usage(const std::string& program) {
  std::string u = "usage: ";  // appended piece by piece: GCC 12's -Wrestrict misfires on "literal" + string&&
  u += program;
  u += " <command> [flags]   (";
  u += program;
  u += " <command> --help: that command's flags)\n";
  for (const Command& c : commands_help)
    u.append("\n").append(c.name).append(": ").append(c.what).append("\n").append(command_flags(c.name));
  return u;
}

std::string unit_sparsity_text(const std::vector<UnitSparsity>& u) {
  std::string s;
  for (const UnitSparsity& x : u) {
    char b[32];
    const auto r = std::to_chars(b, b + sizeof b, x.theta);  // shortest text that reads back the same
    s += (s.empty() ? "" : ",") + x.unit + "=" + std::string(b, r.ptr);
  }
  return s;
}

std::vector<std::string> flag_names() {
  std::vector<std::string> names;
  for (const auto& [name, f] : flags()) names.push_back(name);
  return names;
}

}  // namespace train
