// The builder: every reducer of the default catalogue's beyond-paper part (exact
// reduce-scattered index, 16-bit values, packed values, bf16 residual, the plain
// fp32/bf16 baselines) built from its description equals the directly-typed reducer.
#include <tagc/builder/default_catalogue.hpp>

#include "builder/catalogues.hpp"
#include "builder/check_entries.hpp"

namespace tagc_test {
TAGC_REDUCER_CATALOGUE(beyond_part, tagc::exec::host, tagc::local_communicator,
                       tagc::default_beyond_catalogue<tagc::exec::host>)
}

TEST_CASE("builder: every beyond-part entry, built from its description, reduces as the directly-typed reducer") {
  tagc_test::check_entries(tagc_test::default_local_catalogue(), tagc::default_beyond_catalogue<tagc::exec::host>{});
}
