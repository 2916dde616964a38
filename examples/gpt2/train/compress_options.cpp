// compress_options.cpp: flags -> tagc::reducer_description (type and knobs), and the
// check against the trainers' catalogue. Reads the catalogue's descriptions from its
// type list (tagc::descriptions_of): no reducer is instantiated in this file, so both
// programs (tagc-gpt2, tagc-gpt2-cuda) check their command line with it.
// defines: train::compress_options, train::names_unit, train::unit_reducer, train::unit_sparsity_error,
//          train::segment_arguments, train::reducer_flags, train::reducer_text,
//          train::flag_of_key, train::description_items,
//          train::unbuilt_combination, train::built_combinations, train::built_descriptions
#include "compress_options.hpp"
#include "reducer_catalogue.hpp"

// defines: tagc::default_catalogue, tagc::descriptions_of, tagc::catalogue_lacks
#include "tagc/builder/default_catalogue.hpp"

#include <algorithm>

namespace train {

CompressOptions compress_options(const Args& a) {
  CompressOptions o;
  o.reducer.values = a.values;
  o.reducer.ratio = a.ratio;
  o.reducer.index_bits = a.index_bits;
  o.reducer.exchange = a.index_exchange;
  o.reducer.decoder = a.decoder;
  o.reducer.residual = a.residual;
  o.reducer.sparsity = a.sparsity;
  o.reducer.adapt.enabled = a.adaptive;
  o.reducer.adapt.target_load = a.target_load;
  o.reducer.schedule.warmup_steps = uint64_t(a.sparsity_warmup);
  o.reducer.schedule.start = a.sparsity_start;
  o.reducer.schedule.shape = a.sparsity_shape;
  o.reducer.union_bound = a.union_bound;
  o.reducer = tagc::normalized(o.reducer);
  o.unit_sparsity = a.unit_sparsity;
  o.plain.values = a.baseline_dtype == "bf16" ? tagc::values_kind::plain_bf16 : tagc::values_kind::plain_fp32;
  o.arguments.topo = tagc::topology::sharded;
  o.arguments.op = tagc::reduce_op::mean;
  o.grad_topology = a.grad_all_reduce ? tagc::topology::replicated : tagc::topology::sharded;
  return o;
}

bool names_unit(const std::string& entry, const std::string& unit) {
  return unit == entry || (unit.size() > entry.size() && unit.compare(0, entry.size(), entry) == 0 &&
                           unit[entry.size()] == '.');
}

tagc::reducer_description unit_reducer(const CompressOptions& o, const std::string& unit) {
  tagc::reducer_description d = o.reducer;
  for (const UnitSparsity& u : o.unit_sparsity)
    if (names_unit(u.unit, unit)) d.sparsity = u.theta;
  return d;
}

std::string unit_sparsity_error(const CompressOptions& o, const std::vector<std::string>& units,
                                const std::vector<std::string>& compressed) {
  const auto any_named = [](const std::string& entry, const std::vector<std::string>& names) {
    for (const std::string& n : names)
      if (names_unit(entry, n)) return true;
    return false;
  };
  for (const UnitSparsity& u : o.unit_sparsity) {
    const std::string flag = "--unit-sparsity " + u.unit + ": ";
    if (!any_named(u.unit, units)) {
      std::string all;
      for (const std::string& n : units) all += (all.empty() ? "" : ", ") + n;
      return flag + "no unit of this model has that name (units: " + all + "; or a kind: attn, mlp)";
    }
    if (!any_named(u.unit, compressed))
      return flag + "names only units sent uncompressed (--compress and the segment sizes decide which are "
                    "compressed); theta applies to compressed units";
    tagc::reducer_description d = o.reducer;
    d.sparsity = u.theta;
    if (const tagc::status s = tagc::check_description(d); !s.ok()) return flag + s.message();
  }
  return {};
}

tagc::reducer_arguments segment_arguments(const CompressOptions& o, size_t length, int world, int rank) {
  tagc::reducer_arguments a = o.arguments;
  a.length = length;
  a.world_size = world;
  a.rank = rank;
  return a;
}

const char* flag_of_key(std::string_view key) {
  for (const ReducerKey& k : reducer_keys)
    if (key == k.key) return k.flag;
  return nullptr;
}

std::vector<DescriptionItem> description_items(std::string_view text) {
  std::vector<DescriptionItem> items;
  for (size_t at = 0; at < text.size();) {
    const size_t end = std::min(text.find_first_of(" ,", at), text.size());
    const std::string_view item = text.substr(at, end - at);
    at = end + 1;
    if (item.empty()) continue;
    const size_t eq = std::min(item.find('='), item.size());
    items.push_back({std::string(item.substr(0, eq)), std::string(item.substr(std::min(eq + 1, item.size())))});
  }
  return items;
}

std::string reducer_flags(const tagc::reducer_description& d) {
  if (tagc::is_plain(d.values))
    return std::string("--baseline-dtype ") + (d.values == tagc::values_kind::plain_bf16 ? "bf16" : "fp32");
  std::string s;
  for (const DescriptionItem& i : description_items(tagc::description_text(tagc::type_of(d)))) {
    if (i.key == "residual" && i.value == "float") continue;  // the default, left unsaid
    const char* flag = flag_of_key(i.key);  // none (lanes): the key as the description says it
    if (!s.empty()) s += ' ';
    s += flag ? "--" + std::string(flag) + " " + i.value : i.key + "=" + i.value;
  }
  return s;
}

std::string reducer_text(const Args& a) { return tagc::description_text(compress_options(a).reducer); }

const std::vector<tagc::reducer_description>& built_descriptions() {
  static const auto all = tagc::descriptions_of(tagc::default_catalogue<tagc::exec::host>{});
  return all;
}

std::string built_combinations() {
  std::string s;
  for (const auto& d : built_descriptions()) s += "  " + reducer_flags(d) + "\n";
  return s;
}

std::string unbuilt_combination(const CompressOptions& o) {
  const std::string flags = reducer_flags(o.reducer) + ": ";
  // A rule of the Reducer, not of the catalogue (its can_implement says the same at run time).
  if (o.reducer.adapt.enabled && !tagc::is_sketch(o.reducer.values))
    return flags + "--adaptive steers the sketch load; packed values have no sketch";
  if (const tagc::status s = tagc::check_description(o.reducer); !s.ok())
    return flags + s.message() + "; the catalogue has: " + tagc::catalogue_listing(built_descriptions());
  const std::string lacks = tagc::catalogue_lacks("tagc-gpt2", built_descriptions(), o.reducer);
  return lacks.empty() ? lacks : flags + lacks;
}

}  // namespace train
