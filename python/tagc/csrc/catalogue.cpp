// defines: the reducer catalogue (catalogue.hpp): every Reducer instantiation
//          the Python package offers, behind tagc_torch::any_reducer.

#include "catalogue.hpp"

#include <cstring>

namespace tagc_torch {
namespace {

template <class R>
class reducer_impl final : public any_reducer {
 public:
  explicit reducer_impl(std::string name) : name_(std::move(name)) {}
  tagc::status can_implement(const tagc::reducer_arguments& a) const override { return R::can_implement(a); }
  tagc::status initialize(const tagc::reducer_arguments& a) override { return r_.initialize(a); }
  tagc::status all_reduce(counted_comm& c, std::span<const float> in, std::span<float> out,
                          tagc::reduce_stats* s) override {
    return r_.all_reduce(c, in, out, s);
  }
  tagc::status reduce_scatter(counted_comm& c, std::span<const float> in, std::span<float> out,
                              tagc::reduce_stats* s) override {
    return r_.reduce_scatter(c, in, out, s);
  }
  std::size_t output_size() const override { return r_.output_size(); }
  double sparsity() const override { return r_.sparsity(); }
  tagc::status set_sparsity(double theta) override { return r_.set_sparsity(theta); }
  std::vector<float> residual() const override { return r_.residual_to_host(); }
  tagc::status set_residual(std::span<const float> res) override {
    // The saved state ends with the residual (reducer.hpp save_state): take a
    // checkpoint of this reducer, replace its tail, load it back. Residual
    // storage is float in every catalogue entry.
    static_assert(std::is_same_v<typename R::sparsify_policy, tagc::SparsifyPolicy>);
    if (res.size() != r_.plan().length)
      return {tagc::errc::size_mismatch, "residual has " + std::to_string(res.size()) + " elements, the reducer " +
                                             std::to_string(r_.plan().length)};
    auto blob = r_.save_state();
    const std::size_t bytes = res.size() * sizeof(float);
    if (blob.size() < bytes) return {tagc::errc::internal, "reducer state shorter than its residual"};
    std::memcpy(blob.data() + blob.size() - bytes, res.data(), bytes);
    return r_.load_state(blob);
  }
  std::vector<std::byte> save_state() const override { return r_.save_state(); }
  tagc::status load_state(std::span<const std::byte> in) override { return r_.load_state(in); }
  std::string name() const override { return name_; }

 private:
  R r_;
  std::string name_;
};

// The catalogue. The paper's configuration, the best one measured on the
// GPT-2 trainer (docs/results.md "beyond the paper"), and exact fp32 packing
// (at theta = 0 it equals a dense all-reduce: the test's anchor).
using paper_sketch = tagc::Reducer<tagc::SparsifyPolicy, tagc::IndexPolicy<1>, tagc::SketchPolicy<10>, tagc::DecodePolicy<>>;
using packed_bf16 = tagc::Reducer<tagc::SparsifyPolicy, tagc::ExactIndexPolicy, tagc::PackedBf16Policy, tagc::DecodePolicy<>>;
using packed_f32 = tagc::Reducer<tagc::SparsifyPolicy, tagc::ExactIndexPolicy, tagc::PackedPolicy, tagc::DecodePolicy<>>;

}  // namespace

std::string catalogue_text() {
  return "values='sketch', ratio=10, index_bits=1   (the paper's configuration)\n"
         "values='packed-bf16', index_bits='exact'  (best measured on tagc-gpt2)\n"
         "values='packed', index_bits='exact'       (fp32 values; exact, no sketch)\n";
}

tagc::status make_reducer(const reducer_config& c, std::unique_ptr<any_reducer>& out) {
  const std::string what = "values='" + c.values + "', ratio=" + std::to_string(c.ratio) + ", index_bits='" + c.index + "'";
  if (c.values == "sketch" && c.ratio == 10 && c.index == "1") out = std::make_unique<reducer_impl<paper_sketch>>(what);
  else if (c.values == "packed-bf16" && c.index == "exact") out = std::make_unique<reducer_impl<packed_bf16>>(what);
  else if (c.values == "packed" && c.index == "exact") out = std::make_unique<reducer_impl<packed_f32>>(what);
  else
    return {tagc::errc::invalid_argument, "no reducer for " + what + " in this build's catalogue; it has:\n" + catalogue_text()};
  return {};
}

}  // namespace tagc_torch
