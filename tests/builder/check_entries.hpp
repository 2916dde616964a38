#pragma once
// defines: tagc_test::check_entries<List>(catalogue) — for every reducer type of a
//          catalogue list: its description round-trips through description_text(), the
//          catalogue builds it from that description, and the built reducer gives
//          bit for bit what the directly-typed reducer gives (two steps, two ranks,
//          with a save/load of the state between them), delivering the dense mean
//          of what was sent; the catalogue's workspace query equals what initialize allocated.
// Include it in the translation unit that instantiates the catalogue (the direct
// types are then the same instantiations, compiled once).

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <tagc/builder.hpp>
#include <tagc/builder/catalogue.hpp>

#include "../support/harness.hpp"

namespace tagc_test {

using any_local = tagc::AnyReducer<tagc::exec::host, tagc::local_communicator>;
using local_catalogue = tagc::reducer_catalogue<tagc::exec::host, tagc::local_communicator>;

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// Relative tolerance of "delivered == dense mean of what was sent": 16-bit sums are
// rounded by the collective, which no residual sees; a bf16 residual holds what stays
// behind rounded to bf16, so "sent" read back from it is exact only to bf16.
inline double delivery_tolerance(const tagc::reducer_description& d) {
  if (d.residual == tagc::residual_kind::bf16) return 2e-2;
  switch (tagc::wire_of(d.values)) {
    case tagc::wire_type::bf16: return 2e-2;
    case tagc::wire_type::fp16: return 2e-3;
    case tagc::wire_type::fp32: return 1e-5;
  }
  return 1e-5;
}

template <class R>
void check_entry(const local_catalogue& catalogue) {
  const tagc::reducer_description d = tagc::description_of<R>();
  const std::string text = tagc::description_text(d);
  CAPTURE(text);
  // description_text() round-trips.
  tagc::reducer_description parsed;
  REQUIRE(tagc::parse_reducer_description(text, parsed).ok());
  CHECK(parsed == d);

  constexpr int world = 2;
  constexpr std::size_t n = 3 * 32768 + 77;  // odd: a padded tail; large enough to sketch
  std::vector<std::string> failures(world);
  on_ranks(world, [&](tagc::local_communicator& comm) {
    auto fail = [&](const std::string& why) { failures[std::size_t(comm.rank())] += why + "; "; };
    tagc::reducer_arguments a;
    a.length = n;
    a.world_size = world;
    a.rank = comm.rank();
    a.op = tagc::reduce_op::mean;
    any_local built, reloaded;
    if (auto s = tagc::build_reducer(catalogue, d, built); !s.ok()) return fail("build: " + s.what());
    if (built.description_text() != text) fail("description_text() " + built.description_text());
    if (built.compressed() == tagc::is_plain(d.values)) fail("compressed() wrong");
    R direct;
    if (auto s = built.initialize(a); !s.ok()) return fail("initialize: " + s.what());
    if (auto s = direct.initialize(a); !s.ok()) return fail("direct initialize: " + s.what());
    if (built.output_size() != direct.output_size()) return fail("output sizes differ");
    // The workspace query, asked before anything was built, is what initialize allocated.
    std::size_t queried = 0;
    if (auto s = catalogue.workspace_bytes_for(d, a, queried); !s.ok()) return fail("workspace query: " + s.what());
    if (queried != built.workspace_bytes() || queried != direct.workspace_bytes())
      fail("workspace query " + std::to_string(queried) + " B, initialize allocated " +
           std::to_string(built.workspace_bytes()) + " B");
    std::vector<float> out_any(built.output_size()), out_direct(direct.output_size()), out_reloaded;
    for (int step = 0; step < 2; ++step) {
      const std::vector<float> g = gradient(n, 42, comm.rank(), step);
      const std::vector<float> before = built.residual_to_host();
      tagc::reduce_stats s_any, s_direct;
      if (auto s = built.reduce_scatter(comm, g, out_any, &s_any); !s.ok()) return fail("reduce: " + s.what());
      if (auto s = direct.reduce_scatter(comm, g, out_direct, &s_direct); !s.ok()) return fail("direct: " + s.what());
      if (!same_bits(out_any, out_direct)) fail("step " + std::to_string(step) + ": results differ from the direct type");
      if (s_any.value_bytes != s_direct.value_bytes || s_any.index_bytes != s_direct.index_bytes)
        fail("stats differ from the direct type");
      if (step == 1) {
        if (!same_bits(out_reloaded, out_direct)) fail("the reducer reloaded from step 0's state differs");
      }
      // Delivered = dense mean of what was sent (sent = g + residual before - residual after).
      std::vector<float> sent(g);
      const std::vector<float> after = built.residual_to_host();
      if (tagc::is_plain(d.values) != after.empty()) fail("residual_to_host() size");
      if (!after.empty())
        for (std::size_t i = 0; i < n; ++i) sent[i] += before[i] - after[i];
      std::vector<float> padded(out_any.size() * world, 0.0f), dense(out_any.size());
      std::copy(sent.begin(), sent.end(), padded.begin());
      if (auto s = comm.reduce_scatter(std::span<const float>(padded), std::span<float>(dense)); !s.ok())
        return fail(s.what());
      double err = 0, ref = 0;
      for (std::size_t i = 0; i < dense.size(); ++i) {
        err = std::max(err, std::abs(double(dense[i]) / world - double(out_any[i])));
        ref = std::max(ref, std::abs(double(dense[i]) / world));
      }
      if (s_any.unresolved == 0 && !(err <= delivery_tolerance(d) * ref))
        fail("step " + std::to_string(step) + ": |delivered - dense mean of sent| = " + std::to_string(err) +
             " vs max " + std::to_string(ref));
      if (step == 0) {
        // A second reducer built from the description, loaded with this state, must
        // continue exactly as the first does.
        if (auto s = tagc::build_reducer(catalogue, tagc::normalized(d), reloaded); !s.ok()) return fail(s.what());
        if (auto s = reloaded.initialize(a); !s.ok()) return fail(s.what());
        if (auto s = reloaded.load_state(built.save_state()); !s.ok()) return fail("load_state: " + s.what());
        out_reloaded.assign(reloaded.output_size(), 0.0f);
        if (auto s = reloaded.reduce_scatter(comm, gradient(n, 42, comm.rank(), 1), out_reloaded); !s.ok())
          return fail("reloaded: " + s.what());
      }
    }
  });
  for (int r = 0; r < world; ++r) CHECK_MESSAGE(failures[std::size_t(r)].empty(), "rank ", r, ": ", failures[std::size_t(r)]);
}

template <class... R>
void check_entries(const local_catalogue& catalogue, tagc::reducer_list<R...>) {
  (check_entry<R>(catalogue), ...);
}

}  // namespace tagc_test
