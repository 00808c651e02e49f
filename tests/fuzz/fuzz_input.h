// Helpers shared by the libFuzzer targets: fuzz bytes as a file the readers can open (they take
// paths, and read with pread), and a scratch directory per process for the directory formats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tpserve::fuzz {

// A file holding `bytes`, in a per-process directory under /dev/shm (or $TMPDIR), overwritten on
// each call with the same name. Returns its path.
std::string WriteScratchFile(const std::string& name, std::string_view bytes);

// The per-process scratch directory (created on first use).
const std::string& ScratchDir();

// Splits fuzz input at the first occurrence of `separator`: head before it, tail after it
// (tail empty when there is none). Lets one input carry two fields (a template and messages).
void SplitInput(std::string_view input, char separator, std::string_view* head, std::string_view* tail);

}  // namespace tpserve::fuzz
