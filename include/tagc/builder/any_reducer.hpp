#pragma once
// defines: tagc::AnyReducer<Exec, Comm> (a reducer chosen at run time),
//          tagc::reducer_model<Exec, Comm> (what it erases), tagc::reducer_entry,
//          tagc::reducer_catalogue<Exec, Comm>, tagc::build_reducer().
//
// A trainer picks its reducers from the command line, but a tagc::Reducer is a
// compile-time composition. The bridge is a catalogue: a list of reducer types,
// instantiated once in one translation unit of the user's (builder/catalogue.hpp,
// TAGC_REDUCER_CATALOGUE), each behind the small virtual interface reducer_model.
// Everything else includes only this header: it names the catalogue by a function
// declaration and never instantiates a Reducer, so the slow compile is paid once.
//
//   // catalogue.cpp (the one slow file)
//   #include <tagc/builder/default_catalogue.hpp>
//   TAGC_REDUCER_CATALOGUE(host_catalogue, tagc::exec::host, tagc::local_communicator,
//                          tagc::default_catalogue<tagc::exec::host>)
//   // anywhere else
//   tagc::reducer_catalogue<tagc::exec::host, tagc::local_communicator> host_catalogue();
//   tagc::AnyReducer<tagc::exec::host, tagc::local_communicator> r;
//   TAGC_TRY(tagc::build_reducer(host_catalogue(), description, r));  // refused: not in the catalogue
//   TAGC_TRY(r.initialize(args));
//   std::puts(r.description_text().c_str());
//
// A description the catalogue lacks is refused with a status naming it, the fields
// in which the closest entries differ and every entry the catalogue has.

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../core/status.hpp"
#include "../reducer_arguments.hpp"
#include "../shard/layout.hpp"
#include "../stats.hpp"
#include "description.hpp"

TAGC_BEGIN_NAMESPACE

// The operations a built reducer offers, over one execution space and communicator.
template <class Exec, class Comm>
class reducer_model {
 public:
  virtual ~reducer_model() = default;
  virtual status initialize(const reducer_arguments& args, const Exec& exec) = 0;
  virtual status reduce_scatter(Comm& comm, std::span<const float> grad, std::span<float> shard,
                                reduce_stats* stats) = 0;
  virtual status all_reduce(Comm& comm, std::span<const float> grad, std::span<float> out, reduce_stats* stats) = 0;
  virtual std::size_t output_size() const = 0;
  virtual std::size_t workspace_bytes() const = 0;
  virtual const reducer_arguments& arguments() const = 0;
  // Compressed reducers only (a plain reducer has no sparsity, layout or residual):
  virtual status set_sparsity(double theta) = 0;
  virtual double sparsity() const = 0;
  virtual const layout* plan() const = 0;
  virtual std::vector<float> residual_to_host() const = 0;
  virtual void set_profiling(bool on) = 0;
  virtual std::vector<std::byte> save_state() const = 0;
  virtual status load_state(std::span<const std::byte> state) = 0;
};

template <class Exec, class Comm>
struct reducer_entry {
  reducer_description description;  // type_of(): the compile-time choices, knobs at their defaults
  std::unique_ptr<reducer_model<Exec, Comm>> (*make)();
  std::size_t (*workspace_bytes_for)(const reducer_arguments&);  // the type's workspace query
};

// "d1; d2; ...": description_text() of each.
inline std::string catalogue_listing(std::span<const reducer_description> have) {
  std::string s;
  for (std::size_t i = 0; i < have.size(); ++i) s += (i ? "; " : "") + description_text(have[i]);
  return s;
}

// Empty when `have` holds `d`'s type (type_of); otherwise a message naming it, the fields
// in which the closest entries differ (with the values they have there) and every entry.
inline std::string catalogue_lacks(const std::string& name, std::span<const reducer_description> have,
                                   const reducer_description& d) {
  const reducer_description want = type_of(d);
  for (const auto& e : have)
    if (type_of(e) == want) return {};
  struct field {
    const char* name;
    std::string (*show)(const reducer_description&);
  };
  static const field fields[] = {
      {"values", [](const reducer_description& x) { return std::string(to_string(x.values)); }},
      {"ratio", [](const reducer_description& x) { return std::to_string(x.ratio); }},
      {"lanes", [](const reducer_description& x) { return std::to_string(x.lanes); }},
      {"index", [](const reducer_description& x) { return index_bits_name(x.index_bits); }},
      {"exchange", [](const reducer_description& x) { return std::string(to_string(x.exchange)); }},
      {"decoder", [](const reducer_description& x) { return std::string(to_string(x.decoder)); }},
      {"residual", [](const reducer_description& x) { return std::string(to_string(x.residual)); }},
  };
  const auto distance = [&](const reducer_description& e) {
    std::size_t n = 0;
    for (const auto& f : fields) n += f.show(type_of(e)) != f.show(want);
    return n;
  };
  std::string msg = "no reducer '" + description_text(want) + "' in catalogue '" + name + "'";
  if (have.empty()) return msg + ", which is empty";
  std::size_t best = ~std::size_t(0);
  for (const auto& e : have) best = std::min(best, distance(e));
  // For each field in which a closest entry differs: the values the closest entries have there.
  std::string near;
  for (const auto& f : fields) {
    std::vector<std::string> alts;
    for (const auto& e : have) {
      const std::string v = f.show(type_of(e));
      if (distance(e) != best || v == f.show(want)) continue;
      if (std::find(alts.begin(), alts.end(), v) == alts.end()) alts.push_back(v);
    }
    if (alts.empty()) continue;
    std::string list;
    for (const auto& v : alts) list += (list.empty() ? "" : "|") + v;
    near += std::string(near.empty() ? "" : ", ") + f.name + "=" + f.show(want) + " (they have " + list + ")";
  }
  return msg + "; the closest entries differ in " + near + "; the catalogue has: " + catalogue_listing(have);
}

// The reducer types a program built for one (Exec, Comm), with a name for messages.
template <class Exec, class Comm>
class reducer_catalogue {
 public:
  using entry = reducer_entry<Exec, Comm>;
  reducer_catalogue() = default;
  reducer_catalogue(std::string name, std::vector<entry> entries) : name_(std::move(name)), entries_(std::move(entries)) {}
  // Several parts (built in separate translation units) as one catalogue.
  reducer_catalogue(std::string name, std::initializer_list<reducer_catalogue> parts) : name_(std::move(name)) {
    for (const auto& p : parts) entries_.insert(entries_.end(), p.entries_.begin(), p.entries_.end());
  }

  const std::string& name() const { return name_; }
  std::span<const entry> entries() const { return entries_; }
  // The entry of `d`'s type (its knobs do not matter: every entry takes them).
  const entry* find(const reducer_description& d) const {
    const reducer_description want = type_of(d);
    for (const auto& e : entries_)
      if (e.description == want) return &e;
    return nullptr;
  }
  bool contains(const reducer_description& d) const { return find(d) != nullptr; }
  // The entries' descriptions, one per line.
  std::string listing() const {
    std::string s;
    for (const auto& e : entries_) s += description_text(e.description) + "\n";
    return s;
  }

  std::vector<reducer_description> descriptions() const {
    std::vector<reducer_description> d;
    for (const auto& e : entries_) d.push_back(e.description);
    return d;
  }
  // Empty when the catalogue holds `d`; otherwise why not, and what it has.
  std::string missing(const reducer_description& d) const { return catalogue_lacks(name_, descriptions(), d); }

  // The bytes the reducer `d` describes allocates when initialised with `args` (`d`'s
  // knobs merged, as AnyReducer::initialize does), before anything is built or
  // allocated: for a memory check ahead of a run. Refused as build_reducer and
  // initialize refuse (0 where the reducer refuses the arguments).
  status workspace_bytes_for(const reducer_description& d, const reducer_arguments& args, std::size_t& bytes) const {
    TAGC_TRY(check_description(d));
    const entry* e = find(d);
    if (!e) return {errc::invalid_argument, missing(d)};
    reducer_arguments merged = args;
    TAGC_TRY(merge_run_time_knobs(d, merged));
    bytes = e->workspace_bytes_for(merged);
    return {};
  }

 private:
  std::string name_;
  std::vector<entry> entries_;
};

// A reducer whose type was chosen at run time from a catalogue.
template <class Exec, class Comm>
class AnyReducer {
 public:
  using exec_space = Exec;
  using communicator_type = Comm;

  AnyReducer() = default;
  AnyReducer(reducer_description d, std::unique_ptr<reducer_model<Exec, Comm>> m)
      : description_(normalized(d)), model_(std::move(m)) {}

  bool built() const { return model_ != nullptr; }
  const reducer_description& description() const { return description_; }
  // What was chosen: the description's text ("values=sketch ratio=10 ...", with the
  // knobs it sets: "theta=0.99 warmup=200 ...").
  std::string description_text() const { return built() ? tagc::description_text(description_) : "no reducer"; }
  // False for the plain fp32/bf16 baselines.
  bool compressed() const { return !is_plain(description_.values); }

  // `args` gives the placement (length, world, rank, topology, op, name); theta, adaptive
  // theta and the schedule come from the description where it sets them, else from `args`
  // (set in both to different values: refused, see merge_run_time_knobs).
  status initialize(const reducer_arguments& args, const Exec& exec = {}) {
    TAGC_TRY(require());
    reducer_arguments merged = args;
    TAGC_TRY(merge_run_time_knobs(description_, merged));
    return model_->initialize(merged, exec);
  }
  status reduce_scatter(Comm& comm, std::span<const float> grad, std::span<float> shard,
                        reduce_stats* stats = nullptr) {
    TAGC_TRY(require());
    return model_->reduce_scatter(comm, grad, shard, stats);
  }
  status all_reduce(Comm& comm, std::span<const float> grad, std::span<float> out, reduce_stats* stats = nullptr) {
    TAGC_TRY(require());
    return model_->all_reduce(comm, grad, out, stats);
  }
  std::size_t output_size() const { return built() ? model_->output_size() : 0; }
  // Bytes initialize allocated (reducer_catalogue::workspace_bytes_for: before it does).
  std::size_t workspace_bytes() const { return built() ? model_->workspace_bytes() : 0; }
  const reducer_arguments& arguments() const {
    static const reducer_arguments none{};
    return built() ? model_->arguments() : none;
  }
  // Theta between calls; refused by a plain reducer (it keeps every entry).
  status set_sparsity(double theta) {
    TAGC_TRY(require());
    return model_->set_sparsity(theta);
  }
  double sparsity() const { return built() ? model_->sparsity() : 0.0; }
  // The sketch/index layout (nullptr for a plain reducer).
  const layout* plan() const { return built() ? model_->plan() : nullptr; }
  std::vector<float> residual_to_host() const { return built() ? model_->residual_to_host() : std::vector<float>{}; }
  void set_profiling(bool on) {
    if (built()) model_->set_profiling(on);
  }
  std::vector<std::byte> save_state() const { return built() ? model_->save_state() : std::vector<std::byte>{}; }
  status load_state(std::span<const std::byte> state) {
    TAGC_TRY(require());
    return model_->load_state(state);
  }

 private:
  status require() const {
    if (!model_) return {errc::invalid_argument, "AnyReducer used before build_reducer() gave it a reducer"};
    return {};
  }
  reducer_description description_{};
  std::unique_ptr<reducer_model<Exec, Comm>> model_;
};

// The reducer `d` describes, from `catalogue` (the entry of its type, carrying `d`'s
// knobs): refused (out untouched) when no Reducer can be that (check_description) or
// the catalogue does not hold it.
template <class Exec, class Comm>
status build_reducer(const reducer_catalogue<Exec, Comm>& catalogue, const reducer_description& d,
                     AnyReducer<Exec, Comm>& out) {
  TAGC_TRY(check_description(d));
  const auto* e = catalogue.find(d);
  if (!e) return {errc::invalid_argument, catalogue.missing(d)};
  out = AnyReducer<Exec, Comm>(d, e->make());
  return {};
}

TAGC_END_NAMESPACE
