// compress_options.hpp: the command line's reducer choice — what tagc-gpt2's flags
// describe as a tagc::reducer_description: the type (--values, --ratio, --index-bits,
// --index-exchange, --decoder, --residual; --baseline-dtype for the plain segments) and
// the run-time knobs (--sparsity, --adaptive, --target-load, --sparsity-warmup,
// --sparsity-schedule, --sparsity-start, --union-bound), so the description alone says how a segment
// reduces (unit_reducer: with --unit-sparsity's theta for its unit). Checked against the trainers' catalogue (reducer_catalogue.hpp) before any
// rank starts; no reducer is built here.
#pragma once

#include "args.hpp"

// defines: tagc::reducer_description, tagc::reducer_arguments
#include "tagc/builder/description.hpp"

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace train {

// The reducer's keys in tagc's description language (tagc/builder/description.hpp) and
// the flag that spells each: `--reducer "index=exact theta=0.99"` is `--index-bits exact
// --sparsity 0.99`. adaptive-load also turns --adaptive on, as the key does in the
// library. Keys without a flag (lanes, adaptive-min, adaptive-max) are not settings of
// tagc-gpt2.
struct ReducerKey {
  const char* key;
  const char* flag;
};
inline constexpr ReducerKey reducer_keys[] = {
    {"values", "values"},       {"ratio", "ratio"},      {"index", "index-bits"},
    {"exchange", "index-exchange"}, {"decoder", "decoder"}, {"residual", "residual"},
    {"theta", "sparsity"},      {"adaptive-load", "target-load"}, {"warmup", "sparsity-warmup"},
    {"warmup-shape", "sparsity-schedule"}, {"warmup-start", "sparsity-start"}, {"union-bound", "union-bound"},
};
// The flag of a key, or nullptr.
const char* flag_of_key(std::string_view key);
// The key=value items of a description text, in order (space- or comma-separated, as
// tagc::parse_reducer_description reads them; an item without '=' has an empty value).
struct DescriptionItem {
  std::string key, value;
};
std::vector<DescriptionItem> description_items(std::string_view text);

struct CompressOptions {
  tagc::reducer_description reducer;  // the compressed segments' reducer: type and knobs
  tagc::reducer_description plain;    // the uncompressed segments' (plain-fp32 | plain-bf16)
  // Where every segment's reducer runs (sharded, the mean over ranks). Carried whole, so
  // whatever reducer_arguments gains reaches every reducer; length, world and rank are the
  // segment's (segment_arguments).
  tagc::reducer_arguments arguments;
  // The gradients' collective (--grad-all-reduce: replicated, every rank then keeping its
  // shard of the sums; two levels: the cross-node stage's). arguments.topo stays sharded:
  // every reducer still delivers the rank's shard (unit_reducer.hpp).
  tagc::topology grad_topology = tagc::topology::sharded;
  // --unit-sparsity: theta per unit or kind of unit, over reducer.sparsity (unit_reducer)
  std::vector<UnitSparsity> unit_sparsity;
};

CompressOptions compress_options(const Args& a);

// Whether a --unit-sparsity entry names `unit`: the unit itself ("mlp.1") or its kind
// ("mlp" names mlp.0, mlp.1, ...).
bool names_unit(const std::string& entry, const std::string& unit);
// The compressed reducer of `unit`: o.reducer, at the theta of the last --unit-sparsity
// entry naming the unit if one does (its warm-up, if any, then ramps to that theta).
tagc::reducer_description unit_reducer(const CompressOptions& o, const std::string& unit);
// Empty when every --unit-sparsity entry names at least one unit of `compressed` (the
// units with a compressed segment) and the reducer accepts its theta; otherwise the error,
// in the flag's words. `units`: every unit's name, to tell a typo from a plain unit.
std::string unit_sparsity_error(const CompressOptions& o, const std::vector<std::string>& units,
                                const std::vector<std::string>& compressed);

// The arguments of one segment's reducer: sharded, the mean over ranks.
tagc::reducer_arguments segment_arguments(const CompressOptions& o, size_t length, int world, int rank);

// The flags that chose `d`, as typed ("--values sketch --ratio 10 --index-bits 4 ..."):
// its type's description text, each key spelled as its flag.
std::string reducer_flags(const tagc::reducer_description& d);
// The --reducer text of a command line: the compressed segments' reducer, type and knobs.
std::string reducer_text(const Args& a);

// Empty when the trainers' catalogue holds opt.reducer and its arguments fit it;
// otherwise a message naming the flags, what is missing, and what is built.
std::string unbuilt_combination(const CompressOptions& opt);
// Every built reducer, one description a line.
std::string built_combinations();

}  // namespace train
