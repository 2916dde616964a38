// The host decode path (detail/host/) against the portable one (detail/portable_decode.hpp,
// what a GPU runs) on the same inputs: the support list, the resolved set and the
// unresolved count must be identical, the values equal within float tolerance, for
// loads near the peeling threshold (ratio 2 and 4), overloaded, every decode mode,
// 1-, 2-, 4- and 8-bit index counters and every sketch value type (16-bit cells
// reach the decoder widened to fp32, rounded: the same inputs on both paths).
#include <doctest/doctest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <tagc/detail/host/peel.hpp>
#include <tagc/detail/host/support_list.hpp>
#include <tagc/detail/portable_decode.hpp>
#include <tagc/exec/host.hpp>
#include <tagc/tagc.hpp>

using namespace tagc;

namespace {

// One shard's reduced index (counters of `bits` bits, marked with density p; some
// marks past the caller's length too, which every decoder must ignore) and its
// summed sketch of N(0, 1) values at the marked entries.
struct shard_input {
  layout lay;
  std::size_t shard = 0;
  std::vector<std::uint8_t> index;   // [index_bytes] of this shard
  std::vector<float> cells;          // [cells]
  std::vector<float> truth;          // [shard] the values (0 off the support)
  std::vector<char> marked;          // [shard] within the length
};

// `mark(e, rng)` chooses the marked entries of shard `shard`.
template <class Cell, class Mark>
shard_input make_input_marked(std::size_t length, int shards, std::size_t shard, int ratio, int bits, Mark mark,
                              std::uint64_t seed) {
  shard_input in;
  in.lay = make_layout(length, shards, 1024, ratio, bits);
  in.shard = shard;
  const layout& l = in.lay;
  REQUIRE_FALSE(l.dense);
  in.index.assign(l.index_bytes, 0);
  in.cells.assign(l.cells, 0.0f);
  in.truth.assign(l.shard_size, 0.0f);
  in.marked.assign(l.shard_size, 0);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> value(0.0f, 1.0f);
  std::uniform_int_distribution<unsigned> counter(1, (1u << bits) - 1u);
  const int per_byte = 8 / bits;
  for (std::size_t e = 0; e < l.shard_size; ++e) {
    if (!mark(e, rng)) continue;
    in.index[e / std::size_t(per_byte)] |= std::uint8_t(counter(rng) << ((e % std::size_t(per_byte)) * std::size_t(bits)));
    if (shard * l.shard_size + e >= length) continue;  // marked past the length: not support
    in.marked[e] = 1;
    in.truth[e] = value(rng);
    for (int h = 0; h < 3; ++h) in.cells[detail::sketch_cell(l, e, h)] += detail::sketch_sign_of(l, e, h) * in.truth[e];
  }
  for (auto& c : in.cells) c = detail::wire_round<Cell>(c);
  return in;
}

// Marks with density p.
template <class Cell>
shard_input make_input(std::size_t length, int shards, std::size_t shard, int ratio, int bits, double p,
                       std::uint64_t seed) {
  std::bernoulli_distribution mark(p);
  return make_input_marked<Cell>(length, shards, shard, ratio, bits,
                                 [&](std::size_t, std::mt19937_64& rng) { return mark(rng); }, seed);
}

struct decoded {
  std::vector<float> out;
  std::vector<std::uint8_t> state;
  detail::decode_counts counts;
  bool wide_cells = false;  // the host decoder counted with 12-byte cell records
};

decoded run_portable(const shard_input& in, bool peels, bool estimates) {
  detail::portable_decoder<exec::host> dec;
  REQUIRE(dec.initialize(in.lay, in.shard, exec::host{}).ok());
  decoded r;
  r.out.assign(in.lay.shard_size, 123.0f);  // garbage: every entry must be written
  r.state.assign(in.lay.shard_size, 77);
  auto cells = in.cells;
  REQUIRE(dec.run(cells.data(), in.index.data(), r.out.data(), r.state.data(), peels, estimates, r.counts).ok());
  return r;
}

decoded run_host(const shard_input& in, bool peels, bool estimates) {
  detail::host::shard_decoder dec;
  REQUIRE(dec.initialize(in.lay, in.shard, exec::host{}).ok());
  decoded r;
  r.out.assign(in.lay.shard_size, 123.0f);
  r.state.assign(in.lay.shard_size, 77);
  auto cells = in.cells;
  REQUIRE(dec.run(cells.data(), in.index.data(), r.out.data(), r.state.data(), peels, estimates, r.counts).ok());
  r.wide_cells = dec.used_wide_cells();
  return r;
}

// fp32 cells: the two paths agree entry by entry (only the order of subtractions
// from a cell differs). 16-bit cells are rounded, so the cells no longer sum
// exactly and a value depends on which of its cells peeled it, which differs
// between the orders: there the host path must be as accurate as the portable
// one against the true values (measured: means within 5 %, maxima within 1.5x).
void compare(const shard_input& in, const decoded& ref, const decoded& got, bool float_cells) {
  const std::size_t support = std::size_t(std::count(in.marked.begin(), in.marked.end(), 1));
  CHECK(ref.counts.support == support);
  CHECK(got.counts.support == ref.counts.support);
  CHECK(got.counts.peeled == ref.counts.peeled);
  CHECK(got.counts.unresolved == ref.counts.unresolved);
  std::size_t state_diff = 0, value_diff = 0, off_support = 0, unresolved = 0;
  double err_ref = 0, err_got = 0, max_ref = 0, max_got = 0;
  for (std::size_t e = 0; e < in.lay.shard_size; ++e) {
    state_diff += ref.state[e] != got.state[e];
    unresolved += got.state[e] == detail::entry_unresolved;
    if (!in.marked[e]) {
      off_support += got.out[e] != 0.0f || got.state[e] != detail::entry_absent;
      continue;
    }
    if (float_cells) value_diff += !(std::fabs(ref.out[e] - got.out[e]) <= 1e-4f);
    const double a = std::fabs(double(ref.out[e]) - in.truth[e]), b = std::fabs(double(got.out[e]) - in.truth[e]);
    err_ref += a;
    err_got += b;
    max_ref = std::max(max_ref, a);
    max_got = std::max(max_got, b);
  }
  CHECK(state_diff == 0);
  CHECK(off_support == 0);
  CHECK(unresolved == got.counts.unresolved);
  CHECK(value_diff == 0);
  CHECK(err_got <= 1.25 * err_ref + 1e-6 * double(support));
  CHECK(max_got <= 2.0 * max_ref + 1e-4);
}

}  // namespace

TEST_CASE("host support list equals a per-entry scan of the index, for every counter width") {
  // Dense marks (many a word: the loop after the first four) and sparse ones (a few a word).
  for (const double p : {0.3, 0.02})
  for (int bits : {1, 2, 4, 8}) {
    // 2 shards of an odd length: shard 1 ends past the length, and its index is not a whole number of words.
    const auto in = make_input<float>(2 * 70000 - 333, 2, 1, 4, bits, p, 7 + std::uint64_t(bits));
    const layout& l = in.lay;
    const std::size_t valid = l.length - l.shard_size;
    std::vector<std::uint32_t> want;
    for (std::size_t e = 0; e < valid; ++e)
      if (detail::index_marked(in.index.data(), l, 0, e)) want.push_back(std::uint32_t(e));
    for (int threads : {1, 2}) {
      omp_set_num_threads(threads);
      detail::host::support_list list;
      list.reserve(l.index_bytes);
      std::vector<std::uint32_t> got(l.shard_size, 0xdeadbeefu);
      const std::size_t m = list.build(in.index.data(), l.index_bytes, bits, valid, got.data());
      CAPTURE(p);
      CAPTURE(bits);
      CAPTURE(threads);
      REQUIRE(m == want.size());
      got.resize(m);
      CHECK(got == want);
      CHECK(detail::host::count_marks(in.index.data(), l.index_bytes, bits, valid) == want.size());
    }
  }
}

TEST_CASE("host decode equals the portable decode: resolved set, unresolved count, values") {
  struct load_case {
    int ratio;
    double p;  // density of the support: load a little under p * ratio
  };
  // Near the threshold (~0.81: the layout rounds the cells up, so load < p * ratio) at
  // ratios 2 and 4, below it at 10, and overloaded at 4 and 10.
  const load_case loads[] = {{2, 0.39}, {4, 0.2}, {10, 0.06}, {4, 0.3}, {10, 0.2}};
  const bool modes[][2] = {{true, true}, {true, false}, {false, true}};  // peel_then_estimate, peel, estimate
  std::uint64_t seed = 100;
  for (const auto& lc : loads)
    for (int bits : {1, 4})
      for (int type = 0; type < 3; ++type) {
        const std::size_t length = 2 * 61440 + 1000;  // 2 shards; shard 1 partly past the length
        for (std::size_t shard : {std::size_t(0), std::size_t(1)}) {
          const auto in = type == 0 ? make_input<float>(length, 2, shard, lc.ratio, bits, lc.p, ++seed)
                          : type == 1 ? make_input<bfloat16>(length, 2, shard, lc.ratio, bits, lc.p, ++seed)
                                      : make_input<float16>(length, 2, shard, lc.ratio, bits, lc.p, ++seed);
          for (const auto& mode : modes) {
            CAPTURE(lc.ratio);
            CAPTURE(lc.p);
            CAPTURE(bits);
            CAPTURE(type);
            CAPTURE(shard);
            CAPTURE(mode[0]);
            CAPTURE(mode[1]);
            const auto ref = run_portable(in, mode[0], mode[1]);
            omp_set_num_threads(2);
            const auto got = run_host(in, mode[0], mode[1]);
            compare(in, ref, got, type == 0);
            CHECK_FALSE(got.wide_cells);  // every cell here holds well under 128 entries
            omp_set_num_threads(1);  // the thread count changes nothing, bit for bit
            const auto one = run_host(in, mode[0], mode[1]);
            CHECK(one.out == got.out);
            CHECK(one.state == got.state);
            if (!mode[0]) CHECK(got.counts.peeled == 0);
          }
        }
      }
}

TEST_CASE("a cell holding more entries than an 8-byte record counts: the 12-byte records, same answers") {
  // 300 blocks per shard over a sketch of one row per partition: each block's
  // entries land in the same three rows. One entry in each of the first `hot`
  // blocks is placed on cell 5 of partition 0; their other cells, and a sparse
  // background kept off cell 5, are lightly loaded, so everything still peels.
  // The compact record counts up to 127 entries a cell.
  const std::size_t lanes = 1024, blocks = 300, length = 2 * blocks * lanes;
  const layout l = make_layout(length, 2, lanes, 150, 1);
  REQUIRE(l.part_rows == 1);
  const std::size_t hot_cell = 5;
  for (std::size_t hot : {std::size_t(127), std::size_t(128), blocks}) {
    std::bernoulli_distribution background(0.002);
    const auto mark = [&](std::size_t e, std::mt19937_64& rng) {
      const std::size_t j = e / lanes, lane = e % lanes;
      const bool on_hot = lane == (hot_cell + lanes - detail::sketch_rotation(std::uint32_t(j), 0, lanes)) % lanes;
      return on_hot ? j < hot : background(rng);
    };
    for (int type = 0; type < 2; ++type) {
      const auto in = type == 0 ? make_input_marked<float>(length, 2, 0, 150, 1, mark, 77 + hot)
                                : make_input_marked<bfloat16>(length, 2, 0, 150, 1, mark, 78 + hot);
      std::size_t on_hot = 0;
      for (std::size_t e = 0; e < l.shard_size; ++e) on_hot += in.marked[e] && detail::sketch_cell(l, e, 0) == hot_cell;
      REQUIRE(on_hot == hot);
      const bool modes[][2] = {{true, true}, {true, false}, {false, true}};
      for (const auto& mode : modes) {
        CAPTURE(hot);
        CAPTURE(type);
        CAPTURE(mode[0]);
        CAPTURE(mode[1]);
        const auto ref = run_portable(in, mode[0], mode[1]);
        const auto got = run_host(in, mode[0], mode[1]);
        CHECK(got.wide_cells == (hot > 127));
        compare(in, ref, got, type == 0);
        if (mode[0]) CHECK(got.counts.unresolved * 100 < got.counts.support);
      }
    }
  }
}

TEST_CASE("host decode reusing its buffers: a call after another equals a fresh decoder's") {
  // The host decoder writes out/state without a clearing pass (the peeling sweep
  // streams them; without peeling only the previous call's support is reset), so a
  // call must not depend on what the previous one left in the same buffers.
  const bool modes[][2] = {{true, true}, {true, false}, {false, true}};
  for (const auto& mode : modes) {
    CAPTURE(mode[0]);
    CAPTURE(mode[1]);
    // First most entries peel (applied), then another support, overloaded: entries
    // applied by the first call and left unresolved by the second must not keep "applied".
    const auto first = make_input<float>(2 * 61440, 2, 0, 4, 1, 0.12, 41);
    const auto second = make_input<float>(2 * 61440, 2, 0, 4, 1, 0.3, 42);
    detail::host::shard_decoder dec;
    REQUIRE(dec.initialize(second.lay, 0, exec::host{}).ok());
    decoded r;
    r.out.assign(second.lay.shard_size, 123.0f);
    r.state.assign(second.lay.shard_size, 77);
    auto cells = first.cells;
    REQUIRE(dec.run(cells.data(), first.index.data(), r.out.data(), r.state.data(), mode[0], mode[1], r.counts).ok());
    cells = second.cells;
    REQUIRE(dec.run(cells.data(), second.index.data(), r.out.data(), r.state.data(), mode[0], mode[1], r.counts).ok());
    REQUIRE(r.counts.unresolved > 0);
    const auto fresh = run_host(second, mode[0], mode[1]);
    CHECK(r.out == fresh.out);
    CHECK(r.state == fresh.state);
    CHECK(r.counts.peeled == fresh.counts.peeled);
    CHECK(r.counts.unresolved == fresh.counts.unresolved);
  }
}

TEST_CASE("near the threshold something stays unresolved and overloaded most does: the cases test both outcomes") {
  // Guards the test above against inputs where everything (or nothing) peels.
  const auto under = make_input<float>(2 * 61440, 2, 0, 10, 1, 0.06, 5);
  const auto over = make_input<float>(2 * 61440, 2, 0, 10, 1, 0.2, 6);
  const auto a = run_host(under, true, true), b = run_host(over, true, true);
  CHECK(a.counts.unresolved * 100 < a.counts.support);
  CHECK(a.counts.peeled > 0);
  CHECK(b.counts.unresolved * 2 > b.counts.support);
}
