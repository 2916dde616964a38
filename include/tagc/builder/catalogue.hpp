#pragma once
// defines: tagc::reducer_list<R...>, tagc::catalogue_entries<Exec, Comm>(list),
//          tagc::descriptions_of(list), tagc::workspace_bytes_of(list, d, args),
//          TAGC_REDUCER_CATALOGUE(name, EXEC, COMM, LIST) — the one translation
//          unit that instantiates a catalogue's reducers.
//
// Include this header in one .cpp (.cu for exec::cuda) per catalogue part: every
// reducer type listed is compiled there, behind reducer_model (any_reducer.hpp).
//
//   using my_list = tagc::reducer_list<
//       tagc::Reducer<tagc::SparsifyPolicy, tagc::IndexPolicy<1>, tagc::SketchPolicy<10>>,
//       tagc::Reducer<tagc::SparsifyPolicy, tagc::ExactIndexPolicy, tagc::PackedPolicy>,
//       tagc::PlainReducer<float>>;
//   TAGC_REDUCER_CATALOGUE(my_catalogue, tagc::exec::host, tagc::local_communicator, my_list)
//
// defines `tagc::reducer_catalogue<exec::host, local_communicator> my_catalogue()`;
// other files declare that function and pass its result to tagc::build_reducer. A
// large catalogue can be split over translation units (built in parallel): one
// TAGC_REDUCER_CATALOGUE per part, joined by reducer_catalogue's parts constructor.
// Adding an entry = one line in a list; the description comes from the type
// (description_of), so the two cannot disagree.

#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "../plain_reducer.hpp"
#include "../reducer.hpp"
#include "any_reducer.hpp"
#include "description.hpp"
#include "description_of.hpp"

TAGC_BEGIN_NAMESPACE

template <class... R>
struct reducer_list {};

namespace detail {

template <class R> struct has_layout : std::false_type {};
template <class S, class I, class V, class D, class E> struct has_layout<Reducer<S, I, V, D, E>> : std::true_type {};

// R behind reducer_model: every call forwards to R's own.
template <class R, class Exec, class Comm>
class reducer_model_of final : public reducer_model<Exec, Comm> {
  static constexpr bool compressed = has_layout<R>::value;

 public:
  status initialize(const reducer_arguments& args, const Exec& exec) override { return r_.initialize(args, exec); }
  status reduce_scatter(Comm& comm, std::span<const float> grad, std::span<float> shard, reduce_stats* stats) override {
    return r_.reduce_scatter(comm, grad, shard, stats);
  }
  status all_reduce(Comm& comm, std::span<const float> grad, std::span<float> out, reduce_stats* stats) override {
    return r_.all_reduce(comm, grad, out, stats);
  }
  std::size_t output_size() const override { return r_.output_size(); }
  std::size_t workspace_bytes() const override { return r_.workspace_bytes(); }
  const reducer_arguments& arguments() const override { return r_.arguments(); }
  status set_sparsity(double theta) override {
    if constexpr (compressed) return r_.set_sparsity(theta);
    else return {errc::invalid_argument, "set_sparsity on a plain reducer: it sends every entry, it has no theta"};
  }
  double sparsity() const override {
    if constexpr (compressed) return r_.sparsity();
    else return 0.0;
  }
  const layout* plan() const override {
    if constexpr (compressed) return &r_.plan();
    else return nullptr;
  }
  std::vector<float> residual_to_host() const override {
    if constexpr (compressed) return r_.residual_to_host();
    else return {};
  }
  void set_profiling(bool on) override {
    if constexpr (compressed) r_.set_profiling(on);
  }
  std::vector<std::byte> save_state() const override { return r_.save_state(); }
  status load_state(std::span<const std::byte> state) override { return r_.load_state(state); }

 private:
  R r_;
};

template <class R, class Exec, class Comm>
std::unique_ptr<reducer_model<Exec, Comm>> make_model() {
  return std::make_unique<reducer_model_of<R, Exec, Comm>>();
}

}  // namespace detail

// The entries of a list: each type's description and its factory.
template <class Exec, class Comm, class... R>
std::vector<reducer_entry<Exec, Comm>> catalogue_entries(reducer_list<R...>) {
  static_assert((std::is_same_v<typename R::exec_space, Exec> && ...),
                "tagc: a catalogue's reducers must all run on the catalogue's execution space");
  return {reducer_entry<Exec, Comm>{type_of(description_of<R>()), &detail::make_model<R, Exec, Comm>,
                                    &R::workspace_bytes_for}...};
}

// The descriptions of a list's types, without instantiating any of them (a program
// can check a request against a catalogue compiled elsewhere).
template <class... R>
std::vector<reducer_description> descriptions_of(reducer_list<R...>) {
  return {type_of(description_of<R>())...};
}

// The workspace query of the list's type that `d` describes (reducer_catalogue::
// workspace_bytes_for without a catalogue: only the types' static queries are compiled,
// no reducer is instantiated), for a program that checks memory where no catalogue is
// linked. Refused: a description no reducer can be, or one the list lacks.
template <class... R>
status workspace_bytes_of(reducer_list<R...>, const reducer_description& d, const reducer_arguments& args,
                          std::size_t& bytes) {
  TAGC_TRY(check_description(d));
  reducer_arguments merged = args;
  TAGC_TRY(merge_run_time_knobs(d, merged));
  const reducer_description want = type_of(d);
  bool found = false;
  ((!found && type_of(description_of<R>()) == want ? (bytes = R::workspace_bytes_for(merged), found = true) : false), ...);
  if (!found) return {errc::invalid_argument, catalogue_lacks("list", descriptions_of(reducer_list<R...>{}), d)};
  return {};
}

TAGC_END_NAMESPACE

// Defines `tagc::reducer_catalogue<EXEC, COMM> NAME()` holding the reducers of LIST
// (a tagc::reducer_list<...>), named "NAME" in refusals. Use at namespace scope.
#define TAGC_REDUCER_CATALOGUE(NAME, EXEC, COMM, LIST)                                         \
  ::tagc::reducer_catalogue<EXEC, COMM> NAME() {                                               \
    static const ::tagc::reducer_catalogue<EXEC, COMM> catalogue(                              \
        #NAME, ::tagc::catalogue_entries<EXEC, COMM>(LIST{}));                                 \
    return catalogue;                                                                          \
  }
