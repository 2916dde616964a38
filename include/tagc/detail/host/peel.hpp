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
// value share one record (peeling is bound by cache misses at high load: one line
// per cell touched, not three), of 8 bytes where the support and the counts fit
// (detail/host/peel_cells.hpp), else of 12. An entry's three edges and its peeled
// value share one 16-byte record too: peeling writes the value there, in the line
// it has just read the edges from, and touches neither the support list nor `out`
// nor `state` (three more random misses per queued peel near the threshold). One
// pass after peeling writes `out` and `state` front to back from the records (in
// parallel, zeros / absent between support entries, estimates for what is left).
// The hashes are computed
// once per sketch block (support entries come sorted, 1024 to a block), not per
// entry. Every buffer is sized in initialize(); run() allocates nothing.


#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <type_traits>
#include <vector>

#include "../../core/bits.hpp"
#include "../../core/status.hpp"
#include "../../exec/host.hpp"
#include "../../shard/layout.hpp"
#include "../decode_counts.hpp"
#include "../decode_kernels.hpp"
#include "peel_cells.hpp"
#include "support_list.hpp"

TAGC_BEGIN_NAMESPACE
namespace detail::host {

class shard_decoder {
 public:
  // Same contract as portable_decoder<Exec> (detail/portable_decode.hpp).
  status initialize(const layout& l, std::size_t own_shard, exec::host = {}) {
    lay_ = l;
    valid_ = shard_entries(l, own_shard);
    list_.reserve(l.index_bytes);
    support_.assign(l.shard_size, 0u);
    entry_.assign(l.shard_size, entry_record{});
    cell_storage_.assign((l.cells * sizeof(wide_cell) + sizeof(std::uint64_t) - 1) / sizeof(std::uint64_t), 0u);
    queue_.assign(l.cells + 1, 0u);  // + 1: take() writes a slot past the last one queued
    return {};
  }
  std::size_t workspace_bytes() const {
    return list_.workspace_bytes() + (support_.size() + queue_.size()) * sizeof(std::uint32_t) +
           entry_.size() * sizeof(entry_record) + cell_storage_.size() * sizeof(std::uint64_t);
  }
  // What initialize(l, ...) allocates (the reducers' workspace query).
  static std::size_t workspace_bytes_for(const layout& l) {
    const std::size_t cell_words = (l.cells * sizeof(wide_cell) + sizeof(std::uint64_t) - 1) / sizeof(std::uint64_t);
    return support_list::workspace_bytes_for(l.index_bytes) + (l.shard_size + l.cells + 1) * sizeof(std::uint32_t) +
           l.shard_size * sizeof(entry_record) + cell_words * sizeof(std::uint64_t);
  }

  // Decode into `out` (every entry written: 0 off the support), consuming `cells`
  // (the shard's summed sketch, fp32); `state` [shard] ends entry_absent,
  // entry_applied (peeled) or entry_unresolved, as the portable decoder leaves it.
  status run(float* cells, const std::uint8_t* own_index, float* out, std::uint8_t* state, bool peels, bool estimates,
             decode_counts& d) {
    const std::size_t S = lay_.shard_size, C = lay_.cells;
    d = {};
    const std::size_t m = list_.build(own_index, lay_.index_bytes, lay_.index_bits, valid_, support_.data());
    d.support = m;
    build_edges(m);
    // The 8-byte records when they fit (fewer cache misses), else the 12-byte ones.
    wide_ = !(m < compact_cell::most_entries && count_cells<compact_cell>(m, C, cells));
    if (!wide_) {
      finish<compact_cell>(out, state, m, S, peels, estimates, d);
    } else {
      (void)count_cells<wide_cell>(m, C, cells);  // always fits
      finish<wide_cell>(out, state, m, S, peels, estimates, d);
    }
    return {};
  }
  // Whether the last run() counted with the 12-byte records (tests force both).
  bool used_wide_cells() const { return wide_; }

 private:
  static constexpr std::uint32_t cell_mask = 0x7fffffffu, sign_bit = 0x80000000u;
  static constexpr std::size_t parallel_from = std::size_t(1) << 15;  // below: one thread (fork/join costs more)
  static constexpr std::size_t prefetch_ahead = 16;  // support entries ahead whose cell records are fetched
  // The queue's prefetch distances, in queued cells: the cell record, then its
  // entry's record, then the entry's three cells. 16 / 8 / 4 left misses
  // unoverlapped at high load: 32 / 16 / 8 cut the queue's time at ratio 4 (load
  // 0.76, 1.15M entries peeled from the queue, 16M elements, 2 ranks) from ~63 to
  // ~55 ms; 48 / 24 / 12 gained nothing more (docs/results/history.md, issue 10).
  static constexpr std::size_t queue_cell_ahead = 32, queue_entry_ahead = 16, queue_edges_ahead = 8;

  // Not peeled (yet): an entry record's value bits. A NaN no arithmetic produces
  // (x86's default NaN is 0xffc00000); the cells hold finite sums.
  static constexpr std::uint32_t unpeeled = 0xffffffffu;

  std::size_t cell(std::size_t i, int h) const { return entry_[i].edge[h] & cell_mask; }
  // v times the sign an edge carries, by flipping v's sign bit (the same value as
  // a multiply by +-1). Signs are random: `edge & sign_bit ? -1 : 1` compiled to a
  // branch that mispredicted half the time (peeling at ratio 10 went from ~6.3
  // to ~5.2 ms with this and the branch-free queue push in take()).
  static float signed_by(std::uint32_t edge, float v) {
    return std::bit_cast<float>(std::bit_cast<std::uint32_t>(v) ^ (edge & sign_bit));
  }

  // Cells and signs of every support entry, hashing once per block of lanes.
  void build_edges(std::size_t m) {
    const layout l = lay_;
    const std::uint32_t* support = support_.data();
    entry_record* entries = entry_.data();
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
        entry_record& rec = entries[i];
        for (int h = 0; h < 3; ++h) {
          std::size_t in_row = lane + rot[h];  // = (lane + rot) % lanes
          if (in_row >= lanes) in_row -= lanes;
          rec.edge[h] = std::uint32_t(row_base[h] + in_row) | sign[h];  // = sketch_cell(l, e, h)
        }
        rec.value = unpeeled;
      }
    }
  }

  // The records, in the cell storage (sized for the wide ones; count_cells constructs them).
  template <class Cell>
  Cell* records() {
    return std::launder(reinterpret_cast<Cell*>(cell_storage_.data()));
  }
  template <class Cell>
  const Cell* records() const {
    return std::launder(reinterpret_cast<const Cell*>(cell_storage_.data()));
  }

  // Count and XOR of support positions per cell, beside the cell's value (one
  // record: peeling touches one cache line per cell, not three arrays). The three
  // partitions own disjoint cells, so they are counted in parallel without atomics.
  // False when a cell holds more entries than Cell can count.
  template <class Cell>
  bool count_cells(std::size_t m, std::size_t C, const float* cells) {
    std::byte* storage = reinterpret_cast<std::byte*>(cell_storage_.data());
#pragma omp parallel for schedule(static) if (C >= parallel_from)
    for (std::size_t c = 0; c < C; ++c) ::new (static_cast<void*>(storage + c * sizeof(Cell))) Cell(Cell::holding(cells[c]));
    Cell* rec = records<Cell>();
    const entry_record* entries = entry_.data();
    bool fits = true;
#pragma omp parallel for schedule(static, 1) reduction(&& : fits) if (m >= parallel_from)
    for (int h = 0; h < 3; ++h)
      for (std::size_t i = 0; i < m; ++i) {
        // the records are scattered over the cells: fetch ahead (a hint only)
        if (i + prefetch_ahead < m) __builtin_prefetch(&rec[entries[i + prefetch_ahead].edge[h] & cell_mask], 1);
        fits &= rec[entries[i].edge[h] & cell_mask].add(std::uint32_t(i));
      }
    return fits;
  }

  template <class Cell>
  void finish(float* out, std::uint8_t* state, std::size_t m, std::size_t S, bool peels, bool estimates,
              decode_counts& d) {
    if (peels) d.peeled = peel<Cell>(m);
    d.unresolved = m - d.peeled;
    write_out<Cell>(out, state, m, S, estimates);
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
  // Why a sweep first: the records an entry needs are fetched ahead from its
  // edges, and at the loads a sketch runs at most entries peel in the sweep; the
  // queue used to start from a scan of every cell and visit entries in cell order.
  // A peeled value goes into the entry's record (write_out copies it to `out`).
  // Each cell is queued at most once (when its count first reaches 1), so the
  // queue needs C slots (and one for take()'s write past the tail). FIFO, not a
  // stack: a value peeled from a cell carries the rounding of every value
  // subtracted from that cell before, so the error grows with the length of the
  // chain that led to it. A queue visits cells in the rounds' order (breadth
  // first: chains as short as the portable rounds make them); a stack follows one
  // chain deep, and near the threshold (ratio 4, load 0.8) its errors reached 1e-4
  // of unit values after ~9,000 peels.
  template <class Cell>
  std::size_t peel(std::size_t m) {
    Cell* rec = records<Cell>();
    entry_record* entries = entry_.data();
    std::uint32_t* queue = queue_.data();
    std::size_t head = 0, tail = 0, peeled = 0;
    const std::size_t part_cells = lay_.part_rows * lay_.lanes;  // partition h owns cells [h, h + 1) * part_cells
    // Entry i takes value v (kept in its record) and is subtracted from its three
    // cells, marking them touched; a cell it leaves lone is queued.
    const auto take = [&](std::size_t i, float v) {
      entry_record& en = entries[i];
      en.value = std::bit_cast<std::uint32_t>(v);
      ++peeled;
      for (int h = 0; h < 3; ++h) {
        Cell& r = rec[en.edge[h] & cell_mask];
        r.value -= signed_by(en.edge[h], v);
        const std::uint32_t left = r.count() - 1;
        r.remove(std::uint32_t(i), left);
        queue[tail] = std::uint32_t(&r - rec);  // queued only if now lone: no branch to mispredict
        tail += left == 1;
      }
    };
    for (std::size_t i = 0; i < m; ++i) {
      if (i + prefetch_ahead < m) {
        const entry_record& ahead = entries[i + prefetch_ahead];
        for (int h = 0; h < 3; ++h) __builtin_prefetch(&rec[ahead.edge[h] & cell_mask], 1);
      }
      // Which of its cells the entry holds alone, as three bits, not three branches:
      // whether a cell is lone is random, and the branches mispredicted often
      // enough that this cut peeling at ratio 10 from ~5.2 to ~3.1 ms.
      const unsigned lone = unsigned(rec[cell(i, 0)].untouched_lone()) | unsigned(rec[cell(i, 1)].untouched_lone()) << 1 |
                            unsigned(rec[cell(i, 2)].untouched_lone()) << 2;
      if (lone) {
        const int h = std::countr_zero(lone);  // the first partition holding it alone
        take(i, signed_by(entries[i].edge[h], rec[cell(i, h)].value));
      }
    }
    while (head != tail) {
      // Cells here come in random order and each visit waits on misses in a row
      // (the cell, its entry's record, the entry's other cells). Prefetch them for
      // the visits queue_cell_ahead, queue_entry_ahead and queue_edges_ahead on
      // (hints only: the order and the results are unchanged).
      if (head + queue_cell_ahead < tail) __builtin_prefetch(&rec[queue[head + queue_cell_ahead]]);
      if (head + queue_entry_ahead < tail) {
        // Fetched whether or not the cell is still lone (a branch on it mispredicts;
        // a stale XOR is clamped into the records and wastes one fetch).
        const std::size_t i = rec[queue[head + queue_entry_ahead]].ids();
        __builtin_prefetch(entries + (i < m ? i : 0), 1);
      }
      if (head + queue_edges_ahead < tail) {
        const std::size_t i = rec[queue[head + queue_edges_ahead]].ids();
        const entry_record& en = entries[i < m ? i : 0];
        for (int h = 0; h < 3; ++h) __builtin_prefetch(&rec[en.edge[h] & cell_mask], 1);
      }
      const std::size_t c = queue[head++];
      if (rec[c].count() != 1) continue;  // emptied since it was queued
      const std::size_t i = rec[c].ids();
      const int hc = int(c >= part_cells) + int(c >= 2 * part_cells);  // c / part_cells, without branches
      take(i, signed_by(entries[i].edge[hc], rec[c].value));
    }
    return peeled;
  }

  // `out` and `state` for the whole shard, front to back, in parallel over ranges
  // of the support: 0 / entry_absent off the support (cleared in blocks, which
  // stay in cache for the support entries written into them next), the peeled
  // value / entry_applied, else entry_unresolved (retransmitted) and, when the
  // policy estimates, the conservative estimate from the entry's three signed cells.
  static constexpr std::size_t zero_block = 2048;  // entries cleared at a time (8 KB of out, 2 KB of state)
  static constexpr int out_chunks = 16;
  template <class Cell>
  void write_out(float* out, std::uint8_t* state, std::size_t m, std::size_t S, bool estimates) const {
    const std::uint32_t* support = support_.data();
    const entry_record* entries = entry_.data();
    const Cell* rec = records<Cell>();
#pragma omp parallel for schedule(static) if (S >= parallel_from)
    for (int c = 0; c < out_chunks; ++c) {
      const std::size_t i0 = m * std::size_t(c) / out_chunks, i1 = m * std::size_t(c + 1) / out_chunks;
      // positions [p0, p1): from this range's first entry to the next range's first
      const std::size_t p0 = c == 0 ? 0 : i0 < m ? support[i0] : S;
      const std::size_t p1 = c + 1 == out_chunks ? S : i1 < m ? support[i1] : S;
      std::size_t cleared = p0;  // out / state [p0, cleared) written
      const auto clear_to = [&](std::size_t to) {
        std::memset(out + cleared, 0, (to - cleared) * sizeof(float));
        std::memset(state + cleared, entry_absent, to - cleared);
        cleared = to;
      };
      for (std::size_t i = i0; i < i1; ++i) {
        const std::size_t e = support[i];
        if (e >= cleared) clear_to(std::min(p1, std::max(e + 1, cleared + zero_block)));
        const std::uint32_t v = entries[i].value;
        if (v != unpeeled) {
          out[e] = float_from_bits(v);
          state[e] = entry_applied;
        } else {
          state[e] = entry_unresolved;
          const std::uint32_t* edge = entries[i].edge;
          out[e] = estimates ? conservative_estimate(signed_by(edge[0], rec[cell(i, 0)].value),
                                                     signed_by(edge[1], rec[cell(i, 1)].value),
                                                     signed_by(edge[2], rec[cell(i, 2)].value))
                             : 0.0f;
        }
      }
      if (p1 > cleared) clear_to(p1);
    }
  }

  layout lay_{};
  std::size_t valid_ = 0;            // shard entries inside the caller's length
  support_list list_;
  std::vector<std::uint32_t> support_;  // [shard] support entries, ascending
  struct entry_record {
    std::uint32_t edge[3] = {0u, 0u, 0u};  // cell | sign bit, per partition
    std::uint32_t value = unpeeled;        // the peeled value's bits
  };
  std::vector<entry_record> entry_;     // [shard] per support entry
  // [cells] records, compact_cell or wide_cell (8-byte aligned: a compact record never straddles two lines)
  std::vector<std::uint64_t> cell_storage_;
  bool wide_ = false;
  std::vector<std::uint32_t> queue_;    // [cells] lone cells to visit, in order
};

}  // namespace detail::host
TAGC_END_NAMESPACE
