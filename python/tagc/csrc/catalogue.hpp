#pragma once
// defines: tagc_torch::reducer_config, tagc_torch::any_reducer,
//          tagc_torch::make_reducer, tagc_torch::catalogue_text.
//
// A small, fixed catalogue of Reducer instantiations behind one runtime
// interface. The library's builder (tagc/builder/) does this in general; moving
// onto it (a TAGC_REDUCER_CATALOGUE over counted_comm) is open: then
// make_reducer() becomes a call into it and nothing else here changes.
// Every instantiation lives in catalogue.cpp (one translation unit: each costs
// ~10-40 s of compile time).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <tagc/comm/counting.hpp>
#include <tagc/reducer.hpp>

#include "pg_communicator.hpp"

namespace tagc_torch {

using counted_comm = tagc::counting_communicator<pg_communicator>;

// What TagcState asks for. values: "sketch" | "packed" | "packed-bf16";
// index: "1" | "4" | "exact"; ratio: sketch compression ratio (sketch only).
struct reducer_config {
  std::string values = "sketch";
  int ratio = 10;
  std::string index = "1";
};

class any_reducer {
 public:
  virtual ~any_reducer() = default;
  virtual tagc::status can_implement(const tagc::reducer_arguments& a) const = 0;
  virtual tagc::status initialize(const tagc::reducer_arguments& a) = 0;
  virtual tagc::status all_reduce(counted_comm& c, std::span<const float> in, std::span<float> out,
                                  tagc::reduce_stats* s) = 0;
  virtual tagc::status reduce_scatter(counted_comm& c, std::span<const float> in, std::span<float> out,
                                      tagc::reduce_stats* s) = 0;
  virtual std::size_t output_size() const = 0;
  virtual double sparsity() const = 0;
  virtual tagc::status set_sparsity(double theta) = 0;
  virtual std::vector<float> residual() const = 0;
  // Replace the residual (bucket rebuilds move residuals between reducers).
  virtual tagc::status set_residual(std::span<const float> r) = 0;
  virtual std::vector<std::byte> save_state() const = 0;
  virtual tagc::status load_state(std::span<const std::byte> in) = 0;
  virtual std::string name() const = 0;
};

// A reducer for `cfg`, or a status naming the configuration and the catalogue.
tagc::status make_reducer(const reducer_config& cfg, std::unique_ptr<any_reducer>& out);
// The configurations make_reducer knows, one per line.
std::string catalogue_text();

}  // namespace tagc_torch
