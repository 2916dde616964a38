#pragma once
// defines: the test catalogue's two parts (tests/test_builder_paper.cpp,
//          tests/test_builder_beyond.cpp) and tagc_test::default_local_catalogue(),
//          the whole default catalogue over exec::host + the in-process communicator.

#include <tagc/builder.hpp>
#include <tagc/comm/local.hpp>
#include <tagc/exec/host.hpp>

namespace tagc_test {
tagc::reducer_catalogue<tagc::exec::host, tagc::local_communicator> paper_part();
tagc::reducer_catalogue<tagc::exec::host, tagc::local_communicator> beyond_part();
inline tagc::reducer_catalogue<tagc::exec::host, tagc::local_communicator> default_local_catalogue() {
  return {"default (test)", {paper_part(), beyond_part()}};
}
}  // namespace tagc_test
