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
