// scale_projection.cpp: where two-level TAGC pays, projected from the cost model
// (include/tagc/cost_model.hpp) for GPT-2 124M at 64 to 1024 GPUs, 8 per node, and
// 10, 25 and 100 Gbit/s per node link. Prints CSV; not a test.
//
// Inputs (each a flag; the defaults are stated in docs/results.md "Scaling"):
//   --compute-s S       one GPU's forward + backward per step (default 0.283 s: llm.c's
//                       published GPT-2 124M run, 10B tokens in 90 min on 8x A100 80GB,
//                       524,288 tokens per step = 64 x 1024 per GPU; discussion #481)
//   --tagc-bits B       what the compressed cross stage sends per parameter and node
//                       (measured: docs/results/scale.csv)
//   --codec-gbs G       fp32 gradient GB/s through compress and decode (a GPU assumption:
//                       nothing has run on a GPU yet; the CPU codec is ~1-2 GB/s)
//   --overlap F         share of the compute that hides gradient communication (0: none;
//                       2/3: the whole backward)
//   --full-shard 1      backward re-gathers the parameters (FSDP FULL_SHARD, the trainer's
//                       default): the embedding once (the LM head keeps it gathered), every
//                       other unit twice, 1.68x the bytes of GPT-2 124M; 0 (default): once
//                       per step (the trainer's --zero2, or ZeRO++ hpZ's secondary copy)
// Both configurations reduce-scatter in two levels: bf16 among the node's 8 GPUs over
// NVLink (450 GB/s), then across nodes bf16 (the fair baseline) or TAGC; and gather bf16
// parameters in two levels, as the trainer does with --ranks-per-node K
// (tagc::TwoLevelAllGather): across nodes, each node receiving (M-1)/M of the model over
// its link (its K ranks' shares together), then inside the node over NVLink. The trainer's
// param_bytes_internode matches this byte count: 16 ranks as 4 x 4, d2, bf16 gathers,
// FULL_SHARD: 4 x 2,761,584 B per node and step measured, 11,045,376 B from
// (M-1)/M x 2 B x (embedding + 2 x the rest), the difference its 12-byte size checks.
#include <tagc/cost_model.hpp>

#include <algorithm>
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

}  // namespace

int main(int argc, char** argv) {
  const double params = 124.44e6;  // GPT-2 124M
  const double compute = flag(argc, argv, "--compute-s", 0.283);
  const double tagc_bits = flag(argc, argv, "--tagc-bits", 1.0);
  const double codec = flag(argc, argv, "--codec-gbs", 100.0) * 1e9;
  const double overlap = flag(argc, argv, "--overlap", 0.0);
  const bool full_shard = flag(argc, argv, "--full-shard", 0.0) != 0.0;
  // GPT-2 124M's embedding unit: wte (the padded vocabulary, 50304 x 768) + wpe (1024 x 768)
  const double embedding = (50304.0 + 1024.0) * 768.0;
  const double gathered = full_shard ? embedding + 2.0 * (params - embedding) : params;  // elements per step
  const int per_node = 8;
  const tagc::link_model nvlink{.bytes_per_second = 450e9, .latency_seconds = 10e-6};
  const tagc::codec_model codec_m{.compress_bytes_per_second = codec, .decode_bytes_per_second = codec};
  std::printf("gpus,nodes,gbit_per_node,bf16_grad_s,tagc_grad_s,gather_s,bf16_step_s,tagc_step_s,speedup\n");
  for (const double gbit : {10.0, 25.0, 100.0}) {
    const tagc::link_model node_link{.bytes_per_second = gbit * 1e9 / 8.0, .latency_seconds = 50e-6};
    for (const int gpus : {64, 128, 256, 512, 1024}) {
      const int nodes = gpus / per_node;
      const auto g = tagc::estimate_two_level_reduce_scatter(std::size_t(params), nodes, per_node, 16.0, tagc_bits,
                                                            nvlink, node_link, codec_m);
      // bf16 parameters in two levels: (M-1)/M of what is gathered crosses each node's link,
      // then each rank receives (K-1)/K of it from its node over NVLink
      const double gather = double(nodes - 1) / double(nodes) * gathered * 2.0 / node_link.bytes_per_second +
                            double(per_node - 1) / double(per_node) * gathered * 2.0 / nvlink.bytes_per_second;
      const auto step = [&](double grad) { return compute + gather + std::max(0.0, grad - overlap * compute); };
      const double bf16 = step(g.dense_seconds), tagc = step(g.compressed_seconds);
      std::printf("%d,%d,%.0f,%.4f,%.4f,%.4f,%.4f,%.4f,%.2f\n", gpus, nodes, gbit, g.dense_seconds, g.compressed_seconds,
                  gather, bf16, tagc, bf16 / tagc);
    }
  }
  return 0;
}
