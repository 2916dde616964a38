// defines: tagc_torch::python_catalogue() (catalogue.hpp): every Reducer the Python
//          package instantiates.
//
// The library's default catalogue (tagc/builder/default_catalogue.hpp), less what
// TagcState cannot name: its keywords choose the values, the ratio and the index
// (module.cpp's description_of), so the entries with another decoder, residual or index
// exchange than the description's defaults would never be built, and are not compiled.
// That keeps the paper's configuration with its 2x/4x and 4-bit variants, the 16-bit
// sketch cells, packed union values in fp32 (exact: at theta = 0 it equals a dense
// all-reduce, the tests' anchor), bf16 (best measured on the GPT-2 trainer,
// docs/results.md "Time to quality") and fp16, the shared selections (index_bits="shared"
// or "pooled" with packed fp32 or bf16 values: no union, so what crosses the replicas of an HSDP job
// or the ranks of an FSDP2 one does not grow with their number; tested with apply_fsdp2
// and apply_hsdp), and the plain reductions (units below TagcState's min_compress_numel
// take the fp32 one). A reducer added to the default catalogue is offered here too.

#include "catalogue.hpp"

#include <tagc/builder/catalogue.hpp>
#include <tagc/builder/default_catalogue.hpp>

namespace tagc_torch {
namespace {

constexpr bool nameable_by_tagc_state(const tagc::reducer_description& d) {
  const tagc::reducer_description defaults{};
  return d.decoder == defaults.decoder && d.residual == defaults.residual && d.exchange == defaults.exchange;
}

}  // namespace

using python_reducers = tagc::reducer_list_where<tagc::default_catalogue<tagc::exec::host>, nameable_by_tagc_state>;

TAGC_REDUCER_CATALOGUE(python_catalogue, tagc::exec::host, counted_comm, python_reducers)

}  // namespace tagc_torch
