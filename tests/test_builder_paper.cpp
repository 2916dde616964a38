// The builder: every reducer of the default catalogue's paper part (sketch values,
// index 1|4, ratio 2|4|10, every decoder) built from its description equals the
// directly-typed reducer. Its own file so the two catalogue parts compile in parallel.
#include <tagc/builder/default_catalogue.hpp>

#include "builder/catalogues.hpp"
#include "builder/check_entries.hpp"

namespace tagc_test {
TAGC_REDUCER_CATALOGUE(paper_part, tagc::exec::host, tagc::local_communicator,
                       tagc::default_paper_catalogue<tagc::exec::host>)
}

TEST_CASE("builder: every paper-part entry, built from its description, reduces as the directly-typed Reducer") {
  tagc_test::check_entries(tagc_test::default_local_catalogue(), tagc::default_paper_catalogue<tagc::exec::host>{});
}
