// args.hpp: the command line of tagc-gpt2 — one struct with every option, its
// defaults, and the parser that fills it.
//
//   tagc-gpt2 <command> [--flag value | --flag=value | --switch] ...
//   commands: train, prepare, eval, sample, tokenize, help
//
// Parsing never exits: a bad flag or value throws ArgsError whose message names the
// flag and what was expected; main() prints it and returns 2.
#pragma once

// defines: tagc::values_kind, tagc::index_exchange, tagc::decode_mode, tagc::residual_kind,
//          tagc::named, tagc::index_auto, tagc::index_shared, tagc::index_pooled,
//          tagc::index_gathered, tagc::index_routed
#include "tagc/builder/description.hpp"

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string_view>
#include <string>
#include <vector>

namespace train {

class ArgsError : public std::runtime_error {
 public:
  explicit ArgsError(const std::string& what) : std::runtime_error(what) {}
};

// automatic ("--compress auto"): per segment, the cost model decides (auto_select.hpp).
enum class CompressMode { none, non_attention, all, automatic };
enum class Schedule { constant, cosine };
// The reducer's choices are the library's own types and names (tagc/builder/description.hpp:
// tagc::values_kind, tagc::index_exchange, tagc::decode_mode, tagc::residual_kind,
// tagc::schedule_shape; --index-bits exact, shared, pooled, gathered and routed are
// tagc::index_auto, tagc::index_shared, tagc::index_pooled, tagc::index_gathered and
// tagc::index_routed): the flags spell them as the
// library's name tables do.

// One --unit-sparsity entry: `unit` names a unit ("embed", "mlp.1") or a kind ("mlp": every
// layer's); theta in [0, 1].
struct UnitSparsity {
  std::string unit;
  double theta = 0.0;
  bool operator==(const UnitSparsity&) const = default;
};
// "embed=0.9875,mlp=0.9" (the flag's own text; "" when none).
std::string unit_sparsity_text(const std::vector<UnitSparsity>& u);

struct Args {
  std::string command;

  // model: a preset (dN) and optional overrides (-1 = keep the preset's value)
  std::string model = "d2";
  int L = -1, C = -1, NH = -1, maxT = -1;
  // --model, --L, --C, --NH or --maxT on the command line: with --init-from, the shape
  // they give must be the checkpoint's (model_config.hpp: with_init_shape)
  bool shape_given = false;

  // batch
  int B = 4, T = 64, accum = 1;
  int steps = 50;
  uint64_t seed = 1337;

  // optimizer
  float lr = 3e-4f, lr_min = 0.0f;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.0f;
  float clip = 1.0f;  // <= 0: no clipping ("--clip none")
  Schedule schedule = Schedule::cosine;
  int warmup = 0;

  // sharding and compression
  bool zero2 = false;  // keep gathered params from forward for backward (ZeRO-2-like)
  CompressMode compress = CompressMode::non_attention;
  std::string baseline_dtype = "fp32";
  // The parameter all-gather's wire format: fp32, or bf16 (each rank rounds its fp32 master
  // shard to bf16, the gathered weights the model computes with are those values widened;
  // master weights, AdamW state and gradients stay fp32: FSDP's MixedPrecision(param_dtype=bf16))
  std::string gather_dtype = "fp32";
  // --ranks-per-node K: gradients reduce-scatter plainly among a node's K ranks and
  // compressed across nodes (tagc::TwoLevelReducer); 1: every rank its own node (flat);
  // 0 ("auto"): the ranks that share a host
  int ranks_per_node = 1;
  // A 1-bit index across more than 2 ranks (flat) or nodes (two levels) holds back most of
  // the update (summed counters carry); refused unless this is set
  bool allow_index_carries = false;
  // --grad-all-reduce: every gradient exchange all-reduces (DDP; with ranks per node, HSDP:
  // plain inside the node, all-reduced across nodes) and each rank keeps its shard, so a
  // run has replicated training's bytes and quality; false: reduce-scatter (ZeRO-3, FSDP)
  bool grad_all_reduce = false;
  // --union-bound B (> 0, with --index-bits routed and --grad-all-reduce): each owner of the
  // routed all-reduce forwards at most ceil(B k / N) of its largest sums (tagc's
  // reducer_arguments::union_bound); 0: every nonzero sum
  double union_bound = 0.0;
  // index_bits: 1, 4, tagc::index_auto (--index-bits exact: the narrowest exact width for the
  // world size), tagc::index_shared (--index-bits shared: one selection for all ranks, a
  // rotating leader's top-k) or tagc::index_pooled (--index-bits pooled: one selection for all
  // ranks, the union of every rank's largest, about k; bytes per rank independent of the world
  // size) or tagc::index_gathered (--index-bits gathered: every rank's own top-k all-gathered, the
  // exact index's sums with the positions as lists) or tagc::index_routed (--index-bits routed:
  // every rank's own top-k sent to the shards' owners; bytes per rank independent of the world
  // size); these: packed values only
  int ratio = 10, index_bits = 4;
  // What a compressed segment sends for its kept entries (--values; not the plain kinds,
  // which are --baseline-dtype's), and how the index travels (the paper all-reduces it;
  // reduce-scatter sends each shard's part to its owner only: half the index bytes, needs
  // an exact index)
  tagc::values_kind values = tagc::values_kind::sketch;
  tagc::index_exchange index_exchange = tagc::index_exchange::all_reduce;
  double sparsity = -1.0;  // < 0: the paper's pairing for the ratio
  // --unit-sparsity: theta of the named units (a unit, "embed", "mlp.1", or every unit of a
  // kind, "mlp"), overriding --sparsity there; in the order given, the last match wins
  std::vector<UnitSparsity> unit_sparsity;
  tagc::decode_mode decoder = tagc::decode_mode::peel_then_estimate;
  // --residual bf16: error-feedback residual stored in bf16 (SparsifyBf16ResidualPolicy)
  tagc::residual_kind residual = tagc::residual_kind::fp32;
  bool adaptive = false;      // tagc adaptive theta: steer each segment's largest sketch load
  double target_load = 0.6;   // ... towards this (peeling is exact below ~0.81)
  // tagc::sparsity_schedule: theta ramps from sparsity_start to the target over the first
  // sparsity_warmup calls of each reducer (0: off); exponential in the density, or linear
  int sparsity_warmup = 0;
  tagc::schedule_shape sparsity_shape = tagc::schedule_shape::exponential;  // --sparsity-schedule exp|linear
  double sparsity_start = 0.75;
  bool check_collectives = false;  // tagc::mpi_communicator's cross-rank argument check
  // --compress auto: what-if overrides of the measured link (< 0: measure at start-up)
  double link_mbps = -1.0;        // link bandwidth per rank, Mbit/s
  double link_latency_us = -1.0;  // per-collective latency, microseconds

  // data
  std::string train_data = "data/tokens/corpus_train.bin";
  std::string val_data = "data/tokens/corpus_val.bin";
  int val_every = 0, val_batches = 4;
  // --shuffle: each epoch visits the shards and the global batches within them in a
  // seeded random order (gpt2::DataOrder); off: the stream in order, as llm.c reads it
  bool shuffle = false;
  uint64_t shuffle_seed = 1337;

  // output
  std::string log;         // JSON lines
  int print_every = 10;    // progress line period when stderr is not a terminal
  std::string checkpoint_dir;
  int checkpoint_every = 0;
  int keep_checkpoints = 2;          // complete steps kept in --checkpoint-dir (checkpoint_store.hpp)
  double collective_timeout = 300;   // seconds a collective may wait for its peers (watchdog.hpp)
  std::string resume;
  std::string init_from;   // llm.c checkpoint to start from
  std::string save_model;  // llm.c checkpoint written at the end

  // divergence guard (divergence_guard.hpp): a step judged unhealthy is not saved
  double guard_loss_spike = 2.0;   // loss above this x the best healthy loss (0: off)
  double guard_grad_spike = 100.0; // grad norm above this x its running mean (0: off)
  double guard_param_max = 1e3;    // a parameter beyond this magnitude (0: off)
  int guard_rewind = 0;            // > 0: rewind to the last healthy step, at most this often

  // prepare / eval / sample / tokenize
  std::string tokenizer_dir = "data/gpt2";
  std::string corpus = "data/corpus";
  std::string out_dir = "data/tokens";
  double val_fraction = 0.05;
  std::string model_file, data;
  std::string prompt = "\n";
  int tokens = 32, top_k = 0;
};

// argv[1] is the command. Throws ArgsError.
Args parse_args(int argc, const char* const* argv);
// The help text (every command with its flags and their defaults); `program` names the
// executable in it (tagc-gpt2, tagc-gpt2-cuda).
std::string usage(const std::string& program = "tagc-gpt2");
// Every flag's name, without "--" (run_config.cpp checks each is classified).
std::vector<std::string> flag_names();
// Cross-flag checks of a parsed command line (preflight.cpp): optimizer values in range.
// Throws ArgsError in the command line's words.
void validate_args(const Args& a);

// The names of the trainer's own choices (arg_names.cpp), as the flags spell them; the
// reducer's choices have the library's (tagc::name_table, tagc::to_string).
std::span<const tagc::named<CompressMode>> name_table(CompressMode);
std::span<const tagc::named<Schedule>> name_table(Schedule);
std::string_view to_string(CompressMode m);
std::string_view to_string(Schedule s);

}  // namespace train
