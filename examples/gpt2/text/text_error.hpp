// text_error.hpp: the one exception type the text pipeline throws.
//
// The trainer's main catches it, prints what() and exits non-zero. Every message names
// the input (a file path, a token id, a byte offset) and what was expected of it, so the
// user can act on it without a debugger. Exceptions rather than error values because
// each of these failures ends the program anyway and the call sites stay readable.
#pragma once

#include <stdexcept>
#include <string>

namespace gpt2 {

class TextError : public std::runtime_error {
 public:
  explicit TextError(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace gpt2
