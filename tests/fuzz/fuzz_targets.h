// The parser entry points under fuzzing. Each target is a libFuzzer-style function: any bytes in,
// no crash, no sanitizer report, no unbounded allocation. Built two ways: with libFuzzer (clang,
// tools/fuzz.sh) for long runs, and with tests/fuzz/mutation_driver.cc for the short run in the
// test suite.
#ifndef KILN_TESTS_FUZZ_FUZZ_TARGETS_H_
#define KILN_TESTS_FUZZ_FUZZ_TARGETS_H_

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

#endif  // KILN_TESTS_FUZZ_FUZZ_TARGETS_H_
