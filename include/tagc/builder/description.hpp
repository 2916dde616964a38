#pragma once
// defines: tagc::reducer_description (what a reducer is made of, chosen at run
//          time), tagc::values_kind, tagc::residual_kind, tagc::values_family,
//          tagc::wire_type, the name tables (tagc::values_kinds, decode_modes,
//          index_exchanges, residual_kinds, schedule_shapes; name_table(), to_string(),
//          parse_name(), name_choices()), description_text(),
//          parse_reducer_description(), normalized(), type_of(), check_description(),
//          merge_run_time_knobs(). (The description of a compile-time type,
//          tagc::description_of<R>(), is the heavy half's: description_of.hpp.)
//          Light: no Reducer, stage or kernel header.
//
// Adding a values policy: its tag (policy/), its kind in values_kind with a row in
// values_kinds (name, family, wire type: description_of finds it there), and a line in a
// catalogue (default_catalogue.hpp). Every program that names values reads them here.
//
// A description names a reducer's compile-time choices: the values it sends (a
// count sketch, packed union values, or the plain uncompressed baseline, each in
// fp32 or 16 bits), the index width and exchange, the sketch ratio and decoder and
// the residual's storage; a catalogue entry matches on these (type_of()). It also
// carries the run-time knobs a trainer exposes: theta, adaptive theta, theta's warm-up
// schedule and a routed all-reduce's union bound (reducer_arguments' sparsity, adapt,
// schedule and union_bound; AnyReducer::initialize merges them into the arguments). The placement (length,
// world, rank, topology, op) stays reducer_arguments' business. description_text() prints only
// the fields that apply and the knobs that are set:
//
//   values=sketch ratio=10 index=1 exchange=all-reduce decoder=peel-estimate residual=float
//   values=packed-bf16 index=exact exchange=all-reduce residual=float theta=0.99 warmup=200 warmup-shape=exp warmup-start=0.75
//   values=plain-fp32
//
// and parse_reducer_description() reads that text back (space- or comma-separated
// key=value pairs, any order; a key left out keeps its default), so
// parse(description_text(d)) == normalized(d).

#include <charconv>
#include <cmath>
#include <cstddef>
#include <iterator>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "../core/status.hpp"
#include "../policy/choices.hpp"
#include "../policy/sparsity_schedule.hpp"
#include "../reducer_arguments.hpp"

TAGC_BEGIN_NAMESPACE

enum class values_kind { sketch, sketch_bf16, sketch_fp16, packed, packed_bf16, packed_fp16, plain_fp32, plain_bf16 };
enum class residual_kind { fp32, bf16 };
// What a values policy sends (a count sketch, the values at the union of the kept
// positions, or every entry) and the element type it sends them in.
enum class values_family { sketch, packed, plain };
enum class wire_type { fp32, bf16, fp16 };

// The names of the description's choices: one table per choice, read by
// description_text() and parse_reducer_description(), and by every program that spells
// a choice (the GPT-2 trainer's flags, messages, run configuration and checkpoint
// printer; Python's TagcState through the parser). A row: the value and its name.
template <class E>
struct named {
  E value;
  std::string_view name;
};
// values_kind's row also says what the policy is: description_of<R>() (description_of.hpp)
// finds a values policy's kind by its family and wire type. Adding a values policy: its
// kind in values_kind and a row here.
struct values_row {
  values_kind value;
  std::string_view name;
  values_family family;
  wire_type wire;
};
inline constexpr values_row values_kinds[] = {
    {values_kind::sketch, "sketch", values_family::sketch, wire_type::fp32},
    {values_kind::sketch_bf16, "sketch-bf16", values_family::sketch, wire_type::bf16},
    {values_kind::sketch_fp16, "sketch-fp16", values_family::sketch, wire_type::fp16},
    {values_kind::packed, "packed", values_family::packed, wire_type::fp32},
    {values_kind::packed_bf16, "packed-bf16", values_family::packed, wire_type::bf16},
    {values_kind::packed_fp16, "packed-fp16", values_family::packed, wire_type::fp16},
    {values_kind::plain_fp32, "plain-fp32", values_family::plain, wire_type::fp32},
    {values_kind::plain_bf16, "plain-bf16", values_family::plain, wire_type::bf16},
};
inline constexpr named<decode_mode> decode_modes[] = {
    {decode_mode::peel, "peel"}, {decode_mode::estimate, "estimate"}, {decode_mode::peel_then_estimate, "peel-estimate"}};
inline constexpr named<index_exchange> index_exchanges[] = {{index_exchange::all_reduce, "all-reduce"},
                                                            {index_exchange::reduce_scatter, "reduce-scatter"}};
inline constexpr named<residual_kind> residual_kinds[] = {{residual_kind::fp32, "float"}, {residual_kind::bf16, "bf16"}};
inline constexpr named<schedule_shape> schedule_shapes[] = {{schedule_shape::exponential, "exp"},
                                                            {schedule_shape::linear, "linear"}};

// The table of a choice, found by its type: name_table(values_kind{}).
constexpr std::span<const values_row> name_table(values_kind) { return values_kinds; }
constexpr std::span<const named<decode_mode>> name_table(decode_mode) { return decode_modes; }
constexpr std::span<const named<index_exchange>> name_table(index_exchange) { return index_exchanges; }
constexpr std::span<const named<residual_kind>> name_table(residual_kind) { return residual_kinds; }
constexpr std::span<const named<schedule_shape>> name_table(schedule_shape) { return schedule_shapes; }

// A choice's name ("?" for a value outside its table).
template <class E>
  requires requires(E e) { name_table(e); }
constexpr std::string_view to_string(E e) {
  for (const auto& row : name_table(e))
    if (row.value == e) return row.name;
  return "?";
}
// The value that `text` names, if one does.
template <class E>
constexpr bool parse_name(std::string_view text, E& out) {
  for (const auto& row : name_table(E{}))
    if (row.name == text) return (out = row.value, true);
  return false;
}
// "a|b|c": the names of a choice's values that `keep` keeps, in the table's order.
template <class E, class Keep>
std::string name_choices(Keep keep) {
  std::string s;
  for (const auto& row : name_table(E{}))
    if (keep(row.value)) (s.empty() ? s : s += '|') += row.name;
  return s;
}
template <class E>
std::string name_choices() {
  return name_choices<E>([](E) { return true; });
}

constexpr const values_row& values_row_of(values_kind v) {
  for (const values_row& row : values_kinds)
    if (row.value == v) return row;
  return values_kinds[0];  // not reached: every kind has a row (checked below)
}
constexpr values_family family_of(values_kind v) { return values_row_of(v).family; }
constexpr wire_type wire_of(values_kind v) { return values_row_of(v).wire; }
static_assert(
    [] {
      for (std::size_t i = 0; i < std::size(values_kinds); ++i)
        if (values_kinds[i].value != values_kind(i)) return false;
      return true;
    }(),
    "tagc: values_kinds holds one row per values_kind, in the enum's order");
// index=shared: SharedIndexPolicy (one selection for all ranks, no union; shared_reducer.hpp);
// index=pooled: PooledIndexPolicy (the same, every rank's share of it pooled);
// index=gathered: GatheredIndexPolicy (every rank's own top-k all-gathered: the per-rank selection).
// index=routed: RoutedIndexPolicy (every rank's own top-k sent to the shards' owners).
inline constexpr int index_shared = -1;
inline constexpr int index_pooled = -2;
inline constexpr int index_gathered = -3;
inline constexpr int index_routed = -4;
inline constexpr bool is_shared_selection(int index_bits) {
  return index_bits == index_shared || index_bits == index_pooled || index_bits == index_gathered ||
         index_bits == index_routed;
}

struct reducer_description {
  values_kind values = values_kind::sketch;
  int ratio = 10;                   // sketch values: SketchPolicy<ratio>
  int lanes = 1024;                 // sketch values: SketchPolicy<ratio, lanes> (printed only when not 1024)
  int index_bits = 4;               // 1, 2, 4, 8, index_auto (0, "exact": ExactIndexPolicy), index_shared (-1), index_pooled (-2), index_gathered (-3), index_routed (-4)
  index_exchange exchange = index_exchange::all_reduce;
  decode_mode decoder = decode_mode::peel_then_estimate;  // sketch values
  residual_kind residual = residual_kind::fp32;

  // Run-time knobs (not part of the type; left at their defaults, reducer_arguments' own apply):
  double sparsity = -1.0;         // theta; < 0: the paper's pairing for the sketch ratio
  adaptive_sparsity adapt{};      // adaptive theta (sketch values only)
  sparsity_schedule schedule{};   // theta's warm-up over the first calls
  double union_bound = 0.0;       // index=routed, all-reduce: what each owner forwards (reducer_arguments::union_bound)

  friend bool operator==(const reducer_description&, const reducer_description&) = default;
};

inline constexpr bool is_sketch(values_kind v) { return family_of(v) == values_family::sketch; }
inline constexpr bool is_packed(values_kind v) { return family_of(v) == values_family::packed; }
inline constexpr bool is_plain(values_kind v) { return family_of(v) == values_family::plain; }

inline std::string index_bits_name(int bits) {
  return bits == index_auto     ? "exact"
         : bits == index_shared ? "shared"
         : bits == index_pooled ? "pooled"
         : bits == index_gathered ? "gathered"
         : bits == index_routed ? "routed"
                                : std::to_string(bits);
}

// The fields that do not apply to the values kind set to their defaults, so two
// descriptions of the same reducer compare equal (a packed reducer has no ratio,
// lanes or decoder; a plain one nothing but its values).
inline reducer_description normalized(reducer_description d) {
  const reducer_description defaults{};
  if (!is_sketch(d.values)) {
    d.ratio = defaults.ratio;
    d.lanes = defaults.lanes;
    d.decoder = defaults.decoder;
  }
  if (is_plain(d.values)) {
    d.index_bits = defaults.index_bits;
    d.exchange = defaults.exchange;
    d.residual = defaults.residual;
    d.sparsity = defaults.sparsity;  // a plain reducer sends every entry: no theta to set or schedule
    d.adapt = defaults.adapt;
    d.schedule = defaults.schedule;
    d.union_bound = defaults.union_bound;
  }
  if (d.sparsity < 0.0) d.sparsity = defaults.sparsity;
  if (!d.adapt.enabled) d.adapt = defaults.adapt;           // its targets mean nothing while off
  if (!d.schedule.enabled()) d.schedule = defaults.schedule;  // likewise the shape and start
  return d;
}

// The compile-time choices only (knobs at their defaults): what a catalogue entry matches.
inline reducer_description type_of(reducer_description d) {
  const reducer_description defaults{};
  d.sparsity = defaults.sparsity;
  d.adapt = defaults.adapt;
  d.schedule = defaults.schedule;
  d.union_bound = defaults.union_bound;
  return normalized(d);
}

namespace detail {
// The shortest text that reads back as the same double.
inline std::string number_text(double x) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}
inline std::string adaptive_text(const adaptive_sparsity& a) {
  return "adaptive-load=" + number_text(a.target_load) + " adaptive-min=" + number_text(a.min_sparsity) +
         " adaptive-max=" + number_text(a.max_sparsity);
}
inline std::string schedule_text(const sparsity_schedule& s) {
  return "warmup=" + std::to_string(s.warmup_steps) + " warmup-shape=" + std::string(to_string(s.shape)) +
         " warmup-start=" + number_text(s.start);
}
}  // namespace detail

// "values=sketch ratio=10 index=4 exchange=all-reduce decoder=peel-estimate residual=float"
inline std::string description_text(const reducer_description& d) {
  std::string s = "values=" + std::string(to_string(d.values));
  if (is_plain(d.values)) return s;
  if (is_sketch(d.values)) {
    s += " ratio=" + std::to_string(d.ratio);
    if (d.lanes != 1024) s += " lanes=" + std::to_string(d.lanes);
  }
  s += " index=" + index_bits_name(d.index_bits);
  s += " exchange=" + std::string(to_string(d.exchange));
  if (is_sketch(d.values)) s += " decoder=" + std::string(to_string(d.decoder));
  s += " residual=" + std::string(to_string(d.residual));
  const reducer_description n = normalized(d), defaults{};
  if (n.sparsity >= 0.0) s += " theta=" + detail::number_text(n.sparsity);
  if (n.adapt.enabled) {
    s += " adaptive-load=" + detail::number_text(n.adapt.target_load);
    if (n.adapt.min_sparsity != defaults.adapt.min_sparsity)
      s += " adaptive-min=" + detail::number_text(n.adapt.min_sparsity);
    if (n.adapt.max_sparsity != defaults.adapt.max_sparsity)
      s += " adaptive-max=" + detail::number_text(n.adapt.max_sparsity);
  }
  if (n.schedule.enabled()) s += " " + detail::schedule_text(n.schedule);
  if (n.union_bound != defaults.union_bound) s += " union-bound=" + detail::number_text(n.union_bound);
  return s;
}

namespace detail {
inline bool parse_int(std::string_view text, int& out) {
  if (text.empty() || text.size() > 9) return false;
  int v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  return (out = v, true);
}
inline bool parse_double(std::string_view text, double& out) {
  double v = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (r.ec != std::errc{} || r.ptr != text.data() + text.size() || !std::isfinite(v)) return false;
  return (out = v, true);
}
}  // namespace detail

// Reads description_text()'s text (keys: values, ratio, lanes, index, exchange, decoder,
// residual; the knobs theta, adaptive-load, adaptive-min, adaptive-max, warmup,
// warmup-shape, warmup-start, union-bound). Refuses an unknown key or a malformed value, naming it
// and what was expected; whether a knob's value suits the reducer (theta in [0, 1],
// a warm-up start below the target) is the reducer's initialize() to say.
inline status parse_reducer_description(std::string_view text, reducer_description& out) {
  reducer_description d;
  std::size_t i = 0;
  while (i < text.size()) {
    if (text[i] == ' ' || text[i] == ',') {
      ++i;
      continue;
    }
    std::size_t end = i;
    while (end < text.size() && text[end] != ' ' && text[end] != ',') ++end;
    const std::string_view item = text.substr(i, end - i);
    i = end;
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      return {errc::invalid_argument, "reducer description: '" + std::string(item) + "' is not key=value"};
    const std::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
    const auto bad = [&](const std::string& expected) {
      return status{errc::invalid_argument, "reducer description: " + std::string(key) + "=" + std::string(value) +
                                                ", expected " + std::string(key) + "=" + expected};
    };
    if (key == "values") {
      if (!parse_name(value, d.values)) return bad(name_choices<values_kind>());
    } else if (key == "ratio") {
      if (!detail::parse_int(value, d.ratio) || d.ratio < 1) return bad("a whole number >= 1");
    } else if (key == "lanes") {
      if (!detail::parse_int(value, d.lanes) || d.lanes < 1) return bad("a whole number >= 1");
    } else if (key == "index") {
      if (value == "exact") d.index_bits = index_auto;
      else if (value == "shared") d.index_bits = index_shared;
      else if (value == "pooled") d.index_bits = index_pooled;
      else if (value == "gathered") d.index_bits = index_gathered;
      else if (value == "routed") d.index_bits = index_routed;
      else if (!detail::parse_int(value, d.index_bits) ||
               (d.index_bits != 1 && d.index_bits != 2 && d.index_bits != 4 && d.index_bits != 8))
        return bad("1|2|4|8|exact|shared|pooled|gathered|routed");
    } else if (key == "exchange") {
      if (!parse_name(value, d.exchange)) return bad(name_choices<index_exchange>());
    } else if (key == "decoder") {
      if (!parse_name(value, d.decoder)) return bad(name_choices<decode_mode>());
    } else if (key == "residual") {
      if (!parse_name(value, d.residual)) return bad(name_choices<residual_kind>());
    } else if (key == "theta") {
      if (!detail::parse_double(value, d.sparsity)) return bad("a number");
    } else if (key == "adaptive-load") {
      if (!detail::parse_double(value, d.adapt.target_load)) return bad("a number");
      d.adapt.enabled = true;
    } else if (key == "adaptive-min") {
      if (!detail::parse_double(value, d.adapt.min_sparsity)) return bad("a number");
    } else if (key == "adaptive-max") {
      if (!detail::parse_double(value, d.adapt.max_sparsity)) return bad("a number");
    } else if (key == "warmup") {
      int w = 0;
      if (!detail::parse_int(value, w)) return bad("a whole number of calls >= 0");
      d.schedule.warmup_steps = std::uint64_t(w);
    } else if (key == "warmup-shape") {
      if (!parse_name(value, d.schedule.shape)) return bad(name_choices<schedule_shape>());
    } else if (key == "warmup-start") {
      if (!detail::parse_double(value, d.schedule.start)) return bad("a number");
    } else if (key == "union-bound") {
      if (!detail::parse_double(value, d.union_bound) || d.union_bound < 0.0) return bad("a multiple of k >= 0");
    } else {
      return {errc::invalid_argument, "reducer description: unknown key '" + std::string(key) +
                                          "' (keys: values, ratio, lanes, index, exchange, decoder, residual, theta, "
                                          "adaptive-load, adaptive-min, adaptive-max, warmup, warmup-shape, warmup-start, "
                                          "union-bound)"};
    }
  }
  out = d;
  return {};
}

// Combinations no Reducer can be (whatever a catalogue holds), with the reason.
inline status check_description(const reducer_description& d) {
  if (is_plain(d.values)) return {};
  if (is_packed(d.values) && d.exchange != index_exchange::all_reduce)
    return {errc::invalid_argument, description_text(d) + ": packed values need the whole reduced index on every rank "
                                                  "(exchange=all-reduce)"};
  if (d.exchange == index_exchange::reduce_scatter && d.index_bits != index_auto)
    return {errc::invalid_argument,
            description_text(d) + ": exchange=reduce-scatter needs an index exact at any world size (index=exact)"};
  if (is_shared_selection(d.index_bits) && d.values != values_kind::packed && d.values != values_kind::packed_bf16)
    return {errc::invalid_argument, description_text(d) + ": index=" + index_bits_name(d.index_bits) +
                                        " sends packed fp32 or bf16 values (values=packed|packed-bf16)"};
  if (is_packed(d.values) && d.adapt.enabled)
    return {errc::invalid_argument, description_text(d) + ": adaptive theta steers the sketch load; packed values have none"};
  if (d.union_bound != 0.0 && d.index_bits != index_routed)
    return {errc::invalid_argument, description_text(d) + ": union-bound bounds what the owners of a routed index "
                                                          "forward in an all-reduce (index=routed)"};
  return {};
}

// The arguments a reducer built from `d` is initialised with: `args` (the placement,
// and any knob `d` leaves at its default) with `d`'s knobs. A knob set in both to
// different values is refused, naming both, rather than one silently winning.
inline status merge_run_time_knobs(const reducer_description& d, reducer_arguments& args) {
  const reducer_description n = normalized(d), defaults{};
  const auto conflict = [&](const char* knob, const std::string& in_args, const std::string& in_d) {
    return status{errc::invalid_argument, std::string(knob) + " set twice: " + in_args +
                                              " in the reducer arguments, " + in_d + " in the description '" +
                                              description_text(n) + "'"};
  };
  reducer_arguments out = args;
  if (n.sparsity != defaults.sparsity) {
    if (args.sparsity >= 0.0 && args.sparsity != n.sparsity)
      return conflict("theta", detail::number_text(args.sparsity), detail::number_text(n.sparsity));
    out.sparsity = n.sparsity;
  }
  if (n.adapt != defaults.adapt) {
    if (args.adapt.enabled && args.adapt != n.adapt)
      return conflict("adaptive theta", detail::adaptive_text(args.adapt), detail::adaptive_text(n.adapt));
    out.adapt = n.adapt;
  }
  if (n.schedule != defaults.schedule) {
    if (args.schedule.enabled() && args.schedule != n.schedule)
      return conflict("sparsity schedule", detail::schedule_text(args.schedule), detail::schedule_text(n.schedule));
    out.schedule = n.schedule;
  }
  if (n.union_bound != defaults.union_bound) {
    if (args.union_bound != 0.0 && args.union_bound != n.union_bound)
      return conflict("union bound", detail::number_text(args.union_bound), detail::number_text(n.union_bound));
    out.union_bound = n.union_bound;
  }
  args = out;
  return {};
}

TAGC_END_NAMESPACE
