// scale_projection.cpp: where two-level TAGC pays, projected from the cost model
// (include/tagc/cost_model.hpp) for GPT-2 124M at 64 to 1024 GPUs, 8 per node, and
// 10, 25 and 100 Gbit/s per node link. Prints CSV; not a test.
//
// Inputs (each a flag; the defaults are stated in docs/results.md "Scaling"):
//   --compute-s S       one GPU's forward + backward per step (default 0.283 s: llm.c's
//                       published GPT-2 124M run, 10B tokens in 90 min on 8x A100 80GB,
//                       524,288 tokens per step = 64 x 1024 per GPU; discussion #481)
//   --theta T           the shared selection's theta (default 0.9875): what its compressed
//                       units send across nodes comes from tagc::shared_selection_cross_bits
//                       (agreed bf16 values all-reduced, the leader's positions broadcast),
//                       which reproduces the trainer's measured bytes (docs/results.md)
//   --index shared|gathered|routed
//                       the selection across nodes: the rotating leader's (SharedIndexPolicy,
//                       default; bytes independent of the node count), every node's own k
//                       (GatheredIndexPolicy, the configuration that met the 4-node quality
//                       target; tagc::gathered_index_cross_bits: M lists plus the values at
//                       the union, which grows with M), or every node's own k sent to the
//                       shards' owners (RoutedIndexPolicy: the gathered index's sums,
//                       tagc::routed_index_cross_bits, independent of M; the hsdp rows add
//                       the owners' sums to every node, the union of the M selections
//                       (at most B k with --union-bound):
//                       tagc::routed_all_reduce_cross_bits)
//   --union-2 U, --union-growth A
//                       gathered and routed hsdp: the union of the M nodes' selections over k, modelled as
//                       min(M, U x (M/2)^A) from the sweep in docs/results.md (defaults
//                       there); measured up to 16 nodes, extrapolated beyond
//   --union-bound B     routed hsdp: each owner forwards at most B k / M of its largest sums
//                       (reducer_arguments::union_bound), so the union above is at most B
//                       (default 0: unbounded)
//   --tagc-bits B       instead of --theta: bits per compressed parameter across nodes, in the
//                       cost model's convention (bytes per node = (M-1)/M x n x B / 8); the
//                       hsdp rows take it as the compressed all-reduce's bits, which equal
//                       the reduce-scatter's for a shared selection only
//   --codec-gbs G       fp32 gradient GB/s through compress and decode (a GPU assumption:
//                       nothing has run on a GPU yet; the CPU codec is ~1-2 GB/s)
//   --overlap F         share of the compute that hides gradient communication (0: none;
//                       2/3: the whole backward)
//   --gather bf16|int8  the parameter all-gather's code, in both configurations alike: bf16
//                       (default, 2 bytes a parameter) or int8 blocks (tagc/int8_blocks.hpp,
//                       the trainer's --gather-dtype int8: 260 bytes a block of 256, 1.016)
//   --full-shard 1      backward re-gathers the parameters (FSDP FULL_SHARD, the trainer's
//                       default): the embedding once (the LM head keeps it gathered), every
//                       other unit twice, 1.68x the bytes of GPT-2 124M; 0 (default): once
//                       per step (the trainer's --zero2, or ZeRO++ hpZ's secondary copy)
// Two layouts, both rows printed (column `layout`):
//   sharded  parameters sharded over every GPU (the trainer with --ranks-per-node K; FSDP
//            FULL_SHARD with --full-shard 1, else gathered once per step as ZeRO-2 or hpZ
//            do): gradients reduce-scatter in two levels, bf16 among the node's 8 GPUs over
//            NVLink (450 GB/s), then across nodes bf16 (the fair baseline) or TAGC; bf16
//            parameters gathered in two levels (tagc::TwoLevelAllGather): each node receives
//            (M-1)/M of the model over its link, then the rest over NVLink.
//   hsdp     parameters sharded inside a node and replicated across nodes (FSDP2's HSDP,
//            tagc.torch's all-reduce hook): the node reduce-scatters over NVLink, then the
//            nodes all-reduce their slices (bf16, or TAGC); parameters are gathered inside
//            the node only. More memory per GPU (a replica per node), no parameter bytes
//            across nodes.
// TAGC compresses what the trainer's `--compress non-attention` compresses: the token
// embedding, the attention output projection and both MLP matrices (82 % of GPT-2 124M);
// the rest (position embedding, the QKV matrices, biases, layer norms) goes plain in bf16
// beside it, as in the baseline.
// The trainer's param_bytes_internode matches the sharded gather's byte count: 16 ranks as
// 4 x 4, d2, bf16 gathers, FULL_SHARD: 4 x 2,761,584 B per node and step measured,
// 11,045,376 B from (M-1)/M x 2 B x (embedding + 2 x the rest), the difference its 12-byte
// size checks.
#include <tagc/cost_model.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

double flag(int argc, char** argv, const char* name, double fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::atof(argv[i + 1]);
  return fallback;
}
std::string text_flag(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return fallback;
}

// GPT-2 124M in the trainer's layout (examples/gpt2/model/src/layout.cpp): padded
// vocabulary 50304, 1024 positions, 768 channels, 12 layers.
struct gpt2_124m {
  static constexpr double C = 768, L = 12;
  static constexpr double embedding = (50304.0 + 1024.0) * C;                      // wte + wpe, one unit
  static constexpr double per_layer = 4 * C * C + 6 * C + 8 * C * C + 7 * C;      // attn + mlp units
  static constexpr double params = embedding + L * per_layer + 2 * C;              // + the final layer norm
  static constexpr double compressed = 50304.0 * C + L * (C * C + 8 * C * C);      // wte, attprojw, fcw, fcprojw
};

}  // namespace

int main(int argc, char** argv) {
  using m = gpt2_124m;
  const double compute = flag(argc, argv, "--compute-s", 0.283);
  const double theta = flag(argc, argv, "--theta", 0.9875);
  const std::string index = text_flag(argc, argv, "--index", "shared");
  if (index != "shared" && index != "gathered" && index != "routed") {
    std::fprintf(stderr, "tagc_scale_projection: --index %s: expected shared, gathered or routed\n", index.c_str());
    return 2;
  }
  const bool gathered_index = index == "gathered", routed_index = index == "routed";
  const double union_2 = flag(argc, argv, "--union-2", 1.735), union_growth = flag(argc, argv, "--union-growth", 0.621);
  const double given_bits = flag(argc, argv, "--tagc-bits", -1.0);
  const double union_bound = flag(argc, argv, "--union-bound", 0.0);
  // bits per compressed parameter across M nodes (the cost model's convention)
  const auto tagc_bits = [&](int nodes, bool sharded) {
    if (given_bits >= 0.0) return given_bits;
    if (!gathered_index && !routed_index) return tagc::shared_selection_cross_bits(1.0 - theta);
    const double union_ratio = tagc::gathered_union_ratio(nodes, union_2, union_growth);
    if (routed_index)
      return sharded ? tagc::routed_index_cross_bits(1.0 - theta)
                     : tagc::routed_all_reduce_cross_bits(
                           1.0 - theta, union_bound > 0.0 ? std::min(union_ratio, union_bound) : union_ratio);
    return tagc::gathered_index_cross_bits(1.0 - theta, nodes, union_ratio, 16.0, sharded);
  };
  const double codec = flag(argc, argv, "--codec-gbs", 100.0) * 1e9;
  const double overlap = flag(argc, argv, "--overlap", 0.0);
  const bool full_shard = flag(argc, argv, "--full-shard", 0.0) != 0.0;
  const double gathered = full_shard ? m::embedding + 2.0 * (m::params - m::embedding) : m::params;  // per step
  const std::string gather_code = text_flag(argc, argv, "--gather", "bf16");
  if (gather_code != "bf16" && gather_code != "int8") {
    std::fprintf(stderr, "tagc_scale_projection: --gather %s: expected bf16 or int8\n", gather_code.c_str());
    return 2;
  }
  const double gather_bytes = gather_code == "int8" ? 260.0 / 256.0 : 2.0;  // per gathered parameter
  const double plain = m::params - m::compressed;
  std::fprintf(stderr, "GPT-2 124M: %.0f parameters, %.1f %% compressed (%s index, theta %.4f, union bound %g), "
               "the rest bf16; parameters gathered in %s\n", m::params, 100.0 * m::compressed / m::params,
               index.c_str(), theta, union_bound, gather_code.c_str());
  const int per_node = 8;
  const tagc::link_model nvlink{.bytes_per_second = 450e9, .latency_seconds = 10e-6};
  const tagc::codec_model codec_m{.compress_bytes_per_second = codec, .decode_bytes_per_second = codec};
  std::printf("layout,gpus,nodes,gbit_per_node,tagc_bits,bf16_grad_s,tagc_grad_s,gather_s,bf16_step_s,tagc_step_s,speedup\n");
  for (const bool hsdp : {false, true}) {
    for (const double gbit : {10.0, 25.0, 100.0}) {
      const tagc::link_model node_link{.bytes_per_second = gbit * 1e9 / 8.0, .latency_seconds = 50e-6};
      for (const int gpus : {64, 128, 256, 512, 1024}) {
        const int nodes = gpus / per_node;
        const double bits = tagc_bits(nodes, !hsdp);
        // the collectives a compressed call issues: check, index and values (and a count),
        // routed in an all-reduce also the owners' counts and the all-gather of their blocks
        // (padded to the fullest, under a quarter more: their bytes are counted unpadded)
        const int collectives = tagc::reducer_collectives + (hsdp && routed_index ? 2 : 0);
        const auto estimate = [&](double n) {
          return hsdp ? tagc::estimate_two_level_all_reduce(std::size_t(n), nodes, per_node, 16.0, bits, nvlink,
                                                            node_link, codec_m, collectives)
                      : tagc::estimate_two_level_reduce_scatter(std::size_t(n), nodes, per_node, 16.0, bits,
                                                                nvlink, node_link, codec_m, collectives);
        };
        const double bf16_grad = estimate(m::params).dense_seconds;
        const double tagc_grad = estimate(plain).dense_seconds + estimate(m::compressed).compressed_seconds;
        // parameters (bf16 or int8 blocks): sharded gathers across nodes ((M-1)/M over the node's
        // link) and then inside the node ((K-1)/K over NVLink); hsdp inside the node only
        const double cross_gather =
            hsdp ? 0.0 : double(nodes - 1) / double(nodes) * gathered * gather_bytes / node_link.bytes_per_second;
        const double gather = cross_gather + double(per_node - 1) / double(per_node) * gathered * gather_bytes /
                                                 nvlink.bytes_per_second;
        const auto step = [&](double grad) { return compute + gather + std::max(0.0, grad - overlap * compute); };
        const double bf16 = step(bf16_grad), tagc = step(tagc_grad);
        std::printf("%s,%d,%d,%.0f,%.2f,%.4f,%.4f,%.4f,%.4f,%.4f,%.2f\n", hsdp ? "hsdp" : "sharded", gpus, nodes, gbit,
                    bits, bf16_grad, tagc_grad, gather, bf16, tagc, bf16 / tagc);
      }
    }
  }
  return 0;
}
