// tpserve-reference-next: the float64 reference's (tests/testing/reference_llama.h: plain loops over
// the dequantised weights, no engine kernel) view of the next token after a sequence: its top two ids
// and their logit margin. Used by bench/greedy_vs_llama.py to judge where two engines' greedy ids part.
//   tpserve-reference-next --model FILE --ids 1,2,3
// Prints one line: "top1 ID LOGIT top2 ID LOGIT margin M".
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "common/command_line.h"
#include "model/model_file.h"
#include "tests/testing/reference_llama.h"

int main(int argc, char** argv) {
  using namespace tpserve;
  std::string model_path;
  std::vector<int32_t> ids;
  CommandLine app("tpserve-reference-next: the float64 reference's top two next tokens after a sequence.",
                  "tpserve-reference-next");
  app.add_option("--model", model_path, "GGUF file or HF directory")->required();
  app.add_option("--ids", ids, "the sequence: 1,2,3")->required()->delimiter(',');
  if (std::optional<int> exit_code = app.ParseOrExitCode(argc, argv)) return *exit_code;
  auto model = ModelFile::Open(model_path);
  if (!model.ok()) {
    std::fprintf(stderr, "tpserve-reference-next: %s\n", model.status().ToString().c_str());
    return 1;
  }
  auto ref = testing::ReferenceLlama::Load((*model)->config(), (*model)->weights());
  if (!ref.ok()) {
    std::fprintf(stderr, "tpserve-reference-next: %s\n", ref.status().ToString().c_str());
    return 1;
  }
  const std::vector<double> logits = ref->Forward(ids);
  const int64_t vocab = (*model)->config().vocab_size;
  const double* last = logits.data() + (static_cast<int64_t>(ids.size()) - 1) * vocab;
  int64_t top1 = 0, top2 = -1;
  for (int64_t v = 1; v < vocab; ++v) {
    if (last[v] > last[top1]) {
      top2 = top1;
      top1 = v;
    } else if (top2 < 0 || last[v] > last[top2]) {
      top2 = v;
    }
  }
  std::printf("top1 %lld %.9g top2 %lld %.9g margin %.9g\n", static_cast<long long>(top1), last[top1],
              static_cast<long long>(top2), last[top2], last[top1] - last[top2]);
  return 0;
}
