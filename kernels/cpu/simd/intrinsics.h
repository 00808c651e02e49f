// The x86 intrinsics, for the kernels that use them.
// GCC 12 reports its own _mm512_undefined_*() placeholders inside the AVX-512 intrinsic headers
// as uninitialised reads (a known false positive), which -Werror would turn into build failures;
// a translation unit that includes this header does not get those two warnings.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#endif

// The AVX-512 level of the quantised kernels (its VNNI dots); without it they take their AVX2 forms.
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VNNI__)
#define TPSERVE_QUANT_AVX512 1
#endif
