// host_reducers_beyond.cpp: the beyond-paper part of the trainers' catalogue on
// exec::host over MPI (17 types: the exact reduce-scattered index, 16-bit values,
// packed values, the shared and pooled selections, the bf16 residual, the plain fp32/bf16 baselines), and the whole
// host catalogue (both parts).
// defines: train::reducer_catalogue_for(exec::host)
#include "reducer_catalogue.hpp"

#include "tagc/builder/default_catalogue.hpp"

namespace train {

tagc::reducer_catalogue<tagc::exec::host, Comm> host_reducers_paper();
TAGC_REDUCER_CATALOGUE(host_reducers_beyond, tagc::exec::host, Comm, tagc::default_beyond_catalogue<tagc::exec::host>)

tagc::reducer_catalogue<tagc::exec::host, Comm> reducer_catalogue_for(const tagc::exec::host&) {
  static const tagc::reducer_catalogue<tagc::exec::host, Comm> all("tagc-gpt2 (exec::host)",
                                                                   {host_reducers_paper(), host_reducers_beyond()});
  return all;
}

}  // namespace train
