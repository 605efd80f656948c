#ifndef QUAKED_CLIBFUZZER_H
#define QUAKED_CLIBFUZZER_H

#include <stddef.h>
#include <stdint.h>

/// libFuzzer's driver, for a program that has a main of its own: parses libFuzzer's options in
/// argc/argv and runs `testOneInput` as LLVMFuzzerTestOneInput. See
/// https://llvm.org/docs/LibFuzzer.html#using-libfuzzer-as-a-library
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*testOneInput)(const uint8_t *data, size_t size));

#endif
