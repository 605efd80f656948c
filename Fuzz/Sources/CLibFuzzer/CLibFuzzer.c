// Only the declaration in include/CLibFuzzer.h: the definition is in libFuzzer, which
// `-sanitize=fuzzer` links in.
#include "CLibFuzzer.h"
