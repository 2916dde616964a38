#pragma once
// defines: tagc::detail::host::shard_decoder — the owner's decode of its shard on
//          the CPU: support list from index words, peeling by one sweep plus a
//          queue, estimates for what is left (DecodePolicy's meaning, unchanged).
//
// The portable decoder (detail/portable_decode.hpp) peels in rounds over the whole
// support list, because a GPU needs bulk-parallel steps; each round costs four
// passes over the support and most rounds resolve few entries. On a CPU the
// classic formulation is linear in the support: one sweep over the support
// peels every entry that holds a cell alone when the sweep reaches it, resolving
// an entry subtracts it from its three cells, and a queue holds any cell that
// becomes lone (for entries the sweep had passed).
// Peeling to a fixpoint is order-independent (what is left is the 2-core of the
// hypergraph), so this resolves exactly the entries the rounds resolve, and the
// values agree to float rounding: only the order of the subtractions from a cell
// differs. tests/test_decode_paths.cpp compares the two on the same inputs.
//
// Cells hold a count and the XOR of the *support positions* of their entries, so
// a lone cell names its entry's cached edges directly; count, XOR and the cell's
// value share one 12-byte record (peeling is bound by cache misses at high load:
// one line per cell touched, not three). The hashes are computed
// once per sketch block (support entries come sorted, 1024 to a block), not per
// entry. Every buffer is sized in initialize(); run() allocates nothing.


#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "../../core/status.hpp"
#include "../../exec/host.hpp"
#include "../../shard/layout.hpp"
#include "../decode_counts.hpp"
#include "../decode_kernels.hpp"
#include "support_list.hpp"

TAGC_BEGIN_NAMESPACE
namespace detail::host {

class shard_decoder {
 public:
  // Same contract as portable_decoder<Exec> (detail/portable_decode.hpp).
  status initialize(const layout& l, std::size_t own_shard, exec::host = {}) {
    lay_ = l;
    valid_ = shard_entries(l, own_shard);
    last_state_ = nullptr;
    last_support_ = 0;
    list_.reserve(l.index_bytes);
    support_.assign(l.shard_size, 0u);
    edges_.assign(3 * l.shard_size, 0u);
    cell_.assign(l.cells, cell_record{});
    queue_.assign(l.cells, 0u);
    return {};
  }
  std::size_t workspace_bytes() const {
    return list_.workspace_bytes() +
           (support_.size() + edges_.size() + queue_.size()) * sizeof(std::uint32_t) + cell_.size() * sizeof(cell_record);
  }

  // Decode into `out` (every entry written: 0 off the support), consuming `cells`
  // (the shard's summed sketch, fp32); `state` [shard] ends entry_absent,
  // entry_applied (peeled) or entry_unresolved, as the portable decoder leaves it.
  status run(float* cells, const std::uint8_t* own_index, float* out, std::uint8_t* state, bool peels, bool estimates,
             decode_counts& d) {
    const std::size_t S = lay_.shard_size, C = lay_.cells;
    // Peeling writes `out` and `state` front to back as it sweeps the support
    // (zeros / absent between support entries): no separate pass to clear them.
    if (!peels) clear(out, state, S);
    d = {};
    last_state_ = state;
    last_support_ = 0;
    const std::size_t m = list_.build(own_index, lay_.index_bytes, lay_.index_bits, valid_, support_.data());
    d.support = m;
    last_support_ = m;
    build_edges(m);
    count_cells(m, C, cells);
    if (peels) d.peeled = peel(out, state, m, S);
    d.unresolved = m - d.peeled;
    if (d.unresolved) finish_unresolved(out, state, m, estimates);
    return {};
  }

 private:
  static constexpr std::uint32_t cell_mask = 0x7fffffffu, sign_bit = 0x80000000u;
  static constexpr std::size_t parallel_from = std::size_t(1) << 15;  // below: one thread (fork/join costs more)
  static constexpr std::size_t prefetch_ahead = 16;  // support entries ahead whose cell records are fetched

  std::size_t cell(std::size_t i, int h) const { return edges_[3 * i + std::size_t(h)] & cell_mask; }
  float sign(std::size_t i, int h) const { return (edges_[3 * i + std::size_t(h)] & sign_bit) ? -1.0f : 1.0f; }

  // out = 0 everywhere; state = entry_absent everywhere (without peeling: the sweep
  // does both otherwise). The state buffer of the previous call (the same one,
  // written by nothing else) is absent but at that call's support entries: only
  // those are reset, not the whole shard.
  void clear(float* out, std::uint8_t* state, std::size_t S) const {
    constexpr std::size_t chunk = std::size_t(1) << 16;
    const std::size_t chunks = (S + chunk - 1) / chunk;
    const bool sparse = state == last_state_;
    if (sparse) {
      const std::uint32_t* support = support_.data();
      const std::size_t m = last_support_;
#pragma omp parallel for schedule(static) if (m >= parallel_from)
      for (std::size_t i = 0; i < m; ++i) state[support[i]] = entry_absent;
    }
#pragma omp parallel for schedule(static) if (S >= parallel_from)
    for (std::size_t c = 0; c < chunks; ++c) {
      const std::size_t b = c * chunk, n = S - b < chunk ? S - b : chunk;
      std::memset(out + b, 0, n * sizeof(float));
      if (!sparse) std::memset(state + b, entry_absent, n);
    }
  }

  // Cells and signs of every support entry, hashing once per block of lanes.
  void build_edges(std::size_t m) {
    const layout l = lay_;
    const std::uint32_t* support = support_.data();
    std::uint32_t* edges = edges_.data();
#pragma omp parallel if (m >= parallel_from)
    {
      // Support entries ascend: a block's hashes are computed when an entry passes
      // the previous block's end, and lanes come from subtractions (no division per entry).
      std::size_t block_begin = 0, block_end = 0, row_base[3] = {0, 0, 0}, rot[3] = {0, 0, 0};
      std::uint32_t sign[3] = {0, 0, 0};
      const std::size_t lanes = l.lanes;
#pragma omp for schedule(static)
      for (std::size_t i = 0; i < m; ++i) {
        const std::size_t e = support[i];
        if (e >= block_end || e < block_begin) {
          const std::size_t j = e / lanes;
          block_begin = j * lanes;
          block_end = block_begin + lanes;
          for (int h = 0; h < 3; ++h) {
            const std::uint32_t hash = sketch_hash(std::uint32_t(j), h);
            row_base[h] = sketch_row(hash, l.part_rows, h) * lanes;
            rot[h] = sketch_rotation(std::uint32_t(j), h, lanes);
            sign[h] = sketch_sign(hash) < 0.0f ? sign_bit : 0u;
          }
        }
        const std::size_t lane = e - block_begin;
        for (int h = 0; h < 3; ++h) {
          std::size_t in_row = lane + rot[h];  // = (lane + rot) % lanes
          if (in_row >= lanes) in_row -= lanes;
          edges[3 * i + std::size_t(h)] = std::uint32_t(row_base[h] + in_row) | sign[h];  // = sketch_cell(l, e, h)
        }
      }
    }
  }

  // Count and XOR of support positions per cell, beside the cell's value (one
  // record: peeling touches one cache line per cell, not three arrays). The three
  // partitions own disjoint cells, so they are counted in parallel without atomics.
  void count_cells(std::size_t m, std::size_t C, const float* cells) {
    cell_record* rec = cell_.data();
    const std::uint32_t* edges = edges_.data();
#pragma omp parallel for schedule(static) if (C >= parallel_from)
    for (std::size_t c = 0; c < C; ++c) rec[c] = {0u, 0u, cells[c]};
#pragma omp parallel for schedule(static, 1) if (m >= parallel_from)
    for (int h = 0; h < 3; ++h)
      for (std::size_t i = 0; i < m; ++i) {
        // the records are scattered over the cells: fetch ahead (a hint only)
        if (i + prefetch_ahead < m) __builtin_prefetch(&rec[edges[3 * (i + prefetch_ahead) + std::size_t(h)] & cell_mask], 1);
        cell_record& r = rec[edges[3 * i + std::size_t(h)] & cell_mask];
        ++r.count;
        r.ids ^= std::uint32_t(i);
      }
  }

  // One sweep over the support, then a FIFO queue. The sweep visits the entries
  // in ascending order: an entry with a cell it held alone from the start (count 1,
  // never subtracted from) takes that cell's value and is subtracted from its three
  // cells at once; a cell it leaves lone is queued (its entry may lie behind or
  // ahead of the sweep). The queue then peels what is left, each lone cell naming
  // its entry by the XOR of positions. The sweep takes only untouched cells because
  // it is the first round: a cell made lone by a subtraction earlier in the sweep
  // would chain values in entry order (one peel feeding the next, chains as long as
  // the sweep), and with 16-bit cells those errors exceeded 4 ulps (tagc_lowprec's
  // fp16 range case); queued, that cell is peeled in the rounds' order instead.
  // Why a sweep first: out and state are written front to back (streamed, zeroed /
  // absent between support entries on the way, so no clearing pass), the records
  // an entry needs are fetched ahead from its edges, and at the loads a sketch
  // runs at most entries peel in the sweep; the queue used to start from a scan
  // of every cell and visit entries in cell order (random writes to out/state).
  // Each cell is queued at most once (when its count first reaches 1), so the
  // queue needs C slots. FIFO, not a stack: a value peeled from a cell carries
  // the rounding of every value subtracted from that cell before, so the error
  // grows with the length of the chain that led to it. A queue visits cells in
  // the rounds' order (breadth first: chains as short as the portable rounds make
  // them); a stack follows one chain deep, and near the threshold (ratio 4, load
  // 0.8) its errors reached 1e-4 of unit values after ~9,000 peels.
  static constexpr std::size_t zero_block = 2048;  // entries the sweep clears at a time (8 KB of out, 2 KB of state)
  std::size_t peel(float* out, std::uint8_t* state, std::size_t m, std::size_t S) {
    cell_record* rec = cell_.data();
    std::uint32_t* queue = queue_.data();
    const std::uint32_t* support = support_.data();
    const std::uint32_t* edges = edges_.data();
    std::size_t head = 0, tail = 0, peeled = 0;
    const std::size_t part_cells = lay_.part_rows * lay_.lanes;  // partition h owns cells [h, h + 1) * part_cells
    // Subtract entry i (value v) from its three cells, marking them touched; queue
    // a cell it leaves lone.
    const auto release = [&](std::size_t i, float v) {
      for (int h = 0; h < 3; ++h) {
        cell_record& r = rec[cell(i, h)];
        r.value -= sign(i, h) * v;
        r.ids ^= std::uint32_t(i);
        const std::uint32_t left = (r.count & count_bits) - 1;
        r.count = left | touched_bit;
        if (left == 1) queue[tail++] = std::uint32_t(&r - rec);
      }
    };
    std::size_t zeroed = 0;  // out[0, zeroed) and state[0, zeroed) cleared or written
    for (std::size_t i = 0; i < m; ++i) {
      if (i + prefetch_ahead < m) {
        const std::uint32_t* ed = &edges[3 * (i + prefetch_ahead)];
        for (int h = 0; h < 3; ++h) __builtin_prefetch(&rec[ed[h] & cell_mask], 1);
      }
      const std::uint32_t e = support[i];
      if (e >= zeroed) {
        // Clear ahead in blocks, not up to each entry: a support entry every ~40
        // positions made two memset calls per entry the sweep's largest cost. The
        // block stays in cache for the entries the sweep writes into it next.
        const std::size_t to = std::min(S, std::max(std::size_t(e) + 1, zeroed + zero_block));
        std::memset(out + zeroed, 0, (to - zeroed) * sizeof(float));
        std::memset(state + zeroed, entry_absent, to - zeroed);
        zeroed = to;
      }
      int lone = -1;
      for (int h = 2; h >= 0; --h)
        if (rec[cell(i, h)].count == 1) lone = h;  // the first partition holding it alone, untouched
      if (lone < 0) {
        out[e] = 0.0f;  // for now: the queue may peel it, else finish_unresolved sets both
        state[e] = entry_absent;
        continue;
      }
      const float v = sign(i, lone) * rec[cell(i, lone)].value;
      out[e] = v;
      state[e] = entry_applied;
      ++peeled;
      release(i, v);
    }
    if (S > zeroed) {
      std::memset(out + zeroed, 0, (S - zeroed) * sizeof(float));
      std::memset(state + zeroed, entry_absent, S - zeroed);
    }
    while (head != tail) {
      // Cells here come in random order and each visit waits on three misses in a
      // row (the cell, its entry's edges, the entry's other cells). Prefetch them
      // for the visits 16, 8 and 4 ahead (hints only: the order and the results are unchanged).
      if (head + 16 < tail) __builtin_prefetch(&rec[queue[head + 16]]);
      if (head + 8 < tail) {
        const cell_record& ahead = rec[queue[head + 8]];
        if ((ahead.count & count_bits) == 1) {
          __builtin_prefetch(&edges[3 * std::size_t(ahead.ids)]);
          __builtin_prefetch(&support[ahead.ids]);
        }
      }
      if (head + 4 < tail) {
        const cell_record& ahead = rec[queue[head + 4]];
        if ((ahead.count & count_bits) == 1) {
          const std::uint32_t* ed = &edges[3 * std::size_t(ahead.ids)];
          for (int h = 0; h < 3; ++h) __builtin_prefetch(&rec[ed[h] & cell_mask], 1);
          __builtin_prefetch(&out[support[ahead.ids]], 1);
          __builtin_prefetch(&state[support[ahead.ids]], 1);
        }
      }
      const std::size_t c = queue[head++];
      if ((rec[c].count & count_bits) != 1) continue;  // emptied since it was queued
      const std::size_t i = rec[c].ids;
      const int hc = c < part_cells ? 0 : c < 2 * part_cells ? 1 : 2;  // c / part_cells
      const float v = sign(i, hc) * rec[c].value;
      const std::uint32_t e = support[i];
      out[e] = v;
      state[e] = entry_applied;
      ++peeled;
      release(i, v);
    }
    return peeled;
  }

  // Entries peeling left: marked unresolved (they are retransmitted), and given
  // the conservative estimate from their three signed cells when the policy estimates.
  void finish_unresolved(float* out, std::uint8_t* state, std::size_t m, bool estimates) {
    const std::uint32_t* support = support_.data();
    const cell_record* rec = cell_.data();
#pragma omp parallel for schedule(static) if (m >= parallel_from)
    for (std::size_t i = 0; i < m; ++i) {
      const std::uint32_t e = support[i];
      if (state[e] == entry_applied) continue;
      state[e] = entry_unresolved;
      if (estimates)
        out[e] = conservative_estimate(sign(i, 0) * rec[cell(i, 0)].value, sign(i, 1) * rec[cell(i, 1)].value,
                                       sign(i, 2) * rec[cell(i, 2)].value);
    }
  }

  layout lay_{};
  std::size_t valid_ = 0;            // shard entries inside the caller's length
  const std::uint8_t* last_state_ = nullptr;  // the state buffer of the last run (see clear)
  std::size_t last_support_ = 0;              // its support entries: support_[0, last_support_)
  support_list list_;
  std::vector<std::uint32_t> support_;  // [shard] support entries, ascending
  std::vector<std::uint32_t> edges_;    // [3 * shard] cell | sign bit, per support entry and partition
  struct cell_record {
    std::uint32_t count;  // entries not yet peeled (count_bits), touched_bit once subtracted from
    std::uint32_t ids;    // XOR of their support positions
    float value;          // the cell's sum less what was peeled from it
  };
  static constexpr std::uint32_t touched_bit = 1u << 31, count_bits = touched_bit - 1;
  std::vector<cell_record> cell_;       // [cells]
  std::vector<std::uint32_t> queue_;    // [cells] lone cells to visit, in order
};

}  // namespace detail::host
TAGC_END_NAMESPACE
